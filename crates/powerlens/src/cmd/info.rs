//! `powerlens info`: what this machine offers, each item available or not with the reason
//! and the fix.

use std::process::ExitCode;

use clap::Args;
use powerlens_sys::machine::MachineInfo;

use crate::args::GlobalArgs;

#[derive(Debug, Args)]
#[command(after_long_help = "\
Examples:
  powerlens info                          # every source, available or not, with the fix
  powerlens info --json | jq .power_model # the model estimates would use, its class and why
  powerlens info --json > target.json     # the idle states, for `report --target target.json`

Without a meter (RAPL, perf power, battery, hwmon) energy is estimated by a power model
chosen for the kind of machine: server or any VM (per vCPU), desktop (per thread), laptop,
or unknown, from the CPU model and flags, the DMI chassis type and the batteries. The
\"Power model\" section says which model, for which class and why (docs/ENERGY.md).")]
pub struct InfoArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,

    /// Power model parameters to show instead of the one chosen for this machine's class
    /// (as `run --power-model`).
    #[arg(long, value_name = "FILE", env = "POWERLENS_POWER_MODEL")]
    pub power_model: Option<std::path::PathBuf>,
}

pub fn execute(global: &GlobalArgs, args: InfoArgs) -> anyhow::Result<ExitCode> {
    let roots = global.roots()?;
    let mut info = MachineInfo::collect(&roots);
    let file = args.power_model.as_deref();
    let model = powerlens_record::meter::load_model(file, &roots)?;
    info.energy_sources
        .push(powerlens_record::meter::model_status(&model));
    if args.json {
        // The model estimates would use, with the class it was chosen for and why (absent
        // when a file gave it): `file` says which file.
        let mut json = serde_json::to_value(&info)?;
        let mut power_model = serde_json::to_value(&model)?;
        power_model["file"] = serde_json::json!(file.map(|f| f.display().to_string()));
        json["power_model"] = power_model;
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        print!(
            "{}",
            powerlens_report::info::render_info(
                &info,
                &powerlens_report::info::ModelChoice {
                    model: &model,
                    file
                }
            )
        );
    }
    Ok(ExitCode::SUCCESS)
}
