//! `imbalanced`: one thread does most of the work, the others finish early and wait.
//!
//! The imbalanced threading model of "Maximizing Power Savings on Mobile Platforms": a functional
//! decomposition where one thread (physics) carries far more work than the others
//! (rendering). The run lasts as long as the heavy thread; the light threads finish early
//! and the team joins at the end, so the CPUs are far from evenly busy, which is what
//! misleads per-core frequency governors.

use serde::Serialize;

use super::barrier::static_share;
use super::compute::{compute_units, COMPUTE_UNIT};
use super::threads::{run_threads, WorkCounts};
use super::Report;
use crate::error::{invalid_unless, WorkloadError};

/// The heavy thread's share of the work when none is given.
pub const DEFAULT_HEAVY_SHARE: f64 = 0.8;

#[derive(Debug, Clone, Serialize)]
pub struct ImbalancedOptions {
    /// Threads: one heavy, the others light (≥ 2).
    pub threads: usize,
    /// Compute units for all threads together (≥ 1).
    #[serde(rename = "work_units")]
    pub work: u64,
    /// The heavy thread's share of `work`, in (0, 1]; the light threads split the rest.
    pub heavy_share: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Heavy,
    Light,
}

#[derive(Debug, Clone, Serialize)]
pub struct ImbalancedThread {
    pub role: Role,
    pub work_units: u64,
}

impl WorkCounts for ImbalancedThread {
    fn work_units(&self) -> u64 {
        self.work_units
    }
}

pub type ImbalancedReport = Report<ImbalancedOptions, ImbalancedThread>;

/// The work of each thread: index 0 is the heavy one, the light threads share the rest
/// evenly. The parts add up to `work` exactly.
pub fn split_work(work: u64, threads: usize, heavy_share: f64) -> Vec<u64> {
    let heavy = ((work as f64 * heavy_share).round() as u64).min(work);
    let light_threads = threads - 1;
    std::iter::once(heavy)
        .chain((0..light_threads).map(|i| static_share(work - heavy, light_threads, i)))
        .collect()
}

pub fn run(options: ImbalancedOptions) -> Result<ImbalancedReport, WorkloadError> {
    invalid_unless!(
        options.threads >= 2,
        "imbalanced needs at least two threads: one heavy and at least one light"
    );
    invalid_unless!(
        options.work >= 1,
        "imbalanced needs at least one unit of work"
    );
    invalid_unless!(
        options.heavy_share > 0.0 && options.heavy_share <= 1.0,
        "the heavy thread's share must be in (0, 1], got {}",
        options.heavy_share
    );
    let parts = split_work(options.work, options.threads, options.heavy_share);
    let names: Vec<String> = (0..options.threads)
        .map(|i| {
            if i == 0 {
                "heavy-0".to_string()
            } else {
                format!("light-{i}")
            }
        })
        .collect();
    let threads = run_threads(&names, |index| {
        compute_units(index as u64, parts[index]);
        ImbalancedThread {
            role: if index == 0 { Role::Heavy } else { Role::Light },
            work_units: parts[index],
        }
    })?;
    Ok(Report::new("imbalanced", COMPUTE_UNIT, options, threads))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_gives_the_heavy_share_to_thread_zero_and_adds_up() {
        assert_eq!(split_work(1000, 2, 0.8), vec![800, 200]);
        assert_eq!(split_work(1000, 4, 0.8), vec![800, 67, 67, 66]);
        assert_eq!(split_work(10, 3, 1.0), vec![10, 0, 0]);
    }

    #[test]
    fn the_heavy_thread_uses_several_times_the_cpu_of_any_light_one() {
        let _serial = crate::measured_test_lock();
        let options = ImbalancedOptions {
            threads: 3,
            work: 30_000,
            heavy_share: DEFAULT_HEAVY_SHARE,
        };
        let report = run(options).unwrap();
        assert_eq!(report.work_units, 30_000);
        let heavy = &report.threads[0];
        assert_eq!(heavy.counts.role, Role::Heavy);
        for light in &report.threads[1..] {
            assert_eq!(light.counts.role, Role::Light);
            // 80% vs 10% of the work: 8× the CPU time, 3× leaves room for noise.
            assert!(
                heavy.usage.cpu_s >= 3.0 * light.usage.cpu_s,
                "heavy {} s vs {} {} s",
                heavy.usage.cpu_s,
                light.name,
                light.usage.cpu_s
            );
        }
    }

    #[test]
    fn one_thread_or_a_share_outside_zero_to_one_is_an_error() {
        let bad = |threads, heavy_share| {
            run(ImbalancedOptions {
                threads,
                work: 10,
                heavy_share,
            })
            .unwrap_err()
            .to_string()
        };
        assert!(bad(1, 0.8).contains("two threads"));
        assert!(bad(2, 0.0).contains("share"));
        assert!(bad(2, 1.5).contains("share"));
    }
}
