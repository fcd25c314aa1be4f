//! Recording: the scheduler, idle, frequency, IRQ and timer tracepoints of every CPU, plus
//! periodic energy/cpuidle/cpufreq samples, into one recording file. Orchestration only:
//! the collector (powerlens-sys) reads, [`convert`] maps records to core events, the codec
//! (powerlens-core) packs them and the recording file (powerlens-store) keeps them.
//!
//! Without tracing privileges it falls back to a *reduced* recording: per-thread CPU time
//! and context-switch counts sampled from procfs.

pub mod analyse;
pub mod battery;
pub mod context;
pub mod convert;
pub mod cost_cache;
pub mod drain;
pub mod exec;
pub mod instrument;
pub mod interrupt;
pub mod jit_env;
mod jit_names;
pub mod live;
pub mod meter;
pub mod reduced;
pub mod replay;
pub mod sampler;
pub mod stacks;
pub mod symbols;
pub mod threads;
mod tournament;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::{json, Value};

use powerlens_core::battery_life::Charged;
use powerlens_core::codec::ChunkEncoder;
use powerlens_core::run::ExitStatus;
use powerlens_core::sched::event::EventKind;
use powerlens_store::recording::{ContentCheck, RecordingReader, RecordingWriter};
use powerlens_store::StoreError;
use powerlens_sys::machine::MachineInfo;
use powerlens_sys::trace::{monotonic_now_ns, Collector, CollectorOptions};
use powerlens_sys::{topology, Roots, SysError};

use crate::meter::{Meter, MeterOptions};
use convert::{recorded_event_names, Converter};
use drain::Drainer;
use sampler::{Sampler, SamplerConfig, ThreadScope};
use stacks::StackRecorder;
use threads::ThreadTable;

/// Metadata keys of a recording (docs/FORMAT.md).
pub mod meta {
    pub const MODE: &str = "mode";
    pub const TARGET: &str = "target";
    pub const MACHINE: &str = "machine";
    pub const START: &str = "start";
    pub const STOP: &str = "stop";
    pub const EVENTS: &str = "events";
    pub const UNAVAILABLE: &str = "unavailable";
    pub const ENERGY: &str = "energy";
    pub const LOST: &str = "lost_records";
    pub const NOTES: &str = "notes";
    pub const CODEC: &str = "codec_version";
    pub const SAMPLE_INTERVAL: &str = "sample_interval_s";
    /// Whether call stacks were recorded, with the cpu-clock rate, or why not:
    /// `{"recorded": bool, "cpu_clock_hz": n, "reason": "…"}`.
    pub const STACKS: &str = "stacks";
    /// How user stacks were unwound (counts), written at the end.
    pub const UNWIND: &str = "unwind";
    /// The battery behind battery-life figures (`powerlens_core::battery_life::BatterySetup`):
    /// its full charge and how its gauge is read; absent without a battery or
    /// `--battery-wh`.
    pub const BATTERY: &str = "battery";
    /// What one traced event of each kind cost the thread it fired in, measured at the
    /// start (`powerlens_core::sched::tracing_cost::EventCosts`); absent in reduced
    /// recordings and older ones.
    pub const TRACING_COST: &str = "tracing_cost";
}

/// Opens a recording to read it, and checks that the tables its figures come from are
/// what the recorder wrote: the warning to show when they are not (SQLite has no checksum
/// of its own, so a damaged number would otherwise be read as another number).
pub fn open_recording(path: &Path) -> anyhow::Result<(RecordingReader, Option<String>)> {
    let reader = open_unchecked(path)?;
    let warning = content_warning(path, reader.check_content())?;
    Ok((reader, warning))
}

/// Opens a recording whose content a reader checks later ([`content_warning`]), from the
/// chunks it reads anyway (`report`'s pass).
pub fn open_unchecked(path: &Path) -> anyhow::Result<RecordingReader> {
    RecordingReader::open(path).with_context(|| format!("opening the recording {}", path.display()))
}

/// The warning to show for what a content check of `path` found, when there is one.
pub fn content_warning(
    path: &Path,
    check: Result<ContentCheck, StoreError>,
) -> anyhow::Result<Option<String>> {
    let check = check.with_context(|| format!("checking the recording {}", path.display()))?;
    Ok(check.warning(path))
}

/// A full recording (trace) or the procfs fallback.
pub const MODE_TRACE: &str = "trace";
pub const MODE_REDUCED: &str = "reduced";

/// What to record.
#[derive(Debug, Clone)]
pub enum Target {
    /// Start this command and follow its process tree.
    Command(Vec<String>),
    /// An existing process and its descendants.
    Pid(u32),
    /// The whole system.
    All,
}

#[derive(Debug, Clone)]
pub struct RecordOptions {
    pub output: PathBuf,
    pub target: Target,
    /// Stop after this long (required for `-a` and `-p` unless Ctrl-C is meant).
    pub duration: Option<Duration>,
    pub sample_interval: Duration,
    /// Measure idle power this long before recording (with a meter), for the idle row.
    pub baseline: Duration,
    pub buffer_pages: usize,
    /// Record the reduced procfs form even when tracing is possible.
    pub reduced: bool,
    pub show_output: bool,
    pub meter: MeterOptions,
    /// Call stacks on the stack events and cpu-clock samples at this rate (Hz); `None`
    /// for no stacks (`--no-stacks`).
    pub stacks_hz: Option<u32>,
    /// User-stack bytes copied per stack event (`--stack-bytes`).
    pub stack_bytes: u32,
    /// Kernel frames in the stacks of the stack events too (blocking, waking, timer
    /// arming), not only in CPU-time samples (`--kernel-stacks`): about twice those
    /// events' cost to the traced threads.
    pub kernel_stacks: bool,
    /// Variables set in the command's environment on top of powerlens's own: what makes
    /// managed runtimes write perf maps (`--jit-names`, [`jit_env`]).
    pub command_env: Vec<(String, String)>,
    /// Shows a long phase under way (the idle baseline, symbolizing): a spinner in the
    /// CLI, [`no_phase`] for a caller with no terminal.
    pub show_phase: fn(&str) -> Phase,
    /// Tells the user something they need before the recording ends (that it will be
    /// reduced, that an existing file was moved aside): stderr in the CLI, [`tell_nobody`]
    /// for a caller that reads the summary's notes instead. The library prints nothing.
    pub tell_now: fn(&str),
}

/// A long phase of the recording under way, shown by [`RecordOptions::show_phase`] until
/// this is dropped.
pub struct Phase(Option<Box<dyn FnOnce()>>);

impl Phase {
    /// A phase whose display `end` clears.
    pub fn new(end: impl FnOnce() + 'static) -> Phase {
        Phase(Some(Box::new(end)))
    }
}

impl Drop for Phase {
    fn drop(&mut self) {
        if let Some(end) = self.0.take() {
            end();
        }
    }
}

/// Shows nothing.
pub fn no_phase(_: &str) -> Phase {
    Phase(None)
}

/// Tells nothing (for [`RecordOptions::tell_now`]).
pub fn tell_nobody(_: &str) {}

impl std::fmt::Debug for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Phase")
    }
}

/// What the user is told at the end.
#[derive(Debug)]
pub struct RecordSummary {
    pub path: PathBuf,
    pub mode: &'static str,
    pub events: u64,
    /// Of `events`, the CPU-time samples (cpu-clock, with stacks).
    pub cpu_samples: u64,
    /// Meter, cpuidle and cpufreq readings.
    pub samples: u64,
    pub threads: usize,
    pub lost: u64,
    pub seconds: f64,
    pub exit: Option<ExitStatus>,
    /// Why recording stopped before the target ended (Ctrl-C, a write error).
    pub stopped_early: Option<String>,
    pub notes: Vec<String>,
}

/// How much larger the rings are when records carry stacks (a call chain and a
/// `--stack-bytes` copy of the user stack on about half the records).
const STACK_RING_FACTOR: usize = 2;

/// Events buffered per ring CPU until the next flush.
const CHUNK_EVENTS: usize = 16_384;
/// The longest sample interval of a reduced recording.
const REDUCED_SAMPLE_INTERVAL: Duration = Duration::from_millis(20);
/// The recording is committed at least this often: a SIGKILL loses at most this much.
const FLUSH_EVERY: Duration = Duration::from_secs(1);

pub fn record(roots: &Roots, opts: &RecordOptions) -> anyhow::Result<RecordSummary> {
    let mut notes = Vec::new();
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
        let kernel = format!("kernel_frames={}", opts.kernel_stacks);
        cost_cache::measured_or_kept(roots, c, opts.stacks_hz.is_some(), &kernel)
    });
    let mode = if collector.is_some() {
        MODE_TRACE
    } else {
        MODE_REDUCED
    };
    if let Target::Pid(pid) = opts.target {
        if !roots.proc(pid.to_string()).is_dir() {
            bail!("no process with pid {pid} (is it still running? `ps -p {pid}`)");
        }
    }
    let cpus = topology::read_online(roots)?;
    let meter = Meter::open(roots, &opts.meter)?;
    if let Some(battery) = &meter.battery {
        notes.push(battery.describe());
    }
    let baseline_w = measure_baseline(&meter, opts.baseline, opts.show_phase)?;

    let mut writer = create_file(&opts.output, opts.tell_now)?;
    write_start_meta(
        &mut writer,
        roots,
        opts,
        mode,
        &collector,
        &meter,
        baseline_w,
    )?;
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
    let mut recorder = Recorder {
        writer,
        pending: Vec::new(),
        encoder: ChunkEncoder::new(),
        events: 0,
        cpu_samples: 0,
        samples: 0,
    };
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
    let drainer = match collector {
        Some(c) => {
            let converter = Converter::new(c.events());
            // An event whose format lacks a field the converter reads is recorded but
            // unused: list it with the events the kernel lacks.
            let mut unavailable = unavailable_events(&c);
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
            let stack_meta = stacks_meta(&c, opts.stacks_hz, opts.kernel_stacks, roots);
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
    let root_pid = child.or(match opts.target {
        Target::Pid(pid) => Some(pid),
        _ => None,
    });
    recorder.writer.set_meta(
        meta::TARGET,
        &json!({
            "kind": match opts.target { Target::Command(_) => "command", Target::Pid(_) => "pid", Target::All => "all" },
            "command": match &opts.target { Target::Command(argv) => json!(argv), _ => Value::Null },
            "root_pid": root_pid,
        }),
    )?;
    // The loop: take the drained events as they come, commit every second.
    let mut exit = None;
    let mut stopped_early = None;
    let mut write_failed = false;
    let mut last_flush = Instant::now();
    loop {
        match &drainer {
            Some(d) => {
                if let Ok(batch) = d.batches.recv_timeout(Duration::from_millis(50)) {
                    recorder.take(batch);
                }
            }
            None => std::thread::sleep(Duration::from_millis(50)),
        }
        if let Some(pid) = child {
            if let Some((status, _cpu)) = exec::try_wait(pid)? {
                exit = Some(status);
                break;
            }
        }
        if let Target::Pid(pid) = opts.target {
            if !roots.proc(pid.to_string()).is_dir() {
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
        if last_flush.elapsed() >= FLUSH_EVERY {
            recorder.take_samples(sampler.samples.try_iter());
            if let Err(e) = recorder.flush() {
                stopped_early = Some(format!("{e:#}"));
                write_failed = true;
                break;
            }
            last_flush = Instant::now();
        }
    }
    // The recording ends when tracing is disabled; the last sample follows right after, so
    // that the energy at the end is interpolated between two samples.
    let mut stop_ns = monotonic_now_ns();
    let mut lost = Vec::new();
    let mut thread_count = recorder_threads;
    let mut stack_stats = None;
    if let Some(d) = drainer {
        let (batches, end) = d.stop()?;
        for b in batches {
            recorder.take(b);
        }
        lost = end.lost;
        thread_count = end.threads;
        stop_ns = end.disabled_ns;
        stack_stats = end.stacks;
    }
    recorder.take_samples(sampler.stop().into_iter());
    if let (Some(pid), None, true) = (child, exit.as_ref(), interrupt::interrupted()) {
        // The command got SIGINT: give it a moment to end and report how; one that
        // ignores SIGINT gets SIGTERM.
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
        "stopped_early": stopped_early,
    });
    // After a write error the file keeps what the last flush committed; writing more
    // would only fail again.
    if let Some((distinct, u)) = stack_stats {
        let _ = recorder.writer.set_meta(
            meta::UNWIND,
            &json!({
                "distinct_stacks": distinct,
                "user_stacks": u.stacks,
                "unwound_complete": u.complete,
                "spliced_with_frame_pointers": u.spliced,
                "frame_pointers_only": u.fp_only,
                "unreadable_modules": u.unreadable_modules,
                "maps_refreshes": u.maps_refreshes,
                "processes_forgotten": u.processes_forgotten,
            }),
        );
    }
    let mut counts = (recorder.events, recorder.samples);
    // `finish` consumes the recorder; its CPU-sample count is final once the drain stopped.
    let recorder_cpu_samples = recorder.cpu_samples;
    if !write_failed {
        match recorder.finish(&stop, &lost, &notes) {
            Ok(c) => counts = c,
            Err(e) => stopped_early = Some(format!("{e:#}")),
        }
    }
    if !write_failed && stack_stats.is_some() {
        // Symbolize now, while every module the stacks name still exists (a test binary
        // in a temporary directory, a rebuilt program): reports read the cache.
        let phase = (opts.show_phase)("symbolizing the call stacks");
        let cached = RecordingReader::open(&opts.output)
            .map_err(anyhow::Error::from)
            .and_then(|reader| symbols::resolve(&reader, roots));
        drop(phase);
        match cached {
            Ok(resolved) => notes.extend(resolved.into_iter().flat_map(|r| r.warnings)),
            Err(e) => notes.push(format!(
                "the stacks were not symbolized ({e:#}); report symbolizes them when it runs"
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
) -> anyhow::Result<Option<Collector>> {
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
            cpu_clock_hz: Some(hz),
            mmap_records: true,
            ..Default::default()
        },
        None => CollectorOptions {
            buffer_pages: opts.buffer_pages,
            callchains: false,
            ..Default::default()
        },
    };
    let has_waking = powerlens_sys::perf_caps::tracepoint_id(roots, "sched/sched_waking").is_ok();
    match Collector::open(roots, &recorded_event_names(has_waking), options) {
        Ok(c) => Ok(Some(c)),
        Err(e @ SysError::PermissionDenied { .. }) => {
            reduced(notes, e.to_string());
            Ok(None)
        }
        Err(e) => Err(e).context("opening the tracepoints"),
    }
}

/// The `stacks` metadata: recorded with the cpu-clock rate, or not and why.
fn stacks_meta(c: &Collector, hz: Option<u32>, kernel_frames: bool, roots: &Roots) -> Value {
    match hz {
        None => json!({"recorded": false, "reason": "--no-stacks"}),
        Some(hz) if c.has_cpu_clock() => json!({
            "recorded": true,
            "cpu_clock_hz": hz,
            "user_stack_bytes": c.user_stack_bytes(),
            "sample_stack_bytes": c.sample_stack_bytes(),
            "events": stacks::STACK_EVENTS,
            "events_kernel_frames": kernel_frames,
            "mappings": c.has_mmap_records(),
            // The sampling timer's callback: its expiries are powerlens's own wake-ups,
            // which report leaves out of the wake-up causes.
            "sampling_timer_function": sampling_timer_function(roots),
        }),
        Some(_) => json!({
            "recorded": true,
            "cpu_clock_hz": null,
            "user_stack_bytes": c.user_stack_bytes(),
            "events": stacks::STACK_EVENTS,
            "events_kernel_frames": kernel_frames,
            "mappings": c.has_mmap_records(),
            "reason": "the cpu-clock event could not be opened: no CPU-time samples, so per-function CPU time and energy are unavailable",
        }),
    }
}

/// The kernel address of the cpu-clock event's hrtimer callback, from kallsyms; `None`
/// when kallsyms hides it.
fn sampling_timer_function(roots: &Roots) -> Option<u64> {
    powerlens_sys::symbolize::kallsyms::KernelSymbols::read(&roots.proc("kallsyms"))
        .ok()?
        .address_of("perf_swevent_hrtimer")
}

/// Idle power before recording, for the idle row of the attribution. `None` without a meter
/// (the power model's idle term is used) or with a zero baseline.
fn measure_baseline(
    meter: &Meter,
    length: Duration,
    show_phase: fn(&str) -> Phase,
) -> anyhow::Result<Option<f64>> {
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

/// Creates the recording, moving an existing one aside to `FILE.old` as perf does — with
/// the `-wal`/`-shm` files a killed recorder may have left beside it.
fn create_file(path: &Path, tell_now: fn(&str)) -> anyhow::Result<RecordingWriter> {
    let with_suffix = |p: &Path, suffix: &str| {
        let mut s = p.as_os_str().to_owned();
        s.push(suffix);
        PathBuf::from(s)
    };
    if path.exists() {
        let old = with_suffix(path, ".old");
        for side in ["", "-wal", "-shm", "-journal"] {
            let (from, to) = (with_suffix(path, side), with_suffix(&old, side));
            let _ = std::fs::remove_file(&to);
            if from.exists() {
                std::fs::rename(&from, &to).with_context(|| {
                    format!(
                        "{} exists and cannot be moved aside to {}",
                        from.display(),
                        to.display()
                    )
                })?;
            }
        }
        tell_now(&format!(
            "moved the existing {} to {}",
            path.display(),
            old.display()
        ));
    }
    Ok(RecordingWriter::create(path)?)
}

fn write_start_meta(
    w: &mut RecordingWriter,
    roots: &Roots,
    opts: &RecordOptions,
    mode: &str,
    collector: &Option<Collector>,
    meter: &Meter,
    baseline_w: Option<f64>,
) -> anyhow::Result<()> {
    w.set_meta(meta::MODE, &json!(mode))?;
    w.set_meta(meta::CODEC, &json!(powerlens_core::codec::CODEC_VERSION))?;
    w.set_meta(
        meta::MACHINE,
        &serde_json::to_value(MachineInfo::collect(roots))?,
    )?;
    w.set_meta(
        meta::START,
        &json!({
            "monotonic_ns": monotonic_now_ns(),
            "unix_s": std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
            "powerlens_version": env!("CARGO_PKG_VERSION"),
        }),
    )?;
    w.set_meta(
        meta::SAMPLE_INTERVAL,
        &json!(opts.sample_interval.as_secs_f64()),
    )?;
    let events: Vec<String> = collector
        .iter()
        .flat_map(|c| c.events().iter().map(|e| e.full_name()))
        .collect();
    w.set_meta(meta::EVENTS, &json!(events))?;
    w.set_meta(
        meta::UNAVAILABLE,
        &json!(collector
            .as_ref()
            .map(unavailable_events)
            .unwrap_or_default()),
    )?;
    let energy = match meter.model() {
        Some(model) => json!({
            "provenance": meter.provenance(),
            "model": model,
            "describe": meter.describe_charging(Charged::Machine),
        }),
        None => json!({
            "provenance": meter.provenance(),
            "baseline_w": baseline_w,
            "describe": meter.describe_charging(Charged::Machine),
        }),
    };
    w.set_meta(meta::ENERGY, &energy)?;
    if let Some(battery) = &meter.battery {
        w.set_meta(meta::BATTERY, &serde_json::to_value(&battery.setup)?)?;
    }
    w.flush()?;
    Ok(())
}

/// The requested events the kernel could not give, with the reason and the fix.
fn unavailable_events(c: &Collector) -> Vec<Value> {
    c.unavailable()
        .iter()
        .map(|u| json!({ "event": u.event, "reason": u.reason, "fix": u.fix }))
        .collect()
}

/// The writing side of a recording in progress.
struct Recorder {
    writer: RecordingWriter,
    /// Converted events (with their context) per ring CPU, not yet written.
    pending: Vec<(u32, Vec<drain::InContext>)>,
    encoder: ChunkEncoder,
    events: u64,
    cpu_samples: u64,
    samples: u64,
}

impl Recorder {
    /// Adds a drained batch: events to the pending ones, thread rows straight to the file.
    fn take(&mut self, batch: drain::Batch) {
        // Modules and stacks first: events name them. A failure is a failing disk, which
        // the next flush reports.
        // Each file's build ID as it is now, when its first frame is recorded: a report
        // that names frames later (after the recorder was killed, or with a damaged symbol
        // cache) reads names only from the same build.
        for (id, path) in &batch.modules {
            let build_id = path
                .starts_with('/')
                .then(|| powerlens_sys::symbolize::build_id(Path::new(path)))
                .flatten();
            let _ = self.writer.add_module(*id, path, build_id.as_deref());
        }
        for (id, frames) in &batch.stacks {
            let _ = self.writer.add_stack(*id, frames);
        }
        for (cpu, mut events) in batch.events {
            self.cpu_samples += events
                .iter()
                .filter(|(e, _)| matches!(e.kind, EventKind::CpuSample { .. }))
                .count() as u64;
            match self.pending.iter_mut().find(|(c, _)| *c == cpu) {
                Some((_, pending)) => pending.append(&mut events),
                None => self.pending.push((cpu, events)),
            }
        }
        for row in batch.threads {
            // A failure here is a failing disk: the next flush reports it.
            let _ = self.writer.upsert_thread(&row);
        }
    }

    fn take_samples(&mut self, samples: impl Iterator<Item = sampler::Sample>) {
        for s in samples {
            if self
                .writer
                .append_sample(s.time_ns, s.kind, &s.data)
                .is_ok()
            {
                self.samples += 1;
            }
        }
    }

    /// Writes pending events as chunks (each CPU's in time order) and commits.
    fn flush(&mut self) -> anyhow::Result<()> {
        for (cpu, events) in &mut self.pending {
            // A ring is in write order, which is time order except for records written
            // after an interrupt that nested inside them: sort (stable) to restore it.
            events.sort_by_key(|(e, _)| e.time_ns);
            for chunk in events.chunks(CHUNK_EVENTS) {
                for (e, context) in chunk {
                    self.encoder.push_in_context(e, *context);
                }
                let (first, last) = (chunk[0].0.time_ns, chunk[chunk.len() - 1].0.time_ns);
                let data = self.encoder.finish();
                self.writer
                    .append_chunk(*cpu, first, last, chunk.len() as u32, &data)?;
                self.events += chunk.len() as u64;
            }
            events.clear();
        }
        self.writer.flush()?;
        Ok(())
    }

    /// The last events and the end's metadata, then the file is closed as one
    /// self-contained file (no -wal/-shm beside it). Returns the events and samples written.
    fn finish(
        mut self,
        stop: &Value,
        lost: &[(u32, u64)],
        notes: &[String],
    ) -> anyhow::Result<(u64, u64)> {
        self.flush()?;
        self.writer.set_meta(meta::STOP, stop)?;
        self.writer.set_meta(
            meta::LOST,
            &json!(lost
                .iter()
                .map(|(cpu, n)| json!({"cpu": cpu, "lost": n}))
                .collect::<Vec<_>>()),
        )?;
        self.writer.set_meta(meta::NOTES, &json!(notes))?;
        let counts = (self.events, self.samples);
        self.writer.finish()?;
        Ok(counts)
    }
}
