//! One interval as `top` shows it: the node's power and where it comes from, each process's
//! power, CPU and wake-up rates, and each CPU's idle-state residency. Built from the
//! monitor's interval report, which closes exactly: node = idle share + Σ processes.

use powerlens_core::monitor::{CpuResidency, IntervalReport, ProcessInterval};
use powerlens_core::provenance::Provenance;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    /// The interval's number, from 1.
    pub interval: u64,
    pub elapsed_s: f64,
    /// Σ of the energy domains that count in the total, over the interval.
    pub node_power_w: f64,
    /// The idle (baseline) share of the node's power: no process's.
    pub idle_power_w: f64,
    /// Where the energy comes from: measured (which meter) or estimated (which model).
    pub energy: Provenance,
    /// Why the wake-up columns are unavailable (a reduced session); `None` when traced.
    pub wakeups_unavailable: Option<String>,
    /// What gives the wake-up columns back (a reduced session): tracing privileges, or
    /// leaving out `--reduced` when it was asked for; `None` when traced.
    pub wakeups_fix: Option<String>,
    /// Trace records lost so far (rings that overflowed); `None` without tracing.
    pub lost_records: Option<u64>,
    /// Trace records lost in this interval, per second: whether losses go on.
    pub lost_records_per_s: Option<f64>,
    /// Every process that ran in the interval, most power first.
    pub processes: Vec<ProcessRow>,
    pub cpus: Vec<CpuResidency>,
    /// Why `cpus` is empty: no cpuidle states to read; `None` when there are.
    pub cpus_unavailable: Option<String>,
    /// What the user should know of this interval (a meter that stopped answering).
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessRow {
    pub pid: u32,
    pub comm: String,
    /// Its share of the node's energy over the interval, per second.
    pub power_w: f64,
    /// CPU time over wall time: 200 is two CPUs busy all the interval.
    pub cpu_pct: f64,
    /// Wake-ups of its threads per second, by cause; `None` without tracing.
    pub wakeups_per_s: Option<WakeupRates>,
    /// Wake-ups of its threads that ended a CPU's idle, per second; `None` without tracing.
    pub idle_wakeups_per_s: Option<f64>,
    /// Runs of its threads after blocking with no wake-up recorded, per second:
    /// `wakeups_per_s` is short of these; `None` without tracing.
    pub unrecorded_wakeups_per_s: Option<f64>,
}

/// Wake-ups per second by what woke the thread.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct WakeupRates {
    pub total: f64,
    /// Another thread.
    pub thread: f64,
    /// A timer callback.
    pub timer: f64,
    /// A hardware interrupt or a softirq.
    pub irq: f64,
    /// An IPI, or a CPU's idle task (a remote wake-up with no thread behind it).
    pub ipi_or_idle: f64,
}

/// The process rows of an interval: rates per second of its elapsed time, and the
/// wake-up figures only when they were traced (`traced` false: unavailable, never 0).
pub fn process_rows(report: &IntervalReport, traced: bool) -> Vec<ProcessRow> {
    let per_s = |x: f64| per_second(x, report.elapsed_s);
    // Wake-ups are counted while the trace watched: their rates are per traced second.
    let per_traced_s = |x: f64| per_second(x, report.traced_s);
    report
        .processes
        .iter()
        .map(|(p, energy_j): &(ProcessInterval, f64)| {
            let w = &p.wakeups;
            ProcessRow {
                pid: p.info.key.pid,
                comm: p.info.comm.clone(),
                power_w: per_s(*energy_j),
                cpu_pct: per_s(p.runtime_ns as f64 / 1e9) * 100.0,
                wakeups_per_s: traced.then(|| WakeupRates {
                    total: per_traced_s(w.total() as f64),
                    thread: per_traced_s(w.thread as f64),
                    timer: per_traced_s(w.timer as f64),
                    irq: per_traced_s((w.irq + w.softirq) as f64),
                    ipi_or_idle: per_traced_s(w.ipi_or_idle as f64),
                }),
                idle_wakeups_per_s: traced.then(|| per_traced_s(p.idle_wakeups as f64)),
                unrecorded_wakeups_per_s: traced.then(|| per_traced_s(p.unrecorded_wakeups as f64)),
            }
        })
        .collect()
}

/// An amount over an interval, per second (an interval of no length has no rate: 0).
pub fn per_second(amount: f64, elapsed_s: f64) -> f64 {
    if elapsed_s > 0.0 {
        amount / elapsed_s
    } else {
        0.0
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use powerlens_core::monitor::{ProcessInfo, ProcessKey};
    use powerlens_core::sched::analysis::WakeupCauses;

    pub fn process(
        pid: u32,
        comm: &str,
        runtime_ns: u64,
        wakeups: WakeupCauses,
        idle_wakeups: u64,
    ) -> ProcessInterval {
        ProcessInterval {
            info: ProcessInfo {
                key: ProcessKey {
                    pid,
                    serial: pid as u64,
                },
                comm: comm.into(),
                any_comm: comm.into(),
                cgroup: None,
                parent: None,
            },
            runtime_ns,
            wakeups,
            idle_wakeups,
            unrecorded_wakeups: 0,
            tracing_cpu_s: 0.0,
        }
    }

    /// Over 0.5 s, 3 J for a process that ran 0.25 s with 10 thread, 20 timer, 3 irq,
    /// 2 softirq and 5 IPI wake-ups (10 idle, 4 unrecorded): 6 W, 50% CPU, 20/40/10/10 per
    /// s, 80 in all, 20 idle wake-ups and 8 unrecorded ones per s (hand-computed).
    #[test]
    fn rows_are_rates_over_the_interval() {
        let wakeups = WakeupCauses {
            thread: 10,
            timer: 20,
            irq: 3,
            softirq: 2,
            ipi_or_idle: 5,
        };
        let report = IntervalReport {
            elapsed_s: 0.5,
            traced_s: 0.5,
            node_j: 5.0,
            idle_j: 2.0,
            processes: vec![(
                ProcessInterval {
                    unrecorded_wakeups: 4,
                    ..process(7, "worker", 250_000_000, wakeups, 10)
                },
                3.0,
            )],
        };
        let rows = process_rows(&report, true);
        let r = &rows[0];
        assert_eq!((r.pid, r.comm.as_str()), (7, "worker"));
        assert_eq!((r.power_w, r.cpu_pct), (6.0, 50.0));
        assert_eq!(
            r.wakeups_per_s,
            Some(WakeupRates {
                total: 80.0,
                thread: 20.0,
                timer: 40.0,
                irq: 10.0,
                ipi_or_idle: 10.0
            })
        );
        assert_eq!(r.idle_wakeups_per_s, Some(20.0));
        assert_eq!(r.unrecorded_wakeups_per_s, Some(8.0));
        let reduced = process_rows(&report, false);
        assert_eq!(
            (
                reduced[0].wakeups_per_s,
                reduced[0].idle_wakeups_per_s,
                reduced[0].unrecorded_wakeups_per_s
            ),
            (None, None, None)
        );
        assert_eq!(reduced[0].power_w, 6.0);
    }
}
