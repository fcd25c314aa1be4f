//! The flag table: every command, flag and help text. Help, the man page and the shell
//! completions are all generated from these definitions.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::cmd;

/// Application-centric CPU power and energy analyzer: how much energy a program costs to
/// retire its work, and why.
#[derive(Debug, Parser)]
#[command(name = "powerlens", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,

    #[command(subcommand)]
    pub command: Command,
}

/// Options every command understands.
#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// Read sysfs from this directory instead of /sys (for fixture trees and tests).
    #[arg(long, global = true, env = "POWERLENS_SYSFS_ROOT", value_name = "DIR")]
    pub sysfs_root: Option<PathBuf>,

    /// Read procfs from this directory instead of /proc.
    #[arg(long, global = true, env = "POWERLENS_PROCFS_ROOT", value_name = "DIR")]
    pub procfs_root: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// What this machine offers: topology, idle and frequency control, energy sources, perf access.
    Info(cmd::info::InfoArgs),
    /// Wide-vector (AVX2/AVX-512) frequency licenses: break-even, policy simulation, power score.
    #[command(long_about = cmd::dvfs::LONG_ABOUT)]
    Dvfs(cmd::dvfs::DvfsArgs),
}
