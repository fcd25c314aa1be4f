//! `powerlens report REC`: the application-centric power grid of a recording — per process
//! or thread, why the CPUs burned or saved energy — with the system figures above it and
//! the energy split below it.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};

use powerlens_core::advice::{self, FunctionEvidence, JudgedStates};
use powerlens_core::sched::report as model;
use powerlens_core::stacks::attribution::{StackCharges, StackMetricsKept};
use powerlens_core::stacks::grid::{self, Grouping};
use powerlens_core::stacks::locks;
use powerlens_core::stacks::{FunctionScope, ResolvedStacks};

use powerlens_core::provenance::Provenance;
use powerlens_report::html;
use powerlens_report::names::{NameFit, PIPE_NAME_CHARS};
use powerlens_report::recording::{self as view, By, GridOptions};
use powerlens_store::recording::RecordingReader;

use crate::args::GlobalArgs;
use crate::cmd::run::BatteryArgs;
use crate::progress;
use powerlens_record::analyse::{analyse, AnalyseOptions};
use powerlens_record::header::Header;
use powerlens_record::{context, replay};

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

    /// Sort rows by this column, largest first: its key (the JSON and CSV name) or the
    /// header the grid shows ("wait s"); see --list [default: cpu_time_s].
    #[arg(long, value_name = "COLUMN")]
    pub sort: Option<String>,

    /// Show only the first N rows (the totals row still counts every row).
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,

    /// Show only these columns (comma-separated keys or headers, see --list).
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

    /// With --by function: totals for every function anywhere on the stack (inclusive),
    /// not only the innermost frame of the program's own code.
    #[arg(long)]
    pub inclusive: bool,

    /// Charge the function view's time to the program's own code only: frames of the
    /// distribution's libraries (under /usr/lib) fold into their caller, as the kernel and
    /// the C runtime always do. By default a library's frame holds its time: a thin front
    /// end such as xz shows its time in liblzma, where the work is.
    #[arg(long)]
    pub program_only: bool,

    /// Print the caller/callee tree of the recorded stacks (outermost first), weighed by
    /// the --sort metric (default cpu_time_s); branches under 1% are cut.
    #[arg(long, conflicts_with_all = ["json", "csv", "format"])]
    pub tree: bool,

    /// Write the stacks in another format instead of the grid.
    #[arg(long, value_enum, conflicts_with_all = ["json", "csv"])]
    pub format: Option<FormatArg>,

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

    #[command(flatten)]
    pub battery: BatteryArgs,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ByArg {
    Process,
    Thread,
    /// Per function: the innermost frame of user-space code, the executable's or a
    /// library's (the C runtime's frames fold into their caller; see --program-only;
    /// needs stacks).
    Function,
    /// Per call stack (needs stacks).
    Stack,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// Folded stacks for flame-graph tools (flamegraph.pl, inferno, speedscope): one line
    /// per stack, `thread;outer;…;inner VALUE`, weighed by the --sort metric.
    Folded,
}

pub fn execute(global: &GlobalArgs, args: ReportArgs) -> anyhow::Result<ExitCode> {
    let by = match args.by {
        ByArg::Process => By::Process,
        ByArg::Thread => By::Thread,
        ByArg::Function => By::Function,
        ByArg::Stack => By::Stack,
    };
    if args.list {
        print!("{}", view::list_columns(by));
        return Ok(ExitCode::SUCCESS);
    }
    if args.inclusive && by != By::Function {
        anyhow::bail!("--inclusive goes with --by function (it sums every function on each stack)");
    }
    let stack_output = args.tree || args.format.is_some();
    let metric = args.sort.clone().unwrap_or_else(|| "cpu_time_s".into());
    if stack_output && !grid::STACK_METRICS.contains(&metric.as_str()) {
        anyhow::bail!(
            "--sort {metric}: folded stacks and trees weigh stacks by one of {}",
            grid::STACK_METRICS.join(", ")
        );
    }
    let grouping = match by {
        By::Function if args.inclusive => Some(Grouping::FunctionInclusive),
        By::Function => Some(Grouping::Function),
        By::Stack => Some(Grouping::Stack),
        _ => None,
    };
    // The HTML page shows the functions beside any grid, when the recording has stacks.
    let rows_of_functions = grouping.or(args.html.is_some().then_some(Grouping::Function));
    let grid = GridOptions {
        by,
        sort: args.sort.clone(),
        top: args.top,
        show: args.show.clone(),
        hide: args.hide.clone(),
        names: text_name_fit(),
    };
    // A bad --target fails before the (long) analysis.
    let target = args.target.as_deref().map(target_states).transpose()?;
    let needs_stacks = grouping.is_some() || stack_output;
    let roots = global.roots()?;
    let analysed = analyse(
        &args.recording,
        &AnalyseOptions {
            all_processes: args.all_processes,
            grouping: rows_of_functions,
            // Also without --by function: wake-up causes and advice name functions.
            stacks: true,
            stack_metrics: if rows_of_functions.is_some() || stack_output {
                StackMetricsKept::All
            } else {
                StackMetricsKept::Advice
            },
            roots: &roots,
            battery_wh: args.battery.battery_wh,
            function_scope: match args.program_only {
                true => FunctionScope::ProgramOnly,
                false => FunctionScope::Modules,
            },
        },
        &mut progress::AnalysisOnStderr::new(),
    )?;
    let (mut report, span) = (analysed.report, analysed.span);
    let (evidence, lock_waits) = analysed
        .stacks
        .as_ref()
        .map(|(charges, resolved)| {
            (
                function_evidence(charges, &report.threads, resolved),
                locks::interpreter_lock_waits(charges, &report.threads, resolved),
            )
        })
        .unwrap_or_default();
    give_advice(&mut report, target, &evidence, &lock_waits);
    if needs_stacks && analysed.stacks.is_none() {
        anyhow::bail!(
            "{} has no call stacks: {}",
            args.recording.display(),
            analysed.no_stacks_reason
        );
    }
    if let Some((charges, resolved)) = &analysed.stacks {
        if args.tree {
            let tree = grid::tree(charges, &report.threads, resolved, &metric, TREE_MIN_PCT);
            print!(
                "{}",
                powerlens_report::stack_tree::text(&tree, text_name_fit())
            );
            return Ok(ExitCode::SUCCESS);
        }
        if args.format == Some(FormatArg::Folded) {
            print!(
                "{}",
                grid::folded(charges, &report.threads, resolved, &metric)
            );
            return Ok(ExitCode::SUCCESS);
        }
    }
    if let Some(path) = &args.html {
        // Check the grid options before the second pass over the events.
        view::grid_cells(&report, &grid).map_err(|e| anyhow::anyhow!("{e}"))?;
        write_html(
            &args.recording,
            &report,
            &analysed.header,
            &grid,
            span,
            path,
        )?;
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

/// How wide the text view's function names may be: a terminal's width shared with the
/// other columns, or [`PIPE_NAME_CHARS`] when stdout is a pipe or a file (whose reader's
/// width is unknown). The JSON, CSV, HTML and folded outputs keep names whole.
pub(crate) fn text_name_fit() -> NameFit {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return NameFit::Cap(PIPE_NAME_CHARS);
    }
    match ratatui::crossterm::terminal::size() {
        // A pseudo-terminal nobody sized (some CI runners) says 0 columns.
        Ok((columns, _)) if columns > 0 => NameFit::Terminal(columns as usize),
        _ => NameFit::Cap(PIPE_NAME_CHARS),
    }
}

/// Branches of `--tree` below this share of the total are cut.
const TREE_MIN_PCT: f64 = 1.0;

/// Threads drawn in the HTML timeline, and its time bins.
const TIMELINE_THREADS: usize = 20;
const TIMELINE_BINS: usize = 600;

/// The HTML report: a second pass over the events builds the top threads' timeline.
fn write_html(
    rec: &std::path::Path,
    report: &model::RecordingReport,
    header: &Header,
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
    let builder = html::TimelineBuilder::new(start_ns, end_ns, &lanes, TIMELINE_BINS);
    // The lanes are the scheduler analysis' own intervals, so that they agree with the grid.
    let mut analysis = context::read(header).analysis().with_charges(builder);
    if !report.cpus.is_empty() {
        let bar = progress::bar(reader.event_count()?, "timeline");
        replay::replay(
            &reader,
            |e, c| {
                analysis.charges_mut().event(e);
                analysis.feed_in_context(e, c.thread());
            },
            |n| bar.set_position(n),
        )?;
        bar.finish_and_clear();
    }
    let timeline = analysis.finish_with_charges(end_ns).1.finish();
    let counters_missing = match &report.energy.provenance {
        Provenance::Estimated { .. } => format!(
            "the recording has no meter samples; its energy is {} over the whole recording, not a time series",
            report.energy.provenance.label()
        ),
        Provenance::Unavailable { reason, .. } => reason.clone(),
        p => format!("the recording has no energy samples ({})", p.label()),
    };
    let frequency_samples = context::frequency_samples(header);
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

/// Per thread and function (innermost user frame), what the advice rules cite.
fn function_evidence(
    charges: &StackCharges,
    threads: &[model::ThreadRow],
    resolved: &ResolvedStacks,
) -> Vec<FunctionEvidence> {
    grid::per_thread_functions(charges, threads, resolved)
        .into_iter()
        .map(|(tid, f, m)| {
            let f = resolved.function(f);
            FunctionEvidence {
                function: f.name.clone(),
                module: f.module.clone(),
                tid,
                cpu_time_s: m.cpu_ns as f64 / 1e9,
                sync_switches: m.sync_switches,
                preempt_switches: m.preempt_switches,
                idle_wakeups: m.idle_wakeups,
            }
        })
        .collect()
}

/// Runs the advice rules on `report`, judged against `target`'s idle states or else this
/// machine's.
fn give_advice(
    report: &mut model::RecordingReport,
    target: Option<JudgedStates>,
    functions: &[FunctionEvidence],
    lock_waits: &[locks::LockWait],
) {
    let states = target.or_else(|| JudgedStates::this_machine(report));
    report.advice_judged_against = states.as_ref().map(|s| s.source.clone());
    report.advice = advice::advise(&advice::AdviceInput {
        report,
        functions,
        states,
        max_frequency_mhz: None,
        lock_waits,
    });
}

/// `--target NAME|FILE`: a built-in table, else a file; the error names the fix.
pub(crate) fn target_states(target: &str) -> anyhow::Result<JudgedStates> {
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
