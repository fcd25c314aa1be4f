//! `powerlens report REC`: the application-centric power grid of a recording — per process
//! or thread, why the CPUs burned or saved energy — with the system figures above it and
//! the energy split below it.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};

use powerlens_core::advice::{self, FunctionEvidence, JudgedStates};
use powerlens_core::sched::analysis::SchedSummary;
use powerlens_core::sched::event::{Event, Tid};
use powerlens_core::sched::report as model;
use powerlens_core::sched::wakeups::{self, WakeupAnalysis};
use powerlens_core::stacks::attribution::{StackAnalysis, StackCharges};
use powerlens_core::stacks::grid::{self, Grouping};
use powerlens_core::stacks::locks;
use powerlens_core::stacks::ResolvedStacks;
use powerlens_sys::Roots;

use powerlens_core::provenance::Provenance;
use powerlens_report::html;
use powerlens_report::recording::{self as view, By, GridOptions};
use powerlens_store::recording::RecordingReader;

use crate::cli::GlobalArgs;
use crate::cmd::run::BatteryArgs;
use crate::progress;
use powerlens_record::{context, meta, reduced, replay, symbols, MODE_REDUCED};

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
    /// Per function: the innermost frame of the program's own code (needs stacks).
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
            roots: &roots,
            battery_wh: args.battery.battery_wh,
            side: String::new(),
        },
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
            print!(
                "{}",
                grid::tree(charges, &report.threads, resolved, &metric, TREE_MIN_PCT)
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

/// Branches of `--tree` below this share of the total are cut.
const TREE_MIN_PCT: f64 = 1.0;

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
    let builder = html::TimelineBuilder::new(start_ns, end_ns, &lanes, TIMELINE_BINS);
    // The lanes are the scheduler analysis' own intervals, so that they agree with the grid.
    let mut analysis = context::read(&reader)?.analysis().with_charges(builder);
    if !report.cpus.is_empty() {
        let bar = progress::bar(reader.event_count()?, "timeline");
        replay::replay(
            &reader,
            |e, c| {
                analysis.charges_mut().event(e);
                analysis.feed_in_context(e, c);
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
    let frequency_samples = context::frequency_samples(&reader)?;
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

/// What to analyse besides the thread grid.
pub struct AnalyseOptions<'a> {
    pub all_processes: bool,
    /// Fill `report.functions` grouped this way (needs stacks).
    pub grouping: Option<Grouping>,
    /// Analyse the call stacks (when the recording has them).
    pub stacks: bool,
    pub roots: &'a Roots,
    /// A full charge for the battery-life figures, instead of the one recorded.
    pub battery_wh: Option<f64>,
    /// Which recording this is, put before each warning and note (`diff` analyses two:
    /// "A (a.rec): "); empty for one.
    pub side: String,
}

/// A recording analysed.
pub struct Analysed {
    pub report: model::RecordingReport,
    /// The analysed interval (first event, end), CLOCK_MONOTONIC ns.
    pub span: (u64, u64),
    /// The per-stack charges and the resolved stacks, when asked for and recorded.
    pub stacks: Option<(StackCharges, ResolvedStacks)>,
    /// Why `stacks` is `None`.
    pub no_stacks_reason: String,
}

/// Reads and analyses a recording: one pass over its events, memory bounded by threads,
/// CPUs and distinct stacks.
pub fn analyse(path: &std::path::Path, opts: &AnalyseOptions<'_>) -> anyhow::Result<Analysed> {
    // Warnings and notes on stderr, named after the recording when there are two.
    let say = |kind: &str, message: &str| eprintln!("{kind}: {}{message}", opts.side);
    let (reader, damage) = powerlens_record::open_recording(path)?;
    if let Some(warning) = damage {
        say("warning", &warning);
    }
    let mut ctx = context::read(&reader)?;
    if opts.all_processes {
        ctx.target_pids = None;
    }
    let mode = reader.meta(meta::MODE)?;
    let reduced = mode.as_ref().and_then(|m| m.as_str()) == Some(MODE_REDUCED);
    let mut no_stacks_reason = String::new();
    let resolved = if !opts.stacks {
        None
    } else if reduced {
        no_stacks_reason = "it is a reduced recording (procfs samples, no trace); record as root or with a lower kernel.perf_event_paranoid".into();
        None
    } else {
        let r = symbols::resolve(&reader, opts.roots)?;
        if r.is_none() {
            no_stacks_reason = match reader.meta(meta::STACKS)? {
                Some(v) if v["recorded"] == false => format!(
                    "they were not recorded ({})",
                    v["reason"].as_str().unwrap_or("--no-stacks")
                ),
                _ => "it was recorded without them (before powerlens recorded stacks, or with --no-stacks); record again".into(),
            };
        }
        r
    };
    if let Some(r) = &resolved {
        for warning in &r.warnings {
            say("warning", warning);
        }
        if r.symbolized > 0 {
            say(
                "note",
                &format!(
                    "symbolized {} frames (cached in the recording)",
                    r.symbolized
                ),
            );
        }
        if let Some(note) = &r.kernel_note {
            say("note", &format!("kernel frames are unnamed: {note}"));
        }
        if let Some(note) = no_symbols_note(&r.stacks, &r.changed_files) {
            say("note", &note);
        }
    }
    let mut causes = Vec::new();
    let (summary, charges): (SchedSummary, Option<StackCharges>) = if reduced {
        (reduced::summary(&reader)?, None)
    } else {
        let total = reader.event_count()?;
        if total == 0 {
            anyhow::bail!(
                "the recording {} holds no events: it stopped before its first commit (recordings commit every second), or nothing ran; record again",
                path.display()
            );
        }
        let stop = reader.meta(meta::STOP)?;
        let end_ns = stop
            .as_ref()
            .and_then(|s| s["monotonic_ns"].as_u64())
            .unwrap_or(0);
        let bar = progress::bar(total, "analysing");
        let mut wakeups = WakeupAnalysis::new().group_stacks(
            resolved
                .as_ref()
                .map(|r| r.stacks.group_by_innermost_user())
                .unwrap_or_default(),
        );
        let sampling_timer = reader
            .meta(meta::STACKS)?
            .and_then(|v| v["sampling_timer_function"].as_u64());
        if let Some(f) = sampling_timer {
            wakeups = wakeups.ignore_timer_callback(f);
        }
        let (stats, result) = if resolved.is_some() {
            let mut analysis = StackAnalysis::new(ctx.analysis());
            let stats = one_pass(&reader, &mut wakeups, &bar, |e, c| {
                analysis.feed_in_context(e, c)
            })?;
            let (summary, charges) = analysis.finish(end_ns);
            (stats, (summary, Some(charges)))
        } else {
            let mut analysis = ctx.analysis();
            let stats = one_pass(&reader, &mut wakeups, &bar, |e, c| {
                analysis.feed_in_context(e, c)
            })?;
            (stats, (analysis.finish(end_ns), None))
        };
        if wakeups.ignored_expiries() > 0 {
            say("note", &format!(
                "{} expiries of powerlens's own cpu-clock sampling timer are left out of the wake-up causes",
                wakeups.ignored_expiries()
            ));
        }
        causes = wakeups.finish(end_ns);
        bar.finish_and_clear();
        if let Some(warning) = stats.short_read(path) {
            say("warning", &warning);
        }
        if let Some(note) = stats.reordered_note() {
            say("note", &note);
        }
        result
    };
    let busy_s = summary.threads.iter().map(|t| t.cpu_time_ns).sum::<u64>() as f64 / 1e9;
    let interval = (summary.start_ns, summary.end_ns);
    ctx.energy = context::energy(&reader, interval, busy_s)?;
    ctx.sysfs_idle = context::sysfs_idle(&reader, interval)?;
    let mut report = model::build(&summary, &ctx);
    report.battery = context::battery(&reader, interval, &ctx.energy, opts.battery_wh)?;
    if let Some(r) = &resolved {
        wakeups::resolve_timer_functions(&mut causes, &|addr| r.kernel_names.get(&addr).cloned());
    }
    let stacks = match (charges, resolved) {
        (Some(charges), Some(resolved)) => Some((charges, resolved.stacks)),
        _ => None,
    };
    if let Some((_, resolved)) = &stacks {
        wakeups::resolve(&mut causes, &|id| {
            let f = resolved.innermost_user(id)?;
            Some((resolved.function(f).name.clone(), resolved.describe(id)))
        });
    }
    model::attach_wakeup_causes(&mut report, causes, &ctx);
    if let (Some(grouping), Some((charges, resolved))) = (opts.grouping, &stacks) {
        let names: Vec<(u32, String)> = ctx
            .idle_states
            .as_ref()
            .map(|states| states.iter().map(|s| (s.index, s.name.clone())).collect())
            .unwrap_or_default();
        let state_name = |i: u32| {
            names
                .iter()
                .find(|(k, _)| *k == i)
                .map(|(_, n)| n.clone())
                .unwrap_or_else(|| format!("state{i}"))
        };
        report.functions = grid::rows(charges, &report.threads, resolved, grouping, &state_name);
        report.function_grouping = Some(
            match grouping {
                Grouping::Function => "function",
                Grouping::FunctionInclusive => "function_inclusive",
                Grouping::Stack => "stack",
            }
            .into(),
        );
    }
    Ok(Analysed {
        report,
        span: interval,
        stacks,
        no_stacks_reason,
    })
}

/// One pass over the events: the thread analysis `feed` (with the per-stack layer when there
/// are stacks) and the wake-up forensics, on this thread while the decode thread reads,
/// decodes and merges. Generic, not `dyn`: it runs per event. Measured on a default
/// recording (docs/PERFORMANCE.md): the forensics on the decode thread made the report
/// slower, decoding being the heavier half once the stack layer got cheaper.
fn one_pass(
    reader: &RecordingReader,
    wakeups: &mut WakeupAnalysis,
    bar: &indicatif::ProgressBar,
    mut feed: impl FnMut(&Event, Option<Tid>),
) -> anyhow::Result<replay::ReplayStats> {
    replay::replay(
        reader,
        |e, context| {
            feed(e, context);
            wakeups.feed_in_context(e, context);
        },
        |n| bar.set_position(n),
    )
}

/// Which files' code had no symbols (shown as `FILE [no symbols]`), and the fix; `None`
/// when every file frame was named. Only files on disk: the kernel has its own note, and
/// pseudo mappings (`[vdso]`, `memfd:…`, JIT code) have no symbols to install.
fn no_symbols_note(stacks: &ResolvedStacks, changed_files: &[String]) -> Option<String> {
    let files: std::collections::BTreeSet<&str> = stacks
        .functions
        .iter()
        .filter(|f| !f.resolved && f.module.starts_with('/') && !f.module.ends_with("(deleted)"))
        // Those lack a matching build, not debug symbols: a warning of their own says so.
        .filter(|f| !changed_files.contains(&f.module))
        .map(|f| powerlens_core::stacks::short(&f.module))
        .collect();
    (!files.is_empty()).then(|| {
        format!(
            "no symbols for some code of {} (shown as FILE {}, one row per file): install the file's debug symbols (Debian: its -dbgsym package from the debian-debug archive, into /usr/lib/debug, which powerlens follows), then record again",
            files.into_iter().collect::<Vec<_>>().join(", "),
            powerlens_core::stacks::NO_SYMBOLS
        )
    })
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
