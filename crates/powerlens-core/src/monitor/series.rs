//! The monitor's cumulative figures, interval after interval: node energy per domain, its
//! idle share, and the active rest attributed to processes by the CPU time the scheduler
//! charged them. Every interval closes exactly — per domain, node = idle + Σ processes — and
//! the counters only add non-negative amounts, so they never go backwards (a meter's
//! wrap-around is the meter's business: it hands over interval energies).
//!
//! A process series is keyed by the processes' cgroup and name (`gzip` in one cgroup is one
//! series however many pids ran it: a fleet keeps series per workload, not per pid), or
//! by process when [`MonitorConfig::per_pid`] asks. The `top` series of each interval by
//! energy are added to; the rest of the interval goes to one `other` series, so the
//! series plus idle still add up to the node. A series no interval has added to for
//! `series_ttl_ns` is dropped (its processes exited, or it left the top): memory follows
//! the live processes, not every one ever.
//!
//! A series born after the first scrape is born at zero: until a scrape has shown it once
//! ([`Monitor::mark_shown`]), [`Shown::shown`] is 0, whatever it already counted.
//! Prometheus cannot know what a counter held before its first sample, so a process series
//! that first appeared at its value would lose that value from every `increase()`, and the
//! processes' increases would no longer add up to the node's. The series the first scrape
//! finds show their values at once: what they counted before it is the baseline every
//! series starts from, spent before Prometheus looked.

use std::collections::BTreeMap;

use crate::provenance::Provenance;
use crate::sched::analysis::WakeupCauses;
use crate::sched::attribution::Split;

use super::processes::{ProcessInfo, ProcessKey};

/// Whether energy was measured or estimated: a label of every energy series, so that an
/// estimate never continues a measurement's series (a meter that disappears mid-run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Basis {
    Measured,
    Estimated,
}

impl Basis {
    pub fn of(p: &Provenance) -> Basis {
        match p {
            Provenance::Measured { .. } => Basis::Measured,
            _ => Basis::Estimated,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Basis::Measured => "measured",
            Basis::Estimated => "estimated",
        }
    }
}

#[derive(Debug, Clone)]
pub struct MonitorConfig {
    /// Series added to per interval, by energy (the rest is `other`).
    pub top: usize,
    /// ...and only those whose processes kept at least this share of one CPU busy over
    /// the interval: one that ran for a millisecond is not worth a series of its own.
    pub min_cpu: f64,
    /// A series per process (pid label) instead of one per (cgroup, comm): each
    /// short-lived pid then leaves a series of its own until the TTL drops it.
    pub per_pid: bool,
    /// A series nothing was added to for this long is dropped.
    pub series_ttl_ns: u64,
    /// At most this many process series; the least recently updated go first.
    pub max_series: usize,
}

impl Default for MonitorConfig {
    fn default() -> Self {
        MonitorConfig {
            top: 20,
            min_cpu: 0.01,
            per_pid: false,
            // Prometheus's own staleness horizon: a series that disappears sooner could
            // lose its last increase between two scrapes.
            series_ttl_ns: 300_000_000_000,
            max_series: 2_000,
        }
    }
}

/// One domain's energy over an interval.
#[derive(Debug, Clone, PartialEq)]
pub struct DomainInterval {
    pub name: String,
    pub joules: f64,
    /// Whether it adds into the node's total (packages and DRAM yes; subzones no).
    pub counts_in_total: bool,
    /// Its idle (baseline) power, W.
    pub idle_w: f64,
}

/// One process over an interval.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessInterval {
    pub info: ProcessInfo,
    pub runtime_ns: u64,
    /// Wake-ups seen in the traced share of the interval ([`IntervalInput::traced_s`]).
    pub wakeups: WakeupCauses,
    pub idle_wakeups: u64,
    /// Runs after blocking with no wake-up recorded (`wakeups` is short of these).
    pub unrecorded_wakeups: u64,
    /// CPU time the monitor's own tracing cost it (inside `runtime_ns`; estimated from
    /// the events recorded in its threads' context and each kind's measured cost); 0
    /// when the monitor does not trace.
    pub tracing_cpu_s: f64,
}

impl ProcessInterval {
    /// A process's CPU time alone, with no wake-ups (a procfs sample).
    pub fn cpu_only(info: ProcessInfo, runtime_ns: u64) -> ProcessInterval {
        ProcessInterval {
            info,
            runtime_ns,
            wakeups: WakeupCauses::default(),
            idle_wakeups: 0,
            unrecorded_wakeups: 0,
            tracing_cpu_s: 0.0,
        }
    }
}

/// What the monitor needs at the end of an interval.
#[derive(Debug, Clone)]
pub struct IntervalInput {
    /// The interval's end, CLOCK_MONOTONIC ns.
    pub end_ns: u64,
    pub elapsed_s: f64,
    pub domains: Vec<DomainInterval>,
    /// What the energy came from: the meter's name, or the model's.
    pub source: String,
    pub basis: Basis,
    pub processes: Vec<ProcessInterval>,
    /// Seconds of the interval the trace watched: `elapsed_s` when it traces throughout,
    /// less when it traces in windows, 0 when it does not trace. The processes' wake-ups
    /// are those seen then, and the series scale them to the whole interval.
    pub traced_s: f64,
}

/// What one interval held, for live views: every process, not only the top ones.
#[derive(Debug, Clone, Default)]
pub struct IntervalReport {
    pub elapsed_s: f64,
    /// Seconds of it the trace watched ([`IntervalInput::traced_s`]): per-second rates of
    /// the processes' wake-ups divide by this.
    pub traced_s: f64,
    /// Σ of the domains that count in the total, J.
    pub node_j: f64,
    pub idle_j: f64,
    /// Processes with their share of the total, J, most energy first.
    pub processes: Vec<(ProcessInterval, f64)>,
}

/// What a series counts.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counters {
    pub energy_j: f64,
    pub cpu_s: f64,
    /// Wake-ups, exact when the monitor traces throughout, else estimated: those seen in
    /// each interval's traced windows × the interval over the time traced.
    pub wakeups: WakeupEstimate,
    /// CPU time the monitor's tracing cost the series' processes.
    pub tracing_cpu_s: f64,
}

/// Wake-ups by cause, idle wake-ups and unrecorded wake-ups, scaled from what the trace
/// saw to the whole of each interval (fractional when estimated).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WakeupEstimate {
    pub thread: f64,
    pub timer: f64,
    pub irq: f64,
    pub softirq: f64,
    pub ipi_or_idle: f64,
    /// Times a thread was the first to run on a CPU that had been idle.
    pub idle: f64,
    /// Runs after blocking with no wake-up recorded.
    pub unrecorded: f64,
}

impl WakeupEstimate {
    fn add(&mut self, p: &ProcessInterval, scale: f64) {
        let w = &p.wakeups;
        self.thread += w.thread as f64 * scale;
        self.timer += w.timer as f64 * scale;
        self.irq += w.irq as f64 * scale;
        self.softirq += w.softirq as f64 * scale;
        self.ipi_or_idle += w.ipi_or_idle as f64 * scale;
        self.idle += p.idle_wakeups as f64 * scale;
        self.unrecorded += p.unrecorded_wakeups as f64 * scale;
    }
}

impl Counters {
    fn add(&mut self, p: &ProcessInterval, energy_j: f64, scale: f64) {
        self.energy_j += energy_j;
        self.add_activity(p, scale);
    }

    /// CPU time and wake-ups, without energy; `scale` takes the wake-ups seen in the
    /// traced time to the whole interval.
    fn add_activity(&mut self, p: &ProcessInterval, scale: f64) {
        self.cpu_s += p.runtime_ns as f64 / 1e9;
        self.wakeups.add(p, scale);
        self.tracing_cpu_s += p.tracing_cpu_s;
    }
}

/// The labels of a process series.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProcessLabels {
    /// The process, for per-pid series; `None` for a (cgroup, comm) series.
    pub key: Option<ProcessKey>,
    pub comm: String,
    pub cgroup: String,
    pub basis: Basis,
}

/// The cgroup label of a process whose cgroup was not read (it exited first).
pub const UNKNOWN_CGROUP: &str = "unknown";

fn cgroup_label(p: &ProcessInterval) -> String {
    p.info
        .cgroup
        .clone()
        .unwrap_or_else(|| UNKNOWN_CGROUP.to_string())
}

/// The processes of one interval that share a series' labels.
struct Group<'a> {
    labels: ProcessLabels,
    members: Vec<(&'a ProcessInterval, f64)>,
    energy_j: f64,
    runtime_ns: u64,
}

#[derive(Debug, Clone)]
pub struct ProcessSeries {
    pub counters: Shown<Counters>,
    pub updated_ns: u64,
}

/// Node energy series: per (domain, source, basis).
pub type NodeKey = (String, String, Basis);

/// A series' value, and whether a scrape has shown it yet.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Shown<T> {
    pub value: T,
    shown: bool,
}

impl<T: Copy + Default> Shown<T> {
    /// A new series: shown at once until the first scrape, born at zero after it.
    fn new(scraped: bool) -> Self {
        Shown {
            value: T::default(),
            shown: !scraped,
        }
    }

    /// What a scrape shows: 0 until one has shown the series.
    pub fn shown(&self) -> T {
        if self.shown {
            self.value
        } else {
            T::default()
        }
    }
}

#[derive(Debug, Default)]
pub struct Monitor {
    config: MonitorConfig,
    node: BTreeMap<NodeKey, Shown<f64>>,
    idle: BTreeMap<String, Shown<f64>>,
    processes: BTreeMap<ProcessLabels, ProcessSeries>,
    other: BTreeMap<Basis, Shown<Counters>>,
    cgroups: BTreeMap<(String, Basis), Shown<f64>>,
    intervals: u64,
    last_power_w: Option<f64>,
    /// Whether a scrape has shown the series yet.
    scraped: bool,
    /// Σ every process's `tracing_cpu_s`: what the monitor's tracing cost the machine's
    /// processes so far.
    tracing_cpu_s: f64,
    /// Σ the intervals' traced seconds.
    traced_s: f64,
}

impl Monitor {
    pub fn new(config: MonitorConfig) -> Monitor {
        Monitor {
            config,
            ..Monitor::default()
        }
    }

    /// Adds an interval; returns what it held.
    pub fn close_interval(&mut self, input: IntervalInput) -> IntervalReport {
        self.tracing_cpu_s += input.processes.iter().map(|p| p.tracing_cpu_s).sum::<f64>();
        self.traced_s += input.traced_s;
        // What the traced windows saw, scaled to the interval (1 when traced throughout).
        let scale = if input.traced_s > 0.0 {
            input.elapsed_s / input.traced_s
        } else {
            0.0
        };
        let weights: Vec<f64> = input
            .processes
            .iter()
            .map(|p| p.runtime_ns as f64)
            .collect();
        let total_weight: f64 = weights.iter().sum();
        let mut energy = vec![0.0; input.processes.len()];
        let (mut node_j, mut idle_j) = (0.0, 0.0);
        for d in &input.domains {
            let split = Split::new(d.joules, d.idle_w, input.elapsed_s, total_weight);
            let scraped = self.scraped;
            self.node
                .entry((d.name.clone(), input.source.clone(), input.basis))
                .or_insert_with(|| Shown::new(scraped))
                .value += split.total_j;
            self.idle
                .entry(d.name.clone())
                .or_insert_with(|| Shown::new(scraped))
                .value += split.idle_j;
            if d.counts_in_total {
                node_j += split.total_j;
                idle_j += split.idle_j;
                for (e, w) in energy.iter_mut().zip(&weights) {
                    *e += split.share(*w);
                }
            }
        }
        self.last_power_w = (input.elapsed_s > 0.0).then(|| node_j / input.elapsed_s);
        let mut ranked: Vec<(ProcessInterval, f64)> =
            input.processes.into_iter().zip(energy).collect();
        ranked.sort_by(|(a, ea), (b, eb)| {
            eb.total_cmp(ea)
                .then(b.runtime_ns.cmp(&a.runtime_ns))
                .then(a.info.key.cmp(&b.info.key))
        });
        // `other` exists from a basis's first interval, shown with the baseline when that
        // comes before the first scrape.
        let mut other = self
            .other
            .get(&input.basis)
            .map(|o| o.value)
            .unwrap_or_default();
        let scraped = self.scraped;
        for (p, e) in &ranked {
            self.cgroups
                .entry((cgroup_label(p), input.basis))
                .or_insert_with(|| Shown::new(scraped))
                .value += e;
        }
        for (i, group) in self.group(&ranked, input.basis).into_iter().enumerate() {
            let cpu = group.runtime_ns as f64 / 1e9 / input.elapsed_s.max(f64::MIN_POSITIVE);
            if i >= self.config.top || cpu < self.config.min_cpu {
                for (p, e) in group.members {
                    other.add(p, e, scale);
                }
                continue;
            }
            let labels = group.labels;
            if let Some(key) = labels.key.filter(|_| !self.processes.contains_key(&labels)) {
                // A pid reused while the old process's series is still kept: the
                // exposition cannot show two series with the same labels, and the old
                // one will not grow again.
                self.processes.retain(|k, _| {
                    (k.key.map(|k| k.pid), &k.comm, &k.cgroup, k.basis)
                        != (Some(key.pid), &labels.comm, &labels.cgroup, labels.basis)
                });
            }
            let s = self.processes.entry(labels).or_insert(ProcessSeries {
                counters: Shown::new(scraped),
                updated_ns: input.end_ns,
            });
            s.updated_ns = input.end_ns;
            for (p, e) in group.members {
                if s.counters.shown {
                    s.counters.value.add(p, e, scale);
                } else {
                    // Not shown yet: `other` carries its joules until a scrape has shown
                    // it at zero, so that every interval's joules are in a series
                    // Prometheus already knows and the increases add up to the node's
                    // exactly. Its CPU time and wake-ups are its own from the start.
                    s.counters.value.add_activity(p, scale);
                    other.energy_j += e;
                }
            }
        }
        let scraped = self.scraped;
        self.other
            .entry(input.basis)
            .or_insert_with(|| Shown::new(scraped))
            .value = other;
        self.drop_stale(input.end_ns);
        self.intervals += 1;
        IntervalReport {
            elapsed_s: input.elapsed_s,
            traced_s: input.traced_s,
            node_j,
            idle_j,
            processes: ranked,
        }
    }

    /// The interval's processes gathered by series labels, most energy first.
    fn group<'a>(&self, ranked: &'a [(ProcessInterval, f64)], basis: Basis) -> Vec<Group<'a>> {
        let mut groups: Vec<Group<'a>> = Vec::new();
        let mut index: BTreeMap<ProcessLabels, usize> = BTreeMap::new();
        for (p, e) in ranked {
            let labels = ProcessLabels {
                key: self.config.per_pid.then_some(p.info.key),
                comm: p.info.comm.clone(),
                cgroup: cgroup_label(p),
                basis,
            };
            let at = *index.entry(labels.clone()).or_insert_with(|| {
                groups.push(Group {
                    labels,
                    members: Vec::new(),
                    energy_j: 0.0,
                    runtime_ns: 0,
                });
                groups.len() - 1
            });
            let g = &mut groups[at];
            g.members.push((p, *e));
            g.energy_j += e;
            g.runtime_ns += p.runtime_ns;
        }
        groups.sort_by(|a, b| {
            b.energy_j
                .total_cmp(&a.energy_j)
                .then(b.runtime_ns.cmp(&a.runtime_ns))
                .then(a.labels.cmp(&b.labels))
        });
        groups
    }

    fn drop_stale(&mut self, now_ns: u64) {
        let ttl = self.config.series_ttl_ns;
        self.processes
            .retain(|_, s| now_ns.saturating_sub(s.updated_ns) <= ttl);
        if self.processes.len() > self.config.max_series {
            let mut by_age: Vec<(u64, ProcessLabels)> = self
                .processes
                .iter()
                .map(|(k, s)| (s.updated_ns, k.clone()))
                .collect();
            by_age.sort();
            let excess = self.processes.len() - self.config.max_series;
            for (_, k) in by_age.into_iter().take(excess) {
                self.processes.remove(&k);
            }
        }
    }

    /// Marks every series shown: called after a scrape rendered them.
    pub fn mark_shown(&mut self) {
        // A scrape before the first interval showed no series: the series the first
        // interval makes are still the baseline.
        self.scraped |= self.intervals > 0;
        self.node.values_mut().for_each(|s| s.shown = true);
        self.idle.values_mut().for_each(|s| s.shown = true);
        self.processes
            .values_mut()
            .for_each(|s| s.counters.shown = true);
        self.other.values_mut().for_each(|s| s.shown = true);
        self.cgroups.values_mut().for_each(|s| s.shown = true);
    }

    /// Cumulative node energy per (domain, source, basis), J.
    pub fn node(&self) -> &BTreeMap<NodeKey, Shown<f64>> {
        &self.node
    }

    /// Cumulative idle share per domain, J.
    pub fn idle(&self) -> &BTreeMap<String, Shown<f64>> {
        &self.idle
    }

    pub fn processes(&self) -> &BTreeMap<ProcessLabels, ProcessSeries> {
        &self.processes
    }

    /// What the processes without a series of their own added up to.
    pub fn other(&self) -> &BTreeMap<Basis, Shown<Counters>> {
        &self.other
    }

    /// Cumulative energy per (cgroup, basis), J: every process's, whatever its rank.
    pub fn cgroups(&self) -> &BTreeMap<(String, Basis), Shown<f64>> {
        &self.cgroups
    }

    /// The last interval's power (Σ domains that count in the total), W.
    pub fn last_power_w(&self) -> Option<f64> {
        self.last_power_w
    }

    /// CPU time the monitor's tracing cost the processes it watched, in total.
    pub fn tracing_cpu_s(&self) -> f64 {
        self.tracing_cpu_s
    }

    /// Seconds the trace watched, over every interval so far.
    pub fn traced_s(&self) -> f64 {
        self.traced_s
    }

    pub fn intervals(&self) -> u64 {
        self.intervals
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(pid: u32, runtime_ns: u64, cgroup: Option<&str>) -> ProcessInterval {
        ProcessInterval {
            info: ProcessInfo {
                key: ProcessKey {
                    pid,
                    serial: pid as u64,
                },
                comm: format!("p{pid}"),
                any_comm: String::new(),
                cgroup: cgroup.map(str::to_string),
                parent: None,
            },
            runtime_ns,
            wakeups: WakeupCauses {
                timer: 2,
                ..WakeupCauses::default()
            },
            idle_wakeups: 1,
            unrecorded_wakeups: 0,
            tracing_cpu_s: 0.0,
        }
    }

    /// The pid a test process's name carries (`p7`).
    fn pid_of(k: &ProcessLabels) -> u32 {
        k.comm[1..].parse().unwrap()
    }

    fn input(end_s: u64, processes: Vec<ProcessInterval>, basis: Basis) -> IntervalInput {
        IntervalInput {
            end_ns: end_s * 1_000_000_000,
            elapsed_s: 1.0,
            domains: vec![
                DomainInterval {
                    name: "package-0".into(),
                    joules: 20.0,
                    counts_in_total: true,
                    idle_w: 5.0,
                },
                DomainInterval {
                    name: "core".into(),
                    joules: 8.0,
                    counts_in_total: false,
                    idle_w: 2.0,
                },
            ],
            source: "rapl-powercap".into(),
            basis,
            processes,
            traced_s: 1.0,
        }
    }

    /// A process that kept less than 1% of a CPU busy has no series of its own, even when
    /// it is most of what ran.
    #[test]
    fn a_process_that_barely_ran_is_other() {
        let mut m = Monitor::new(MonitorConfig::default());
        m.close_interval(input(
            1,
            vec![process(1, 10_000_000, None), process(2, 9_000_000, None)],
            Basis::Measured,
        ));
        let pids: Vec<u32> = m.processes().keys().map(pid_of).collect();
        assert_eq!(pids, [1], "9 ms of 1 s is below the 1% floor, 10 ms is not");
        assert!(m.other()[&Basis::Measured].value.energy_j > 0.0);
    }

    /// 20 J over 1 s with 5 W idle: 15 J active, split 3:1 by CPU time (hand-computed).
    /// Only the top process gets a series; the other goes to `other`; Σ closes on the node.
    #[test]
    fn an_interval_closes_exactly_and_the_rest_is_other() {
        let mut m = Monitor::new(MonitorConfig {
            top: 1,
            ..MonitorConfig::default()
        });
        let r = m.close_interval(input(
            1,
            vec![
                process(1, 250_000_000, None),
                process(2, 750_000_000, Some("/a")),
            ],
            Basis::Measured,
        ));
        assert_eq!((r.node_j, r.idle_j), (20.0, 5.0));
        assert_eq!(r.processes[0].0.info.key.pid, 2, "most energy first");
        assert!((r.processes[0].1 - 11.25).abs() < 1e-9);
        assert!((r.processes[1].1 - 3.75).abs() < 1e-9);
        let (labels, s) = m.processes().iter().next().unwrap();
        assert_eq!((pid_of(labels), labels.cgroup.as_str()), (2, "/a"));
        assert!((s.counters.value.energy_j - 11.25).abs() < 1e-9);
        assert_eq!(s.counters.value.cpu_s, 0.75);
        assert_eq!(s.counters.value.wakeups.timer, 2.0);
        let other = m.other()[&Basis::Measured].value;
        assert!((other.energy_j - 3.75).abs() < 1e-9);
        assert_eq!(m.idle()["package-0"].value, 5.0);
        assert_eq!(
            m.idle()["core"].value,
            2.0,
            "every domain has its idle share"
        );
        let cg: f64 = m.cgroups().values().map(|s| s.value).sum();
        assert!((cg + m.idle()["package-0"].value - 20.0).abs() < 1e-9);
        assert_eq!(
            m.cgroups()[&(UNKNOWN_CGROUP.to_string(), Basis::Measured)].value,
            3.75
        );
        assert_eq!(m.last_power_w(), Some(20.0));
    }

    /// Nothing ran: the whole interval is idle, no process gets a negative or NaN share.
    #[test]
    fn an_idle_interval_is_all_idle() {
        let mut m = Monitor::new(MonitorConfig::default());
        let r = m.close_interval(input(1, vec![process(1, 0, None)], Basis::Estimated));
        assert_eq!(r.idle_j, 20.0);
        assert_eq!(r.processes[0].1, 0.0);
        assert_eq!(
            m.node()[&("package-0".into(), "rapl-powercap".into(), Basis::Estimated)].value,
            20.0
        );
    }

    /// The series the first scrape finds show their values; a process series born after a
    /// scrape is shown at 0 until the next one, and `other` carries its joules until then
    /// (its CPU time stays its own).
    #[test]
    fn series_born_after_a_scrape_are_born_at_zero() {
        let mut m = Monitor::new(MonitorConfig {
            min_cpu: 0.0,
            ..MonitorConfig::default()
        });
        m.mark_shown();
        m.close_interval(input(1, vec![process(1, 5, None)], Basis::Measured));
        let node = |m: &Monitor| m.node().values().map(|s| s.shown()).sum::<f64>();
        let energy_of = |m: &Monitor, pid: u32| {
            m.processes()
                .iter()
                .find(|(k, _)| pid_of(k) == pid)
                .map(|(_, s)| s.counters.shown().energy_j)
        };
        assert_eq!(
            node(&m),
            20.0 + 8.0,
            "before the first scrape: the baseline"
        );
        m.mark_shown();
        assert!((energy_of(&m, 1).unwrap() - 15.0).abs() < 1e-9);
        let other = |m: &Monitor| m.other()[&Basis::Measured].shown().energy_j;
        assert_eq!(other(&m), 0.0, "other is shown from the start");
        m.close_interval(input(2, vec![process(2, 5, None)], Basis::Measured));
        assert_eq!(energy_of(&m, 2), Some(0.0), "a new series starts at 0");
        assert!((other(&m) - 15.0).abs() < 1e-9, "and other carries it");
        assert!((energy_of(&m, 1).unwrap() - 15.0).abs() < 1e-9);
        m.mark_shown();
        assert_eq!(energy_of(&m, 2), Some(0.0), "shown at 0 once");
        let cpu_of_2 = m
            .processes()
            .iter()
            .find(|(k, _)| pid_of(k) == 2)
            .unwrap()
            .1;
        assert_eq!(
            cpu_of_2.counters.shown().cpu_s,
            5e-9,
            "its CPU time is its own"
        );
        m.close_interval(input(3, vec![process(2, 5, None)], Basis::Measured));
        assert!(
            (energy_of(&m, 2).unwrap() - 15.0).abs() < 1e-9,
            "then it counts"
        );
        assert!((other(&m) - 15.0).abs() < 1e-9);
    }

    /// A series not added to for longer than the TTL is dropped; the cap keeps the most
    /// recently updated; a measured series and an estimated one of a process are two.
    #[test]
    fn stale_series_are_dropped_and_bases_never_mix() {
        let mut m = Monitor::new(MonitorConfig {
            top: 5,
            series_ttl_ns: 10_000_000_000,
            max_series: 2,
            min_cpu: 0.0,
            per_pid: true,
        });
        m.close_interval(input(1, vec![process(1, 1, None)], Basis::Measured));
        m.close_interval(input(2, vec![process(1, 1, None)], Basis::Estimated));
        assert_eq!(m.processes().len(), 2);
        m.close_interval(input(3, vec![process(2, 1, None)], Basis::Estimated));
        assert_eq!(m.processes().len(), 2, "capped at two");
        assert!(m
            .processes()
            .keys()
            .all(|k| !(pid_of(k) == 1 && k.basis == Basis::Measured)));
        m.close_interval(input(20, vec![process(3, 1, None)], Basis::Estimated));
        let pids: Vec<u32> = m.processes().keys().map(pid_of).collect();
        assert_eq!(pids, [3], "the others were not updated for 17 s > 10 s");
        // Pid 3 reused by a new process with the same name: one series, the new one.
        let mut reused = process(3, 1, None);
        reused.info.key.serial = 99;
        m.close_interval(input(21, vec![reused], Basis::Estimated));
        let keys: Vec<u64> = m
            .processes()
            .keys()
            .map(|k| k.key.unwrap().serial)
            .collect();
        assert_eq!(keys, [99]);
    }

    /// Traced for 0.05 s of a 1 s interval: the 2 timer wake-ups, 1 idle wake-up and 1
    /// unrecorded one seen then count as 40, 20 and 20 (× 1/0.05); the CPU time, read for
    /// the whole interval, is not scaled. A monitor that does not trace adds none.
    #[test]
    fn wakeups_seen_in_a_window_are_scaled_to_the_interval() {
        let mut m = Monitor::new(MonitorConfig::default());
        let mut p = process(1, 500_000_000, None);
        p.unrecorded_wakeups = 1;
        let mut i = input(1, vec![p.clone()], Basis::Measured);
        i.traced_s = 0.05;
        m.close_interval(i);
        let c = m.processes().values().next().unwrap().counters.value;
        assert!((c.wakeups.timer - 40.0).abs() < 1e-9, "{c:?}");
        assert!((c.wakeups.idle - 20.0).abs() < 1e-9);
        assert!((c.wakeups.unrecorded - 20.0).abs() < 1e-9);
        assert!((c.cpu_s - 0.5).abs() < 1e-12);
        assert!((m.traced_s() - 0.05).abs() < 1e-12);
        let mut untraced = input(2, vec![p], Basis::Measured);
        untraced.traced_s = 0.0;
        m.close_interval(untraced);
        let c2 = m.processes().values().next().unwrap().counters.value;
        assert_eq!(c2.wakeups, c.wakeups);
        assert!((c2.cpu_s - 1.0).abs() < 1e-12);
    }

    /// Issue 29: 1,000 processes a minute (17 a second, each 20 ms of CPU: above the 1%
    /// floor), three names in two cgroups, beside one long-lived process, for 6 minutes
    /// (past the 5 min TTL), scraped every second. Keyed by (cgroup, comm), the churn is
    /// 6 series and the long-lived process 1, however long it runs; keyed by pid, every
    /// short-lived process leaves a series until the cap of 2,000. Either way, every
    /// interval closes exactly as Prometheus sees it: the increase of the node is the
    /// increases of idle, of the series (a series' first scrape is its start) and of other.
    #[test]
    fn churn_makes_a_series_per_cgroup_and_name_not_per_pid() {
        let churn = |per_pid: bool| {
            let mut m = Monitor::new(MonitorConfig {
                per_pid,
                ..MonitorConfig::default()
            });
            let mut pid = 1000;
            let mut before: (BTreeMap<ProcessLabels, f64>, f64, f64) = Default::default();
            for second in 1..=360 {
                let mut processes = vec![process(1, 100_000_000, Some("/db.service"))];
                for i in 0..17 {
                    pid += 1;
                    let mut p = process(pid, 20_000_000, Some(["/a.service", "/b.service"][i % 2]));
                    p.info.comm = ["gzip", "sh", "seq"][i % 3].to_string();
                    processes.push(p);
                }
                m.close_interval(input(second, processes, Basis::Measured));
                m.mark_shown();
                let now: BTreeMap<ProcessLabels, f64> = m
                    .processes()
                    .iter()
                    .map(|(k, s)| (k.clone(), s.counters.shown().energy_j))
                    .collect();
                let series: f64 = now
                    .iter()
                    .map(|(k, j)| before.0.get(k).map_or(0.0, |b| j - b))
                    .sum();
                let other = m.other()[&Basis::Measured].shown().energy_j;
                let idle = m.idle()["package-0"].shown();
                if second > 1 {
                    let (d_other, d_idle) = (other - before.1, idle - before.2);
                    assert!(
                        (d_idle + series + d_other - 20.0).abs() < 1e-6,
                        "second {second}: {d_idle} + {series} + {d_other}"
                    );
                }
                before = (now, other, idle);
            }
            m.processes().len()
        };
        assert_eq!(churn(false), 7, "6 (cgroup, comm) pairs and the database");
        assert_eq!(churn(true), 2_000, "capped, every one a pid");
    }

    /// Keyed by name, a new `gzip` pid adds its joules to the `gzip` series a scrape has
    /// already shown, at once; per pid, the new pid's series waits a scrape and `other`
    /// carries its 15 J (20 J less 5 J idle, hand-computed).
    #[test]
    fn a_new_pid_of_a_name_already_shown_counts_at_once() {
        let gzip = |pid| {
            let mut p = process(pid, 500_000_000, Some("/a.service"));
            p.info.comm = "gzip".into();
            p
        };
        for per_pid in [false, true] {
            let mut m = Monitor::new(MonitorConfig {
                per_pid,
                ..MonitorConfig::default()
            });
            m.close_interval(input(1, vec![gzip(1)], Basis::Measured));
            m.mark_shown();
            m.close_interval(input(2, vec![gzip(2)], Basis::Measured));
            m.mark_shown();
            let series: Vec<f64> = m
                .processes()
                .values()
                .map(|s| s.counters.shown().energy_j)
                .collect();
            let other = m.other()[&Basis::Measured].shown().energy_j;
            if per_pid {
                assert_eq!((series.len(), other), (2, 15.0), "{series:?}");
            } else {
                assert_eq!((series, other), (vec![30.0], 0.0));
            }
        }
    }
}
