//! `powerlens report REC`: the application-centric power grid of a recording — per process
//! or thread, why the CPUs burned or saved energy — with the system figures above it and
//! the energy split below it.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};

use powerlens_core::advice::{self, JudgedStates};
use powerlens_core::sched::analysis::SchedSummary;
use powerlens_core::sched::report as model;
use powerlens_core::sched::wakeups::WakeupAnalysis;

use powerlens_core::provenance::Provenance;
use powerlens_report::html;
use powerlens_report::recording::{self as view, By, GridOptions};
use powerlens_store::recording::RecordingReader;

use crate::cli::GlobalArgs;
use crate::progress;
use crate::record::{context, meta, reduced, replay, MODE_REDUCED};

#[derive(Debug, Args)]
#[command(after_long_help = "\
Examples:
  powerlens report                               # powerlens.rec, per thread
  powerlens report build.rec --by process --top 10
  powerlens report run.rec --sort wait_time_s --show tid,comm,cpu_time_s,wait_time_s
  powerlens report run.rec --list                # every column, with what it means
  powerlens report run.rec --json | jq '.energy'
  powerlens report run.rec --csv > threads.csv
  powerlens report run.rec --html run.html       # plots and a sortable grid, one offline file

Columns (see --list and docs/REPORT.md): CPU time; synchronization context switches
(switched out blocked); preemption context switches (switched out runnable); wait time
(blocked); inactive time (runnable, not running); migrations; wake-ups received by cause and
caused; idle wake-ups (first to run after its CPU left idle) with the mean idle before them;
energy attributed. The energy split sums exactly to the total: idle (baseline) + other
processes + the target's rows, with the method printed below the grid.")]
pub struct ReportArgs {
    /// The recording, as written by `powerlens record`.
    #[arg(value_name = "REC", default_value = "powerlens.rec")]
    pub recording: PathBuf,

    /// Rows per process or per thread.
    #[arg(long, value_enum, default_value_t = ByArg::Thread)]
    pub by: ByArg,

    /// Sort rows by this column, largest first [default: cpu_time_s].
    #[arg(long, value_name = "COLUMN")]
    pub sort: Option<String>,

    /// Show only the first N rows (the totals row still counts every row).
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,

    /// Show only these columns (comma-separated keys, see --list).
    #[arg(long, value_name = "COLUMNS", value_delimiter = ',')]
    pub show: Vec<String>,

    /// Hide these columns.
    #[arg(long, value_name = "COLUMNS", value_delimiter = ',')]
    pub hide: Vec<String>,

    /// List the columns with what each means, and exit.
    #[arg(long)]
    pub list: bool,

    /// Treat every process as the target: rows for all of them (other_j becomes 0).
    #[arg(long)]
    pub all_processes: bool,

    /// Print the whole report as JSON.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,

    /// Print the grid as CSV (one row per grid row).
    #[arg(long)]
    pub csv: bool,

    /// Write a self-contained HTML report to FILE: power and energy over time, per-CPU
    /// busy/idle time, a timeline of the top threads (running, runnable, blocked), the grid
    /// (sortable) and every section of the text report. Opens offline; prints cleanly.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["json", "csv"])]
    pub html: Option<PathBuf>,

    /// Judge the advice against a target machine's idle states instead of this machine's:
    /// a built-in table (server = skylake-server: C6 with a 600 µs target residency;
    /// client = skylake-client: C10, 5 ms) or a JSON FILE, `{"states": [{"name",
    /// "latency_us", "target_residency_us"}, …]}` or `powerlens info --json` saved on the
    /// target. The machine you profile on is often not the one you deploy on, and a VM's
    /// idle states (haltpoll, 1 µs) hide sleeps too short for a real CPU's deep states.
    #[arg(long, value_name = "NAME|FILE")]
    pub target: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ByArg {
    Process,
    Thread,
}

pub fn execute(_global: &GlobalArgs, args: ReportArgs) -> anyhow::Result<ExitCode> {
    let by = match args.by {
        ByArg::Process => By::Process,
        ByArg::Thread => By::Thread,
    };
    if args.list {
        print!("{}", view::list_columns(by));
        return Ok(ExitCode::SUCCESS);
    }
    let grid = GridOptions {
        by,
        sort: args.sort.clone(),
        top: args.top,
        show: args.show.clone(),
        hide: args.hide.clone(),
    };
    // A bad --target fails before the (long) analysis.
    let target = args.target.as_deref().map(target_states).transpose()?;
    let (mut report, span) = analyse(&args.recording, args.all_processes)?;
    give_advice(&mut report, target);
    if let Some(path) = &args.html {
        // Check the grid options before the second pass over the events.
        view::grid_cells(&report, &grid).map_err(|e| anyhow::anyhow!("{e}"))?;
        write_html(&args.recording, &report, &grid, span, path)?;
        eprintln!("wrote {}", path.display());
        return Ok(ExitCode::SUCCESS);
    }
    let out = if args.json {
        view::json(&report) + "\n"
    } else if args.csv {
        view::csv(&report, &grid).map_err(|e| anyhow::anyhow!("{e}"))?
    } else {
        view::text(&report, &grid).map_err(|e| anyhow::anyhow!("{e}"))?
    };
    print!("{out}");
    if !out.ends_with('\n') {
        println!();
    }
    Ok(ExitCode::SUCCESS)
}

/// Threads drawn in the HTML timeline, and its time bins.
const TIMELINE_THREADS: usize = 20;
const TIMELINE_BINS: usize = 600;

/// The HTML report: a second pass over the events builds the top threads' timeline.
fn write_html(
    rec: &std::path::Path,
    report: &model::RecordingReport,
    grid: &GridOptions,
    (start_ns, end_ns): (u64, u64),
    path: &std::path::Path,
) -> anyhow::Result<()> {
    let reader = RecordingReader::open(rec)
        .with_context(|| format!("opening the recording {}", rec.display()))?;
    let counters = super::export::energy_counters(&reader)?;
    let mut top: Vec<&model::ThreadRow> = report.threads.iter().collect();
    top.sort_by(|a, b| {
        b.cpu_time_s
            .total_cmp(&a.cpu_time_s)
            .then(a.tid.cmp(&b.tid))
    });
    let lanes: Vec<(u32, String)> = top
        .iter()
        // A reduced recording (no CPUs in the analysis) has no events to draw.
        .filter(|t| t.cpu_time_s > 0.0 && !report.cpus.is_empty())
        .take(TIMELINE_THREADS)
        .map(|t| (t.tid, format!("{} ({})", t.comm, t.tid)))
        .collect();
    let mut builder = html::TimelineBuilder::new(start_ns, end_ns, &lanes, TIMELINE_BINS);
    if !report.cpus.is_empty() {
        let bar = progress::bar(reader.event_count()?, "timeline");
        replay::replay(&reader, |e, _| builder.event(e), |n| bar.set_position(n))?;
        bar.finish_and_clear();
    }
    let timeline = builder.finish();
    let counters_missing = match &report.energy.provenance {
        Provenance::Estimated { .. } => format!(
            "the recording has no meter samples; its energy is {} over the whole recording, not a time series",
            report.energy.provenance.label()
        ),
        Provenance::Unavailable { reason, .. } => reason.clone(),
        p => format!("the recording has no energy samples ({})", p.label()),
    };
    let mut frequency_samples = Vec::new();
    reader.samples(crate::record::sampler::CPUFREQ, |t, data| {
        for pair in data.as_array().into_iter().flatten() {
            if let (Some(cpu), Some(khz)) = (pair[0].as_u64(), pair[1].as_u64()) {
                frequency_samples.push((t, cpu as u32, khz));
            }
        }
    })?;
    let title = format!("powerlens report: {}", rec.display());
    let page = html::page(&html::HtmlInput {
        title: &title,
        report,
        grid,
        counters: &counters,
        counters_missing: &counters_missing,
        timeline: &timeline,
        frequency_samples: &frequency_samples,
    })
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    super::export::write_whole(path, page.as_bytes())
}

/// Reads and analyses a recording: one pass over its events, memory bounded by threads
/// and CPUs. Also returns the analysed interval (first event, end), CLOCK_MONOTONIC ns.
pub fn analyse(
    path: &std::path::Path,
    all_processes: bool,
) -> anyhow::Result<(model::RecordingReport, (u64, u64))> {
    let reader = RecordingReader::open(path)
        .with_context(|| format!("opening the recording {}", path.display()))?;
    let mut ctx = context::read(&reader)?;
    if all_processes {
        ctx.target_pids = None;
    }
    let mode = reader.meta(meta::MODE)?;
    let mut causes = Vec::new();
    let summary: SchedSummary = if mode.as_ref().and_then(|m| m.as_str()) == Some(MODE_REDUCED) {
        reduced::summary(&reader)?
    } else {
        let mut analysis = ctx.analysis();
        let mut wakeups = WakeupAnalysis::new();
        let total = reader.event_count()?;
        if total == 0 {
            anyhow::bail!(
                "the recording {} holds no events: it stopped before its first commit (recordings commit every second), or nothing ran; record again",
                path.display()
            );
        }
        let bar = progress::bar(total, "analysing");
        let stats = replay::replay(
            &reader,
            |e, context| {
                analysis.feed_in_context(e, context);
                wakeups.feed_in_context(e, context);
            },
            |n| bar.set_position(n),
        )?;
        bar.finish_and_clear();
        let stop = reader.meta(meta::STOP)?;
        let end_ns = stop
            .as_ref()
            .and_then(|s| s["monotonic_ns"].as_u64())
            .unwrap_or(0);
        if stats.reordered > 0 {
            eprintln!(
                "note: {} events arrived out of order by microseconds and were moved to the previous event's time",
                stats.reordered
            );
        }
        causes = wakeups.finish(end_ns);
        analysis.finish(end_ns)
    };
    let busy_s = summary.threads.iter().map(|t| t.cpu_time_ns).sum::<u64>() as f64 / 1e9;
    let interval = (summary.start_ns, summary.end_ns);
    ctx.energy = context::energy(&reader, interval, busy_s)?;
    ctx.sysfs_idle = context::sysfs_idle(&reader, interval)?;
    let mut report = model::build(&summary, &ctx);
    model::attach_wakeup_causes(&mut report, causes, &ctx);
    Ok((report, interval))
}

/// Runs the advice rules on `report`, judged against `target`'s idle states or else this
/// machine's.
fn give_advice(report: &mut model::RecordingReport, target: Option<JudgedStates>) {
    let states = target.or_else(|| JudgedStates::this_machine(report));
    report.advice_judged_against = states.as_ref().map(|s| s.source.clone());
    report.advice = advice::advise(&advice::AdviceInput {
        report,
        // Per-function rows come with the recording's stacks (powerlens_core::stacks).
        functions: &[],
        states,
        max_frequency_mhz: None,
    });
}

/// `--target NAME|FILE`: a built-in table, else a file; the error names the fix.
fn target_states(target: &str) -> anyhow::Result<JudgedStates> {
    if let Some((source, states)) = advice::targets::builtin(target) {
        return Ok(JudgedStates { source, states });
    }
    let path = std::path::Path::new(target);
    let text = std::fs::read_to_string(path).map_err(|e| {
        anyhow::anyhow!(
            "--target {target}: not a built-in table ({}) and not a readable file ({e}); name a table, or save `powerlens info --json` on the target machine and pass that file",
            advice::targets::builtin_names().join(", ")
        )
    })?;
    let states =
        advice::targets::parse(&text).map_err(|e| anyhow::anyhow!("--target {target}: {e}"))?;
    Ok(JudgedStates {
        source: format!("target {}", path.display()),
        states,
    })
}
