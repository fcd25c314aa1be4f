//! The streaming scheduler analysis: per-thread and per-CPU state machines fed one event at
//! a time, in time order. Memory grows with threads, processes and CPUs, never with events.
//!
//! Thread states (VTune's vocabulary): *running*; *inactive* — runnable but not running,
//! after a wake-up or a preemption; *wait* — blocked, from a synchronization switch-out to
//! the wake-up. A switch-out while runnable is a *preemption*, any other (blocked) a
//! *synchronization* switch.
//!
//! Idle: a thread that runs first on a CPU after that CPU's idle task made an *idle
//! wake-up*. The idle duration before it is the time inside `power:cpu_idle` states during
//! that idle-task period when the stream has such records, else the whole idle-task period
//! (so idle wake-ups work on kernels and perf setups that deliver no `cpu_idle` records).
//!
//! Lost events: a switch-out of a thread that is not the CPU's current task means its
//! switch-in was never recorded (this project's VMs drop events in the idle context of
//! cpu1). The switch-in is then *inferred* at the latest time known to precede it — the
//! later of the thread's wake-up (or block) time, the CPU's last recorded event and the
//! start of the current task — and counted per CPU in [`CpuStats::inferred_switch_ins`].
//! Where the recording has the scheduler's runtime updates (`sched_stat_runtime`), the run
//! is the kernel's own account: the switch-in is placed that long before the switch-out
//! (never before the bounds above), and the time before it keeps the thread's state —
//! runnable after a recorded wake-up or preemption, blocked otherwise. Without them, a
//! thread whose wake-up was lost too is taken to have run its usual run length.
//! A thread that shows up running on a second CPU is taken off the first at that CPU's
//! last recorded event, and that CPU's task is *unknown* until its next switch
//! ([`CpuStats::unknown_ns`]). No time is ever charged twice and no interval is negative:
//! per CPU, `busy_ns + idle_task_ns + unknown_ns` is the time from the recording start to
//! its end (see the conservation tests).
//!
//! Intervals still open when the recording ends (a thread blocked, runnable or running at
//! the end) are counted up to the end.

use std::collections::{BTreeMap, HashMap};

use super::event::{Event, EventKind, InterruptKind, SwitchedOut, Tid, TidMap, IDLE_TID};
// The figures this analysis produces, re-exported so that `analysis::SchedSummary` etc. keep
// naming them where they are computed.
pub use super::summary::{
    CpuStats, CpuTimeSource, IdleResidency, ProcessParallelism, SchedSummary, ThreadStats, Waker,
    WakeupCauses,
};
use super::tid_table::TidTable;
use super::tracing_cost::StackedKind;

/// Internal marker: the CPU's current task is not known (after a lost switch).
const UNKNOWN_TID: Tid = Tid::MAX;

/// An interrupt context open for longer than this lost its exit record.
pub const STALE_INTERRUPT_NS: u64 = 10_000_000;

/// No process group.
const NO_GROUP: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq)]
enum ThreadState {
    Unknown,
    Running { cpu: u32 },
    Runnable { since: u64 },
    Blocked { since: u64 },
    Exited,
}

struct Thread {
    state: ThreadState,
    group: u32,
    /// Time of the thread's latest `sched_stat_runtime`, `None` before the first.
    runtime_at: Option<u64>,
    /// The scheduler's runtime charges since the thread's last recorded switch-out: at a
    /// switch-out whose switch-in was lost, the kernel's account of how long that run was.
    runtime_since_switch_out_ns: u64,
    /// Runs whose switch-in and switch-out were both recorded: their total and count.
    observed_run_ns: u64,
    observed_runs: u64,
    stats: ThreadStats,
}

struct Cpu {
    /// The current task and since when; `None` until the first switch on this CPU.
    current: Option<(Tid, u64)>,
    /// The current task's switch-in was inferred or its start truncated.
    current_inferred: bool,
    /// Time of the last event recorded on this CPU.
    last_ns: u64,
    /// The task in whose context the latest events of this CPU were recorded (from
    /// [`SchedAnalysis::feed_in_context`]), and the time of the last event before that run
    /// of events (recorded in another task's context).
    ctx_tid: Tid,
    before_ctx_ns: u64,
    /// Requested state and start of the `cpu_idle` state in progress.
    idle_since: Option<(u32, u64)>,
    /// Time in `cpu_idle` states during the current idle-task period, and whether any
    /// `cpu_idle` record fell in it.
    period_idle_ns: u64,
    period_saw_cpu_idle: bool,
    /// Idle duration of the idle-task period that just ended, until a thread runs.
    pending_idle: Option<u64>,
    /// Interrupt contexts active on this CPU, innermost last.
    interrupts: Vec<(InterruptKind, u64)>,
    /// Current frequency and since when (for the per-CPU average).
    khz: Option<u64>,
    khz_since: u64,
    /// Start of the current task's running segment at the current frequency.
    seg_since: u64,
    /// The latest event counted on this CPU whose stack costs apart (a switch, wake-up or
    /// timer arming), and the thread it was counted against: a stack recorded right
    /// after it is its stack.
    stack_owner: Option<(StackedKind, Option<Tid>)>,
    stats: CpuStats,
}

impl Default for Cpu {
    fn default() -> Self {
        Cpu {
            current: None,
            current_inferred: false,
            last_ns: 0,
            ctx_tid: UNKNOWN_TID,
            before_ctx_ns: 0,
            idle_since: None,
            period_idle_ns: 0,
            period_saw_cpu_idle: false,
            pending_idle: None,
            interrupts: Vec::new(),
            khz: None,
            khz_since: 0,
            seg_since: 0,
            stack_owner: None,
            stats: CpuStats::default(),
        }
    }
}

struct Group {
    running: u32,
    since: Option<u64>,
    stats: ProcessParallelism,
}

/// Where a thread's time and idle wake-ups go as the analysis settles them, for an
/// analysis layered on this one (per call stack: `crate::stacks::attribution`). Called
/// with the same figures the thread's [`ThreadStats`] receive, at the moment they are
/// known, so the layer never re-derives thread states (nor the lost-event inference).
pub trait ThreadCharges {
    /// `tid` was in `state` over `[from, to)`: the intervals behind every figure, as the
    /// analysis settles them (inferences included), for timelines that must agree with
    /// the grid. Time of a thread between intervals is unknown to the analysis.
    fn interval(&mut self, _tid: Tid, _state: Interval, _from: u64, _to: u64) {}
    /// `tid` was blocked for `ns` (until a wake-up, a switch-in, or the end).
    fn wait(&mut self, _tid: Tid, _ns: u64) {}
    /// `tid` was runnable but not running for `ns`.
    fn inactive(&mut self, _tid: Tid, _ns: u64) {}
    /// `tid` ran first on a CPU that had been idle for `idle_ns`.
    fn idle_wakeup(&mut self, _tid: Tid, _idle_ns: u64) {}
    /// Thread `waker`, running on `cpu`, made another thread runnable.
    fn woke(&mut self, _cpu: u32, _waker: Tid) {}
    /// The scheduler charged `tid` `ns` of CPU time (a `sched_stat_runtime` update, the
    /// first one of a thread clipped at the stream's start): what
    /// [`ThreadStats::sched_runtime_ns`] adds up.
    fn runtime(&mut self, _tid: Tid, _ns: u64) {}
    /// `tid` became runnable, woken by `by`: what [`ThreadStats::wakeups_received`] counts.
    fn woken(&mut self, _tid: Tid, _by: Waker) {}
    /// An event was recorded in the context of thread `tid` (its handler ran in the
    /// thread's time): what [`ThreadStats::traced_events`] counts.
    fn traced(&mut self, _tid: Tid, _kind: &EventKind) {}
    /// The event of `kind` just counted against `tid` ([`ThreadCharges::traced`]) carried
    /// a stack: what [`TracedEvents::count_stack`](super::tracing_cost::TracedEvents)
    /// counts.
    fn traced_stack(&mut self, _tid: Tid, _kind: StackedKind) {}
    /// `tid`, seen to block, ran again without a recorded wake-up (lost, or issued where
    /// the kernel fires no tracepoint): what [`ThreadStats::unrecorded_wakeups`] counts.
    fn unrecorded_wakeup(&mut self, _tid: Tid) {}
}

/// A thread's state over an interval ([`ThreadCharges::interval`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interval {
    /// On a CPU: the switch intervals (`on_cpu_ns`).
    Running,
    /// Runnable, not running (`inactive_ns`).
    Runnable,
    /// Blocked (`wait_ns`).
    Blocked,
}

/// No layer: the plain per-thread analysis.
impl ThreadCharges for () {}

/// The streaming analysis. Feed events in time order, then [`SchedAnalysis::finish`].
#[derive(Default)]
pub struct SchedAnalysis<C: ThreadCharges = ()> {
    /// The layer told about every charge.
    charges: C,
    threads: TidTable<Thread>,
    cpus: Vec<Cpu>,
    start_ns: Option<u64>,
    last_ns: u64,
    /// tid → index in `groups`.
    group_of: TidMap<u32>,
    groups: Vec<Group>,
    /// Idle-duration thresholds (ns), ascending.
    idle_thresholds: Vec<u64>,
    /// Runs of any thread whose switch-in and switch-out were both recorded.
    observed_run_ns: u64,
    observed_runs: u64,
}

impl SchedAnalysis {
    pub fn new() -> Self {
        Self::default()
    }

    /// An analysis that also knows which process each thread belongs to (`tid → pid`, the
    /// recording's thread table, complete before streaming starts): the summary's threads
    /// carry their pid and [`SchedSummary::processes`] holds each process's parallelism.
    /// Threads missing from the map have no pid and no process.
    pub fn with_thread_groups(map: HashMap<Tid, u32>) -> Self {
        let mut by_pid: BTreeMap<u32, Vec<Tid>> = BTreeMap::new();
        for (tid, pid) in map {
            if tid != IDLE_TID && tid != UNKNOWN_TID {
                by_pid.entry(pid).or_default().push(tid);
            }
        }
        let mut a = Self::default();
        for (i, (pid, tids)) in by_pid.into_iter().enumerate() {
            a.groups.push(Group {
                running: 0,
                since: None,
                stats: ProcessParallelism {
                    pid,
                    threads: tids.len() as u32,
                    running_ns: vec![0; tids.len() + 1],
                },
            });
            for tid in tids {
                a.group_of.insert(tid, i as u32);
            }
        }
        a
    }
}

impl<C: ThreadCharges> SchedAnalysis<C> {
    /// The same analysis, telling `charges` about every charge from now on (call before
    /// feeding).
    pub fn with_charges<D: ThreadCharges>(self, charges: D) -> SchedAnalysis<D> {
        SchedAnalysis {
            charges,
            threads: self.threads,
            cpus: self.cpus,
            start_ns: self.start_ns,
            last_ns: self.last_ns,
            group_of: self.group_of,
            groups: self.groups,
            idle_thresholds: self.idle_thresholds,
            observed_run_ns: self.observed_run_ns,
            observed_runs: self.observed_runs,
        }
    }

    /// The layer, to feed it what only it reads (stacks, samples) alongside.
    pub fn charges_mut(&mut self) -> &mut C {
        &mut self.charges
    }

    /// Also counts, per CPU, the idle wake-ups after an idle period of at least each
    /// threshold (nanoseconds; typically each cpuidle state's target residency), so the
    /// report can say what share of idle periods were long enough for each state.
    pub fn with_idle_thresholds(mut self, mut thresholds_ns: Vec<u64>) -> Self {
        thresholds_ns.sort_unstable();
        thresholds_ns.dedup();
        self.idle_thresholds = thresholds_ns;
        for c in &mut self.cpus {
            c.stats.idle_wakeups_at_least = self.idle_thresholds.iter().map(|&t| (t, 0)).collect();
        }
        self
    }

    /// Forgets the threads that exited (their last switch-out was seen): a long-running
    /// analysis calls this between intervals, after it took what the layer counted for
    /// them, so that its memory follows the live threads. Their figures leave the
    /// summary [`SchedAnalysis::finish`] would give. Returns how many were forgotten.
    pub fn forget_exited(&mut self) -> usize {
        let before = self.threads.len();
        let group_of = &mut self.group_of;
        self.threads.retain(|tid, th| {
            let keep = th.state != ThreadState::Exited;
            if !keep {
                group_of.remove(&tid);
            }
            keep
        });
        before - self.threads.len()
    }

    /// Threads the analysis holds state for.
    pub fn thread_count(&self) -> usize {
        self.threads.len()
    }

    #[inline]
    fn thread(&mut self, tid: Tid) -> &mut Thread {
        let (groups, group_of) = (&self.groups, &self.group_of);
        self.threads.get_or_insert_with(tid, || {
            let group = group_of.get(&tid).copied().unwrap_or(NO_GROUP);
            Thread {
                state: ThreadState::Unknown,
                group,
                runtime_at: None,
                runtime_since_switch_out_ns: 0,
                observed_run_ns: 0,
                observed_runs: 0,
                stats: ThreadStats {
                    tid,
                    pid: groups.get(group as usize).map(|g| g.stats.pid),
                    ..ThreadStats::default()
                },
            }
        })
    }

    /// The CPU's state, created on first sight. Called several times per event: the
    /// common case is one bounds check, the growth path is kept out of line.
    #[inline]
    fn cpu(&mut self, cpu: u32) -> &mut Cpu {
        let i = cpu as usize;
        if self.cpus.len() <= i {
            self.grow_cpus(i + 1);
        }
        &mut self.cpus[i]
    }

    #[cold]
    #[inline(never)]
    fn grow_cpus(&mut self, len: usize) {
        self.cpus.resize_with(len, Cpu::default);
        for (n, c) in self.cpus.iter_mut().enumerate() {
            c.stats.cpu = n as u32;
            if c.stats.idle_wakeups_at_least.len() != self.idle_thresholds.len() {
                c.stats.idle_wakeups_at_least =
                    self.idle_thresholds.iter().map(|&t| (t, 0)).collect();
            }
        }
    }

    /// Consumes one event. Events must come in non-decreasing time order (an event older
    /// than the last one is taken as happening at the last one's time).
    pub fn feed(&mut self, e: &Event) {
        self.feed_in_context(e, None)
    }

    /// Consumes one event recorded in the context of task `context` (the tid in the perf
    /// sample's header: the task current on the CPU when the event fired, 0 for the idle
    /// task). With it, a lost switch-in of X is inferred before the run of events recorded
    /// in X's context, not after them, and a wake-up issued by a thread whose switch-in was
    /// lost is still credited to it. `None` is [`SchedAnalysis::feed`].
    pub fn feed_in_context(&mut self, e: &Event, context: Option<Tid>) {
        let t = e.time_ns.max(self.last_ns);
        let start = *self.start_ns.get_or_insert(t);
        self.last_ns = t;
        if let (Some(ctx), false) = (context, matches!(e.kind, EventKind::Frequency { .. })) {
            let c = self.cpu(e.cpu);
            if c.ctx_tid != ctx {
                c.before_ctx_ns = c.last_ns;
                c.ctx_tid = ctx;
            }
        }
        self.count_traced(e, context);
        match &e.kind {
            EventKind::Switch { prev, how, next } => {
                self.switch(e.cpu, t, start, *prev, *how, *next)
            }
            EventKind::Wakeup {
                tid, new_thread, ..
            } => self.wakeup(e.cpu, t, *tid, *new_thread, context),
            EventKind::Migrate { tid, .. } => self.thread(*tid).stats.migrations += 1,
            EventKind::Fork { child, parent } => {
                let parent_comm = self.threads.get(*parent).and_then(|p| p.stats.comm.clone());
                let c = self.thread(*child);
                c.stats.parent = Some(*parent);
                if c.stats.comm.is_none() {
                    c.stats.comm = parent_comm;
                }
            }
            EventKind::Exec { tid, comm } => self.thread(*tid).stats.comm = Some(comm.to_string()),
            EventKind::Exit { tid } => {
                let th = self.thread(*tid);
                // Still on its CPU until its last switch-out.
                if !matches!(th.state, ThreadState::Running { .. }) {
                    th.state = ThreadState::Exited;
                }
            }
            EventKind::IdleEnter { state } => {
                let c = self.cpu(e.cpu);
                c.stats.cpu_idle_records += 1;
                if let Some((old, since)) = c.idle_since.take() {
                    // The previous state's exit was not recorded: it ends here.
                    c.stats.idle.entry(old).or_default().time_ns += t - since;
                    c.period_idle_ns += t - since;
                }
                c.idle_since = Some((*state, t));
                c.period_saw_cpu_idle = true;
                c.stats.idle.entry(*state).or_default().entries += 1;
            }
            EventKind::IdleExit => {
                let c = self.cpu(e.cpu);
                c.stats.cpu_idle_records += 1;
                if let Some((state, since)) = c.idle_since.take() {
                    c.stats.idle.entry(state).or_default().time_ns += t - since;
                    c.period_idle_ns += t - since;
                }
                c.period_saw_cpu_idle = true;
            }
            EventKind::InterruptEnter(kind) => self.cpu(e.cpu).interrupts.push((*kind, t)),
            EventKind::InterruptExit => {
                self.cpu(e.cpu).interrupts.pop();
            }
            EventKind::Runtime { tid, ns } => {
                // The update covers the thread's run from `t − ns` to `t`; the first one
                // of a thread may reach back before the recording began: clip it there.
                let start = self.start_ns.unwrap_or(t);
                let th = self.thread(*tid);
                let credit = match th.runtime_at {
                    None => (*ns).min(t.saturating_sub(start)),
                    Some(_) => *ns,
                };
                th.stats.sched_runtime_ns += credit;
                th.runtime_since_switch_out_ns += credit;
                th.runtime_at = Some(t);
                self.charges.runtime(*tid, credit);
                // The update fires while the thread runs: if it is not this CPU's current
                // task, its switch-in here was lost before the update (or the update came
                // from a remote run queue), so the update bounds no switch-in here.
                if self.cpu(e.cpu).current.map(|(cur, _)| cur) != Some(*tid) {
                    return;
                }
            }
            // Stacks and CPU-time samples are the per-function analysis' business; a timer
            // being armed changes no thread's or CPU's state.
            EventKind::TimerArm { .. } | EventKind::CpuSample { .. } | EventKind::Stack { .. } => {}
            EventKind::Frequency { khz } => {
                self.cpu(e.cpu);
                self.charge_frequency(e.cpu, t);
                let c = &mut self.cpus[e.cpu as usize];
                if let Some(old) = c.khz {
                    c.stats.freq_known_ns += t - c.khz_since;
                    c.stats.khz_ns += (t - c.khz_since) as f64 * old as f64;
                }
                c.khz = Some(*khz);
                c.khz_since = t;
                c.seg_since = t;
                // The target CPU of a frequency change is not where it was recorded from:
                // it does not count as this CPU's last event.
                return;
            }
        }
        let c = self.cpu(e.cpu);
        c.last_ns = t;
    }

    /// Counts the event against its CPU and the thread whose context it fired in (its
    /// handler ran in that thread's time): the recorded context, else the thread the event
    /// names as running, else the CPU's current task. The idle task's events count for the
    /// CPU only.
    fn count_traced(&mut self, e: &Event, context: Option<Tid>) {
        if matches!(e.kind, EventKind::Stack { .. }) {
            // Part of the event before it on this CPU; with sampled stacks, a switch's,
            // wake-up's or timer arming's stack costs apart, in that event's thread.
            if let Some((kind, tid)) = self.cpu(e.cpu).stack_owner.take() {
                self.cpus[e.cpu as usize]
                    .stats
                    .traced_events
                    .count_stack(kind);
                if let Some(tid) = tid {
                    self.thread(tid).stats.traced_events.count_stack(kind);
                    self.charges.traced_stack(tid, kind);
                }
            }
            return;
        }
        let named = match e.kind {
            EventKind::Switch { prev, .. } => Some(prev),
            EventKind::Runtime { tid, .. } | EventKind::CpuSample { tid, .. } => Some(tid),
            _ => None,
        };
        let tid = match context {
            // An exited task's final switch-out carries perf's (u32)-1, the same as
            // UNKNOWN_TID: the switch names the task.
            Some(UNKNOWN_TID) | None => named.or_else(|| {
                self.cpus
                    .get(e.cpu as usize)
                    .and_then(|c| c.current)
                    .map(|(t, _)| t)
            }),
            known => known,
        };
        let tid = tid.filter(|&t| t != IDLE_TID && t != UNKNOWN_TID);
        let c = self.cpu(e.cpu);
        c.stats.traced_events.count(&e.kind);
        c.stack_owner = StackedKind::of(&e.kind).map(|kind| (kind, tid));
        if let Some(tid) = tid {
            self.thread(tid).stats.traced_events.count(&e.kind);
            self.charges.traced(tid, &e.kind);
        }
    }

    /// Charges the current thread of `cpu` its running time at the CPU's known frequency
    /// from the current segment's start to `until`.
    fn charge_frequency(&mut self, cpu: u32, until: u64) {
        let c = &mut self.cpus[cpu as usize];
        let (Some(khz), Some((tid, since))) = (c.khz, c.current) else {
            return;
        };
        if tid == IDLE_TID || tid == UNKNOWN_TID {
            return;
        }
        let d = until.saturating_sub(c.seg_since.max(since));
        c.seg_since = until;
        if let Some(th) = self.threads.get_mut(tid) {
            th.stats.freq_known_ns += d;
            th.stats.khz_ns += d as f64 * khz as f64;
        }
    }

    fn group_change(&mut self, group: u32, t: u64, up: bool) {
        let start = self.start_ns.unwrap_or(t);
        let Some(g) = self.groups.get_mut(group as usize) else {
            return;
        };
        let since = g.since.unwrap_or(start);
        let t = t.max(since);
        let n = g.running as usize;
        if g.stats.running_ns.len() <= n {
            g.stats.running_ns.resize(n + 1, 0);
        }
        g.stats.running_ns[n] += t - since;
        g.since = Some(t);
        g.running = if up {
            g.running + 1
        } else {
            g.running.saturating_sub(1)
        };
    }

    /// Ends the running interval of the CPU's current task `tid` at `t`; `end_observed`
    /// when `t` is a recorded switch-out (not an inference or the recording's end).
    fn close(&mut self, cpu: u32, tid: Tid, t: u64, end_observed: bool) {
        let c = &mut self.cpus[cpu as usize];
        let observed = end_observed && !c.current_inferred;
        let since = c.current.map(|(_, s)| s).unwrap_or(t);
        let d = t.saturating_sub(since);
        match tid {
            IDLE_TID => {
                c.stats.idle_task_ns += d;
                if let Some((state, s)) = c.idle_since.take() {
                    // The exit of the idle state was not recorded: the switch ends it.
                    let r = t.saturating_sub(s);
                    c.stats.idle.entry(state).or_default().time_ns += r;
                    c.period_idle_ns += r;
                }
                c.pending_idle = Some(if c.period_saw_cpu_idle {
                    c.period_idle_ns
                } else {
                    d
                });
            }
            UNKNOWN_TID => c.stats.unknown_ns += d,
            _ => {
                c.stats.busy_ns += d;
                self.charge_frequency(cpu, t);
                self.charges.interval(tid, Interval::Running, since, t);
                let th = self.thread(tid);
                th.stats.on_cpu_ns += d;
                if observed {
                    th.observed_run_ns += d;
                    th.observed_runs += 1;
                }
                let group = th.group;
                if observed {
                    self.observed_run_ns += d;
                    self.observed_runs += 1;
                }
                if group != NO_GROUP {
                    self.group_change(group, t, false);
                }
            }
        }
    }

    /// Mean length of `tid`'s fully recorded runs, else of every thread's.
    fn mean_run(&self, tid: Tid) -> Option<u64> {
        match self.threads.get(tid) {
            Some(th) if th.observed_runs > 0 => Some(th.observed_run_ns / th.observed_runs),
            _ if self.observed_runs > 0 => Some(self.observed_run_ns / self.observed_runs),
            _ => None,
        }
    }

    /// Takes `tid` off another CPU where it is still current (its switch-out there was not
    /// recorded), at that CPU's last recorded event; that CPU's task becomes unknown.
    /// Returns the time it was taken off.
    fn detach(&mut self, tid: Tid, cpu: u32, t: u64) -> Option<u64> {
        let ThreadState::Running { cpu: other } = self.threads.get(tid)?.state else {
            return None;
        };
        if other == cpu {
            return None;
        }
        let o = &self.cpus[other as usize];
        match o.current {
            Some((cur, since)) if cur == tid => {
                let off = o.last_ns.max(since).min(t);
                self.close(other, tid, off, false);
                let o = &mut self.cpus[other as usize];
                o.current = Some((UNKNOWN_TID, off));
                o.pending_idle = None;
                self.thread(tid).state = ThreadState::Unknown;
                Some(off)
            }
            _ => {
                self.thread(tid).state = ThreadState::Unknown;
                None
            }
        }
    }

    /// Makes `tid` the current task of `cpu` from `t`.
    fn open(&mut self, cpu: u32, tid: Tid, t: u64) {
        let c = &mut self.cpus[cpu as usize];
        c.current = Some((tid, t));
        c.current_inferred = false;
        c.seg_since = t;
        if tid == IDLE_TID {
            c.period_idle_ns = 0;
            c.period_saw_cpu_idle = false;
            c.pending_idle = None;
            return;
        }
        let idle = c.pending_idle.take();
        if tid == UNKNOWN_TID {
            return;
        }
        if let Some(idle) = idle {
            c.stats.idle_wakeups += 1;
            c.stats.idle_before_wakeups_ns += idle;
            for (threshold, n) in &mut c.stats.idle_wakeups_at_least {
                if idle >= *threshold {
                    *n += 1;
                } else {
                    break;
                }
            }
        }
        self.detach(tid, cpu, t);
        let n = self.thread(tid);
        match n.state {
            ThreadState::Runnable { since } => {
                let d = t.saturating_sub(since);
                n.stats.inactive_ns += d;
                self.charges.inactive(tid, d);
                self.charges.interval(tid, Interval::Runnable, since, t);
            }
            // It was seen to block, and its wake-up was not recorded (lost, or fired in a
            // context the kernel delivers no tracepoint from): blocked until now.
            ThreadState::Blocked { since } => {
                let d = t.saturating_sub(since);
                n.stats.unrecorded_wakeups += 1;
                n.stats.wait_ns += d;
                self.charges.wait(tid, d);
                self.charges.unrecorded_wakeup(tid);
                self.charges.interval(tid, Interval::Blocked, since, t);
                self.cpus[cpu as usize].stats.unrecorded_wakeups += 1;
            }
            _ => {}
        }
        let n = self.thread(tid);
        n.state = ThreadState::Running { cpu };
        if let Some(idle) = idle {
            n.stats.idle_wakeups += 1;
            n.stats.idle_before_wakeups_ns += idle;
            self.charges.idle_wakeup(tid, idle);
        }
        let group = self.thread(tid).group;
        if group != NO_GROUP {
            self.group_change(group, t, true);
        }
    }

    fn switch(&mut self, cpu: u32, t: u64, start: u64, prev: Tid, how: SwitchedOut, next: Tid) {
        let c = self.cpu(cpu);
        // Interrupt contexts never span a context switch: anything left open lost its exit.
        c.interrupts.clear();
        // The latest event known to precede `prev`'s switch-in: the last one recorded
        // outside `prev`'s context when contexts are known, else the CPU's last event.
        let last = if c.ctx_tid == prev {
            c.before_ctx_ns
        } else {
            c.last_ns
        };
        let current = c.current;
        match current {
            Some((cur, _)) if cur == prev => {}
            None if prev == IDLE_TID
                || matches!(
                    self.threads.get(prev).map(|th| th.state),
                    None | Some(ThreadState::Unknown)
                ) =>
            {
                // The first switch on this CPU, and nothing says `prev` started later: it
                // ran since the recording started.
                let c = &mut self.cpus[cpu as usize];
                c.current = Some((prev, start));
                c.current_inferred = true;
                c.seg_since = start;
                if prev != IDLE_TID {
                    let th = self.thread(prev);
                    th.state = ThreadState::Running { cpu };
                    let group = th.group;
                    if group != NO_GROUP {
                        self.group_change(group, start, true);
                    }
                }
            }
            current => {
                // `prev` is switched out, so it was switched in; the kernel did not record
                // when. Infer it at the latest time known to precede it.
                let (cur, cur_since) = current.unwrap_or((UNKNOWN_TID, start));
                let mut not_before = last.max(cur_since);
                if prev != IDLE_TID {
                    if let Some(off) = self.detach(prev, cpu, t) {
                        not_before = not_before.max(off);
                    }
                    match self.threads.get(prev).map(|th| th.state) {
                        Some(ThreadState::Runnable { since })
                        | Some(ThreadState::Blocked { since }) => {
                            not_before = not_before.max(since)
                        }
                        _ => {}
                    }
                }
                let mut inferred = not_before.min(t);
                if prev != IDLE_TID {
                    let (ran, state) = self.threads.get(prev).map_or((0, None), |th| {
                        (th.runtime_since_switch_out_ns, Some(th.state))
                    });
                    if ran > 0 {
                        // The scheduler charged the thread `ran` since its last switch-out:
                        // its own account of this run, which began that long before the
                        // switch-out. Before that the thread was still in the state it was
                        // last seen in (the CPU ran what it ran), not running.
                        inferred = inferred.max(t.saturating_sub(ran));
                    } else if !matches!(state, Some(ThreadState::Runnable { .. })) {
                        // A blocked `prev` ran again without its wake-up recorded (`open`
                        // counts it; on this project's VMs both are lost together in cpu1's
                        // idle context), and no runtime update says for how long: the
                        // bounds say nothing about when it woke, so it is taken to have run
                        // its usual run length.
                        if let Some(mean) = self.mean_run(prev) {
                            inferred = inferred.max(t.saturating_sub(mean));
                        }
                    }
                }
                self.cpus[cpu as usize].current = Some((cur, cur_since));
                self.close(cpu, cur, inferred, false);
                if cur != IDLE_TID && cur != UNKNOWN_TID {
                    // How `cur` left is unknown: no switch is counted, no state guessed.
                    let th = self.thread(cur);
                    if th.state == (ThreadState::Running { cpu }) {
                        th.state = ThreadState::Unknown;
                    }
                }
                self.cpus[cpu as usize].stats.inferred_switch_ins += 1;
                self.thread(prev).stats.inferred_switch_ins += 1;
                self.open(cpu, prev, inferred);
                self.cpus[cpu as usize].current_inferred = true;
            }
        }

        self.close(cpu, prev, t, true);
        if prev != IDLE_TID {
            let p = self.thread(prev);
            p.runtime_since_switch_out_ns = 0;
            p.state = match how {
                SwitchedOut::Preempted => {
                    p.stats.preempt_switches += 1;
                    ThreadState::Runnable { since: t }
                }
                SwitchedOut::Blocked => {
                    p.stats.sync_switches += 1;
                    ThreadState::Blocked { since: t }
                }
                SwitchedOut::Exited => ThreadState::Exited,
            };
        }
        self.open(cpu, next, t);
    }

    fn wakeup(&mut self, cpu: u32, t: u64, tid: Tid, new_thread: bool, context: Option<Tid>) {
        let c = self.cpu(cpu);
        // The wake-up runs in the context of whatever is on the issuing CPU: the recorded
        // context when known (right even after a lost switch), else the current task.
        let current = match context {
            Some(ctx) => Some((ctx, t)),
            None => c.current,
        };
        // An interrupt context older than STALE_INTERRUPT_NS lost its exit record (handlers
        // run for microseconds): it no longer explains anything.
        while c
            .interrupts
            .last()
            .is_some_and(|(_, since)| t - since > STALE_INTERRUPT_NS)
        {
            c.interrupts.pop();
        }
        let cause = match (c.interrupts.last().map(|(k, _)| k), current) {
            (Some(InterruptKind::Timer { .. }), _) => Waker::Timer,
            (Some(InterruptKind::Irq(_)), _) => Waker::Irq,
            (Some(InterruptKind::SoftIrq(_)), _) => Waker::SoftIrq,
            (Some(InterruptKind::Ipi), _) => Waker::IpiOrIdle,
            (None, Some((waker, _))) if waker != IDLE_TID && waker != UNKNOWN_TID => {
                Waker::Thread(waker)
            }
            (None, _) => Waker::IpiOrIdle,
        };
        let mut waited = None;
        let w = self.thread(tid);
        let becomes_runnable = match w.state {
            ThreadState::Blocked { since } => {
                w.stats.wait_ns += t - since;
                waited = Some(t - since);
                true
            }
            // First sight of the thread: it was blocked since before the recording.
            ThreadState::Unknown => true,
            // A reused tid.
            ThreadState::Exited => new_thread,
            // Already runnable or running: a redundant wake-up, not a state change.
            ThreadState::Runnable { .. } | ThreadState::Running { .. } => false,
        };
        if !becomes_runnable {
            return;
        }
        w.state = ThreadState::Runnable { since: t };
        if let Some(d) = waited {
            self.charges.wait(tid, d);
            self.charges.interval(tid, Interval::Blocked, t - d, t);
        }
        self.thread(tid).stats.wakeups_received.count(cause);
        self.charges.woken(tid, cause);
        if let Waker::Thread(waker) = cause {
            if waker != tid {
                self.thread(waker).stats.wakeups_caused += 1;
                self.charges.woke(cpu, waker);
            }
        }
    }

    /// Closes every open interval at `end_ns` (at least the last event's time) and returns
    /// the summary.
    pub fn finish(self, end_ns: u64) -> SchedSummary {
        self.finish_with_charges(end_ns).0
    }

    /// As [`SchedAnalysis::finish`], also returning the layer (told about the intervals
    /// still open at the end).
    pub fn finish_with_charges(mut self, end_ns: u64) -> (SchedSummary, C) {
        let start = self.start_ns.unwrap_or(end_ns);
        let end = end_ns.max(self.last_ns);
        for i in 0..self.cpus.len() {
            let cpu = i as u32;
            match self.cpus[i].current {
                Some((tid, since)) => {
                    // Still running at the end: the scheduler has not accounted the run
                    // since its last update yet; the switch interval stands in for it.
                    if tid != IDLE_TID && tid != UNKNOWN_TID {
                        let th = self.thread(tid);
                        if let Some(at) = th.runtime_at {
                            th.stats.sched_runtime_ns += end.saturating_sub(at.max(since));
                        }
                    }
                    self.close(cpu, tid, end, false)
                }
                // No switch ever seen here: what ran is unknown.
                None => self.cpus[i].stats.unknown_ns += end - start,
            }
            let c = &mut self.cpus[i];
            if let Some((state, since)) = c.idle_since.take() {
                c.stats.idle.entry(state).or_default().time_ns += end - since;
            }
            if let Some(khz) = c.khz {
                c.stats.freq_known_ns += end - c.khz_since;
                c.stats.khz_ns += (end - c.khz_since) as f64 * khz as f64;
            }
        }
        for g in &mut self.groups {
            let since = g.since.unwrap_or(start).min(end);
            let n = g.running as usize;
            if g.stats.running_ns.len() <= n {
                g.stats.running_ns.resize(n + 1, 0);
            }
            g.stats.running_ns[n] += end - since;
        }
        let charges = &mut self.charges;
        let mut threads: Vec<ThreadStats> = self
            .threads
            .into_values()
            .map(|mut th| {
                match th.state {
                    ThreadState::Runnable { since } => {
                        th.stats.inactive_ns += end.saturating_sub(since);
                        charges.inactive(th.stats.tid, end.saturating_sub(since));
                        charges.interval(th.stats.tid, Interval::Runnable, since, end);
                    }
                    ThreadState::Blocked { since } => {
                        th.stats.wait_ns += end.saturating_sub(since);
                        charges.wait(th.stats.tid, end.saturating_sub(since));
                        charges.interval(th.stats.tid, Interval::Blocked, since, end);
                    }
                    _ => {}
                }
                // CPU time is the scheduler's account wherever the recording has it.
                if th.runtime_at.is_some() {
                    th.stats.cpu_time_ns = th.stats.sched_runtime_ns;
                    th.stats.cpu_time_source = CpuTimeSource::SchedRuntime;
                } else {
                    th.stats.cpu_time_ns = th.stats.on_cpu_ns;
                    th.stats.cpu_time_source = CpuTimeSource::SwitchIntervals;
                }
                th.stats
            })
            .collect();
        threads.sort_by_key(|t| t.tid);
        let summary = SchedSummary {
            start_ns: start,
            end_ns: end,
            threads,
            cpus: self.cpus.into_iter().map(|c| c.stats).collect(),
            processes: self.groups.into_iter().map(|g| g.stats).collect(),
        };
        (summary, self.charges)
    }
}

/// Analyses a whole stream.
pub fn analyse<'a>(events: impl IntoIterator<Item = &'a Event>, end_ns: u64) -> SchedSummary {
    let mut a = SchedAnalysis::new();
    for e in events {
        a.feed(e);
    }
    a.finish(end_ns)
}
