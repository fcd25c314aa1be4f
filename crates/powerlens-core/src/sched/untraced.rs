//! What recording added to a command, measured rather than estimated.
//!
//! `record --untraced-runs N` runs the command N times untraced before it records it, and
//! keeps each run's CPU time (getrusage of the command and its waited-for descendants).
//! The recorded run's CPU time is read the same way when it exits. Their difference is
//! what recording added, everything included: the events' own cost (which the estimate,
//! `tracing_cpu_s`, holds) and what recording does beside them, which no cost per event
//! holds: powerlens's own threads run next to the command and their records take caches,
//! and a load that hands work between processes across CPUs answers with more CPU time
//! (on a pipe ping-pong on a 2-CPU VM the estimate was 0.5–0.9 of what was added,
//! docs/RECORD.md, "The cost of tracing"). It costs N more runs, and holds only for a
//! command that does the same work each time.

use serde::{Deserialize, Serialize};

use crate::figures::{seconds, seconds_range};
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
/// CPU time and wall time when the command exited while it was recorded (`None`: it did
/// not; the wall time also where the kernel has no pidfds, and in older recordings).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UntracedRecord {
    pub runs: Vec<UntracedRun>,
    pub recorded_cpu_s: Option<f64>,
    pub recorded_wall_s: Option<f64>,
    /// Why the recording's untraced runs could not be read, when it has some that do not
    /// read (`runs` is then empty).
    pub unreadable: Option<String>,
}

/// The estimate within this share of what was measured is said to hold it; below, the
/// line says what the rest is. The project's check of the estimate asks for 25%.
const HOLDS_WITHIN: f64 = 0.25;

/// CPU time added (or estimated) below this is too little to call a slowdown, whatever
/// its share: a command that sleeps uses about a millisecond, and a tenth of that moves
/// with an exec's page faults. Neither the warning nor the line's account of the rest
/// is given for it.
pub const NEGLIGIBLE_CPU_S: f64 = 0.001;

/// The recorded run against the untraced runs: `system.perturbation.untraced`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UntracedComparison {
    /// How many untraced runs there were.
    pub runs: usize,
    /// Each untraced run's CPU time, in the order they ran (getrusage).
    pub cpu_s: Vec<f64>,
    /// Each untraced run's wall time, from just before it started to its exit.
    pub wall_s: Vec<f64>,
    /// The median of `wall_s`.
    pub median_wall_s: f64,
    /// The recorded run's wall time, measured as the untraced runs' were; `None` where it
    /// was not (no pidfd, an older recording).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_wall_s: Option<f64>,
    /// `recorded_wall_s` / `median_wall_s`: how many times longer the recorded run took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_ratio: Option<f64>,
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
    /// The comparison of the untraced runs with the recorded run, the estimate being
    /// `estimate_s`; `None` without runs, or when the recorded run's CPU time is not known.
    pub fn new(record: &UntracedRecord, estimate_s: f64) -> Option<UntracedComparison> {
        let runs = &record.runs;
        let recorded_cpu_s = record.recorded_cpu_s?;
        let cpu_s: Vec<f64> = runs.iter().map(|r| r.cpu_s).collect();
        let spread = Summary::of(&cpu_s)?;
        let median_cpu_s = spread.median;
        let added_cpu_s = Some(recorded_cpu_s - median_cpu_s).filter(|&a| a > 0.0);
        let wall_s: Vec<f64> = runs.iter().map(|r| r.wall_s).collect();
        let wall_spread = Summary::of(&wall_s)?;
        let recorded_wall_s = record.recorded_wall_s;
        let mut c = UntracedComparison {
            runs: runs.len(),
            median_wall_s: wall_spread.median,
            recorded_wall_s,
            wall_ratio: recorded_wall_s
                .filter(|_| wall_spread.median > 0.0)
                .map(|w| w / wall_spread.median),
            wall_s,
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
        c.text = c.words(&spread, &wall_spread, first_failure);
        Some(c)
    }

    /// The comparison in words; `spread` and `wall_spread` summarize the untraced runs'
    /// CPU time and wall time.
    fn words(
        &self,
        spread: &Summary,
        wall_spread: &Summary,
        first_failure: Option<ExitStatus>,
    ) -> String {
        let n = self.runs;
        // One run has no range to give.
        let range_of = |s: &Summary| {
            if n > 1 {
                format!(" ({})", seconds_range(s.min, s.max))
            } else {
                String::new()
            }
        };
        let range = range_of(spread);
        let median = if n > 1 { "a median " } else { "" };
        let plural = if n == 1 { "" } else { "s" };
        let mut text = format!(
            "measured against {n} untraced run{plural} of the command (getrusage): recorded, it used {} of CPU time, untraced {median}{}{range}",
            seconds(self.recorded_cpu_s),
            seconds(self.median_cpu_s)
        );
        match (self.added_cpu_s, self.added_pct, self.estimate_share) {
            (Some(added), pct, Some(share)) => {
                let pct = pct.map(|p| format!(" ({p:.0}%)")).unwrap_or_default();
                text += &format!(
                    ": recording added {}{pct}, and the estimate above is {:.0}% of it",
                    seconds(added),
                    share * 100.0
                );
                if self.within_spread {
                    text += ", though the recorded run lies within the untraced runs' own range, so what it added is not told apart from their spread";
                } else if added < NEGLIGIBLE_CPU_S {
                    text += ", under a millisecond: too little to call a slowdown";
                } else if share < 1.0 - HOLDS_WITHIN {
                    text += ". The rest is not the events' own cost: it is what recording does beside them (powerlens's own threads running next to the command, the caches its records take) and how the command answers that, which no cost per event holds";
                } else if share > 1.0 + HOLDS_WITHIN {
                    text += ": the estimate reads more than was measured";
                }
            }
            _ => text += ": recording added no CPU time these runs resolve",
        }
        if let (Some(wall), Some(ratio)) = (self.recorded_wall_s, self.wall_ratio) {
            let range = range_of(wall_spread);
            text += &format!(
                ". Its wall time: {} recorded, untraced {median}{}{range}, {ratio:.2}×",
                seconds(wall),
                seconds(self.median_wall_s)
            );
            if n > 1 && wall >= wall_spread.min && wall <= wall_spread.max {
                text += ", within the untraced runs' own range";
            }
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

    /// The comparison of `runs` with a recorded run that used `recorded_cpu_s` (its wall
    /// time not known), the estimate being `estimate_s`.
    fn compare(
        runs: &[UntracedRun],
        recorded_cpu_s: f64,
        estimate_s: f64,
    ) -> Option<UntracedComparison> {
        let record = UntracedRecord {
            runs: runs.to_vec(),
            recorded_cpu_s: Some(recorded_cpu_s),
            ..Default::default()
        };
        UntracedComparison::new(&record, estimate_s)
    }

    #[test]
    fn the_recorded_runs_wall_time_is_set_against_the_untraced_runs() {
        // Wall times 0.52, 0.50 and 0.62 s (twice the CPU time): median 0.52 s.
        let record = UntracedRecord {
            runs: vec![run(0.26), run(0.25), run(0.31)],
            recorded_cpu_s: Some(0.38),
            recorded_wall_s: Some(0.78),
            unreadable: None,
        };
        let c = UntracedComparison::new(&record, 0.044).unwrap();
        assert_eq!(c.median_wall_s, 0.52);
        assert_eq!(c.recorded_wall_s, Some(0.78));
        // 0.78 / 0.52 = 1.5.
        assert!((c.wall_ratio.unwrap() - 1.5).abs() < 1e-12);
        assert!(c.text.ends_with(
            ". Its wall time: 0.780 s recorded, untraced a median 0.520 s (0.500–0.620 s), 1.50×"
        ));
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["recorded_wall_s"], 0.78);
        assert_eq!(json["median_wall_s"], 0.52);
        // Within the untraced runs' wall times: said so.
        let within = UntracedRecord {
            recorded_wall_s: Some(0.55),
            ..record.clone()
        };
        let c = UntracedComparison::new(&within, 0.044).unwrap();
        assert!(
            c.text
                .ends_with("1.06×, within the untraced runs' own range"),
            "{}",
            c.text
        );
        // Not known (no pidfd, an older recording): no figure, no words, no key.
        let unknown = UntracedRecord {
            recorded_wall_s: None,
            ..record.clone()
        };
        let c = UntracedComparison::new(&unknown, 0.044).unwrap();
        assert_eq!(c.wall_ratio, None);
        assert!(!c.text.contains("wall time"));
        let json = serde_json::to_value(&c).unwrap();
        assert!(json.get("recorded_wall_s").is_none() && json.get("wall_ratio").is_none());
        // Nor any comparison when the recorded run's CPU time is not known.
        let no_cpu = UntracedRecord {
            recorded_cpu_s: None,
            ..record
        };
        assert_eq!(UntracedComparison::new(&no_cpu, 0.044), None);
    }

    #[test]
    fn what_recording_added_is_the_recorded_run_over_the_untraced_median() {
        let runs = [run(0.26), run(0.25), run(0.31)];
        let c = compare(&runs, 0.38, 0.044).unwrap();
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
            "measured against 3 untraced runs of the command (getrusage): recorded, it used 0.380 s of CPU time, untraced a median 0.260 s (0.250–0.310 s): recording added 0.120 s (46%), and the estimate above is 37% of it. The rest is not the events' own cost: it is what recording does beside them (powerlens's own threads running next to the command, the caches its records take) and how the command answers that, which no cost per event holds"
        );
    }

    #[test]
    fn an_estimate_within_a_quarter_gets_no_explanation_and_one_above_is_said() {
        let runs = [run(0.10), run(0.11), run(0.12)];
        let holds = compare(&runs, 0.21, 0.09).unwrap();
        assert!(holds
            .text
            .ends_with("recording added 0.100 s (91%), and the estimate above is 90% of it"));
        let above = compare(&runs, 0.21, 0.14).unwrap();
        assert!(above
            .text
            .ends_with("is 140% of it: the estimate reads more than was measured"));
    }

    #[test]
    fn a_recorded_run_within_the_untraced_range_is_not_told_apart() {
        let runs = [run(0.10), run(0.20), run(0.15)];
        let c = compare(&runs, 0.18, 0.01).unwrap();
        assert!(c.within_spread);
        assert!(c.text.contains("0.030 s (20%)"));
        assert!(c.text.contains("not told apart from their spread"));
        assert!(!c.text.contains("The rest"));
    }

    #[test]
    fn a_sleeping_commands_fraction_of_a_millisecond_is_printed_and_not_explained() {
        // `sleep 0.3`: about 1 ms of CPU time untraced, 1.14 ms recorded.
        let runs = [run(0.001_00), run(0.001_01), run(0.000_99)];
        let c = compare(&runs, 0.001_14, 0.000_03).unwrap();
        assert!((c.added_cpu_s.unwrap() - 0.000_14).abs() < 1e-12);
        assert!(
            c.text.ends_with(
                "recorded, it used 0.0011 s of CPU time, untraced a median 0.0010 s (0.00099–0.0010 s): recording added 0.00014 s (14%), and the estimate above is 21% of it, under a millisecond: too little to call a slowdown"
            ),
            "{}",
            c.text
        );
        assert!(!c.text.contains("0.000 s"), "{}", c.text);
    }

    #[test]
    fn no_added_time_is_said_and_gets_no_figure() {
        // Never a negative figure: a recorded run below the untraced median added
        // nothing these runs resolve.
        let runs = [run(0.10), run(0.20), run(0.15)];
        let c = compare(&runs, 0.12, 0.01).unwrap();
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
        let c = compare(&[failed], 0.15, 0.05).unwrap();
        assert_eq!(c.failed_runs, 1);
        assert!(c.text.starts_with(
            "measured against 1 untraced run of the command (getrusage): recorded, it used 0.150 s of CPU time, untraced 0.100 s: recording added"
        ));
        assert!(c.text.ends_with(
            ". 1 of the untraced runs did not exit 0 (the first: exit code 3): the comparison holds only if the command did the same work each time"
        ));
        assert_eq!(compare(&[], 0.15, 0.05), None);
    }
}
