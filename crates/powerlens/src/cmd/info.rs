//! `powerlens info`.

use std::process::ExitCode;

use clap::Args;

use crate::cli::GlobalArgs;

#[derive(Debug, Args)]
pub struct InfoArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn execute(_global: &GlobalArgs, _args: InfoArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("info: not written yet")
}
