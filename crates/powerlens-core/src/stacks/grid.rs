//! The VTune-style grid per function or per call stack, built from the per-stack charges
//! of the target's threads, plus the two stack-shaped outputs: folded stacks (for
//! flame-graph tools) and a caller/callee tree.
//!
//! Energy follows CPU time: each thread's attributed energy (from the thread grid) is
//! split over the stacks of its cpu-clock samples, so in the exclusive views the rows sum
//! exactly to the target threads' energy. A thread with energy but no sample keeps it in an
//! `[unsampled]` row rather than losing it.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::attribution::{StackCharges, StackMetrics};
use super::{short, FunctionId, ResolvedStacks, NO_STACK};
use crate::sched::event::{StackId, Tid};
use crate::sched::report::ThreadRow;

/// How events are grouped into rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grouping {
    /// The innermost frame of the program's own code (the default, user-functions view).
    Function,
    /// Every function anywhere on the stack, once per stack (inclusive totals).
    FunctionInclusive,
    /// Each distinct call stack.
    Stack,
}

/// Time one idle state was entered after a row's threads blocked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdleStateAfter {
    pub name: String,
    pub time_s: f64,
}

/// One row of the function or stack grid. The metric keys are the thread rows' keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionRow {
    /// The symbol; `module+0xOFFSET` when unresolved; `[no stack]` for events recorded
    /// without one; `[unsampled]` for the energy of threads no sample caught.
    pub function: String,
    pub module: String,
    /// With `--by stack`: the frames, innermost first, as `function (module)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stack: Option<Vec<String>>,
    /// From cpu-clock samples: Σ sample periods.
    pub cpu_time_s: f64,
    /// Of `cpu_time_s`, the samples taken in user space and in the kernel (the row's
    /// system calls and page faults, [`super::modes`]); `None` for rows of samples
    /// without a stack.
    #[serde(default)]
    pub user_time_s: Option<f64>,
    #[serde(default)]
    pub system_time_s: Option<f64>,
    pub samples: u64,
    pub sync_switches: u64,
    pub preempt_switches: u64,
    pub wait_time_s: f64,
    pub inactive_time_s: f64,
    pub idle_wakeups: u64,
    pub mean_idle_before_wakeup_us: Option<f64>,
    /// Idle time of the CPU after a thread blocked here and left it idle.
    pub idle_after_s: f64,
    /// Of which, per `power:cpu_idle` state (empty when the trace has none).
    pub idle_states_after: Vec<IdleStateAfter>,
    pub wakeups_caused: u64,
    /// `None` when energy is unavailable (as for the thread rows).
    pub energy_j: Option<f64>,
}

/// The target's (thread, stack) charges; threads not in `threads` are left out.
pub(crate) fn target_charges<'a>(
    charges: &'a StackCharges,
    threads: &'a [ThreadRow],
) -> impl Iterator<Item = (&'a ThreadRow, StackId, &'a StackMetrics)> + 'a {
    let by_tid: HashMap<Tid, &ThreadRow> = threads.iter().map(|t| (t.tid, t)).collect();
    charges
        .by_thread_stack
        .iter()
        .filter_map(move |((tid, stack), m)| Some((*by_tid.get(tid)?, *stack, m)))
}

#[derive(Default)]
struct Acc {
    m: StackMetrics,
    /// Of `m.cpu_ns`, the samples in the kernel, and those whose mode is unknown.
    system_ns: u64,
    unknown_mode_ns: u64,
    energy_j: f64,
    idle_states: BTreeMap<u32, u64>,
}

/// Rows for `grouping`, unsorted. `state_name` names a cpuidle state index.
pub fn rows(
    charges: &StackCharges,
    threads: &[ThreadRow],
    stacks: &ResolvedStacks,
    grouping: Grouping,
    state_name: &dyn Fn(u32) -> String,
) -> Vec<FunctionRow> {
    // Each thread's sampled CPU time, to split its energy.
    let mut sampled: HashMap<Tid, u64> = HashMap::new();
    for (t, _, m) in target_charges(charges, threads) {
        *sampled.entry(t.tid).or_default() += m.cpu_ns;
    }
    let energy_known = threads.iter().all(|t| t.energy_j.is_some());
    // Row keys: a function id, a stack id, or a pseudo row.
    #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    enum Key {
        Function(FunctionId),
        Stack(StackId),
        NoStack,
        Unsampled,
    }
    let mut acc: HashMap<Key, Acc> = HashMap::new();
    let mut keys = Vec::new();
    // Stacks that resolve to the same functions (their frames differ only in offsets
    // inside them) are one row: as two, they looked like duplicates, in an order that
    // changed from run to run.
    let mut same_functions: HashMap<&[FunctionId], StackId> = HashMap::new();
    let mut states_after: HashMap<(Tid, StackId), Vec<(u32, u64)>> = HashMap::new();
    for ((tid, stack, state), ns) in &charges.idle_states_after {
        states_after
            .entry((*tid, *stack))
            .or_default()
            .push((*state, *ns));
    }
    for (t, stack, m) in target_charges(charges, threads) {
        keys.clear();
        if stack == NO_STACK || stacks.frames(stack).is_empty() {
            keys.push(Key::NoStack);
        } else {
            match grouping {
                Grouping::Function => keys.extend(stacks.innermost_user(stack).map(Key::Function)),
                Grouping::FunctionInclusive => {
                    for f in stacks.frames(stack) {
                        if !keys.contains(&Key::Function(*f)) {
                            keys.push(Key::Function(*f));
                        }
                    }
                }
                Grouping::Stack => {
                    let first = *same_functions.entry(stacks.frames(stack)).or_insert(stack);
                    keys.push(Key::Stack(first))
                }
            }
        }
        let energy = match (t.energy_j, sampled.get(&t.tid)) {
            (Some(e), Some(&s)) if s > 0 => e * m.cpu_ns as f64 / s as f64,
            _ => 0.0,
        };
        let kernel = super::modes::in_kernel(stacks, stack);
        for k in &keys {
            let a = acc.entry(*k).or_default();
            a.m.add(m);
            match kernel {
                Some(true) => a.system_ns += m.cpu_ns,
                Some(false) => {}
                None => a.unknown_mode_ns += m.cpu_ns,
            }
            a.energy_j += energy;
            for (state, ns) in states_after.get(&(t.tid, stack)).into_iter().flatten() {
                *a.idle_states.entry(*state).or_default() += ns;
            }
        }
    }
    for t in threads {
        if let (Some(e), 0) = (t.energy_j, sampled.get(&t.tid).copied().unwrap_or(0)) {
            if e > 0.0 {
                acc.entry(Key::Unsampled).or_default().energy_j += e;
            }
        }
    }
    let mut out: Vec<FunctionRow> = acc
        .into_iter()
        .map(|(k, a)| {
            let (function, module, stack) = match k {
                Key::Function(f) => {
                    let f = stacks.function(f);
                    (f.name.clone(), f.module.clone(), None)
                }
                Key::Stack(s) => {
                    let (name, module) = stacks
                        .innermost_user(s)
                        .map(|f| {
                            let f = stacks.function(f);
                            (f.name.clone(), f.module.clone())
                        })
                        .unwrap_or_default();
                    (name, module, Some(stacks.describe(s)))
                }
                Key::NoStack => ("[no stack]".into(), String::new(), None),
                Key::Unsampled => ("[unsampled]".into(), String::new(), None),
            };
            row(function, module, stack, &a, energy_known, state_name)
        })
        .collect();
    out.sort_by(|a, b| {
        b.cpu_time_s
            .total_cmp(&a.cpu_time_s)
            .then_with(|| a.function.cmp(&b.function))
            .then_with(|| a.module.cmp(&b.module))
            .then_with(|| a.stack.cmp(&b.stack))
    });
    out
}

fn row(
    function: String,
    module: String,
    stack: Option<Vec<String>>,
    a: &Acc,
    energy_known: bool,
    state_name: &dyn Fn(u32) -> String,
) -> FunctionRow {
    let m = &a.m;
    let s = |ns: u64| ns as f64 / 1e9;
    FunctionRow {
        function,
        module,
        stack,
        cpu_time_s: s(m.cpu_ns),
        user_time_s: (a.unknown_mode_ns == 0).then(|| s(m.cpu_ns - a.system_ns)),
        system_time_s: (a.unknown_mode_ns == 0).then(|| s(a.system_ns)),
        samples: m.samples,
        sync_switches: m.sync_switches,
        preempt_switches: m.preempt_switches,
        wait_time_s: s(m.wait_ns),
        inactive_time_s: s(m.inactive_ns),
        idle_wakeups: m.idle_wakeups,
        mean_idle_before_wakeup_us: (m.idle_wakeups > 0)
            .then(|| m.idle_before_wakeups_ns as f64 / m.idle_wakeups as f64 / 1e3),
        idle_after_s: s(m.idle_after_ns),
        idle_states_after: a
            .idle_states
            .iter()
            .map(|(state, ns)| IdleStateAfter {
                name: state_name(*state),
                time_s: s(*ns),
            })
            .collect(),
        wakeups_caused: m.wakeups_caused,
        energy_j: energy_known.then_some(a.energy_j),
    }
}

/// The target's charges per thread and function (the innermost user frame of each stack;
/// stacks without frames left out), for rules that cite a thread's function.
pub fn per_thread_functions(
    charges: &StackCharges,
    threads: &[ThreadRow],
    stacks: &ResolvedStacks,
) -> Vec<(Tid, FunctionId, StackMetrics)> {
    let mut acc: BTreeMap<(Tid, FunctionId), StackMetrics> = BTreeMap::new();
    for (t, stack, m) in target_charges(charges, threads) {
        if let Some(f) = stacks.innermost_user(stack) {
            acc.entry((t.tid, f)).or_default().add(m);
        }
    }
    acc.into_iter().map(|((tid, f), m)| (tid, f, m)).collect()
}

/// A metric of a stack as an integer for folded stacks and trees: µs for times, a count
/// for counts, µJ for energy.
pub fn metric_value(metric: &str, m: &StackMetrics, energy_j: f64) -> Option<u64> {
    Some(match metric {
        "cpu_time_s" => m.cpu_ns / 1_000,
        "samples" => m.samples,
        "sync_switches" => m.sync_switches,
        "preempt_switches" => m.preempt_switches,
        "wait_time_s" => m.wait_ns / 1_000,
        "inactive_time_s" => m.inactive_ns / 1_000,
        "idle_wakeups" => m.idle_wakeups,
        "idle_after_s" => m.idle_after_ns / 1_000,
        "wakeups_caused" => m.wakeups_caused,
        "energy_j" => (energy_j * 1e6).round() as u64,
        _ => return None,
    })
}

/// The unit of [`metric_value`] for `metric`, for headers: `µs`, `count` or `µJ`.
pub fn metric_unit(metric: &str) -> &'static str {
    match metric {
        "cpu_time_s" | "wait_time_s" | "inactive_time_s" | "idle_after_s" => "µs",
        "energy_j" => "µJ",
        _ => "count",
    }
}

/// The header of a tree's weight column: the metric in words and its unit (`CPU time
/// µs`), not its JSON key, whose `_s` says seconds where the figures are µs.
pub fn metric_header(metric: &str) -> String {
    let name = match metric {
        "cpu_time_s" => "CPU time",
        "wait_time_s" => "wait time",
        "inactive_time_s" => "inactive time",
        "idle_after_s" => "idle after",
        "energy_j" => "energy",
        "sync_switches" => "sync switches",
        "preempt_switches" => "preemptions",
        "idle_wakeups" => "idle wake-ups",
        "wakeups_caused" => "wake-ups caused",
        other => other,
    };
    match metric_unit(metric) {
        "count" => name.to_string(),
        unit => format!("{name} {unit}"),
    }
}

/// The metrics folded stacks and trees can weigh by.
pub const STACK_METRICS: [&str; 10] = [
    "cpu_time_s",
    "samples",
    "sync_switches",
    "preempt_switches",
    "wait_time_s",
    "inactive_time_s",
    "idle_wakeups",
    "idle_after_s",
    "wakeups_caused",
    "energy_j",
];

/// Each (thread, stack) weighed by `metric`, with the thread's name: the input of folded
/// stacks and trees. Zero weights are left out.
fn weighted<'a>(
    charges: &'a StackCharges,
    threads: &'a [ThreadRow],
    metric: &str,
) -> Vec<(&'a ThreadRow, StackId, u64)> {
    let mut sampled: HashMap<Tid, u64> = HashMap::new();
    for (t, _, m) in target_charges(charges, threads) {
        *sampled.entry(t.tid).or_default() += m.cpu_ns;
    }
    let mut out: Vec<_> = target_charges(charges, threads)
        .filter_map(|(t, stack, m)| {
            let energy = match (t.energy_j, sampled.get(&t.tid)) {
                (Some(e), Some(&s)) if s > 0 => e * m.cpu_ns as f64 / s as f64,
                _ => 0.0,
            };
            let v = metric_value(metric, m, energy)?;
            (v > 0).then_some((t, stack, v))
        })
        .collect();
    out.sort_by_key(|(t, s, _)| (t.tid, *s));
    out
}

/// Folded stacks (Brendan Gregg's format): one line per distinct stack, frames from the
/// outermost to the innermost separated by `;`, the thread's name first, then a space and
/// the weight in `metric`'s integer unit ([`metric_value`]).
pub fn folded(
    charges: &StackCharges,
    threads: &[ThreadRow],
    stacks: &ResolvedStacks,
    metric: &str,
) -> String {
    let mut lines: BTreeMap<String, u64> = BTreeMap::new();
    for (t, stack, v) in weighted(charges, threads, metric) {
        let mut line = t.comm.replace([';', ' '], "_");
        let frames = stacks.frames(stack);
        if frames.is_empty() {
            line.push_str(";[no stack]");
        }
        for f in frames.iter().rev() {
            line.push(';');
            line.push_str(&stacks.function(*f).name.replace([';', ' '], "_"));
        }
        *lines.entry(line).or_default() += v;
    }
    let mut out = String::new();
    for (line, v) in lines {
        out.push_str(&format!("{line} {v}\n"));
    }
    out
}

/// A caller/callee tree ([`tree`]), flattened in print order: each node under its parent,
/// heavier siblings first. The text view (`powerlens_report::stack_tree`) draws it.
#[derive(Debug, Clone, PartialEq)]
pub struct StackTree {
    /// What the weights are, with their unit (`cpu_time_s [µs]`).
    pub metric_label: String,
    pub lines: Vec<TreeLine>,
}

/// One node of a [`StackTree`].
#[derive(Debug, Clone, PartialEq)]
pub struct TreeLine {
    /// 0 for a thread (`comm (tid)`), 1 for its outermost frame, and so on.
    pub depth: usize,
    /// Inclusive weight as a share of the whole tree's.
    pub share_pct: f64,
    /// Inclusive weight, in the metric's unit.
    pub weight: u64,
    /// `comm (tid)`, `function (module)` or `[no stack]`.
    pub name: String,
}

/// A caller/callee tree: from the outermost frames down, each node with its inclusive
/// weight and share of the total; branches under `min_pct` of the total are cut.
pub fn tree(
    charges: &StackCharges,
    threads: &[ThreadRow],
    stacks: &ResolvedStacks,
    metric: &str,
    min_pct: f64,
) -> StackTree {
    #[derive(Default)]
    struct Node {
        weight: u64,
        children: BTreeMap<String, Node>,
    }
    let mut root = Node::default();
    for (t, stack, v) in weighted(charges, threads, metric) {
        root.weight += v;
        let mut node = root
            .children
            .entry(format!("{} ({})", t.comm, t.tid))
            .or_default();
        node.weight += v;
        let frames = stacks.frames(stack);
        let names: Vec<String> = if frames.is_empty() {
            vec!["[no stack]".to_string()]
        } else {
            frames
                .iter()
                .rev()
                .map(|f| {
                    let f = stacks.function(*f);
                    format!("{} ({})", f.name, short(&f.module))
                })
                .collect()
        };
        for name in names {
            node = node.children.entry(name).or_default();
            node.weight += v;
        }
    }
    fn flatten(node: &Node, total: u64, min_pct: f64, depth: usize, out: &mut Vec<TreeLine>) {
        let mut children: Vec<(&String, &Node)> = node.children.iter().collect();
        children.sort_by(|a, b| b.1.weight.cmp(&a.1.weight).then(a.0.cmp(b.0)));
        for (name, child) in children {
            let share_pct = child.weight as f64 / total.max(1) as f64 * 100.0;
            if share_pct < min_pct {
                continue;
            }
            out.push(TreeLine {
                depth,
                share_pct,
                weight: child.weight,
                name: name.clone(),
            });
            flatten(child, total, min_pct, depth + 1, out);
        }
    }
    let mut lines = Vec::new();
    flatten(&root, root.weight, min_pct, 0, &mut lines);
    StackTree {
        metric_label: metric_header(metric),
        lines,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sched::report::RowMetrics;
    use crate::stacks::FrameRef;

    fn thread(tid: Tid, energy_j: Option<f64>) -> ThreadRow {
        ThreadRow {
            tid,
            pid: Some(1),
            comm: format!("t{tid}"),
            cpu_time_s: 0.0,
            cpu_time_source: crate::sched::analysis::CpuTimeSource::SchedRuntime,
            metrics: RowMetrics {
                user_time_s: None,
                system_time_s: None,
                on_cpu_s: None,
                sync_switches: 0,
                preempt_switches: 0,
                wait_time_s: None,
                inactive_time_s: None,
                migrations: None,
                wakeups_received: None,
                wakeups_received_total: None,
                unrecorded_wakeups: None,
                inferred_switch_ins: None,
                wakeups_caused: None,
                idle_wakeups: None,
                idle_time_s: None,
                mean_idle_before_wakeup_us: None,
                frequency_mhz: None,
            },
            energy_j,
            tracing_cpu_s: None,
            tracing_energy_j: None,
        }
    }

    /// Stacks 0: main → spin; 1: main → sleeper → nanosleep (libc); 2: libc only.
    fn resolved() -> ResolvedStacks {
        let modules: HashMap<u32, String> = [
            (0, "/usr/lib/x86_64-linux-gnu/libc.so.6".to_string()),
            (1, "/tmp/t".to_string()),
        ]
        .into();
        let f = |module, offset| FrameRef { module, offset };
        let names: HashMap<(u32, u64), &str> = [
            ((1, 0x10), "spin"),
            ((1, 0x1f), "main"),
            ((1, 0x2f), "sleeper"),
            ((0, 0x40), "nanosleep"),
        ]
        .into();
        ResolvedStacks::resolve(
            &[
                (0, vec![f(1, 0x10), f(1, 0x20)]),
                (1, vec![f(0, 0x40), f(1, 0x30), f(1, 0x20)]),
                (2, vec![f(0, 0x40)]),
            ],
            &modules,
            &|fr: FrameRef| names.get(&(fr.module, fr.offset)).map(|s| s.to_string()),
            crate::stacks::FunctionScope::default(),
        )
    }

    fn charges() -> StackCharges {
        let mut c = StackCharges::default();
        let m = |cpu_ns, sync, wait_ns| StackMetrics {
            cpu_ns,
            samples: cpu_ns / 1_000_000,
            sync_switches: sync,
            wait_ns,
            ..StackMetrics::default()
        };
        c.by_thread_stack.insert((1, 0), m(3_000_000, 0, 0));
        c.by_thread_stack
            .insert((1, 1), m(1_000_000, 5, 40_000_000));
        c.by_thread_stack.insert((2, 2), m(0, 2, 1_000));
        c.by_thread_stack.insert((2, NO_STACK), m(0, 1, 0));
        // A thread outside the target: left out.
        c.by_thread_stack.insert((9, 0), m(7_000_000, 0, 0));
        c
    }

    #[test]
    fn exclusive_rows_split_energy_by_samples_and_sum_to_the_threads() {
        let threads = [thread(1, Some(8.0)), thread(2, Some(0.5))];
        let r = rows(
            &charges(),
            &threads,
            &resolved(),
            Grouping::Function,
            &|i| format!("C{i}"),
        );
        let get = |name: &str| r.iter().find(|r| r.function == name).unwrap();
        assert_eq!(get("spin").cpu_time_s, 0.003);
        assert_eq!(get("spin").energy_j, Some(6.0), "3 of thread 1's 4 ms");
        assert_eq!(get("sleeper").sync_switches, 5);
        assert_eq!(get("sleeper").wait_time_s, 0.04);
        assert_eq!(get("sleeper").energy_j, Some(2.0));
        // Thread 2's only stack is libc's: the innermost frame, for lack of user code.
        assert_eq!(get("nanosleep").sync_switches, 2);
        assert_eq!(get("[no stack]").sync_switches, 1);
        assert_eq!(get("[unsampled]").energy_j, Some(0.5));
        let total: f64 = r.iter().filter_map(|r| r.energy_j).sum();
        assert!((total - 8.5).abs() < 1e-12, "{total}");
        assert!(
            r.iter().all(|r| r.function != "main"),
            "main is never innermost"
        );
    }

    #[test]
    fn inclusive_rows_count_every_function_on_the_stack() {
        let threads = [thread(1, None), thread(2, None)];
        let r = rows(
            &charges(),
            &threads,
            &resolved(),
            Grouping::FunctionInclusive,
            &|i| format!("C{i}"),
        );
        let main = r.iter().find(|r| r.function == "main").unwrap();
        assert_eq!(main.cpu_time_s, 0.004);
        assert_eq!(main.sync_switches, 5);
        assert_eq!(main.energy_j, None);
        let nanosleep = r.iter().find(|r| r.function == "nanosleep").unwrap();
        assert_eq!(nanosleep.sync_switches, 7);
    }

    #[test]
    fn stack_rows_carry_their_frames() {
        let threads = [thread(1, Some(1.0))];
        let r = rows(&charges(), &threads, &resolved(), Grouping::Stack, &|i| {
            format!("C{i}")
        });
        let sleeper = r.iter().find(|r| r.function == "sleeper").unwrap();
        assert_eq!(
            sleeper.stack.as_deref().unwrap(),
            ["nanosleep (libc.so.6)", "sleeper (t)", "main (t)"]
        );
    }

    /// Two recorded stacks through the same functions at other offsets (another line of
    /// `sleeper`, another return address in `main`): one row, with both stacks' figures.
    #[test]
    fn stacks_through_the_same_functions_are_one_row() {
        let modules: HashMap<u32, String> = [(1, "/tmp/t".to_string())].into();
        let f = |offset| FrameRef { module: 1, offset };
        let names: HashMap<u64, &str> = [
            (0x30, "sleeper"),
            (0x34, "sleeper"),
            (0x1f, "main"),
            (0x23, "main"),
        ]
        .into();
        let stacks = ResolvedStacks::resolve(
            &[(0, vec![f(0x30), f(0x20)]), (1, vec![f(0x34), f(0x24)])],
            &modules,
            &|fr: FrameRef| names.get(&fr.offset).map(|s| s.to_string()),
            crate::stacks::FunctionScope::default(),
        );
        let mut c = StackCharges::default();
        for (stack, sync) in [(0, 3), (1, 4)] {
            let m = StackMetrics {
                sync_switches: sync,
                ..StackMetrics::default()
            };
            c.by_thread_stack.insert((1, stack), m);
        }
        let r = rows(&c, &[thread(1, None)], &stacks, Grouping::Stack, &|i| {
            format!("C{i}")
        });
        assert_eq!(r.len(), 1, "{r:#?}");
        assert_eq!(r[0].sync_switches, 7);
        assert_eq!(r[0].stack.as_deref().unwrap(), ["sleeper (t)", "main (t)"]);
    }

    #[test]
    fn folded_and_tree() {
        let threads = [thread(1, Some(1.0)), thread(2, Some(1.0))];
        let f = folded(&charges(), &threads, &resolved(), "sync_switches");
        assert_eq!(
            f,
            "t1;main;sleeper;nanosleep 5\nt2;[no stack] 1\nt2;nanosleep 2\n"
        );
        assert_eq!(
            folded(&charges(), &threads, &resolved(), "cpu_time_s"),
            "t1;main;sleeper;nanosleep 1000\nt1;main;spin 3000\n"
        );
        let t = tree(&charges(), &threads, &resolved(), "cpu_time_s", 0.0);
        // Issue 17 point 2: the weights say what they are (the text view's header).
        assert_eq!(t.metric_label, "CPU time µs");
        let node = |i: usize| {
            let l: &TreeLine = &t.lines[i];
            (l.depth, l.name.as_str(), l.share_pct, l.weight)
        };
        assert_eq!(t.lines.len(), 5, "{t:#?}");
        assert_eq!(node(0), (0, "t1 (1)", 100.0, 4000));
        assert_eq!(node(1), (1, "main (t)", 100.0, 4000));
        assert_eq!(node(2), (2, "spin (t)", 75.0, 3000));
        assert_eq!(node(3), (2, "sleeper (t)", 25.0, 1000));
        // Cut below 30%: sleeper (25%) and below go.
        let cut = tree(&charges(), &threads, &resolved(), "cpu_time_s", 30.0);
        assert_eq!(cut.lines.len(), 3, "{cut:#?}");
        let energy = tree(&charges(), &threads, &resolved(), "energy_j", 0.0);
        assert_eq!(energy.metric_label, "energy µJ");
    }
}
