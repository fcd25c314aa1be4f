//! C-state wake latency math (issue 6, `powerlens wake`): from the timestamps of one
//! measurement to its latencies, the datapoints that must be dropped, and the statistics
//! per idle state against the kernel's declared exit latency.
//!
//! Names follow the waltr thesis: LTime is the armed launch time of our timer, TBI the
//! idle entry before it (power:cpu_idle entry), TAI the idle exit after it (cpu_idle exit),
//! TIntr our timer's expiry (timer:hrtimer_expire_entry), and the thread's own wake time.
//!
//! Not every kernel delivers every timestamp: a guest without a cpuidle driver emits no
//! `power:cpu_idle` to perf, and expiries in the idle task's context can be missing. What
//! a run delivered is [`Delivered`]; a metric whose timestamps never came is
//! [`Metric::Unavailable`] with the reason and the fix, and the datapoints are still kept
//! for the metrics that can be computed (UserLatency needs no trace at all).

pub mod matching;

use serde::{Deserialize, Serialize};

pub use matching::{match_measurements, Measurement, WakeEvent, WakeEventKind};

/// The timestamps of one measurement, CLOCK_MONOTONIC ns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Raw {
    /// The launch time the timer was armed for.
    pub ltime_ns: u64,
    /// The launch distance drawn for this datapoint.
    pub ldist_ns: u64,
    /// Idle entry before LTime on the measured CPU, if one was seen.
    pub tbi_ns: Option<u64>,
    /// Idle exit after LTime, if one was seen.
    pub tai_ns: Option<u64>,
    /// Our timer's expiry, if seen.
    pub tintr_ns: Option<u64>,
    /// When the measuring thread observed its own wake-up.
    pub user_wake_ns: u64,
    /// The idle state requested at TBI (or the state being measured when no idle entry
    /// was traced).
    pub cstate: String,
    /// Whether the idle exit was caused by our timer: `Some(false)` when another
    /// interrupt came first, `None` when the trace cannot tell.
    pub woken_by_our_timer: Option<bool>,
    /// Hardware interrupt handlers and softirqs on the CPU between arming and wake-up.
    pub interrupts: u32,
    pub softirqs: u32,
}

/// One kept datapoint. A latency is `None` when the trace did not deliver its timestamp.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Datapoint {
    pub cstate: String,
    pub ldist_ns: u64,
    /// LTime, CLOCK_MONOTONIC ns (to line datapoints up with other recordings).
    pub ltime_ns: u64,
    /// TAI − LTime.
    pub wake_latency_ns: Option<u64>,
    /// TIntr − LTime.
    pub intr_latency_ns: Option<u64>,
    /// Thread wake − LTime (what cyclictest measures).
    pub user_latency_ns: u64,
    /// LTime − TBI.
    pub silent_time_ns: Option<u64>,
    pub interrupts: u32,
    pub softirqs: u32,
}

/// Why a measurement is not a datapoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dropped {
    /// Another interrupt ended the idle period.
    NotOurTimer,
    /// No idle entry/exit around LTime (the CPU was busy, or an event was lost).
    NotInIdle,
    /// LTime is not between TBI and TAI.
    OutsideIdle,
    /// Our timer's expiry or the thread's wake came before LTime.
    BeforeLaunch,
}

impl Dropped {
    pub const ALL: [Dropped; 4] = [
        Dropped::NotOurTimer,
        Dropped::NotInIdle,
        Dropped::OutsideIdle,
        Dropped::BeforeLaunch,
    ];

    /// The snake_case name used in JSON and text.
    pub fn name(self) -> &'static str {
        match self {
            Dropped::NotOurTimer => "not_our_timer",
            Dropped::NotInIdle => "not_in_idle",
            Dropped::OutsideIdle => "outside_idle",
            Dropped::BeforeLaunch => "before_launch",
        }
    }
}

/// Which trace timestamps the kernel delivered during a run, detected from the run itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Delivered {
    /// `power:cpu_idle` entry/exit records on the measured CPU (TBI, TAI).
    pub idle: bool,
    /// Expiries of our own timer (`timer:hrtimer_expire_entry`, TIntr).
    pub timer: bool,
    /// Nothing was traced (`--no-trace`): only UserLatency, by choice.
    #[serde(default)]
    pub untraced: bool,
}

/// The fix for a kernel that delivers no `power:cpu_idle` records to perf.
pub const IDLE_FIX: &str = "measure on a kernel whose idle path emits power:cpu_idle to perf: \
     bare metal with a cpuidle driver (intel_idle, acpi_idle, amd's acpi_idle), or a guest with \
     the haltpoll driver whose perf delivers idle-task events";
/// The fix for missing expiries of our timer.
pub const TIMER_FIX: &str = "measure on bare metal or a kernel that delivers \
     timer:hrtimer_expire_entry from the idle task's context to perf";

const UNTRACED_REASON: &str =
    "not traced: --no-trace measures UserLatency only (no tracepoints, no tracing cost)";

impl Delivered {
    /// Detects what a run delivered: idle records if any idle entry or exit was traced on
    /// the CPU, timer records if the expiry of our timer was found for any datapoint.
    pub fn detect(events: &[WakeEvent], raws: &[Raw]) -> Delivered {
        Delivered {
            untraced: false,
            idle: events.iter().any(|e| {
                matches!(
                    e.kind,
                    WakeEventKind::IdleEnter { .. } | WakeEventKind::IdleExit
                )
            }),
            timer: raws.iter().any(|r| r.tintr_ns.is_some()),
        }
    }

    /// What a run without tracing delivers: nothing but the thread's own clock.
    pub fn untraced() -> Delivered {
        Delivered {
            idle: false,
            timer: false,
            untraced: true,
        }
    }

    /// Why wake latency and silent time are unavailable, if they are.
    pub fn idle_reason(&self, cpu: u32) -> Option<String> {
        if self.untraced {
            return Some(UNTRACED_REASON.to_string());
        }
        (!self.idle).then(|| {
            format!(
                "the kernel delivered no power:cpu_idle records for cpu{cpu} to perf during the run, \
                 so there is no idle entry (TBI) or idle exit (TAI) to measure from"
            )
        })
    }

    /// Why interrupt latency is unavailable, if it is.
    pub fn timer_reason(&self, cpu: u32) -> Option<String> {
        if self.untraced {
            return Some(UNTRACED_REASON.to_string());
        }
        (!self.timer).then(|| {
            format!(
                "the kernel delivered no timer:hrtimer_expire_entry record of our timer on cpu{cpu} to \
                 perf (expiries in the idle task's context are missing on this kernel)"
            )
        })
    }
}

impl Raw {
    /// The datapoint, or why it is dropped. The drop rules that need a timestamp apply only
    /// when the run delivered that kind of timestamp at all: without `power:cpu_idle`
    /// nothing says whether the CPU was idle at LTime, and the datapoint keeps its
    /// UserLatency.
    pub fn datapoint(&self, delivered: &Delivered) -> Result<Datapoint, Dropped> {
        let l = self.ltime_ns;
        if self.woken_by_our_timer == Some(false) {
            return Err(Dropped::NotOurTimer);
        }
        let (wake, silent) = if delivered.idle {
            let (Some(tbi), Some(tai)) = (self.tbi_ns, self.tai_ns) else {
                return Err(Dropped::NotInIdle);
            };
            if !(tbi <= l && l <= tai) {
                return Err(Dropped::OutsideIdle);
            }
            (Some(tai - l), Some(l - tbi))
        } else {
            (None, None)
        };
        let intr = match self.tintr_ns {
            Some(t) if t < l => return Err(Dropped::BeforeLaunch),
            Some(t) => Some(t - l),
            None => None,
        };
        if self.user_wake_ns < l {
            return Err(Dropped::BeforeLaunch);
        }
        Ok(Datapoint {
            cstate: self.cstate.clone(),
            ldist_ns: self.ldist_ns,
            ltime_ns: l,
            wake_latency_ns: wake,
            intr_latency_ns: intr,
            user_latency_ns: self.user_wake_ns - l,
            silent_time_ns: silent,
            interrupts: self.interrupts,
            softirqs: self.softirqs,
        })
    }
}

/// Distribution of one metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Distribution {
    pub count: usize,
    pub min: f64,
    pub median: f64,
    pub mean: f64,
    pub std: f64,
    pub p99: f64,
    pub p99_9: f64,
    pub p99_99: f64,
    pub max: f64,
}

/// Quantile `q` (0..=1) of sorted values by linear interpolation between closest ranks
/// (the definition numpy and R type 7 use).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

impl Distribution {
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Distribution> {
        let mut v: Vec<f64> = values.into_iter().collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let mean = crate::stats::mean(&v);
        Some(Distribution {
            count: v.len(),
            min: v[0],
            median: quantile(&v, 0.5),
            mean,
            std: crate::stats::stddev(&v, mean),
            p99: quantile(&v, 0.99),
            p99_9: quantile(&v, 0.999),
            p99_99: quantile(&v, 0.9999),
            max: v[v.len() - 1],
        })
    }
}

/// One metric of one state: measured (with its distribution) or unavailable (with why).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Metric {
    Measured {
        /// Which timestamps it is computed from.
        source: String,
        #[serde(flatten)]
        distribution: Distribution,
    },
    Unavailable {
        reason: String,
        fix: Option<String>,
    },
}

impl Metric {
    pub fn distribution(&self) -> Option<&Distribution> {
        match self {
            Metric::Measured { distribution, .. } => Some(distribution),
            Metric::Unavailable { .. } => None,
        }
    }
}

/// The four metrics of `wake`, in report order, with the source each is computed from.
pub const METRICS: [(&str, &str); 4] = [
    ("wake_latency", "power:cpu_idle exit (TAI) − launch time"),
    (
        "intr_latency",
        "timer:hrtimer_expire_entry of our timer (TIntr) − launch time",
    ),
    (
        "user_latency",
        "clock_gettime(CLOCK_MONOTONIC) after clock_nanosleep returns − launch time",
    ),
    ("silent_time", "launch time − power:cpu_idle entry (TBI)"),
];

/// The statistics of one idle state, as `wake --json` reports them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateReport {
    pub name: String,
    /// The exit latency cpuidle declares for this state; `None` when there is no cpuidle
    /// driver (the kernel's default idle declares nothing).
    pub declared_latency_us: Option<u64>,
    /// Datapoints kept.
    pub count: usize,
    /// Measurements dropped, and why.
    pub dropped: usize,
    pub dropped_by_reason: std::collections::BTreeMap<String, usize>,
    /// Which trace timestamps the kernel delivered while this state was measured.
    pub delivered: Delivered,
    pub wake_latency_ns: Metric,
    pub intr_latency_ns: Metric,
    pub user_latency_ns: Metric,
    pub silent_time_ns: Metric,
    /// Whether the measured wake latency's p99.9 or maximum exceeds the declared latency
    /// (`None` when either is unavailable).
    pub exceeds_declared: Option<bool>,
}

/// The tool's own timing cost, characterized at start on the measured CPU (as the waltr
/// thesis characterized its latch times).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelfOverhead {
    /// Back-to-back `clock_gettime(CLOCK_MONOTONIC)` pairs: the cost of one timestamp.
    /// UserLatency includes up to one such read after the wake-up.
    pub timestamp_ns: Distribution,
    /// `clock_nanosleep(TIMER_ABSTIME)` to a time already past, timed like a datapoint:
    /// the floor of UserLatency without any idle state (syscall entry and exit), with the
    /// tracepoints off.
    pub expired_sleep_ns: Distribution,
    /// The same with the tracepoints of the measurement on (`hrtimer_start` fires in it);
    /// `None` with `--no-trace`.
    pub expired_sleep_traced_ns: Option<Distribution>,
    /// Median traced minus median untraced: what one traced timer event adds to a
    /// wake-up path (UserLatency passes one or two: the expiry, softirqs). `None` with
    /// `--no-trace`, or when the difference is within the medians' noise (then
    /// `trace_cost_unavailable` says so with the figures): never a negative cost.
    pub trace_cost_ns: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_cost_unavailable: Option<String>,
}

/// What one traced event costs (see [`SelfOverhead::trace_cost_ns`]): the difference of
/// the medians when it stands out of their noise, else why not, with the figures. The
/// noise is two standard errors of the difference of two medians (a median's standard
/// error is about 1.2533 σ/√n for a bell-shaped spread).
pub fn trace_cost_ns(untraced: &Distribution, traced: &Distribution) -> Result<f64, String> {
    let se = |d: &Distribution| 1.2533 * d.std / (d.count.max(1) as f64).sqrt();
    let noise = 2.0 * (se(untraced).powi(2) + se(traced).powi(2)).sqrt();
    let difference = traced.median - untraced.median;
    let figures = format!(
        "the traced median ({:.2} µs) minus the untraced one ({:.2} µs) is {:.2} µs",
        traced.median / 1e3,
        untraced.median / 1e3,
        difference / 1e3,
    );
    if difference > noise {
        Ok(difference)
    } else if difference >= -noise {
        Err(format!(
            "too small to tell: {figures}, within the noise of ±{:.2} µs",
            noise / 1e3
        ))
    } else {
        // Tracing cannot make the path faster: the machine changed between the two runs.
        Err(format!(
            "too noisy to tell: {figures}, below the noise of ±{:.2} µs (the machine's load changed between the two measurements; run again on a quieter machine)",
            noise / 1e3
        ))
    }
}

/// One `powerlens wake` run: what `--json` prints and `-o` saves as `info.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WakeResult {
    pub cpu: u32,
    /// `current_driver`, or `none`.
    pub cpuidle_driver: String,
    pub ldist_min_ns: u64,
    pub ldist_max_ns: u64,
    pub self_overhead: Option<SelfOverhead>,
    /// Requested tracepoints the kernel lacks, as `system/name: reason`.
    pub trace_unavailable: Vec<String>,
    /// Trace records the kernel dropped (ring full) during the run.
    pub lost_records: u64,
    /// What the reader should know: a virtual machine, no cpuidle driver, …
    pub notes: Vec<String>,
    /// Why the run ended before the requested datapoints or duration (Ctrl-C, an error).
    pub stopped_early: Option<String>,
    pub states: Vec<StateReport>,
}

/// Splits measurements into kept datapoints and drop counts.
pub fn datapoints(raws: &[Raw], delivered: &Delivered) -> (Vec<Datapoint>, Vec<Dropped>) {
    let mut kept = Vec::new();
    let mut dropped = Vec::new();
    for raw in raws {
        match raw.datapoint(delivered) {
            Ok(p) => kept.push(p),
            Err(d) => dropped.push(d),
        }
    }
    (kept, dropped)
}

/// Builds the report of one state from its measurements. `cpu` names the CPU in the
/// reasons of unavailable metrics.
pub fn state_report(
    name: &str,
    declared_latency_us: Option<u64>,
    raws: &[Raw],
    delivered: &Delivered,
    cpu: u32,
) -> StateReport {
    let (points, dropped) = datapoints(raws, delivered);
    let mut by_reason = std::collections::BTreeMap::new();
    for d in &dropped {
        *by_reason.entry(d.name().to_string()).or_insert(0) += 1;
    }
    let metric = |index: usize,
                  unavailable: Option<(String, &str)>,
                  f: &dyn Fn(&Datapoint) -> Option<u64>| {
        if let Some((reason, fix)) = unavailable {
            return Metric::Unavailable {
                reason,
                fix: Some(fix.to_string()),
            };
        }
        match Distribution::of(points.iter().filter_map(f).map(|v| v as f64)) {
            Some(distribution) => Metric::Measured {
                source: METRICS[index].1.to_string(),
                distribution,
            },
            None => Metric::Unavailable {
                reason: format!(
                    "no datapoint kept ({} measured, {} dropped)",
                    raws.len(),
                    dropped.len()
                ),
                fix: Some("measure more datapoints (--datapoints, --duration)".to_string()),
            },
        }
    };
    let (idle_fix, timer_fix) = if delivered.untraced {
        ("run without --no-trace", "run without --no-trace")
    } else {
        (IDLE_FIX, TIMER_FIX)
    };
    let idle = delivered.idle_reason(cpu).map(|r| (r, idle_fix));
    let timer = delivered.timer_reason(cpu).map(|r| (r, timer_fix));
    let wake = metric(0, idle.clone(), &|p| p.wake_latency_ns);
    let exceeds_declared = match (wake.distribution(), declared_latency_us) {
        (Some(w), Some(declared)) => {
            let declared_ns = declared as f64 * 1e3;
            Some(w.p99_9 > declared_ns || w.max > declared_ns)
        }
        _ => None,
    };
    StateReport {
        name: name.to_string(),
        declared_latency_us,
        count: points.len(),
        dropped: dropped.len(),
        dropped_by_reason: by_reason,
        delivered: *delivered,
        wake_latency_ns: wake,
        intr_latency_ns: metric(1, timer, &|p| p.intr_latency_ns),
        user_latency_ns: metric(2, None, &|p| Some(p.user_latency_ns)),
        silent_time_ns: metric(3, idle, &|p| p.silent_time_ns),
        exceeds_declared,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spread(median_ns: f64, std_ns: f64, count: usize) -> Distribution {
        Distribution {
            count,
            min: 0.0,
            median: median_ns,
            mean: median_ns,
            std: std_ns,
            p99: 0.0,
            p99_9: 0.0,
            p99_99: 0.0,
            max: 0.0,
        }
    }

    /// Issue 17: "a traced event costs about −34.87 µs". A cost is the difference of the
    /// medians only when it stands out of two standard errors of that difference.
    #[test]
    fn a_trace_cost_is_never_negative_and_needs_to_stand_out_of_the_noise() {
        // 400 samples each, σ 10 µs: a median's standard error is 1.2533 × 10 / 20 =
        // 0.627 µs, the difference's √2 × 0.627 = 0.886 µs, the noise 1.772 µs.
        let untraced = spread(5_000.0, 10_000.0, 400);
        assert_eq!(
            trace_cost_ns(&untraced, &spread(8_000.0, 10_000.0, 400)),
            Ok(3_000.0)
        );
        let why = trace_cost_ns(&untraced, &spread(6_500.0, 10_000.0, 400)).unwrap_err();
        assert!(
            why.starts_with("too small to tell:")
                && why.contains("is 1.50 µs, within the noise of ±1.77 µs"),
            "{why}"
        );
        let why =
            trace_cost_ns(&spread(40_000.0, 50.0, 400), &spread(5_130.0, 50.0, 400)).unwrap_err();
        assert!(why.starts_with("too noisy to tell: the traced median (5.13 µs) minus the untraced one (40.00 µs) is -34.87 µs"), "{why}");
    }

    const ALL: Delivered = Delivered {
        idle: true,
        timer: true,
        untraced: false,
    };
    const NONE: Delivered = Delivered {
        idle: false,
        timer: false,
        untraced: false,
    };

    fn raw(ltime: u64, tbi: u64, tai: u64, tintr: u64, user: u64) -> Raw {
        Raw {
            ltime_ns: ltime,
            ldist_ns: 1_000_000,
            tbi_ns: Some(tbi),
            tai_ns: Some(tai),
            tintr_ns: Some(tintr),
            user_wake_ns: user,
            cstate: "C1".into(),
            woken_by_our_timer: Some(true),
            interrupts: 1,
            softirqs: 0,
        }
    }

    #[test]
    fn latencies_by_hand() {
        let p = raw(10_000, 4_000, 10_700, 10_900, 14_000)
            .datapoint(&ALL)
            .unwrap();
        assert_eq!(
            (
                p.wake_latency_ns,
                p.intr_latency_ns,
                p.user_latency_ns,
                p.silent_time_ns
            ),
            (Some(700), Some(900), 4_000, Some(6_000))
        );
    }

    #[test]
    fn drop_rules() {
        let mut other = raw(10_000, 4_000, 10_700, 10_900, 14_000);
        other.woken_by_our_timer = Some(false);
        assert_eq!(other.datapoint(&ALL), Err(Dropped::NotOurTimer));
        assert_eq!(
            raw(10_000, 11_000, 12_000, 12_100, 13_000).datapoint(&ALL),
            Err(Dropped::OutsideIdle)
        );
        assert_eq!(
            raw(10_000, 4_000, 9_000, 9_100, 13_000).datapoint(&ALL),
            Err(Dropped::OutsideIdle)
        );
        assert_eq!(
            raw(10_000, 4_000, 10_500, 9_999, 13_000).datapoint(&ALL),
            Err(Dropped::BeforeLaunch)
        );
        let mut busy = raw(10_000, 4_000, 10_700, 10_900, 14_000);
        busy.tbi_ns = None;
        assert_eq!(busy.datapoint(&ALL), Err(Dropped::NotInIdle));
    }

    /// What this project's VM delivers: no idle records, no expiry of our timer. The
    /// datapoint keeps its UserLatency instead of being dropped as "not in idle".
    #[test]
    fn without_idle_records_user_latency_is_kept() {
        let vm = Raw {
            tbi_ns: None,
            tai_ns: None,
            tintr_ns: None,
            woken_by_our_timer: None,
            ..raw(10_000, 0, 0, 0, 62_000)
        };
        let p = vm.datapoint(&NONE).unwrap();
        assert_eq!(p.user_latency_ns, 52_000);
        assert_eq!(
            (p.wake_latency_ns, p.intr_latency_ns, p.silent_time_ns),
            (None, None, None)
        );
        // A wake-up before LTime is still impossible, trace or not.
        let early = Raw {
            user_wake_ns: 9_000,
            ..vm
        };
        assert_eq!(early.datapoint(&NONE), Err(Dropped::BeforeLaunch));
    }

    #[test]
    fn quantiles_match_numpy() {
        // numpy.percentile(range(1, 11), [50, 99, 99.9]) = 5.5, 9.91, 9.991
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert!((quantile(&v, 0.5) - 5.5).abs() < 1e-12);
        assert!((quantile(&v, 0.99) - 9.91).abs() < 1e-12);
        assert!((quantile(&v, 0.999) - 9.991).abs() < 1e-12);
        let d = Distribution::of(v).unwrap();
        assert_eq!((d.count, d.min, d.max, d.mean), (10, 1.0, 10.0, 5.5));
    }

    #[test]
    fn exceeds_declared_by_p99_9_or_max() {
        // 1 µs declared; latencies 500..999 ns and one 1500 ns outlier: the max exceeds.
        let mut raws: Vec<Raw> = (0..500)
            .map(|i| raw(10_000, 0, 10_500 + i, 10_500 + i, 20_000))
            .collect();
        assert_eq!(
            state_report("C1", Some(1), &raws, &ALL, 0).exceeds_declared,
            Some(false)
        );
        raws.push(raw(10_000, 0, 11_500, 11_500, 20_000));
        let mut dropped = raw(10_000, 0, 10_500, 10_500, 20_000);
        dropped.woken_by_our_timer = Some(false);
        raws.push(dropped);
        let r = state_report("C1", Some(1), &raws, &ALL, 0);
        assert_eq!(r.exceeds_declared, Some(true));
        assert_eq!((r.count, r.dropped), (501, 1));
        assert_eq!(r.dropped_by_reason["not_our_timer"], 1);
        assert_eq!(r.wake_latency_ns.distribution().unwrap().max, 1500.0);
        assert!(state_report("C1", Some(1), &[], &ALL, 0)
            .wake_latency_ns
            .distribution()
            .is_none());
        // No declared latency (no cpuidle driver): nothing to exceed.
        assert_eq!(
            state_report("default", None, &raws, &ALL, 0).exceeds_declared,
            None
        );
    }

    #[test]
    fn unavailable_metrics_say_why_and_serialize_as_such() {
        let raws: Vec<Raw> = (0..3)
            .map(|i| Raw {
                tbi_ns: None,
                tai_ns: None,
                tintr_ns: None,
                woken_by_our_timer: None,
                ..raw(10_000, 0, 0, 0, 60_000 + i * 1_000)
            })
            .collect();
        let delivered = Delivered::detect(&[], &raws);
        assert_eq!(delivered, NONE);
        let r = state_report("default-idle", None, &raws, &delivered, 1);
        assert_eq!((r.count, r.dropped), (3, 0));
        let user = r.user_latency_ns.distribution().unwrap();
        assert_eq!(
            (user.min, user.median, user.max),
            (50_000.0, 51_000.0, 52_000.0)
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["user_latency_ns"]["kind"], "measured");
        assert_eq!(json["user_latency_ns"]["median"], 51_000.0);
        assert_eq!(json["user_latency_ns"]["p99_9"], 51_998.0);
        for key in ["wake_latency_ns", "silent_time_ns"] {
            assert_eq!(json[key]["kind"], "unavailable", "{key}");
            let reason = json[key]["reason"].as_str().unwrap();
            assert!(
                reason.contains("power:cpu_idle") && reason.contains("cpu1"),
                "{reason}"
            );
            assert!(json[key]["fix"].as_str().unwrap().contains("intel_idle"));
            assert!(json[key].get("median").is_none());
        }
        assert!(json["intr_latency_ns"]["reason"]
            .as_str()
            .unwrap()
            .contains("hrtimer_expire_entry"));
        assert_eq!(json["exceeds_declared"], serde_json::Value::Null);
        // And back: results are read again by `wake report`.
        let back: StateReport = serde_json::from_value(json).unwrap();
        assert_eq!(back, r);
    }
}
