//! `powerlens sweep`: run a command over every combination of parameter values and show
//! the energy and time to retire the work for each.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::Args;
use powerlens_core::compare;
use powerlens_core::sweep::{self, Sweep, SweepError};
use serde::Serialize;

use crate::args::GlobalArgs;
use crate::cmd::run::{ConfigArgs, MeterArgs, OutputArgs, Rendered, SaveArgs, SeriesArgs};
use crate::series::{self, Job};
use crate::units::parse_positive_number;
use crate::{progress, results};
use powerlens_record::interrupt;

#[derive(Debug, Args)]
#[command(after_long_help = "\
Every {NAME} in the command is replaced by the parameter's value; every combination of the
--param values runs (interleaved, so drift of the machine hits them alike), and each row
shows W, s, J, EDP and work per joule, the best by energy and by time, and ratios to the
reference combination (default: the first).

Examples:
  powerlens sweep --param threads=1..4 -- powerlens workload spin --threads {threads} --duration 1s
  powerlens sweep --param j=1,2,4,8 --runs 3 --plot make.svg -- sh -c 'make clean; make -j{j}'
  powerlens sweep --param threads=1,2 --param period=1ms,100ms --reference threads=1,period=100ms \\
      -- powerlens workload sleepy --period {period} --duration 1s

With --config, the configurations are one more parameter named `config` (the command needs no
{config}): every combination runs under each configuration.")]
pub struct SweepArgs {
    /// A parameter and its values: NAME=V1,V2,… or NAME=FIRST..LAST (integers, inclusive).
    #[arg(short, long = "param", value_name = "NAME=VALUES", required = true)]
    pub params: Vec<String>,

    /// The combination ratios are taken against: a value (one parameter) or NAME=V[,NAME=V].
    #[arg(long, value_name = "VALUES")]
    pub reference: Option<String>,

    /// Units of work one run retires: work per joule becomes throughput per watt.
    #[arg(long, value_name = "N", default_value_t = 1.0, value_parser = parse_positive_number)]
    pub work: f64,

    /// Draw energy and time against the first parameter as an SVG file.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,

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

    /// The command, with {NAME} where each parameter's value goes.
    #[arg(required = true, last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// The implicit parameter that --config adds to a sweep.
const CONFIG_PARAM: &str = "config";

#[derive(Debug, Serialize)]
struct SweepDoc<'a> {
    provenance: String,
    command: &'a [String],
    work_per_run: f64,
    #[serde(flatten)]
    sweep: &'a Sweep,
    stopped_early: Option<String>,
}

pub fn execute(global: &GlobalArgs, args: SweepArgs) -> anyhow::Result<ExitCode> {
    let mut params = args
        .params
        .iter()
        .map(|p| sweep::parse_param(p))
        .collect::<Result<Vec<_>, _>>()
        .map_err(with_flag)?;
    sweep::check_command(&args.command, &params).map_err(with_flag)?;
    let roots = global.roots()?;
    let configs = args.configs.parse_and_check(&roots)?;
    if !configs.is_empty() {
        params.push(sweep::Param {
            name: CONFIG_PARAM.into(),
            values: configs.iter().map(|c| c.name.clone()).collect(),
        });
    }
    let combos = sweep::combinations(&params).map_err(with_flag)?;
    let reference = match &args.reference {
        Some(text) => sweep::find_reference(&combos, text).map_err(with_flag)?,
        None => 0,
    };
    let mut db = args.save.open()?;
    let meter = args.series.open_meter(&roots, &args.meter.options())?;
    eprintln!("{}", meter.describe());
    interrupt::install();

    let jobs: Vec<Job<'_>> = combos
        .iter()
        .map(|c| Job {
            argv: sweep::substitute(&args.command, c),
            config: c
                .iter()
                .find(|(n, _)| n == CONFIG_PARAM)
                .and_then(|(_, v)| configs.iter().find(|cfg| cfg.name == *v)),
        })
        .collect();
    let argvs: Vec<Vec<String>> = jobs.iter().map(|j| j.argv.clone()).collect();
    let options = args.series.options();
    let bar = progress::bar((options.runs * jobs.len()) as u64, "sweep");
    let series = series::run_interleaved(&meter, &jobs, &options, &bar)?;
    bar.finish_and_clear();
    let stopped_early = series.first().and_then(|s| s.stopped_early.clone());

    let mut samples = Vec::with_capacity(series.len());
    for ((combo, argv), s) in combos.iter().zip(&argvs).zip(series) {
        let result = series::result_of(&meter, argv.clone(), options.window, None, s);
        if let Some(db) = db.as_mut().filter(|_| !result.runs.is_empty()) {
            results::save_run(db, &result, Some(sweep::combo_label(combo)))?;
        }
        samples.push(compare::samples_of(&result));
    }
    if let Some(why) = &stopped_early {
        if samples.iter().any(Vec::is_empty) {
            bail!("the sweep stopped before every combination ran once: {why}");
        }
    }
    let result = sweep::analyse(&params, &combos, &samples, reference, args.work)?;
    let provenance = meter.provenance().label();
    let doc = SweepDoc {
        provenance: provenance.clone(),
        command: &args.command,
        work_per_run: args.work,
        sweep: &result,
        stopped_early: stopped_early.clone(),
    };
    let stopped: Vec<String> = stopped_early
        .iter()
        .map(|why| format!("Stopped early: {why}; rows use the runs that finished."))
        .collect();
    let mut text = powerlens_report::sweep::text(&result, &provenance);
    if let Some(why) = &stopped_early {
        text.push_str(&format!(
            "\nstopped early: {why}; rows use the runs that finished\n"
        ));
    }
    args.output.emit(&Rendered {
        json: serde_json::to_string_pretty(&doc)?,
        text,
        csv: powerlens_report::sweep::csv(&result),
        markdown: powerlens_report::sweep::markdown(&result),
        html: powerlens_report::sweep::html(
            &result,
            &provenance,
            &powerlens_report::run::shell_words(&args.command),
            &stopped,
        ),
    })?;
    if let Some(path) = &args.plot {
        std::fs::write(path, powerlens_report::sweep::plot(&result))
            .with_context(|| format!("writing the plot {}", path.display()))?;
        eprintln!("plot written to {}", path.display());
    }
    Ok(interrupt::exit_code(stopped_early.as_deref()))
}

/// A sweep error with the flag it is about, which the library does not know.
fn with_flag(e: SweepError) -> anyhow::Error {
    match &e {
        SweepError::Syntax(_) | SweepError::Duplicate { .. } | SweepError::UnusedParam { .. } => {
            anyhow::anyhow!("--param {e}")
        }
        SweepError::UnknownReference { .. } => anyhow::anyhow!("--reference {e}"),
        SweepError::UnknownPlaceholder { name } => {
            anyhow::anyhow!("the command uses {{{name}}} but no --param {name}=… is given")
        }
        _ => e.into(),
    }
}
