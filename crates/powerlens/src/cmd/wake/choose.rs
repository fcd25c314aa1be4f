//! Which CPU `wake` measures when `--cpu` is not given. WakeLatency needs the measured
//! CPU's `power:cpu_idle` records, and some kernels never deliver them for some CPUs (on
//! this project's VMs cpu1 fires none while cpu0 does): the highest online CPU, the usual
//! choice away from cpu0's housekeeping, would then measure nothing but UserLatency. A
//! short probe counts each CPU's idle records first.

use std::collections::BTreeMap;
use std::time::Duration;

use powerlens_sys::trace::{Collector, CollectorOptions};
use powerlens_sys::Roots;

/// How long the probe listens: an idle machine enters idle states hundreds of times a
/// second on every CPU.
pub const PROBE: Duration = Duration::from_millis(200);

/// The CPU to measure, and why (a sentence for the run's notes).
pub fn choose(online: &[u32], delivered: Option<&BTreeMap<u32, u64>>) -> (u32, String) {
    let highest = *online.last().expect("at least one CPU is online");
    let Some(delivered) = delivered else {
        return (
            highest,
            format!("cpu{highest}: the highest online CPU (--cpu not given; no probe of the idle records was possible)"),
        );
    };
    let counts = online
        .iter()
        .map(|c| format!("cpu{c} {}", delivered.get(c).copied().unwrap_or(0)))
        .collect::<Vec<_>>()
        .join(", ");
    let ms = PROBE.as_millis();
    let with_records = |c: &&u32| delivered.get(c).is_some_and(|n| *n > 0);
    // Away from cpu0's housekeeping when another CPU qualifies, as cyclictest users do.
    match online
        .iter()
        .rev()
        .find(|c| **c != 0 && with_records(c))
        .or_else(|| online.iter().find(with_records))
    {
        Some(&cpu) if cpu == highest => (
            cpu,
            format!("cpu{cpu}: the highest online CPU, whose power:cpu_idle records reach perf (a {ms} ms probe counted {counts})"),
        ),
        Some(&cpu) => (
            cpu,
            format!("cpu{cpu}: the highest online CPU whose power:cpu_idle records reach perf (a {ms} ms probe counted {counts}); the kernel delivers none from the others, where only UserLatency could be measured"),
        ),
        None => (
            highest,
            format!("cpu{highest}: the highest online CPU; no CPU delivered a power:cpu_idle record in a {ms} ms probe ({counts}), so WakeLatency will be unavailable and UserLatency is measured"),
        ),
    }
}

/// Counts each CPU's `power:cpu_idle` records over [`PROBE`]; `None` when the tracepoint
/// cannot be opened (the run then reports why itself).
pub fn probe_idle_records(roots: &Roots) -> Option<BTreeMap<u32, u64>> {
    let options = CollectorOptions {
        buffer_pages: 64,
        ..Default::default()
    };
    let mut collector = Collector::open(roots, &["power/cpu_idle"], options).ok()?;
    if collector.events().is_empty() {
        return None;
    }
    collector.enable().ok()?;
    std::thread::sleep(PROBE);
    collector.disable().ok()?;
    let mut counts = BTreeMap::new();
    collector.drain(|r| *counts.entry(r.cpu).or_insert(0) += 1);
    Some(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(pairs: &[(u32, u64)]) -> BTreeMap<u32, u64> {
        pairs.iter().copied().collect()
    }

    #[test]
    fn the_highest_cpu_that_delivers_idle_records() {
        // This project's VMs: cpu1 delivers none.
        let (cpu, why) = choose(&[0, 1], Some(&counts(&[(0, 140)])));
        assert_eq!(cpu, 0);
        assert!(why.contains("counted cpu0 140, cpu1 0"), "{why}");
        assert!(why.contains("delivers none from the others"), "{why}");
        // Every CPU delivers: the highest, away from cpu0.
        let (cpu, why) = choose(&[0, 1, 2, 3], Some(&counts(&[(0, 9), (2, 5), (3, 7)])));
        assert_eq!(cpu, 3);
        assert!(
            why.starts_with("cpu3: the highest online CPU, whose"),
            "{why}"
        );
        // cpu3 silent: cpu2 rather than cpu0.
        assert_eq!(choose(&[0, 1, 2, 3], Some(&counts(&[(0, 9), (2, 5)]))).0, 2);
    }

    #[test]
    fn without_records_or_a_probe_the_highest_cpu_and_why() {
        let (cpu, why) = choose(&[0, 1], Some(&counts(&[])));
        assert_eq!(cpu, 1);
        assert!(why.contains("WakeLatency will be unavailable"), "{why}");
        let (cpu, why) = choose(&[0, 1], None);
        assert_eq!(cpu, 1);
        assert!(why.contains("no probe"), "{why}");
    }
}
