//! Running a workload's threads and reading what the kernel counted for each of them.
//!
//! Every worker reads getrusage(RUSAGE_THREAD) as its last act, so the per-thread CPU time
//! and context-switch counts in a report are the kernel's own, the same counters that
//! `/proc/self/task/TID/status` shows and that `powerlens record` must agree with.

use std::io;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::WorkloadError;

/// What the kernel accounted to the calling thread so far.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ThreadUsage {
    /// User plus system CPU time, in seconds (getrusage: whole microseconds).
    pub cpu_s: f64,
    /// The scheduler's runtime of the thread in nanoseconds, as seconds
    /// (`CLOCK_THREAD_CPUTIME_ID`: the `sum_exec_runtime` that `sched_stat_runtime` adds up,
    /// exact where getrusage rounds to microseconds).
    pub cpu_clock_s: f64,
    /// Switches because the thread blocked (sleep, futex wait, I/O): synchronization.
    pub voluntary_switches: u64,
    /// Switches because the scheduler took the CPU away: preemption.
    pub involuntary_switches: u64,
}

/// Reads getrusage(RUSAGE_THREAD) for the calling thread.
pub fn thread_usage() -> io::Result<ThreadUsage> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: the pointer is valid for one rusage, which the kernel fills on success.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: getrusage succeeded, so the struct is initialized.
    let usage = unsafe { usage.assume_init() };
    // Summed in whole microseconds first, so that 50 µs prints as 5e-5, not 4.9999e-5.
    #[allow(
        clippy::unnecessary_cast,
        reason = "time_t and suseconds_t are 32-bit on some targets"
    )]
    let micros = |t: libc::timeval| t.tv_sec as i64 * 1_000_000 + t.tv_usec as i64;
    let clock_ns = powerlens_sys::thread::cpu_time_ns()?;
    Ok(ThreadUsage {
        cpu_s: (micros(usage.ru_utime) + micros(usage.ru_stime)) as f64 / 1e6,
        cpu_clock_s: clock_ns as f64 / 1e9,
        voluntary_switches: usage.ru_nvcsw as u64,
        involuntary_switches: usage.ru_nivcsw as u64,
    })
}

pub use powerlens_sys::thread::pin_to_cpu;

/// The kernel's id of the calling thread (the TID in `/proc/PID/task/TID` and in traces).
pub fn thread_id() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// One worker thread in a report: its identity, the kernel's counters, the workload's own
/// counts (`T`, flattened into the same JSON object).
#[derive(Debug, Clone, Serialize)]
pub struct ThreadReport<T> {
    /// The thread name (`comm` in /proc and in traces).
    pub name: String,
    pub tid: i32,
    #[serde(flatten)]
    pub usage: ThreadUsage,
    #[serde(flatten)]
    pub counts: T,
}

/// Workload-specific per-thread counts that say how much work the thread retired.
pub trait WorkCounts {
    fn work_units(&self) -> u64;
}

/// The most threads a workload starts. If the system refused a thread midway, the
/// threads already running could wait forever for it at a barrier or a handoff; far
/// below the usual limits, this cap keeps that from happening.
pub const MAX_THREADS: usize = 4096;

/// Runs `names.len()` threads with the given names; thread `i` runs `body(i)`. Returns the
/// reports in index order and the wall time from before the first spawn to after the last
/// join.
pub fn run_threads<T, F>(
    names: &[String],
    body: F,
) -> Result<(Vec<ThreadReport<T>>, Duration), WorkloadError>
where
    T: Send,
    F: Fn(usize) -> T + Sync,
{
    if names.len() > MAX_THREADS {
        return Err(WorkloadError::TooManyThreads {
            asked: names.len(),
            at_most: MAX_THREADS,
        });
    }
    let start = Instant::now();
    let results = std::thread::scope(|scope| {
        let body = &body;
        let handles = names
            .iter()
            .enumerate()
            .map(|(index, name)| {
                std::thread::Builder::new()
                    .name(name.clone())
                    .spawn_scoped(scope, move || {
                        let counts = body(index);
                        let usage = thread_usage();
                        (name.clone(), thread_id(), usage, counts)
                    })
                    .map_err(|source| WorkloadError::StartThread {
                        name: name.clone(),
                        source,
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        handles
            .into_iter()
            .map(|handle| handle.join().map_err(|_| WorkloadError::ThreadPanicked))
            .collect::<Result<Vec<_>, _>>()
    })?;
    let wall = start.elapsed();
    let reports = results
        .into_iter()
        .map(|(name, tid, usage, counts)| {
            let usage = usage.map_err(|source| WorkloadError::ThreadUsage {
                name: name.clone(),
                source,
            })?;
            Ok(ThreadReport {
                name,
                tid,
                usage,
                counts,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((reports, wall))
}

/// Names `count` threads `prefix-0`, `prefix-1`, … (kept short: Linux keeps 15 bytes).
pub fn numbered_names(prefix: &str, count: usize) -> Vec<String> {
    (0..count).map(|i| format!("{prefix}-{i}")).collect()
}

/// How many threads "all CPUs" means: the CPUs this process may run on (the online CPUs
/// unless taskset or a cgroup restricts it).
pub fn available_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The oracle for getrusage: the kernel's own per-task status file.
    fn proc_status_switches(tid: i32) -> (u64, u64) {
        let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).unwrap();
        let field = |key: &str| -> u64 {
            text.lines()
                .find_map(|line| line.strip_prefix(key))
                .unwrap()
                .trim()
                .parse()
                .unwrap()
        };
        (
            field("voluntary_ctxt_switches:"),
            field("nonvoluntary_ctxt_switches:"),
        )
    }

    #[test]
    fn thread_usage_agrees_with_proc_status_and_counts_sleeps() {
        let _serial = crate::measured_test_lock();
        std::thread::spawn(|| {
            for _ in 0..5 {
                std::thread::sleep(Duration::from_millis(1));
            }
            let usage = thread_usage().unwrap();
            let (voluntary, involuntary) = proc_status_switches(thread_id());
            assert!(usage.voluntary_switches >= 5, "{usage:?}");
            // The counters may move between the two reads, never backwards.
            assert!(
                voluntary >= usage.voluntary_switches && voluntary <= usage.voluntary_switches + 1
            );
            assert!(involuntary >= usage.involuntary_switches);
            assert!(
                usage.cpu_s < 0.004,
                "5 sleeps should cost almost no CPU: {usage:?}"
            );
        })
        .join()
        .unwrap();
    }

    #[test]
    fn run_threads_names_threads_and_keeps_index_order() {
        let names = numbered_names("t", 3);
        let (reports, wall) = run_threads(&names, |i| {
            let comm =
                std::fs::read_to_string(format!("/proc/self/task/{}/comm", thread_id())).unwrap();
            (i, comm.trim().to_string())
        })
        .unwrap();
        for (i, report) in reports.iter().enumerate() {
            assert_eq!(report.counts, (i, format!("t-{i}")));
            assert_eq!(report.name, format!("t-{i}"));
        }
        assert!(wall > Duration::ZERO);
    }
}
