//! `powerlens info`: what this machine offers, each item available or not with the reason
//! and the fix.

use std::process::ExitCode;

use clap::Args;
use powerlens_sys::machine::MachineInfo;

use crate::cli::GlobalArgs;

#[derive(Debug, Args)]
pub struct InfoArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn execute(global: &GlobalArgs, args: InfoArgs) -> anyhow::Result<ExitCode> {
    let roots = global.roots()?;
    let info = MachineInfo::collect(&roots);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&info)?);
    } else {
        print!("{}", powerlens_report::info::render_info(&info));
    }
    Ok(ExitCode::SUCCESS)
}
