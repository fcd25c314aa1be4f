//! The streaming scheduler analysis: per-thread and per-CPU state machines fed one event at
//! a time, in time order. Memory grows with threads and CPUs, never with events.
//!
//! Thread states (VTune's vocabulary): *running*; *inactive* — runnable but not running,
//! after a wake-up or a preemption; *wait* — blocked, from a synchronization switch-out to
//! the wake-up. A switch-out while runnable is a *preemption*, any other (blocked) a
//! *synchronization* switch. A thread that runs first on a CPU just out of idle made an
//! *idle wake-up*; the idle period before it is added to its idle-before total.
//!
//! Intervals still open when the recording ends (a thread blocked, runnable or running at
//! the end) are counted up to the end.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::event::{Event, EventKind, InterruptKind, SwitchedOut, Tid, IDLE_TID};

/// Who or what made a thread runnable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WakeupCauses {
    /// Another thread (the waker was running on the CPU that issued the wake-up).
    pub thread: u64,
    /// A timer callback (hrtimer or timer wheel).
    pub timer: u64,
    /// A hardware interrupt handler.
    pub irq: u64,
    /// A softirq.
    pub softirq: u64,
    /// An IPI, or the idle task of a CPU (a remote wake-up with no thread behind it).
    pub ipi_or_idle: u64,
}

impl WakeupCauses {
    pub fn total(&self) -> u64 {
        self.thread + self.timer + self.irq + self.softirq + self.ipi_or_idle
    }
}

/// Everything the analysis knows about one thread.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadStats {
    pub tid: Tid,
    /// The process; the analysis leaves it to the caller, who knows it from the recording's
    /// thread table.
    pub pid: Option<u32>,
    /// The thread that created this one, when its fork was recorded.
    pub parent: Option<Tid>,
    pub comm: Option<String>,
    pub cpu_time_ns: u64,
    /// Switched out blocked.
    pub sync_switches: u64,
    /// Switched out runnable.
    pub preempt_switches: u64,
    /// Blocked time, from switch-out to wake-up.
    pub wait_ns: u64,
    /// Runnable but not running, from wake-up or preemption to switch-in.
    pub inactive_ns: u64,
    pub migrations: u64,
    pub wakeups_received: WakeupCauses,
    /// Wake-ups this thread issued to others.
    pub wakeups_caused: u64,
    /// Times this thread was the first to run on a CPU that had just left idle.
    pub idle_wakeups: u64,
    /// Total idle time of the CPU before those idle wake-ups.
    pub idle_before_wakeups_ns: u64,
}

/// Residency of one idle state on one CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdleResidency {
    pub entries: u64,
    pub time_ns: u64,
}

/// Everything the analysis knows about one CPU.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuStats {
    pub cpu: u32,
    /// Requested idle state (cpuidle index) → residency.
    pub idle: BTreeMap<u32, IdleResidency>,
    /// Time the idle task was current (includes idle-loop overhead outside idle states).
    pub idle_task_ns: u64,
    /// Idle periods that ended with a thread running next (rather than the idle task again).
    pub idle_wakeups: u64,
}

/// The result of a whole stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SchedSummary {
    pub start_ns: u64,
    pub end_ns: u64,
    /// By tid.
    pub threads: Vec<ThreadStats>,
    /// By CPU number.
    pub cpus: Vec<CpuStats>,
}

impl SchedSummary {
    pub fn elapsed_ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum ThreadState {
    Unknown,
    Running,
    Runnable { since: u64 },
    Blocked { since: u64 },
    Exited,
}

struct Thread {
    state: ThreadState,
    stats: ThreadStats,
}

#[derive(Default)]
struct Cpu {
    /// The current task and since when; `None` until the first switch on this CPU.
    current: Option<(Tid, u64)>,
    /// Requested state and start of the idle period in progress.
    idle_since: Option<(u32, u64)>,
    /// Length of the last idle period, while no thread has run since it ended.
    pending_idle: Option<u64>,
    /// Interrupt contexts active on this CPU, innermost last.
    interrupts: Vec<InterruptKind>,
    stats: CpuStats,
}

/// The streaming analysis. Feed events in time order, then [`SchedAnalysis::finish`].
#[derive(Default)]
pub struct SchedAnalysis {
    threads: HashMap<Tid, Thread>,
    cpus: Vec<Cpu>,
    start_ns: Option<u64>,
    last_ns: u64,
}

impl SchedAnalysis {
    pub fn new() -> Self {
        Self::default()
    }

    fn thread(&mut self, tid: Tid) -> &mut Thread {
        self.threads.entry(tid).or_insert_with(|| Thread {
            state: ThreadState::Unknown,
            stats: ThreadStats {
                tid,
                ..ThreadStats::default()
            },
        })
    }

    fn cpu(&mut self, cpu: u32) -> &mut Cpu {
        let i = cpu as usize;
        if self.cpus.len() <= i {
            self.cpus.resize_with(i + 1, Cpu::default);
            for (n, c) in self.cpus.iter_mut().enumerate() {
                c.stats.cpu = n as u32;
            }
        }
        &mut self.cpus[i]
    }

    /// Consumes one event. Events must come in non-decreasing time order.
    pub fn feed(&mut self, e: &Event) {
        let t = e.time_ns;
        let start = *self.start_ns.get_or_insert(t);
        self.last_ns = self.last_ns.max(t);
        match &e.kind {
            EventKind::Switch { prev, how, next } => {
                self.switch(e.cpu, t, start, *prev, *how, *next)
            }
            EventKind::Wakeup {
                tid, new_thread, ..
            } => self.wakeup(e.cpu, t, *tid, *new_thread),
            EventKind::Migrate { tid, .. } => self.thread(*tid).stats.migrations += 1,
            EventKind::Fork { child, parent } => {
                let parent_comm = self.threads.get(parent).and_then(|p| p.stats.comm.clone());
                let c = self.thread(*child);
                c.stats.parent = Some(*parent);
                if c.stats.comm.is_none() {
                    c.stats.comm = parent_comm;
                }
            }
            EventKind::Exec { tid, comm } => self.thread(*tid).stats.comm = Some(comm.clone()),
            EventKind::Exit { tid } => self.thread(*tid).state = ThreadState::Exited,
            EventKind::IdleEnter { state } => {
                let c = self.cpu(e.cpu);
                c.idle_since = Some((*state, t));
                c.stats.idle.entry(*state).or_default().entries += 1;
            }
            EventKind::IdleExit => {
                let c = self.cpu(e.cpu);
                if let Some((state, since)) = c.idle_since.take() {
                    c.stats.idle.entry(state).or_default().time_ns += t - since;
                    c.pending_idle = Some(c.pending_idle.unwrap_or(0) + (t - since));
                }
            }
            EventKind::InterruptEnter(kind) => self.cpu(e.cpu).interrupts.push(kind.clone()),
            EventKind::InterruptExit => {
                self.cpu(e.cpu).interrupts.pop();
            }
            EventKind::Frequency { .. } => {}
        }
    }

    fn switch(&mut self, cpu: u32, t: u64, start: u64, prev: Tid, how: SwitchedOut, next: Tid) {
        let c = self.cpu(cpu);
        // Interrupt contexts never span a context switch: anything left open lost its exit.
        c.interrupts.clear();
        let since = match c.current {
            Some((tid, since)) if tid == prev => since,
            // The first switch seen on this CPU: `prev` ran since the recording started.
            _ => start,
        };
        c.current = Some((next, t));
        if prev == IDLE_TID {
            c.stats.idle_task_ns += t - since;
        }
        let idle_wakeup = if next != IDLE_TID {
            c.pending_idle.take()
        } else {
            None
        };
        if next != IDLE_TID && idle_wakeup.is_some() {
            c.stats.idle_wakeups += 1;
        }

        if prev != IDLE_TID {
            let p = self.thread(prev);
            p.stats.cpu_time_ns += t - since;
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
        if next != IDLE_TID {
            let n = self.thread(next);
            match n.state {
                ThreadState::Runnable { since } => n.stats.inactive_ns += t - since,
                // The wake-up was not seen (before the recording, or lost): blocked until now.
                ThreadState::Blocked { since } => n.stats.wait_ns += t - since,
                _ => {}
            }
            n.state = ThreadState::Running;
            if let Some(idle) = idle_wakeup {
                n.stats.idle_wakeups += 1;
                n.stats.idle_before_wakeups_ns += idle;
            }
        }
    }

    fn wakeup(&mut self, cpu: u32, t: u64, tid: Tid, new_thread: bool) {
        let c = self.cpu(cpu);
        // The wake-up runs in the context of whatever is on the issuing CPU.
        let cause = match (c.interrupts.last(), c.current) {
            (Some(InterruptKind::Timer), _) => Cause::Timer,
            (Some(InterruptKind::Irq(_)), _) => Cause::Irq,
            (Some(InterruptKind::SoftIrq(_)), _) => Cause::SoftIrq,
            (Some(InterruptKind::Ipi), _) => Cause::IpiOrIdle,
            (None, Some((waker, _))) if waker != IDLE_TID => Cause::Thread(waker),
            (None, _) => Cause::IpiOrIdle,
        };
        let w = self.thread(tid);
        let becomes_runnable = match w.state {
            ThreadState::Blocked { since } => {
                w.stats.wait_ns += t - since;
                true
            }
            // First sight of the thread: it was blocked since before the recording.
            ThreadState::Unknown => true,
            // A reused tid.
            ThreadState::Exited => new_thread,
            // Already runnable or running: a redundant wake-up, not a state change.
            ThreadState::Runnable { .. } | ThreadState::Running => false,
        };
        if !becomes_runnable {
            return;
        }
        w.state = ThreadState::Runnable { since: t };
        let causes = &mut w.stats.wakeups_received;
        match cause {
            Cause::Thread(_) => causes.thread += 1,
            Cause::Timer => causes.timer += 1,
            Cause::Irq => causes.irq += 1,
            Cause::SoftIrq => causes.softirq += 1,
            Cause::IpiOrIdle => causes.ipi_or_idle += 1,
        }
        if let Cause::Thread(waker) = cause {
            if waker != tid {
                self.thread(waker).stats.wakeups_caused += 1;
            }
        }
    }

    /// Closes every open interval at `end_ns` (at least the last event's time) and returns
    /// the summary.
    pub fn finish(mut self, end_ns: u64) -> SchedSummary {
        let start = self.start_ns.unwrap_or(end_ns);
        let end = end_ns.max(self.last_ns);
        for i in 0..self.cpus.len() {
            let (current, idle_since) = (self.cpus[i].current, self.cpus[i].idle_since.take());
            if let Some((state, since)) = idle_since {
                self.cpus[i].stats.idle.entry(state).or_default().time_ns += end - since;
            }
            match current {
                Some((IDLE_TID, since)) => self.cpus[i].stats.idle_task_ns += end - since,
                Some((tid, since)) => self.thread(tid).stats.cpu_time_ns += end - since,
                None => {}
            }
        }
        let mut threads: Vec<ThreadStats> = self
            .threads
            .into_values()
            .map(|mut th| {
                match th.state {
                    ThreadState::Runnable { since } => th.stats.inactive_ns += end - since,
                    ThreadState::Blocked { since } => th.stats.wait_ns += end - since,
                    _ => {}
                }
                th.stats
            })
            .collect();
        threads.sort_by_key(|t| t.tid);
        SchedSummary {
            start_ns: start,
            end_ns: end,
            threads,
            cpus: self.cpus.into_iter().map(|c| c.stats).collect(),
        }
    }
}

enum Cause {
    Thread(Tid),
    Timer,
    Irq,
    SoftIrq,
    IpiOrIdle,
}

/// Analyses a whole stream.
pub fn analyse<'a>(events: impl IntoIterator<Item = &'a Event>, end_ns: u64) -> SchedSummary {
    let mut a = SchedAnalysis::new();
    for e in events {
        a.feed(e);
    }
    a.finish(end_ns)
}
