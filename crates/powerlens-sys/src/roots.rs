//! Where the sysfs and procfs trees live. Overridable so that every reader can be tested
//! against a fixture tree (`POWERLENS_SYSFS_ROOT`, `POWERLENS_PROCFS_ROOT`).

use std::path::{Path, PathBuf};

use crate::SysError;

/// Environment variable naming the directory that stands in for `/sys`.
pub const SYSFS_ROOT_ENV: &str = "POWERLENS_SYSFS_ROOT";
/// Environment variable naming the directory that stands in for `/proc`.
pub const PROCFS_ROOT_ENV: &str = "POWERLENS_PROCFS_ROOT";

/// The roots of the sysfs and procfs trees every reader uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roots {
    pub sysfs: PathBuf,
    pub procfs: PathBuf,
}

impl Default for Roots {
    fn default() -> Self {
        Roots {
            sysfs: PathBuf::from("/sys"),
            procfs: PathBuf::from("/proc"),
        }
    }
}

impl Roots {
    /// Roots given explicitly; each must be an existing directory.
    pub fn new(sysfs: impl Into<PathBuf>, procfs: impl Into<PathBuf>) -> Result<Self, SysError> {
        let roots = Roots {
            sysfs: sysfs.into(),
            procfs: procfs.into(),
        };
        for (path, what) in [(&roots.sysfs, "sysfs"), (&roots.procfs, "procfs")] {
            if !path.is_dir() {
                return Err(SysError::MissingRoot {
                    path: path.clone(),
                    what,
                });
            }
        }
        Ok(roots)
    }

    /// Roots from optional overrides (command-line flags, which the CLI fills from the
    /// environment variables too), defaulting to `/sys` and `/proc`.
    pub fn with_overrides(
        sysfs: Option<PathBuf>,
        procfs: Option<PathBuf>,
    ) -> Result<Self, SysError> {
        let default = Roots::default();
        Roots::new(
            sysfs.unwrap_or(default.sysfs),
            procfs.unwrap_or(default.procfs),
        )
    }

    /// Roots from `POWERLENS_SYSFS_ROOT` / `POWERLENS_PROCFS_ROOT` (unset or empty: the real ones).
    pub fn from_env() -> Result<Self, SysError> {
        let var = |name| {
            std::env::var_os(name)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        Roots::with_overrides(var(SYSFS_ROOT_ENV), var(PROCFS_ROOT_ENV))
    }

    /// A path below the sysfs root, e.g. `sys("class/powercap")`.
    pub fn sys(&self, relative: impl AsRef<Path>) -> PathBuf {
        self.sysfs.join(relative)
    }

    /// A path below the procfs root, e.g. `proc("stat")`.
    pub fn proc(&self, relative: impl AsRef<Path>) -> PathBuf {
        self.procfs.join(relative)
    }

    /// True when both roots are the real ones, i.e. live hardware is being read.
    pub fn is_live(&self) -> bool {
        *self == Roots::default()
    }
}
