//! The workloads powerlens runs and measures, as a library the command line, `wake`,
//! `dvfs` and the tests share.
//!
//! - The built-in workloads reproduce the case studies: the demos, the documentation
//!   examples and the test loads of every later feature. Each takes a plain option struct
//!   (no clap types), runs its threads, and returns a [`Report`]: wall time, retired work,
//!   and the kernel's per-thread CPU time and context-switch counts. Workloads print
//!   nothing: they are measured while they run.
//! - The [`runner`] measures any command (a built-in workload too) repeatedly: warm-up,
//!   prepare, fixed windows, configurations applied around each run, failures and Ctrl-C.
//!
//! Errors are typed ([`WorkloadError`], [`RunnerError`]) and name no command-line flag;
//! the command line adds that context.

pub mod avx;
pub mod barrier;
pub mod imbalanced;
pub mod pingpong;
pub mod sleepy;
pub mod spin;

pub mod runner;

mod compute;
mod error;
mod futex;
mod threads;

use std::time::Duration;

use serde::{Serialize, Serializer};

pub use error::{RunnerError, WorkloadError};
pub use threads::{available_cpus, pin_to_cpu, ThreadReport, WorkCounts, MAX_THREADS};

/// The outcome of one workload run. `O` are the options it ran with, `T` the
/// workload-specific per-thread counts.
#[derive(Debug, Clone, Serialize)]
pub struct Report<O, T> {
    /// The workload's name, e.g. `spin`.
    pub workload: &'static str,
    /// Wall time from starting the first thread to joining the last.
    pub wall_s: f64,
    /// What one unit of `work_units` is, e.g. `compute unit` or `handoff`.
    pub work_unit: &'static str,
    /// Work retired by all threads together.
    pub work_units: u64,
    pub options: O,
    pub threads: Vec<ThreadReport<T>>,
}

impl<O, T: WorkCounts> Report<O, T> {
    fn new(
        workload: &'static str,
        work_unit: &'static str,
        options: O,
        (threads, wall): (Vec<ThreadReport<T>>, Duration),
    ) -> Self {
        Report {
            workload,
            wall_s: wall.as_secs_f64(),
            work_unit,
            work_units: threads.iter().map(|t| t.counts.work_units()).sum(),
            options,
            threads,
        }
    }

    /// One line for stderr, e.g.
    /// `spin: 2 threads × 1.00 s, 1.84e6 compute units; CPU 1.99 s, 4 voluntary + 9 involuntary switches`.
    pub fn summary_line(&self) -> String {
        let cpu_s: f64 = self.threads.iter().map(|t| t.usage.cpu_s).sum();
        let voluntary: u64 = self
            .threads
            .iter()
            .map(|t| t.usage.voluntary_switches)
            .sum();
        let involuntary: u64 = self
            .threads
            .iter()
            .map(|t| t.usage.involuntary_switches)
            .sum();
        let count = self.threads.len();
        format!(
            "{}: {count} thread{} × {:.2} s, {} {}s; CPU {cpu_s:.2} s, {voluntary} voluntary + {involuntary} involuntary switches",
            self.workload,
            if count == 1 { "" } else { "s" },
            self.wall_s,
            format_count(self.work_units),
            self.work_unit,
        )
    }
}

/// Exact below a million, three significant digits above (`1.84e9`).
fn format_count(n: u64) -> String {
    if n < 1_000_000 {
        n.to_string()
    } else {
        format!("{:.2e}", n as f64)
    }
}

/// Serializes a duration as seconds (the option fields are named `…_s`).
fn as_seconds<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_f64(duration.as_secs_f64())
}

/// Tests that measure CPU time, switches or sleeps hold this lock, so that they do not
/// compete with each other for the CPUs of a small (two-CPU) test machine.
#[cfg(test)]
fn measured_test_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_exact_when_small_and_short_when_large() {
        assert_eq!(format_count(4000), "4000");
        assert_eq!(format_count(1_840_000_000), "1.84e9");
    }
}
