//! `powerlens demo`: the main job on built-in workloads — how much energy each costs to
//! retire its work, and a plain verdict — on any machine, meter or not.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use powerlens_core::run::RunResult;
use powerlens_core::verdict::{self, Ratios};
use powerlens_report::table::{sig, Table};
use serde::Serialize;

use crate::cli::GlobalArgs;
use crate::cmd::run::MeterArgs;
use crate::meter::Meter;
use crate::runner::{self, SeriesOptions};
use crate::units::parse_positive_duration;
use crate::{interrupt, progress};

#[derive(Debug, Args)]
#[command(after_long_help = "\
Measures four built-in workloads with `run`:
  spin on 1 CPU and on every CPU      what each busy CPU costs (the scheduler power study)
  sleepy with 1 ms and 100 ms periods what frequent wake-ups cost for the same work
and prints the table and a verdict for each pair. Without an energy meter (virtual
machines) the figures are estimates from the power model and are labelled so.")]
pub struct DemoArgs {
    /// Measured runs per workload.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,

    /// How long each workload runs.
    #[arg(long, default_value = "1s", value_parser = parse_positive_duration)]
    pub duration: Duration,

    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,

    #[command(flatten)]
    pub meter: MeterArgs,
}

#[derive(Debug, Serialize)]
struct Scenario {
    name: String,
    result: RunResult,
}

#[derive(Debug, Serialize)]
struct Verdict {
    baseline: String,
    candidate: String,
    ratios: Ratios,
    class: verdict::VerdictClass,
    sentence: String,
}

pub fn execute(global: &GlobalArgs, args: DemoArgs) -> anyhow::Result<ExitCode> {
    let roots = global.roots()?;
    let meter = Meter::open(&roots, &args.meter.options())?;
    eprintln!("{}", meter.describe());
    interrupt::install();
    let exe = std::env::current_exe().context("locating the powerlens executable")?;
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let duration = format!("{}s", args.duration.as_secs_f64());
    let workload = |extra: &[&str]| -> Vec<String> {
        let mut argv = vec![exe.display().to_string(), "workload".into()];
        argv.extend(extra.iter().map(|s| s.to_string()));
        argv.extend([
            "--duration".to_string(),
            duration.clone(),
            "--quiet".to_string(),
        ]);
        argv
    };
    let all = cpus.to_string();
    let plan: Vec<(String, Vec<String>)> = vec![
        ("spin, 1 CPU".into(), workload(&["spin", "--threads", "1"])),
        (
            format!("spin, {cpus} CPUs"),
            workload(&["spin", "--threads", &all]),
        ),
        (
            "sleepy, 1 ms period".into(),
            workload(&["sleepy", "--period", "1ms"]),
        ),
        (
            "sleepy, 100 ms period".into(),
            workload(&["sleepy", "--period", "100ms"]),
        ),
    ];
    let options = SeriesOptions {
        runs: args.runs as usize,
        warmup: 0,
        prepare: None,
        window: None,
        ignore_failure: false,
        show_output: false,
    };
    let bar = progress::bar((plan.len() * options.runs) as u64, "demo");
    let mut scenarios = Vec::new();
    for (name, argv) in plan {
        bar.set_prefix(name.clone());
        let series = runner::run_series(&meter, &argv, &options, &bar)?;
        let result = RunResult::new(
            argv,
            meter.provenance(),
            None,
            None,
            series.measurements,
            Vec::new(),
            series.stopped_early.clone(),
        );
        scenarios.push(Scenario { name, result });
        if let Some(why) = series.stopped_early {
            bar.finish_and_clear();
            anyhow::bail!("the demo stopped: {why}");
        }
    }
    bar.finish_and_clear();

    let verdicts: Vec<Verdict> = [(0, 1), (3, 2)]
        .iter()
        .filter_map(|&(b, c)| {
            let (base, cand) = (&scenarios[b], &scenarios[c]);
            let ratios = Ratios::of(base.result.summary.as_ref()?, cand.result.summary.as_ref()?);
            Some(Verdict {
                baseline: base.name.clone(),
                candidate: cand.name.clone(),
                class: verdict::classify(&ratios),
                sentence: format!(
                    "Against {}: {}",
                    base.name,
                    verdict::sentence(&cand.name, &ratios)
                ),
                ratios,
            })
        })
        .collect();

    if args.json {
        let doc = serde_json::json!({
            "provenance": meter.provenance(),
            "scenarios": scenarios,
            "verdicts": verdicts,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("energy: {}\n", meter.provenance().label());
    let mut t = Table::new([
        "workload",
        "wall s",
        "CPU s",
        "energy J",
        "± 95% CI",
        "power W",
        "EDP J·s",
    ]);
    for s in &scenarios {
        if let Some(sum) = &s.result.summary {
            let half = sum
                .energy_j
                .ci95
                .map(|[lo, hi]| sig((hi - lo) / 2.0, 2))
                .unwrap_or_else(|| "n/a".into());
            t.row([
                s.name.clone(),
                sig(sum.wall_s.mean, 4),
                sig(sum.cpu_s.mean, 3),
                sig(sum.energy_j.mean, 4),
                half,
                sig(sum.power_w.mean, 4),
                sig(sum.edp_js.mean, 4),
            ]);
        }
    }
    print!("{}", t.render());
    println!();
    for v in &verdicts {
        println!("{}", v.sentence);
    }
    if meter.provenance().is_estimate() {
        println!(
            "\nThese are ESTIMATES from the power model ({}), because no meter can be read here; `powerlens info` says why and how to fix it.",
            meter.provenance().label()
        );
    }
    Ok(ExitCode::SUCCESS)
}
