//! One recording from start to end: tracing opened (or the reduced fallback chosen), the
//! start's metadata, the sampler and drain started, the command started, the loop that
//! writes what they give and commits every second, and the end: the command's exit,
//! lost records, the unwinding counts, the symbol cache.

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use powerlens_core::run::ExitStatus;
use powerlens_core::stacks::FunctionScope;
use powerlens_store::recording::RecordingReader;
use powerlens_sys::trace::{monotonic_now_ns, Collector, CollectorOptions};
use powerlens_sys::{topology, Roots, SysError};

use crate::convert::{recorded_event_names, Converter};
use crate::drain::Drainer;
use crate::error::{Doing, RecordError};
use crate::exec_watch::ExecWatch;
use crate::meta::{self, MODE_REDUCED, MODE_TRACE};
use crate::meter::Meter;
use crate::on_time::OnTime;
use crate::recorder::{create_file, Recorder};
use crate::sampler::{Sampler, SamplerConfig, ThreadScope};
use crate::stacks::StackRecorder;
use crate::threads::ThreadTable;
use crate::{
    cost_cache, exec, interrupt, stacks, symbols, untraced, Phase, RecordOptions, RecordSummary,
    Target,
};

/// How much larger the rings are when records carry stacks (a call chain and a
/// `--stack-bytes` copy of the user stack on about half the records).
const STACK_RING_FACTOR: usize = 2;

/// The longest sample interval of a reduced recording.
const REDUCED_SAMPLE_INTERVAL: Duration = Duration::from_millis(20);
/// The recording is committed this often, each commit holding the events up to its time
/// ([`OnTime::catch_up`]): a SIGKILL loses at most this much and the commit under way,
/// well within the second the documentation promises, also on a machine whose CPUs are
/// all busy. A commit is cheap (no fsync: the kernel has the pages once written).
const FLUSH_EVERY: Duration = Duration::from_millis(500);
/// How often the loop looks for the command's exit where no pidfd tells it.
const LOOK_EVERY: Duration = Duration::from_millis(50);

/// Records what `opts` asks into `opts.output`, and tells how it went.
pub fn record(roots: &Roots, opts: &RecordOptions) -> Result<RecordSummary, RecordError> {
    let mut notes = Vec::new();
    // The untraced runs come before any tracepoint is open: they run as the command runs
    // without powerlens. They start no thread here, which tracing's private mount needs.
    let untraced_runs = untraced::run(opts)?;
    // Tracing starts this long after the recorder did: a recording covers nothing before.
    let entered = Instant::now();
    // Opening the events, measuring their cost and reading the machine is the recorder's
    // own CPU time, which nothing recorded pays for: beside CPU-bound work at nice 0 it
    // took three times as long (1.6 s against 0.55 s for the events alone, debug build).
    // Put back before any thread starts, since threads inherit it.
    let raised = crate::priority::Raised::now();
    // Tracing first: mounting tracefs privately must happen before any thread starts.
    let mut collector = if opts.reduced {
        notes.push("reduced recording requested (--reduced): procfs samples only".to_string());
        None
    } else {
        open_collector(roots, opts, &mut notes)?
    };
    // The instrument's cost per event, measured before anything else runs beside it.
    let tracing_cost = collector.as_mut().map(|c| {
        let _phase = (opts.show_phase)("measuring the cost of tracing");
        let chains = format!(
            "kernel_frames={} user_chain={} sampled={}",
            opts.kernel_stacks,
            opts.full_stacks,
            opts.stack_samples_per_s.is_some()
        );
        cost_cache::measured_or_kept(roots, c, opts.stacks_hz.is_some(), &chains)
    });
    let mode = if collector.is_some() {
        MODE_TRACE
    } else {
        MODE_REDUCED
    };
    if let Target::Pid(pid) = opts.target {
        if !roots.proc(pid.to_string()).is_dir() {
            return Err(RecordError::NoSuchProcess { pid });
        }
    }
    let cpus = topology::read_online(roots)?;
    let meter = Meter::open(roots, &opts.meter)?;
    if let Some(battery) = &meter.battery {
        notes.push(battery.describe());
    }
    let baseline_w = measure_baseline(&meter, opts.baseline, opts.show_phase)?;

    let mut writer = create_file(&opts.output, opts.tell_now)?;
    meta::write_start(
        &mut writer,
        roots,
        opts,
        mode,
        &collector,
        &meter,
        baseline_w,
    )?;
    if !untraced_runs.is_empty() {
        writer.set_meta(meta::UNTRACED_RUNS, &serde_json::to_value(&untraced_runs)?)?;
    }
    let mut threads = ThreadTable::default();
    threads.scan_procfs(roots);
    let recorder_threads = threads.len();

    // The process tree a reduced recording samples: known now for -p, set once the
    // command has started.
    let root = Arc::new(AtomicU32::new(match opts.target {
        Target::Pid(pid) => pid,
        _ => 0,
    }));
    let scope = match (mode, &opts.target) {
        (MODE_TRACE, _) => ThreadScope::Off,
        (_, Target::All) => ThreadScope::All,
        _ => ThreadScope::Tree(root.clone()),
    };
    drop(raised);
    let mut recorder = Recorder::new(writer);
    // Sampling starts before tracing, so the energy at the first event is interpolated
    // between two samples rather than guessed.
    // A reduced recording loses each thread's work after its last sample: sample it often
    // (procfs reads of one process tree are cheap).
    let interval = if mode == MODE_REDUCED {
        opts.sample_interval.min(REDUCED_SAMPLE_INTERVAL)
    } else {
        opts.sample_interval
    };
    let sampler = Sampler::start(SamplerConfig {
        roots: roots.clone(),
        cpus,
        interval,
        meter: meter.model().is_none().then_some(meter),
        threads: scope,
    });
    // Each exec'ed process's argv (`commands` samples), for a traced recording: what
    // `diff` pairs processes of the same name by.
    let tree = (!matches!(opts.target, Target::All)).then(|| root.clone());
    let exec_watch = match collector.is_some().then(|| ExecWatch::start(roots, tree)) {
        Some(Ok(w)) => Some(w),
        Some(Err(why)) => {
            notes.push(format!("no command lines of the processes that ran: {why}"));
            None
        }
        None => None,
    };
    let drainer = match collector {
        Some(mut c) => {
            let converter = Converter::new(c.events());
            // An event whose format lacks a field the converter reads is recorded but
            // unused: list it with the events the kernel lacks.
            let mut unavailable = meta::unavailable_events(&c);
            for (event, field) in &converter.malformed {
                unavailable.push(json!({
                    "event": event,
                    "reason": format!("its tracepoint format has no field {field:?}"),
                    "fix": null,
                }));
            }
            recorder
                .writer
                .set_meta(meta::UNAVAILABLE, &json!(unavailable))?;
            let stack_meta = meta::stacks_meta(&c, opts, roots);
            recorder.writer.set_meta(meta::STACKS, &stack_meta)?;
            if let Some(cost) = &tracing_cost {
                recorder
                    .writer
                    .set_meta(meta::TRACING_COST, &serde_json::to_value(cost)?)?;
            }
            let stacks = (stack_meta["recorded"] == true).then(|| StackRecorder::new(roots));
            c.enable()?;
            Some(Drainer::start(c, converter, threads, stacks, roots.clone()))
        }
        None => {
            // A reduced recording: the threads that exist now, then procfs samples.
            for row in threads.take_changed() {
                recorder.writer.upsert_thread(&row)?;
            }
            None
        }
    };
    let start_ns = monotonic_now_ns();
    let started = Instant::now();
    recorder.writer.set_meta(
        meta::START_UP,
        &json!({
            // From the recorder's own start where procfs says when that was; after
            // untraced runs, or where it does not say, from the end of those runs.
            "start_up_s": untraced_runs
                .is_empty()
                .then(|| powerlens_sys::procfs::process::own_age_s(roots))
                .flatten()
                .unwrap_or_else(|| started.duration_since(entered).as_secs_f64()),
            "tracing_cost_s": tracing_cost
                .as_ref()
                .map(|c| if c.kept_from_this_boot { 0.0 } else { c.calibration_s }),
        }),
    )?;
    if drainer.is_some() && !crate::priority::may_raise() {
        let why = "the recorder may not raise its threads' priority (that needs CAP_SYS_NICE): on a machine whose CPUs are all busy its commits can fall seconds behind, and a recorder killed then loses more than its last second";
        (opts.tell_now)(&format!("warning: {why}"));
        notes.push(why.to_string());
    }
    let mut on_time = OnTime::default();
    interrupt::install();

    let child = match &opts.target {
        Target::Command(argv) => match exec::spawn(argv, opts.show_output, &opts.command_env) {
            Ok(pid) => {
                root.store(pid, Ordering::SeqCst);
                Some(pid)
            }
            Err(e) => {
                // Nothing was recorded of a command that never ran: leave no file behind.
                let path = recorder.writer.path().to_path_buf();
                drop((recorder, drainer, sampler));
                let _ = std::fs::remove_file(&path);
                return Err(e);
            }
        },
        _ => None,
    };
    // The command's wall time, from `start_ns` to its exit as a pidfd saw it.
    let mut exit_watch = child.map(exec::ExitWatch::start);
    let root_pid = child.or(match opts.target {
        Target::Pid(pid) => Some(pid),
        _ => None,
    });
    recorder
        .writer
        .set_meta(meta::TARGET, &meta::target(&opts.target, root_pid))?;
    // The loop sleeps until a batch of events comes (one per copy of the rings, 20 a
    // second), the command (or the `-p` process) exits, a signal comes, or the next commit
    // or the end of `--duration` is due; it also woke every 50 ms besides. Batches are
    // taken as they come: left in their channel until the commit, which would leave one
    // wake-up a second, they cost the pipe load 3–4% more CPU time in paired rounds (the
    // loop that held them was cheaper in 43 of 163 against the one before), for a reason
    // not found. Without a pidfd (Linux before 5.3) the loop looks for the exit every 50 ms.
    let exit_fd = root_pid.and_then(exec::pidfd_open);
    let look_every = (exit_fd.is_none() && root_pid.is_some()).then_some(LOOK_EVERY);
    let ready: Vec<_> = (exit_fd.as_ref().map(|fd| fd.as_fd()).into_iter())
        .chain(drainer.as_ref().and_then(|d| d.batches.ready_fd()))
        .collect();
    let mut exit = None;
    // The command's CPU time (getrusage) and wall time when it exits while recorded.
    let mut command_cpu_s = None;
    let mut command_wall_s = None;
    let mut stopped_early = None;
    let mut write_failed = false;
    // Commits on a fixed schedule from the start, not a period after the last one ended:
    // the time a commit takes does not push the next ones later.
    let mut next_flush = Instant::now() + FLUSH_EVERY;
    loop {
        let due = opts
            .duration
            .map_or(next_flush, |d| next_flush.min(started + d));
        let wait = due.saturating_duration_since(Instant::now());
        interrupt::wait_or(
            &ready,
            Some(look_every.map_or(wait, |every| wait.min(every))),
        );
        if let Some(d) = &drainer {
            // Behind, this thread too takes what came ahead of the load.
            let _raised = on_time
                .behind(monotonic_now_ns())
                .then(crate::priority::Raised::now);
            on_time.take_ready(d, &mut recorder);
            on_time.pace(d);
        }
        if let Some(pid) = child {
            if let Some((status, cpu_s)) = exec::try_wait(pid)? {
                exit = Some(status);
                command_cpu_s = Some(cpu_s);
                command_wall_s = exit_watch
                    .take()
                    .and_then(exec::ExitWatch::exited_ns)
                    .map(|ns| ns.saturating_sub(start_ns) as f64 / 1e9);
                break;
            }
        }
        if let Target::Pid(pid) = opts.target {
            let exited = exit_fd.as_ref().is_some_and(exec::has_exited);
            if exited || !roots.proc(pid.to_string()).is_dir() {
                break;
            }
        }
        if opts.duration.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
        if interrupt::interrupted() {
            match child {
                // As perf record does: the command gets the signal too (a Ctrl-C at the
                // terminal reached it already; a signal sent to powerlens alone did not).
                Some(pid) => {
                    // SAFETY: kill has no memory-safety preconditions.
                    unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) };
                    stopped_early = Some("interrupted (Ctrl-C); the command was sent SIGINT".into());
                }
                // Without a command, a signal is how a recording ends: not an early stop.
                None => notes.push(
                    "ended by Ctrl-C (or SIGTERM/SIGHUP), the way a recording without a command or --duration ends".into(),
                ),
            }
            break;
        }
        if Instant::now() >= next_flush {
            // The commit is what a kill keeps: it runs ahead of the load.
            let _raised = crate::priority::Raised::now();
            if let Some(d) = &drainer {
                on_time.catch_up(d, &mut recorder);
            }
            recorder.take_samples(sampler.samples.try_iter());
            if let Some(w) = &exec_watch {
                recorder.take_samples(w.samples.try_iter());
            }
            if let Err(e) = recorder.flush() {
                stopped_early = Some(e.with_causes());
                write_failed = true;
                break;
            }
            next_flush = (next_flush + FLUSH_EVERY).max(Instant::now());
        }
    }
    // The recording ends when tracing is disabled; the last sample follows right after, so
    // that the energy at the end is interpolated between two samples.
    let mut stop_ns = monotonic_now_ns();
    let mut lost = Vec::new();
    let mut thread_count = recorder_threads;
    let mut stack_stats = None;
    let mut stack_samples = None;
    if let Some(d) = drainer {
        let (batches, end) = d.stop()?;
        for b in batches {
            recorder.take(b);
        }
        lost = end.lost;
        thread_count = end.threads;
        stop_ns = end.disabled_ns;
        stack_stats = end.stacks;
        stack_samples = end.stack_samples;
    }
    recorder.take_samples(sampler.stop().into_iter());
    if let Some(w) = exec_watch {
        recorder.take_samples(w.stop().into_iter());
    }
    if let (Some(pid), None, true) = (child, exit.as_ref(), interrupt::interrupted()) {
        exit = exit_after_interrupt(pid)?;
    }
    if let (Some(pid), None) = (child, exit.as_ref()) {
        notes.push(format!(
            "the command (pid {pid}) was still running when recording stopped"
        ));
    }
    let total_lost: u64 = lost.iter().map(|(_, n)| n).sum();
    if total_lost > 0 {
        notes.push(format!(
            "{total_lost} trace records were lost (the rings filled faster than they were read): use a larger --buffer-pages"
        ));
    }
    let stop = json!({
        "monotonic_ns": stop_ns,
        "elapsed_s": (stop_ns - start_ns) as f64 / 1e9,
        "exit": exit,
        "command_cpu_s": command_cpu_s,
        "command_wall_s": command_wall_s,
        "stopped_early": stopped_early,
        "commits": {
            "longest_wait_for_events_s": on_time.longest_wait.as_secs_f64(),
            "behind": on_time.gave_up,
        },
    });
    // After a write error the file keeps what the last flush committed; writing more
    // would only fail again.
    if let Some((distinct, u)) = &stack_stats {
        let _ = recorder.writer.set_meta(
            meta::UNWIND,
            &meta::unwind(*distinct, u, stack_samples.as_ref()),
        );
    }
    let mut counts = (recorder.events, recorder.samples);
    // `finish` consumes the recorder; its CPU-sample count is final once the drain stopped.
    let recorder_cpu_samples = recorder.cpu_samples;
    if !write_failed {
        match recorder.finish(&stop, &lost, &notes) {
            Ok(c) => counts = c,
            Err(e) => stopped_early = Some(e.with_causes()),
        }
    }
    if !write_failed && stack_stats.is_some() {
        // Symbolize now, while every module the stacks name still exists (a test binary
        // in a temporary directory, a rebuilt program): reports read the cache.
        let phase = (opts.show_phase)("symbolizing the call stacks");
        let cached = RecordingReader::open(&opts.output)
            .map_err(RecordError::from)
            .and_then(|reader| symbols::resolve(&reader, roots, FunctionScope::default()));
        drop(phase);
        match cached {
            Ok(resolved) => notes.extend(resolved.into_iter().flat_map(|r| r.warnings)),
            Err(e) => notes.push(format!(
                "the stacks were not symbolized ({}); report symbolizes them when it runs",
                e.with_causes()
            )),
        }
    }
    let (events, samples) = counts;
    let cpu_samples = recorder_cpu_samples;
    Ok(RecordSummary {
        path: opts.output.clone(),
        mode,
        events,
        cpu_samples,
        samples,
        threads: thread_count,
        lost: total_lost,
        seconds: (stop_ns - start_ns) as f64 / 1e9,
        exit,
        stopped_early,
        notes,
    })
}

/// Opens the tracepoints, or explains why the recording will be reduced. Errors other than
/// missing privileges stop the recording.
fn open_collector(
    roots: &Roots,
    opts: &RecordOptions,
    notes: &mut Vec<String>,
) -> Result<Option<Collector>, RecordError> {
    let reduced = |notes: &mut Vec<String>, why: String| {
        (opts.tell_now)(&format!("warning: {why}; recording a REDUCED profile from procfs instead (per-thread CPU time and context-switch counts only)"));
        notes.push(why);
    };
    match powerlens_sys::trace::ensure_tracefs(roots) {
        Ok(Some(note)) => notes.push(note),
        Ok(None) => {}
        Err(e) => {
            reduced(notes, e.to_string());
            return Ok(None);
        }
    }
    let options = match opts.stacks_hz {
        Some(hz) => CollectorOptions {
            // Stack records are larger: rings sized for about as many records as
            // without stacks.
            buffer_pages: opts.buffer_pages * STACK_RING_FACTOR,
            callchains: false,
            stack_events: stacks::STACK_EVENTS.iter().map(|s| s.to_string()).collect(),
            user_stack_bytes: opts.stack_bytes,
            stack_events_kernel_frames: opts.kernel_stacks,
            stack_events_user_chain: opts.full_stacks,
            stack_samples_per_s: opts.stack_samples_per_s,
            cpu_clock_hz: Some(hz),
            mmap_records: true,
            in_kernel: opts.in_kernel,
            ..Default::default()
        },
        None => CollectorOptions {
            buffer_pages: opts.buffer_pages,
            callchains: false,
            in_kernel: opts.in_kernel,
            ..Default::default()
        },
    };
    let has_waking = powerlens_sys::perf_caps::tracepoint_id(roots, "sched/sched_waking").is_ok();
    match Collector::open(roots, &recorded_event_names(has_waking), options) {
        Ok(c) => {
            if let Some(why) = c.in_kernel_refused() {
                notes.push(format!(
                    "in-kernel collection unavailable ({why}): every event went through perf rings, which cost the traced threads more (docs/RECORD.md, How events are collected)"
                ));
            }
            Ok(Some(c))
        }
        Err(e @ SysError::PermissionDenied { .. }) => {
            reduced(notes, e.to_string());
            Ok(None)
        }
        Err(e) => Err(e).doing(|| "opening the tracepoints".into()),
    }
}

/// Idle power before recording, for the idle row of the attribution. `None` without a meter
/// (the power model's idle term is used) or with a zero baseline.
fn measure_baseline(
    meter: &Meter,
    length: Duration,
    show_phase: fn(&str) -> Phase,
) -> Result<Option<f64>, RecordError> {
    if meter.model().is_some() || length.is_zero() {
        return Ok(None);
    }
    let phase = show_phase(&format!(
        "measuring idle power for {:.1} s before recording",
        length.as_secs_f64()
    ));
    let from = meter.read()?;
    std::thread::sleep(length);
    let to = meter.read()?;
    drop(phase);
    Ok(Some(meter.average_power_w(&from, &to)))
}

/// How the command ends after the SIGINT it was sent: given a moment to end and report
/// how; one that ignores SIGINT gets SIGTERM and another moment. `None` if it still runs.
fn exit_after_interrupt(pid: u32) -> Result<Option<ExitStatus>, RecordError> {
    let mut exit = None;
    for (grace, then) in [(2, Some(libc::SIGTERM)), (1, None)] {
        let deadline = Instant::now() + Duration::from_secs(grace);
        while exit.is_none() && Instant::now() < deadline {
            exit = exec::try_wait(pid)?.map(|(status, _)| status);
            if exit.is_none() {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        match (exit.is_none(), then) {
            // SAFETY: kill has no memory-safety preconditions.
            (true, Some(sig)) => unsafe {
                libc::kill(pid as libc::pid_t, sig);
            },
            _ => break,
        }
    }
    Ok(exit)
}
