//! The two accounts of CPU time side by side, so that a user who adds up the thread grid and
//! compares it with the CPUs' busy time finds either agreement or the difference explained.
//!
//! A thread's CPU time is the scheduler's own account (Σ `sched_stat_runtime`, what
//! getrusage, `ps` and `CLOCK_THREAD_CPUTIME_ID` show). The CPUs' busy time is made of the
//! switch intervals (from one `sched_switch` to the next). Both cover the same CPU time,
//! but they need not split or total it the same way:
//! - the scheduler charges time from its run-queue clock, which leaves out interrupt time
//!   and a VM's steal time where the kernel accounts those apart
//!   (`CONFIG_IRQ_TIME_ACCOUNTING`, `CONFIG_PARAVIRT_TIME_ACCOUNTING`), and which may be
//!   read before a woken thread's switch-in (a clock update skipped at the switch), so the
//!   woken thread is charged time the switches give to the task before it, idle included:
//!   then Σ CPU time exceeds the busy time;
//! - on a CPU shared by two busy threads, some kernels (this project's VMs among them)
//!   time-stamp the switches apart from the runtime updates, so the intervals give one
//!   thread part of the other's time, while the two still add up to the CPU's busy time.

use serde::{Deserialize, Serialize};

use super::analysis::{CpuTimeSource, SchedSummary};
use super::event::IDLE_TID;

/// At most this many threads are named as examples of a fallback.
const EXAMPLES: usize = 5;
/// Differences below this share of the busy time (or below [`AGREE_ABS_S`]) count as
/// agreement: rounding of the first and last updates.
const AGREE_REL: f64 = 0.005;
const AGREE_ABS_S: f64 = 0.001;

/// Σ over every thread of the recording of its CPU time, by each account.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuTimeAccounts {
    /// Σ `cpu_time_s`: the scheduler's account where recorded, else switch intervals.
    pub cpu_time_s: f64,
    /// Σ `on_cpu_s`: the switch intervals, equal to the CPUs' busy time.
    pub on_cpu_s: f64,
    /// The CPUs' busy time (`system.busy_s`).
    pub busy_s: f64,
    /// `cpu_time_s − busy_s`.
    pub difference_s: f64,
    /// Threads whose CPU time fell back to the switch intervals (no `sched_stat_runtime`).
    pub switch_interval_threads: u64,
    /// Up to five of them, as `comm (tid)` (`tid N` when the name is unknown).
    pub switch_interval_examples: Vec<String>,
    /// One sentence: whether the accounts agree, and why not when they don't.
    pub explanation: String,
}

/// The accounts of a traced recording; `None` for a reduced recording (no switch intervals).
pub fn cpu_time_accounts(summary: &SchedSummary) -> Option<CpuTimeAccounts> {
    if summary.cpus.is_empty() {
        return None;
    }
    let threads = summary.threads.iter().filter(|t| t.tid != IDLE_TID);
    let (mut cpu_ns, mut on_cpu_ns) = (0u64, 0u64);
    let mut fallback = Vec::new();
    let mut any_runtime = false;
    for t in threads {
        cpu_ns += t.cpu_time_ns;
        on_cpu_ns += t.on_cpu_ns;
        if t.cpu_time_source == CpuTimeSource::SwitchIntervals && t.on_cpu_ns > 0 {
            fallback.push(match &t.comm {
                Some(comm) => format!("{comm} ({})", t.tid),
                None => format!("tid {}", t.tid),
            });
        }
        any_runtime |= t.cpu_time_source == CpuTimeSource::SchedRuntime && t.cpu_time_ns > 0;
    }
    let busy_ns: u64 = summary.cpus.iter().map(|c| c.busy_ns).sum();
    let (cpu_time_s, on_cpu_s, busy_s) = (secs(cpu_ns), secs(on_cpu_ns), secs(busy_ns));
    let difference_s = cpu_time_s - busy_s;
    let agree = difference_s.abs() <= (busy_s * AGREE_REL).max(AGREE_ABS_S);
    let mut explanation = if agree {
        format!(
            "the threads' CPU time (the scheduler's account) adds up to the CPUs' busy time (the switch intervals): {} s against {} s",
            round_ms(cpu_time_s),
            round_ms(busy_s)
        )
    } else {
        format!(
            "the threads' CPU time (the scheduler's account, Σ sched_stat_runtime) is {} s, the CPUs' busy time (the switch intervals) {} s: {} s {}: the two accounts read different clocks (the scheduler charges from its run-queue clock, which may be read before a woken thread's switch-in and leaves out interrupt and steal time where the kernel accounts them apart; the switch intervals run from one sched_switch time stamp to the next)",
            round_ms(cpu_time_s),
            round_ms(busy_s),
            round_ms(difference_s.abs()),
            if difference_s > 0.0 { "more" } else { "less" },
        )
    };
    if !any_runtime && !fallback.is_empty() {
        explanation.push_str(
            "; the recording has no sched_stat_runtime at all (recorded by an older powerlens, or a kernel without the tracepoint), so every thread's CPU time is its switch intervals",
        );
    } else if !fallback.is_empty() {
        explanation.push_str(&format!(
            "; {} thread{} had no sched_stat_runtime and count{} by the switch intervals ({}{})",
            fallback.len(),
            if fallback.len() == 1 { "" } else { "s" },
            if fallback.len() == 1 { "s" } else { "" },
            fallback[..fallback.len().min(EXAMPLES)].join(", "),
            if fallback.len() > EXAMPLES {
                ", …"
            } else {
                ""
            },
        ));
    }
    Some(CpuTimeAccounts {
        cpu_time_s,
        on_cpu_s,
        busy_s,
        difference_s,
        switch_interval_threads: fallback.len() as u64,
        switch_interval_examples: fallback.into_iter().take(EXAMPLES).collect(),
        explanation,
    })
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// Milliseconds are what the accounts can be trusted to; more digits would be dust.
fn round_ms(s: f64) -> String {
    format!("{:.3}", s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::analysis::{CpuStats, ThreadStats};

    fn summary(threads: Vec<ThreadStats>, busy_ns: u64) -> SchedSummary {
        SchedSummary {
            start_ns: 0,
            end_ns: 2_000_000_000,
            threads,
            cpus: vec![CpuStats {
                busy_ns,
                ..CpuStats::default()
            }],
            processes: Vec::new(),
        }
    }

    fn thread(tid: u32, cpu_ns: u64, on_cpu_ns: u64, source: CpuTimeSource) -> ThreadStats {
        ThreadStats {
            tid,
            comm: Some(format!("t{tid}")),
            cpu_time_ns: cpu_ns,
            on_cpu_ns,
            cpu_time_source: source,
            ..ThreadStats::default()
        }
    }

    #[test]
    fn a_split_that_differs_per_thread_still_adds_up() {
        use CpuTimeSource::SchedRuntime;
        // The VM case: 0.5 s / 0.88 s by the scheduler, 0.23 s / 1.15 s by the switches.
        let s = summary(
            vec![
                thread(1, 500_000_000, 230_000_000, SchedRuntime),
                thread(2, 880_000_000, 1_150_000_000, SchedRuntime),
            ],
            1_380_000_000,
        );
        let a = cpu_time_accounts(&s).unwrap();
        assert!((a.cpu_time_s - 1.38).abs() < 1e-9 && (a.on_cpu_s - 1.38).abs() < 1e-9);
        assert!(a.difference_s.abs() < 1e-9);
        assert!(a.explanation.starts_with("the threads' CPU time"));
        assert!(a.explanation.contains("adds up to"), "{}", a.explanation);
    }

    #[test]
    fn a_difference_is_stated_with_its_size_and_the_fallback_threads_named() {
        use CpuTimeSource::*;
        let s = summary(
            vec![
                thread(1, 900_000_000, 1_000_000_000, SchedRuntime),
                thread(7, 40_000_000, 40_000_000, SwitchIntervals),
                // Never ran: not a fallback worth naming.
                thread(8, 0, 0, SwitchIntervals),
            ],
            1_040_000_000,
        );
        let a = cpu_time_accounts(&s).unwrap();
        assert!((a.difference_s + 0.1).abs() < 1e-9, "{}", a.difference_s);
        assert!(
            a.explanation.contains("0.940 s")
                && a.explanation.contains("1.040 s")
                && a.explanation.contains("0.100 s less"),
            "{}",
            a.explanation
        );
        assert_eq!(a.switch_interval_threads, 1);
        assert_eq!(a.switch_interval_examples, ["t7 (7)"]);
        assert!(
            a.explanation.contains(
                "1 thread had no sched_stat_runtime and counts by the switch intervals (t7 (7))"
            ),
            "{}",
            a.explanation
        );
    }

    #[test]
    fn a_recording_without_any_runtime_says_so_once() {
        use CpuTimeSource::SwitchIntervals;
        let mut nameless = thread(3, 10_000_000, 10_000_000, SwitchIntervals);
        nameless.comm = None;
        let s = summary(
            vec![thread(2, 20_000_000, 20_000_000, SwitchIntervals), nameless],
            30_000_000,
        );
        let a = cpu_time_accounts(&s).unwrap();
        assert!(a.explanation.contains("adds up to"), "{}", a.explanation);
        assert!(
            a.explanation
                .contains("the recording has no sched_stat_runtime at all"),
            "{}",
            a.explanation
        );
        assert_eq!(a.switch_interval_examples, ["t2 (2)", "tid 3"]);
    }

    #[test]
    fn a_reduced_recording_has_no_switch_intervals_to_compare() {
        let mut s = summary(vec![thread(1, 5, 0, CpuTimeSource::Procfs)], 0);
        s.cpus.clear();
        assert_eq!(cpu_time_accounts(&s), None);
    }
}
