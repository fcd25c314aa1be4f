//! C-state wake latency math (issue 6, `powerlens wake`): from the timestamps of one
//! measurement to its latencies, the datapoints that must be dropped, and the statistics
//! per idle state against the kernel's declared exit latency.
//!
//! Names follow the waltr thesis: LTime is the armed launch time of our timer, TBI the
//! idle entry before it (power:cpu_idle entry), TAI the idle exit after it (cpu_idle exit),
//! TIntr our timer's expiry (timer:hrtimer_expire_entry), and the thread's own wake time.

use serde::{Deserialize, Serialize};

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
    /// The idle state requested at TBI.
    pub cstate: String,
    /// Whether the idle exit was caused by our timer (and not another interrupt).
    pub woken_by_our_timer: bool,
    pub interrupts: u32,
    pub softirqs: u32,
}

/// One kept datapoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Datapoint {
    pub cstate: String,
    pub ldist_ns: u64,
    /// TAI − LTime.
    pub wake_latency_ns: u64,
    /// TIntr − LTime.
    pub intr_latency_ns: u64,
    /// Thread wake − LTime (what cyclictest measures).
    pub user_latency_ns: u64,
    /// LTime − TBI.
    pub silent_time_ns: u64,
    pub interrupts: u32,
    pub softirqs: u32,
}

/// Why a measurement is not a datapoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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

impl Raw {
    /// The datapoint, or why it is dropped.
    pub fn datapoint(&self) -> Result<Datapoint, Dropped> {
        if !self.woken_by_our_timer {
            return Err(Dropped::NotOurTimer);
        }
        let (Some(tbi), Some(tai), Some(tintr)) = (self.tbi_ns, self.tai_ns, self.tintr_ns) else {
            return Err(Dropped::NotInIdle);
        };
        let l = self.ltime_ns;
        if !(tbi <= l && l <= tai) {
            return Err(Dropped::OutsideIdle);
        }
        if tintr < l || self.user_wake_ns < l {
            return Err(Dropped::BeforeLaunch);
        }
        Ok(Datapoint {
            cstate: self.cstate.clone(),
            ldist_ns: self.ldist_ns,
            wake_latency_ns: tai - l,
            intr_latency_ns: tintr - l,
            user_latency_ns: self.user_wake_ns - l,
            silent_time_ns: l - tbi,
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

/// The statistics of one idle state, as `wake --json` reports them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateReport {
    pub name: String,
    /// The exit latency cpuidle declares for this state.
    pub declared_latency_us: u64,
    pub count: usize,
    pub dropped: usize,
    pub wake_latency_ns: Option<Distribution>,
    pub intr_latency_ns: Option<Distribution>,
    pub user_latency_ns: Option<Distribution>,
    pub silent_time_ns: Option<Distribution>,
    /// Whether the measured wake latency's p99.9 or maximum exceeds the declared latency.
    pub exceeds_declared: bool,
}

/// Builds the report of one state from its measurements.
pub fn state_report(name: &str, declared_latency_us: u64, raws: &[Raw]) -> StateReport {
    let (kept, dropped): (Vec<_>, Vec<_>) =
        raws.iter().map(Raw::datapoint).partition(Result::is_ok);
    let points: Vec<Datapoint> = kept.into_iter().filter_map(Result::ok).collect();
    let dist = |f: fn(&Datapoint) -> u64| Distribution::of(points.iter().map(|p| f(p) as f64));
    let wake = dist(|p| p.wake_latency_ns);
    let declared_ns = declared_latency_us as f64 * 1e3;
    StateReport {
        name: name.to_string(),
        declared_latency_us,
        count: points.len(),
        dropped: dropped.len(),
        exceeds_declared: wake
            .as_ref()
            .is_some_and(|w| w.p99_9 > declared_ns || w.max > declared_ns),
        wake_latency_ns: wake,
        intr_latency_ns: dist(|p| p.intr_latency_ns),
        user_latency_ns: dist(|p| p.user_latency_ns),
        silent_time_ns: dist(|p| p.silent_time_ns),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(ltime: u64, tbi: u64, tai: u64, tintr: u64, user: u64) -> Raw {
        Raw {
            ltime_ns: ltime,
            ldist_ns: 1_000_000,
            tbi_ns: Some(tbi),
            tai_ns: Some(tai),
            tintr_ns: Some(tintr),
            user_wake_ns: user,
            cstate: "C1".into(),
            woken_by_our_timer: true,
            interrupts: 1,
            softirqs: 0,
        }
    }

    #[test]
    fn latencies_by_hand() {
        let p = raw(10_000, 4_000, 10_700, 10_900, 14_000)
            .datapoint()
            .unwrap();
        assert_eq!(
            (
                p.wake_latency_ns,
                p.intr_latency_ns,
                p.user_latency_ns,
                p.silent_time_ns
            ),
            (700, 900, 4_000, 6_000)
        );
    }

    #[test]
    fn drop_rules() {
        let mut other = raw(10_000, 4_000, 10_700, 10_900, 14_000);
        other.woken_by_our_timer = false;
        assert_eq!(other.datapoint(), Err(Dropped::NotOurTimer));
        assert_eq!(
            raw(10_000, 11_000, 12_000, 12_100, 13_000).datapoint(),
            Err(Dropped::OutsideIdle)
        );
        assert_eq!(
            raw(10_000, 4_000, 9_000, 9_100, 13_000).datapoint(),
            Err(Dropped::OutsideIdle)
        );
        assert_eq!(
            raw(10_000, 4_000, 10_500, 9_999, 13_000).datapoint(),
            Err(Dropped::BeforeLaunch)
        );
        let mut busy = raw(10_000, 4_000, 10_700, 10_900, 14_000);
        busy.tbi_ns = None;
        assert_eq!(busy.datapoint(), Err(Dropped::NotInIdle));
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
        assert!(!state_report("C1", 1, &raws).exceeds_declared);
        raws.push(raw(10_000, 0, 11_500, 11_500, 20_000));
        let mut dropped = raw(10_000, 0, 10_500, 10_500, 20_000);
        dropped.woken_by_our_timer = false;
        raws.push(dropped);
        let r = state_report("C1", 1, &raws);
        assert!(r.exceeds_declared);
        assert_eq!((r.count, r.dropped), (501, 1));
        assert_eq!(r.wake_latency_ns.unwrap().max, 1500.0);
        assert!(state_report("C1", 1, &[]).wake_latency_ns.is_none());
    }
}
