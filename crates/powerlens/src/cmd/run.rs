//! `powerlens run`: the energy to retire a workload.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use powerlens_store::ResultsDb;

use crate::args::GlobalArgs;
use crate::series::{self, SeriesOptions};
use crate::units::{parse_positive_duration, parse_positive_number, parse_seconds};
use crate::{progress, results};
use powerlens_record::interrupt;
use powerlens_record::meter::{Meter, MeterOptions};
use powerlens_record::RecordError;
use powerlens_sys::settings;
use powerlens_sys::Roots;
use powerlens_workload::runner::Config;

#[derive(Debug, Args)]
#[command(after_long_help = "\
Examples:
  powerlens run -- make -j4
  powerlens run --runs 10 --warmup 2 -- ./bench --size 1e6
  powerlens run --baseline 5 -- powerlens workload spin --threads 1 --duration 2s
  powerlens run --window 10 -- ./encode.sh      # race-to-idle: same window for every run
  powerlens run --battery-wh 57 -- ./encode.sh  # battery life: hours on a charge, runs per charge

On a discharging battery (or with --battery-wh) the result also has battery-life figures:
how long a full charge lasts at the measured power, how many runs it retires, and the
conventional life of the Windows 7 vs Windows 8 study (time of a 1% discharge × 100),
timed on the battery's gauge once the runs discharge 1%. See docs/ENERGY.md.

Energy is measured by the best meter this machine has (RAPL powercap, perf power PMU,
battery, hwmon; see `powerlens info`) and otherwise ESTIMATED by a power model, labelled
as such. The command is executed directly, not through a shell: use `sh -c '…'` for pipes.")]
pub struct RunArgs {
    #[command(flatten)]
    pub series: SeriesArgs,

    /// Measure idle power for this long before and after the runs, and report energy above it.
    #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
    pub baseline: Option<Duration>,

    #[command(flatten)]
    pub output: OutputArgs,

    #[command(flatten)]
    pub save: SaveArgs,

    /// A label stored with the result (for `runs list` and comparisons).
    #[arg(long)]
    pub label: Option<String>,

    #[command(flatten)]
    pub meter: MeterArgs,

    #[command(flatten)]
    pub battery: BatteryArgs,

    /// The command to measure, and its arguments.
    #[arg(required = true, last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// How each command is run and measured, shared by `run`, `compare` and `sweep`.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Measurement")]
pub struct SeriesArgs {
    /// Number of measured runs (per command).
    #[arg(short, long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,

    /// Unmeasured runs before the measured ones (warm caches, settle frequency).
    #[arg(short, long, default_value_t = 0)]
    pub warmup: u32,

    /// Shell command to run before every run, unmeasured (e.g. drop caches).
    #[arg(long, value_name = "CMD")]
    pub prepare: Option<String>,

    /// Measure each run's energy over a fixed window from its start, idle tail included
    /// (the race-to-idle comparison). A run that outlives the window is an error.
    #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
    pub window: Option<Duration>,

    /// Keep measuring when the command exits non-zero or is killed.
    #[arg(short, long)]
    pub ignore_failure: bool,

    /// Let the command's stdout and stderr through (hidden by default).
    #[arg(long)]
    pub show_output: bool,

    /// For powerlens's own tests: run every command on the mock executor, which starts no
    /// process and reads no clock nor meter of this machine but scripts each run (`sleep
    /// 0.6`, `spin 0.6 30W`, …; docs/COMPARE.md#testing-with-the-mock-executor), so that
    /// the statistics are checked exactly; on a fixture sysfs tree holding a meter it
    /// reads that meter on its mock clock, over files its `draw` steps write. SETUP is a
    /// line of mock steps run first (e.g. `idle 5W`).
    /// Hidden, and a flag rather than an environment variable, so that it is never
    /// inherited or left set by accident; what it produces is labelled MOCKED.
    #[arg(
        long,
        hide = true,
        value_name = "SETUP",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = ""
    )]
    pub mock_executor: Option<String>,
}

impl SeriesArgs {
    /// The meter of this machine, or the mock's with `--mock-executor`.
    pub fn open_meter(&self, roots: &Roots, options: &MeterOptions) -> anyhow::Result<Meter> {
        let Some(setup) = &self.mock_executor else {
            return Ok(Meter::open(roots, options)?);
        };
        if options.power_model.is_some() {
            anyhow::bail!("--mock-executor has its own meter: drop --power-model");
        }
        match Meter::mock(roots, setup, options) {
            Err(RecordError::MockReadsNoMeter) => anyhow::bail!(
                "--mock-executor reads no meter here, so --meter-read-every sets nothing: drop it, or point POWERLENS_SYSFS_ROOT at a fixture tree holding a meter"
            ),
            meter => meter.context("--mock-executor"),
        }
    }

    pub fn options(&self) -> SeriesOptions {
        SeriesOptions {
            runs: self.runs as usize,
            warmup: self.warmup as usize,
            prepare: self.prepare.clone(),
            window: self.window,
            ignore_failure: self.ignore_failure,
            show_output: self.show_output,
        }
    }
}

/// Where a result goes: stdout as text or JSON, and export files.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Output")]
pub struct OutputArgs {
    /// Print the result as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,

    /// Also write the result as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub export_json: Option<PathBuf>,

    /// Also write the result as CSV to FILE.
    #[arg(long, value_name = "FILE")]
    pub export_csv: Option<PathBuf>,

    /// Also write the result as a Markdown table to FILE.
    #[arg(long, value_name = "FILE")]
    pub export_markdown: Option<PathBuf>,

    /// Also write one self-contained HTML page to FILE (inline SVG plots with axes and units,
    /// tables sortable by clicking a header; opens offline, prints cleanly). run: the summary,
    /// energy and time per run, the runs; compare: the verdict, the ratios with their 95%
    /// intervals as a chart; sweep: energy and time against the first parameter, the table.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// The views of one result, rendered by the report crate.
pub struct Rendered {
    pub json: String,
    pub text: String,
    pub csv: String,
    pub markdown: String,
    pub html: String,
}

impl OutputArgs {
    /// Prints the text or JSON view and writes every requested export. Export paths are
    /// checked writable by writing them only after the result exists, one complete file each.
    pub fn emit(&self, r: &Rendered) -> anyhow::Result<()> {
        if self.json {
            println!("{}", r.json);
        } else {
            print!("{}", r.text);
        }
        let exports = [
            (&self.export_json, format!("{}\n", r.json)),
            (&self.export_csv, r.csv.clone()),
            (&self.export_markdown, r.markdown.clone()),
        ];
        for (path, content) in exports {
            if let Some(path) = path {
                std::fs::write(path, content)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
        }
        if let Some(path) = &self.html {
            crate::cmd::export::write_whole(path, r.html.as_bytes())?;
            eprintln!("wrote {}", path.display());
        }
        Ok(())
    }
}

/// Where results are saved.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Results database")]
pub struct SaveArgs {
    /// Results database [default: $XDG_DATA_HOME/powerlens/results.db].
    #[arg(long, value_name = "PATH", env = "POWERLENS_DB")]
    pub db: Option<PathBuf>,

    /// Do not append results to the results database.
    #[arg(long)]
    pub no_save: bool,
}

impl SaveArgs {
    /// Opens the database unless `--no-save`; done before measuring, so that a broken
    /// database fails before minutes of runs.
    pub fn open(&self) -> anyhow::Result<Option<ResultsDb>> {
        if self.no_save {
            return Ok(None);
        }
        Ok(Some(results::open_db(results::db_path(self.db.clone())?)?))
    }
}

/// Named system configurations, for `compare` and `sweep`.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "System configurations")]
pub struct ConfigArgs {
    /// A named configuration applied around each of its runs and restored after (also on
    /// failure or Ctrl-C): NAME=SETTING[,SETTING…] with governor=, epp=, min_freq=, max_freq=,
    /// turbo=on|off, cstate.NAME=on|off, cstates=NAME[,NAME…], pm_qos=20us, cpus=0-3.
    /// Repeat for each configuration; see docs/CONFIG.md.
    #[arg(long = "config", value_name = "NAME=SETTINGS")]
    pub configs: Vec<String>,
}

impl ConfigArgs {
    /// Parses every configuration and checks that this machine can apply all of them, before
    /// anything runs or changes.
    pub fn parse_and_check(&self, roots: &Roots) -> anyhow::Result<Vec<Config>> {
        let configs = self
            .configs
            .iter()
            .map(|c| parse_config(c, roots))
            .collect::<anyhow::Result<Vec<_>>>()?;
        for (i, c) in configs.iter().enumerate() {
            if configs[..i].iter().any(|d| d.name == c.name) {
                anyhow::bail!(
                    "--config {} is given twice: give each configuration its own name",
                    c.name
                );
            }
            // Checks that this machine can apply every setting, before anything runs.
            settings::check(&c.roots, &c.settings)
                .with_context(|| format!("--config {}", c.name))?;
        }
        Ok(configs)
    }
}

/// Parses one `--config NAME=SETTING[,SETTING…]`.
fn parse_config(text: &str, roots: &Roots) -> anyhow::Result<Config> {
    let (name, rest) = text
        .split_once('=')
        .filter(|(n, r)| !n.trim().is_empty() && !r.trim().is_empty())
        .with_context(|| format!("--config {text:?}: expected NAME=SETTING[,SETTING…], e.g. save=governor=powersave,turbo=off"))?;
    let settings = settings::parse_settings(rest).with_context(|| format!("--config {name}"))?;
    Ok(Config {
        name: name.trim().to_string(),
        settings,
        roots: roots.clone(),
    })
}

/// Options of the energy meter, shared by every command that measures.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Energy meter")]
pub struct MeterArgs {
    /// Power model parameters (JSON, as `powerlens calibrate` writes) for machines without a meter.
    #[arg(long, value_name = "FILE", env = "POWERLENS_POWER_MODEL")]
    pub power_model: Option<PathBuf>,

    /// How often the meter's background thread reads the energy counters, so that no
    /// counter wrap is missed (not how often a recording stores samples: that is `record
    /// --sample-every`) [default: the longest interval that cannot miss a wrap, at most
    /// 100ms]. Was --sample-interval, still accepted.
    #[arg(
        long = "meter-read-every",
        alias = "sample-interval",
        value_name = "DURATION",
        value_parser = parse_positive_duration
    )]
    pub sample_interval: Option<Duration>,
}

impl MeterArgs {
    pub fn options(&self) -> MeterOptions {
        MeterOptions {
            power_model: self.power_model.clone(),
            sample_interval: self.sample_interval,
            battery_wh: None,
        }
    }

    /// The options of a command that also makes battery-life figures.
    pub fn options_with(&self, battery: &BatteryArgs) -> MeterOptions {
        MeterOptions {
            battery_wh: battery.battery_wh,
            ..self.options()
        }
    }
}

/// The battery behind battery-life figures, for `run`, `compare`, `record` and `report`.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Battery life")]
pub struct BatteryArgs {
    /// A full charge, in watt-hours, for the battery-life figures: instead of the
    /// battery's own energy_full, or with any meter on a machine without a battery.
    /// On a discharging battery the figures come without it (see docs/ENERGY.md).
    #[arg(long, value_name = "WH", allow_negative_numbers = true, value_parser = parse_battery_wh)]
    pub battery_wh: Option<f64>,
}

/// `--battery-wh`: a full charge must be a positive number of watt-hours.
fn parse_battery_wh(text: &str) -> Result<f64, String> {
    parse_positive_number(text).map_err(|e| {
        format!("{e}: give the battery's full charge in watt-hours, e.g. --battery-wh 57 (its label, or `upower -i`, says it)")
    })
}

pub fn execute(global: &GlobalArgs, args: RunArgs) -> anyhow::Result<ExitCode> {
    let roots = global.roots()?;
    let mut db = args.save.open()?;
    let meter = args
        .series
        .open_meter(&roots, &args.meter.options_with(&args.battery))?;
    for line in meter.introduction() {
        eprintln!("{line}");
    }
    interrupt::install();

    let series_options = args.series.options();
    let mut baseline = match args.baseline {
        Some(d) => series::start_baseline(&meter, d)?,
        None => None,
    };
    let bar = progress::bar(args.series.runs as u64, "run");
    let series = series::run_series(&meter, &args.command, &series_options, &bar)?;
    bar.finish_and_clear();
    if let Some(b) = baseline.as_mut().filter(|_| !interrupt::interrupted()) {
        series::finish_baseline(&meter, b)?;
    }

    let result = series::result_of(
        &meter,
        args.command.clone(),
        args.series.window,
        baseline,
        series,
    );
    args.output.emit(&Rendered {
        json: serde_json::to_string_pretty(&result)?,
        text: powerlens_report::run::text(&result),
        csv: powerlens_report::run::csv(&result),
        markdown: powerlens_report::run::markdown(&result),
        html: powerlens_report::run::html(&result),
    })?;
    if let Some(db) = db.as_mut().filter(|_| !result.runs.is_empty()) {
        let id = results::save_run(db, &result, args.label.clone())?;
        eprintln!("saved as result {id} in {}", db.path().display());
    }
    Ok(interrupt::exit_code(result.stopped_early.as_deref()))
}
