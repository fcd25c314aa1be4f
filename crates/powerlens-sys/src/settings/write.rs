//! The one way settings touch files: whole-value writes to existing attributes.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::error::SettingsError;

/// One value a setting writes to a sysfs attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileWrite {
    /// The setting, as the user wrote it, for error messages.
    pub setting: String,
    /// Below the sysfs root of the [`Roots`](crate::Roots) the plan was built with.
    pub path: PathBuf,
    pub value: String,
}

/// Writes `text` to an existing attribute in one `write(2)` — sysfs takes a value per
/// write — truncating so that fixture files hold exactly `text`. Never creates the file: a
/// missing attribute is an error, not a new file in a fixture tree.
pub(crate) fn write_text(setting: &str, path: &Path, text: &str) -> Result<(), SettingsError> {
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .and_then(|mut file| file.write_all(text.as_bytes()))
        .map_err(|source| SettingsError::Write {
            setting: setting.to_string(),
            path: path.to_path_buf(),
            value: text.trim_end().to_string(),
            source,
        })
}

/// Fails with [`SettingsError::NotPermitted`] when this user may not open `path` for
/// writing. Opening writes nothing: sysfs acts on `write(2)`, not on `open(2)`.
pub(crate) fn probe_writable(setting: &str, path: &Path) -> Result<(), SettingsError> {
    match std::fs::OpenOptions::new().write(true).open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            Err(SettingsError::NotPermitted {
                setting: setting.to_string(),
                path: path.to_path_buf(),
            })
        }
        Err(e) => Err(SettingsError::Unsupported {
            setting: setting.to_string(),
            reason: format!("{} cannot be opened for writing: {e}", path.display()),
            fix: "check that the kernel offers this attribute as a writable file".to_string(),
        }),
    }
}
