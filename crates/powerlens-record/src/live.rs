//! A live session: the recorder's collector, converter and drain, without a file, feeding
//! the streaming analysis interval by interval — what `powerlens agent` exports and
//! `powerlens top` shows. Each interval ends with the meter's energy (or the power model's
//! estimate), the per-process counters and the kernel's cpuidle counters.
//!
//! The drain hands over each CPU's records in ring order; events are merged across CPUs
//! up to the time the latest drain began (every record written before it has arrived), so
//! the analysis sees one stream in time order, as it does when replaying a recording.
//!
//! Without tracing privileges the session is *reduced*: per-process CPU time from procfs,
//! no wake-ups; [`LiveSession::mode`] says so and why.
//!
//! Tracing is paid by the traced threads (the handlers run in their time), so a session
//! may trace in *windows* ([`Tracing::Windows`]): CPU time, and so energy, from procfs
//! for every whole interval (which costs the processes nothing), and the tracepoints on
//! for a share of each interval, at a random place in it, for the wake-ups, which are
//! then scaled to the interval by the monitor ([`IntervalInput::traced_s`]).

use std::collections::HashMap;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

pub use powerlens_core::monitor::IdleStateTime;
use powerlens_core::monitor::{
    Basis, DomainInterval, IntervalInput, ProcessDirectory, ProcessInterval, StreamAnalysis,
};
use powerlens_core::provenance::Provenance;
use powerlens_core::sched::analysis::WakeupCauses;
use powerlens_core::sched::event::EventKind;
use powerlens_core::sched::tracing_cost::{bare_names, EventCosts, PATH_BPF, PATH_PERF_RING};
use powerlens_sys::trace::{monotonic_now_ns, Collector, CollectorOptions, TraceSwitch};
use powerlens_sys::{cpuidle, procfs, topology, Roots, SysError};

use crate::alarm::Alarm;
use crate::convert::{monitor_event_names, Converter};
use crate::drain::{Batch, DrainStyle, Drainer};
use crate::error::{Doing, RecordError};
use crate::interrupt;
use crate::meter::{Meter, MeterOptions, Reading};
use crate::pending_events::PendingEvents;
use crate::priority::{Hurry, YIELDING_NICE};
use crate::procfs_source::ProcfsSource;
use crate::threads::{ThreadTable, SWEEP_VANISHED_EVERY};
use powerlens_store::recording::ThreadRow;

/// How a live session measures.
#[derive(Debug, Clone)]
pub struct LiveOptions {
    pub interval: Duration,
    /// Ring size per CPU, in pages.
    pub buffer_pages: usize,
    pub meter: MeterOptions,
    pub idle: IdlePower,
    /// How much to trace, where tracing is possible.
    pub tracing: Tracing,
    /// Collect the scheduler's switches and wake-ups (and CPU-time updates, when traced)
    /// in the kernel (BPF) where it allows; `false` (`--perf-rings`) for perf rings.
    pub in_kernel: bool,
    /// How often [`LiveSession::next_interval`]'s `stop` is asked while nothing else wakes
    /// the session. `None` when only a signal [`crate::interrupt::install`] handles can
    /// make it true (it ends any wait at once): the session then wakes for its windows and
    /// intervals alone. While events stream in, it is asked at least every 50 ms.
    pub stop_check: Option<Duration>,
}

/// How much of the time a live session traces.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Tracing {
    /// Never: CPU time from procfs, no wake-ups (`--reduced`).
    Off,
    /// For `duty` (0 < duty < 1) of each interval: CPU time from procfs, wake-ups from
    /// the windows, scaled.
    Windows { duty: f64 },
    /// Throughout: CPU time and wake-ups from the trace.
    Continuous,
}

/// The idle (baseline) share of a measured meter's energy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum IdlePower {
    /// Each domain's lowest interval power so far: an estimate that starts high (the
    /// first interval is all idle) and settles once the machine has been quiet once.
    Lowest,
    /// This total power, W, spread over the domains in proportion to their lowest power
    /// so far (`--idle-w`, e.g. from `powerlens calibrate` or a measured baseline).
    Fixed(f64),
}

/// Whether the session traces, or samples procfs and why.
#[derive(Debug, Clone, PartialEq)]
pub enum Mode {
    Trace,
    /// Traces `duty` of each interval; CPU time from procfs.
    Windows {
        duty: f64,
    },
    Reduced {
        reason: String,
    },
}

/// What one interval measured.
#[derive(Debug, Clone)]
pub struct LiveInterval {
    /// For [`powerlens_core::monitor::Monitor::close_interval`].
    pub input: IntervalInput,
    /// Where the interval's energy came from.
    pub energy: Provenance,
    /// Trace records lost so far (rings that overflowed).
    pub lost_records: u64,
    /// Per CPU and idle state: cumulative seconds in the state, the kernel's counters.
    pub idle_states: Vec<IdleStateTime>,
    /// What the user should know of this interval (a meter that disappeared).
    pub notes: Vec<String>,
}

pub struct LiveSession {
    roots: Roots,
    mode: Mode,
    interval: Duration,
    idle: IdlePower,
    source: Source,
    meter: Option<Meter>,
    /// The power model, read every interval too: it takes over the interval in which the
    /// meter stops answering, so the figures never have a gap.
    model: Meter,
    last: (Option<Reading>, Reading),
    /// Lowest interval power seen per domain, W.
    lowest_w: HashMap<String, f64>,
    directory: ProcessDirectory,
    /// Idle-state names per CPU, read once.
    idle_names: Vec<(u32, Vec<String>)>,
    cpus: Vec<u32>,
    /// Why the kernel's exit notifications cannot be heard, when CPU time comes from
    /// procfs and they cannot.
    exits_unavailable: Option<String>,
    next_end: Instant,
    /// When the directory last forgot the threads procfs no longer has.
    last_thread_sweep: Instant,
    /// The priority of the thread that calls [`LiveSession::next_interval`]: ahead of
    /// the load while it waits, so that it wakes on time for an interval's end, and
    /// yielding to it while it delivers the events that came (work that can wait).
    caller: Hurry,
    /// Raises the caller at each interval's end, wherever its yielding left it: it
    /// cannot raise itself while it waits for a CPU. `None` when it never yields (it may
    /// not raise its priority, or nothing is traced and nothing delivered).
    end_alarm: Option<Alarm>,
    last_end_ns: u64,
    stop_check: Option<Duration>,
}

/// Where the per-process figures come from.
enum Source {
    Trace(Box<TraceSource>),
    Procfs(ProcfsSource),
    Windows(Box<Windowed>),
}

/// Tracing in windows: procfs for the CPU time, the trace for a share of each interval.
struct Windowed {
    // Declared before `trace`, so dropped first: its descriptors are duplicates of the
    // collector's, cheap to close while the collector's are open.
    switch: TraceSwitch,
    trace: TraceSource,
    procfs: ProcfsSource,
    duty: f64,
    /// The current interval's window.
    window: Window,
    /// State of the generator that places the windows.
    seed: u64,
}

/// Where the tracepoints are on in the current interval, and when they were.
#[derive(Debug, Default)]
struct Window {
    start: Option<Instant>,
    end: Option<Instant>,
    /// CLOCK_MONOTONIC ns when the tracepoints were turned on and off.
    on_ns: Option<u64>,
    off_ns: Option<u64>,
}

impl Window {
    /// Whether the tracepoints are on now.
    fn is_on(&self) -> bool {
        self.on_ns.is_some() && self.off_ns.is_none()
    }
}

/// How often a session's `stop` is asked while it waits on the events streaming in (a
/// wait a signal does not end).
const STREAMING_STOP_CHECK: Duration = Duration::from_millis(50);

/// How many events a hand-on delivers between two looks at the clock for the interval's
/// end (about a millisecond's work in a debug build).
const DELIVERIES_BETWEEN_LOOKS: usize = 1024;

struct TraceSource {
    drainer: Drainer,
    analysis: StreamAnalysis,
    /// Each CPU's events not yet delivered: later than the latest drain's start, or than
    /// the end of the interval under way.
    pending: PendingEvents,
    /// The latest drain's start: every event before it has arrived.
    watermark: u64,
    /// Thread-table rows not yet given to the directory.
    threads: Vec<ThreadRow>,
    lost: u64,
    /// Events of a closed window that arrived after it closed (the drain was behind):
    /// left out of every interval, and said in the next interval's notes.
    late_left_out: u64,
    /// What one traced event of each kind costs the thread it fires in, measured when
    /// the session started: the session's own cost to the processes it watches.
    costs: EventCosts,
    /// How its events come from the kernel: the tracepoints collected in the kernel
    /// (none: perf rings throughout), and why none were where it was asked for.
    in_kernel_events: Vec<String>,
    in_kernel_refused: Option<String>,
}

impl LiveSession {
    /// Opens the tracepoints (or falls back to procfs), the meter and the model, and
    /// starts the first interval. The calling thread is the one the session's end alarm
    /// raises: [`LiveSession::next_interval`] is to be called from it (the agent's main
    /// thread, `top`'s measuring thread).
    pub fn start(roots: &Roots, opts: &LiveOptions) -> Result<LiveSession, RecordError> {
        let cpus = topology::read_online(roots)?;
        let mut exits_unavailable = None;
        let mut procfs = || {
            let (p, why) = ProcfsSource::open(&cpus);
            exits_unavailable = why;
            p
        };
        let (source, mode) = match (open_trace(roots, opts)?, opts.tracing) {
            (Ok((s, _)), Tracing::Continuous) => (Source::Trace(Box::new(s)), Mode::Trace),
            (Ok((trace, switch)), Tracing::Windows { duty }) => (
                Source::Windows(Box::new(Windowed {
                    switch,
                    trace,
                    procfs: procfs(),
                    duty,
                    window: Window::default(),
                    seed: monotonic_now_ns() | 1,
                })),
                Mode::Windows { duty },
            ),
            (Ok(_), Tracing::Off) => unreachable!("open_trace opens nothing for Tracing::Off"),
            (Err(reason), _) => (Source::Procfs(procfs()), Mode::Reduced { reason }),
        };
        let meter = Meter::open(roots, &opts.meter)?;
        let meter = meter.model().is_none().then_some(meter);
        let model = Meter::estimated(roots, &opts.meter)?;
        let last = (meter.as_ref().and_then(|m| m.read().ok()), model.read()?);
        let idle_names = cpus
            .iter()
            .filter_map(|&cpu| {
                let states = cpuidle::read_states(roots, cpu).ok()?;
                Some((cpu, states.into_iter().map(|s| s.name).collect()))
            })
            .collect();
        let caller = Hurry::new(YIELDING_NICE);
        let delivers = !matches!(source, Source::Procfs(_));
        let end_alarm = (delivers && caller.yields())
            .then(|| Alarm::for_current_thread(opts.interval))
            .flatten();
        let mut session = LiveSession {
            roots: roots.clone(),
            mode,
            interval: opts.interval,
            idle: opts.idle,
            source,
            meter,
            model,
            last,
            lowest_w: HashMap::new(),
            directory: ProcessDirectory::default(),
            idle_names,
            cpus,
            next_end: Instant::now() + opts.interval,
            stop_check: opts.stop_check,
            last_thread_sweep: Instant::now(),
            caller,
            end_alarm,
            exits_unavailable,
            last_end_ns: monotonic_now_ns(),
        };
        let interval = session.interval;
        match &mut session.source {
            // The first sample is the baseline of the first interval.
            Source::Procfs(p) => {
                p.sample(&session.roots, &mut session.directory);
            }
            Source::Windows(w) => {
                w.procfs.sample(&session.roots, &mut session.directory);
                w.place_window(Instant::now(), interval);
            }
            Source::Trace(_) => {}
        }
        Ok(session)
    }

    pub fn mode(&self) -> &Mode {
        &self.mode
    }

    fn trace(&self) -> Option<&TraceSource> {
        match &self.source {
            Source::Trace(t) => Some(t),
            Source::Windows(w) => Some(&w.trace),
            Source::Procfs(_) => None,
        }
    }

    /// How the session's events come from the kernel: [`PATH_BPF`] (the scheduler's in
    /// the kernel, the rest through perf rings), [`PATH_PERF_RING`], or `none` when it
    /// samples procfs.
    pub fn tracing_path(&self) -> &'static str {
        match self.trace() {
            Some(t) if !t.in_kernel_events.is_empty() => PATH_BPF,
            Some(_) => PATH_PERF_RING,
            None => "none",
        }
    }

    /// One line for the user on how the session traces, when it does.
    pub fn describe_tracing(&self) -> Option<String> {
        let t = self.trace()?;
        Some(match (&t.in_kernel_events[..], &t.in_kernel_refused) {
            ([], None) => "tracing: every event through perf ring buffers (--perf-rings)".into(),
            ([], Some(why)) => format!(
                "tracing: every event through perf ring buffers; in-kernel collection unavailable ({why}), which costs the watched processes more"
            ),
            (events, _) => format!(
                "tracing: {} collected in the kernel (BPF), the other events through perf ring buffers",
                bare_names(events)
            ),
        })
    }

    /// One line for the user when CPU time comes from procfs: whether processes that end
    /// between two samples are charged (the kernel's exit notifications), and if not why.
    pub fn describe_cpu_time(&self) -> Option<String> {
        if matches!(self.source, Source::Trace(_)) {
            return None;
        }
        Some(match &self.exits_unavailable {
            None => "CPU time: /proc/PID/stat every interval, and each process's final CPU time from the kernel's exit notifications (taskstats), so short-lived processes are charged too".into(),
            Some(why) => format!(
                "CPU time: /proc/PID/stat every interval; without the kernel's exit notifications ({why}), a process that ends loses what it ran since its last sample, and one that lives less than an interval is not seen"
            ),
        })
    }

    /// What measures energy now.
    pub fn energy_provenance(&self) -> Provenance {
        match &self.meter {
            Some(m) => m.provenance(),
            None => self.model.provenance(),
        }
    }

    /// One line for the user: what measures energy, and why not something better. There
    /// is no command here: the model charges the machine's busy CPUs.
    pub fn describe_energy(&self) -> String {
        let machine = powerlens_core::battery_life::Charged::Machine;
        match &self.meter {
            Some(m) => m.describe_charging(machine),
            None => self.model.describe_charging(machine),
        }
    }

    /// Waits for the current interval to end — taking events as they come — and returns
    /// it; `None` when `stop` said so first (asked as [`LiveOptions::stop_check`] says).
    pub fn next_interval(
        &mut self,
        stop: &dyn Fn() -> bool,
    ) -> Result<Option<LiveInterval>, RecordError> {
        // The alarm's lock is taken ahead of the load only (see `Alarm::set`).
        self.caller.follow(true);
        if let Some(alarm) = &self.end_alarm {
            alarm.set(self.next_end);
        }
        loop {
            if stop() {
                return Ok(None);
            }
            let now = Instant::now();
            if now >= self.next_end {
                break;
            }
            let until_end = self.next_end - now;
            let wait = self.stop_check.map_or(until_end, |c| c.min(until_end));
            // While events stream in, the wait is on them, which a signal does not end.
            let streaming = wait.min(STREAMING_STOP_CHECK);
            // Waits end on time (an interval's end, a window's edge); what is delivered
            // between them can wait for CPU time the load leaves.
            let caller = &self.caller;
            caller.follow(true);
            match &mut self.source {
                Source::Trace(t) => {
                    t.take(streaming)?;
                    // Nothing past the interval's end goes into it.
                    let left = self.next_end.saturating_duration_since(Instant::now());
                    let end_ns = monotonic_now_ns() + left.as_nanos() as u64;
                    if !yield_unless_due(caller, self.next_end) {
                        continue;
                    }
                    let until = t.watermark.min(end_ns);
                    t.deliver_between_unless_due(
                        0,
                        until,
                        Some(self.next_end),
                        &mut self.directory,
                    );
                }
                Source::Procfs(_) => {
                    interrupt::wait(Some(wait));
                }
                Source::Windows(w) => {
                    let wait = w.turn(now)?.map_or(wait, |next| wait.min(next - now));
                    let t = &mut w.trace;
                    if w.window.is_on() {
                        t.take(wait.min(STREAMING_STOP_CHECK))?;
                    } else {
                        // Nothing is traced: the drain dozes and sends nothing.
                        interrupt::wait(Some(wait));
                        t.take(Duration::ZERO)?;
                    }
                    // Before the window is on, whatever arrives is a closed window's.
                    let from = w.window.on_ns.unwrap_or(u64::MAX);
                    let until = w.window.off_ns.unwrap_or(u64::MAX);
                    if !yield_unless_due(caller, self.next_end) {
                        continue;
                    }
                    let until = t.watermark.min(until);
                    t.deliver_between_unless_due(
                        from,
                        until,
                        Some(self.next_end),
                        &mut self.directory,
                    );
                }
            }
        }
        // The interval's end: closed ahead of the load.
        self.caller.follow(true);
        self.next_end += self.interval;
        // A consumer that fell behind (a stopped process) skips the missed ends.
        if self.next_end < Instant::now() {
            self.next_end = Instant::now() + self.interval;
        }
        Ok(Some(self.close()?))
    }

    fn close(&mut self) -> Result<LiveInterval, RecordError> {
        let end_ns = monotonic_now_ns();
        let elapsed_s = (end_ns - self.last_end_ns) as f64 / 1e9;
        self.last_end_ns = end_ns;
        let mut notes = Vec::new();
        let (domains, energy) = self.interval_energy(elapsed_s, &mut notes)?;
        let mut traced_s = elapsed_s;
        if let Source::Windows(w) = &mut self.source {
            traced_s = w.close_window(end_ns, self.interval, &mut notes, &mut self.directory)?;
        }
        if let Source::Trace(t) = &mut self.source {
            let late = "this interval's last events count in the next one";
            t.catch_up(
                0,
                end_ns,
                self.interval,
                late,
                &mut notes,
                &mut self.directory,
            )?;
        }
        let (processes, lost_records) = match &mut self.source {
            Source::Trace(t) => (t.close_interval(&mut self.directory), t.lost),
            Source::Procfs(p) => {
                traced_s = 0.0;
                (p.sample(&self.roots, &mut self.directory), 0)
            }
            Source::Windows(w) => {
                let mut processes = w.procfs.sample(&self.roots, &mut self.directory);
                let traced = w.trace.close_interval(&mut self.directory);
                merge_wakeups(&mut processes, traced);
                // The next window starts with no state: what happened between the two is
                // unknown, and must not read as one long block or idle period.
                w.trace.analysis = StreamAnalysis::new();
                w.place_window(Instant::now(), self.interval);
                (processes, w.trace.lost)
            }
        };
        let mut processes = processes;
        for p in &mut processes {
            if p.info.comm.is_empty() {
                p.info.comm = self.comm_of(p.info.key.pid, &p.info.any_comm);
            }
            if p.info.cgroup.is_none() {
                p.info.cgroup = self.cgroup_of(p.info.key.pid);
            }
        }
        self.directory.forget_gone();
        // As the drain does its thread table (ProcessDirectory::forget_vanished_threads),
        // and the processes whose exit nothing showed.
        if self.last_thread_sweep.elapsed() >= SWEEP_VANISHED_EVERY {
            let roots = &self.roots;
            let vanished = |id| !procfs::tasks::thread_exists(roots, id);
            self.directory.forget_vanished_threads(vanished);
            self.directory.forget_vanished_processes(vanished);
            self.last_thread_sweep = Instant::now();
        }
        let basis = Basis::of(&energy);
        let source = match &energy {
            Provenance::Measured { source } => source.clone(),
            Provenance::Estimated { model, .. } => model.clone(),
            Provenance::Unavailable { .. } => "none".into(),
            Provenance::Mocked { source } => source.clone(),
        };
        Ok(LiveInterval {
            input: IntervalInput {
                end_ns,
                elapsed_s,
                domains,
                source,
                basis,
                processes,
                traced_s,
            },
            energy,
            lost_records,
            idle_states: self.idle_states(),
            notes,
        })
    }

    /// The name of a process whose main thread the trace did not show: procfs's while it
    /// lives (kept, so the series keeps its label), else a thread's of it.
    fn comm_of(&mut self, pid: u32, any: &str) -> String {
        match procfs::process::read_process(&self.roots, pid) {
            Ok(stat) => {
                self.directory.set_comm(pid, &stat.comm);
                stat.comm
            }
            Err(_) => any.to_string(),
        }
    }

    /// A process's cgroup, through its ancestry where it has ended.
    fn cgroup_of(&mut self, pid: u32) -> Option<String> {
        crate::procfs_source::cgroup_by_ancestry(&self.roots, &mut self.directory, pid)
    }

    /// The interval's energy per domain with each domain's idle power, and where it came
    /// from: the meter, or the model when there is none or it stopped answering.
    fn interval_energy(
        &mut self,
        elapsed_s: f64,
        notes: &mut Vec<String>,
    ) -> Result<(Vec<DomainInterval>, Provenance), RecordError> {
        let model_now = self.model.read()?;
        let model_then = std::mem::replace(&mut self.last.1, model_now.clone());
        if let Some(meter) = &self.meter {
            match (meter.read(), self.last.0.take()) {
                (Ok(now), Some(then)) => {
                    let energies = meter.energy_between(&then, &now, None);
                    let provenance = meter.provenance();
                    self.last.0 = Some(now);
                    let domains = self.measured_domains(energies, elapsed_s);
                    return Ok((domains, provenance));
                }
                (Ok(now), None) => {
                    // The meter answered again after a failed read: from now on.
                    self.last.0 = Some(now);
                }
                (Err(e), _) => {
                    notes.push(format!(
                        "the energy meter stopped answering ({}): energy is ESTIMATED by the power model from now on",
                        e.with_causes()
                    ));
                    self.meter = None;
                }
            }
        }
        let model = self.model.model().expect("the model meter is a model");
        let energies = self.model.energy_between(&model_then, &model_now, None);
        let domains = energies
            .into_iter()
            .map(|d| DomainInterval {
                name: d.name,
                joules: d.joules,
                counts_in_total: d.counts_in_total,
                idle_w: model.idle_w,
            })
            .collect();
        Ok((domains, self.model.provenance()))
    }

    fn measured_domains(
        &mut self,
        energies: Vec<powerlens_core::run::DomainEnergy>,
        elapsed_s: f64,
    ) -> Vec<DomainInterval> {
        for d in &energies {
            if elapsed_s > 0.0 {
                let w = d.joules / elapsed_s;
                let lowest = self.lowest_w.entry(d.name.clone()).or_insert(w);
                *lowest = lowest.min(w);
            }
        }
        let lowest_total: f64 = energies
            .iter()
            .filter(|d| d.counts_in_total)
            .map(|d| self.lowest_w.get(&d.name).copied().unwrap_or(0.0))
            .sum();
        energies
            .into_iter()
            .map(|d| {
                let lowest = self.lowest_w.get(&d.name).copied().unwrap_or(0.0);
                let idle_w = match self.idle {
                    IdlePower::Fixed(total) if d.counts_in_total && lowest_total > 0.0 => {
                        total * lowest / lowest_total
                    }
                    _ => lowest,
                };
                DomainInterval {
                    name: d.name,
                    joules: d.joules,
                    counts_in_total: d.counts_in_total,
                    idle_w,
                }
            })
            .collect()
    }

    /// Per CPU and idle state, the kernel's cumulative seconds now: the baseline of the
    /// first interval's residency (each interval carries its end's).
    pub fn idle_states(&self) -> Vec<IdleStateTime> {
        let mut out = Vec::new();
        for (cpu, names) in &self.idle_names {
            let Ok(counters) = cpuidle::read_counters(&self.roots, *cpu) else {
                continue;
            };
            for (name, c) in names.iter().zip(counters) {
                out.push(IdleStateTime {
                    cpu: *cpu,
                    state: name.clone(),
                    seconds: c.time_us as f64 / 1e6,
                });
            }
        }
        out
    }

    /// The online CPUs.
    pub fn cpus(&self) -> &[u32] {
        &self.cpus
    }
}

/// Opens the monitor's tracepoints, enabled when it traces throughout (in windows, the
/// switch turns them on); `Err(reason)` when tracing is not allowed here (the session is
/// then reduced) or was not wanted.
fn open_trace(
    roots: &Roots,
    opts: &LiveOptions,
) -> Result<Result<(TraceSource, TraceSwitch), String>, RecordError> {
    let windows = match opts.tracing {
        Tracing::Off => return Ok(Err("procfs sampling was asked for (--reduced)".into())),
        Tracing::Windows { .. } => true,
        Tracing::Continuous => false,
    };
    if let Err(e) = powerlens_sys::trace::ensure_tracefs(roots) {
        return Ok(Err(e.to_string()));
    }
    let has_waking = powerlens_sys::perf_caps::tracepoint_id(roots, "sched/sched_waking").is_ok();
    let options = CollectorOptions {
        buffer_pages: opts.buffer_pages,
        callchains: false,
        in_kernel: opts.in_kernel,
        ..Default::default()
    };
    // In windows, CPU time comes from procfs: the trace needs no runtime updates.
    let names = monitor_event_names(has_waking, !windows);
    let mut collector = match Collector::open(roots, &names, options) {
        Ok(c) => c,
        Err(e @ SysError::PermissionDenied { .. }) => return Ok(Err(e.to_string())),
        Err(e) => return Err(e).doing(|| "opening the tracepoints".into()),
    };
    let config = if windows { "agent-windows" } else { "agent" };
    let costs = crate::cost_cache::measured_or_kept(roots, &mut collector, false, config);
    let converter = Converter::new(collector.events());
    let in_kernel_events = collector.in_kernel_events();
    let in_kernel_refused = collector.in_kernel_refused().map(str::to_string);
    let mut threads = ThreadTable::default();
    threads.scan_procfs(roots);
    let switch = collector.switch()?;
    if !windows {
        collector.enable()?;
    }
    let drainer = Drainer::start_with(
        collector,
        converter,
        threads,
        None,
        roots.clone(),
        DrainStyle::LIVE,
    );
    if windows {
        // Off until the first window.
        drainer.doze();
    }
    let source = TraceSource {
        drainer,
        analysis: StreamAnalysis::new(),
        pending: PendingEvents::default(),
        watermark: 0,
        threads: Vec::new(),
        lost: 0,
        late_left_out: 0,
        costs,
        in_kernel_events,
        in_kernel_refused,
    };
    Ok(Ok((source, switch)))
}

/// How long after its time an event may still be on its way into a ring: its timestamp
/// is taken when its program (or perf's handler) starts, microseconds before its record
/// is committed. A drain that started this long after a time has every event before it.
const IN_FLIGHT_NS: u64 = 1_000_000;

impl TraceSource {
    /// Delivers the events from `from_ns` up to `until_ns`, waiting up to half an
    /// `interval` for the drain to pass `until_ns`, so that a drain thread the machine's
    /// load delayed does not leave an interval with its energy but without the work that
    /// used it; past that, says how far behind the drain is and what that costs (`late`).
    fn catch_up(
        &mut self,
        from_ns: u64,
        until_ns: u64,
        interval: Duration,
        late: &str,
        notes: &mut Vec<String>,
        directory: &mut ProcessDirectory,
    ) -> Result<(), RecordError> {
        // The drain's threads yield to the load while it runs; the interval's last drain
        // is awaited, and runs ahead of it. It is woken once the events in flight at
        // `until_ns` have landed: a drain woken sooner passes short of it, and the one
        // after comes at the drain's usual pace, 50 ms later.
        self.drainer.hurry(true);
        let in_flight_ends = until_ns + IN_FLIGHT_NS;
        let now = monotonic_now_ns();
        if now < in_flight_ends {
            std::thread::sleep(Duration::from_nanos(in_flight_ends - now));
        }
        self.drainer.wake();
        let deadline = Instant::now() + interval / 2;
        while self.watermark < until_ns + IN_FLIGHT_NS && Instant::now() < deadline {
            self.take(Duration::from_millis(10))?;
        }
        // One still behind stays ahead until it is on time again.
        self.drainer.hurry(self.watermark < until_ns);
        if self.watermark < until_ns {
            notes.push(format!(
                "the trace's drain is {:.0} ms behind (a busy machine): {late}",
                (until_ns - self.watermark) as f64 / 1e6
            ));
        }
        if self.late_left_out > 0 {
            notes.push(format!(
                "{} traced events of an earlier window arrived after it closed (a busy machine) and count in no interval",
                self.late_left_out
            ));
            self.late_left_out = 0;
        }
        self.deliver_between(from_ns, self.watermark.min(until_ns), directory);
        Ok(())
    }

    /// The interval's counters per process, and the threads that exited forgotten.
    fn close_interval(&mut self, directory: &mut ProcessDirectory) -> Vec<ProcessInterval> {
        let mut by_process: HashMap<u64, ProcessInterval> = HashMap::new();
        for (tid, c) in self.analysis.close_interval() {
            let info = directory.process_of(tid).clone();
            let p = by_process
                .entry(info.key.serial)
                .or_insert_with(|| ProcessInterval {
                    info,
                    runtime_ns: 0,
                    wakeups: WakeupCauses::default(),
                    idle_wakeups: 0,
                    unrecorded_wakeups: 0,
                    tracing_cpu_s: 0.0,
                });
            p.runtime_ns += c.runtime_ns;
            p.wakeups.add(&c.wakeups);
            p.idle_wakeups += c.idle_wakeups;
            p.unrecorded_wakeups += c.unrecorded_wakeups;
            p.tracing_cpu_s += c.traced_events.cpu_s(&self.costs);
        }
        by_process.into_values().collect()
    }

    /// Takes the batches that come within `wait`, keeping their events pending.
    fn take(&mut self, wait: Duration) -> Result<(), RecordError> {
        let mut first = true;
        loop {
            let batch = if first {
                first = false;
                match self.drainer.batches.recv_timeout(wait) {
                    Ok(b) => b,
                    Err(RecvTimeoutError::Timeout) => break,
                    Err(RecvTimeoutError::Disconnected) => return Err(RecordError::DrainFailed),
                }
            } else {
                match self.drainer.batches.try_recv() {
                    Ok(b) => b,
                    Err(_) => break,
                }
            };
            self.watermark = self.watermark.max(batch.drained_ns);
            self.absorb(batch);
        }
        Ok(())
    }

    fn absorb(&mut self, batch: Batch) {
        self.lost = batch.lost;
        self.threads.extend(batch.threads);
        for (cpu, events) in batch.events {
            self.pending.add(cpu, events);
        }
    }

    /// Feeds every pending event from `from` up to `until` ([`PendingEvents::take_between`]),
    /// after the thread-table rows that came with them. Events before `from` belong to a
    /// window already closed and analysed: they are left out (counted), not fed to the
    /// next one, whose analysis would read them as its own.
    fn deliver_between(&mut self, from: u64, until: u64, directory: &mut ProcessDirectory) {
        self.deliver_between_unless_due(from, until, None, directory);
    }

    /// As [`TraceSource::deliver_between`], but stops once `due` has come (looked at every
    /// [`DELIVERIES_BETWEEN_LOOKS`] events) and gives the rest back, for the close to
    /// deliver ahead of the load. A hand-on at nice 19 that the interval's end found with
    /// a large backlog went on (raised to −10 by the alarm) until it had delivered every
    /// event, however late that made the end: the likely way one end came 167 ms late in
    /// CI (debug build, beside two nice −10 spinners; not reproduced here in 210
    /// intervals).
    fn deliver_between_unless_due(
        &mut self,
        from: u64,
        until: u64,
        due: Option<Instant>,
        directory: &mut ProcessDirectory,
    ) {
        for row in self.threads.drain(..) {
            // A fork names the forking thread; procfs's scan, the parent process.
            directory.thread(row.tid, row.pid, &row.comm, row.parent_tid.or(row.ppid));
        }
        let (ready, stale) = self.pending.take_between(from, until);
        self.late_left_out += stale;
        let mut events = ready.into_iter().enumerate();
        while let Some((i, (_, (e, context)))) = events.next() {
            self.analysis.feed_in_context(&e, context);
            if let EventKind::Exit { tid } = e.kind {
                directory.exited(tid);
            }
            let look = (i + 1) % DELIVERIES_BETWEEN_LOOKS == 0;
            if look && due.is_some_and(|due| Instant::now() >= due) {
                self.pending.put_back(events.map(|(_, event)| event));
                return;
            }
        }
    }
}

impl Windowed {
    /// Places the next window at a random point of the interval that starts at `from`,
    /// so that it does not beat with a load's own period.
    fn place_window(&mut self, from: Instant, interval: Duration) {
        // xorshift64: the windows need spread, not quality.
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        let length = interval.mul_f64(self.duty);
        let slack = interval.saturating_sub(length);
        let offset = slack.mul_f64((self.seed >> 11) as f64 / (1u64 << 53) as f64);
        self.window = Window {
            start: Some(from + offset),
            end: Some(from + offset + length),
            on_ns: None,
            off_ns: None,
        };
    }

    /// Turns the tracepoints on or off when `now` has reached the window's start or end;
    /// returns when the next of those is due.
    fn turn(&mut self, now: Instant) -> Result<Option<Instant>, RecordError> {
        let w = &mut self.window;
        let (Some(start), Some(end)) = (w.start, w.end) else {
            return Ok(None);
        };
        if w.on_ns.is_none() {
            if now < start {
                return Ok(Some(start));
            }
            // Read before: the events that fire while the rest are turned on (attaching
            // a BPF program takes milliseconds) are the window's, and are not taken for a
            // closed window's late ones.
            let on_ns = monotonic_now_ns();
            self.switch
                .enable()
                .doing(|| "turning the tracepoints on".into())?;
            w.on_ns = Some(on_ns);
            self.trace.drainer.wake();
        }
        if w.off_ns.is_none() {
            if now < end {
                return Ok(Some(end));
            }
            self.switch
                .disable()
                .doing(|| "turning the tracepoints off".into())?;
            w.off_ns = Some(monotonic_now_ns());
            // The window's last events wait in the rings for its close.
            self.trace.drainer.doze();
        }
        Ok(None)
    }

    /// Ends the interval's window (if the interval ended first) and takes its events;
    /// returns the seconds traced.
    fn close_window(
        &mut self,
        end_ns: u64,
        interval: Duration,
        notes: &mut Vec<String>,
        directory: &mut ProcessDirectory,
    ) -> Result<f64, RecordError> {
        let w = &mut self.window;
        let Some(on_ns) = w.on_ns else {
            return Ok(0.0);
        };
        if w.off_ns.is_none() {
            self.switch
                .disable()
                .doing(|| "turning the tracepoints off".into())?;
            w.off_ns = Some(monotonic_now_ns());
        }
        let off_ns = w.off_ns.unwrap_or(end_ns);
        let t = &mut self.trace;
        let late = "this interval's wake-ups are short of the window's last events";
        t.catch_up(on_ns, off_ns, interval, late, notes, directory)?;
        t.drainer.doze();
        // Events past the window (none should be) belong to no window.
        t.pending.clear();
        Ok(off_ns.saturating_sub(on_ns) as f64 / 1e9)
    }
}

/// Yields the calling thread to the load for work that can wait, unless the interval's
/// end has come; whether it yielded. When it has, the close hands the events on, ahead of
/// the load: a thread that yielded first, beside processes at a higher priority than the
/// load's (two spinners at nice −10), waited so long for a CPU that intervals closed late.
/// The clock is read after the yield, so that an end alarm that raised the thread just
/// before it is not undone.
fn yield_unless_due(caller: &Hurry, due: Instant) -> bool {
    caller.follow(false);
    if Instant::now() >= due {
        caller.follow(true);
        return false;
    }
    true
}

/// Adds the wake-ups and tracing cost the trace saw to the processes procfs measured;
/// a process procfs did not list this interval (it charged no whole tick, or ended) gets
/// a row of its own with no CPU time.
fn merge_wakeups(processes: &mut Vec<ProcessInterval>, traced: Vec<ProcessInterval>) {
    for t in traced {
        match processes.iter_mut().find(|p| p.info.key == t.info.key) {
            Some(p) => {
                p.wakeups.add(&t.wakeups);
                p.idle_wakeups += t.idle_wakeups;
                p.unrecorded_wakeups += t.unrecorded_wakeups;
                p.tracing_cpu_s += t.tracing_cpu_s;
            }
            None => processes.push(ProcessInterval { runtime_ns: 0, ..t }),
        }
    }
}
