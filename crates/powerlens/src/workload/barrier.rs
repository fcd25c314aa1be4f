//! `barrier`: a parallel-for loop with an implicit barrier after every iteration.
//!
//! The OpenMP workload of the Windows 7 vs Windows 8 power study (seed 000): each
//! `#pragma omp for` splits its iterations over the team (static schedule) and the team
//! waits at the implicit barrier at the end. Waiting here is passive: a thread that
//! arrives early blocks in std's Barrier (a futex-backed condvar), so each wait is a
//! synchronization (voluntary) context switch followed by a wake-up, as with an OpenMP
//! runtime whose wait policy is passive (OMP_WAIT_POLICY=passive).

use std::sync::Barrier;

use serde::Serialize;

use super::compute::{compute_units, COMPUTE_UNIT};
use super::threads::{numbered_names, run_threads, WorkCounts};
use super::Report;

#[derive(Debug, Clone, Serialize)]
pub struct BarrierOptions {
    /// Threads in the team (≥ 1).
    pub threads: usize,
    /// Parallel-for iterations, each ended by a barrier (≥ 1).
    pub iterations: u64,
    /// Compute units per iteration, split over the team (0 measures the barrier alone).
    pub work: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct BarrierThread {
    /// Iterations this thread finished, barrier included.
    pub iterations: u64,
    pub work_units: u64,
}

impl WorkCounts for BarrierThread {
    fn work_units(&self) -> u64 {
        self.work_units
    }
}

pub type BarrierReport = Report<BarrierOptions, BarrierThread>;

/// Thread `index`'s share of `work` units split over `threads` as OpenMP's static schedule
/// does: equal chunks, the first `work % threads` threads one unit more.
pub fn static_share(work: u64, threads: usize, index: usize) -> u64 {
    let threads = threads as u64;
    work / threads + u64::from((index as u64) < work % threads)
}

pub fn run(options: BarrierOptions) -> anyhow::Result<BarrierReport> {
    anyhow::ensure!(options.threads >= 1, "barrier needs at least one thread");
    anyhow::ensure!(
        options.iterations >= 1,
        "barrier needs at least one iteration"
    );
    let barrier = Barrier::new(options.threads);
    let threads = run_threads(&numbered_names("barrier", options.threads), |index| {
        let share = static_share(options.work, options.threads, index);
        let mut state = index as u64;
        let mut done = BarrierThread {
            iterations: 0,
            work_units: 0,
        };
        for _ in 0..options.iterations {
            state = compute_units(state, share);
            done.work_units += share;
            barrier.wait();
            done.iterations += 1;
        }
        done
    })?;
    Ok(Report::new("barrier", COMPUTE_UNIT, options, threads))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_shares_add_up_and_differ_by_at_most_one() {
        for (work, threads) in [(10, 3), (2, 4), (0, 2), (1000, 2)] {
            let shares: Vec<u64> = (0..threads)
                .map(|i| static_share(work, threads, i))
                .collect();
            assert_eq!(shares.iter().sum::<u64>(), work, "{shares:?}");
            assert!(shares.iter().max().unwrap() - shares.iter().min().unwrap() <= 1);
        }
    }

    #[test]
    fn every_thread_finishes_every_iteration_and_blocks_at_the_barrier() {
        let _serial = crate::workload::measured_test_lock();
        let options = BarrierOptions {
            threads: 2,
            iterations: 200,
            work: 100,
        };
        let report = run(options).unwrap();
        assert_eq!(report.work_units, 200 * 100);
        for thread in &report.threads {
            assert_eq!(thread.counts.iterations, 200, "{thread:?}");
            assert_eq!(thread.counts.work_units, 200 * 50, "{thread:?}");
        }
        // A thread that reaches the barrier first sleeps until the last one arrives; with
        // 200 barriers some of those waits must have blocked.
        let voluntary: u64 = report
            .threads
            .iter()
            .map(|t| t.usage.voluntary_switches)
            .sum();
        assert!(
            voluntary >= 20,
            "only {voluntary} voluntary switches at 200 barriers"
        );
    }
}
