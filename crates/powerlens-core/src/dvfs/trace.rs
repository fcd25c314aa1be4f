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
#[derive(Debug)]
pub struct TraceParser {
    rows: csv::Rows,
}

impl Default for TraceParser {
    fn default() -> Self {
        TraceParser {
            rows: csv::Rows::new("duration_us"),
        }
    }
}

impl TraceParser {
    pub fn new() -> TraceParser {
        TraceParser::default()
    }

    /// Parses the next line; `Ok(None)` for blank, comment and header lines.
    pub fn push_line(&mut self, line: &str) -> Result<Option<Phase>, InputError> {
        if let Some(phase) = plain_row(line.as_bytes()) {
            self.rows.count_data_line();
            return Ok(Some(phase));
        }
        match self.rows.next(line) {
            None => Ok(None),
            Some(text) => parse_row(text)
                .map(Some)
                .map_err(|kind| self.rows.error(kind)),
        }
    }
}

/// The common shape `DIGITS[.DIGITS],L[,H]` (optionally ending in `\r\n` or `\n`) read
/// straight from bytes: a trace of ten million rows spends most of its parsing time
/// here. Anything else returns `None` and goes through [`parse_row`], which also names
/// errors; both give the same value for the same text.
fn plain_row(line: &[u8]) -> Option<Phase> {
    let digit = |b: u8| b.is_ascii_digit().then(|| u64::from(b - b'0'));
    let mut i = 0;
    let mut mantissa = 0u64;
    let mut digits = 0;
    let mut fraction_digits = 0;
    while let Some(d) = line.get(i).copied().and_then(digit) {
        mantissa = mantissa * 10 + d;
        digits += 1;
        i += 1;
        if digits > csv::EXACT_DIGITS {
            return None;
        }
    }
    if line.get(i) == Some(&b'.') {
        i += 1;
        while let Some(d) = line.get(i).copied().and_then(digit) {
            mantissa = mantissa * 10 + d;
            digits += 1;
            fraction_digits += 1;
            i += 1;
            if digits > csv::EXACT_DIGITS {
                return None;
            }
        }
    }
    if digits == 0 || line.get(i) != Some(&b',') {
        return None;
    }
    let level = Level::from_index(line.get(i + 1).copied().and_then(digit)?)?;
    let (hint, rest) = match &line[i + 2..] {
        [b',', b'0', rest @ ..] => (false, rest),
        [b',', b'1', rest @ ..] => (true, rest),
        rest => (false, rest),
    };
    if !matches!(rest, [] | [b'\n'] | [b'\r', b'\n']) {
        return None;
    }
    Some(Phase::new(
        csv::exact_decimal(mantissa, fraction_digits),
        level,
        hint,
    ))
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
    fn the_byte_fast_path_agrees_with_the_general_parser() {
        for line in [
            "0,0",
            "12,1\n",
            "0.5,2,1\r\n",
            "1234.567,0,0",
            "999999999999999,1",
            "00012.50,2,0\n",
            "1.,0",
            ".5,0",
        ] {
            let fast = plain_row(line.as_bytes()).unwrap_or_else(|| panic!("{line:?}"));
            assert_eq!(Ok(fast), parse_row(line.trim_end()), "{line:?}");
        }
        // Not the plain shape: left to the general parser (which accepts or names errors).
        for line in [
            "1e3,0",
            "1,0 # c",
            " 1,0",
            "1,3",
            "-1,0",
            "1,0,2",
            "1,0,1,",
            "1234567890123456,0",
        ] {
            assert_eq!(plain_row(line.as_bytes()), None, "{line:?}");
        }
    }

    #[test]
    fn rows_round_trip_through_display() {
        let phase = Phase::new(1234.567, Level::Avx2, true);
        let line = phase.to_string();
        assert_eq!(line, "1234.567,1,1");
        assert_eq!(parse_trace([line.as_str()]).unwrap(), vec![phase]);
    }
}

#[cfg(test)]
mod fuzz {
    //! Random bytes from the characters traces are made of: the parsers never panic, and
    //! the byte fast path agrees with the general parser whenever it accepts a line.

    use super::*;
    use crate::dvfs::classify::classify_lines;
    use crate::dvfs::gen::SplitMix64;

    const ALPHABET: &[u8] = b"0123456789012.,,,-+e#  \r\nx";

    /// Half the time pure noise, half a valid row with up to two characters replaced.
    fn random_line(rng: &mut SplitMix64) -> String {
        let pick = |rng: &mut SplitMix64| ALPHABET[rng.below(ALPHABET.len())];
        let mut bytes: Vec<u8> = if rng.below(2) == 0 {
            (0..rng.below(14)).map(|_| pick(rng)).collect()
        } else {
            let micros = rng.next_u64() % 10_000_000;
            let row = format!(
                "{}.{},{},{}\n",
                micros / 1000,
                micros % 1000,
                rng.below(4),
                rng.below(3)
            );
            row.into_bytes()
        };
        for _ in 0..rng.below(3) {
            if !bytes.is_empty() {
                let at = rng.below(bytes.len());
                bytes[at] = pick(rng);
            }
        }
        String::from_utf8(bytes).expect("ASCII")
    }

    #[test]
    fn parsers_never_panic_and_paths_agree() {
        let mut rng = SplitMix64::new(11);
        let mut accepted = 0;
        for _ in 0..50_000 {
            let line = random_line(&mut rng);
            if let Some(fast) = plain_row(line.as_bytes()) {
                accepted += 1;
                let text = csv::content(&line).expect("accepted lines carry data");
                assert_eq!(parse_row(text), Ok(fast), "{line:?}");
            }
            let _ = TraceParser::new().push_line(&line);
            let _ = classify_lines([line.as_str(), line.as_str()]);
        }
        // The agreement check must not be vacuous.
        assert!(accepted > 5_000, "only {accepted} lines took the fast path");
    }
}
