//! The energy to retire a workload: one record per run, and the summary over runs.
//!
//! Energy = power × time. A run's figure of merit is the energy it took to retire its work
//! (`energy_j`), with its wall time and the energy-delay product beside it; average power
//! alone says nothing about which configuration is cheaper.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::battery_life::{BatteryReport, ChargeSpan};
use crate::provenance::Provenance;
use crate::stats::{outliers, Summary};

/// How the measured command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitStatus {
    /// Exit code, when it exited normally.
    pub code: Option<i32>,
    /// Signal number, when a signal killed it.
    pub signal: Option<i32>,
}

impl ExitStatus {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// e.g. `exit code 3` or `killed by signal 9`.
    pub fn describe(&self) -> String {
        match (self.code, self.signal) {
            (Some(c), _) => format!("exit code {c}"),
            (None, Some(s)) => format!("killed by signal {s}"),
            (None, None) => "unknown exit status".into(),
        }
    }
}

/// Energy of one domain over one run.
#[derive(Debug, Clone, PartialEq)]
pub struct DomainEnergy {
    pub name: String,
    pub joules: f64,
    /// Whether it adds into the total (packages and DRAM: yes; subzones and psys: no).
    pub counts_in_total: bool,
}

/// What the rest of the machine did during one run: `/proc/stat`'s busy time over the
/// run, less the command's own CPU time (getrusage of it and its descendants).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OtherLoad {
    /// CPU-seconds other processes (and the kernel for them) used meanwhile.
    pub other_cpu_s: f64,
    /// That, as a share of all the CPUs' time over the run, 0–1.
    pub other_cpu_share: f64,
}

/// Above this share of the CPUs, other processes' load is called out beside a result:
/// a run then competes for CPUs, caches and the power budget.
pub const BUSY_OTHER_CPU_SHARE: f64 = 0.1;

impl OtherLoad {
    /// From the machine's busy CPU-seconds over `elapsed_s` on `cpus` CPUs, and the
    /// command's own: the difference, never below 0 (the two clocks tick at 10 ms).
    pub fn of(machine_busy_s: f64, own_s: f64, elapsed_s: f64, cpus: u32) -> OtherLoad {
        let other = machine_busy_s - own_s;
        OtherLoad {
            // Within rounding of its operands, none (sums of the same spins).
            other_cpu_s: if other <= 1e-9 * machine_busy_s.abs() {
                0.0
            } else {
                other
            },
            other_cpu_share: other_cpu_share(machine_busy_s, own_s, elapsed_s, cpus),
        }
    }
}

/// Other processes' share of `cpus` CPUs over `elapsed_s`: the machine's busy time less
/// the measured process's, clamped to 0–1 (the two clocks tick at 10 ms).
pub fn other_cpu_share(machine_busy_s: f64, own_s: f64, elapsed_s: f64, cpus: u32) -> f64 {
    if elapsed_s <= 0.0 || cpus == 0 {
        return 0.0;
    }
    ((machine_busy_s - own_s) / (elapsed_s * f64::from(cpus))).clamp(0.0, 1.0)
}

/// What the orchestrator measured for one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    pub wall_s: f64,
    /// User + system CPU time of the command and its waited-for descendants.
    pub cpu_s: f64,
    /// The interval the energy covers: the wall time, or the fixed window (`--window`).
    pub energy_interval_s: f64,
    pub domains: Vec<DomainEnergy>,
    pub exit: ExitStatus,
    pub provenance: Provenance,
    /// The battery's charge before and after, when a discharging battery was read.
    pub charge: Option<ChargeSpan>,
    /// The machine's other load during the run, or why it is unknown.
    pub other_load: Result<OtherLoad, String>,
}

/// Idle power measured before (and after) the runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    pub seconds: f64,
    pub before_w: f64,
    pub after_w: Option<f64>,
    pub provenance: Provenance,
}

impl Baseline {
    /// The idle power runs are compared against: the mean of before and after when both exist.
    pub fn power_w(&self) -> f64 {
        match self.after_w {
            Some(after) => (self.before_w + after) / 2.0,
            None => self.before_w,
        }
    }

    /// Relative change from before to after, when measured after too.
    pub fn drift(&self) -> Option<f64> {
        let after = self.after_w?;
        (self.before_w > 0.0).then(|| (after - self.before_w) / self.before_w)
    }
}

/// One run as reported and stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub index: usize,
    pub wall_s: f64,
    pub cpu_s: f64,
    /// Total energy: packages plus DRAM, never a subzone twice.
    pub energy_j: f64,
    /// Every domain read, name → joules (subzones included, for the record).
    pub domains: BTreeMap<String, f64>,
    /// `energy_j` over the interval it covers.
    pub power_w: f64,
    /// Energy-delay product, energy × wall time.
    pub edp_js: f64,
    /// Energy above the idle baseline over the same interval, when a baseline was measured.
    /// Never negative: a run that measured below the baseline (noise) reports 0 and is flagged.
    pub energy_above_baseline_j: Option<f64>,
    #[serde(default)]
    pub below_baseline: bool,
    pub exit: ExitStatus,
    pub provenance: Provenance,
    /// The battery's charge (percent of full) before and after the run, when a
    /// discharging battery was read: the conventional battery life is timed from these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub charge: Option<ChargeSpan>,
    /// Other processes' CPU-seconds during the run (`/proc/stat` less the command's own);
    /// absent in results saved before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_cpu_s: Option<f64>,
    /// The same as a share of all the CPUs' time over the run, 0–1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_cpu_share: Option<f64>,
    /// Why the other load is unknown (`/proc/stat` could not be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_load_unavailable: Option<String>,
}

impl Run {
    pub fn new(index: usize, m: Measurement, baseline: Option<&Baseline>) -> Run {
        let energy_j: f64 = m
            .domains
            .iter()
            .filter(|d| d.counts_in_total)
            .map(|d| d.joules)
            .sum();
        let above = baseline.map(|b| energy_j - b.power_w() * m.energy_interval_s);
        Run {
            index,
            wall_s: m.wall_s,
            cpu_s: m.cpu_s,
            energy_j,
            domains: m
                .domains
                .iter()
                .map(|d| (d.name.clone(), d.joules))
                .collect(),
            power_w: if m.energy_interval_s > 0.0 {
                energy_j / m.energy_interval_s
            } else {
                0.0
            },
            edp_js: energy_j * m.wall_s,
            energy_above_baseline_j: above.map(|a| a.max(0.0)),
            below_baseline: above.is_some_and(|a| a < 0.0),
            exit: m.exit,
            provenance: m.provenance,
            charge: m.charge,
            other_cpu_s: m.other_load.as_ref().ok().map(|l| l.other_cpu_s),
            other_cpu_share: m.other_load.as_ref().ok().map(|l| l.other_cpu_share),
            other_load_unavailable: m.other_load.err(),
        }
    }
}

/// Summary of every figure over the runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    pub runs: usize,
    pub wall_s: Summary,
    pub cpu_s: Summary,
    pub energy_j: Summary,
    pub power_w: Summary,
    pub edp_js: Summary,
    pub domains: BTreeMap<String, Summary>,
    pub energy_above_baseline_j: Option<Summary>,
}

impl RunSummary {
    /// Summarizes runs; `None` when there are none.
    pub fn of(runs: &[Run]) -> Option<RunSummary> {
        let figure = |f: fn(&Run) -> f64| Summary::of(&runs.iter().map(f).collect::<Vec<_>>());
        let mut domains = BTreeMap::new();
        for name in runs.iter().flat_map(|r| r.domains.keys()) {
            if !domains.contains_key(name) {
                let values: Vec<f64> = runs
                    .iter()
                    .filter_map(|r| r.domains.get(name).copied())
                    .collect();
                domains.insert(name.clone(), Summary::of(&values)?);
            }
        }
        let above: Vec<f64> = runs
            .iter()
            .filter_map(|r| r.energy_above_baseline_j)
            .collect();
        Some(RunSummary {
            runs: runs.len(),
            wall_s: figure(|r| r.wall_s)?,
            cpu_s: figure(|r| r.cpu_s)?,
            energy_j: figure(|r| r.energy_j)?,
            power_w: figure(|r| r.power_w)?,
            edp_js: figure(|r| r.edp_js)?,
            domains,
            energy_above_baseline_j: Summary::of(&above),
        })
    }
}

/// Relative baseline drift above which the baseline is flagged as unreliable.
pub const BASELINE_DRIFT_WARNING: f64 = 0.05;

/// Warnings a careful reader needs: outlier runs, a drifting baseline, runs below baseline,
/// and figures that are estimates rather than measurements.
pub fn warnings(runs: &[Run], baseline: Option<&Baseline>) -> Vec<String> {
    let mut out = Vec::new();
    type Figure = fn(&Run) -> f64;
    let figures: [(&str, Figure); 2] = [("wall time", |r| r.wall_s), ("energy", |r| r.energy_j)];
    for (what, f) in figures {
        let values: Vec<f64> = runs.iter().map(f).collect();
        let flagged = outliers(&values);
        if !flagged.is_empty() {
            let which: Vec<String> = flagged
                .iter()
                .map(|i| format!("#{}", runs[*i].index + 1))
                .collect();
            out.push(format!(
                "statistical outliers in {what} (modified z-score > 3.5): run {}; other programs or \
                 caches may have interfered — consider --warmup or more --runs on a quiet machine",
                which.join(", ")
            ));
        }
    }
    if let Some(drift) = baseline.and_then(Baseline::drift) {
        if drift.abs() > BASELINE_DRIFT_WARNING {
            out.push(format!(
                "idle baseline drifted by {:+.1}% between before and after the runs; energy above baseline is unreliable (background activity, thermal drift?)",
                drift * 100.0
            ));
        }
    }
    let zero = runs.iter().filter(|r| r.energy_j <= 0.0).count();
    if zero > 0 {
        out.push(format!(
            "{zero} run(s) measured 0 J: the command finished before the energy counter advanced (RAPL updates about every millisecond), so its energy is below the meter's resolution — lengthen the workload, repeat it inside one run, or measure a fixed --window"
        ));
    }
    let below = runs.iter().filter(|r| r.below_baseline).count();
    if below > 0 {
        out.push(format!(
            "{below} run(s) measured at or below the idle baseline: their energy above baseline is reported as 0 (within noise)"
        ));
    }
    if let Some(Provenance::Estimated {
        model,
        parameters,
        machine_class_reason,
        ..
    }) = runs.first().map(|r| &r.provenance)
    {
        let chosen = machine_class_reason
            .as_ref()
            .map(|why| format!(", chosen because {why}"))
            .unwrap_or_default();
        out.push(format!(
            "no energy meter could be read: energy is ESTIMATED by the power model '{model}' ({parameters}{chosen}); see `powerlens info` for why each meter is unavailable"
        ));
    }
    if runs.first().is_some_and(|r| r.provenance.is_mock()) {
        out.push(crate::verdict::MOCKED_QUALIFIER.to_string());
    }
    out
}

/// The result of `powerlens run`: every run, the summary and what a reader must know.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// The measured command and its arguments.
    pub command: Vec<String>,
    /// Provenance of the energy figures (the meter, or the model).
    pub provenance: Provenance,
    /// Fixed measurement window per run (`--window`), when used.
    pub window_s: Option<f64>,
    pub baseline: Option<Baseline>,
    pub runs: Vec<Run>,
    /// `None` when no run finished.
    pub summary: Option<RunSummary>,
    pub warnings: Vec<String>,
    /// False when the series stopped before all runs finished.
    pub complete: bool,
    /// Why it stopped early (Ctrl-C, a failing run).
    pub stopped_early: Option<String>,
    /// Battery-life figures, when the energy comes from a discharging battery or a
    /// capacity was given (`--battery-wh`); `None` on a machine without a battery.
    #[serde(default)]
    pub battery: Option<BatteryReport>,
}

impl RunResult {
    /// Builds the result from the measurements in run order. `extra_warnings` come from the
    /// orchestration (e.g. an unsafe read interval) and are listed first.
    pub fn new(
        command: Vec<String>,
        provenance: Provenance,
        window_s: Option<f64>,
        baseline: Option<Baseline>,
        measurements: Vec<Measurement>,
        extra_warnings: Vec<String>,
        stopped_early: Option<String>,
    ) -> RunResult {
        let runs: Vec<Run> = measurements
            .into_iter()
            .enumerate()
            .map(|(i, m)| Run::new(i, m, baseline.as_ref()))
            .collect();
        let mut all_warnings = extra_warnings;
        all_warnings.extend(warnings(&runs, baseline.as_ref()));
        RunResult {
            command,
            provenance,
            window_s,
            summary: RunSummary::of(&runs),
            baseline,
            runs,
            warnings: all_warnings,
            complete: stopped_early.is_none(),
            stopped_early,
            battery: None,
        }
    }

    /// The charge spans of the runs that have one, in run order.
    pub fn charges(&self) -> Vec<ChargeSpan> {
        self.runs.iter().filter_map(|r| r.charge).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(wall: f64, pkg: f64, core: f64, dram: f64) -> Measurement {
        Measurement {
            wall_s: wall,
            cpu_s: wall * 0.9,
            energy_interval_s: wall,
            domains: vec![
                DomainEnergy {
                    name: "package-0".into(),
                    joules: pkg,
                    counts_in_total: true,
                },
                DomainEnergy {
                    name: "package-0/core".into(),
                    joules: core,
                    counts_in_total: false,
                },
                DomainEnergy {
                    name: "package-0/dram".into(),
                    joules: dram,
                    counts_in_total: true,
                },
            ],
            exit: ExitStatus {
                code: Some(0),
                signal: None,
            },
            provenance: Provenance::Measured {
                source: "rapl-powercap".into(),
            },
            charge: None,
            other_load: Err("not measured in this test".into()),
        }
    }

    #[test]
    fn totals_count_packages_and_dram_once() {
        let run = Run::new(0, measured(2.0, 40.0, 30.0, 6.0), None);
        assert_eq!(run.energy_j, 46.0, "core is inside the package");
        assert_eq!(run.power_w, 23.0);
        assert_eq!(run.edp_js, 92.0);
        assert_eq!(run.domains.len(), 3);
        assert_eq!(run.energy_above_baseline_j, None);
    }

    #[test]
    fn baseline_subtraction_and_drift() {
        let b = Baseline {
            seconds: 1.0,
            before_w: 10.0,
            after_w: Some(12.0),
            provenance: Provenance::Measured { source: "x".into() },
        };
        // energy 46 J over 2 s against 11 W idle: 46 − 22 = 24 J above baseline.
        let run = Run::new(0, measured(2.0, 40.0, 30.0, 6.0), Some(&b));
        assert_eq!(run.energy_above_baseline_j, Some(24.0));
        assert!((b.drift().unwrap() - 0.2).abs() < 1e-12);
        let w = warnings(&[run], Some(&b));
        assert!(w.iter().any(|w| w.contains("drifted by +20.0%")), "{w:?}");
        // Below baseline: reported as 0, never negative, and flagged.
        let low = Run::new(1, measured(2.0, 10.0, 5.0, 1.0), Some(&b));
        assert_eq!(low.energy_above_baseline_j, Some(0.0));
        assert!(low.below_baseline);
    }

    #[test]
    fn summary_over_runs() {
        let runs: Vec<Run> = [1.0, 2.0, 3.0]
            .iter()
            .enumerate()
            .map(|(i, w)| Run::new(i, measured(*w, 10.0 * w, 5.0, 0.0), None))
            .collect();
        let s = RunSummary::of(&runs).unwrap();
        assert_eq!(s.runs, 3);
        assert_eq!(s.wall_s.mean, 2.0);
        assert_eq!(s.energy_j.mean, 20.0);
        assert_eq!(s.power_w.mean, 10.0);
        assert_eq!(s.domains["package-0/core"].mean, 5.0);
        assert!(RunSummary::of(&[]).is_none());
    }

    #[test]
    fn zero_energy_is_flagged_as_below_resolution() {
        let run = Run::new(0, measured(0.001, 0.0, 0.0, 0.0), None);
        let w = warnings(&[run], None);
        assert!(
            w.iter()
                .any(|w| w.contains("measured 0 J") && w.contains("resolution")),
            "{w:?}"
        );
    }

    #[test]
    fn estimates_are_flagged() {
        let mut m = measured(1.0, 1.0, 1.0, 1.0);
        m.provenance = crate::model::PowerModel::for_machine(&Default::default()).provenance();
        let w = warnings(&[Run::new(0, m, None)], None);
        assert!(w.iter().any(|w| w.contains("ESTIMATED")), "{w:?}");
    }
}
