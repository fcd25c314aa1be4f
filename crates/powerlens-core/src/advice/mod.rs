//! Advice: rules that fire on evidence in a recording's report and suggest a concrete
//! change, each citing its numbers and the function (or thread) that triggered it. Idle
//! rules are judged against a set of cpuidle states: this machine's, or a target
//! machine's (`report --target`), because the machine you profile on is often not the one
//! you deploy on, and a VM's haltpoll state (1 µs target residency) hides the problem.
//!
//! Every threshold is a named constant below and documented in docs/ADVICE.md; a rule
//! stays silent when its evidence is missing or below threshold, so a quiet or healthy
//! run gets no advice.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::sched::event::Tid;
use crate::sched::report::{IdleStateInfo, RecordingReport, ThreadRow};
use crate::sched::wakeups::{describe, WakeupCause};
use crate::stacks::locks::{LockWait, RUNTIMES};

pub mod model;
pub use model::Advice;

/// short-sleeps: a thread must sleep at least this often (per second) to matter.
pub const SHORT_SLEEPS_MIN_PER_S: f64 = 50.0;
/// preemption: preemptions per second of a process, at least.
pub const PREEMPTION_MIN_PER_S: f64 = 20.0;
/// preemption / frequency-drop: a thread is busy when its CPU time is at least this share
/// of the recording.
pub const BUSY_SHARE: f64 = 0.10;
/// imbalance: max / mean CPU time of a process's working threads, at least.
pub const IMBALANCE_MIN: f64 = 1.5;
/// imbalance: a thread works when its CPU time is at least this share of the busiest's
/// (a launcher thread that only spawns and joins is not part of the balance).
pub const WORKER_SHARE: f64 = 0.05;
/// imbalance / polling: CPU seconds below which nothing is worth saying.
pub const MIN_CPU_S: f64 = 0.05;
/// frequency-drop: a compute-bound thread (CPU time ≥ this share of the recording)…
pub const COMPUTE_BOUND_SHARE: f64 = 0.5;
/// …ran below this fraction of the highest frequency seen.
pub const FREQUENCY_DROP_RATIO: f64 = 0.9;
/// polling: a busy-wait function's share of the target's CPU time, at least.
pub const POLLING_MIN_SHARE: f64 = 0.10;
/// Function names that busy-wait (substrings, lower case).
pub const POLLING_PATTERNS: &[&str] = &[
    "spin_loop",
    "spin_lock",
    "spinlock",
    "spin_wait",
    "busy_wait",
    "cpu_relax",
    "sched_yield",
    "pause",
    "poll",
];
/// interpreter-lock: a thread is bound by a runtime's global lock when its waits for the
/// lock are at least this share of its wait time (they dominate it)…
pub const LOCK_MIN_WAIT_SHARE: f64 = 0.5;
/// …and at least this share of its time in the recording (running, runnable or blocked):
/// a thread that runs native code releasing the lock and rarely contends for it is not.
pub const LOCK_MIN_TIME_SHARE: f64 = 0.25;
/// interpreter-lock: lock-bound threads of one process, at least (one thread has no one
/// to take turns with).
pub const LOCK_MIN_THREADS: usize = 2;
/// Advice per rule at most (the worst first).
pub const MAX_PER_RULE: usize = 3;

/// Per-function evidence (from the per-function grid, when the recording has stacks).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionEvidence {
    pub function: String,
    pub module: String,
    pub tid: Tid,
    pub cpu_time_s: f64,
    pub sync_switches: u64,
    pub preempt_switches: u64,
    pub idle_wakeups: u64,
}

/// The idle states the idle rules are judged against, and where they come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgedStates {
    /// e.g. `this machine` or `target server (intel_idle skx_cstates)`.
    pub source: String,
    pub states: Vec<IdleStateInfo>,
}

impl JudgedStates {
    /// The state with the longest target residency (the deepest worth reaching).
    pub fn deepest(&self) -> Option<&IdleStateInfo> {
        self.states
            .iter()
            .max_by_key(|s| (s.target_residency_us, s.index))
    }

    /// This machine's states, as the report lists them.
    pub fn this_machine(report: &RecordingReport) -> Option<JudgedStates> {
        let states: Vec<IdleStateInfo> = report
            .system
            .idle_states
            .iter()
            .map(|s| IdleStateInfo {
                index: s.index,
                name: s.name.clone(),
                latency_us: s.latency_us,
                target_residency_us: s.target_residency_us,
            })
            .collect();
        (!states.is_empty()).then(|| JudgedStates {
            source: "this machine".into(),
            states,
        })
    }
}

/// Everything the rules look at.
pub struct AdviceInput<'a> {
    /// The report: system figures, target thread rows, balance, wake-up causes.
    pub report: &'a RecordingReport,
    /// Per-function rows, when the recording has stacks; rules cite thread names without.
    pub functions: &'a [FunctionEvidence],
    /// `None` when neither this machine nor a target declares idle states.
    pub states: Option<JudgedStates>,
    /// The highest frequency the CPUs can run at (cpufreq `cpuinfo_max_freq`), when
    /// known; else the highest mean frequency of the recording's threads is the reference.
    pub max_frequency_mhz: Option<f64>,
    /// Threads' waits for an interpreter's global lock (`stacks::locks`), when the
    /// recording has stacks.
    pub lock_waits: &'a [LockWait],
}

impl AdviceInput<'_> {
    fn elapsed_s(&self) -> f64 {
        self.report.system.elapsed_s
    }

    /// The function of `tid` with the most of `key`, else the timer callback or stack
    /// function of a wake-up cause of `tid`, else the thread's name.
    fn culprit(&self, t: &ThreadRow, key: fn(&FunctionEvidence) -> f64) -> String {
        if let Some(f) = self
            .functions
            .iter()
            .filter(|f| f.tid == t.tid && key(f) > 0.0)
            .max_by(|a, b| key(a).total_cmp(&key(b)))
        {
            return format!("{} ({})", f.function, f.module);
        }
        if let Some(f) = self
            .report
            .wakeup_causes
            .iter()
            .filter(|c| c.tid() == Some(t.tid))
            .find_map(|c| c.function.clone())
        {
            return f;
        }
        format!("thread {} (tid {})", t.comm, t.tid)
    }
}

/// `", in FUNCTION"` when the culprit is a function, nothing when it is the thread itself
/// (already named in the sentence).
fn in_function(who: &str) -> String {
    if who.starts_with("thread ") {
        String::new()
    } else {
        format!(", in {who}")
    }
}

/// Runs every rule.
pub fn advise(input: &AdviceInput) -> Vec<Advice> {
    let mut out = Vec::new();
    for rule in [
        short_sleeps,
        preemption,
        interpreter_lock,
        imbalance,
        frequency_drop,
        polling,
        timer_coalescing,
    ] {
        let mut a = rule(input);
        a.truncate(MAX_PER_RULE);
        out.extend(a);
    }
    out
}

fn us(v: f64) -> String {
    if v >= 1000.0 {
        format!("{:.1} ms", v / 1000.0)
    } else {
        format!("{v:.0} µs")
    }
}

/// short-sleeps: a target thread that sleeps often (≥ [`SHORT_SLEEPS_MIN_PER_S`]) for less
/// on average (its blocked time per synchronization switch) than the deepest judged
/// state's target residency. The thread's own sleeps are the evidence, not the CPU's idle
/// periods: on a busy profiling machine another process fills the CPU while it sleeps,
/// on the deployment machine the CPU idles for exactly that long.
fn short_sleeps(input: &AdviceInput) -> Vec<Advice> {
    let Some(states) = &input.states else {
        return Vec::new();
    };
    let Some(deep) = states.deepest() else {
        return Vec::new();
    };
    let residency = deep.target_residency_us as f64;
    let elapsed = input.elapsed_s();
    let mut hits: Vec<(f64, Advice)> = Vec::new();
    for t in &input.report.threads {
        let (Some(wait), n) = (t.metrics.wait_time_s, t.metrics.sync_switches) else {
            continue;
        };
        if n == 0 || elapsed <= 0.0 {
            continue;
        }
        let per_s = n as f64 / elapsed;
        let mean_us = wait * 1e6 / n as f64;
        if per_s < SHORT_SLEEPS_MIN_PER_S || mean_us >= residency {
            continue;
        }
        let who = input.culprit(t, |f| f.sync_switches as f64);
        let idle = t
            .metrics
            .mean_idle_before_wakeup_us
            .map(|m| {
                format!(
                    "; the CPU idled {} before each of its {} idle wake-ups",
                    us(m),
                    t.metrics.idle_wakeups.unwrap_or(0)
                )
            })
            .unwrap_or_default();
        let batch = (residency / mean_us.max(1.0)).ceil().max(2.0);
        hits.push((
            per_s,
            Advice {
                rule: "short-sleeps".into(),
                evidence: format!(
                    "{} (tid {}) slept {n} times ({per_s:.0}/s) for {} on average{}{idle}; {} needs {} ({})",
                    t.comm,
                    t.tid,
                    us(mean_us),
                    in_function(&who),
                    deep.name,
                    us(residency),
                    states.source
                ),
                suggestion: format!(
                    "sleeps of {} keep the CPU out of {}; sleep ≥ {} or batch the work of {batch:.0} wake-ups into one",
                    us(mean_us),
                    deep.name,
                    us(residency)
                ),
                function: Some(who),
                tid: Some(t.tid),
                value: Some(mean_us),
                threshold: Some(residency),
            },
        ));
    }
    hits.sort_by(|a, b| b.0.total_cmp(&a.0));
    hits.into_iter().map(|(_, a)| a).collect()
}

/// Threads of a process whose CPU time is at least [`BUSY_SHARE`] of the recording.
fn busy_threads<'a>(input: &'a AdviceInput, pid: Option<u32>) -> Vec<&'a ThreadRow> {
    let elapsed = input.elapsed_s();
    input
        .report
        .threads
        .iter()
        .filter(|t| t.pid == pid && t.cpu_time_s >= BUSY_SHARE * elapsed)
        .collect()
}

/// preemption: a process whose own threads outnumber the CPUs — more busy threads (CPU
/// time ≥ [`BUSY_SHARE`] of the recording) than CPUs — and whose switches are mostly
/// preemptions (more preemptions than synchronization switches, at least
/// [`PREEMPTION_MIN_PER_S`]). Preemption by other processes says nothing about the
/// program and does not fire.
fn preemption(input: &AdviceInput) -> Vec<Advice> {
    let cpus = input.report.system.cpus;
    let elapsed = input.elapsed_s();
    let mut out = Vec::new();
    for p in &input.report.processes {
        let busy = busy_threads(input, p.pid);
        let per_s = p.metrics.preempt_switches as f64 / elapsed.max(1e-9);
        if busy.len() <= cpus as usize
            || p.metrics.preempt_switches <= p.metrics.sync_switches
            || per_s < PREEMPTION_MIN_PER_S
        {
            continue;
        }
        let worst = busy
            .iter()
            .max_by_key(|t| t.metrics.preempt_switches)
            .expect("more busy threads than CPUs");
        let who = input.culprit(worst, |f| f.preempt_switches as f64);
        let inactive = p
            .metrics
            .inactive_time_s
            .map(|s| format!(", {s:.2} s runnable but not running"))
            .unwrap_or_default();
        out.push(Advice {
            rule: "preemption".into(),
            evidence: format!(
                "{} (pid {}) ran {} busy threads on {cpus} CPUs: {} preemptions ({per_s:.0}/s) vs {} synchronization switches{inactive}; most by {who}",
                p.comm,
                p.pid.map(|p| p.to_string()).unwrap_or_else(|| "?".into()),
                busy.len(),
                p.metrics.preempt_switches,
                p.metrics.sync_switches
            ),
            suggestion: format!(
                "run at most {cpus} compute threads (one per CPU): the extra threads only take turns, paying context switches and cache refills"
            ),
            function: Some(who),
            tid: Some(worst.tid),
            value: Some(p.metrics.preempt_switches as f64),
            threshold: Some(p.metrics.sync_switches as f64),
        });
    }
    out
}

/// imbalance: in a multi-threaded process, max / mean CPU time of its working threads
/// (each ≥ [`WORKER_SHARE`] of the busiest) is at least [`IMBALANCE_MIN`], the busiest
/// having at least [`MIN_CPU_S`].
fn imbalance(input: &AdviceInput) -> Vec<Advice> {
    // Threads that take turns on an interpreter lock run one at a time however the work
    // is split: `interpreter-lock` says so instead.
    let lock_bound: BTreeSet<u32> = lock_bound_threads(input).into_keys().collect();
    let mut out = Vec::new();
    for b in &input.report.balance {
        if lock_bound.contains(&b.pid) {
            continue;
        }
        let workers: Vec<_> = b
            .threads
            .iter()
            .filter(|t| t.busy_s >= WORKER_SHARE * b.max_busy_s)
            .collect();
        if workers.len() < 2 || b.max_busy_s < MIN_CPU_S {
            continue;
        }
        let total: f64 = workers.iter().map(|t| t.busy_s).sum();
        let mean = total / workers.len() as f64;
        let ratio = b.max_busy_s / mean;
        if ratio < IMBALANCE_MIN {
            continue;
        }
        let heavy = workers
            .iter()
            .max_by(|a, b| a.busy_s.total_cmp(&b.busy_s))
            .expect("two workers");
        let who = input
            .report
            .threads
            .iter()
            .find(|t| t.tid == heavy.tid)
            .map(|t| input.culprit(t, |f| f.cpu_time_s))
            .unwrap_or_else(|| format!("thread {} (tid {})", heavy.comm, heavy.tid));
        let parallel = b
            .effective_parallelism
            .map(|p| format!(", effective parallelism {p:.2}"))
            .unwrap_or_default();
        out.push(Advice {
            rule: "imbalance".into(),
            evidence: format!(
                "{} (tid {}) carried {:.0}% of the CPU time of {} working threads of {} (pid {}): {:.3} s vs a mean of {:.3} s (max/mean {ratio:.2}){parallel}{}",
                heavy.comm,
                heavy.tid,
                heavy.busy_s / total * 100.0,
                workers.len(),
                b.comm,
                b.pid,
                heavy.busy_s,
                mean,
                in_function(&who)
            ),
            suggestion: format!(
                "split {}'s work so that the {} threads share it (the run lasts as long as the busiest thread), or run the light work on fewer threads and let the other CPUs idle",
                heavy.comm,
                workers.len()
            ),
            function: Some(who),
            tid: Some(heavy.tid),
            value: Some(ratio),
            threshold: Some(IMBALANCE_MIN),
        });
    }
    out
}

/// Per process, its threads whose blocking is mostly waits for a runtime's global lock
/// (at least [`LOCK_MIN_WAIT_SHARE`] of the thread's wait time), each with whether it is
/// bound by it (the waits are also [`LOCK_MIN_TIME_SHARE`] of its time in the recording).
/// Only processes with [`LOCK_MIN_THREADS`] bound threads or more.
#[allow(clippy::type_complexity)]
fn lock_bound_threads<'a>(
    input: &'a AdviceInput,
) -> BTreeMap<u32, Vec<(&'a ThreadRow, &'a LockWait, bool)>> {
    let mut by_pid: BTreeMap<u32, Vec<(&ThreadRow, &LockWait, bool)>> = BTreeMap::new();
    for w in input.lock_waits {
        let Some(t) = input.report.threads.iter().find(|t| t.tid == w.tid) else {
            continue;
        };
        let (Some(pid), Some(wait)) = (t.pid, t.metrics.wait_time_s) else {
            continue;
        };
        if wait <= 0.0 || w.wait_s < LOCK_MIN_WAIT_SHARE * wait {
            continue;
        }
        let time = t.cpu_time_s + wait + t.metrics.inactive_time_s.unwrap_or(0.0);
        let bound = w.wait_s >= LOCK_MIN_TIME_SHARE * time;
        by_pid.entry(pid).or_default().push((t, w, bound));
    }
    by_pid.retain(|_, threads| threads.iter().filter(|t| t.2).count() >= LOCK_MIN_THREADS);
    by_pid
}

/// interpreter-lock: the threads of a process take turns on a runtime's global lock
/// (CPython's GIL, Ruby's GVL): [`LOCK_MIN_THREADS`] or more threads whose blocking is
/// mostly waits for the lock ([`lock_bound_threads`]), together at least [`MIN_CPU_S`].
/// More threads, or the work split differently, cannot make such a program faster.
fn interpreter_lock(input: &AdviceInput) -> Vec<Advice> {
    let mut hits: Vec<(f64, Advice)> = Vec::new();
    for (pid, threads) in lock_bound_threads(input) {
        let lock_s: f64 = threads.iter().map(|(_, w, _)| w.wait_s).sum();
        if lock_s < MIN_CPU_S {
            continue;
        }
        let wait_s: f64 = threads
            .iter()
            .filter_map(|(t, ..)| t.metrics.wait_time_s)
            .sum();
        let cpu_s: f64 = threads.iter().map(|(t, ..)| t.cpu_time_s).sum();
        let switches: u64 = threads.iter().map(|(_, w, _)| w.sync_switches).sum();
        let (worst, w, _) = threads
            .iter()
            .max_by(|a, b| a.1.wait_s.total_cmp(&b.1.wait_s))
            .expect("at least two threads");
        let runtime = RUNTIMES
            .iter()
            .find(|r| r.runtime == w.runtime)
            .expect("a runtime of the table");
        let parallel = input
            .report
            .balance
            .iter()
            .find(|b| b.pid == pid)
            .and_then(|b| b.effective_parallelism)
            .map(|p| {
                format!(
                    "; the process's effective parallelism was {p:.2} (1: one thread at a time)"
                )
            })
            .unwrap_or_default();
        let unnamed = if w.inferred {
            let module = w.function.split(" [").next().unwrap_or(&w.function);
            format!(
                "; {module} keeps no symbol for {}: its waits are recognised as {}'s own unnamed code waiting on a condition variable",
                runtime.functions[0], w.runtime
            )
        } else {
            String::new()
        };
        hits.push((
            lock_s,
            Advice {
                rule: "interpreter-lock".into(),
                evidence: format!(
                    "{} threads of {} (pid {pid}) waited {lock_s:.2} s for {}'s {} ({switches} waits, most in {}), {:.0}% of their wait time, against {cpu_s:.2} s of CPU{parallel}{unnamed}",
                    threads.len(),
                    worst.comm,
                    w.runtime,
                    runtime.lock,
                    w.function,
                    lock_s / wait_s.max(1e-12) * 100.0,
                ),
                suggestion: format!(
                    "the threads serialize on the interpreter lock: only one of them runs interpreted code at a time, so neither more threads nor another division of the work will make it faster; {}",
                    runtime.suggestion
                ),
                function: Some(w.function.clone()),
                tid: Some(worst.tid),
                value: Some(lock_s / wait_s.max(1e-12)),
                threshold: Some(LOCK_MIN_WAIT_SHARE),
            },
        ));
    }
    hits.sort_by(|a, b| b.0.total_cmp(&a.0));
    hits.into_iter().map(|(_, a)| a).collect()
}

/// frequency-drop: a compute-bound target thread (CPU time ≥ [`COMPUTE_BOUND_SHARE`] of
/// the recording) ran at a mean frequency below [`FREQUENCY_DROP_RATIO`] of the reference
/// (cpufreq's maximum when known, else the fastest thread's mean).
fn frequency_drop(input: &AdviceInput) -> Vec<Advice> {
    let elapsed = input.elapsed_s();
    let reference = input.max_frequency_mhz.or_else(|| {
        input
            .report
            .threads
            .iter()
            .filter_map(|t| t.metrics.frequency_mhz)
            .max_by(f64::total_cmp)
    });
    let Some(reference) = reference.filter(|r| *r > 0.0) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for t in &input.report.threads {
        let Some(mhz) = t.metrics.frequency_mhz else {
            continue;
        };
        if t.cpu_time_s < COMPUTE_BOUND_SHARE * elapsed || mhz >= FREQUENCY_DROP_RATIO * reference {
            continue;
        }
        let who = input.culprit(t, |f| f.cpu_time_s);
        out.push(Advice {
            rule: "frequency-drop".into(),
            evidence: format!(
                "{} (tid {}) was compute-bound ({:.2} s of CPU in {:.2} s) but ran at {mhz:.0} MHz, {:.0}% of {reference:.0} MHz{}",
                t.comm,
                t.tid,
                t.cpu_time_s,
                elapsed,
                mhz / reference * 100.0,
                in_function(&who)
            ),
            suggestion: "check what lowered the frequency: wide-vector (AVX) licenses (`powerlens dvfs`), the governor or EPP (`powerlens info`), or thermal and power limits; a performance governor or a balanced thread layout keeps compute-bound code at speed".into(),
            function: Some(who),
            tid: Some(t.tid),
            value: Some(mhz),
            threshold: Some(FREQUENCY_DROP_RATIO * reference),
        });
    }
    out
}

/// polling: a busy-wait function (a name matching [`POLLING_PATTERNS`]) holds at least
/// [`POLLING_MIN_SHARE`] of the target's CPU time and [`MIN_CPU_S`]. Needs per-function
/// evidence: from scheduler events alone a spinning thread looks like a computing one, so
/// without stacks the rule stays silent rather than guess.
fn polling(input: &AdviceInput) -> Vec<Advice> {
    let target_cpu: f64 = input.report.threads.iter().map(|t| t.cpu_time_s).sum();
    if target_cpu <= 0.0 {
        return Vec::new();
    }
    let mut hits: Vec<&FunctionEvidence> = input
        .functions
        .iter()
        .filter(|f| {
            let name = f.function.to_lowercase();
            POLLING_PATTERNS.iter().any(|p| name.contains(p))
                && f.cpu_time_s >= MIN_CPU_S
                && f.cpu_time_s >= POLLING_MIN_SHARE * target_cpu
        })
        .collect();
    hits.sort_by(|a, b| b.cpu_time_s.total_cmp(&a.cpu_time_s));
    hits.into_iter()
        .map(|f| {
            let comm = input
                .report
                .threads
                .iter()
                .find(|t| t.tid == f.tid)
                .map(|t| t.comm.as_str())
                .unwrap_or("?");
            Advice {
                rule: "polling".into(),
                evidence: format!(
                    "{} ({}) in {comm} (tid {}) busy-waited {:.2} s, {:.0}% of the target's CPU time, with {} synchronization switches",
                    f.function,
                    f.module,
                    f.tid,
                    f.cpu_time_s,
                    f.cpu_time_s / target_cpu * 100.0,
                    f.sync_switches
                ),
                suggestion: "block instead of spinning (a futex, condition variable, or epoll with a timeout), or spin briefly and then block: a spinning CPU never idles".into(),
                function: Some(format!("{} ({})", f.function, f.module)),
                tid: Some(f.tid),
                value: Some(f.cpu_time_s),
                threshold: Some(POLLING_MIN_SHARE * target_cpu),
            }
        })
        .collect()
}

/// timer-coalescing: a periodic timer group the wake-up analysis marked coalescible
/// (docs/REPORT.md: unaligned timers with compatible periods, or one faster than 10 ms),
/// armed by a target thread.
fn timer_coalescing(input: &AdviceInput) -> Vec<Advice> {
    let targets: Vec<Tid> = input.report.threads.iter().map(|t| t.tid).collect();
    let mut hits: Vec<&WakeupCause> = input
        .report
        .wakeup_causes
        .iter()
        .filter(|c| {
            c.coalescible == Some(true)
                && c.armed_by_tid
                    .is_some_and(|t| t != 0 && targets.contains(&t))
        })
        .collect();
    hits.sort_by(|a, b| {
        b.expiries_per_s
            .unwrap_or(0.0)
            .total_cmp(&a.expiries_per_s.unwrap_or(0.0))
    });
    hits.into_iter()
        .map(|c| {
            let period = c.period_us.unwrap_or(0.0);
            let who = describe(c);
            let comm = c.comm.clone().unwrap_or_else(|| "?".into());
            Advice {
                rule: "timer-coalescing".into(),
                evidence: format!(
                    "{who} ({comm}) expires every {} ({:.0}/s, periodic; {} idle exits); coalescible {}",
                    us(period),
                    c.expiries_per_s.unwrap_or(0.0),
                    c.count,
                    c.coalesce_with.as_deref().unwrap_or("?")
                ),
                suggestion: if period < crate::sched::wakeups::SHORT_PERIOD_US {
                    format!(
                        "lengthen the period (≥ 10 ms) or raise the thread's timer slack (prctl(PR_SET_TIMERSLACK), now ≥ {}) so the kernel can batch its expiries with others",
                        us(period / 2.0)
                    )
                } else {
                    "arm the timers on a common period (one a multiple of the other) and the same phase, or from one timer: one wake-up instead of two".into()
                },
                function: Some(c.function.clone().unwrap_or(who)),
                tid: c.armed_by_tid,
                value: Some(period),
                threshold: Some(crate::sched::wakeups::SHORT_PERIOD_US),
            }
        })
        .collect()
}

pub mod targets {
    //! Idle-state tables of target machines: built in by name, or from a JSON file.

    use crate::sched::report::IdleStateInfo;

    /// A built-in table: names it answers to, where its numbers come from, its states
    /// `(name, exit latency µs, target residency µs)`.
    pub struct Builtin {
        pub names: &'static [&'static str],
        pub source: &'static str,
        pub states: &'static [(&'static str, u64, u64)],
    }

    /// The built-in tables (Linux `drivers/idle/intel_idle.c`).
    pub const BUILTIN: &[Builtin] = &[
        Builtin {
            names: &["server", "skylake-server", "skx"],
            source: "Skylake-SP/Cascade Lake server, intel_idle skx_cstates",
            states: &[
                ("POLL", 0, 0),
                ("C1", 2, 2),
                ("C1E", 10, 20),
                ("C6", 133, 600),
            ],
        },
        Builtin {
            names: &["client", "skylake-client", "skl"],
            source: "Skylake client (desktop/laptop), intel_idle skl_cstates",
            states: &[
                ("POLL", 0, 0),
                ("C1", 2, 2),
                ("C1E", 10, 20),
                ("C3", 70, 100),
                ("C6", 85, 200),
                ("C7s", 124, 800),
                ("C8", 200, 800),
                ("C9", 480, 5000),
                ("C10", 890, 5000),
            ],
        },
    ];

    fn to_states(states: &[(&str, u64, u64)]) -> Vec<IdleStateInfo> {
        states
            .iter()
            .enumerate()
            .map(|(i, (name, latency, residency))| IdleStateInfo {
                index: i as u32,
                name: name.to_string(),
                latency_us: *latency,
                target_residency_us: *residency,
            })
            .collect()
    }

    /// A built-in table by name: `(description, states)`.
    pub fn builtin(name: &str) -> Option<(String, Vec<IdleStateInfo>)> {
        BUILTIN
            .iter()
            .find(|b| b.names.contains(&name))
            .map(|b| (format!("target {name} ({})", b.source), to_states(b.states)))
    }

    /// Every built-in name, for error messages and help.
    pub fn builtin_names() -> Vec<&'static str> {
        BUILTIN
            .iter()
            .flat_map(|b| b.names.iter().copied())
            .collect()
    }

    /// The states of a target file: `{"states": [{"name", "latency_us",
    /// "target_residency_us"}, …]}`, or `powerlens info --json` output (its
    /// `cpuidle.states`). The error says what is wrong and how to fix it.
    pub fn parse(json: &str) -> Result<Vec<IdleStateInfo>, String> {
        const FIX: &str = "give {\"states\": [{\"name\": \"C6\", \"latency_us\": 133, \"target_residency_us\": 600}, …]} or the output of `powerlens info --json` on the target machine";
        let v: serde_json::Value =
            serde_json::from_str(json).map_err(|e| format!("not JSON ({e}); {FIX}"))?;
        let states = v
            .get("states")
            .or_else(|| v.get("cpuidle").and_then(|c| c.get("states")))
            .ok_or_else(|| format!("no \"states\" array (nor \"cpuidle.states\"); {FIX}"))?
            .as_array()
            .ok_or_else(|| format!("\"states\" is not an array; {FIX}"))?;
        if states.is_empty() {
            return Err(format!(
                "the \"states\" array is empty (a machine without cpuidle states, e.g. a VM whose driver is `none`); {FIX}"
            ));
        }
        states
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let field = |k: &str| {
                    s.get(k).and_then(|x| x.as_u64()).ok_or_else(|| {
                        format!("state {i} has no non-negative integer \"{k}\"; {FIX}")
                    })
                };
                Ok(IdleStateInfo {
                    index: i as u32,
                    name: s
                        .get("name")
                        .and_then(|n| n.as_str())
                        .ok_or_else(|| format!("state {i} has no \"name\" string; {FIX}"))?
                        .to_string(),
                    latency_us: field("latency_us")?,
                    target_residency_us: field("target_residency_us")?,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
