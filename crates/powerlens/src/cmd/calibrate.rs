//! `powerlens calibrate`: fit the power model's parameters on a machine with a meter.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;
use powerlens_core::model;
use powerlens_core::provenance::Provenance;
use powerlens_sys::procfs;

use crate::args::GlobalArgs;
use crate::cmd::run::MeterArgs;
use crate::progress;
use crate::units::parse_positive_duration;
use powerlens_record::meter::Meter;
use powerlens_record::{exec, interrupt};

#[derive(Debug, Args)]
#[command(after_long_help = "\
Runs the built-in spin workload on 0, 1, … N CPUs (0 = idle), measures the average power
at each level with this machine's meter, and fits power = idle_w + busy_cpu_w × busy CPUs
by least squares, with the busy CPUs read from /proc/stat (not assumed). The resulting
JSON file is what --power-model loads on machines without a meter (e.g. a VM on this host).

Example:
  powerlens calibrate --duration 5s -o ~/.config/powerlens/model.json")]
pub struct CalibrateArgs {
    /// How long to hold each load level.
    #[arg(long, default_value = "3s", value_parser = parse_positive_duration)]
    pub duration: Duration,

    /// Highest number of busy CPUs [default: all online CPUs].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_cpus: Option<u32>,

    /// Write the fitted model (JSON) to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Print the levels and the fit as JSON.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub meter: MeterArgs,
}

pub fn execute(global: &GlobalArgs, args: CalibrateArgs) -> anyhow::Result<ExitCode> {
    let roots = global.roots()?;
    let meter = Meter::open(&roots, &args.meter.options())?;
    if let Provenance::Estimated { .. } = meter.provenance() {
        let reasons: Vec<String> = meter
            .statuses
            .iter()
            .map(|s| {
                format!(
                    "  {}: {}{}",
                    s.name,
                    s.reason,
                    s.fix
                        .as_ref()
                        .map(|f| format!(" (fix: {f})"))
                        .unwrap_or_default()
                )
            })
            .collect();
        bail!(
            "calibrate needs an energy meter and none can be read here:\n{}\nrun it on a machine with RAPL (or a battery/hwmon sensor), then pass the model to this one with --power-model FILE",
            reasons.join("\n")
        );
    }
    eprintln!("{}", meter.describe());
    interrupt::install();
    let cpus = args.max_cpus.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get() as u32)
            .unwrap_or(1)
    });
    let exe = std::env::current_exe().context("locating the powerlens executable")?;
    let bar = progress::bar(cpus as u64 + 1, "calibrate");
    let mut points = Vec::new();
    for busy in 0..=cpus {
        bar.set_message(format!("{busy} busy CPU(s)"));
        let argv: Vec<String> = if busy == 0 {
            vec!["sleep".into(), format!("{}", args.duration.as_secs_f64())]
        } else {
            vec![
                exe.display().to_string(),
                "workload".into(),
                "spin".into(),
                "--quiet".into(),
                "--threads".into(),
                busy.to_string(),
                "--duration".into(),
                format!("{}s", args.duration.as_secs_f64()),
            ]
        };
        let stat_before = procfs::read_cpu_times(&roots)?;
        let before = meter.read()?;
        let outcome = exec::run(&argv, false, None, &[])?;
        let after = meter.read()?;
        let stat_after = procfs::read_cpu_times(&roots)?;
        if interrupt::interrupted() {
            bail!("interrupted: no model written");
        }
        if !outcome.exit.success() {
            bail!(
                "the load at {busy} CPU(s) failed ({})",
                outcome.exit.describe()
            );
        }
        let seconds = after.at.duration_since(before.at).as_secs_f64();
        let busy_cpus = stat_after.busy_since(&stat_before) / seconds;
        points.push((busy_cpus, meter.average_power_w(&before, &after)));
        bar.inc(1);
    }
    bar.finish_and_clear();
    // The measured levels first: when the fit fails, they are what the user needs to see.
    eprintln!("busy CPUs  power W");
    for (b, w) in &points {
        eprintln!("{b:9.2}  {w:7.2}");
    }
    let held: Vec<f64> = (0..=cpus).map(f64::from).collect();
    model::check_levels(&points, &held)?;
    let fit = model::fit(
        &points,
        &format!("powerlens calibrate with {}", meter.provenance().label()),
    )?;
    let model_json = serde_json::to_string_pretty(&fit.model)?;
    if args.json {
        let levels: Vec<serde_json::Value> = points
            .iter()
            .map(|(b, w)| serde_json::json!({"busy_cpus": b, "power_w": w}))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "levels": levels, "model": fit.model, "r_squared": fit.r_squared
            }))?
        );
    } else {
        eprintln!(
            "fit: {:.2} W idle + {:.2} W per busy CPU (R² = {:.4})",
            fit.model.idle_w, fit.model.busy_cpu_w, fit.r_squared
        );
    }
    match &args.output {
        Some(path) => {
            std::fs::write(path, model_json + "\n")
                .with_context(|| format!("writing {}", path.display()))?;
            eprintln!(
                "model written to {} (use it with --power-model {})",
                path.display(),
                path.display()
            );
        }
        None if !args.json => println!("{model_json}"),
        None => {}
    }
    Ok(ExitCode::SUCCESS)
}
