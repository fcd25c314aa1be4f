//! `barrier`: a parallel-for loop with an implicit barrier after every iteration.
//!
//! The OpenMP workload of the power study "Power Battle: Windows 7 vs. Windows 8": each
//! `#pragma omp for` splits its iterations over the team (static schedule) and the team
//! waits at the implicit barrier at the end. Waiting here is passive, as in an OpenMP
//! runtime with OMP_WAIT_POLICY=passive: a thread that arrives early sleeps on a futex
//! (a synchronization, i.e. voluntary, context switch) and the last one to arrive wakes
//! them all. No lock is involved, so per iteration there are at most N − 1 sleeps and
//! wake-ups, and each thread counts the sleeps it really took (`blocked_waits`).

use std::sync::atomic::{AtomicU32, Ordering};

use serde::Serialize;

use super::compute::{compute_units, COMPUTE_UNIT};
use super::futex;
use super::threads::{numbered_names, run_threads, WorkCounts};
use super::Report;
use crate::error::{invalid_unless, WorkloadError};

#[derive(Debug, Clone, Serialize)]
pub struct BarrierOptions {
    /// Threads in the team (≥ 1).
    pub threads: usize,
    /// Parallel-for iterations, each ended by a barrier (≥ 1).
    pub iterations: u64,
    /// Compute units per iteration, split over the team (0 measures the barrier alone).
    #[serde(rename = "work_units_per_iteration")]
    pub work: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct BarrierThread {
    /// Iterations this thread finished, barrier included.
    pub iterations: u64,
    pub work_units: u64,
    /// Barriers at which this thread slept until the last thread arrived (at the others
    /// it was last, or the last arrived before it could fall asleep).
    pub blocked_waits: u64,
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

/// A reusable barrier for a fixed team on two futex words.
struct FutexBarrier {
    team: u32,
    /// Threads that have arrived in the current generation.
    arrived: AtomicU32,
    /// Bumped by the last thread of each generation; the waiters sleep on it.
    generation: AtomicU32,
}

impl FutexBarrier {
    fn new(team: u32) -> FutexBarrier {
        FutexBarrier {
            team,
            arrived: AtomicU32::new(0),
            generation: AtomicU32::new(0),
        }
    }

    /// Waits until the whole team has arrived; returns whether this thread slept.
    fn wait(&self) -> bool {
        // The generation cannot move before this thread arrives, so this is ours.
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.team {
            // Last to arrive: reset for the next generation before releasing anyone.
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            futex::wake(&self.generation, self.team - 1);
            return false;
        }
        futex::wait_until(&self.generation, |now| now != generation)
    }
}

pub fn run(options: BarrierOptions) -> Result<BarrierReport, WorkloadError> {
    invalid_unless!(options.threads >= 1, "barrier needs at least one thread");
    invalid_unless!(
        options.iterations >= 1,
        "barrier needs at least one iteration"
    );
    let team = u32::try_from(options.threads).map_err(|_| {
        WorkloadError::Invalid(format!("barrier: {} threads are too many", options.threads))
    })?;
    let barrier = FutexBarrier::new(team);
    let threads = run_threads(&numbered_names("barrier", options.threads), |index| {
        let share = static_share(options.work, options.threads, index);
        let mut state = index as u64;
        let mut done = BarrierThread {
            iterations: 0,
            work_units: 0,
            blocked_waits: 0,
        };
        for _ in 0..options.iterations {
            state = compute_units(state, share);
            done.work_units += share;
            done.blocked_waits += u64::from(barrier.wait());
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
    fn a_team_of_one_never_waits() {
        let options = BarrierOptions {
            threads: 1,
            iterations: 10,
            work: 1,
        };
        let report = run(options).unwrap();
        assert_eq!(report.threads[0].counts.iterations, 10);
        assert_eq!(report.threads[0].counts.blocked_waits, 0);
    }

    #[test]
    fn every_thread_finishes_every_iteration_and_blocks_at_the_barrier() {
        let _serial = crate::measured_test_lock();
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
        let blocked: u64 = report.threads.iter().map(|t| t.counts.blocked_waits).sum();
        // Per barrier one thread is last and does not wait: at most 200 sleeps in all.
        // Some must have happened (a thread that spun instead would have none).
        assert!(
            (20..=200).contains(&blocked),
            "{blocked} blocked waits at 200 barriers"
        );
        for thread in &report.threads {
            // Each sleep at the barrier is one voluntary switch in the kernel's count (but
            // for a wait woken before it could switch), and the thread blocks nowhere else.
            let (voluntary, sleeps) =
                (thread.usage.voluntary_switches, thread.counts.blocked_waits);
            assert!(
                super::super::futex::switches_match_waits(voluntary, sleeps),
                "{thread:?}"
            );
        }
    }
}
