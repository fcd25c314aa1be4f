//! Errors of system settings. Each names the setting (or the token of the settings text),
//! the file where one is involved, and the fix. None names a command-line flag: the
//! command line says which `--config` a setting came from.

use std::path::PathBuf;

use crate::SysError;

/// The forms of every setting, listed when a token is not one of them.
pub const VALID_SETTINGS: &str = "governor=NAME, epp=NAME, min_freq=FREQ, max_freq=FREQ \
     (e.g. 1.2GHz, 2000MHz), turbo=on|off, cstate.NAME=on|off, cstates=NAME[,NAME…], \
     pm_qos=LATENCY (e.g. 20us), cpus=LIST (e.g. 0-3,6)";

/// The fix for a file or device only root may write.
pub const ROOT_FIX: &str = "run powerlens as root (sudo powerlens …)";

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// The settings text (what follows `--config NAME=`) does not parse.
    #[error("setting `{token}`: {reason}")]
    Syntax { token: String, reason: String },

    /// This machine has no way to apply the setting.
    #[error("{setting} cannot be applied: {reason} (fix: {fix})")]
    Unsupported {
        setting: String,
        reason: String,
        fix: String,
    },

    /// The value is not one this machine offers.
    #[error("{setting} cannot be applied: {reason}; valid here: {}", valid.join(", "))]
    InvalidValue {
        setting: String,
        reason: String,
        valid: Vec<String>,
    },

    /// Two settings of one configuration write the same file.
    #[error("{first} and {second} both set {path}: keep one of them")]
    Conflict {
        first: String,
        second: String,
        path: PathBuf,
    },

    /// This user may not write the file (or device) the setting needs.
    #[error("{setting} cannot be applied: {path} is not writable by this user (fix: {ROOT_FIX})")]
    NotPermitted { setting: String, path: PathBuf },

    /// Reading a file the setting depends on failed.
    #[error("{setting}: {source}")]
    Read {
        setting: String,
        #[source]
        source: SysError,
    },

    /// Writing a value failed.
    #[error("{setting}: writing {value:?} to {path} failed: {source}")]
    Write {
        setting: String,
        path: PathBuf,
        value: String,
        #[source]
        source: std::io::Error,
    },

    /// The journal of original values cannot be written, read or removed, or is in the way.
    #[error("settings journal {path}: {reason} (fix: {fix})")]
    Journal {
        path: PathBuf,
        reason: String,
        fix: String,
    },

    /// A write failed and undoing the writes before it failed too.
    #[error("{cause}; undoing the settings applied before it also failed ({}), so the original values stay in {}: run `powerlens restore`",
        failures.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "), journal.display())]
    RollbackFailed {
        cause: Box<SettingsError>,
        failures: Vec<SettingsError>,
        journal: PathBuf,
    },
}

impl SettingsError {
    pub(crate) fn syntax(token: &str, reason: impl Into<String>) -> Self {
        SettingsError::Syntax {
            token: token.to_string(),
            reason: reason.into(),
        }
    }

    /// A reader's error for `setting`: what the machine lacks becomes [`Unsupported`]
    /// with the reader's reason and fix; anything else is a failed read.
    ///
    /// [`Unsupported`]: SettingsError::Unsupported
    pub(crate) fn from_sys(setting: &str, source: SysError) -> Self {
        match source {
            SysError::Unavailable { reason, fix, .. } => SettingsError::Unsupported {
                setting: setting.to_string(),
                reason,
                fix: fix.unwrap_or_else(|| "none on this machine".to_string()),
            },
            source => SettingsError::Read {
                setting: setting.to_string(),
                source,
            },
        }
    }
}
