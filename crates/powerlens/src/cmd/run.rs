//! `powerlens run`: the energy to retire a workload.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use powerlens_core::run::RunResult;
use powerlens_store::ResultsDb;

use crate::cli::GlobalArgs;
use crate::meter::{Meter, MeterOptions};
use crate::runner::{self, SeriesOptions};
use crate::units::parse_duration;
use crate::{interrupt, progress, results};

/// Exit code when the user interrupted the series (as shells report SIGINT).
const EXIT_INTERRUPTED: u8 = 130;

#[derive(Debug, Args)]
#[command(after_long_help = "\
Examples:
  powerlens run -- make -j4
  powerlens run --runs 10 --warmup 2 -- ./bench --size 1e6
  powerlens run --baseline 5 -- powerlens workload spin --threads 1 --duration 2s
  powerlens run --window 10 -- ./encode.sh      # race-to-idle: same window for every run

Energy is measured by the best meter this machine has (RAPL powercap, perf power PMU,
battery, hwmon; see `powerlens info`) and otherwise ESTIMATED by a power model, labelled
as such. The command is executed directly, not through a shell: use `sh -c '…'` for pipes.")]
pub struct RunArgs {
    /// Number of measured runs.
    #[arg(short, long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,

    /// Unmeasured runs before the measured ones (warm caches, settle frequency).
    #[arg(short, long, default_value_t = 0)]
    pub warmup: u32,

    /// Shell command to run before every run, unmeasured (e.g. drop caches).
    #[arg(long, value_name = "CMD")]
    pub prepare: Option<String>,

    /// Measure idle power for this long before and after the runs, and report energy above it.
    #[arg(long, value_name = "SECS", value_parser = parse_duration)]
    pub baseline: Option<Duration>,

    /// Measure each run's energy over a fixed window from its start, idle tail included
    /// (the race-to-idle comparison). A run that outlives the window is an error.
    #[arg(long, value_name = "SECS", value_parser = parse_duration)]
    pub window: Option<Duration>,

    /// Keep measuring when the command exits non-zero or is killed.
    #[arg(short, long)]
    pub ignore_failure: bool,

    /// Let the command's stdout and stderr through (hidden by default).
    #[arg(long)]
    pub show_output: bool,

    /// Print the result as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,

    /// Also write the result as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub export_json: Option<PathBuf>,

    /// Also write one CSV line per run to FILE.
    #[arg(long, value_name = "FILE")]
    pub export_csv: Option<PathBuf>,

    /// Also write the summary as a Markdown table to FILE.
    #[arg(long, value_name = "FILE")]
    pub export_markdown: Option<PathBuf>,

    /// Results database [default: $XDG_DATA_HOME/powerlens/results.db].
    #[arg(long, value_name = "PATH", env = "POWERLENS_DB")]
    pub db: Option<PathBuf>,

    /// Do not append the result to the results database.
    #[arg(long)]
    pub no_save: bool,

    /// A label stored with the result (for `runs list` and comparisons).
    #[arg(long)]
    pub label: Option<String>,

    #[command(flatten)]
    pub meter: MeterArgs,

    /// The command to measure, and its arguments.
    #[arg(required = true, last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// Options of the energy meter, shared by every command that measures.
#[derive(Debug, Clone, Args)]
pub struct MeterArgs {
    /// Power model parameters (JSON, as `powerlens calibrate` writes) for machines without a meter.
    #[arg(long, value_name = "FILE", env = "POWERLENS_POWER_MODEL")]
    pub power_model: Option<PathBuf>,

    /// Read the energy counters this often [default: the longest interval that cannot miss a
    /// counter wrap, at most 100ms].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub sample_interval: Option<Duration>,
}

impl MeterArgs {
    pub fn options(&self) -> MeterOptions {
        MeterOptions {
            power_model: self.power_model.clone(),
            sample_interval: self.sample_interval,
        }
    }
}

pub fn execute(global: &GlobalArgs, args: RunArgs) -> anyhow::Result<ExitCode> {
    let roots = global.roots()?;
    // Open the database first: a broken one should fail before minutes of measuring.
    let mut db = if args.no_save {
        None
    } else {
        Some(ResultsDb::open(results::db_path(args.db.clone())?)?)
    };
    let meter = Meter::open(&roots, &args.meter.options())?;
    eprintln!("{}", meter.describe());
    interrupt::install();

    let series_options = SeriesOptions {
        runs: args.runs as usize,
        warmup: args.warmup as usize,
        prepare: args.prepare.clone(),
        window: args.window,
        ignore_failure: args.ignore_failure,
        show_output: args.show_output,
    };
    let mut baseline = match args.baseline {
        Some(d) => runner::start_baseline(&meter, d)?,
        None => None,
    };
    let bar = progress::bar(args.runs as u64, "run");
    let series = runner::run_series(&meter, &args.command, &series_options, &bar)?;
    bar.finish_and_clear();
    if let Some(b) = baseline.as_mut().filter(|_| !interrupt::interrupted()) {
        runner::finish_baseline(&meter, b)?;
    }

    let result = RunResult::new(
        args.command.clone(),
        meter.provenance(),
        args.window.map(|w| w.as_secs_f64()),
        baseline,
        series.measurements,
        meter.warnings.clone(),
        series.stopped_early,
    );
    emit(&args, &result)?;
    if let Some(db) = db.as_mut().filter(|_| !result.runs.is_empty()) {
        let id = results::save_run(db, &result, args.label.clone())?;
        eprintln!("saved as result {id} in {}", db.path().display());
    }
    Ok(match &result.stopped_early {
        None => ExitCode::SUCCESS,
        Some(_) if interrupt::interrupted() => ExitCode::from(EXIT_INTERRUPTED),
        Some(_) => ExitCode::FAILURE,
    })
}

/// Prints the result and writes the requested exports.
fn emit(args: &RunArgs, result: &RunResult) -> anyhow::Result<()> {
    let json = serde_json::to_string_pretty(result)?;
    if args.json {
        println!("{json}");
    } else {
        print!("{}", powerlens_report::run::text(result));
    }
    let exports = [
        (&args.export_json, json.clone() + "\n"),
        (&args.export_csv, powerlens_report::run::csv(result)),
        (
            &args.export_markdown,
            powerlens_report::run::markdown(result),
        ),
    ];
    for (path, content) in exports {
        if let Some(path) = path {
            std::fs::write(path, content).with_context(|| format!("writing {}", path.display()))?;
        }
    }
    Ok(())
}
