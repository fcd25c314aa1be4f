//! Plain-language verdicts: which of two configurations retires the workload with less
//! energy, and in how much time. Ratios are candidate / baseline, on the means.

use serde::{Deserialize, Serialize};

use crate::provenance::Provenance;
use crate::run::RunSummary;

/// Candidate / baseline ratios of the means.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Ratios {
    pub time: f64,
    pub energy: f64,
    pub power: f64,
    pub edp: f64,
}

impl Ratios {
    pub fn of(baseline: &RunSummary, candidate: &RunSummary) -> Ratios {
        Ratios::from_means(
            (baseline.wall_s.mean, baseline.energy_j.mean),
            (candidate.wall_s.mean, candidate.energy_j.mean),
        )
    }

    /// From (seconds, joules) of baseline and candidate.
    pub fn from_means(baseline: (f64, f64), candidate: (f64, f64)) -> Ratios {
        let (bt, be) = baseline;
        let (ct, ce) = candidate;
        Ratios {
            time: ct / bt,
            energy: ce / be,
            power: (ce / ct) / (be / bt),
            edp: (ce * ct) / (be * bt),
        }
    }
}

/// Where the candidate stands against the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictClass {
    BetterOnBoth,
    WorseOnBoth,
    TradeOff,
    Equivalent,
}

/// Changes smaller than this (relative) are "the same" in a sentence without statistics.
pub const NEGLIGIBLE: f64 = 0.005;

pub fn classify(r: &Ratios) -> VerdictClass {
    let changed = |ratio: f64| ((ratio - 1.0).abs() >= NEGLIGIBLE).then_some(ratio);
    classify_changes(changed(r.time), changed(r.energy))
}

/// The class from the time and energy ratios that changed (`None`: no real change, e.g. not
/// statistically significant).
pub fn classify_changes(time: Option<f64>, energy: Option<f64>) -> VerdictClass {
    let better = |r: Option<f64>| r.map(|r| r < 1.0);
    match (better(time), better(energy)) {
        (None, None) => VerdictClass::Equivalent,
        (Some(true) | None, Some(true) | None) => VerdictClass::BetterOnBoth,
        (Some(false) | None, Some(false) | None) => VerdictClass::WorseOnBoth,
        _ => VerdictClass::TradeOff,
    }
}

fn percent(ratio: f64) -> String {
    format!("{:.1}%", (ratio - 1.0).abs() * 100.0)
}

/// E.g. "powersaving takes 9.1% longer and needs 6.9% more energy to retire the workload;
/// its average power is 2.0% lower."
pub fn sentence(candidate: &str, r: &Ratios) -> String {
    let time = if (r.time - 1.0).abs() < NEGLIGIBLE {
        "takes the same time".to_string()
    } else if r.time > 1.0 {
        format!("takes {} longer", percent(r.time))
    } else {
        format!("takes {} less time", percent(r.time))
    };
    let energy = if (r.energy - 1.0).abs() < NEGLIGIBLE {
        "needs the same energy".to_string()
    } else {
        format!(
            "needs {} {} energy",
            percent(r.energy),
            if r.energy > 1.0 { "more" } else { "less" }
        )
    };
    let power = if (r.power - 1.0).abs() < NEGLIGIBLE {
        "the same".to_string()
    } else {
        format!(
            "{} {}",
            percent(r.power),
            if r.power > 1.0 { "higher" } else { "lower" }
        )
    };
    format!("{candidate} {time} and {energy} to retire the workload; its average power is {power}.")
}

/// What each additional busy CPU draws: (power on all CPUs − power on one) / (CPUs − 1),
/// from two runs of the same spinning load on 1 and on `cpus` CPUs.
pub fn busy_cpu_sentence(one: &RunSummary, all: &RunSummary, cpus: usize) -> String {
    let extra = cpus.saturating_sub(1).max(1) as f64;
    format!(
        "Busy CPUs: spinning on {cpus} CPUs draws {:.1} W against {:.1} W on 1 CPU, {:.1} W per additional busy CPU.",
        all.power_w.mean,
        one.power_w.mean,
        (all.power_w.mean - one.power_w.mean) / extra
    )
}

/// What frequent wake-ups cost over the same time: the energy difference of a sleeper that
/// wakes often (`frequent`) against one that wakes rarely (`rare`), both `seconds` long.
pub fn wakeup_cost_sentence(rare: &RunSummary, frequent: &RunSummary, seconds: f64) -> String {
    let more = frequent.energy_j.mean - rare.energy_j.mean;
    format!(
        "Wake-ups: waking every 1 ms instead of every 100 ms {} {:.2} J ({:+.1}%) over the same {seconds} s, for the same amount of sleeping.",
        if more >= 0.0 { "costs" } else { "saves" },
        more.abs(),
        (frequent.energy_j.mean / rare.energy_j.mean - 1.0) * 100.0
    )
}

/// What a finding built on estimated energy says in its own sentence (`None` for a
/// measurement): the model made the figure from wall time and CPU time, so the finding
/// restates the model's inputs and a meter must decide. A finding on mocked runs says
/// that nothing was measured at all.
pub fn estimated_qualifier(provenance: &Provenance) -> Option<String> {
    match provenance {
        Provenance::Estimated { model, .. } => Some(format!(
            " ESTIMATED, not measured: the energy is the power model '{model}' applied to wall time and CPU time, so by the model energy follows time and CPU time; measure with a meter to know."
        )),
        Provenance::Mocked { .. } => Some(format!(" {MOCKED_QUALIFIER}")),
        _ => None,
    }
}

/// What every figure of mocked runs says: they are a test of powerlens, not of a machine.
pub const MOCKED_QUALIFIER: &str = "MOCKED, not measured: no command ran and no meter was read; the mock executor scripted every run's time and energy (a test backend).";

/// A ratio interval as signed percent changes, e.g. "95% CI +8.0% … +10.2%".
fn ci_text(ci: [f64; 2]) -> String {
    format!(
        "95% CI {:+.1}% … {:+.1}%",
        (ci[0] - 1.0) * 100.0,
        (ci[1] - 1.0) * 100.0
    )
}

/// The verdict with the intervals of the time and energy ratios where known, followed by
/// what the class means for the reader.
pub fn sentence_with_ci(
    candidate: &str,
    r: &Ratios,
    time_ci: Option<[f64; 2]>,
    energy_ci: Option<[f64; 2]>,
    class: VerdictClass,
) -> String {
    let mut s = sentence(candidate, r);
    // Insert each interval right after the figure it qualifies.
    for (ci, anchor) in [(time_ci, " and needs"), (energy_ci, " to retire")] {
        if let (Some(ci), Some(at)) = (ci, s.find(anchor)) {
            s.insert_str(at, &format!(" ({})", ci_text(ci)));
        }
    }
    let tail = match class {
        VerdictClass::BetterOnBoth => " Better on both: no slower and no more energy.".to_string(),
        VerdictClass::WorseOnBoth => " Worse on both: no faster and no less energy.".to_string(),
        VerdictClass::Equivalent => " No significant difference in time or energy.".to_string(),
        VerdictClass::TradeOff if r.time < 1.0 => format!(
            " A trade-off: it trades {} more energy for {} less time.",
            percent(r.energy),
            percent(r.time)
        ),
        VerdictClass::TradeOff => format!(
            " A trade-off: it trades {} more time for {} less energy.",
            percent(r.time),
            percent(r.energy)
        ),
    };
    s.push_str(&tail);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn len_browns_make_j2_example() {
        // performance: 193.355 W × 209 s = 40411.195 J; powersaving: 189.416 W × 228 s = 43186.848 J.
        let r = Ratios::from_means((209.0, 193.355 * 209.0), (228.0, 189.416 * 228.0));
        assert!((r.time - 228.0 / 209.0).abs() < 1e-12);
        assert!((r.energy - 43186.848 / 40411.195).abs() < 1e-9);
        assert_eq!(
            sentence("powersaving", &r),
            "powersaving takes 9.1% longer and needs 6.9% more energy to retire the workload; its average power is 2.0% lower."
        );
        assert_eq!(classify(&r), VerdictClass::WorseOnBoth);
    }

    fn summary(wall_s: f64, energy_j: f64) -> RunSummary {
        use crate::provenance::Provenance;
        use crate::run::{DomainEnergy, ExitStatus, Measurement, Run};
        let m = Measurement {
            wall_s,
            cpu_s: wall_s,
            energy_interval_s: wall_s,
            domains: vec![DomainEnergy {
                name: "system".into(),
                joules: energy_j,
                counts_in_total: true,
            }],
            exit: ExitStatus {
                code: Some(0),
                signal: None,
            },
            provenance: Provenance::Measured {
                source: "test".into(),
            },
            charge: None,
            other_load: Err("not measured in this test".into()),
        };
        RunSummary::of(&[Run::new(0, m, None)]).unwrap()
    }

    #[test]
    fn busy_cpu_and_wakeup_sentences_by_hand() {
        // 1 CPU: 43 J in 1 s = 43 W; 4 CPUs: 91 J in 1 s = 91 W; (91 − 43) / 3 = 16 W.
        let s = busy_cpu_sentence(&summary(1.0, 43.0), &summary(1.0, 91.0), 4);
        assert!(
            s.contains("draws 91.0 W against 43.0 W") && s.contains("16.0 W per additional"),
            "{s}"
        );
        // 27.2 J against 28.02 J: costs 0.82 J, +3.0%.
        let w = wakeup_cost_sentence(&summary(1.0, 27.2), &summary(1.0, 28.02), 1.0);
        assert!(w.contains("costs 0.82 J (+3.0%)"), "{w}");
        let cheaper = wakeup_cost_sentence(&summary(1.0, 28.0), &summary(1.0, 27.0), 1.0);
        assert!(cheaper.contains("saves 1.00 J"), "{cheaper}");
    }

    #[test]
    fn classes() {
        let trade = Ratios::from_means((10.0, 100.0), (8.0, 110.0));
        assert_eq!(classify(&trade), VerdictClass::TradeOff);
        assert!(sentence("B", &trade).contains("takes 20.0% less time and needs 10.0% more energy"));
        let better = Ratios::from_means((10.0, 100.0), (9.0, 90.0));
        assert_eq!(classify(&better), VerdictClass::BetterOnBoth);
        let same = Ratios::from_means((10.0, 100.0), (10.01, 100.02));
        assert_eq!(classify(&same), VerdictClass::Equivalent);
    }
}
