//! `sleepy`: a thread that wakes up every period, works briefly and sleeps again.
//!
//! Short vs long sleeps ("Power Battle: Windows 7 vs. Windows 8": "short barriers (waits) are not efficient"; "Maximizing Power Savings on Mobile Platforms":
//! race to idle): the CPU's idle periods last about one period, so the period decides
//! which C-states pay off (target residency) and how many wake-ups per second the
//! program causes. The thread sleeps until absolute deadlines `start + k × period`, so the
//! wake-up rate is 1/period however long the work and the timer slack are; a deadline that
//! has already passed when the thread gets to it (a late wake-up on a loaded machine) is
//! skipped and counted, like a timer's missed expirations, rather than run back to back.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::compute::{compute_until, COMPUTE_UNIT};
use super::threads::{run_threads, WorkCounts};
use super::{as_seconds, Report};
use crate::error::{invalid_unless, WorkloadError};

#[derive(Debug, Clone, Serialize)]
pub struct SleepyOptions {
    /// Time between wake-ups (> `work`).
    #[serde(rename = "period_s", serialize_with = "as_seconds")]
    pub period: Duration,
    /// How long the whole run lasts (≥ one period); it runs `duration / period` periods.
    #[serde(rename = "duration_s", serialize_with = "as_seconds")]
    pub duration: Duration,
    /// Compute time after each wake-up (> 0, < `period`).
    #[serde(rename = "work_s", serialize_with = "as_seconds")]
    pub work: Duration,
}

impl SleepyOptions {
    /// How many periods (and so wake-ups) the run has.
    pub fn periods(&self) -> u64 {
        (self.duration.as_nanos() / self.period.as_nanos().max(1)) as u64
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SleepyThread {
    /// Periods in which the thread slept, was woken by its timer and worked.
    pub wakeups: u64,
    /// Periods skipped because their deadline had passed before the thread got to it
    /// (the previous wake-up came late). `wakeups + missed_periods` = duration / period.
    pub missed_periods: u64,
    pub work_units: u64,
}

impl WorkCounts for SleepyThread {
    fn work_units(&self) -> u64 {
        self.work_units
    }
}

pub type SleepyReport = Report<SleepyOptions, SleepyThread>;

pub fn run(options: SleepyOptions) -> Result<SleepyReport, WorkloadError> {
    invalid_unless!(
        !options.work.is_zero() && options.work < options.period,
        "the work per period ({:?}) must be greater than zero and shorter than the period ({:?})",
        options.work,
        options.period
    );
    invalid_unless!(
        options.periods() >= 1,
        "the duration ({:?}) must be at least one period ({:?})",
        options.duration,
        options.period
    );
    let threads = run_threads(&["sleepy-0".to_string()], |_| {
        let mut state = 0;
        let mut done = SleepyThread {
            wakeups: 0,
            missed_periods: 0,
            work_units: 0,
        };
        let mut deadline = Instant::now();
        for _ in 0..options.periods() {
            deadline += options.period;
            let now = Instant::now();
            if now >= deadline {
                done.missed_periods += 1;
                continue;
            }
            std::thread::sleep(deadline - now);
            done.wakeups += 1;
            done.work_units += compute_until(&mut state, Instant::now() + options.work);
        }
        done
    })?;
    Ok(Report::new("sleepy", COMPUTE_UNIT, options, threads))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wakes_once_per_period_and_mostly_sleeps() {
        let _serial = crate::measured_test_lock();
        let options = SleepyOptions {
            period: Duration::from_millis(2),
            duration: Duration::from_millis(200),
            work: Duration::from_micros(20),
        };
        assert_eq!(options.periods(), 100);
        let report = run(options).unwrap();
        let thread = &report.threads[0];
        let counts = &thread.counts;
        assert_eq!(counts.wakeups + counts.missed_periods, 100);
        // A wake-up later than a period skips the next one. Idle, this VM's 2 ms sleeps
        // overshoot by ~0.15 ms and skip about 1%; with both CPUs saturated by other
        // builds a third; a wrong period (×2, ×10) would halve the count or worse.
        assert!(counts.wakeups >= 50, "{counts:?}");
        assert!(
            counts.work_units >= counts.wakeups,
            "every wake-up works: {counts:?}"
        );
        // Each timer sleep blocks: a voluntary switch in the kernel's count, except a sleep
        // so short that the timer fired before the thread left the CPU, or one preempted
        // just before it (then counted as involuntary).
        let usage = &thread.usage;
        assert!(
            usage.voluntary_switches * 10 >= counts.wakeups * 8,
            "{thread:?}"
        );
        assert!(
            usage.voluntary_switches + usage.involuntary_switches >= counts.wakeups * 9 / 10,
            "{thread:?}"
        );
        // 100 × 20 µs of work in 0.2 s: CPU time is a small fraction of the wall time.
        assert!(report.wall_s >= 0.2, "wall {}", report.wall_s);
        assert!(thread.usage.cpu_s < 0.25 * report.wall_s, "{thread:?}");
    }

    #[test]
    fn work_not_shorter_than_the_period_or_a_run_shorter_than_a_period_is_an_error() {
        let options = |period_us, duration_us, work_us| SleepyOptions {
            period: Duration::from_micros(period_us),
            duration: Duration::from_micros(duration_us),
            work: Duration::from_micros(work_us),
        };
        let too_much_work = run(options(100, 1000, 100)).unwrap_err().to_string();
        assert!(
            too_much_work.contains("shorter than the period"),
            "{too_much_work}"
        );
        let too_short = run(options(1000, 999, 20)).unwrap_err().to_string();
        assert!(too_short.contains("at least one period"), "{too_short}");
    }
}
