//! The target's own figures in one report: sums over its thread rows (a report's thread
//! rows are the target's threads only), so that a finding about the target rests on what
//! the target did, not on what the whole machine did while it ran.

use serde_json::Value;

/// What the target's threads did in one recording. A figure is `None` where no thread row
/// has it (a reduced recording traces no wake-ups) or the report has no energy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Target {
    /// Idle exits the target's threads caused (the CPU left idle to run them).
    pub idle_wakeups: Option<f64>,
    /// The CPUs' idle time before those wake-ups, in seconds.
    pub idle_before_wakeups_s: Option<f64>,
    /// Every wake-up the target's threads received, idle CPU or not: those the trace
    /// recorded and those it did not (a thread that ran again after blocking).
    pub wakeups_received: Option<f64>,
    pub cpu_time_s: Option<f64>,
    /// The target's share of the energy (`energy.target_j`).
    pub energy_j: Option<f64>,
    pub elapsed_s: Option<f64>,
}

impl Target {
    pub fn of(report: &Value) -> Target {
        Target {
            idle_wakeups: thread_sum(report, "idle_wakeups"),
            idle_before_wakeups_s: thread_sum(report, "idle_time_s"),
            wakeups_received: thread_sum(report, "wakeups_received_total")
                .map(|n| n + thread_sum(report, "unrecorded_wakeups").unwrap_or(0.0)),
            cpu_time_s: thread_sum(report, "cpu_time_s"),
            energy_j: report["energy"]["target_j"].as_f64(),
            elapsed_s: report["system"]["elapsed_s"].as_f64().filter(|e| *e > 0.0),
        }
    }

    /// Idle wake-ups caused per second of the recording.
    pub fn idle_wakeups_per_s(&self) -> Option<f64> {
        Some(self.idle_wakeups? / self.elapsed_s?)
    }

    /// The mean idle of a CPU before the target woke it, in µs (`None` without any).
    pub fn mean_idle_before_wakeup_us(&self) -> Option<f64> {
        let n = self.idle_wakeups.filter(|n| *n > 0.0)?;
        Some(self.idle_before_wakeups_s? / n * 1e6)
    }
}

/// Σ of a numeric column over the report's thread rows; `None` when no row has it.
pub(super) fn thread_sum(report: &Value, column: &str) -> Option<f64> {
    let values: Vec<f64> = report["threads"]
        .as_array()?
        .iter()
        .filter_map(|r| r[column].as_f64())
        .collect();
    (!values.is_empty()).then(|| values.iter().sum())
}

/// Σ of the target's wake-ups received per cause (`thread`, `timer`, …) over its thread
/// rows: what the target received, not what the machine did.
pub fn wakeups_received_by_cause(report: &Value, cause: &str) -> Option<f64> {
    let values: Vec<f64> = report["threads"]
        .as_array()?
        .iter()
        .filter_map(|r| r["wakeups_received"][cause].as_f64())
        .collect();
    (!values.is_empty()).then(|| values.iter().sum())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_targets_figures_are_sums_of_its_rows_and_absent_when_no_row_has_them() {
        let r = json!({
            "system": {"elapsed_s": 2.0},
            "energy": {"target_j": 0.3},
            "threads": [
                {"cpu_time_s": 0.1, "idle_wakeups": 30, "idle_time_s": 0.03, "wakeups_received_total": 96, "unrecorded_wakeups": 4,
                 "wakeups_received": {"timer": 90, "thread": 10}},
                {"cpu_time_s": 0.2, "idle_wakeups": 10, "idle_time_s": 0.01, "wakeups_received_total": 5,
                 "wakeups_received": {"timer": 5, "thread": 0}}
            ]
        });
        let t = Target::of(&r);
        assert_eq!(t.idle_wakeups, Some(40.0));
        assert_eq!(t.idle_wakeups_per_s(), Some(20.0));
        // 0.04 s of idle before 40 wake-ups: 1 ms each.
        assert!((t.mean_idle_before_wakeup_us().unwrap() - 1000.0).abs() < 1e-9);
        assert_eq!(t.wakeups_received, Some(105.0));
        assert!((t.cpu_time_s.unwrap() - 0.3).abs() < 1e-12);
        assert_eq!(t.energy_j, Some(0.3));
        assert_eq!(wakeups_received_by_cause(&r, "timer"), Some(95.0));
        // A reduced recording's rows have CPU time but no wake-ups: absent, not zero.
        let reduced = json!({"system": {"elapsed_s": 1.0}, "energy": {},
                             "threads": [{"cpu_time_s": 0.5, "idle_wakeups": null}]});
        let t = Target::of(&reduced);
        assert_eq!((t.idle_wakeups, t.energy_j), (None, None));
        assert_eq!(t.mean_idle_before_wakeup_us(), None);
        assert_eq!(wakeups_received_by_cause(&reduced, "timer"), None);
    }
}
