//! The few figures a reader of `diff` looks for first — elapsed time, the target's CPU
//! time, energy, switches and wake-ups — with one ratio direction, B relative to A, as
//! `compare` gives a candidate relative to its baseline (issue 51). The full `system`
//! figures (tracing costs, idle-state constants, …) stay in `Diff::system`.

use serde::Serialize;
use serde_json::Value;

use super::target::{thread_sum, Target};

/// One headline figure of both recordings: `ratio_b_to_a` is b / a (1 when equal, also
/// both zero; `None` when a alone is zero), `difference_b_minus_a` is b − a. A side
/// without the figure has `None` and its reason in `unavailable`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Headline {
    /// The figure's key, with its unit (`elapsed_s`, `target_cpu_time_s`, …).
    pub figure: &'static str,
    pub a: Option<f64>,
    pub b: Option<f64>,
    pub ratio_b_to_a: Option<f64>,
    pub difference_b_minus_a: Option<f64>,
    /// Why a side has no value (a reduced recording traces no switch or wake-up).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<String>,
}

/// A figure's key, how it is read from one report, and why a report may lack it.
type Source = (&'static str, fn(&Value) -> Option<f64>, &'static str);

const NO_SCHED: &str =
    "its thread rows have no such count (a reduced recording has no scheduler trace)";
const NO_ENERGY: &str = "its report has no energy figure (see its energy provenance)";

/// The headline figures, in the order they are shown.
const FIGURES: [Source; 8] = [
    (
        "elapsed_s",
        |r| r["system"]["elapsed_s"].as_f64(),
        "its report has no elapsed time",
    ),
    (
        "target_cpu_time_s",
        |r| Target::of(r).cpu_time_s,
        "its report has no thread rows with CPU time",
    ),
    ("energy_j", |r| r["energy"]["total_j"].as_f64(), NO_ENERGY),
    ("target_energy_j", |r| Target::of(r).energy_j, NO_ENERGY),
    (
        "target_sync_switches",
        |r| thread_sum(r, "sync_switches"),
        NO_SCHED,
    ),
    (
        "target_preempt_switches",
        |r| thread_sum(r, "preempt_switches"),
        NO_SCHED,
    ),
    (
        "target_idle_wakeups",
        |r| Target::of(r).idle_wakeups,
        NO_SCHED,
    ),
    (
        "target_wakeups_received",
        |r| Target::of(r).wakeups_received,
        NO_SCHED,
    ),
];

/// The headline of report `a` against report `b`.
pub fn headline(a: &Value, b: &Value) -> Vec<Headline> {
    FIGURES
        .iter()
        .map(|&(figure, read, why)| {
            let (x, y) = (read(a), read(b));
            let unavailable = [("A", x), ("B", y)]
                .into_iter()
                .filter(|(_, v)| v.is_none())
                .map(|(side, _)| format!("{side}: {why}"))
                .collect();
            let (ratio, difference) = match (x, y) {
                (Some(x), Some(y)) => (super::ratio(y, x), Some(super::dust_to_zero(y - x, x, y))),
                _ => (None, None),
            };
            Headline {
                figure,
                a: x,
                b: y,
                ratio_b_to_a: ratio,
                difference_b_minus_a: difference,
                unavailable,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn headline_figures_run_b_relative_to_a() {
        let a = json!({"system": {"elapsed_s": 2.0}, "energy": {"total_j": 10.0, "target_j": 4.0},
            "threads": [{"cpu_time_s": 0.5, "sync_switches": 10, "preempt_switches": 1, "idle_wakeups": 8, "wakeups_received_total": 9},
                        {"cpu_time_s": 0.25, "sync_switches": 2, "preempt_switches": 0, "idle_wakeups": 0, "wakeups_received_total": 3}]});
        let b = json!({"system": {"elapsed_s": 3.0}, "energy": {"total_j": 5.0, "target_j": 4.0},
            "threads": [{"cpu_time_s": 1.5, "sync_switches": 6, "preempt_switches": 0, "idle_wakeups": null}]});
        let h = headline(&a, &b);
        let get = |k: &str| h.iter().find(|x| x.figure == k).unwrap();
        // B 3 s against A 2 s: 1.5×, +1 s.
        assert_eq!(get("elapsed_s").ratio_b_to_a, Some(1.5));
        assert_eq!(get("elapsed_s").difference_b_minus_a, Some(1.0));
        // CPU: A 0.75 s over two threads, B 1.5 s: 2×.
        assert_eq!(get("target_cpu_time_s").ratio_b_to_a, Some(2.0));
        assert_eq!(get("energy_j").ratio_b_to_a, Some(0.5));
        assert_eq!(get("target_energy_j").ratio_b_to_a, Some(1.0));
        assert_eq!(get("target_sync_switches").ratio_b_to_a, Some(0.5));
        // A had 1 preemption, B none: 0×, −1.
        assert_eq!(get("target_preempt_switches").ratio_b_to_a, Some(0.0));
        assert_eq!(
            get("target_preempt_switches").difference_b_minus_a,
            Some(-1.0)
        );
        // B's rows have no idle wake-ups: unavailable with its reason, never 0.
        let w = get("target_idle_wakeups");
        assert_eq!((w.a, w.b, w.ratio_b_to_a), (Some(8.0), None, None));
        assert_eq!(w.unavailable, ["B: its thread rows have no such count (a reduced recording has no scheduler trace)"]);
    }
}
