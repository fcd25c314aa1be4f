//! `powerlens compare`: which configuration retires the workload with less energy, and in
//! how much time — with confidence intervals and a plain verdict.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Args;
use powerlens_core::battery_life::{self, BatteryReport, LabelBattery, Workload};
use powerlens_core::compare::{self, Comparison, Group};
use powerlens_core::provenance::Provenance;
use powerlens_core::run::RunResult;
use powerlens_store::ResultsDb;
use serde::Serialize;

use crate::args::GlobalArgs;
use crate::cmd::run::{
    BatteryArgs, ConfigArgs, MeterArgs, OutputArgs, Rendered, SaveArgs, SeriesArgs,
};
use crate::series::{self, Job};
use crate::units::parse_positive_number;
use crate::{progress, results};
use powerlens_record::interrupt;

#[derive(Debug, Args)]
#[command(after_long_help = "\
Three ways to give the configurations; the first is the baseline, ratios are candidate / baseline:

  powerlens compare --runs 10 -- 'make -j4' 'make -j8'      run them interleaved (A B A B …)
  powerlens compare 3 7 results/b.json                       saved results (ids) or run --export-json files
  powerlens compare --from-csv lkml.csv                      figures measured elsewhere
  powerlens compare --config perf=governor=performance --config save=governor=powersave -- ./bench
                                                             one command under each system configuration

CSV header `label,seconds,watts` or `label,seconds,joules`; rows with one label are repeats:
  label,seconds,watts
  performance,209,193.355
  powersaving,228,189.416

Each figure (time, energy, average power, EDP, ED²P, work per joule) gets the ratio of means
with a 95% confidence interval: on the log scale when every run's value is positive, as times
and energies are (ln ratio ± t·√(s²a/(na·ma²) + s²b/(nb·mb²)), Welch–Satterthwaite degrees of
freedom), by Fieller's theorem otherwise (a domain with a 0 J run). It is significant exactly
when that printed interval excludes 1. The difference of means gets Welch's interval (in
--json and --csv). Intervals that are not symmetric print as `lo … hi`. The verdict says which configuration needs less energy to retire the
workload and in how much time: better on both, worse on both, or what it trades.

On a discharging battery (or with --battery-wh WH) the verdict also says how much work each
configuration retires per charge, and with --job whether each finishes the job on one
charge or runs out before:
  powerlens compare --job 1000 -n fast -n slow -- './encode --fast' './encode --slow'")]
pub struct CompareArgs {
    /// Saved results to compare: ids from `powerlens runs list`, or JSON files from `run --export-json`.
    #[arg(value_name = "RESULT")]
    pub results: Vec<String>,

    /// Compare figures measured elsewhere: CSV `label,seconds,watts` or `label,seconds,joules`.
    #[arg(long, value_name = "FILE")]
    pub from_csv: Option<PathBuf>,

    /// Names of the commands, in order (default: the command lines).
    #[arg(short = 'n', long = "name", value_name = "NAME")]
    pub names: Vec<String>,

    /// Units of work one run retires (requests, frames, …): work per joule becomes throughput per watt.
    #[arg(long, value_name = "N", default_value_t = 1.0, value_parser = parse_positive_number)]
    pub work: f64,

    /// The whole job, in units of --work (one run each by default), for the battery
    /// verdict: whether each configuration finishes it on one charge, or when its battery
    /// runs out and how much of the job is left (needs battery figures: on a battery, or
    /// --battery-wh).
    #[arg(long, value_name = "UNITS", value_parser = parse_positive_number)]
    pub job: Option<f64>,

    #[command(flatten)]
    pub series: SeriesArgs,

    #[command(flatten)]
    pub configs: ConfigArgs,

    #[command(flatten)]
    pub output: OutputArgs,

    #[command(flatten)]
    pub save: SaveArgs,

    #[command(flatten)]
    pub meter: MeterArgs,

    #[command(flatten)]
    pub battery: BatteryArgs,

    /// Shell command lines to run and compare (each through `sh -c`).
    #[arg(last = true, value_name = "CMD")]
    pub commands: Vec<String>,
}

/// The JSON document: where the numbers come from, then the comparison itself.
#[derive(Debug, Serialize)]
struct CompareDoc<'a> {
    provenance: String,
    work_per_run: f64,
    #[serde(flatten)]
    comparison: &'a Comparison,
    stopped_early: Option<String>,
}

/// Labelled samples and where they came from.
struct Inputs {
    groups: Vec<Group>,
    provenance: String,
    /// The energy's provenance behind the verdicts (an estimate when any input is one).
    energy: Provenance,
    stopped_early: Option<String>,
    /// Each group's battery-life figures, when it has them.
    battery: Vec<Option<BatteryReport>>,
}

pub fn execute(global: &GlobalArgs, args: CompareArgs) -> anyhow::Result<ExitCode> {
    let forms = [
        args.from_csv.is_some(),
        !args.results.is_empty(),
        !args.commands.is_empty(),
    ];
    if !args.configs.configs.is_empty() && !forms[2] {
        bail!("--config applies to commands that compare runs (after `--`), not to saved or imported results");
    }
    let inputs = match forms {
        [true, false, false] => from_csv(
            args.from_csv.as_deref().expect("checked"),
            args.battery.battery_wh,
        )?,
        [false, true, false] => from_results(&args.results, &args.save, args.battery.battery_wh)?,
        [false, false, true] => live(global, &args)?,
        [false, false, false] => bail!(
            "nothing to compare: give commands after `--`, saved results (ids or JSON files), or --from-csv FILE"
        ),
        _ => bail!("give one kind of input: commands after `--`, saved results, or --from-csv FILE — not several"),
    };
    // A series that stopped before a command finished one run leaves that command no
    // rows: say why it stopped, not only that the rows are missing.
    if let (Some(why), Some(empty)) = (
        &inputs.stopped_early,
        inputs.groups.iter().find(|g| g.samples.is_empty()),
    ) {
        bail!(
            "{:?} finished no run to compare: stopped early: {why}",
            empty.label
        );
    }
    let mut comparison = compare::compare(&inputs.groups, args.work)?;
    let job_runs = args.job.map(|units| units / args.work);
    if args.job.is_some() && inputs.battery.iter().all(Option::is_none) {
        bail!("--job needs battery-life figures: measure on a discharging battery, or give its full charge with --battery-wh WH");
    }
    if inputs.battery.iter().any(Option::is_some) {
        let labels = inputs
            .groups
            .iter()
            .zip(&inputs.battery)
            .map(|(g, b)| {
                let report = b.clone().unwrap_or_else(|| {
                    BatteryReport::unavailable(
                        "this result has no battery-life figures (measured without a battery)",
                        Some("measure it again on battery, or give --battery-wh WH".into()),
                    )
                });
                LabelBattery::new(&g.label, report, job_runs)
            })
            .collect();
        comparison.battery_from(labels, args.work);
    }
    comparison.energy_from(&inputs.energy);
    let doc = CompareDoc {
        provenance: inputs.provenance.clone(),
        work_per_run: args.work,
        comparison: &comparison,
        stopped_early: inputs.stopped_early.clone(),
    };
    let stopped: Vec<String> = inputs
        .stopped_early
        .iter()
        .map(|why| format!("Stopped early: {why}; the comparison uses the runs that finished."))
        .collect();
    let mut text = powerlens_report::compare::text(&comparison, &inputs.provenance);
    if let Some(why) = &inputs.stopped_early {
        text.push_str(&format!(
            "\nstopped early: {why}; the comparison uses the runs that finished\n"
        ));
    }
    args.output.emit(&Rendered {
        json: serde_json::to_string_pretty(&doc)?,
        text,
        csv: powerlens_report::compare::csv(&comparison),
        markdown: powerlens_report::compare::markdown(&comparison, &inputs.provenance),
        html: powerlens_report::compare::html(&comparison, &inputs.provenance, &stopped),
    })?;
    Ok(interrupt::exit_code(inputs.stopped_early.as_deref()))
}

fn from_csv(path: &Path, battery_wh: Option<f64>) -> anyhow::Result<Inputs> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let groups =
        compare::groups_from_csv(text.lines()).with_context(|| format!("in {}", path.display()))?;
    let energy = Provenance::Measured {
        source: format!("imported from {}", path.display()),
    };
    // Figures measured elsewhere have no battery of their own: only a given capacity.
    let battery = groups
        .iter()
        .map(|g| {
            let (wh, workload) = battery_wh.zip(Workload::of_samples(&g.samples))?;
            Some(battery_life::with_given_capacity(
                None, wh, &workload, &energy,
            ))
        })
        .collect();
    Ok(Inputs {
        groups,
        provenance: format!(
            "imported from {} (measured elsewhere, not by powerlens)",
            path.display()
        ),
        energy,
        stopped_early: None,
        battery,
    })
}

fn from_results(
    refs: &[String],
    save: &SaveArgs,
    battery_wh: Option<f64>,
) -> anyhow::Result<Inputs> {
    let mut db: Option<ResultsDb> = None;
    let mut groups = Vec::new();
    let mut battery = Vec::new();
    let mut provenances = Vec::new();
    let mut energy: Option<Provenance> = None;
    for r in refs {
        let (label, result) = match r.parse::<i64>() {
            Ok(id) => {
                if db.is_none() {
                    let path = results::db_path(save.db.clone())?;
                    if !path.exists() {
                        bail!("result {id}: there is no results database at {} (give --db, or JSON files)", path.display());
                    }
                    db = Some(results::open_existing_db(&path)?);
                }
                let row = db.as_ref().expect("opened above").get(id)?;
                let result: RunResult = serde_json::from_str(&row.document).with_context(|| {
                    format!("result {id} holds a document this powerlens cannot read")
                })?;
                (
                    row.label
                        .unwrap_or_else(|| format!("#{id} {}", row.command)),
                    result,
                )
            }
            Err(_) => {
                let path = Path::new(r);
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("{r:?} is neither a result id nor a readable file"))?;
                let result: RunResult = serde_json::from_str(&text).with_context(|| {
                    format!(
                        "{} is not a result written by `powerlens run --export-json`",
                        path.display()
                    )
                })?;
                (path.display().to_string(), result)
            }
        };
        if result.runs.is_empty() {
            bail!("{label:?} has no runs to compare");
        }
        provenances.push(result.provenance.label());
        if energy
            .as_ref()
            .is_none_or(|e: &Provenance| !e.is_estimate())
        {
            energy = Some(result.provenance.clone());
        }
        battery.push(match (battery_wh, &result.summary) {
            (Some(wh), Some(summary)) => Some(
                battery_life::with_given_capacity(
                    result.battery.as_ref(),
                    wh,
                    &Workload::of_runs(summary),
                    &result.provenance,
                )
                .charging(battery_life::Charged::of_runs(&result.provenance)),
            ),
            _ => result.battery.clone(),
        });
        groups.push(Group {
            label,
            samples: compare::samples_of(&result),
        });
    }
    provenances.dedup();
    let provenance = if provenances.len() == 1 {
        provenances.remove(0)
    } else {
        format!(
            "MIXED — {}: results measured differently are not comparable",
            provenances.join(" vs ")
        )
    };
    Ok(Inputs {
        groups,
        provenance,
        energy: energy.context("no saved result to compare")?,
        stopped_early: None,
        battery,
    })
}

fn live(global: &GlobalArgs, args: &CompareArgs) -> anyhow::Result<Inputs> {
    let roots = global.roots()?;
    let configs = args.configs.parse_and_check(&roots)?;
    let shell = |c: &String| vec!["sh".to_string(), "-c".to_string(), c.clone()];
    let (labels, jobs): (Vec<String>, Vec<Job<'_>>) = if configs.is_empty() {
        if args.commands.len() < 2 {
            bail!("give at least two commands after `--` to compare, e.g. -- 'make -j4' 'make -j8' (or one command and several --config)");
        }
        if !args.names.is_empty() && args.names.len() != args.commands.len() {
            bail!(
                "--name was given {} times for {} commands: name every command or none",
                args.names.len(),
                args.commands.len()
            );
        }
        let labels = if args.names.is_empty() {
            args.commands.clone()
        } else {
            args.names.clone()
        };
        (
            labels,
            args.commands.iter().map(|c| Job::plain(shell(c))).collect(),
        )
    } else {
        if configs.len() < 2 || args.commands.len() != 1 {
            bail!("with --config, give one command and at least two configurations: each configuration runs the command");
        }
        if !args.names.is_empty() {
            bail!("with --config the configurations are the names; drop --name");
        }
        let labels = configs.iter().map(|c| c.name.clone()).collect();
        let jobs = configs
            .iter()
            .map(|c| Job {
                argv: shell(&args.commands[0]),
                config: Some(c),
            })
            .collect();
        (labels, jobs)
    };
    let mut db = args.save.open()?;
    let meter = args
        .series
        .open_meter(&roots, &args.meter.options_with(&args.battery))?;
    for line in meter.introduction() {
        eprintln!("{line}");
    }
    interrupt::install();
    let options = args.series.options();
    let bar = progress::bar((options.runs * jobs.len()) as u64, "compare");
    let series = series::run_interleaved(&meter, &jobs, &options, &bar)?;
    bar.finish_and_clear();
    let stopped_early = series.first().and_then(|s| s.stopped_early.clone());
    let mut groups = Vec::new();
    let mut battery = Vec::new();
    for ((label, job), s) in labels.iter().zip(jobs).zip(series) {
        let result = series::result_of(&meter, job.argv, options.window, None, s);
        if let Some(db) = db.as_mut().filter(|_| !result.runs.is_empty()) {
            let id = results::save_run(db, &result, Some(label.clone()))?;
            eprintln!("saved {label:?} as result {id}");
        }
        battery.push(result.battery.clone());
        groups.push(Group {
            label: label.clone(),
            samples: compare::samples_of(&result),
        });
    }
    Ok(Inputs {
        groups,
        provenance: meter.provenance().label(),
        energy: meter.provenance(),
        stopped_early,
        battery,
    })
}
