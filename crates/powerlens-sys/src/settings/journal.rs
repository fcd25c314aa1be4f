//! The journal of original values: written before the first setting changes, removed after
//! the last one is restored. One left behind means powerlens died (SIGKILL, power loss of
//! the session, a panic that aborted) with settings applied; [`restore_from_journal`] puts
//! the original values back (`powerlens restore`).
//!
//! One journal per path: while one exists, [`apply`](super::apply) refuses to start, so
//! that a second run never records the first one's settings as "original".

use std::io::Write;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::SettingsError;
use super::write::write_text;
use crate::{Roots, SysError};

/// Environment variable naming the journal file instead of the default.
pub const JOURNAL_ENV: &str = "POWERLENS_SETTINGS_JOURNAL";

const FILE_NAME: &str = "settings-journal.json";
const FORMAT: &str = "powerlens settings journal v1";

/// `$POWERLENS_SETTINGS_JOURNAL`, else `$XDG_RUNTIME_DIR/powerlens/settings-journal.json`,
/// else `/run/powerlens/settings-journal.json`. Both directories are tmpfs: a reboot, which
/// resets every setting anyway, also clears the journal.
pub fn default_journal_path() -> PathBuf {
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(path) = var(JOURNAL_ENV) {
        return PathBuf::from(path);
    }
    let runtime = var("XDG_RUNTIME_DIR").map_or_else(|| PathBuf::from("/run"), PathBuf::from);
    runtime.join("powerlens").join(FILE_NAME)
}

/// The original value of one attribute.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Original {
    /// The setting that changes it, as the user wrote it.
    pub setting: String,
    pub path: PathBuf,
    /// The file's content exactly as read, trailing newline included.
    pub value: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct Journal {
    format: String,
    /// The process that applied the settings, and when it started (see [`start_time`]).
    pid: u32,
    start_time: Option<u64>,
    /// The sysfs root the paths are under; restoring needs the same one.
    sysfs_root: PathBuf,
    /// In the order the settings are applied; restored backwards.
    originals: Vec<Original>,
}

fn journal_error(path: &Path, reason: impl Into<String>, fix: impl Into<String>) -> SettingsError {
    SettingsError::Journal {
        path: path.to_path_buf(),
        reason: reason.into(),
        fix: fix.into(),
    }
}

/// The start time of a running process (clock ticks after boot, field 22 of
/// `/proc/PID/stat`); `None` when none runs with that pid, or only its zombie. Together
/// with the pid it tells the writer of a journal from a later process that reused its pid.
/// The real `/proc`, not a fixture root: this is about processes of this machine.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    if fields.first() == Some(&"Z") {
        return None;
    }
    fields.get(19)?.parse().ok()
}

/// Whether the process that wrote the journal still runs.
fn writer_running(journal: &Journal) -> bool {
    start_time(journal.pid).is_some_and(|t| journal.start_time.is_none_or(|s| s == t))
}

fn read(path: &Path) -> Result<Journal, SettingsError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        journal_error(
            path,
            format!("cannot be read: {e}"),
            "run powerlens as root (sudo)",
        )
    })?;
    let journal: Journal = serde_json::from_str(&text).map_err(|e| {
        journal_error(
            path,
            format!("is not a powerlens settings journal: {e}"),
            "restore the settings it names by hand, then delete it",
        )
    })?;
    if journal.format != FORMAT {
        return Err(journal_error(
            path,
            format!(
                "has format {:?}, this powerlens reads {FORMAT:?}",
                journal.format
            ),
            "restore it with the powerlens version that wrote it",
        ));
    }
    Ok(journal)
}

/// Refuses when a journal is already at `path`: its settings are not restored yet.
pub(crate) fn refuse_existing(path: &Path) -> Result<(), SettingsError> {
    if !path.exists() {
        return Ok(());
    }
    let journal = read(path)?;
    let (reason, fix) = if journal.pid == std::process::id() {
        (
            "this process has settings applied already".to_string(),
            "restore (drop) the applied settings before applying others".to_string(),
        )
    } else if writer_running(&journal) {
        (
            format!(
                "powerlens (pid {}) has settings applied right now",
                journal.pid
            ),
            format!("wait for it to finish, or give this run another journal with {JOURNAL_ENV}"),
        )
    } else {
        (
            format!(
                "powerlens (pid {}) ended without restoring the settings it applied",
                journal.pid
            ),
            "run `powerlens restore` to put the original values back".to_string(),
        )
    };
    Err(journal_error(path, reason, fix))
}

/// Writes the journal, durably, before anything changes. Refuses when one exists.
pub(crate) fn create(
    path: &Path,
    roots: &Roots,
    originals: &[Original],
) -> Result<(), SettingsError> {
    refuse_existing(path)?;
    let journal = Journal {
        format: FORMAT.to_string(),
        pid: std::process::id(),
        start_time: start_time(std::process::id()),
        sysfs_root: roots.sysfs.clone(),
        originals: originals.to_vec(),
    };
    let text = serde_json::to_string_pretty(&journal).map_err(|e| {
        journal_error(
            path,
            format!("cannot hold these paths: {e}"),
            "use a sysfs root whose path is valid UTF-8",
        )
    })?;
    let write = || -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        // create_new: two powerlens processes racing for one journal cannot both win.
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()
    };
    write().map_err(|e| {
        journal_error(
            path,
            format!("cannot be written: {e}"),
            format!("run as root, or point {JOURNAL_ENV} at a writable file"),
        )
    })
}

pub(crate) fn remove(path: &Path) -> Result<(), SettingsError> {
    std::fs::remove_file(path).map_err(|e| {
        journal_error(
            path,
            format!("the settings are restored but the journal cannot be removed: {e}"),
            "delete the file",
        )
    })
}

/// Reads the current content of each attribute a plan writes.
pub(crate) fn read_original(setting: &str, path: &Path) -> Result<Original, SettingsError> {
    let value = std::fs::read_to_string(path).map_err(|e| {
        SettingsError::from_sys(setting, SysError::from_io(path, e, crate::sysfs::ROOT_FIX))
    })?;
    Ok(Original {
        setting: setting.to_string(),
        path: path.to_path_buf(),
        value,
    })
}

/// Writes the original values back, last applied first, going on past failures so that
/// as much as possible is restored; returns the failures.
pub(crate) fn write_back(originals: &[Original]) -> Vec<SettingsError> {
    originals
        .iter()
        .rev()
        .filter_map(|o| write_text(&o.setting, &o.path, &o.value).err())
        .collect()
}

/// Restores the settings a journal records and removes it; returns how many values were
/// written back (0 when there is no journal at `path`). Refuses while the process that
/// wrote it still runs (it restores them itself when it ends), and when `roots` is not the
/// sysfs root the journal was written for. On failures the journal stays, for a retry.
pub fn restore_from_journal(roots: &Roots, path: &Path) -> Result<usize, Vec<SettingsError>> {
    if !path.exists() {
        return Ok(0);
    }
    let journal = read(path).map_err(|e| vec![e])?;
    if journal.pid != std::process::id() && writer_running(&journal) {
        return Err(vec![journal_error(
            path,
            format!(
                "powerlens (pid {}) that applied these settings is still running",
                journal.pid
            ),
            "let it finish: it restores them itself, also on Ctrl-C",
        )]);
    }
    if journal.sysfs_root != roots.sysfs {
        return Err(vec![journal_error(
            path,
            format!(
                "was written for sysfs root {}",
                journal.sysfs_root.display()
            ),
            format!("restore with --sysfs-root {}", journal.sysfs_root.display()),
        )]);
    }
    // Only attributes below the sysfs root, whatever the file says.
    let outside = journal.originals.iter().find(|o| {
        !o.path.starts_with(&roots.sysfs) || o.path.components().any(|c| c == Component::ParentDir)
    });
    if let Some(o) = outside {
        return Err(vec![journal_error(
            path,
            format!(
                "names {}, which is not below the sysfs root",
                o.path.display()
            ),
            "check the file: powerlens never writes one like that",
        )]);
    }
    let failures = write_back(&journal.originals);
    if !failures.is_empty() {
        return Err(failures);
    }
    remove(path).map_err(|e| vec![e])?;
    Ok(journal.originals.len())
}

/// Test support: makes the journal at `path` look left behind by a process that has ended,
/// as after a SIGKILL, so that a test can restore it in-process. Panics on I/O errors.
#[cfg(any(test, feature = "fixtures"))]
pub fn orphan_for_test(path: &Path) -> u32 {
    let mut child = std::process::Command::new("true")
        .spawn()
        .expect("spawn true");
    let dead = child.id();
    child.wait().expect("wait for true");
    let mut journal = read(path).expect("a journal to orphan");
    journal.pid = dead;
    let text = serde_json::to_string_pretty(&journal).expect("a journal serializes");
    std::fs::write(path, text).expect("rewrite the journal");
    dead
}

#[cfg(test)]
mod tests {
    use super::*;

    fn journal_of(pid: u32, start_time: Option<u64>) -> Journal {
        Journal {
            format: FORMAT.to_string(),
            pid,
            start_time,
            sysfs_root: PathBuf::from("/sys"),
            originals: Vec::new(),
        }
    }

    #[test]
    fn a_reused_pid_is_not_the_writer() {
        let parent = std::os::unix::process::parent_id();
        let started = start_time(parent).expect("the parent runs");
        assert!(writer_running(&journal_of(parent, Some(started))));
        // Same pid, other start time: a later process that got the writer's pid.
        assert!(!writer_running(&journal_of(parent, Some(started + 1))));

        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert_eq!(start_time(pid), None, "a reaped process does not run");
        assert!(!writer_running(&journal_of(pid, None)));
    }
}
