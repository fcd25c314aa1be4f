//! A recording analysed as `report` shows it: opened and checked, its stacks resolved,
//! every event replayed once through the scheduler, stack and wake-up analyses, and the
//! report model built with the recording's energy, idle-state counters and battery. The
//! commands that read recordings (`report`, `diff`, `demo`) and the recording fuzz target
//! call this one function, so that they read a file the same way. What the analysis needs
//! besides the events and stacks comes from the recording's [`Header`], read in one trip.

use powerlens_core::sched::analysis::SchedSummary;
use powerlens_core::sched::report as model;
use powerlens_core::sched::wakeups::{self, WakeupAnalysis};
use powerlens_core::stacks::attribution::{StackAnalysis, StackCharges, StackMetricsKept};
use powerlens_core::stacks::grid::{self, Grouping};
use powerlens_core::stacks::{FunctionScope, ResolvedStacks};
use powerlens_store::recording::{ContentCheck, ContentParts, RecordingReader};
use powerlens_store::StoreError;
use powerlens_sys::Roots;

use crate::error::{Doing, RecordError};
use crate::header::Header;
use crate::{context, meta, reduced, replay, symbols};

/// What to analyse besides the thread grid.
pub struct AnalyseOptions<'a> {
    pub all_processes: bool,
    /// Fill `report.functions` grouped this way (needs stacks).
    pub grouping: Option<Grouping>,
    /// Analyse the call stacks (when the recording has them).
    pub stacks: bool,
    /// The per-stack metrics to keep: every one for a function grid, stack tree or folded
    /// stacks, only what the advice cites otherwise.
    pub stack_metrics: StackMetricsKept,
    pub roots: &'a Roots,
    /// A full charge for the battery-life figures, instead of the one recorded.
    pub battery_wh: Option<f64>,
    /// Which code the function view charges (`report --program-only`).
    pub function_scope: FunctionScope,
}

/// What the analysis has to tell the user as it goes: warnings and notes (a damaged file,
/// frames without symbols, events moved in time) and how far the pass is.
pub trait AnalyseObserver {
    /// `kind` is "warning" or "note".
    fn tell(&mut self, kind: &str, message: &str);
    /// The pass over the events begins; `total` events are to come.
    fn pass_started(&mut self, _total: u64) {}
    /// `done` events of the pass are analysed.
    fn pass_at(&mut self, _done: u64) {}
    /// The pass is over.
    fn pass_ended(&mut self) {}
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
    /// What the recording holds besides its events, for a view that reads more of it
    /// (the HTML report's timeline and frequencies).
    pub header: Header,
}

/// Reads and analyses a recording: one pass over its events, memory bounded by threads,
/// CPUs and distinct stacks.
pub fn analyse(
    path: &std::path::Path,
    opts: &AnalyseOptions<'_>,
    observer: &mut dyn AnalyseObserver,
) -> Result<Analysed, RecordError> {
    // Three threads share the work: the decode thread reads, merges and runs the wake-up
    // forensics (they need nothing from the thread analysis), a thread aside resolves the
    // stacks and reads what the content checksum covers besides the chunks (the pass needs
    // neither until its end), and this one runs the thread analysis with its stack layer
    // (docs/PERFORMANCE.md). The decode thread, which has the most to do, starts before
    // this one has opened the recording.
    let replay = replay::start(path, forensics, |w, e, c| {
        w.feed_with_stack(e, c.thread(), c.stack())
    })?;
    let reader = crate::open_unchecked(path)?;
    let header = Header::read(&reader)?;
    if header.is_reduced() {
        let ctx = read_context(&header, opts);
        tell_content(path, reader.check_content(), observer)?;
        let summary = reduced::summary(&header)?;
        let no_stacks_reason = "it is a reduced recording (procfs samples, no trace); record as root or with a lower kernel.perf_event_paranoid";
        let pass = Pass {
            summary,
            causes: Vec::new(),
            stacks: None,
        };
        return Ok(build(header, ctx, pass, opts, no_stacks_reason.into()));
    }
    let total = reader.event_count()?;
    if total == 0 {
        return Err(RecordError::NoEvents {
            path: path.to_path_buf(),
        });
    }
    let with_stacks = opts.stacks && reader.has_stacks()?;
    let streamed = std::thread::scope(|scope| {
        let aside = std::thread::Builder::new()
            .name("powerlens-aside".into())
            .spawn_scoped(scope, || {
                let reader = crate::open_unchecked(path)?;
                let resolved = match with_stacks {
                    true => symbols::resolve_unsaved(&reader, opts.roots, opts.function_scope)?,
                    false => None,
                };
                Ok::<_, RecordError>((resolved, reader.content_parts()))
            })
            .doing(|| "starting the thread that resolves the stacks".into())?;
        let ctx = read_context(&header, opts);
        let end_ns = header.stop_ns();
        observer.pass_started(total);
        let (stats, wakeups, summary, charges) = if with_stacks {
            let mut analysis = StackAnalysis::keeping(ctx.analysis(), opts.stack_metrics);
            if stacks_sampled(&header) {
                analysis = analysis.with_sampled_stacks();
            }
            let (stats, wakeups) = replay.deliver(
                &reader,
                |e, c| analysis.feed_with_stack(e, c.thread(), c.stack()),
                |n| observer.pass_at(n),
            )?;
            let (summary, charges) = analysis.finish(end_ns);
            (stats, wakeups, summary, Some(charges))
        } else {
            let mut analysis = ctx.analysis();
            // Stacks folded into their events are ignored, as their records would be.
            let (stats, wakeups) = replay.deliver(
                &reader,
                |e, c| analysis.feed_in_context(e, c.thread()),
                |n| observer.pass_at(n),
            )?;
            (stats, wakeups, analysis.finish(end_ns), None)
        };
        let (resolved, content) = aside.join().map_err(|_| RecordError::Panicked {
            thread: "thread resolving the stacks",
        })??;
        Ok::<_, RecordError>(Streamed {
            ctx,
            end_ns,
            stats,
            wakeups,
            summary,
            charges,
            resolved,
            content,
        })
    })?;
    let Streamed {
        ctx,
        end_ns,
        stats,
        mut wakeups,
        summary,
        charges,
        resolved,
        content,
    } = streamed;
    observer.pass_ended();
    let no_stacks_reason = match &resolved {
        Some(_) => String::new(),
        None => no_stacks_reason(&header, opts),
    };
    let resolved = resolved.map(|mut r| {
        // Saved now that the decode thread no longer reads the file.
        symbols::save(&reader, &mut r);
        tell_resolved(&r, observer);
        r
    });
    if wakeups.ignored_expiries() > 0 {
        observer.tell("note", &format!(
            "{} expiries of powerlens's own cpu-clock sampling timer are left out of the wake-up causes",
            wakeups.ignored_expiries()
        ));
    }
    if let Some(r) = &resolved {
        wakeups.group_stacks(r.stacks.group_by_innermost_user());
    }
    let causes = wakeups.finish(end_ns);
    // Checked with the chunks the pass read, not by reading them all once more before.
    let check = content.map(|parts| parts.check_read(&stats.chunks));
    tell_content(path, check, observer)?;
    if let Some(warning) = stats.short_read(path) {
        observer.tell("warning", &warning);
    }
    if let Some(note) = stats.reordered_note() {
        observer.tell("note", &note);
    }
    let stacks = match (charges, resolved) {
        (Some(charges), Some(resolved)) => Some((charges, resolved)),
        _ => None,
    };
    let pass = Pass {
        summary,
        causes,
        stacks,
    };
    Ok(build(header, ctx, pass, opts, no_stacks_reason))
}

/// The recording's context for the analysis (its thread table, idle states, target…).
fn read_context(header: &Header, opts: &AnalyseOptions<'_>) -> model::RecordingContext {
    let mut ctx = context::read(header);
    if opts.all_processes {
        ctx.target_pids = None;
    }
    ctx
}

/// The wake-up forensics, told which timer is the recorder's own and whether the stacks
/// were sampled. Read by the decode thread from its own reader as it starts, before the
/// header is read on the caller's.
fn forensics(reader: &RecordingReader) -> Result<WakeupAnalysis, RecordError> {
    let stacks = reader.meta(meta::STACKS)?;
    let sampling_timer = stacks
        .as_ref()
        .and_then(|v| v["sampling_timer_function"].as_u64());
    let mut analysis = match sampling_timer {
        Some(f) => WakeupAnalysis::new().ignore_timer_callback(f),
        None => WakeupAnalysis::new(),
    };
    if stacks.as_ref().is_some_and(sampled) {
        analysis = analysis.with_sampled_stacks();
    }
    Ok(analysis)
}

/// What the three threads of the pass give back.
struct Streamed {
    ctx: model::RecordingContext,
    end_ns: u64,
    stats: replay::ReplayStats,
    wakeups: WakeupAnalysis,
    summary: SchedSummary,
    charges: Option<StackCharges>,
    resolved: Option<symbols::Resolved>,
    /// The content checksum but for the chunks the pass read.
    content: Result<ContentParts, StoreError>,
}

/// What the pass over the events found.
struct Pass {
    summary: SchedSummary,
    causes: Vec<wakeups::WakeupCause>,
    /// The per-stack charges and the stacks they are resolved with.
    stacks: Option<(StackCharges, symbols::Resolved)>,
}

/// Whether one switch, wake-up or timer arming in N carried its stack
/// (`stacks.events_samples_per_s`; recordings before it had one on every one).
fn stacks_sampled(header: &Header) -> bool {
    header.meta(meta::STACKS).is_some_and(sampled)
}

/// [`stacks_sampled`] from the `stacks` meta entry.
fn sampled(stacks: &serde_json::Value) -> bool {
    stacks["events_samples_per_s"].as_u64().is_some()
}

/// Why the analysis goes without the recording's stacks.
fn no_stacks_reason(header: &Header, opts: &AnalyseOptions<'_>) -> String {
    if !opts.stacks {
        return String::new();
    }
    match header.meta(meta::STACKS) {
        Some(v) if v["recorded"] == false => format!(
            "they were not recorded ({})",
            v["reason"].as_str().unwrap_or("--no-stacks")
        ),
        _ => "it was recorded without them (before powerlens recorded stacks, or with --no-stacks); record again".into(),
    }
}

/// Tells the user what resolving the stacks found: damage, new names, what has none.
fn tell_resolved(r: &symbols::Resolved, observer: &mut dyn AnalyseObserver) {
    for warning in &r.warnings {
        observer.tell("warning", warning);
    }
    if r.symbolized > 0 {
        observer.tell(
            "note",
            &format!(
                "symbolized {} frames (cached in the recording)",
                r.symbolized
            ),
        );
    }
    if let Some(note) = &r.kernel_note {
        observer.tell("note", &format!("kernel frames are unnamed: {note}"));
    }
    if let Some(note) = no_symbols_note(&r.stacks, &r.changed_files) {
        observer.tell("note", &note);
    }
}

/// The report model from what the pass found and the recording's energy, idle-state
/// counters and battery.
fn build(
    header: Header,
    mut ctx: model::RecordingContext,
    pass: Pass,
    opts: &AnalyseOptions<'_>,
    no_stacks_reason: String,
) -> Analysed {
    let Pass {
        summary,
        mut causes,
        stacks,
    } = pass;
    let busy_s = summary.threads.iter().map(|t| t.cpu_time_ns).sum::<u64>() as f64 / 1e9;
    let interval = (summary.start_ns, summary.end_ns);
    ctx.energy = context::energy(&header, interval, busy_s);
    ctx.sysfs_idle = context::sysfs_idle(&header, interval);
    let mut report = model::build(&summary, &ctx);
    report.battery = context::battery(&header, interval, &ctx.energy, opts.battery_wh);
    if let Some((_, r)) = &stacks {
        wakeups::resolve_timer_functions(&mut causes, &|addr| r.kernel_names.get(&addr).cloned());
    }
    let stacks = stacks.map(|(charges, resolved)| (charges, resolved.stacks));
    if let Some((charges, resolved)) = &stacks {
        powerlens_core::stacks::modes::split_rows(&mut report, charges, resolved);
    }
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
    Analysed {
        report,
        span: interval,
        stacks,
        no_stacks_reason,
        header,
    }
}

/// Tells the observer what a content check of the recording found, when it found damage.
fn tell_content(
    path: &std::path::Path,
    check: Result<ContentCheck, StoreError>,
    observer: &mut dyn AnalyseObserver,
) -> Result<(), RecordError> {
    if let Some(warning) = crate::content_warning(path, check)? {
        observer.tell("warning", &warning);
    }
    Ok(())
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
