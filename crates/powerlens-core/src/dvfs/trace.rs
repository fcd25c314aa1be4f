//! The phase model: a trace is a sequence of phases, each some amount of work at one
//! license level, read from `duration_us,level[,hint]` CSV.

use std::fmt;

use super::csv::{self, InputError, InputErrorKind};
use super::Level;

/// The CSV layout, quoted in error messages.
pub const TRACE_FORMAT: &str = "duration_us,level[,hint]";

/// One phase of a trace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Phase {
    /// Execution time of the phase's work at the level-0 (normal) frequency, in µs.
    pub duration_us: f64,
    /// The license the phase's code needs.
    pub level: Level,
    /// The developer's hint "no heavy vector code follows" (CSV `hint` = 1).
    pub hint: bool,
}

impl Phase {
    pub fn new(duration_us: f64, level: Level, hint: bool) -> Phase {
        Phase {
            duration_us,
            level,
            hint,
        }
    }
}

/// Writes the phase as one CSV row (without the line ending), e.g. `120.5,1,0`.
impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{},{},{}",
            self.duration_us,
            self.level.index(),
            u8::from(self.hint)
        )
    }
}

/// Reads a trace line by line so callers can stream a file through a reused buffer.
#[derive(Debug, Default)]
pub struct TraceParser {
    line: usize,
    seen_data: bool,
}

impl TraceParser {
    pub fn new() -> TraceParser {
        TraceParser::default()
    }

    /// Parses the next line; `Ok(None)` for blank, comment and header lines.
    pub fn push_line(&mut self, line: &str) -> Result<Option<Phase>, InputError> {
        self.line += 1;
        let Some(text) = csv::content(line) else {
            return Ok(None);
        };
        if !self.seen_data && csv::is_header(text, "duration_us") {
            self.seen_data = true;
            return Ok(None);
        }
        self.seen_data = true;
        parse_row(text).map(Some).map_err(|kind| InputError {
            line: self.line,
            kind,
        })
    }
}

fn parse_row(text: &str) -> Result<Phase, InputErrorKind> {
    let [duration, level, hint] =
        csv::fields::<3>(text, true).map_err(|found| InputErrorKind::FieldCount {
            expected: "2 or 3",
            found,
            format: TRACE_FORMAT,
        })?;
    let duration_us = csv::non_negative("duration_us", duration.unwrap_or_default())?;
    let level = csv::level(level.unwrap_or_default())?;
    let hint = match hint {
        None | Some("0") => false,
        Some("1") => true,
        Some(other) => {
            return Err(InputErrorKind::BadHint {
                text: other.to_string(),
            })
        }
    };
    Ok(Phase::new(duration_us, level, hint))
}

/// Parses a whole trace from its lines.
pub fn parse_trace<'a>(lines: impl IntoIterator<Item = &'a str>) -> Result<Vec<Phase>, InputError> {
    let mut parser = TraceParser::new();
    let mut phases = Vec::new();
    for line in lines {
        if let Some(phase) = parser.push_line(line)? {
            phases.push(phase);
        }
    }
    Ok(phases)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_rows_headers_comments_and_optional_hints() {
        let text = "duration_us,level,hint\n# vector then scalar\n100,2\n\n250.5,0,1\r\n30, 1 ,0\n";
        let phases = parse_trace(text.lines()).unwrap();
        assert_eq!(
            phases,
            vec![
                Phase::new(100.0, Level::Avx512, false),
                Phase::new(250.5, Level::Normal, true),
                Phase::new(30.0, Level::Avx2, false),
            ]
        );
    }

    #[test]
    fn errors_name_the_line_and_the_problem() {
        let err = |text: &str| parse_trace(text.lines()).unwrap_err();
        let e = err("10,0\n20,1\n30,3\n");
        assert_eq!(e.line, 3);
        assert!(
            e.to_string().starts_with("line 3: unknown level `3`"),
            "{e}"
        );
        assert_eq!(
            err("10,0\n-5,1\n").kind,
            InputErrorKind::Negative {
                field: "duration_us",
                value: -5.0
            }
        );
        assert!(matches!(
            err("10\n").kind,
            InputErrorKind::FieldCount { found: 1, .. }
        ));
        assert!(matches!(
            err("1,0,0,0\n").kind,
            InputErrorKind::FieldCount { found: 4, .. }
        ));
        assert!(matches!(
            err("ten,0\n").kind,
            InputErrorKind::NotANumber { .. }
        ));
        assert!(matches!(
            err("10,0,yes\n").kind,
            InputErrorKind::BadHint { .. }
        ));
        // A header is only allowed before the first data row.
        assert_eq!(err("10,0\nduration_us,level\n").line, 2);
    }

    #[test]
    fn rows_round_trip_through_display() {
        let phase = Phase::new(1234.567, Level::Avx2, true);
        let line = phase.to_string();
        assert_eq!(line, "1234.567,1,1");
        assert_eq!(parse_trace([line.as_str()]).unwrap(), vec![phase]);
    }
}
