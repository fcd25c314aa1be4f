//! `spin`: every thread computes without pause for a fixed time.
//!
//! The busy loop of the scheduler power studies ("Maximizing Power Savings on Mobile Platforms": single- vs multi-threaded
//! power): N fully busy CPUs, no blocking, so each thread's CPU time equals the wall time
//! and it has (almost) no voluntary context switches.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::compute::{compute_until, COMPUTE_UNIT};
use super::threads::{numbered_names, run_threads, WorkCounts};
use super::{as_seconds, Report};
use crate::error::{invalid_unless, WorkloadError};

#[derive(Debug, Clone, Serialize)]
pub struct SpinOptions {
    /// Busy threads (≥ 1).
    pub threads: usize,
    /// How long each thread spins (> 0).
    #[serde(rename = "duration_s", serialize_with = "as_seconds")]
    pub duration: Duration,
}

#[derive(Debug, Clone, Serialize)]
pub struct SpinThread {
    pub work_units: u64,
}

impl WorkCounts for SpinThread {
    fn work_units(&self) -> u64 {
        self.work_units
    }
}

pub type SpinReport = Report<SpinOptions, SpinThread>;

pub fn run(options: SpinOptions) -> Result<SpinReport, WorkloadError> {
    invalid_unless!(options.threads >= 1, "spin needs at least one thread");
    invalid_unless!(
        !options.duration.is_zero(),
        "spin needs a duration greater than zero"
    );
    // One deadline for all, so that threads started later do not run longer.
    let deadline = Instant::now() + options.duration;
    let threads = run_threads(&numbered_names("spin", options.threads), |index| {
        let mut state = index as u64;
        SpinThread {
            work_units: compute_until(&mut state, deadline),
        }
    })?;
    Ok(Report::new("spin", COMPUTE_UNIT, options, threads))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// Runs `f` while a control thread busy-loops beside it; returns `f`'s result and the
    /// control's CPU time: what a thread known to spin got from the machine meanwhile.
    fn beside_a_control_spinner<R>(f: impl FnOnce() -> R) -> (R, f64) {
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let control = scope.spawn(|| {
                let mut state = 0;
                while !stop.load(Ordering::Relaxed) {
                    state = crate::compute::compute_unit(state);
                }
                crate::threads::thread_usage().unwrap().cpu_s
            });
            let result = f();
            stop.store(true, Ordering::Relaxed);
            (result, control.join().unwrap())
        })
    }

    #[test]
    #[ignore = "live: the real scheduler's timing"]
    fn each_thread_is_busy_for_the_whole_duration() {
        let _serial = crate::measured_test_lock();
        let duration = Duration::from_millis(300);
        let (report, control_cpu_s) = beside_a_control_spinner(|| {
            run(SpinOptions {
                threads: 2,
                duration,
            })
            .unwrap()
        });
        assert_eq!(report.threads.len(), 2);
        assert!(
            report.wall_s >= 0.3 && report.wall_s < 0.6,
            "wall {}",
            report.wall_s
        );
        for thread in &report.threads {
            // The kernel's own counts: a spinning thread never blocks, so it has (almost)
            // no voluntary switches, whatever the load; one that slept would have one per
            // sleep.
            assert!(thread.usage.voluntary_switches <= 3, "{thread:?}");
            // The machine is shared with other builds, so the CPU a spinner gets varies;
            // compare with a thread known to spin over the same time (the scheduler shares
            // fairly between them). One that slept or stopped early would get far less.
            assert!(
                thread.usage.cpu_s >= 0.5 * control_cpu_s
                    && thread.usage.cpu_s <= report.wall_s + 0.01,
                "{}: cpu {} s in 0.3 s of spinning, control {control_cpu_s} s",
                thread.name,
                thread.usage.cpu_s,
            );
            assert!(thread.counts.work_units > 0);
        }
    }

    #[test]
    fn zero_threads_or_duration_is_an_error() {
        let no_threads = SpinOptions {
            threads: 0,
            duration: Duration::from_millis(1),
        };
        assert!(run(no_threads).unwrap_err().to_string().contains("thread"));
        let no_time = SpinOptions {
            threads: 1,
            duration: Duration::ZERO,
        };
        assert!(run(no_time).unwrap_err().to_string().contains("duration"));
    }
}
