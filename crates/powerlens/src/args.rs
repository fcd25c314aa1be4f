//! The options every command shares, apart from the command table (`cli.rs`) so that the
//! commands depend on them without depending on the table that names the commands.

use std::path::PathBuf;

use clap::Args;
use powerlens_sys::Roots;

/// Options every command understands.
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// Read sysfs from this directory instead of /sys (for fixture trees and tests).
    #[arg(long, global = true, env = "POWERLENS_SYSFS_ROOT", value_name = "DIR",
          help_heading = TESTING_HEADING)]
    pub sysfs_root: Option<PathBuf>,

    /// Read procfs from this directory instead of /proc (for fixture trees and tests).
    #[arg(long, global = true, env = "POWERLENS_PROCFS_ROOT", value_name = "DIR",
          help_heading = TESTING_HEADING)]
    pub procfs_root: Option<PathBuf>,
}

/// The help heading of the options that only fixture trees and tests need, so that every
/// command's own options come first, together.
const TESTING_HEADING: &str = "Testing";

impl GlobalArgs {
    /// The sysfs/procfs roots every reader uses.
    pub fn roots(&self) -> anyhow::Result<Roots> {
        Ok(Roots::with_overrides(
            self.sysfs_root.clone(),
            self.procfs_root.clone(),
        )?)
    }
}
