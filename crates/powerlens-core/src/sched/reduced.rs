//! The reduced profile: what procfs samples of each thread's CPU time and context-switch
//! counters say when tracing is not allowed. Only CPU time, synchronization switches
//! (voluntary) and preemption switches (nonvoluntary) are known; everything else in the
//! grid is unavailable.

use std::collections::BTreeMap;

use super::analysis::{CpuTimeSource, SchedSummary, ThreadStats};
use super::event::Tid;

/// One thread in one procfs sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadSample {
    pub tid: Tid,
    pub pid: u32,
    pub comm: String,
    pub cpu_time_ns: u64,
    /// `voluntary_ctxt_switches`.
    pub voluntary: u64,
    /// `nonvoluntary_ctxt_switches`.
    pub nonvoluntary: u64,
}

/// Per-thread figures over a series of samples (time order): each thread's counters at its
/// last sample minus those it had when the recording started. Threads in the first sample
/// existed before, so their first sample is the base — unless `all_new` (a command started
/// by the recorder: all its threads began with the recording, from zero). Threads first
/// seen later were created during the recording and count from zero. A thread that exits
/// keeps its last sampled values (up to one sample interval of its work is missed).
pub fn summary(
    samples: impl IntoIterator<Item = (u64, Vec<ThreadSample>)>,
    all_new: bool,
) -> SchedSummary {
    let mut first_time = None;
    let mut last_time = 0;
    let mut base: BTreeMap<Tid, ThreadSample> = BTreeMap::new();
    let mut last: BTreeMap<Tid, ThreadSample> = BTreeMap::new();
    for (i, (time_ns, threads)) in samples.into_iter().enumerate() {
        first_time.get_or_insert(time_ns);
        last_time = time_ns;
        for t in threads {
            if i == 0 && !all_new {
                base.entry(t.tid).or_insert_with(|| t.clone());
            }
            last.insert(t.tid, t);
        }
    }
    let threads = last
        .into_values()
        .map(|t| {
            let b = base.get(&t.tid);
            let since = |f: fn(&ThreadSample) -> u64| f(&t).saturating_sub(b.map(f).unwrap_or(0));
            ThreadStats {
                tid: t.tid,
                pid: Some(t.pid),
                comm: Some(t.comm.clone()),
                cpu_time_ns: since(|s| s.cpu_time_ns),
                sync_switches: since(|s| s.voluntary),
                preempt_switches: since(|s| s.nonvoluntary),
                cpu_time_source: CpuTimeSource::Procfs,
                ..ThreadStats::default()
            }
        })
        .collect();
    SchedSummary {
        start_ns: first_time.unwrap_or(0),
        end_ns: last_time,
        threads,
        cpus: Vec::new(),
        processes: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(tid: Tid, cpu: u64, vol: u64, nonvol: u64) -> ThreadSample {
        ThreadSample {
            tid,
            pid: 10,
            comm: format!("t{tid}"),
            cpu_time_ns: cpu,
            voluntary: vol,
            nonvoluntary: nonvol,
        }
    }

    #[test]
    fn deltas_by_hand() {
        let samples = vec![
            (1_000, vec![t(10, 500, 5, 1)]),
            (2_000, vec![t(10, 900, 8, 1), t(11, 100, 1, 0)]),
            // Thread 11 exited: it keeps its last values.
            (3_000, vec![t(10, 1_500, 9, 3)]),
        ];
        let s = summary(samples.clone(), false);
        assert_eq!((s.start_ns, s.end_ns), (1_000, 3_000));
        let main = &s.threads[0];
        assert_eq!(
            (main.cpu_time_ns, main.sync_switches, main.preempt_switches),
            (1_000, 4, 2)
        );
        let late = &s.threads[1];
        assert_eq!(
            (late.tid, late.cpu_time_ns, late.sync_switches),
            (11, 100, 1)
        );
        // A command started with the recording counts from zero.
        let s = summary(samples, true);
        assert_eq!(s.threads[0].cpu_time_ns, 1_500);
    }
}
