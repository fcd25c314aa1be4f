//! The report model: every figure of `powerlens report`, as the JSON contract names it
//! (docs/REPORT.md), and what the recording knows besides the trace that goes into it.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use crate::advice::model::Advice;
use crate::provenance::Provenance;
use crate::sched::analysis::{CpuTimeSource, SchedAnalysis, WakeupCauses};
use crate::sched::cpu_accounts::CpuTimeAccounts;
use crate::sched::event::Tid;
use crate::sched::tracing_cost::{EventCosts, Perturbation, TracingPath};
use crate::sched::untraced::UntracedRecord;
use crate::sched::wakeups::WakeupCause;

/// One thread of the recording's thread table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadInfo {
    pub tid: Tid,
    pub pid: u32,
    pub comm: String,
}

/// One cpuidle state as the driver declares it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdleStateInfo {
    pub index: u32,
    pub name: String,
    pub latency_us: u64,
    pub target_residency_us: u64,
}

/// cpuidle sysfs counters of one state on one CPU: deltas over the recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SysfsIdle {
    pub cpu: u32,
    pub index: u32,
    pub entries: u64,
    pub time_ns: u64,
}

/// Energy over the recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnergyInput {
    pub total_j: f64,
    /// Per domain (e.g. `package-0`, `package-0/core`), for display.
    pub domains: Vec<(String, f64)>,
    pub provenance: Provenance,
    /// Baseline power (measured idle before recording, or the model's idle term).
    pub idle_power_w: f64,
}

/// Everything the recording knows besides the event stream.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordingContext {
    /// Every thread the recording knows.
    pub threads: Vec<ThreadInfo>,
    /// The processes the analysis is about; `None` = whole system (`-a`).
    pub target_pids: Option<BTreeSet<u32>>,
    /// `Err(reason)` when there is no cpuidle driver.
    pub idle_states: Result<Vec<IdleStateInfo>, String>,
    /// `Err(reason)` when the counters could not be read.
    pub sysfs_idle: Result<Vec<SysfsIdle>, String>,
    /// `Err(Provenance::Unavailable { .. })` when no energy source or model applied.
    pub energy: Result<EnergyInput, Provenance>,
    /// Sampled cpufreq: `(time_ns, cpu, khz)`; may be empty.
    pub frequency_samples: Vec<(u64, u32, u64)>,
    /// Lost records per CPU.
    pub lost_records: Vec<(u32, u64)>,
    /// Events that could not be recorded: `(event, reason)`.
    pub unavailable_events: Vec<(String, String)>,
    /// What stretch of time the recording covers; `None` when the file does not say.
    pub span: Option<RecordingSpan>,
    /// What one traced event of each kind cost, measured when the recording started;
    /// `Err(why)` when the recording does not have it (made before it was measured, or its
    /// metadata is damaged). A reduced recording traced nothing: its figures are absent.
    pub tracing_cost: Result<EventCosts, String>,
    /// How the recording traced; `None` for a reduced recording (it traced nothing).
    pub tracing_path: Option<TracingPath>,
    /// The recorder's own process, whose threads are recorded like any other's; `None`
    /// in a recording that does not say (made before it did).
    pub recorder_pid: Option<u32>,
    /// How long the recorder took from its start to tracing's (opening the events,
    /// measuring their cost, starting its threads), seconds: a recording covers no time
    /// before it. `None` in a recording that does not say (made before it did).
    pub start_up_s: Option<f64>,
    /// The command's untraced runs before the recording (`record --untraced-runs`) and
    /// the recorded run's CPU time; empty without them.
    pub untraced: UntracedRecord,
}

/// What stretch of time a recording covers, which decides whether its energy is the energy
/// to retire a piece of work: only a whole run of a command is one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordingSpan {
    /// `record -- CMD` from the command's start to its exit.
    WholeRun,
    /// `record -- CMD` that ended before the command did (`--duration`, Ctrl-C, a write
    /// error) or whose recorder was killed.
    CutShort,
    /// A window of time: `record -a` or `record -p PID`.
    Window,
}

impl RecordingSpan {
    /// In words, for the text report and the comparison's findings.
    pub fn describe(self) -> &'static str {
        match self {
            RecordingSpan::WholeRun => "one whole run of the command (start to exit)",
            RecordingSpan::CutShort => {
                "part of a run of the command (it ended before the command did)"
            }
            RecordingSpan::Window => {
                "a window of time (system-wide or attached to a process), not a run of a command"
            }
        }
    }
}

impl RecordingContext {
    /// The `tid → pid` map to give [`SchedAnalysis::with_thread_groups`].
    pub fn thread_groups(&self) -> HashMap<Tid, u32> {
        self.threads.iter().map(|t| (t.tid, t.pid)).collect()
    }

    /// The analysis to feed this recording's events to: with the thread table (per-process
    /// parallelism) and each idle state's target residency as an idle threshold.
    pub fn analysis(&self) -> SchedAnalysis {
        let thresholds = match &self.idle_states {
            Ok(states) => states
                .iter()
                .map(|s| s.target_residency_us.saturating_mul(1000))
                .collect(),
            Err(_) => Vec::new(),
        };
        SchedAnalysis::with_thread_groups(self.thread_groups()).with_idle_thresholds(thresholds)
    }
}

/// A figure that could not be computed, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnavailableFigure {
    pub figure: String,
    pub reason: String,
    pub fix: Option<String>,
}

/// Wake-ups by cause. `ipi` counts IPIs and wake-ups issued from a CPU's idle task (remote
/// wake-ups with no thread or interrupt handler behind them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WakeupCounts {
    pub thread: u64,
    pub timer: u64,
    pub irq: u64,
    pub softirq: u64,
    pub ipi: u64,
}

impl From<&WakeupCauses> for WakeupCounts {
    fn from(c: &WakeupCauses) -> Self {
        WakeupCounts {
            thread: c.thread,
            timer: c.timer,
            irq: c.irq,
            softirq: c.softirq,
            ipi: c.ipi_or_idle,
        }
    }
}

impl WakeupCounts {
    pub fn total(&self) -> u64 {
        self.thread + self.timer + self.irq + self.softirq + self.ipi
    }
    pub(super) fn add(&mut self, o: &WakeupCounts) {
        self.thread += o.thread;
        self.timer += o.timer;
        self.irq += o.irq;
        self.softirq += o.softirq;
        self.ipi += o.ipi;
    }
}

/// One row of the grid: a thread, or a process (the sum of its threads).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadRow {
    pub tid: Tid,
    /// `None` when the thread table does not know the thread.
    pub pid: Option<u32>,
    pub comm: String,
    /// The scheduler's own account of the thread's CPU time; see `cpu_time_source`.
    pub cpu_time_s: f64,
    /// Where `cpu_time_s` comes from: `sched_runtime`, `switch_intervals` (the recording
    /// has no `sched_stat_runtime` for the thread) or `procfs` (a reduced recording).
    pub cpu_time_source: CpuTimeSource,
    /// What a thread's and a process's rows share, flattened into the row's JSON.
    #[serde(flatten)]
    pub metrics: RowMetrics,
    /// `None` when energy is unavailable.
    pub energy_j: Option<f64>,
    /// CPU time the tracing added to this thread (inside `cpu_time_s`): the events
    /// recorded in its context × each kind's measured cost. `None` when the recording
    /// has no measured costs (reduced, or older).
    #[serde(default)]
    pub tracing_cpu_s: Option<f64>,
    /// The share of `energy_j` that time cost: `energy_j` × `tracing_cpu_s` /
    /// `cpu_time_s`.
    #[serde(default)]
    pub tracing_energy_j: Option<f64>,
}

/// The figures a thread's row and a process's row share (a process's are the sums of its
/// threads', or their time-weighted means): in this order in both rows' JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RowMetrics {
    /// Of `cpu_time_s`, the time in user space and in the kernel (its system calls, page
    /// faults), split as its cpu-clock samples were (a sample whose stack starts in the
    /// kernel is system time). `None` without CPU-time samples with stacks.
    #[serde(default)]
    pub user_time_s: Option<f64>,
    #[serde(default)]
    pub system_time_s: Option<f64>,
    /// Time between the recorded switch-in and switch-out events: what the timelines and
    /// the CPUs' busy time are made of. `None` in a reduced recording.
    pub on_cpu_s: Option<f64>,
    /// Switch-ins the kernel did not record: each run's start was placed by inference
    /// (the scheduler's account of the run where the recording has it), so `on_cpu_s` and
    /// the wait and runnable time around those runs rest on it.
    pub inferred_switch_ins: Option<u64>,
    pub sync_switches: u64,
    pub preempt_switches: u64,
    /// `None` (like every trace-only figure below) in a reduced recording: procfs samples
    /// give CPU time and switch counts, not states, wake-ups or migrations.
    pub wait_time_s: Option<f64>,
    pub inactive_time_s: Option<f64>,
    pub migrations: Option<u64>,
    pub wakeups_received: Option<WakeupCounts>,
    pub wakeups_received_total: Option<u64>,
    /// Wake-ups the trace did not record (the row ran again after blocking without its
    /// wake-up recorded, its switch-in recorded or not): `wakeups_received` is short of
    /// this many.
    pub unrecorded_wakeups: Option<u64>,
    pub wakeups_caused: Option<u64>,
    pub idle_wakeups: Option<u64>,
    /// Total idle duration of the CPUs before the row's idle wake-ups (VTune's "Idle
    /// Time" of the row).
    pub idle_time_s: Option<f64>,
    /// Mean idle duration of the CPU before the row's idle wake-ups.
    pub mean_idle_before_wakeup_us: Option<f64>,
    /// Mean CPU frequency while the row ran (known-frequency time only).
    pub frequency_mhz: Option<f64>,
}

/// A process: the sums of its target threads' rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessRow {
    /// `None` groups the threads the thread table does not know.
    pub pid: Option<u32>,
    pub comm: String,
    /// Threads seen in the trace.
    pub threads: u32,
    pub cpu_time_s: f64,
    /// Σ of its threads' figures (the idle ones and the frequency over its threads'
    /// idle wake-ups and running time), flattened into the row's JSON.
    #[serde(flatten)]
    pub metrics: RowMetrics,
    /// Mean number of its threads running while at least one runs.
    pub effective_parallelism: Option<f64>,
    pub energy_j: Option<f64>,
    /// Σ of its threads' `tracing_cpu_s`.
    #[serde(default)]
    pub tracing_cpu_s: Option<f64>,
    /// Σ of its threads' `tracing_energy_j`.
    #[serde(default)]
    pub tracing_energy_j: Option<f64>,
}

/// Busy time of one thread of a multi-threaded process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BalanceThread {
    pub tid: Tid,
    pub comm: String,
    pub busy_s: f64,
}

/// Time with exactly `threads_running` threads of a process running.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParallelismBin {
    pub threads_running: u32,
    pub time_s: f64,
}

/// Thread balance of a multi-threaded process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadBalance {
    pub pid: u32,
    pub comm: String,
    pub threads: Vec<BalanceThread>,
    pub mean_busy_s: f64,
    pub max_busy_s: f64,
    /// max / mean busy time; 1 is perfect balance. `None` when no thread ran.
    pub imbalance: Option<f64>,
    /// Empty when the analysis had no thread table.
    pub parallelism: Vec<ParallelismBin>,
    pub effective_parallelism: Option<f64>,
}

/// Residency of one idle state on one CPU, from the trace and from sysfs side by side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdleStateRow {
    pub index: u32,
    pub name: String,
    /// From `power:cpu_idle`; `None` when the trace has no such records for this CPU.
    pub entries: Option<u64>,
    pub time_s: Option<f64>,
    /// cpuidle sysfs `usage`/`time` deltas; `None` when unavailable.
    pub sysfs_entries: Option<u64>,
    pub sysfs_time_s: Option<f64>,
    /// |trace − sysfs| / sysfs × 100, when both are known.
    pub entries_difference_pct: Option<f64>,
    pub time_difference_pct: Option<f64>,
}

/// One CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuReport {
    pub cpu: u32,
    pub busy_s: f64,
    /// Time the idle task was current.
    pub idle_s: f64,
    /// Time the current task was unknown (lost events).
    pub unknown_s: f64,
    /// busy / (busy + idle), in percent; `None` with no known time.
    pub utilization_pct: Option<f64>,
    /// `None` for a CPU the trace has no scheduler event of.
    pub idle_wakeups: Option<u64>,
    pub mean_idle_per_wakeup_us: Option<f64>,
    /// Time-weighted mean frequency over the run.
    pub frequency_mhz: Option<f64>,
    pub inferred_switch_ins: u64,
    pub lost_records: u64,
    pub idle_states: Vec<IdleStateRow>,
    /// Why this CPU's trace residency (`idle_states[].entries`/`time_s`) is empty, and
    /// which figures stand in; `None` when the trace has it.
    #[serde(default)]
    pub idle_trace_unavailable: Option<String>,
    /// Threads that ran here after blocking without their wake-up recorded (their
    /// switch-in recorded or inferred): the wake-ups received here are short of this many.
    #[serde(default)]
    pub unrecorded_wakeups: u64,
    /// Why, when `unrecorded_wakeups` is above zero.
    #[serde(default)]
    pub wakeups_trace_incomplete: Option<String>,
    /// CPU time the tracing took on this CPU, in every context (threads' and the idle
    /// task's); `None` without measured costs.
    #[serde(default)]
    pub tracing_cpu_s: Option<f64>,
}

/// A declared idle state against the mean idle duration per wake-up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdleStateTarget {
    pub index: u32,
    pub name: String,
    pub latency_us: u64,
    pub target_residency_us: u64,
    /// Whether the mean idle duration per wake-up reaches the state's target residency.
    pub mean_idle_reaches_target: Option<bool>,
    /// Share of idle wake-ups that came after an idle period at least as long as the
    /// target residency (needs [`RecordingContext::analysis`] or
    /// [`SchedAnalysis::with_idle_thresholds`]).
    pub wakeups_reaching_target_pct: Option<f64>,
}

/// Energy of one domain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DomainEnergy {
    pub name: String,
    pub energy_j: f64,
}

/// An event the recording could not collect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnavailableEvent {
    pub event: String,
    pub reason: String,
}

/// System-wide figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SystemReport {
    /// `"whole system"` or the target pids.
    pub target: String,
    pub elapsed_s: f64,
    /// What stretch of time the recording covers (`None` when the file does not say).
    pub recording_span: Option<RecordingSpan>,
    pub cpus: u32,
    pub busy_s: f64,
    pub idle_s: f64,
    pub unknown_s: f64,
    pub utilization_pct: Option<f64>,
    /// `None` (like the wake-ups and migrations below) in a reduced recording.
    pub idle_wakeups: Option<u64>,
    pub idle_wakeups_per_s: Option<f64>,
    pub mean_idle_per_wakeup_us: Option<f64>,
    /// Share of idle-state time spent in the deepest state, in percent.
    pub idleness_efficiency_pct: Option<f64>,
    /// Where the residencies behind the efficiency come from: `trace` or `sysfs`.
    pub idleness_efficiency_source: Option<String>,
    pub deepest_state: Option<String>,
    pub idle_states: Vec<IdleStateTarget>,
    /// Time-weighted mean over CPUs and the run.
    pub frequency_mhz: Option<f64>,
    /// Mean frequency while threads ran (from `Frequency` events only).
    pub running_frequency_mhz: Option<f64>,
    /// `power:cpu_frequency`, `cpufreq samples`, or `None` when unavailable.
    pub frequency_source: Option<String>,
    pub energy_domains: Vec<DomainEnergy>,
    pub energy_provenance: Provenance,
    pub wakeups_received: Option<WakeupCounts>,
    pub migrations: Option<u64>,
    pub lost_records: u64,
    pub inferred_switch_ins: u64,
    /// Σ the CPUs' `unrecorded_wakeups`: `wakeups_received` is short of this many.
    #[serde(default)]
    pub unrecorded_wakeups: u64,
    pub unavailable_events: Vec<UnavailableEvent>,
    /// Σ the threads' CPU time by the scheduler's account against the CPUs' busy time, with
    /// the reason when they differ; `None` in a reduced recording.
    #[serde(default)]
    pub cpu_time_accounts: Option<CpuTimeAccounts>,
    /// CPU time the tracing took over the whole recording, on every CPU and in every
    /// context (estimated: events × measured cost per event); `None` without measured
    /// costs.
    #[serde(default)]
    pub tracing_cpu_s: Option<f64>,
    /// What one event of each kind cost the thread it fired in, measured on this machine
    /// when the recording started (`sched_switch`, `sched_waking`, `timer_start`,
    /// `cpu_clock`, `other`).
    #[serde(default)]
    pub tracing_event_cost_ns: Option<BTreeMap<String, f64>>,
    /// With sampled stacks: what a stack added to one switch, wake-up or timer arming
    /// that carried one (`tracing_event_cost_ns` is then those events' cost without it),
    /// charged to each event that carried one; `None` when every event carried its
    /// stack (its cost is in the event's) or none did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracing_stack_cost_ns: Option<BTreeMap<String, f64>>,
    /// A confidence interval of each measured kind's cost (`[low, high]` ns: the
    /// calibration rounds' order statistics that hold its median with at least 95%);
    /// `None` for a calibration without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracing_event_cost_interval_ns: Option<BTreeMap<String, [f64; 2]>>,
    /// The energy of the target's tracing time: Σ of the target rows' `tracing_energy_j`.
    #[serde(default)]
    pub tracing_energy_j: Option<f64>,
    /// Where the tracing figures come from, in one sentence.
    #[serde(default)]
    pub tracing_provenance: Option<String>,
    /// How much the tracing weighed on the target, and whether the figures describe a run
    /// it slowed.
    #[serde(default)]
    pub perturbation: Option<Perturbation>,
    /// How the recording traced: the events' path and how its stacks were unwound.
    #[serde(default)]
    pub tracing_path: Option<TracingPath>,
    /// The recorder's start-up before tracing began ([`RecordingContext::start_up_s`]).
    #[serde(default)]
    pub start_up_s: Option<f64>,
}

/// The split of the energy. `total_j = idle_j + other_j + Σ thread rows' energy_j`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnergyReport {
    pub provenance: Provenance,
    pub total_j: Option<f64>,
    /// Baseline, unattributed.
    pub idle_j: Option<f64>,
    /// Threads outside the target.
    pub other_j: Option<f64>,
    /// Σ target thread rows.
    pub target_j: Option<f64>,
    pub idle_power_w: Option<f64>,
    /// `cpu_time` or `cpu_time_x_frequency`.
    pub weighting: Option<String>,
    /// The method in one sentence, printed with the table.
    pub method: String,
}

/// Everything `powerlens report` shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordingReport {
    pub system: SystemReport,
    pub cpus: Vec<CpuReport>,
    /// Target threads seen in the trace, by tid.
    pub threads: Vec<ThreadRow>,
    /// Target processes, by pid (`None` last).
    pub processes: Vec<ProcessRow>,
    /// Target processes with at least two threads seen.
    pub balance: Vec<ThreadBalance>,
    pub energy: EnergyReport,
    /// Every figure that could not be computed, with the reason.
    pub unavailable: Vec<UnavailableFigure>,
    /// The function or stack grid (`report --by function|stack`), when asked for and the
    /// recording has stacks; empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<crate::stacks::grid::FunctionRow>,
    /// How `functions` is grouped: `function`, `function_inclusive` or `stack`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function_grouping: Option<String>,
    /// What ended the CPUs' idle periods, most idle exits first
    /// ([`super::wakeups`]; empty until [`attach_wakeup_causes`]).
    #[serde(default)]
    pub wakeup_causes: Vec<WakeupCause>,
    /// The causes whose waker or arming thread is the recorder's own (its drain, decoder
    /// and sampler threads): the instrument's wake-ups, kept apart from the target's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instrument_wakeup_causes: Vec<WakeupCause>,
    /// Advice from the rules of [`crate::advice`] (empty until the caller runs them).
    #[serde(default)]
    pub advice: Vec<Advice>,
    /// The idle states the advice was judged against (`this machine`, `target server
    /// (…)`); `None` when there were none and the idle rules could not be judged.
    #[serde(default)]
    pub advice_judged_against: Option<String>,
    /// Battery-life figures of the recorded work (recorded on a battery, or with
    /// `--battery-wh`); `None` otherwise. Filled in by the caller, which reads the
    /// recording's battery metadata and charge samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub battery: Option<crate::battery_life::BatteryReport>,
}
