//! Where results are saved and how a run result becomes a database row.

use std::path::{Path, PathBuf};

use anyhow::Context;
use powerlens_core::run::RunResult;
use powerlens_store::{NewResult, ResultsDb, RunRow, StoreError};

/// The default results database: `$XDG_DATA_HOME/powerlens/results.db`, else
/// `~/.local/share/powerlens/results.db`.
pub fn default_db_path() -> anyhow::Result<PathBuf> {
    let var = |name| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(data) = var("XDG_DATA_HOME") {
        return Ok(data.join("powerlens/results.db"));
    }
    let home = var("HOME").context(
        "neither XDG_DATA_HOME nor HOME is set: give the results database with --db PATH",
    )?;
    Ok(home.join(".local/share/powerlens/results.db"))
}

pub fn db_path(explicit: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    explicit.map(Ok).unwrap_or_else(default_db_path)
}

/// Opens (creating when missing) the results database at `path`; an error the place is
/// to blame for gets the flag that chooses another.
pub fn open_db(path: PathBuf) -> anyhow::Result<ResultsDb> {
    ResultsDb::open(path).map_err(with_db_flag)
}

/// Opens the existing results database at `path`, as [`open_db`] does.
pub fn open_existing_db(path: &Path) -> anyhow::Result<ResultsDb> {
    ResultsDb::open_existing(path).map_err(with_db_flag)
}

/// A results-database error whose fix is another file: the store names the problem, the
/// command line adds its flag (the library knows no flags).
fn with_db_flag(error: StoreError) -> anyhow::Error {
    let advice = match &error {
        StoreError::CreateDir { .. } => " (choose another place with --db PATH)",
        StoreError::CreateFile { .. } | StoreError::Open { .. } => {
            ", or choose another with --db PATH"
        }
        StoreError::NotOurs { .. } => " or choose another file with --db PATH",
        _ => return error.into(),
    };
    anyhow::Error::new(WithAdvice { error, advice })
}

/// An error with advice after its message; its causes are the error's own.
#[derive(Debug)]
struct WithAdvice {
    error: StoreError,
    advice: &'static str,
}

impl std::fmt::Display for WithAdvice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", self.error, self.advice)
    }
}

impl std::error::Error for WithAdvice {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}

/// Appends a run result; returns its id.
pub fn save_run(
    db: &mut ResultsDb,
    result: &RunResult,
    label: Option<String>,
) -> anyhow::Result<i64> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let row = NewResult {
        created_unix: now,
        kind: "run".into(),
        command: powerlens_report::run::shell_words(&result.command),
        label,
        complete: result.complete,
        provenance: result.provenance.label(),
        mean_wall_s: result.summary.as_ref().map(|s| s.wall_s.mean),
        mean_energy_j: result.summary.as_ref().map(|s| s.energy_j.mean),
        document: serde_json::to_string(result)?,
        runs: result
            .runs
            .iter()
            .map(|r| RunRow {
                wall_s: r.wall_s,
                cpu_s: r.cpu_s,
                energy_j: r.energy_j,
                power_w: r.power_w,
                exit_code: r.exit.code,
                signal: r.exit.signal,
                domains: serde_json::to_string(&r.domains).unwrap_or_else(|_| "{}".into()),
            })
            .collect(),
    };
    Ok(db.insert(&row)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The store names the problem and its cause, and the command line adds `--db`: the
    /// messages read as they did when the store named the flag itself.
    #[test]
    fn a_database_in_the_wrong_place_names_the_db_flag() {
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("notes.txt");
        std::fs::write(&text, "not a database, and longer than an SQLite header is").unwrap();
        let Err(e) = open_existing_db(&text) else {
            panic!("a text file opened as a results database")
        };
        assert_eq!(
            format!("{e:#}"),
            format!(
                "{} is not a powerlens results database (file is not a database); it was left untouched — move it aside or choose another file with --db PATH",
                text.display()
            )
        );
        let under_a_file = text.join("r.db");
        let Err(e) = open_db(under_a_file) else {
            panic!("a database under a file was opened")
        };
        let e = format!("{e:#}");
        let dir_error = format!(
            "cannot create the directory {} for the results database: ",
            text.display()
        );
        assert!(e.starts_with(&dir_error), "{e}");
        // The cause is said once, in the store's message, and the advice ends the line.
        assert!(
            e.ends_with(" (choose another place with --db PATH)"),
            "the cause, then the advice: {e}"
        );
        assert_eq!(
            e.matches("(os error").count(),
            1,
            "the cause said once: {e}"
        );
        // Errors another file would not fix get no advice.
        let e = StoreError::NoSuchResult {
            id: 3,
            path: text.clone(),
        };
        let plain = e.to_string();
        assert_eq!(with_db_flag(e).to_string(), plain);
    }
}
