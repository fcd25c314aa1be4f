//! Energy attribution that sums exactly to the measured total:
//! `total_j = idle_j + other_j + Σ target thread rows`.
//!
//! Method: the idle (baseline) share is the idle power times the elapsed time, capped at the
//! total; the rest — the active energy — is split over every thread in proportion to its
//! CPU time. Threads outside the target (other processes) are summed into `other_j`. With
//! no CPU time recorded at all, everything is idle energy. Frequency weighting (CPU time ×
//! frequency, or cycles where counters exist) refines the weights when those are recorded.

use serde::{Deserialize, Serialize};

use super::analysis::{SchedSummary, ThreadStats};
use super::event::Tid;

/// Energy of one target thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadEnergy {
    pub tid: Tid,
    pub energy_j: f64,
}

/// The split of the measured total.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attribution {
    pub total_j: f64,
    /// Baseline energy: idle power × elapsed time, unattributed.
    pub idle_j: f64,
    /// Active energy of threads outside the target.
    pub other_j: f64,
    /// Active energy of each target thread.
    pub threads: Vec<ThreadEnergy>,
    /// The method in one sentence, printed with the table.
    pub method: String,
}

/// Splits `total_j` measured over the summary's elapsed time by CPU time. `idle_power_w` is
/// the machine's baseline (measured before recording, or the power model's idle term).
pub fn attribute(
    summary: &SchedSummary,
    total_j: f64,
    idle_power_w: f64,
    is_target: impl Fn(&ThreadStats) -> bool,
) -> Attribution {
    let weights: Vec<f64> = summary
        .threads
        .iter()
        .map(|t| t.cpu_time_ns as f64)
        .collect();
    attribute_weighted(
        summary,
        total_j,
        idle_power_w,
        &weights,
        "CPU time",
        is_target,
    )
}

/// Frequency-weighted CPU time of each thread of the summary (same order), in kHz·ns: the
/// thread's CPU time at the mean frequency of its switch intervals, where running time at
/// an unknown frequency counts at the mean frequency of all known running time. (The
/// frequencies are known per switch interval; the CPU time is the scheduler's account,
/// which may split a CPU's time between threads differently.) `None` when no running time
/// had a known frequency (then weigh by CPU time).
pub fn frequency_weights(summary: &SchedSummary) -> Option<Vec<f64>> {
    let known_ns: u64 = summary.threads.iter().map(|t| t.freq_known_ns).sum();
    if known_ns == 0 {
        return None;
    }
    let khz_ns: f64 = summary.threads.iter().map(|t| t.khz_ns).sum();
    let mean_khz = khz_ns / known_ns as f64;
    Some(
        summary
            .threads
            .iter()
            .map(|t| {
                let unknown_ns = t.on_cpu_ns.saturating_sub(t.freq_known_ns) as f64;
                let interval_khz_ns = t.khz_ns + unknown_ns * mean_khz;
                match t.on_cpu_ns {
                    0 => t.cpu_time_ns as f64 * mean_khz,
                    on_cpu => interval_khz_ns / on_cpu as f64 * t.cpu_time_ns as f64,
                }
            })
            .collect(),
    )
}

/// Splits `total_j` like [`attribute`], with the active energy split over threads in
/// proportion to `weights` (one per thread of `summary.threads`, same order; negative or
/// non-finite weights count as zero). `weight_name` names the weighting for the method
/// sentence ("CPU time", "CPU time × frequency").
pub fn attribute_weighted(
    summary: &SchedSummary,
    total_j: f64,
    idle_power_w: f64,
    weights: &[f64],
    weight_name: &str,
    is_target: impl Fn(&ThreadStats) -> bool,
) -> Attribution {
    let weight = |i: usize| weights.get(i).copied().map(positive).unwrap_or(0.0);
    let elapsed_s = summary.elapsed_ns() as f64 / 1e9;
    let split = Split::new(
        total_j,
        idle_power_w,
        elapsed_s,
        (0..summary.threads.len()).map(weight).sum(),
    );
    let (total_j, idle_j, active_j, idle_power_w) = (
        split.total_j,
        split.idle_j,
        split.active_j,
        split.idle_power_w,
    );
    let threads: Vec<ThreadEnergy> = summary
        .threads
        .iter()
        .enumerate()
        .filter(|(_, t)| is_target(t))
        .map(|(i, t)| ThreadEnergy {
            tid: t.tid,
            energy_j: split.share(weight(i)),
        })
        .collect();
    let target_j: f64 = threads.iter().map(|t| t.energy_j).sum();
    // `other_j` takes the remainder, so the parts add up to the total by construction.
    // With no weight outside the target the remainder is rounding dust (8.5e-14 J printed
    // as "other processes 0.00000000000008527 J"): it is exactly zero.
    let other_weight: f64 = (0..summary.threads.len())
        .filter(|&i| !is_target(&summary.threads[i]))
        .map(weight)
        .sum();
    let other_j = if other_weight > 0.0 {
        (active_j - target_j).max(0.0)
    } else {
        0.0
    };
    Attribution {
        total_j,
        idle_j,
        other_j,
        threads,
        method: format!(
            "idle share = {idle_power_w:.2} W baseline × {elapsed_s:.3} s (capped at the total); the remaining {active_j:.3} J split over threads by {weight_name}"
        ),
    }
}

/// A finite positive figure, else 0 (a negative or non-finite weight counts as none).
pub fn positive(x: f64) -> f64 {
    if x.is_finite() && x > 0.0 {
        x
    } else {
        0.0
    }
}

/// The split every attribution makes of a measured total: the idle (baseline) share is
/// the idle power × the elapsed time, capped at the total (all of it when no weight ran),
/// and the active rest goes over the weights in proportion.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Split {
    pub total_j: f64,
    pub idle_power_w: f64,
    pub idle_j: f64,
    pub active_j: f64,
    pub total_weight: f64,
}

impl Split {
    /// Negative or non-finite inputs count as 0: a split never hands out negative energy.
    pub fn new(total_j: f64, idle_power_w: f64, elapsed_s: f64, total_weight: f64) -> Split {
        let (total_j, idle_power_w) = (positive(total_j), positive(idle_power_w));
        let total_weight = positive(total_weight);
        let idle_j = if total_weight <= 0.0 {
            total_j
        } else {
            (idle_power_w * positive(elapsed_s)).min(total_j)
        };
        Split {
            total_j,
            idle_power_w,
            idle_j,
            active_j: total_j - idle_j,
            total_weight,
        }
    }

    /// The active energy of a `weight`.
    pub fn share(&self, weight: f64) -> f64 {
        if self.total_weight <= 0.0 {
            0.0
        } else {
            self.active_j * (positive(weight) / self.total_weight)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(cpu_times: &[(Tid, u64)], elapsed_ns: u64) -> SchedSummary {
        SchedSummary {
            start_ns: 0,
            end_ns: elapsed_ns,
            threads: cpu_times
                .iter()
                .map(|&(tid, ns)| ThreadStats {
                    tid,
                    cpu_time_ns: ns,
                    ..ThreadStats::default()
                })
                .collect(),
            cpus: Vec::new(),
            processes: Vec::new(),
        }
    }

    /// Issue 17: "other processes 0.00000000000008527 J" when every thread was a target.
    #[test]
    fn no_weight_outside_the_target_leaves_exactly_zero_for_others() {
        let s = summary(&[(1, 1), (2, 1), (3, 1)], 1_000_000_000);
        let a = attribute(&s, 1.0, 0.1, |_| true);
        // 0.9 J over three equal weights: 0.3 each, whose sum is not exactly 0.9.
        let dust = 0.9 - a.threads.iter().map(|t| t.energy_j).sum::<f64>();
        assert!(dust > 0.0, "the case needs rounding dust to show: {dust:e}");
        assert_eq!(a.other_j, 0.0);
        // A thread outside the target still gets its share as `other`.
        let a = attribute(&s, 1.0, 0.1, |t| t.tid != 3);
        assert!((a.other_j - 0.3).abs() < 1e-12, "{}", a.other_j);
    }

    #[test]
    fn split_by_hand_and_exact_sum() {
        // 2 s at 5 W idle = 10 J baseline; 30 J active split 1:2:3 by CPU time.
        let s = summary(&[(1, 100), (2, 200), (3, 300)], 2_000_000_000);
        let a = attribute(&s, 40.0, 5.0, |t| t.tid != 3);
        assert_eq!(a.idle_j, 10.0);
        assert_eq!(
            a.threads,
            vec![
                ThreadEnergy {
                    tid: 1,
                    energy_j: 5.0
                },
                ThreadEnergy {
                    tid: 2,
                    energy_j: 10.0
                }
            ]
        );
        assert_eq!(a.other_j, 15.0);
        let sum = a.idle_j + a.other_j + a.threads.iter().map(|t| t.energy_j).sum::<f64>();
        assert!((sum - a.total_j).abs() <= 1e-12 * a.total_j);
        assert!(a.method.contains("5.00 W baseline"));
    }

    #[test]
    fn baseline_above_total_and_no_cpu_time() {
        let s = summary(&[(1, 100)], 1_000_000_000);
        let a = attribute(&s, 3.0, 5.0, |_| true);
        assert_eq!(
            (a.idle_j, a.other_j, a.threads[0].energy_j),
            (3.0, 0.0, 0.0),
            "never negative"
        );
        let idle = summary(&[(1, 0)], 1_000_000_000);
        let a = attribute(&idle, 7.0, 1.0, |_| true);
        assert_eq!((a.idle_j, a.other_j), (7.0, 0.0));
    }

    #[test]
    fn sums_exactly_over_many_threads() {
        let times: Vec<(Tid, u64)> = (1..=997)
            .map(|t| (t, (t as u64 * 7919) % 1000 + 1))
            .collect();
        let s = summary(&times, 3_000_000_000);
        let a = attribute(&s, 123.456, 11.1, |t| t.tid % 3 == 0);
        let sum = a.idle_j + a.other_j + a.threads.iter().map(|t| t.energy_j).sum::<f64>();
        assert!((sum - 123.456).abs() < 1e-9, "{sum}");
    }
}
