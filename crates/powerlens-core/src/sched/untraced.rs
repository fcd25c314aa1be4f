//! What recording added to a command, measured rather than estimated.
//!
//! `record --untraced-runs N` runs the command N times untraced before it records it, and
//! keeps each run's CPU time (getrusage of the command and its waited-for descendants).
//! The recorded run's CPU time is read the same way when it exits. Their difference is
//! what recording added, everything included: the events' own cost (which the estimate,
//! `tracing_cpu_s`, holds) and the load's response to being traced, which no cost per
//! event holds. On a load that hands work between threads across CPUs, being traced at
//! all can change where the scheduler places and preempts them: a bpftrace counter on two
//! tracepoints added seven times its programs' own run time to a pipe ping-pong on a 2-CPU
//! VM (docs/RECORD.md, "The cost of tracing"). It costs N more runs, and holds only for a
//! command that does the same work each time.

use serde::{Deserialize, Serialize};

use crate::run::ExitStatus;
use crate::stats::Summary;

/// One untraced run of the command, as the recording keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UntracedRun {
    /// User + system CPU time of the command and its waited-for descendants (getrusage).
    pub cpu_s: f64,
    pub wall_s: f64,
    pub exit: ExitStatus,
}

/// What a recording holds for the comparison: the untraced runs, and the recorded run's
/// CPU time when the command exited while it was recorded (`None`: it did not).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UntracedRecord {
    pub runs: Vec<UntracedRun>,
    pub recorded_cpu_s: Option<f64>,
    /// Why the recording's untraced runs could not be read, when it has some that do not
    /// read (`runs` is then empty).
    pub unreadable: Option<String>,
}

/// The estimate within this share of what was measured is said to hold it; below, the
/// line says what the rest is. The project's check of the estimate asks for 25%.
const HOLDS_WITHIN: f64 = 0.25;

/// The recorded run against the untraced runs: `system.perturbation.untraced`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UntracedComparison {
    /// How many untraced runs there were.
    pub runs: usize,
    /// Each untraced run's CPU time, in the order they ran (getrusage).
    pub cpu_s: Vec<f64>,
    /// Each untraced run's wall time.
    pub wall_s: Vec<f64>,
    /// The median of `cpu_s`.
    pub median_cpu_s: f64,
    /// The recorded run's CPU time, measured as the untraced runs' were.
    pub recorded_cpu_s: f64,
    /// `recorded_cpu_s − median_cpu_s` when the recorded run used more; `None` when it
    /// used no more than the untraced median (recording added nothing these runs resolve).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added_cpu_s: Option<f64>,
    /// `added_cpu_s` / `median_cpu_s` × 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub added_pct: Option<f64>,
    /// The estimate (`perturbation.tracing_cpu_s`) over `added_cpu_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate_share: Option<f64>,
    /// Whether the recorded run's CPU time lies within the untraced runs' own range, so
    /// that what it added is not told apart from their spread.
    pub within_spread: bool,
    /// Untraced runs that did not exit 0.
    pub failed_runs: usize,
    /// The comparison, in words.
    pub text: String,
}

impl UntracedComparison {
    /// The comparison of `runs` with a recorded run that used `recorded_cpu_s`, the
    /// estimate being `estimate_s`; `None` without runs.
    pub fn new(
        runs: &[UntracedRun],
        recorded_cpu_s: f64,
        estimate_s: f64,
    ) -> Option<UntracedComparison> {
        let cpu_s: Vec<f64> = runs.iter().map(|r| r.cpu_s).collect();
        let spread = Summary::of(&cpu_s)?;
        let median_cpu_s = spread.median;
        let added_cpu_s = Some(recorded_cpu_s - median_cpu_s).filter(|&a| a > 0.0);
        let mut c = UntracedComparison {
            runs: runs.len(),
            wall_s: runs.iter().map(|r| r.wall_s).collect(),
            median_cpu_s,
            recorded_cpu_s,
            added_cpu_s,
            added_pct: added_cpu_s
                .filter(|_| median_cpu_s > 0.0)
                .map(|a| a / median_cpu_s * 100.0),
            estimate_share: added_cpu_s.map(|a| estimate_s / a),
            within_spread: recorded_cpu_s <= spread.max,
            failed_runs: runs.iter().filter(|r| !r.exit.success()).count(),
            text: String::new(),
            cpu_s,
        };
        let first_failure = runs.iter().map(|r| r.exit).find(|e| !e.success());
        c.text = c.words(&spread, first_failure);
        Some(c)
    }

    /// The comparison in words; `spread` summarizes the untraced runs' CPU time.
    fn words(&self, spread: &Summary, first_failure: Option<ExitStatus>) -> String {
        let n = self.runs;
        let range = if n > 1 {
            format!(" ({:.3}–{:.3} s)", spread.min, spread.max)
        } else {
            String::new()
        };
        let median = if n > 1 { "a median " } else { "" };
        let plural = if n == 1 { "" } else { "s" };
        let mut text = format!(
            "measured against {n} untraced run{plural} of the command (getrusage): recorded, it used {:.3} s of CPU time, untraced {median}{:.3} s{range}",
            self.recorded_cpu_s, self.median_cpu_s
        );
        match (self.added_cpu_s, self.added_pct, self.estimate_share) {
            (Some(added), pct, Some(share)) => {
                let pct = pct.map(|p| format!(" ({p:.0}%)")).unwrap_or_default();
                text += &format!(
                    ": recording added {added:.3} s{pct}, and the estimate above is {:.0}% of it",
                    share * 100.0
                );
                if self.within_spread {
                    text += ", though the recorded run lies within the untraced runs' own range, so what it added is not told apart from their spread";
                } else if share < 1.0 - HOLDS_WITHIN {
                    text += ". The rest is not the events' own cost: it is how the load answered being traced (on work handed between threads across CPUs, where the scheduler places and preempts them), which no cost per event holds";
                } else if share > 1.0 + HOLDS_WITHIN {
                    text += ": the estimate reads more than was measured";
                }
            }
            _ => text += ": recording added no CPU time these runs resolve",
        }
        if let Some(exit) = first_failure {
            text += &format!(
                ". {} of the untraced runs did not exit 0 (the first: {}): the comparison holds only if the command did the same work each time",
                self.failed_runs,
                exit.describe()
            );
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(cpu_s: f64) -> UntracedRun {
        UntracedRun {
            cpu_s,
            wall_s: cpu_s * 2.0,
            exit: ExitStatus {
                code: Some(0),
                signal: None,
            },
        }
    }

    #[test]
    fn what_recording_added_is_the_recorded_run_over_the_untraced_median() {
        let runs = [run(0.26), run(0.25), run(0.31)];
        let c = UntracedComparison::new(&runs, 0.38, 0.044).unwrap();
        assert_eq!(c.runs, 3);
        assert_eq!(c.cpu_s, vec![0.26, 0.25, 0.31]);
        assert_eq!(c.wall_s, vec![0.52, 0.5, 0.62]);
        assert_eq!(c.median_cpu_s, 0.26);
        // 0.38 − 0.26 = 0.12, 46% of 0.26; the estimate 0.044 is 37% of 0.12.
        let added = c.added_cpu_s.unwrap();
        assert!((added - 0.12).abs() < 1e-12);
        assert!((c.added_pct.unwrap() - 0.12 / 0.26 * 100.0).abs() < 1e-9);
        assert!((c.estimate_share.unwrap() - 0.044 / 0.12).abs() < 1e-12);
        assert!(!c.within_spread);
        assert_eq!(c.failed_runs, 0);
        assert_eq!(
            c.text,
            "measured against 3 untraced runs of the command (getrusage): recorded, it used 0.380 s of CPU time, untraced a median 0.260 s (0.250–0.310 s): recording added 0.120 s (46%), and the estimate above is 37% of it. The rest is not the events' own cost: it is how the load answered being traced (on work handed between threads across CPUs, where the scheduler places and preempts them), which no cost per event holds"
        );
    }

    #[test]
    fn an_estimate_within_a_quarter_gets_no_explanation_and_one_above_is_said() {
        let runs = [run(0.10), run(0.11), run(0.12)];
        let holds = UntracedComparison::new(&runs, 0.21, 0.09).unwrap();
        assert!(holds
            .text
            .ends_with("recording added 0.100 s (91%), and the estimate above is 90% of it"));
        let above = UntracedComparison::new(&runs, 0.21, 0.14).unwrap();
        assert!(above
            .text
            .ends_with("is 140% of it: the estimate reads more than was measured"));
    }

    #[test]
    fn a_recorded_run_within_the_untraced_range_is_not_told_apart() {
        let runs = [run(0.10), run(0.20), run(0.15)];
        let c = UntracedComparison::new(&runs, 0.18, 0.01).unwrap();
        assert!(c.within_spread);
        assert!(c.text.contains("0.030 s (20%)"));
        assert!(c.text.contains("not told apart from their spread"));
        assert!(!c.text.contains("The rest"));
    }

    #[test]
    fn no_added_time_is_said_and_gets_no_figure() {
        // Never a negative figure: a recorded run below the untraced median added
        // nothing these runs resolve.
        let runs = [run(0.10), run(0.20), run(0.15)];
        let c = UntracedComparison::new(&runs, 0.12, 0.01).unwrap();
        assert_eq!(c.added_cpu_s, None);
        assert_eq!(c.added_pct, None);
        assert_eq!(c.estimate_share, None);
        assert!(c
            .text
            .ends_with("(0.100–0.200 s): recording added no CPU time these runs resolve"));
        let json = serde_json::to_value(&c).unwrap();
        assert!(json.get("added_cpu_s").is_none());
        assert_eq!(json["median_cpu_s"], 0.15);
    }

    #[test]
    fn one_run_has_no_range_and_failed_runs_are_said() {
        let failed = UntracedRun {
            exit: ExitStatus {
                code: Some(3),
                signal: None,
            },
            ..run(0.10)
        };
        let c = UntracedComparison::new(&[failed], 0.15, 0.05).unwrap();
        assert_eq!(c.failed_runs, 1);
        assert!(c.text.starts_with(
            "measured against 1 untraced run of the command (getrusage): recorded, it used 0.150 s of CPU time, untraced 0.100 s: recording added"
        ));
        assert!(c.text.ends_with(
            ". 1 of the untraced runs did not exit 0 (the first: exit code 3): the comparison holds only if the command did the same work each time"
        ));
        assert_eq!(UntracedComparison::new(&[], 0.15, 0.05), None);
    }
}
