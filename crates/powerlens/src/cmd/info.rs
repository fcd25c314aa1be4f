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

    /// Power model parameters to show as the fallback source (as `run --power-model`).
    #[arg(long, value_name = "FILE", env = "POWERLENS_POWER_MODEL")]
    pub power_model: Option<std::path::PathBuf>,
}

pub fn execute(global: &GlobalArgs, args: InfoArgs) -> anyhow::Result<ExitCode> {
    let roots = global.roots()?;
    let mut info = MachineInfo::collect(&roots);
    info.energy_sources
        .push(powerlens_record::meter::model_status(
            args.power_model.as_deref(),
        )?);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&info)?);
    } else {
        print!("{}", powerlens_report::info::render_info(&info));
    }
    Ok(ExitCode::SUCCESS)
}
