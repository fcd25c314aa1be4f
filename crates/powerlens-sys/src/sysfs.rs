//! Small helpers to read sysfs/procfs attribute files.

use std::path::{Path, PathBuf};

use crate::SysError;

/// The generic fix for a file only root can read.
pub const ROOT_FIX: &str = "run as root (sudo)";

/// Reads a whole attribute file, trimmed of the trailing newline.
pub fn read_string(path: impl AsRef<Path>) -> Result<String, SysError> {
    read_string_with_fix(path, ROOT_FIX)
}

/// Like [`read_string`], with a specific fix to report when permission is denied.
pub fn read_string_with_fix(
    path: impl AsRef<Path>,
    permission_fix: &str,
) -> Result<String, SysError> {
    let path = path.as_ref();
    std::fs::read_to_string(path)
        .map(|s| s.trim_end_matches(['\n', '\r']).to_string())
        .map_err(|e| SysError::from_io(path, e, permission_fix))
}

/// Reads an attribute holding one unsigned integer.
pub fn read_u64(path: impl AsRef<Path>) -> Result<u64, SysError> {
    read_u64_with_fix(path, ROOT_FIX)
}

/// Like [`read_u64`], with a specific fix to report when permission is denied.
pub fn read_u64_with_fix(path: impl AsRef<Path>, permission_fix: &str) -> Result<u64, SysError> {
    let path = path.as_ref();
    let text = read_string_with_fix(path, permission_fix)?;
    text.trim().parse().map_err(|_| SysError::Parse {
        path: path.to_path_buf(),
        expected: "an unsigned integer",
        found: text,
    })
}

/// Reads an attribute holding one signed integer (e.g. `perf_event_paranoid`).
pub fn read_i64(path: impl AsRef<Path>) -> Result<i64, SysError> {
    let path = path.as_ref();
    let text = read_string(path)?;
    text.trim().parse().map_err(|_| SysError::Parse {
        path: path.to_path_buf(),
        expected: "an integer",
        found: text,
    })
}

/// Reads an optional attribute: `Ok(None)` when the file does not exist.
pub fn read_optional_string(path: impl AsRef<Path>) -> Result<Option<String>, SysError> {
    match read_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Reads an optional integer attribute: `Ok(None)` when the file does not exist.
pub fn read_optional_u64(path: impl AsRef<Path>) -> Result<Option<u64>, SysError> {
    match read_u64(path) {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// The entries of a directory, sorted by path; empty when the directory does not exist
/// (a class with no devices, a CPU without cpuidle).
pub fn list_dir(dir: impl AsRef<Path>) -> Result<Vec<PathBuf>, SysError> {
    let dir = dir.as_ref();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(SysError::from_io(dir, e, ROOT_FIX)),
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    paths.sort();
    Ok(paths)
}

/// The entries of `dir` named `<prefix>N<suffix>` (e.g. `state3`, `energy2_input`), sorted
/// by N, so that `state10` comes after `state2`; empty when `dir` does not exist.
pub fn numbered_entries(
    dir: impl AsRef<Path>,
    prefix: &str,
    suffix: &str,
) -> Result<Vec<(u32, PathBuf)>, SysError> {
    let mut numbered: Vec<(u32, PathBuf)> = list_dir(dir)?
        .into_iter()
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?;
            let n = name
                .strip_prefix(prefix)?
                .strip_suffix(suffix)?
                .parse()
                .ok()?;
            Some((n, path))
        })
        .collect();
    numbered.sort();
    Ok(numbered)
}

/// The highest CPU number a CPU list may name. Linux builds for at most 8192 CPUs; a list
/// beyond this is damaged, and `0-4294967295` asked for 16 GiB (found by fuzzing).
pub const MAX_CPU: u32 = 65_535;

/// Parses a kernel CPU list such as `0-3,6,8-9` into CPU numbers, each at most [`MAX_CPU`].
pub fn parse_cpu_list(text: &str) -> Option<Vec<u32>> {
    let cpu = |s: &str| s.trim().parse::<u32>().ok().filter(|&n| n <= MAX_CPU);
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (cpu(a)?, cpu(b)?);
                if a > b {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(cpu(part)?),
        }
    }
    Some(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-3,6,8-9\n"),
            Some(vec![0, 1, 2, 3, 6, 8, 9])
        );
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
        // Regression (fuzz/regressions/config/cpus-0-3922375807): 15 GiB for one range.
        assert_eq!(parse_cpu_list("0-3922375807"), None);
        assert_eq!(parse_cpu_list("65536"), None);
        assert_eq!(parse_cpu_list("65534-65535"), Some(vec![65534, 65535]));
    }

    #[test]
    fn integer_files_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("good");
        std::fs::write(&good, "12345\n").unwrap();
        assert_eq!(read_u64(&good).unwrap(), 12345);
        let bad = dir.path().join("bad");
        std::fs::write(&bad, "12a\n").unwrap();
        let err = read_u64(&bad).unwrap_err().to_string();
        assert!(err.contains("bad") && err.contains("12a"), "{err}");
        let missing = dir.path().join("missing");
        assert!(read_u64(&missing).unwrap_err().is_not_found());
        assert_eq!(read_optional_u64(&missing).unwrap(), None);
        assert_eq!(read_optional_u64(&good).unwrap(), Some(12345));
        assert_eq!(read_optional_string(&missing).unwrap(), None);
    }

    #[test]
    fn numbered_entries_sort_by_number() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "state10",
            "state2",
            "stateX",
            "other1",
            "energy1_input",
            "energy1_label",
        ] {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        let states = numbered_entries(dir.path(), "state", "").unwrap();
        let numbers: Vec<u32> = states.iter().map(|(n, _)| *n).collect();
        assert_eq!(numbers, [2, 10]);
        assert!(states[1].1.ends_with("state10"));
        assert_eq!(
            numbered_entries(dir.path(), "energy", "_input")
                .unwrap()
                .len(),
            1
        );
        assert!(list_dir(dir.path().join("missing")).unwrap().is_empty());
    }
}
