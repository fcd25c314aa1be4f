//! Exports of a recording's event stream to the timeline viewers developers already use
//! (Perfetto, the Firefox Profiler) and to plain JSON lines / CSV. Every writer streams:
//! it takes the events one at a time in time order (as `powerlens record`'s replay gives
//! them) and keeps per-thread and per-CPU state only — except the Firefox Profiler's, whose
//! format is one JSON document of tables built in memory (docs/EXPORT.md).

pub mod events;
pub mod firefox;

pub mod perfetto;
mod proto;

use std::collections::BTreeMap;

use powerlens_core::sched::event::{EventKind, Tid};

/// One thread of the recording's thread table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadInfo {
    pub tid: Tid,
    /// Its process; `None` when the table does not know it.
    pub pid: Option<u32>,
    /// The process's parent, when known.
    pub ppid: Option<u32>,
    /// Last known command name; empty when unknown.
    pub comm: String,
}

/// A named series of values over time (CLOCK_MONOTONIC ns); each value holds until the
/// next one.
#[derive(Debug, Clone, PartialEq)]
pub struct Counter {
    /// e.g. `power total`, `energy package-0`.
    pub name: String,
    /// `W`, `J`, …
    pub unit: &'static str,
    pub points: Vec<(u64, f64)>,
}

/// One cumulative energy reading of the meter (the recording's `energy` samples).
#[derive(Debug, Clone, PartialEq)]
pub struct EnergySample {
    pub time_ns: u64,
    /// Packages + DRAM, joules since the first reading.
    pub total_j: Option<f64>,
    /// Every domain, joules since the first reading.
    pub domains_j: Vec<(String, f64)>,
}

/// Power and energy counters from cumulative energy samples: for `total` and each domain,
/// `energy NAME` (J since the first sample) and `power NAME` (W over each sampling
/// interval, placed at the interval's start so it holds over the interval). A reading
/// lower than the previous one (a meter reset) starts a new baseline: energy never goes
/// down and no power is negative. Series with fewer than two readings give no power.
pub fn energy_counters(samples: &[EnergySample]) -> Vec<Counter> {
    // name -> readings, in first-seen order of the names.
    let mut order: Vec<String> = Vec::new();
    let mut series: BTreeMap<String, Vec<(u64, f64)>> = BTreeMap::new();
    let mut push = |name: &str, t: u64, j: f64| {
        if !j.is_finite() {
            return;
        }
        if !series.contains_key(name) {
            order.push(name.to_string());
        }
        series.entry(name.to_string()).or_default().push((t, j));
    };
    for s in samples {
        if let Some(j) = s.total_j {
            push("total", s.time_ns, j);
        }
        for (name, j) in &s.domains_j {
            push(name, s.time_ns, *j);
        }
    }
    let mut out = Vec::new();
    for name in order {
        let readings = &series[&name];
        let mut energy = Vec::with_capacity(readings.len());
        let mut power = Vec::with_capacity(readings.len());
        let mut sum = 0.0;
        for (i, &(t, j)) in readings.iter().enumerate() {
            if i > 0 {
                let (t0, j0) = readings[i - 1];
                let dj = if j >= j0 { j - j0 } else { 0.0 };
                sum += dj;
                if t > t0 {
                    power.push((t0, dj / ((t - t0) as f64 / 1e9)));
                }
            }
            energy.push((t, sum));
        }
        out.push(Counter {
            name: format!("energy {name}"),
            unit: "J",
            points: energy,
        });
        if !power.is_empty() {
            out.push(Counter {
                name: format!("power {name}"),
                unit: "W",
                points: power,
            });
        }
    }
    out
}

/// Event counts of one CPU, by what each export writes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuCounts {
    pub switches: u64,
    pub wakeups: u64,
    pub migrations: u64,
    pub idle: u64,
    pub frequency: u64,
    /// Fork, exec and exit.
    pub process: u64,
    /// Interrupt entries and exits (not every export writes them).
    pub interrupts: u64,
    /// The scheduler's runtime updates (sched_stat_runtime; not every export writes them).
    pub runtime: u64,
    /// Timer arming, CPU-time samples and call stacks (not every export writes them).
    pub stacks_and_samples: u64,
}

impl CpuCounts {
    pub fn count(&mut self, kind: &EventKind) {
        match kind {
            EventKind::Switch { .. } => self.switches += 1,
            EventKind::Wakeup { .. } => self.wakeups += 1,
            EventKind::Migrate { .. } => self.migrations += 1,
            EventKind::IdleEnter { .. } | EventKind::IdleExit => self.idle += 1,
            EventKind::Frequency { .. } => self.frequency += 1,
            EventKind::Fork { .. } | EventKind::Exec { .. } | EventKind::Exit { .. } => {
                self.process += 1
            }
            EventKind::InterruptEnter(_) | EventKind::InterruptExit => self.interrupts += 1,
            EventKind::Runtime { .. } => self.runtime += 1,
            EventKind::TimerArm { .. } | EventKind::CpuSample { .. } | EventKind::Stack { .. } => {
                self.stacks_and_samples += 1
            }
        }
    }

    pub fn total(&self) -> u64 {
        self.switches
            + self.wakeups
            + self.migrations
            + self.idle
            + self.frequency
            + self.process
            + self.interrupts
            + self.runtime
            + self.stacks_and_samples
    }
}

/// Per-CPU counts, indexed by CPU number.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts(pub Vec<CpuCounts>);

impl Counts {
    pub fn count(&mut self, cpu: u32, kind: &EventKind) {
        let i = cpu as usize;
        if self.0.len() <= i {
            self.0.resize(i + 1, CpuCounts::default());
        }
        self.0[i].count(kind);
    }

    pub fn sum(&self) -> CpuCounts {
        let mut s = CpuCounts::default();
        for c in &self.0 {
            s.switches += c.switches;
            s.wakeups += c.wakeups;
            s.migrations += c.migrations;
            s.idle += c.idle;
            s.frequency += c.frequency;
            s.process += c.process;
            s.interrupts += c.interrupts;
            s.stacks_and_samples += c.stacks_and_samples;
        }
        s
    }
}

/// What a view lacks, said in words, for the events it draws: the CPUs without
/// sched_switch records, without power:cpu_idle and without power:cpu_frequency (when the
/// view draws them: `idle_and_frequency`), and no energy samples. Empty when the recording
/// has everything.
pub fn missing(
    counts: &Counts,
    cpus: &[u32],
    counters: usize,
    idle_and_frequency: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    let lacking = |f: fn(&CpuCounts) -> u64| -> Vec<String> {
        cpus.iter()
            .filter(|&&c| counts.0.get(c as usize).map(f).unwrap_or(0) == 0)
            .map(|c| format!("cpu{c}"))
            .collect()
    };
    let say = |out: &mut Vec<String>, list: Vec<String>, what: &str| {
        if list.len() == cpus.len() && !cpus.is_empty() {
            out.push(format!("no {what} on any CPU"));
        } else if !list.is_empty() {
            out.push(format!("no {what} on {}", list.join(", ")));
        }
    };
    say(
        &mut out,
        lacking(|c| c.switches),
        "sched_switch records (no running/runnable/blocked states)",
    );
    if idle_and_frequency {
        say(
            &mut out,
            lacking(|c| c.idle),
            "power:cpu_idle records (no idle-state tracks)",
        );
        say(
            &mut out,
            lacking(|c| c.frequency),
            "power:cpu_frequency records (no frequency tracks)",
        );
    }
    if counters == 0 {
        out.push(
            "no energy samples (no meter: energy was estimated by the power model), so no power or energy counter tracks"
                .to_string(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_is_the_energy_over_each_interval_and_never_negative() {
        let s = |t: u64, j: f64| EnergySample {
            time_ns: t,
            total_j: Some(j),
            domains_j: vec![("package-0".into(), j / 2.0)],
        };
        // 2 J in the first 0.5 s (4 W), 1 J in the next 0.25 s (4 W), a reset (no
        // negative), then 3 J in 1 s (3 W).
        let c = energy_counters(&[
            s(1_000_000_000, 10.0),
            s(1_500_000_000, 12.0),
            s(1_750_000_000, 13.0),
            s(2_000_000_000, 1.0),
            s(3_000_000_000, 4.0),
        ]);
        let names: Vec<&str> = c.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "energy total",
                "power total",
                "energy package-0",
                "power package-0"
            ]
        );
        assert_eq!(
            c[0].points,
            vec![
                (1_000_000_000, 0.0),
                (1_500_000_000, 2.0),
                (1_750_000_000, 3.0),
                (2_000_000_000, 3.0),
                (3_000_000_000, 6.0)
            ]
        );
        assert_eq!(
            c[1].points,
            vec![
                (1_000_000_000, 4.0),
                (1_500_000_000, 4.0),
                (1_750_000_000, 0.0),
                (2_000_000_000, 3.0)
            ]
        );
        assert_eq!(c[3].points[0], (1_000_000_000, 2.0));
        assert_eq!(c[1].unit, "W");
    }

    #[test]
    fn missing_names_the_cpus_and_what_the_view_lacks() {
        let mut counts = Counts::default();
        counts.count(
            0,
            &EventKind::Switch {
                prev: 0,
                how: powerlens_core::sched::event::SwitchedOut::Preempted,
                next: 5,
            },
        );
        counts.count(0, &EventKind::IdleExit);
        let m = missing(&counts, &[0, 1], 0, true);
        assert_eq!(m.len(), 4, "{m:?}");
        assert!(m[0].starts_with("no sched_switch records") && m[0].ends_with("on cpu1"));
        assert!(m[1].contains("cpu_idle") && m[1].ends_with("on cpu1"));
        assert!(m[2].contains("cpu_frequency") && m[2].contains("on any CPU"));
        assert!(m[3].contains("no energy samples"));
        assert!(missing(&counts, &[0], 2, true).len() == 1);
        assert_eq!(missing(&counts, &[0, 1], 0, false).len(), 2);
    }
}
