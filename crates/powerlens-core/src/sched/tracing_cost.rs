//! What the tracing itself cost the traced threads: the instrument is part of the
//! measurement.
//!
//! A tracepoint handler, the stack it copies and a CPU-clock sample run in the context of
//! the thread that hits them, so their CPU time is inside that thread's CPU time and
//! energy. The recorder measures what one event of each kind costs on the machine
//! ([`EventCosts`], at the start of the recording); the analysis counts the events recorded
//! in each thread's context ([`TracedEvents`]); their product is the CPU time tracing
//! added to the thread (`tracing_cpu_s`), an estimate whose model is said beside it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::event::EventKind;
use super::untraced::{UntracedComparison, UntracedRecord, NEGLIGIBLE_CPU_S};
use crate::figures::{seconds, seconds_range};

/// Cost kinds, the keys of [`EventCosts::event_cost_ns`] and of the report's
/// `system.tracing_event_cost_ns` (a JSON contract).
pub const SWITCH: &str = "sched_switch";
pub const WAKING: &str = "sched_waking";
pub const TIMER_ARM: &str = "timer_start";
pub const CPU_SAMPLE: &str = "cpu_clock";
/// A runtime record (the scheduler's CPU-time account). Through perf it is a plain record
/// like [`OTHER`]'s; collected in the kernel it stands for the updates summed into it,
/// and costs what they did. Recordings without it charge runtime records as [`OTHER`].
pub const RUNTIME: &str = "sched_stat_runtime";
/// Every other tracepoint record: IRQ/softirq/timer/IPI entries and exits, idle,
/// frequency, migrations, process events (and runtime records, where [`RUNTIME`] was not
/// measured).
pub const OTHER: &str = "other";

/// What one traced event of each kind cost the thread it fired in, in nanoseconds of CPU
/// time, as measured on the recording's machine when it started.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EventCosts {
    /// Kind ([`SWITCH`], [`WAKING`], [`TIMER_ARM`], [`CPU_SAMPLE`], [`RUNTIME`],
    /// [`OTHER`]) → ns.
    pub event_cost_ns: BTreeMap<String, f64>,
    /// How each figure was found: "measured: …" with the load and the event count, or
    /// which kind it was taken from and why.
    #[serde(default)]
    pub method: BTreeMap<String, String>,
    /// Wall time the measurement took, in seconds.
    #[serde(default)]
    pub calibration_s: f64,
    /// Whether the costs were measured by an earlier start in this boot with the same
    /// collector configuration, and kept (instead of measured again now).
    #[serde(default)]
    pub kept_from_this_boot: bool,
    /// The share of the machine's CPU time that other processes used while the costs were
    /// measured (0–1); `None` when not known. Above [`CALIBRATION_BUSY_SHARE`] the
    /// measurement is not kept for later starts in the boot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration_other_cpu_share: Option<f64>,
    /// Whether the recording had call stacks (stack copies on switches, wake-ups and timer
    /// arming, CPU-time samples): the lighter way to trace is then `--no-stacks`.
    #[serde(default)]
    pub stacks: bool,
    /// With sampled stacks: what a stack adds to one event of each kind that carries one
    /// (`event_cost_ns` is then the kind's cost without it). The analysis charges it to
    /// each event that carried a stack, in that event's thread
    /// ([`TracedEvents::count_stack`]): a rare thread's events all carry theirs, a busy
    /// one's one in N.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub stack_cost_ns: BTreeMap<String, f64>,
    /// For each kind measured over enough rounds: a confidence interval of its cost (ns,
    /// low and high), the order statistics of the rounds' costs that hold their median
    /// with at least [`COST_INTERVAL_CONFIDENCE`] (distribution-free: the 2nd and 8th of 9
    /// rounds hold it with 96%). How far the calibration's own noise moves each figure;
    /// what the events cost beside their own run time is not in it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub event_cost_interval_ns: BTreeMap<String, [f64; 2]>,
}

/// Other processes' share of the CPUs above which a measurement of the events' cost is
/// taken beside load: its loads shared their CPU, so it reads what sharing costs as much
/// as what the events do, and it is used for the recording made then but kept for no
/// other.
pub const CALIBRATION_BUSY_SHARE: f64 = 0.25;

impl EventCosts {
    /// Whether the costs were measured while other processes kept the CPUs busy.
    pub fn measured_beside_load(&self) -> bool {
        self.calibration_other_cpu_share
            .is_some_and(|s| s > CALIBRATION_BUSY_SHARE)
    }
}

/// The least confidence of [`EventCosts::event_cost_interval_ns`].
pub const COST_INTERVAL_CONFIDENCE: f64 = 0.95;

/// The confidence interval of the median of `sorted` (ascending): the narrowest pair of
/// order statistics `sorted[j]`, `sorted[n-1-j]` that holds the median with at least
/// [`COST_INTERVAL_CONFIDENCE`], and that confidence; `None` for too few values (fewer
/// than 6 cannot reach it).
pub fn median_interval(sorted: &[f64]) -> Option<([f64; 2], f64)> {
    let n = sorted.len();
    // P(Binomial(n, 1/2) ≤ j): the chance that j or fewer values fall below the median.
    let mut below = 0.0;
    let mut choose = 1.0; // C(n, j)
    let mut found = None;
    for j in 0..n / 2 {
        below += choose / 2f64.powi(n as i32);
        choose = choose * (n - j) as f64 / (j + 1) as f64;
        let confidence = 1.0 - 2.0 * below;
        if confidence < COST_INTERVAL_CONFIDENCE {
            break;
        }
        found = Some(([sorted[j], sorted[n - 1 - j]], confidence));
    }
    found
}

impl EventCosts {
    fn ns(&self, kind: &str) -> f64 {
        self.event_cost_ns
            .get(kind)
            .copied()
            .unwrap_or(0.0)
            .max(0.0)
    }

    /// A runtime record's cost: [`RUNTIME`]'s, or [`OTHER`]'s where it was not measured.
    fn runtime_ns(&self) -> f64 {
        match self.event_cost_ns.get(RUNTIME) {
            Some(_) => self.ns(RUNTIME),
            None => self.ns(OTHER),
        }
    }

    /// These costs with each kind that has a confidence interval at its low end, and at its
    /// high end; `None` when no kind has one (a calibration before intervals).
    pub fn interval_ends(&self) -> Option<[EventCosts; 2]> {
        if self.event_cost_interval_ns.is_empty() {
            return None;
        }
        Some([0, 1].map(|end| {
            let mut costs = self.clone();
            for (kind, interval) in &self.event_cost_interval_ns {
                costs.event_cost_ns.insert(kind.clone(), interval[end]);
            }
            costs
        }))
    }

    /// What a stack adds to an event of `kind` apart from the event's own cost (0 when
    /// the event's cost already holds its stack: every event carried one).
    fn stack_ns(&self, kind: StackedKind) -> f64 {
        self.stack_cost_ns
            .get(kind.key())
            .copied()
            .unwrap_or(0.0)
            .max(0.0)
    }
}

/// The events whose stacks may be sampled, and then cost apart from the event: a
/// switch, a wake-up, a timer's arming. (A CPU-time sample always carries its stack, in
/// its own cost.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StackedKind {
    Switch,
    Waking,
    TimerArm,
}

impl StackedKind {
    /// The kind of `event` when a stack recorded with it costs apart.
    pub fn of(event: &EventKind) -> Option<StackedKind> {
        match event {
            EventKind::Switch { .. } => Some(StackedKind::Switch),
            EventKind::Wakeup { .. } => Some(StackedKind::Waking),
            EventKind::TimerArm { .. } => Some(StackedKind::TimerArm),
            _ => None,
        }
    }

    /// Its key in [`EventCosts`].
    pub fn key(self) -> &'static str {
        match self {
            StackedKind::Switch => SWITCH,
            StackedKind::Waking => WAKING,
            StackedKind::TimerArm => TIMER_ARM,
        }
    }
}

/// Events recorded in one thread's context (or on one CPU), by cost kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TracedEvents {
    pub switches: u64,
    pub wakings: u64,
    pub timer_arms: u64,
    pub cpu_samples: u64,
    /// Runtime records (counted in `other` by recordings' analyses before it).
    #[serde(default)]
    pub runtimes: u64,
    pub other: u64,
    /// Of the switches, wake-ups and timer arming, those that carried a stack (with
    /// sampled stacks, one in N of a busy thread's).
    #[serde(default)]
    pub stacked_switches: u64,
    #[serde(default)]
    pub stacked_wakings: u64,
    #[serde(default)]
    pub stacked_timer_arms: u64,
}

impl TracedEvents {
    /// Counts one event. Stack records are part of the event they follow, not events of
    /// their own.
    #[inline]
    pub fn count(&mut self, kind: &EventKind) {
        match kind {
            EventKind::Switch { .. } => self.switches += 1,
            EventKind::Wakeup { .. } => self.wakings += 1,
            EventKind::TimerArm { .. } => self.timer_arms += 1,
            EventKind::CpuSample { .. } => self.cpu_samples += 1,
            EventKind::Runtime { .. } => self.runtimes += 1,
            EventKind::Stack { .. } => {}
            _ => self.other += 1,
        }
    }

    /// Counts a stack recorded with an event of `kind` (the event just before it on its
    /// CPU, already counted).
    pub fn count_stack(&mut self, kind: StackedKind) {
        match kind {
            StackedKind::Switch => self.stacked_switches += 1,
            StackedKind::Waking => self.stacked_wakings += 1,
            StackedKind::TimerArm => self.stacked_timer_arms += 1,
        }
    }

    /// The CPU time these events cost, in seconds, by `costs`.
    pub fn cpu_s(&self, costs: &EventCosts) -> f64 {
        (self.stacked_switches as f64 * costs.stack_ns(StackedKind::Switch)
            + self.stacked_wakings as f64 * costs.stack_ns(StackedKind::Waking)
            + self.stacked_timer_arms as f64 * costs.stack_ns(StackedKind::TimerArm)
            + self.switches as f64 * costs.ns(SWITCH)
            + self.wakings as f64 * costs.ns(WAKING)
            + self.timer_arms as f64 * costs.ns(TIMER_ARM)
            + self.cpu_samples as f64 * costs.ns(CPU_SAMPLE)
            + self.runtimes as f64 * costs.runtime_ns()
            + self.other as f64 * costs.ns(OTHER))
            / 1e9
    }
}

/// Past this share of the target's CPU time (and [`NEGLIGIBLE_CPU_S`]), the report says
/// plainly that its figures describe a run slowed by the tracing.
pub const PERTURBATION_WARN_PCT: f64 = 10.0;

/// `TracingPath::events` of a recording whose events came through perf ring buffers, one
/// per CPU.
pub const PATH_PERF_RING: &str = "perf_ring";
/// `TracingPath::events` of a recording whose busiest scheduler events were collected in
/// the kernel (BPF programs, a BPF ring buffer per CPU; `TracingPath::in_kernel_events` says
/// which), the others through perf ring buffers.
pub const PATH_BPF: &str = "bpf";
/// `TracingPath::stack_unwinding`: user stacks unwound from the copy of the top of each
/// thread's stack alone (the default).
pub const UNWIND_STACK_COPY: &str = "stack_copy";
/// `TracingPath::stack_unwinding`: the copy, continued with the kernel's walk of the
/// frame-pointer chain (`record --full-stacks`, and every recording before it existed).
pub const UNWIND_STACK_COPY_AND_FRAME_POINTERS: &str = "stack_copy_and_frame_pointers";

/// How a recording traced, which decides what the tracing cost and how deep its stacks
/// are: the report's `system.tracing_path` (a JSON contract).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TracingPath {
    /// How the events came from the kernel ([`PATH_PERF_RING`], [`PATH_BPF`]).
    pub events: String,
    /// With [`PATH_BPF`], the tracepoints collected in the kernel (`sched/sched_switch`…).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub in_kernel_events: Vec<String>,
    /// How the user stacks of switches, wake-ups and timer arming were unwound
    /// ([`UNWIND_STACK_COPY`], [`UNWIND_STACK_COPY_AND_FRAME_POINTERS`]); `None` for a
    /// recording without stacks.
    pub stack_unwinding: Option<String>,
    /// Bytes of each of those stacks copied at the event.
    pub user_stack_bytes: Option<u32>,
    /// With sampled stacks, the most a second per CPU and event (`record --stack-rate`);
    /// `None` when every event carried its stack.
    #[serde(default)]
    pub stack_samples_per_s: Option<u32>,
    /// With sampled stacks, the largest one-in-N they were paced to (1: every event had
    /// its stack after all); `None` when not sampled or not known (a recording cut short).
    #[serde(default)]
    pub max_stack_sample_period: Option<u64>,
    /// With stacks sampled through perf rings, the stack samples dropped because their
    /// event's own record did not follow them (that event went without its stack, and
    /// its views held its thread's latest); `None` when not sampled or not known.
    #[serde(default)]
    pub stack_samples_dropped: Option<u64>,
}

impl TracingPath {
    /// The path in words, for the report's `tracing path` line.
    pub fn describe(&self) -> String {
        let events = match self.events.as_str() {
            PATH_PERF_RING => "perf ring buffers, one per CPU".to_string(),
            PATH_BPF => format!(
                "{} collected in the kernel (BPF), the other events through perf ring buffers, one per CPU",
                bare_names(&self.in_kernel_events)
            ),
            other => other.to_string(),
        };
        let bytes = self
            .user_stack_bytes
            .map(|b| format!("{b}-byte "))
            .unwrap_or_default();
        let stacks = match self.stack_unwinding.as_deref() {
            None => "no stacks".to_string(),
            Some(UNWIND_STACK_COPY) => format!(
                "stacks at switches, wake-ups and timer arming unwound from a {bytes}copy of the thread's stack (deep stacks end where it ends; --full-stacks also walks frame pointers, at a higher cost)"
            ),
            Some(UNWIND_STACK_COPY_AND_FRAME_POINTERS) => format!(
                "stacks at switches, wake-ups and timer arming unwound from a {bytes}copy of the thread's stack, continued by the kernel's frame-pointer walk (--full-stacks)"
            ),
            Some(other) => format!("stacks unwound by {other}"),
        };
        let sampling = match (self.stack_samples_per_s, self.max_stack_sample_period) {
            (Some(rate), Some(1)) => format!(
                "; every one of them had its stack (at most {rate} a second per CPU and event would have been sampled)"
            ),
            (Some(rate), Some(n)) => format!(
                "; sampled to at most {rate} a second per CPU and event (down to 1 in {n}): the per-function switch and wait columns charge a thread's unsampled events to its latest sampled stack (--every-stack for all)"
            ),
            (Some(rate), None) => {
                format!("; sampled to at most {rate} a second per CPU and event")
            }
            (None, _) => String::new(),
        };
        let dropped = match self.stack_samples_dropped {
            Some(n) if n > 0 => {
                format!("; {n} stack samples dropped (their event's record did not follow them)")
            }
            _ => String::new(),
        };
        format!("{events}; {stacks}{sampling}{dropped}")
    }
}

/// Tracepoints by their bare names, for a line a user reads: `sched/sched_switch` →
/// `sched_switch`, joined by commas.
pub fn bare_names(events: &[String]) -> String {
    events
        .iter()
        .map(|e| e.rsplit('/').next().unwrap_or(e))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How much the tracing weighed on the target, for the report's `perturbation` line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Perturbation {
    /// The target's CPU time, tracing included.
    pub target_cpu_s: f64,
    /// The part of it tracing added (estimated).
    pub tracing_cpu_s: f64,
    /// `tracing_cpu_s` with every kind's cost at the low and at the high end of its
    /// confidence interval ([`EventCosts::event_cost_interval_ns`]); `None` when the
    /// calibration has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracing_cpu_interval_s: Option<[f64; 2]>,
    /// `tracing_cpu_s` / `target_cpu_s` × 100.
    pub tracing_pct: f64,
    /// The target's CPU time without the tracing's share (estimated).
    pub untraced_cpu_s: f64,
    /// Whether `tracing_pct` is past [`PERTURBATION_WARN_PCT`], or what recording added
    /// to the command, measured against its untraced runs (`untraced_runs`), is; never
    /// for less than [`NEGLIGIBLE_CPU_S`] of CPU time.
    pub slowed: bool,
    /// CPU time the recorder's own threads used (decoding, encoding and writing the
    /// recording), which `tracing_cpu_s` does not hold; `None` when the recording does not
    /// say which process recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorder_cpu_s: Option<f64>,
    /// Whether the recorder's threads are part of the target (a whole-system recording, or
    /// a target that names powerlens's own process), so that `target_cpu_s` holds
    /// `recorder_cpu_s`; otherwise they ran beside it. Present with `recorder_cpu_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorder_in_target: Option<bool>,
    /// The command's untraced runs against the recorded run: what recording added,
    /// measured (`record --untraced-runs`); `None` without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub untraced_runs: Option<UntracedComparison>,
    /// The line, in words: what the figures describe and, when slowed, what to do.
    pub text: String,
    /// Whether the recording had call stacks: the advice when slowed differs.
    #[serde(skip)]
    stacks: bool,
}

impl Perturbation {
    /// The perturbation of a target that used `target_cpu_s` of CPU, `tracing_cpu_s` of it
    /// spent in the tracing (estimated, within `interval` when the calibration has one:
    /// the line then says it); `stacks` whether the recording had call stacks (the advice
    /// differs).
    pub fn new(
        target_cpu_s: f64,
        tracing_cpu_s: f64,
        interval: Option<[f64; 2]>,
        stacks: bool,
    ) -> Perturbation {
        let clamp = |s: f64| s.clamp(0.0, target_cpu_s.max(0.0));
        let tracing_cpu_s = clamp(tracing_cpu_s);
        let tracing_pct = if target_cpu_s > 0.0 {
            tracing_cpu_s / target_cpu_s * 100.0
        } else {
            0.0
        };
        let mut p = Perturbation {
            target_cpu_s,
            tracing_cpu_s,
            tracing_cpu_interval_s: interval.map(|ends| ends.map(clamp)),
            tracing_pct,
            untraced_cpu_s: target_cpu_s - tracing_cpu_s,
            slowed: tracing_pct > PERTURBATION_WARN_PCT && tracing_cpu_s >= NEGLIGIBLE_CPU_S,
            recorder_cpu_s: None,
            recorder_in_target: None,
            untraced_runs: None,
            text: String::new(),
            stacks,
        };
        p.text = p.words();
        p
    }

    /// How many times the CPU time the command used untraced the recorded run used, and
    /// that time, when the untraced runs measured it past [`PERTURBATION_WARN_PCT`] (and
    /// [`NEGLIGIBLE_CPU_S`]) and apart from their own spread.
    fn measured_slowdown(&self) -> Option<(f64, f64)> {
        let u = self.untraced_runs.as_ref().filter(|u| !u.within_spread)?;
        u.added_cpu_s.filter(|&added| added >= NEGLIGIBLE_CPU_S)?;
        u.added_pct
            .filter(|&pct| pct > PERTURBATION_WARN_PCT)
            .map(|_| (u.recorded_cpu_s / u.median_cpu_s, u.median_cpu_s))
    }

    /// The line, in words.
    fn words(&self) -> String {
        let (target_cpu_s, tracing_cpu_s, tracing_pct) =
            (self.target_cpu_s, self.tracing_cpu_s, self.tracing_pct);
        let interval = self
            .tracing_cpu_interval_s
            .map(|[low, high]| {
                format!(
                    " ({} within the calibration's confidence intervals)",
                    seconds_range(low, high)
                )
            })
            .unwrap_or_default();
        let mut text = format!(
            "tracing cost the target an estimated {}{interval} of its {} of CPU time ({tracing_pct:.0}%)",
            seconds(tracing_cpu_s),
            seconds(target_cpu_s)
        );
        if self.slowed {
            if let Some((factor, untraced_s)) = self.measured_slowdown() {
                text += &format!(
                    ": these figures describe a run slowed by recording (measured: {factor:.1}× the CPU time the command used untraced, {}; the untraced line says more); its CPU time, energy and waits are inflated by it",
                    seconds(untraced_s)
                );
            } else {
                let untraced_cpu_s = self.untraced_cpu_s;
                let factor = if untraced_cpu_s > 0.0 {
                    target_cpu_s / untraced_cpu_s
                } else {
                    f64::INFINITY
                };
                text += &format!(
                    ": these figures describe a run slowed by the tracing (about {factor:.1}× the CPU time it needs untraced, {}); its CPU time, energy and waits are inflated by it",
                    seconds(untraced_cpu_s)
                );
            }
            text += ". To measure the program as it runs, use `powerlens run` (no tracing)";
            if self.untraced_runs.is_none() {
                // Only a command can be run again untraced (not -p or -a): said so.
                text += "; to measure what recording adds to a command, record it with --untraced-runs 3";
            }
            if self.stacks {
                text += "; to trace it more lightly, record with --no-stacks";
            }
        }
        text
    }

    /// Adds what the recorder's own threads used (`None`: unknown).
    pub fn beside_recorder(mut self, recorder: Option<RecorderShare>) -> Perturbation {
        self.recorder_cpu_s = recorder.map(|r| r.cpu_s);
        self.recorder_in_target = recorder.map(|r| r.in_target);
        self
    }

    /// Adds the command's untraced runs against the recorded run (no comparison when its
    /// CPU time is not known).
    pub fn against_untraced(mut self, untraced: &UntracedRecord) -> Perturbation {
        self.untraced_runs = UntracedComparison::new(untraced, self.tracing_cpu_s);
        // A measured slowdown past the threshold warns, whatever the estimate says.
        self.slowed |= self.measured_slowdown().is_some();
        self.text = self.words();
        self
    }

    /// What the recorder's own threads used, in words, when known and not nothing. The
    /// estimate holds what each event cost the thread it fired in; the recorder's work runs
    /// on the same CPUs, and where the target keeps them busy it competes with the target
    /// (docs/RECORD.md, "The cost of tracing", says what else a recording changes on such a
    /// load). In a whole-system recording the recorder is itself part of what was recorded,
    /// and its time is in the target's.
    pub fn recorder_text(&self) -> Option<String> {
        let s = self.recorder_cpu_s.filter(|&s| s > 0.0)?;
        Some(if self.recorder_in_target == Some(true) {
            format!(
                "powerlens's own threads used {} of CPU time (decoding and writing the recording), which the estimate above does not hold: they are part of what was recorded, so the target's CPU time above includes them",
                seconds(s)
            )
        } else {
            format!(
                "powerlens's own threads used {} of CPU time beside the target (decoding and writing the recording), which the estimate above does not hold: where the target keeps every CPU busy, that work slows it too",
                seconds(s)
            )
        })
    }
}

/// The recorder's own threads' share of a recording: their CPU time, and whether they are
/// part of the target.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RecorderShare {
    pub cpu_s: f64,
    pub in_target: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::event::{EventKind, SwitchedOut};

    fn costs() -> EventCosts {
        EventCosts {
            event_cost_ns: [
                (SWITCH, 3000.0),
                (WAKING, 2000.0),
                (TIMER_ARM, 1500.0),
                (CPU_SAMPLE, 4000.0),
                (OTHER, 1000.0),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn events_cost_their_kinds_price_and_stacks_nothing_extra() {
        let mut t = TracedEvents::default();
        for kind in [
            EventKind::Switch {
                prev: 1,
                how: SwitchedOut::Blocked,
                next: 2,
            },
            EventKind::Stack { id: 0 },
            EventKind::Wakeup {
                tid: 2,
                target_cpu: 0,
                new_thread: false,
            },
            EventKind::Stack { id: 1 },
            EventKind::Runtime { tid: 1, ns: 10 },
            EventKind::IdleExit,
            EventKind::CpuSample {
                tid: 1,
                period_ns: 1_000_000,
            },
        ] {
            t.count(&kind);
        }
        let expected = TracedEvents {
            switches: 1,
            wakings: 1,
            cpu_samples: 1,
            runtimes: 1,
            other: 1,
            ..Default::default()
        };
        assert_eq!(t, expected);
        // 3000 + 2000 + 1000 (the runtime record, as `other` where its own cost was not
        // measured: recordings before in-kernel collection) + 1000 + 4000 ns, by hand.
        assert!((t.cpu_s(&costs()) - 11e-6).abs() < 1e-12);
        // With its own cost (collected in the kernel, it stands for the updates summed
        // into it): 3000 + 2000 + 250 + 1000 + 4000 ns.
        let mut own = costs();
        own.event_cost_ns.insert(RUNTIME.to_string(), 250.0);
        assert!((t.cpu_s(&own) - 10.25e-6).abs() < 1e-12);
    }

    #[test]
    fn a_missing_or_negative_cost_counts_nothing() {
        let mut c = costs();
        c.event_cost_ns.remove(SWITCH);
        c.event_cost_ns.insert(WAKING.into(), -50.0);
        let t = TracedEvents {
            switches: 10,
            wakings: 10,
            ..Default::default()
        };
        assert_eq!(t.cpu_s(&c), 0.0);
    }

    #[test]
    fn the_line_warns_past_the_threshold_only() {
        let light = Perturbation::new(1.0, 0.05, None, true);
        assert!(!light.slowed);
        assert_eq!(
            light.text,
            "tracing cost the target an estimated 0.050 s of its 1.000 s of CPU time (5%)"
        );
        let heavy = Perturbation::new(0.8, 0.6, None, true);
        assert!(heavy.slowed);
        assert!((heavy.tracing_pct - 75.0).abs() < 1e-9);
        assert!(
            heavy
                .text
                .contains("describe a run slowed by the tracing (about 4.0×"),
            "{}",
            heavy.text
        );
        assert!(heavy.text.contains("--no-stacks"), "{}", heavy.text);
        assert!(!Perturbation::new(0.8, 0.6, None, false)
            .text
            .contains("--no-stacks"));
        // Exactly at the threshold is not past it.
        assert!(!Perturbation::new(1.0, 0.1, None, true).slowed);
        // Without untraced runs the advice offers them.
        assert!(
            heavy
                .text
                .contains("what recording adds to a command, record it with --untraced-runs 3"),
            "{}",
            heavy.text
        );
    }

    /// Untraced runs that used `cpu_s` each and exited 0, and a recorded run that used
    /// `recorded_cpu_s`.
    fn untraced(cpu_s: &[f64], recorded_cpu_s: Option<f64>) -> UntracedRecord {
        use crate::run::ExitStatus;
        use crate::sched::untraced::UntracedRun;
        let exit = ExitStatus {
            code: Some(0),
            signal: None,
        };
        UntracedRecord {
            runs: cpu_s
                .iter()
                .map(|&cpu_s| UntracedRun {
                    cpu_s,
                    wall_s: 0.3,
                    exit,
                })
                .collect(),
            recorded_cpu_s,
            ..Default::default()
        }
    }

    #[test]
    fn under_a_millisecond_nothing_warns_whatever_its_share() {
        // 20% of a sleeping command's 1 ms is 0.2 ms: no warning, and the figures keep
        // their digits; 20% of 10 ms warns.
        let small = Perturbation::new(0.001, 0.000_2, Some([0.000_1, 0.000_3]), true);
        assert!(!small.slowed);
        assert_eq!(
            small.text,
            "tracing cost the target an estimated 0.00020 s (0.00010–0.00030 s within the calibration's confidence intervals) of its 0.0010 s of CPU time (20%)"
        );
        assert!(Perturbation::new(0.01, 0.002, None, true).slowed);
        // Measured: 0.14 ms added to 1 ms (14%), outside the runs' spread: no warning.
        let record = untraced(&[0.001_00, 0.001_01, 0.000_99], Some(0.001_14));
        let measured = Perturbation::new(0.001_14, 0.000_03, None, true).against_untraced(&record);
        assert!(!measured.untraced_runs.as_ref().unwrap().within_spread);
        assert!(!measured.slowed, "{}", measured.text);
    }

    #[test]
    fn a_measured_slowdown_warns_whatever_the_estimate_says() {
        let recorded = |cpu_s: Option<f64>| untraced(&[0.27, 0.28, 0.30], cpu_s);
        // The estimate: 0.047 s of 0.633 s, 7%, under the threshold; measured: 0.633 s
        // against a median 0.28 s untraced, 2.3×.
        let light = Perturbation::new(0.633, 0.047, None, true);
        assert!(!light.slowed);
        let measured = light.clone().against_untraced(&recorded(Some(0.633)));
        assert!(measured.slowed);
        assert!(
            measured.text.contains(
                "of its 0.633 s of CPU time (7%): these figures describe a run slowed by recording (measured: 2.3× the CPU time the command used untraced, 0.280 s; the untraced line says more)"
            ),
            "{}",
            measured.text
        );
        assert!(
            !measured.text.contains("--untraced-runs"),
            "{}",
            measured.text
        );
        // Within the untraced runs' own spread, or below their median: no warning from it.
        assert!(!light.clone().against_untraced(&recorded(Some(0.29))).slowed);
        assert!(!light.clone().against_untraced(&recorded(Some(0.2))).slowed);
        // Not known (the command did not exit while recorded): as without runs.
        assert_eq!(light.clone().against_untraced(&recorded(None)), light);
        // A heavy estimate still warns when the measurement shows no slowdown.
        let heavy = Perturbation::new(0.8, 0.6, None, true).against_untraced(&recorded(Some(0.29)));
        assert!(heavy.slowed);
        assert!(
            heavy.text.contains("slowed by the tracing (about 4.0×"),
            "{}",
            heavy.text
        );
    }

    #[test]
    fn the_line_says_what_the_recorders_own_threads_used_beside_the_target() {
        let beside = |cpu_s| {
            Some(RecorderShare {
                cpu_s,
                in_target: false,
            })
        };
        let plain = Perturbation::new(1.0, 0.05, None, true);
        let p = plain.clone().beside_recorder(beside(0.2));
        assert_eq!(
            (p.recorder_cpu_s, p.recorder_in_target),
            (Some(0.2), Some(false))
        );
        assert_eq!(
            p.recorder_text().unwrap(),
            "powerlens's own threads used 0.200 s of CPU time beside the target (decoding and writing the recording), which the estimate above does not hold: where the target keeps every CPU busy, that work slows it too"
        );
        // It does not move the estimate, its line or the warning.
        assert_eq!((p.text.as_str(), p.slowed), (plain.text.as_str(), false));
        // Unknown (an older recording) or nothing: no words.
        assert_eq!(plain.clone().beside_recorder(None), plain);
        assert_eq!(plain.recorder_text(), None);
        assert_eq!(plain.beside_recorder(beside(0.0)).recorder_text(), None);
    }

    /// The distribution-free interval of a median: of 9 rounds the 2nd and 8th hold it with
    /// 1 − 2·P(Binomial(9, ½) ≤ 1) = 1 − 20/512; of 6 the extremes, 1 − 2/64; of 5 no pair
    /// reaches 95% (1 − 2/32).
    #[test]
    fn a_median_interval_is_the_order_statistics_that_hold_it() {
        for (n, ends, confidence) in [
            (9, [2.0, 8.0], 1.0 - 20.0 / 512.0),
            (6, [1.0, 6.0], 1.0 - 2.0 / 64.0),
        ] {
            let sorted: Vec<f64> = (1..=n).map(f64::from).collect();
            let (got, got_confidence) = median_interval(&sorted).unwrap();
            assert_eq!(got, ends, "{n}");
            assert!(
                (got_confidence - confidence).abs() < 1e-12,
                "{n}: {got_confidence}"
            );
        }
        assert_eq!(median_interval(&[1.0, 2.0, 3.0, 4.0, 5.0]), None);
        assert_eq!(median_interval(&[]), None);
    }

    /// Each end of the interval replaces the figure of the kinds that have one, and only
    /// those; the estimate at the ends holds the estimate, and the line says the interval.
    #[test]
    fn the_estimate_at_the_ends_of_the_cost_intervals() {
        let mut c = costs();
        c.event_cost_interval_ns
            .insert(SWITCH.to_string(), [2000.0, 4500.0]);
        let [low, high] = c.interval_ends().unwrap();
        assert_eq!((low.ns(SWITCH), high.ns(SWITCH)), (2000.0, 4500.0));
        assert_eq!((low.ns(WAKING), high.ns(WAKING)), (2000.0, 2000.0));
        let events = TracedEvents {
            switches: 100_000,
            wakings: 10_000,
            ..Default::default()
        };
        // 100,000 × 3000 + 10,000 × 2000 ns, and the switches at 2000 and 4500.
        assert!((events.cpu_s(&c) - 0.32).abs() < 1e-9);
        let ends = [events.cpu_s(&low), events.cpu_s(&high)];
        assert!((ends[0] - 0.22).abs() < 1e-9 && (ends[1] - 0.47).abs() < 1e-9);
        let p = Perturbation::new(1.0, events.cpu_s(&c), Some(ends), false);
        assert_eq!(p.tracing_cpu_interval_s, Some(ends));
        assert!(
            p.text.starts_with("tracing cost the target an estimated 0.320 s (0.220–0.470 s within the calibration's confidence intervals) of its 1.000 s of CPU time (32%): these figures describe"),
            "{}",
            p.text
        );
        // A calibration without intervals: none.
        assert_eq!(costs().interval_ends(), None);
        let plain = Perturbation::new(1.0, 0.001, None, false);
        assert_eq!(plain.tracing_cpu_interval_s, None);
        assert!(!plain.text.contains("confidence"), "{}", plain.text);
    }

    /// In a whole-system recording the recorder is part of the target: the line must not
    /// say "beside", and says the target's CPU time holds it.
    #[test]
    fn a_recorder_inside_the_target_is_said_to_be_in_its_cpu_time() {
        let p = Perturbation::new(1.0, 0.05, None, true).beside_recorder(Some(RecorderShare {
            cpu_s: 0.2,
            in_target: true,
        }));
        assert_eq!(p.recorder_in_target, Some(true));
        let text = p.recorder_text().unwrap();
        assert!(!text.contains("beside"), "{text}");
        assert!(
            text.contains("0.200 s") && text.contains("the target's CPU time above includes them"),
            "{text}"
        );
    }
}
