//! The small CSV dialect shared by traces and samples: comma-separated numbers, `#`
//! comments, blank lines, an optional header line. Parsing borrows the line and never
//! allocates, because traces run to tens of millions of lines.

use thiserror::Error;

/// A problem in one line of a trace or sample file. `line` counts from 1.
#[derive(Debug, Clone, PartialEq, Error)]
#[error("line {line}: {kind}")]
pub struct InputError {
    pub line: usize,
    pub kind: InputErrorKind,
}

/// What is wrong with the line, and how to fix it.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum InputErrorKind {
    #[error("expected {expected} comma-separated fields, found {found} (format: {format})")]
    FieldCount {
        expected: &'static str,
        found: usize,
        format: &'static str,
    },
    #[error("field `{field}` is not a number: `{text}`")]
    NotANumber { field: &'static str, text: String },
    #[error("field `{field}` is negative ({value}); durations and times must be >= 0")]
    Negative { field: &'static str, value: f64 },
    #[error("unknown level `{text}`: use 0 (normal), 1 (AVX2) or 2 (AVX-512)")]
    UnknownLevel { text: String },
    #[error("hint must be 0 or 1, found `{text}`")]
    BadHint { text: String },
    #[error("field `pid` is not a process id (0..=4294967295): `{text}`")]
    BadPid { text: String },
    #[error("time_us goes backwards ({time_us} after {previous_us}); rows must be in time order")]
    TimeWentBackwards { time_us: f64, previous_us: f64 },
}

/// A line with its comment, surrounding blanks and line ending removed; `None` for lines
/// that carry no data (blank or comment-only).
pub(crate) fn content(line: &str) -> Option<&str> {
    let text = match line.find('#') {
        Some(at) => &line[..at],
        None => line,
    };
    let text = text.trim();
    (!text.is_empty()).then_some(text)
}

/// Splits `text` into exactly `N` fields, or `N - 1` when the last one is optional.
/// Returns the fields (missing optional field as `None`) or the number found.
pub(crate) fn fields<const N: usize>(
    text: &str,
    last_optional: bool,
) -> Result<[Option<&str>; N], usize> {
    let mut out = [None; N];
    let mut count = 0;
    for field in text.split(',') {
        if count < N {
            out[count] = Some(field.trim());
        }
        count += 1;
    }
    let enough = count == N || (last_optional && count == N - 1);
    if enough {
        Ok(out)
    } else {
        Err(count)
    }
}

/// Parses a decimal number such as `12`, `0.5` or `-3.25` without allocating. Plain
/// decimals with at most 15 significant digits take an exact fast path (an integer
/// divided by a power of ten is correctly rounded when both are exact in f64); anything
/// else (exponents, long digit strings) falls back to the standard parser.
pub(crate) fn parse_number(text: &str) -> Option<f64> {
    let bytes = text.as_bytes();
    let (negative, digits) = match bytes.first() {
        Some(b'-') => (true, &bytes[1..]),
        Some(b'+') => (false, &bytes[1..]),
        _ => (false, bytes),
    };
    let mut mantissa: u64 = 0;
    let mut significant = 0usize;
    let mut fraction_digits = 0usize;
    let mut seen_point = false;
    let mut seen_digit = false;
    for &b in digits {
        match b {
            b'0'..=b'9' => {
                seen_digit = true;
                if mantissa != 0 || b != b'0' {
                    significant += 1;
                }
                mantissa = mantissa.wrapping_mul(10).wrapping_add(u64::from(b - b'0'));
                if seen_point {
                    fraction_digits += 1;
                }
            }
            b'.' if !seen_point => seen_point = true,
            _ => return text.parse::<f64>().ok().filter(|v| v.is_finite()),
        }
    }
    if !seen_digit {
        return None;
    }
    if significant > EXACT_DIGITS || fraction_digits > EXACT_DIGITS {
        return text.parse::<f64>().ok().filter(|v| v.is_finite());
    }
    let value = exact_decimal(mantissa, fraction_digits);
    Some(if negative { -value } else { value })
}

/// Largest digit count for which [`exact_decimal`] is exact: 10^15 < 2^53.
pub(crate) const EXACT_DIGITS: usize = 15;

/// `mantissa / 10^fraction_digits`, correctly rounded (the same value the standard
/// parser gives) when the mantissa has at most [`EXACT_DIGITS`] digits: both operands
/// are exact in f64 and IEEE division rounds once.
pub(crate) fn exact_decimal(mantissa: u64, fraction_digits: usize) -> f64 {
    const POW10: [f64; EXACT_DIGITS + 1] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
    ];
    mantissa as f64 / POW10[fraction_digits]
}

/// A number that must be finite and not negative.
pub(crate) fn non_negative(field: &'static str, text: &str) -> Result<f64, InputErrorKind> {
    let value = parse_number(text).ok_or_else(|| InputErrorKind::NotANumber {
        field,
        text: text.to_string(),
    })?;
    if value < 0.0 {
        return Err(InputErrorKind::Negative { field, value });
    }
    Ok(value)
}

/// A level field: `0`, `1`, `2` (or the level names).
pub(crate) fn level(text: &str) -> Result<super::Level, InputErrorKind> {
    super::Level::parse(text).ok_or_else(|| InputErrorKind::UnknownLevel {
        text: text.to_string(),
    })
}

/// Numbers lines and picks out the data rows: skips blank and comment lines, and a
/// header (a line whose first field is the format's first field name) before the first row.
#[derive(Debug)]
pub(crate) struct Rows {
    header: &'static str,
    line: usize,
    seen_data: bool,
}

impl Rows {
    pub(crate) fn new(header: &'static str) -> Rows {
        Rows {
            header,
            line: 0,
            seen_data: false,
        }
    }

    /// Counts the next line; returns its data, or `None` if it carries none.
    pub(crate) fn next<'a>(&mut self, line: &'a str) -> Option<&'a str> {
        self.line += 1;
        let text = content(line)?;
        let first_row = !std::mem::replace(&mut self.seen_data, true);
        let header = first_row && text.split(',').next().map(str::trim) == Some(self.header);
        (!header).then_some(text)
    }

    /// Counts a line that a caller's fast path has already read as data.
    pub(crate) fn count_data_line(&mut self) {
        self.line += 1;
        self.seen_data = true;
    }

    /// `kind` located at the current line.
    pub(crate) fn error(&self, kind: InputErrorKind) -> InputError {
        InputError {
            line: self.line,
            kind,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_path_matches_the_standard_parser() {
        for text in [
            "0",
            "12",
            "0.5",
            "1234.567",
            "-3.25",
            "+7",
            "670",
            "0.001",
            "999999.999",
            "123456789012345",
            "3.141592653589793",
            "1e3",
            "2.5E-1",
            "00012.5000",
        ] {
            assert_eq!(parse_number(text), text.parse::<f64>().ok(), "{text}");
        }
    }

    #[test]
    fn rejects_what_is_not_a_number() {
        for text in ["", "-", ".", "1.2.3", "12a", "inf", "NaN", "1,2"] {
            assert_eq!(parse_number(text), None, "{text}");
        }
    }

    #[test]
    fn strips_comments_and_blanks() {
        assert_eq!(content("  10,1 # vector\r\n"), Some("10,1"));
        assert_eq!(content("# only a comment\n"), None);
        assert_eq!(content("\n"), None);
    }

    #[test]
    fn splits_fields_with_an_optional_last_one() {
        assert_eq!(
            fields::<3>("10, 1 ,0", true),
            Ok([Some("10"), Some("1"), Some("0")])
        );
        assert_eq!(fields::<3>("10,1", true), Ok([Some("10"), Some("1"), None]));
        assert_eq!(fields::<3>("10", true), Err(1));
        assert_eq!(fields::<3>("1,2,3,4", true), Err(4));
        assert_eq!(fields::<3>("1,2", false), Err(2));
    }
}
