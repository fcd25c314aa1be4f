//! What the scheduler analysis hands on: per-thread, per-CPU and per-process figures of a
//! whole stream ([`SchedSummary`]), kept apart from the state machines in
//! [`super::analysis`] that compute them, so that readers of the figures (the report, the
//! attribution, the monitor) need not know how they were counted.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::event::Tid;
use super::tracing_cost::TracedEvents;

/// What made a thread runnable: the context the wake-up was issued in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waker {
    /// This thread, running on the issuing CPU.
    Thread(Tid),
    Timer,
    Irq,
    SoftIrq,
    /// An IPI, or the idle task of a CPU (a remote wake-up with no thread behind it).
    IpiOrIdle,
}

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

    /// Counts one wake-up by `by`.
    pub fn count(&mut self, by: Waker) {
        match by {
            Waker::Thread(_) => self.thread += 1,
            Waker::Timer => self.timer += 1,
            Waker::Irq => self.irq += 1,
            Waker::SoftIrq => self.softirq += 1,
            Waker::IpiOrIdle => self.ipi_or_idle += 1,
        }
    }

    pub fn add(&mut self, o: &WakeupCauses) {
        self.thread += o.thread;
        self.timer += o.timer;
        self.irq += o.irq;
        self.softirq += o.softirq;
        self.ipi_or_idle += o.ipi_or_idle;
    }
}

/// Everything the analysis knows about one thread.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadStats {
    pub tid: Tid,
    /// The process, when the thread table given to
    /// [`super::analysis::SchedAnalysis::with_thread_groups`] knows the thread.
    pub pid: Option<u32>,
    /// The thread that created this one, when its fork was recorded.
    pub parent: Option<Tid>,
    pub comm: Option<String>,
    /// CPU time: the scheduler's own account (Σ `sched_stat_runtime`, what getrusage,
    /// `ps` and `CLOCK_THREAD_CPUTIME_ID` show) where the recording has it for the thread,
    /// else the switch intervals ([`ThreadStats::on_cpu_ns`]); which one is
    /// [`ThreadStats::cpu_time_source`].
    pub cpu_time_ns: u64,
    /// Time between the thread's recorded switch-ins and switch-outs: the occupancy that
    /// per-CPU busy time and timelines are made of. Differs from the scheduler's account
    /// where a kernel timestamps switches apart from its runtime updates (this project's
    /// VMs, on a CPU shared with a busy thread) and by the switch's own cost.
    pub on_cpu_ns: u64,
    pub cpu_time_source: CpuTimeSource,
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
    /// Times the thread ran again after blocking without its wake-up recorded (its
    /// switch-in recorded or not): `wakeups_received` is short of this many (causes
    /// unknown).
    pub unrecorded_wakeups: u64,
    /// Wake-ups this thread issued to others.
    pub wakeups_caused: u64,
    /// Times this thread was the first to run on a CPU that had just left idle.
    pub idle_wakeups: u64,
    /// Total idle time of the CPU before those idle wake-ups.
    pub idle_before_wakeups_ns: u64,
    /// Running time during which the CPU's frequency was known (from `Frequency` events).
    pub freq_known_ns: u64,
    /// Σ running time × CPU frequency over that time, in kHz·ns.
    pub khz_ns: f64,
    /// CPU time the scheduler itself charged (Σ sched_stat_runtime within the recording),
    /// when recorded.
    pub sched_runtime_ns: u64,
    /// Switch-ins of this thread the kernel did not record and the analysis inferred.
    pub inferred_switch_ins: u64,
    /// Events recorded in this thread's context: their handlers ran in its time.
    #[serde(default)]
    pub traced_events: TracedEvents,
}

/// Where a thread's [`ThreadStats::cpu_time_ns`] comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CpuTimeSource {
    /// Σ `sched_stat_runtime`: the scheduler's own account, as getrusage reports it.
    #[default]
    SchedRuntime,
    /// The switch intervals: the recording has no `sched_stat_runtime` for the thread
    /// (an older recording or kernel, or a real-time or deadline thread on kernels that
    /// account those without the tracepoint).
    SwitchIntervals,
    /// `/proc/<pid>/task/<tid>/schedstat` samples of a reduced recording (the same
    /// scheduler account, sampled rather than traced).
    Procfs,
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
    /// Requested idle state (cpuidle index) → residency, from `power:cpu_idle` records.
    pub idle: BTreeMap<u32, IdleResidency>,
    /// `power:cpu_idle` records seen on this CPU (enter and exit). Zero means the trace
    /// says nothing about idle states here: residency is unavailable, not zero.
    pub cpu_idle_records: u64,
    /// Time the idle task was current (includes idle-loop overhead outside idle states).
    pub idle_task_ns: u64,
    /// Time a thread was current.
    pub busy_ns: u64,
    /// Time the current task was unknown (after an event the kernel did not record).
    pub unknown_ns: u64,
    /// Idle-task periods that ended with a thread running next.
    pub idle_wakeups: u64,
    /// Total idle duration before those idle wake-ups.
    pub idle_before_wakeups_ns: u64,
    /// For each threshold given to [`super::analysis::SchedAnalysis::with_idle_thresholds`]: the threshold
    /// and how many idle wake-ups came after at least that long idle.
    pub idle_wakeups_at_least: Vec<(u64, u64)>,
    /// Switch-ins the kernel did not record, inferred from a later switch-out.
    pub inferred_switch_ins: u64,
    /// Of those, switch-ins of a thread last seen blocking: its wake-up was not recorded
    /// either, so the wake-ups received on this CPU are short of this many.
    pub unrecorded_wakeups: u64,
    /// Time during which the CPU's frequency was known.
    pub freq_known_ns: u64,
    /// Σ time × frequency over that time, in kHz·ns.
    pub khz_ns: f64,
    /// Every event recorded here, in any context.
    #[serde(default)]
    pub traced_events: TracedEvents,
}

/// Effective parallelism of one process: how long 0, 1, 2, … of its threads ran at once.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessParallelism {
    pub pid: u32,
    /// Threads of the process in the thread table.
    pub threads: u32,
    /// `running_ns[n]` = time with exactly `n` threads of the process running. Sums to
    /// the recording's elapsed time.
    pub running_ns: Vec<u64>,
}

/// The result of a whole stream.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SchedSummary {
    pub start_ns: u64,
    pub end_ns: u64,
    /// By tid.
    pub threads: Vec<ThreadStats>,
    /// By CPU number.
    pub cpus: Vec<CpuStats>,
    /// By pid; only with [`super::analysis::SchedAnalysis::with_thread_groups`].
    pub processes: Vec<ProcessParallelism>,
}

impl SchedSummary {
    pub fn elapsed_ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }
}
