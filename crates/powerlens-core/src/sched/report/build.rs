//! Building the report model from a scheduler summary and the recording's context: each
//! figure computed, or unavailable with its reason.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::model::{
    BalanceThread, CpuReport, DomainEnergy, EnergyReport, IdleStateInfo, IdleStateRow,
    IdleStateTarget, ParallelismBin, ProcessRow, RecordingContext, RecordingReport, RowMetrics,
    SysfsIdle, SystemReport, ThreadBalance, ThreadInfo, ThreadRow, UnavailableEvent,
    UnavailableFigure, WakeupCounts,
};
use crate::provenance::Provenance;
use crate::sched::analysis::{SchedSummary, ThreadStats};
use crate::sched::attribution::{attribute_weighted, frequency_weights};
use crate::sched::cpu_accounts::cpu_time_accounts;
use crate::sched::event::Tid;
use crate::sched::tracing_cost::{EventCosts, Perturbation, RecorderShare};
use crate::sched::wakeups::WakeupCause;

pub(super) fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

pub(super) fn pct_diff(a: f64, b: f64) -> f64 {
    if a == b {
        0.0
    } else if b == 0.0 {
        100.0
    } else {
        (a - b).abs() / b * 100.0
    }
}

pub(super) fn unavailable(
    list: &mut Vec<UnavailableFigure>,
    figure: &str,
    reason: &str,
    fix: Option<&str>,
) {
    list.push(UnavailableFigure {
        figure: figure.to_string(),
        reason: reason.to_string(),
        fix: fix.map(str::to_string),
    });
}

/// Why a CPU without `power:cpu_idle` records has no trace residency, given the idle
/// entries cpuidle sysfs counted on it over the recording (`None`: no sysfs counters).
pub(super) fn idle_trace_reason(cpu: u32, sysfs_entries: Option<u64>) -> String {
    match sysfs_entries {
        Some(n) if n > 0 => format!(
            "no power:cpu_idle records from cpu{cpu}, while cpuidle sysfs counted {n} idle entries over the same interval: the kernel did not deliver the tracepoint (some kernels and VMs never do, to perf or ftrace); the sysfs columns are this CPU's residency"
        ),
        Some(_) => format!(
            "no power:cpu_idle records from cpu{cpu}, and cpuidle sysfs counted no idle entries either: it did not enter an idle state"
        ),
        None => format!(
            "no power:cpu_idle records from cpu{cpu}, and no cpuidle sysfs counters to tell whether it idled: the kernel may not deliver the tracepoint (some kernels and VMs never do)"
        ),
    }
}

/// Why threads ran on `cpu` with no recorded wake-up: lost records, or (none lost) a
/// kernel that does not deliver the tracepoints of that CPU's idle loop, the context in
/// which a sleeping thread's timer wakes it and the CPU switches to it.
pub(super) fn unrecorded_wakeups_reason(
    cpu: u32,
    n: u64,
    lost: u64,
    no_idle_trace: bool,
) -> String {
    let times = if n == 1 {
        "once".to_string()
    } else {
        format!("{n} times")
    };
    let what = format!(
        "{times} a thread ran on cpu{cpu} after blocking without its wake-up recorded (often its switch-in is missing too, and inferred from its switch-out): the wake-ups received are short of {n}, their causes unknown"
    );
    if lost > 0 {
        format!("{what}; {lost} records were lost on cpu{cpu} (use a larger --buffer-pages)")
    } else if no_idle_trace {
        format!("{what}; no record was lost: the kernel did not deliver the tracepoints fired in cpu{cpu}'s idle loop (no power:cpu_idle from it either; perf sees the same)")
    } else {
        format!("{what}; no record was lost: the kernel did not deliver those tracepoints")
    }
}

/// The share of a row's energy its tracing time cost: energy × tracing / CPU time.
pub(super) fn tracing_energy(
    energy_j: Option<f64>,
    tracing_cpu_s: Option<f64>,
    cpu_time_s: f64,
) -> Option<f64> {
    let (e, t) = (energy_j?, tracing_cpu_s?);
    Some(if cpu_time_s > 0.0 {
        e * (t / cpu_time_s).min(1.0)
    } else {
        0.0
    })
}

/// Costs by kind in words: "sched_switch 359 ns, sched_waking 290 ns".
fn costs_in_words(costs: &BTreeMap<String, f64>) -> String {
    costs
        .iter()
        .map(|(k, ns)| format!("{k} {ns:.0} ns"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Where the tracing figures come from, in one sentence.
pub(super) fn tracing_provenance(costs: &EventCosts, energy: &Provenance) -> String {
    let per_kind = costs_in_words(&costs.event_cost_ns);
    let stacks = if costs.stack_cost_ns.is_empty() {
        String::new()
    } else {
        format!(
            ", plus, for each switch, wake-up or timer arming that carried a sampled stack, what the stack added ({})",
            costs_in_words(&costs.stack_cost_ns)
        )
    };
    format!(
        "estimated: the events recorded in each thread's context × the CPU time one event of each kind cost, measured on this machine {} ({per_kind}; {:.2} s of calibration){stacks}; the energy is that share of each row's energy ({})",
        match (costs.kept_from_this_boot, costs.calibration_other_cpu_share) {
            (true, _) => "earlier in this boot, with the same configuration".to_string(),
            (false, Some(share)) if costs.measured_beside_load() => format!(
                "when the recording started, beside other processes that kept {:.0}% of the CPUs busy (so it holds what sharing a CPU cost too; kept for no later recording: measure on a quieter machine for a cleaner figure)",
                share * 100.0
            ),
            (false, _) => "when the recording started".to_string(),
        },
        costs.calibration_s,
        energy.label()
    )
}

/// Builds the report.
pub fn build(summary: &SchedSummary, ctx: &RecordingContext) -> RecordingReport {
    let mut missing = Vec::new();
    let elapsed_ns = summary.elapsed_ns();
    let elapsed_s = secs(elapsed_ns);
    let table: HashMap<Tid, &ThreadInfo> = ctx.threads.iter().map(|t| (t.tid, t)).collect();
    let pid_of = |t: &ThreadStats| t.pid.or_else(|| table.get(&t.tid).map(|i| i.pid));
    // Whether a process is the target's (every process is, in a whole-system recording).
    let targets_pid = |pid: Option<u32>| match &ctx.target_pids {
        None => true,
        Some(set) => pid.is_some_and(|p| set.contains(&p)),
    };
    let is_target = |t: &ThreadStats| targets_pid(pid_of(t));
    let comm_of = |t: &ThreadStats| {
        table
            .get(&t.tid)
            .map(|i| i.comm.clone())
            .or_else(|| t.comm.clone())
            .unwrap_or_else(|| "?".to_string())
    };

    // A reduced recording (procfs samples, no scheduler trace) has threads but no CPU.
    let traced = !summary.cpus.is_empty() || summary.threads.is_empty();
    if !traced {
        unavailable(
            &mut missing,
            "wait time, inactive time, migrations, wake-ups, idle wake-ups, idle residency",
            "reduced recording: procfs samples give per-thread CPU time and switch counts only",
            Some(
                "record as root, or lower kernel.perf_event_paranoid (see the recorder's message)",
            ),
        );
    }

    // Energy attribution.
    let (energy, thread_energy) = energy_split(summary, ctx, &is_target, &mut missing);
    let tracing_cost = ctx.tracing_cost.as_ref().ok().filter(|_| traced);
    if let (true, Err(why)) = (traced, &ctx.tracing_cost) {
        unavailable(
            &mut missing,
            "tracing cost (tracing_cpu_s)",
            why,
            Some("record again: `powerlens record` measures it at the start"),
        );
    }

    // What the recorder's own threads ran (they are recorded like any other), and whether
    // they are part of the target (a whole-system recording holds its own recorder).
    let recorder = ctx.recorder_pid.map(|pid| {
        let cpu_s = summary
            .threads
            .iter()
            .filter(|t| pid_of(t) == Some(pid))
            .map(|t| secs(t.cpu_time_ns))
            .sum::<f64>();
        RecorderShare {
            cpu_s,
            in_target: targets_pid(Some(pid)),
        }
    });

    // The command's untraced runs against the recorded run, when it ran to its end here.
    let untraced = &ctx.untraced;
    const UNTRACED_FIGURE: &str = "what recording added, measured (perturbation.untraced_runs)";
    if let Some(why) = &untraced.unreadable {
        unavailable(&mut missing, UNTRACED_FIGURE, why, None);
    }
    if let (false, None) = (untraced.runs.is_empty(), untraced.recorded_cpu_s) {
        unavailable(
            &mut missing,
            UNTRACED_FIGURE,
            "the command did not exit while it was recorded, so its CPU time is not known",
            Some("record the command to its end (no --duration, no Ctrl-C)"),
        );
    }

    // Thread rows.
    let threads: Vec<ThreadRow> = summary
        .threads
        .iter()
        .filter(|t| is_target(t))
        .map(|t| {
            let causes = WakeupCounts::from(&t.wakeups_received);
            ThreadRow {
                tid: t.tid,
                pid: pid_of(t),
                comm: comm_of(t),
                cpu_time_s: secs(t.cpu_time_ns),
                cpu_time_source: t.cpu_time_source,
                metrics: RowMetrics {
                    user_time_s: None,
                    system_time_s: None,
                    on_cpu_s: traced.then(|| secs(t.on_cpu_ns)),
                    inferred_switch_ins: traced.then_some(t.inferred_switch_ins),
                    sync_switches: t.sync_switches,
                    preempt_switches: t.preempt_switches,
                    wait_time_s: traced.then(|| secs(t.wait_ns)),
                    inactive_time_s: traced.then(|| secs(t.inactive_ns)),
                    migrations: traced.then_some(t.migrations),
                    wakeups_received: traced.then_some(causes),
                    wakeups_received_total: traced.then_some(causes.total()),
                    unrecorded_wakeups: traced.then_some(t.unrecorded_wakeups),
                    wakeups_caused: traced.then_some(t.wakeups_caused),
                    idle_wakeups: traced.then_some(t.idle_wakeups),
                    idle_time_s: traced.then(|| secs(t.idle_before_wakeups_ns)),
                    mean_idle_before_wakeup_us: (t.idle_wakeups > 0)
                        .then(|| t.idle_before_wakeups_ns as f64 / t.idle_wakeups as f64 / 1e3),
                    frequency_mhz: (t.freq_known_ns > 0)
                        .then(|| t.khz_ns / t.freq_known_ns as f64 / 1e3),
                },
                energy_j: thread_energy.as_ref().map(|m| m[&t.tid]),
                tracing_cpu_s: tracing_cost.map(|c| t.traced_events.cpu_s(c)),
                tracing_energy_j: None,
            }
        })
        .map(|mut row| {
            row.tracing_energy_j = tracing_energy(row.energy_j, row.tracing_cpu_s, row.cpu_time_s);
            row
        })
        .collect();

    let processes = process_rows(summary, &threads, &table);
    let balance = balance_rows(summary, &threads, &table, &mut missing);

    // CPUs.
    let ncpus = summary
        .cpus
        .len()
        .max(
            ctx.lost_records
                .iter()
                .map(|(c, _)| *c as usize + 1)
                .max()
                .unwrap_or(0),
        )
        .max(match &ctx.sysfs_idle {
            Ok(v) => v.iter().map(|s| s.cpu as usize + 1).max().unwrap_or(0),
            Err(_) => 0,
        });
    let states: Vec<IdleStateInfo> = ctx.idle_states.clone().unwrap_or_default();
    let state_name = |index: u32| {
        states
            .iter()
            .find(|s| s.index == index)
            .map(|s| s.name.clone())
            .unwrap_or_else(|| format!("state{index}"))
    };
    let sysfs: BTreeMap<(u32, u32), SysfsIdle> = match &ctx.sysfs_idle {
        Ok(v) => v.iter().map(|s| ((s.cpu, s.index), *s)).collect(),
        Err(_) => BTreeMap::new(),
    };
    let freq = frequencies(summary, ctx, ncpus);
    let lost: BTreeMap<u32, u64> =
        ctx.lost_records
            .iter()
            .fold(BTreeMap::new(), |mut m, (c, n)| {
                *m.entry(*c).or_default() += n;
                m
            });
    let mut cpus = Vec::new();
    let mut trace_missing_cpus = Vec::new();
    for cpu in 0..ncpus as u32 {
        let st = summary.cpus.get(cpu as usize);
        let traced = st.is_some_and(|s| s.cpu_idle_records > 0);
        if !traced {
            trace_missing_cpus.push(cpu);
        }
        let mut indexes: BTreeSet<u32> = states.iter().map(|s| s.index).collect();
        if let Some(s) = st {
            indexes.extend(s.idle.keys());
        }
        indexes.extend(sysfs.keys().filter(|(c, _)| *c == cpu).map(|(_, i)| *i));
        let idle_states = indexes
            .into_iter()
            .map(|index| {
                let tr = st
                    .and_then(|s| s.idle.get(&index))
                    .copied()
                    .unwrap_or_default();
                let (entries, time_s) = if traced {
                    (Some(tr.entries), Some(secs(tr.time_ns)))
                } else {
                    (None, None)
                };
                let sf = sysfs.get(&(cpu, index));
                let (sysfs_entries, sysfs_time_s) = match (&ctx.sysfs_idle, sf) {
                    (Ok(_), Some(s)) => (Some(s.entries), Some(secs(s.time_ns))),
                    _ => (None, None),
                };
                IdleStateRow {
                    index,
                    name: state_name(index),
                    entries,
                    time_s,
                    sysfs_entries,
                    sysfs_time_s,
                    entries_difference_pct: entries
                        .zip(sysfs_entries)
                        .map(|(a, b)| pct_diff(a as f64, b as f64)),
                    time_difference_pct: time_s.zip(sysfs_time_s).map(|(a, b)| pct_diff(a, b)),
                }
            })
            .collect();
        let (busy, idle, unknown) = st
            .map(|s| (s.busy_ns, s.idle_task_ns, s.unknown_ns))
            .unwrap_or((0, 0, elapsed_ns));
        let (wakeups, before) = st
            .map(|s| (Some(s.idle_wakeups), s.idle_before_wakeups_ns))
            .unwrap_or((None, 0));
        let unrecorded_wakeups = st.map(|s| s.unrecorded_wakeups).unwrap_or(0);
        let idle_trace_unavailable = (!traced).then(|| {
            let sysfs_entries: Option<u64> = ctx.sysfs_idle.as_ref().ok().map(|_| {
                sysfs
                    .iter()
                    .filter(|((c, _), _)| *c == cpu)
                    .map(|(_, s)| s.entries)
                    .sum()
            });
            idle_trace_reason(cpu, sysfs_entries)
        });
        cpus.push(CpuReport {
            cpu,
            busy_s: secs(busy),
            idle_s: secs(idle),
            unknown_s: secs(unknown),
            utilization_pct: (busy + idle > 0).then(|| busy as f64 / (busy + idle) as f64 * 100.0),
            idle_wakeups: wakeups,
            mean_idle_per_wakeup_us: wakeups
                .filter(|n| *n > 0)
                .map(|n| before as f64 / n as f64 / 1e3),
            frequency_mhz: freq.per_cpu.get(cpu as usize).copied().flatten(),
            inferred_switch_ins: st.map(|s| s.inferred_switch_ins).unwrap_or(0),
            lost_records: lost.get(&cpu).copied().unwrap_or(0),
            idle_states,
            idle_trace_unavailable,
            unrecorded_wakeups,
            wakeups_trace_incomplete: (unrecorded_wakeups > 0).then(|| {
                unrecorded_wakeups_reason(
                    cpu,
                    unrecorded_wakeups,
                    lost.get(&cpu).copied().unwrap_or(0),
                    !traced,
                )
            }),
            tracing_cpu_s: tracing_cost
                .map(|c| st.map(|s| s.traced_events.cpu_s(c)).unwrap_or(0.0)),
        });
    }

    // Idle residency availability.
    if !trace_missing_cpus.is_empty() {
        let list = trace_missing_cpus
            .iter()
            .map(|c| format!("cpu{c}"))
            .collect::<Vec<_>>()
            .join(", ");
        unavailable(
            &mut missing,
            "idle residency from the trace",
            &format!("no power:cpu_idle records on {list}"),
            Some(if ctx.sysfs_idle.is_ok() {
                "none needed where cpuidle sysfs counters exist (the sysfs columns); some kernels and VMs never deliver power:cpu_idle to perf (docs/REPORT.md)"
            } else {
                "some kernels and VMs never deliver power:cpu_idle to perf (docs/REPORT.md); idle wake-ups still come from the scheduler events"
            }),
        );
    }
    if let Err(reason) = &ctx.sysfs_idle {
        unavailable(
            &mut missing,
            "idle residency from cpuidle sysfs",
            reason,
            None,
        );
    }
    if let Err(reason) = &ctx.idle_states {
        unavailable(&mut missing, "idle states", reason, None);
    }

    // System.
    let busy: u64 = summary.cpus.iter().map(|c| c.busy_ns).sum();
    let idle: u64 = summary.cpus.iter().map(|c| c.idle_task_ns).sum();
    let unknown: f64 = cpus.iter().map(|c| c.unknown_s).sum();
    let idle_wakeups: u64 = summary.cpus.iter().map(|c| c.idle_wakeups).sum();
    let idle_before: u64 = summary.cpus.iter().map(|c| c.idle_before_wakeups_ns).sum();
    let mean_idle_us = (idle_wakeups > 0).then(|| idle_before as f64 / idle_wakeups as f64 / 1e3);
    if idle_wakeups == 0 && traced {
        unavailable(
            &mut missing,
            "mean idle per wake-up",
            "no idle wake-up in the recording",
            None,
        );
    }
    let deepest = states
        .iter()
        .max_by_key(|s| (s.target_residency_us, s.index))
        .cloned();
    let (efficiency, efficiency_source) =
        idleness_efficiency(&cpus, deepest.as_ref(), ctx, &mut missing);
    let idle_state_targets = states
        .iter()
        .map(|s| IdleStateTarget {
            index: s.index,
            name: s.name.clone(),
            latency_us: s.latency_us,
            target_residency_us: s.target_residency_us,
            mean_idle_reaches_target: mean_idle_us.map(|m| m >= s.target_residency_us as f64),
            wakeups_reaching_target_pct: reaching(summary, s.target_residency_us * 1000),
        })
        .collect();
    let mut causes = WakeupCounts::default();
    for t in &summary.threads {
        causes.add(&WakeupCounts::from(&t.wakeups_received));
    }
    if freq.source.is_none() {
        unavailable(
            &mut missing,
            "frequency",
            "no power:cpu_frequency records and no cpufreq samples",
            Some("a kernel with a cpufreq driver (none in most VMs)"),
        );
    }
    let system = SystemReport {
        target: match &ctx.target_pids {
            None => "whole system".to_string(),
            Some(set) => format!(
                "pid {}",
                set.iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        },
        elapsed_s,
        recording_span: ctx.span,
        cpus: ncpus as u32,
        busy_s: secs(busy),
        idle_s: secs(idle),
        unknown_s: unknown,
        utilization_pct: (busy + idle > 0).then(|| busy as f64 / (busy + idle) as f64 * 100.0),
        idle_wakeups: traced.then_some(idle_wakeups),
        idle_wakeups_per_s: (traced && elapsed_ns > 0).then(|| idle_wakeups as f64 / elapsed_s),
        mean_idle_per_wakeup_us: mean_idle_us,
        idleness_efficiency_pct: efficiency,
        idleness_efficiency_source: efficiency_source,
        deepest_state: deepest.map(|s| s.name),
        idle_states: idle_state_targets,
        frequency_mhz: freq.mean_mhz,
        running_frequency_mhz: freq.running_mhz,
        frequency_source: freq.source,
        energy_domains: match &ctx.energy {
            Ok(e) => e
                .domains
                .iter()
                .map(|(name, j)| DomainEnergy {
                    name: name.clone(),
                    energy_j: *j,
                })
                .collect(),
            Err(_) => Vec::new(),
        },
        energy_provenance: energy.provenance.clone(),
        wakeups_received: traced.then_some(causes),
        migrations: traced.then(|| summary.threads.iter().map(|t| t.migrations).sum()),
        lost_records: lost.values().sum(),
        inferred_switch_ins: summary.cpus.iter().map(|c| c.inferred_switch_ins).sum(),
        unrecorded_wakeups: summary.cpus.iter().map(|c| c.unrecorded_wakeups).sum(),
        unavailable_events: ctx
            .unavailable_events
            .iter()
            .map(|(event, reason)| UnavailableEvent {
                event: event.clone(),
                reason: reason.clone(),
            })
            .collect(),
        cpu_time_accounts: cpu_time_accounts(summary),
        tracing_cpu_s: tracing_cost.map(|_| cpus.iter().filter_map(|c| c.tracing_cpu_s).sum()),
        tracing_event_cost_ns: tracing_cost.map(|c| c.event_cost_ns.clone()),
        tracing_stack_cost_ns: tracing_cost
            .filter(|c| !c.stack_cost_ns.is_empty())
            .map(|c| c.stack_cost_ns.clone()),
        tracing_event_cost_interval_ns: tracing_cost
            .filter(|c| !c.event_cost_interval_ns.is_empty())
            .map(|c| c.event_cost_interval_ns.clone()),
        tracing_energy_j: tracing_cost
            .and(energy.total_j)
            .map(|_| threads.iter().filter_map(|t| t.tracing_energy_j).sum()),
        tracing_provenance: tracing_cost.map(|c| tracing_provenance(c, &energy.provenance)),
        perturbation: tracing_cost.map(|c| {
            // The target's estimate again with every kind's cost at either end of its
            // confidence interval.
            let target_at = |costs: &EventCosts| -> f64 {
                summary
                    .threads
                    .iter()
                    .filter(|t| is_target(t))
                    .map(|t| t.traced_events.cpu_s(costs))
                    .sum()
            };
            Perturbation::new(
                threads.iter().map(|t| t.cpu_time_s).sum(),
                threads.iter().filter_map(|t| t.tracing_cpu_s).sum(),
                c.interval_ends()
                    .map(|ends| ends.map(|costs| target_at(&costs))),
                c.stacks,
            )
            .beside_recorder(recorder)
            .against_untraced(untraced)
        }),
        tracing_path: ctx.tracing_path.clone().filter(|_| traced),
        start_up_s: ctx.start_up_s,
    };
    RecordingReport {
        system,
        cpus,
        threads,
        processes,
        balance,
        energy,
        unavailable: missing,
        functions: Vec::new(),
        function_grouping: None,
        wakeup_causes: Vec::new(),
        instrument_wakeup_causes: Vec::new(),
        advice: Vec::new(),
        advice_judged_against: None,
        battery: None,
    }
}

/// Adds the wake-up causes of the recording's stream to the report, each waker or arming
/// thread named from the thread table; those of the recorder's own threads apart
/// (`instrument_wakeup_causes`).
pub fn attach_wakeup_causes(
    report: &mut RecordingReport,
    mut causes: Vec<WakeupCause>,
    ctx: &RecordingContext,
) {
    let mut instrument = Vec::new();
    for c in &mut causes {
        if let Some(tid) = c.tid().filter(|t| *t != 0) {
            c.comm = ctx
                .threads
                .iter()
                .find(|t| t.tid == tid)
                .map(|t| t.comm.clone());
        }
    }
    let is_instrument = |c: &WakeupCause| {
        let pid = |tid| ctx.threads.iter().find(|t| t.tid == tid).map(|t| t.pid);
        ctx.recorder_pid.is_some() && c.tid().and_then(pid) == ctx.recorder_pid
    };
    causes.retain(|c| match is_instrument(c) {
        true => {
            instrument.push(c.clone());
            false
        }
        false => true,
    });
    report.wakeup_causes = causes;
    report.instrument_wakeup_causes = instrument;
}

/// Percent of idle wake-ups after at least `threshold_ns` of idle, when the analysis counted
/// that threshold on every CPU.
pub(super) fn reaching(summary: &SchedSummary, threshold_ns: u64) -> Option<f64> {
    let mut total = 0;
    let mut reached = 0;
    for c in &summary.cpus {
        let n = c
            .idle_wakeups_at_least
            .iter()
            .find(|(t, _)| *t == threshold_ns)?
            .1;
        reached += n;
        total += c.idle_wakeups;
    }
    (total > 0).then(|| reached as f64 / total as f64 * 100.0)
}

pub(super) type ThreadEnergyMap = Option<HashMap<Tid, f64>>;

pub(super) fn energy_split(
    summary: &SchedSummary,
    ctx: &RecordingContext,
    is_target: &dyn Fn(&ThreadStats) -> bool,
    missing: &mut Vec<UnavailableFigure>,
) -> (EnergyReport, ThreadEnergyMap) {
    let e = match &ctx.energy {
        Ok(e) => e,
        Err(p) => {
            let (reason, fix) = match p {
                Provenance::Unavailable { reason, fix } => (reason.clone(), fix.clone()),
                other => (format!("no energy figure ({})", other.label()), None),
            };
            missing.push(UnavailableFigure {
                figure: "energy".into(),
                reason: reason.clone(),
                fix,
            });
            return (
                EnergyReport {
                    provenance: p.clone(),
                    total_j: None,
                    idle_j: None,
                    other_j: None,
                    target_j: None,
                    idle_power_w: None,
                    weighting: None,
                    method: format!("no energy attribution: {reason}"),
                },
                None,
            );
        }
    };
    let (weights, weighting, name) = match frequency_weights(summary) {
        Some(w) => (w, "cpu_time_x_frequency", "CPU time × frequency"),
        None => (
            summary
                .threads
                .iter()
                .map(|t| t.cpu_time_ns as f64)
                .collect(),
            "cpu_time",
            "CPU time (frequency unknown)",
        ),
    };
    let a = attribute_weighted(
        summary,
        e.total_j,
        e.idle_power_w,
        &weights,
        name,
        is_target,
    );
    let map: HashMap<Tid, f64> = a.threads.iter().map(|t| (t.tid, t.energy_j)).collect();
    let target_j = a.threads.iter().map(|t| t.energy_j).sum();
    (
        EnergyReport {
            provenance: e.provenance.clone(),
            total_j: Some(a.total_j),
            idle_j: Some(a.idle_j),
            other_j: Some(a.other_j),
            target_j: Some(target_j),
            idle_power_w: Some(e.idle_power_w),
            weighting: Some(weighting.to_string()),
            method: a.method,
        },
        Some(map),
    )
}

pub(super) fn process_rows(
    summary: &SchedSummary,
    threads: &[ThreadRow],
    table: &HashMap<Tid, &ThreadInfo>,
) -> Vec<ProcessRow> {
    let parallelism: HashMap<u32, Option<f64>> = summary
        .processes
        .iter()
        .map(|p| (p.pid, effective_parallelism(&p.running_ns)))
        .collect();
    let mut by_pid: BTreeMap<(bool, u32), Vec<&ThreadRow>> = BTreeMap::new();
    for t in threads {
        by_pid
            .entry((t.pid.is_none(), t.pid.unwrap_or(0)))
            .or_default()
            .push(t);
    }
    by_pid
        .into_iter()
        .map(|((_, _), rows)| {
            let pid = rows[0].pid;
            let comm = pid
                .and_then(|p| table.get(&p).map(|i| i.comm.clone()))
                .or_else(|| {
                    rows.iter()
                        .find(|r| Some(r.tid) == pid)
                        .map(|r| r.comm.clone())
                })
                .unwrap_or_else(|| {
                    if pid.is_none() {
                        "(unknown process)".to_string()
                    } else {
                        rows[0].comm.clone()
                    }
                });
            let causes = rows.iter().map(|r| r.metrics.wakeups_received).try_fold(
                WakeupCounts::default(),
                |mut acc, w| {
                    acc.add(&w?);
                    Some(acc)
                },
            );
            let idle_wakeups: Option<u64> = rows.iter().map(|r| r.metrics.idle_wakeups).sum();
            let idle_time_s: Option<f64> = rows.iter().map(|r| r.metrics.idle_time_s).sum();
            let freq_rows: Vec<(f64, f64)> = rows
                .iter()
                .filter_map(|r| r.metrics.frequency_mhz.map(|f| (f, r.cpu_time_s)))
                .collect();
            let freq_time: f64 = freq_rows.iter().map(|(_, t)| t).sum();
            ProcessRow {
                pid,
                comm,
                threads: rows.len() as u32,
                cpu_time_s: rows.iter().map(|r| r.cpu_time_s).sum(),
                metrics: RowMetrics {
                    user_time_s: None,
                    system_time_s: None,
                    on_cpu_s: rows.iter().map(|r| r.metrics.on_cpu_s).sum(),
                    inferred_switch_ins: rows.iter().map(|r| r.metrics.inferred_switch_ins).sum(),
                    sync_switches: rows.iter().map(|r| r.metrics.sync_switches).sum(),
                    preempt_switches: rows.iter().map(|r| r.metrics.preempt_switches).sum(),
                    wait_time_s: rows.iter().map(|r| r.metrics.wait_time_s).sum(),
                    inactive_time_s: rows.iter().map(|r| r.metrics.inactive_time_s).sum(),
                    migrations: rows.iter().map(|r| r.metrics.migrations).sum(),
                    wakeups_received: causes,
                    wakeups_received_total: causes.map(|c| c.total()),
                    unrecorded_wakeups: rows.iter().map(|r| r.metrics.unrecorded_wakeups).sum(),
                    wakeups_caused: rows.iter().map(|r| r.metrics.wakeups_caused).sum(),
                    idle_wakeups,
                    idle_time_s,
                    mean_idle_before_wakeup_us: idle_wakeups
                        .zip(idle_time_s)
                        .filter(|(n, _)| *n > 0)
                        .map(|(n, s)| s * 1e6 / n as f64),
                    frequency_mhz: (freq_time > 0.0)
                        .then(|| freq_rows.iter().map(|(f, t)| f * t).sum::<f64>() / freq_time),
                },
                effective_parallelism: pid.and_then(|p| parallelism.get(&p).copied().flatten()),
                energy_j: rows.iter().map(|r| r.energy_j).sum::<Option<f64>>(),
                tracing_cpu_s: rows.iter().map(|r| r.tracing_cpu_s).sum::<Option<f64>>(),
                tracing_energy_j: rows.iter().map(|r| r.tracing_energy_j).sum::<Option<f64>>(),
            }
        })
        .collect()
}

/// Σ n·time(n) / Σ time(n ≥ 1): the mean number of threads running while any runs.
pub(super) fn effective_parallelism(running_ns: &[u64]) -> Option<f64> {
    let active: u64 = running_ns.iter().skip(1).sum();
    (active > 0).then(|| {
        running_ns
            .iter()
            .enumerate()
            .map(|(n, t)| n as f64 * *t as f64)
            .sum::<f64>()
            / active as f64
    })
}

pub(super) fn balance_rows(
    summary: &SchedSummary,
    threads: &[ThreadRow],
    table: &HashMap<Tid, &ThreadInfo>,
    missing: &mut Vec<UnavailableFigure>,
) -> Vec<ThreadBalance> {
    let parallelism: HashMap<u32, &Vec<u64>> = summary
        .processes
        .iter()
        .map(|p| (p.pid, &p.running_ns))
        .collect();
    let mut by_pid: BTreeMap<u32, Vec<&ThreadRow>> = BTreeMap::new();
    for t in threads {
        if let Some(pid) = t.pid {
            by_pid.entry(pid).or_default().push(t);
        }
    }
    let mut out = Vec::new();
    let mut no_table = false;
    for (pid, rows) in by_pid {
        if rows.len() < 2 {
            continue;
        }
        let busy: Vec<f64> = rows.iter().map(|r| r.cpu_time_s).collect();
        let mean = busy.iter().sum::<f64>() / busy.len() as f64;
        let max = busy.iter().copied().fold(0.0, f64::max);
        let (bins, eff) = match parallelism.get(&pid) {
            Some(running) => (
                running
                    .iter()
                    .enumerate()
                    .map(|(n, t)| ParallelismBin {
                        threads_running: n as u32,
                        time_s: secs(*t),
                    })
                    .collect(),
                effective_parallelism(running),
            ),
            None => {
                no_table = true;
                (Vec::new(), None)
            }
        };
        out.push(ThreadBalance {
            pid,
            comm: table
                .get(&pid)
                .map(|i| i.comm.clone())
                .unwrap_or_else(|| rows[0].comm.clone()),
            threads: rows
                .iter()
                .map(|r| BalanceThread {
                    tid: r.tid,
                    comm: r.comm.clone(),
                    busy_s: r.cpu_time_s,
                })
                .collect(),
            mean_busy_s: mean,
            max_busy_s: max,
            imbalance: (mean > 0.0).then(|| max / mean),
            parallelism: bins,
            effective_parallelism: eff,
        });
    }
    if no_table {
        // Parallelism needs the running intervals of a trace; a reduced (procfs) profile
        // has only per-thread totals. A trace analysed without the thread table is a
        // caller's mistake, said as such.
        if summary.cpus.is_empty() {
            unavailable(
                missing,
                "effective parallelism",
                "reduced recording: procfs totals say how long each thread ran, not when",
                Some("record as root, or lower kernel.perf_event_paranoid"),
            );
        } else {
            unavailable(
                missing,
                "effective parallelism",
                "the analysis was not given the thread table",
                Some("feed the stream to SchedAnalysis::with_thread_groups(ctx.thread_groups())"),
            );
        }
    }
    out
}

pub(super) struct Frequencies {
    per_cpu: Vec<Option<f64>>,
    mean_mhz: Option<f64>,
    running_mhz: Option<f64>,
    source: Option<String>,
}

/// Per-CPU time-weighted mean frequency: from `Frequency` events when the stream has them,
/// else from cpufreq samples (each sample holds until the next one of its CPU, the last
/// until the end of the recording).
pub(super) fn frequencies(
    summary: &SchedSummary,
    ctx: &RecordingContext,
    ncpus: usize,
) -> Frequencies {
    let events_known: u64 = summary.cpus.iter().map(|c| c.freq_known_ns).sum();
    let known_run: u64 = summary.threads.iter().map(|t| t.freq_known_ns).sum();
    let running_mhz = (known_run > 0)
        .then(|| summary.threads.iter().map(|t| t.khz_ns).sum::<f64>() / known_run as f64 / 1e3);
    let mut per_cpu = vec![None; ncpus];
    let (num, den, source) = if events_known > 0 {
        let mut num = 0.0;
        for (i, c) in summary.cpus.iter().enumerate() {
            if c.freq_known_ns > 0 {
                per_cpu[i] = Some(c.khz_ns / c.freq_known_ns as f64 / 1e3);
                num += c.khz_ns;
            }
        }
        (num, events_known as f64, Some("power:cpu_frequency"))
    } else if !ctx.frequency_samples.is_empty() {
        let mut by_cpu: BTreeMap<u32, Vec<(u64, u64)>> = BTreeMap::new();
        for &(t, cpu, khz) in &ctx.frequency_samples {
            by_cpu.entry(cpu).or_default().push((t, khz));
        }
        let (mut num, mut den) = (0.0, 0.0);
        for (cpu, mut samples) in by_cpu {
            samples.sort_unstable();
            let (mut n, mut d) = (0.0, 0.0);
            for (i, &(t, khz)) in samples.iter().enumerate() {
                let from = t.max(summary.start_ns);
                let to = samples
                    .get(i + 1)
                    .map(|s| s.0)
                    .unwrap_or(summary.end_ns)
                    .min(summary.end_ns);
                if to > from {
                    n += (to - from) as f64 * khz as f64;
                    d += (to - from) as f64;
                }
            }
            if d == 0.0 {
                // Samples only at or after the end: take their plain mean.
                n = samples.iter().map(|s| s.1 as f64).sum();
                d = samples.len() as f64;
            }
            if (cpu as usize) < per_cpu.len() {
                per_cpu[cpu as usize] = Some(n / d / 1e3);
            }
            num += n;
            den += d;
        }
        (num, den, Some("cpufreq samples"))
    } else {
        (0.0, 0.0, None)
    };
    Frequencies {
        per_cpu,
        mean_mhz: (den > 0.0).then(|| num / den / 1e3),
        running_mhz,
        source: source.map(str::to_string),
    }
}

/// Share of idle-state time in the deepest state, from the trace when every CPU has
/// `power:cpu_idle` records, else from sysfs.
pub(super) fn idleness_efficiency(
    cpus: &[CpuReport],
    deepest: Option<&IdleStateInfo>,
    ctx: &RecordingContext,
    missing: &mut Vec<UnavailableFigure>,
) -> (Option<f64>, Option<String>) {
    let Some(deepest) = deepest else {
        let reason = match &ctx.idle_states {
            Err(r) => r.clone(),
            Ok(_) => "the cpuidle driver declares no state".to_string(),
        };
        unavailable(missing, "idleness efficiency", &reason, None);
        return (None, None);
    };
    let sum = |f: &dyn Fn(&IdleStateRow) -> Option<f64>, only_deepest: bool| {
        let mut total = Some(0.0);
        for c in cpus {
            for s in &c.idle_states {
                if only_deepest && s.index != deepest.index {
                    continue;
                }
                total = total.zip(f(s)).map(|(a, b)| a + b);
            }
        }
        total
    };
    for (source, f) in [
        (
            "trace",
            &(|s: &IdleStateRow| s.time_s) as &dyn Fn(&IdleStateRow) -> Option<f64>,
        ),
        ("sysfs", &|s: &IdleStateRow| s.sysfs_time_s),
    ] {
        if let (Some(deep), Some(all)) = (sum(f, true), sum(f, false)) {
            if all > 0.0 {
                return (Some(deep / all * 100.0), Some(source.to_string()));
            }
        }
    }
    unavailable(
        missing,
        "idleness efficiency",
        "no idle-state residency on every CPU from either the trace or sysfs",
        None,
    );
    (None, None)
}
