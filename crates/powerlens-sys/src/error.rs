//! Typed errors of the sources. Each names the path and, where one exists, the fix.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SysError {
    #[error("the {what} root {path} does not exist or is not a directory (check --{what}-root or POWERLENS_{upper}_ROOT)", upper = what.to_uppercase())]
    MissingRoot { path: PathBuf, what: &'static str },

    #[error("{path} does not exist")]
    NotFound { path: PathBuf },

    #[error("permission denied reading {path}: {fix}")]
    PermissionDenied { path: PathBuf, fix: String },

    #[error("cannot parse {path}: expected {expected}, found {found:?}")]
    Parse {
        path: PathBuf,
        expected: &'static str,
        found: String,
    },

    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("{what} is unavailable: {reason}{}", fix.as_ref().map(|f| format!(" (fix: {f})")).unwrap_or_default())]
    Unavailable {
        what: String,
        reason: String,
        fix: Option<String>,
    },
}

impl SysError {
    /// Maps an I/O error on `path` to the matching variant. `permission_fix` says how to get
    /// access when the error is EACCES/EPERM.
    pub fn from_io(path: impl Into<PathBuf>, err: std::io::Error, permission_fix: &str) -> Self {
        let path = path.into();
        match err.kind() {
            std::io::ErrorKind::NotFound => SysError::NotFound { path },
            std::io::ErrorKind::PermissionDenied => SysError::PermissionDenied {
                path,
                fix: permission_fix.to_string(),
            },
            _ => SysError::Io { path, source: err },
        }
    }

    /// True when the error means "not present" rather than "present but broken".
    pub fn is_not_found(&self) -> bool {
        matches!(self, SysError::NotFound { .. })
    }
}
