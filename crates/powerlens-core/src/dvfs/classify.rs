//! The per-process power score (report, section 5.2): which processes cause frequency
//! reductions, learnt from the license sampled at each context switch.
//!
//! Input rows `time_us,pid,level`: at a context switch at `time_us`, process `pid` had
//! been running since the previous row, and `level` is the license sampled now. The
//! first row only establishes the starting level. A new process starts at score 0. With
//! P the level sampled at the previous row and S the process's score, the score becomes
//! 0.2·L + 0.8·S when its run lasted more than 1000 µs, or when (L < P and L < S) or
//! (L > P and L > S); otherwise it stays.

use std::collections::BTreeMap;

use serde::Serialize;

use super::csv::{self, InputError, InputErrorKind};
use super::Level;
use crate::provenance::Provenance;

/// The CSV layout, quoted in error messages.
pub const SAMPLES_FORMAT: &str = "time_us,pid,level";

/// Runs longer than this (µs) outlast the hardware's upclock delay, so the sampled
/// license is the process's own.
pub const LONG_RUN_US: f64 = 1000.0;

/// Weight of the new sample in the moving average.
pub const NEW_SAMPLE_WEIGHT: f64 = 0.2;

/// One context-switch sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub time_us: f64,
    pub pid: u32,
    pub level: Level,
}

/// The score of one process.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessScore {
    pub pid: u32,
    /// 0 = runs at normal frequency, 1 = at AVX2 frequency, 2 = at AVX-512 frequency.
    pub score: f64,
    /// Rows attributed to the process (runs that ended at a sample).
    pub samples: u64,
    /// Rows that changed the score.
    pub updates: u64,
}

/// Scores of every process seen, by pid, with where they come from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Classification {
    pub provenance: Provenance,
    pub rows: Vec<ProcessScore>,
}

/// Feeds samples one at a time; keeps one entry per process, not per sample.
#[derive(Debug, Default)]
pub struct Classifier {
    previous: Option<(f64, Level)>,
    processes: BTreeMap<u32, ProcessScore>,
}

impl Classifier {
    pub fn new() -> Classifier {
        Classifier::default()
    }

    /// Applies one sample; fails if time goes backwards.
    pub fn push(&mut self, sample: Sample) -> Result<(), InputErrorKind> {
        let Some((previous_us, previous_level)) = self.previous else {
            self.previous = Some((sample.time_us, sample.level));
            return Ok(());
        };
        if sample.time_us < previous_us {
            return Err(InputErrorKind::TimeWentBackwards {
                time_us: sample.time_us,
                previous_us,
            });
        }
        let process = self.processes.entry(sample.pid).or_insert(ProcessScore {
            pid: sample.pid,
            score: 0.0,
            samples: 0,
            updates: 0,
        });
        process.samples += 1;
        let (l, p, s) = (
            sample.level.index() as f64,
            previous_level.index() as f64,
            process.score,
        );
        let long_run = sample.time_us - previous_us > LONG_RUN_US;
        if long_run || (l < p && l < s) || (l > p && l > s) {
            process.score = NEW_SAMPLE_WEIGHT * l + (1.0 - NEW_SAMPLE_WEIGHT) * s;
            process.updates += 1;
        }
        self.previous = Some((sample.time_us, sample.level));
        Ok(())
    }

    /// Scores by pid.
    pub fn finish(self) -> Classification {
        Classification {
            provenance: Provenance::estimated(
                "power score (dim-silicon report, section 5.2)",
                format!(
                    "S = {NEW_SAMPLE_WEIGHT}*L + {}*S on runs > {LONG_RUN_US} us or when L passes both the previous level and S",
                    1.0 - NEW_SAMPLE_WEIGHT
                ),
            ),
            rows: self.processes.into_values().collect(),
        }
    }
}

/// Reads a samples CSV line by line (optional `time_us,...` header, `#` comments) into a
/// [`Classifier`], so that files of any length stream through a reused buffer.
#[derive(Debug)]
pub struct SamplesReader {
    rows: csv::Rows,
    classifier: Classifier,
}

impl Default for SamplesReader {
    fn default() -> Self {
        SamplesReader {
            rows: csv::Rows::new("time_us"),
            classifier: Classifier::new(),
        }
    }
}

impl SamplesReader {
    pub fn new() -> SamplesReader {
        SamplesReader::default()
    }

    /// Applies the next line; errors carry its line number.
    pub fn push_line(&mut self, line: &str) -> Result<(), InputError> {
        let Some(text) = self.rows.next(line) else {
            return Ok(());
        };
        let sample = parse_sample(text).map_err(|kind| self.rows.error(kind))?;
        self.classifier
            .push(sample)
            .map_err(|kind| self.rows.error(kind))
    }

    pub fn finish(self) -> Classification {
        self.classifier.finish()
    }
}

/// Scores from all the lines of a samples CSV.
pub fn classify_lines<'a>(
    lines: impl IntoIterator<Item = &'a str>,
) -> Result<Classification, InputError> {
    let mut reader = SamplesReader::new();
    for line in lines {
        reader.push_line(line)?;
    }
    Ok(reader.finish())
}

fn parse_sample(text: &str) -> Result<Sample, InputErrorKind> {
    let [time, pid, level] =
        csv::fields::<3>(text, false).map_err(|found| InputErrorKind::FieldCount {
            expected: "3",
            found,
            format: SAMPLES_FORMAT,
        })?;
    let time_us = csv::non_negative("time_us", time.unwrap_or_default())?;
    let pid_text = pid.unwrap_or_default();
    let pid = pid_text.parse().map_err(|_| InputErrorKind::BadPid {
        text: pid_text.to_string(),
    })?;
    let level = csv::level(level.unwrap_or_default())?;
    Ok(Sample {
        time_us,
        pid,
        level,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn score(rows: &str) -> Vec<ProcessScore> {
        classify_lines(rows.lines()).unwrap().rows
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12
    }

    #[test]
    fn first_row_only_sets_the_level_and_new_processes_start_at_zero() {
        // Row 1 establishes P = 2 and attributes nothing, not even to pid 7.
        // Row 2: pid 1 ran 500 µs (short); L = 2, P = 2: no change in level -> score stays 0.
        let s = score("0,7,2\n500,1,2\n");
        assert_eq!(
            s,
            vec![ProcessScore {
                pid: 1,
                score: 0.0,
                samples: 1,
                updates: 0
            }]
        );
    }

    #[test]
    fn long_runs_always_update() {
        // Row 2: pid 1 ran 1500 µs > 1000 at L = 2: S = 0.2*2 + 0.8*0 = 0.4.
        // Row 3: pid 1 ran 1001 µs at L = 2 (P = 2, no direction rule): S = 0.4 + 0.8*0.4 = 0.72.
        // Row 4: pid 1 ran exactly 1000 µs at L = 0: not > 1000, but L < P (0 < 2) and
        //        L < S (0 < 0.72): S = 0 + 0.8*0.72 = 0.576.
        let s = score("time_us,pid,level\n0,9,2\n1500,1,2\n2501,1,2\n3501,1,0\n");
        assert_eq!(s.len(), 1);
        assert!(close(s[0].score, 0.576), "{}", s[0].score);
        assert_eq!((s[0].samples, s[0].updates), (3, 3));
    }

    #[test]
    fn short_runs_update_only_when_the_level_moves_past_the_score() {
        // P starts at 0.
        // 100 pid 5 L=1: L > P (1 > 0) and L > S (1 > 0): S5 = 0.2.
        // 200 pid 6 L=1: L == P: no update, S6 stays 0 (a new process).
        // 300 pid 5 L=2: L > P (2 > 1) and L > S5 (2 > 0.2): S5 = 0.4 + 0.16 = 0.56.
        // 400 pid 6 L=0: L < P (0 < 2) but L < S6 is false (0 == 0): stays 0.
        // 500 pid 5 L=1: L > P (1 > 0) and L > S5 (1 > 0.56): S5 = 0.2 + 0.448 = 0.648.
        // 600 pid 5 L=0: L < P and L < S5: S5 = 0.8 * 0.648 = 0.5184.
        // 700 pid 6 L=1: L > P (1 > 0), L > S6 (1 > 0): S6 = 0.2.
        // 800 pid 6 L=0: L < P (0 < 1), L < S6 (0 < 0.2): S6 = 0.16.
        let s = score(
            "0,1,0\n100,5,1\n200,6,1\n300,5,2\n400,6,0\n500,5,1\n600,5,0\n700,6,1\n800,6,0\n",
        );
        assert_eq!(s.len(), 2);
        assert_eq!((s[0].pid, s[0].samples, s[0].updates), (5, 4, 4));
        assert!(close(s[0].score, 0.5184), "{}", s[0].score);
        assert_eq!((s[1].pid, s[1].samples, s[1].updates), (6, 4, 2));
        assert!(close(s[1].score, 0.16), "{}", s[1].score);
    }

    #[test]
    fn a_level_above_the_previous_but_below_the_score_does_not_update() {
        // P = 0. Two long runs at L = 2: S = 0.4, then 0.2*2 + 0.8*0.4 = 0.72 (P = 2).
        // A short run at L = 1: L < P (1 < 2) but not L < S (1 > 0.72), and not L > P:
        // the score stays 0.72.
        let s = score("0,1,0\n2000,1,2\n4000,1,2\n4100,1,1\n");
        assert_eq!((s[0].samples, s[0].updates), (3, 2));
        assert!(close(s[0].score, 0.72));
    }

    #[test]
    fn bad_rows_name_their_line() {
        let err = classify_lines("0,1,0\n10,1,0\n5,1,0\n".lines()).unwrap_err();
        assert_eq!(err.line, 3);
        assert!(err.to_string().contains("goes backwards"), "{err}");
        let err = classify_lines("0,1,0\n10,x,0\n".lines()).unwrap_err();
        assert_eq!(
            (err.line, matches!(err.kind, InputErrorKind::BadPid { .. })),
            (2, true)
        );
        let err = classify_lines("# c\n0,1,5\n".lines()).unwrap_err();
        assert_eq!(err.line, 2);
        assert!(matches!(err.kind, InputErrorKind::UnknownLevel { .. }));
        let err = classify_lines("0,1\n".lines()).unwrap_err();
        assert!(matches!(
            err.kind,
            InputErrorKind::FieldCount { found: 2, .. }
        ));
    }
}
