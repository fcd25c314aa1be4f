//! One parser for every duration flag (`--duration 2s`, `--period 200us`, `--work 0.5ms`).
//!
//! A bare number is seconds (`--duration 0.3`), as `sleep`, `perf` and stress-ng read it;
//! with a unit, the unit says.

use std::time::Duration;

/// The units a duration may carry, with their length in seconds.
const UNITS: &[(&str, f64)] = &[
    ("ns", 1e-9),
    ("us", 1e-6),
    ("µs", 1e-6),
    ("ms", 1e-3),
    ("s", 1.0),
    ("min", 60.0),
];

const EXAMPLES: &str = "write seconds, or a number and a unit, e.g. 2, 2s, 500ms, 200us";

/// Parses a strictly positive duration such as `2` (seconds), `2s`, `500ms`, `200us`,
/// `0.1s` or `1.5min`. The error text says what is wrong and how to write it instead
/// (clap prefixes the flag).
pub fn parse_positive_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(text.len());
    let (number, unit) = (&text[..split], text[split..].trim());
    if number.is_empty() {
        return Err(format!("'{text}' has no number: {EXAMPLES}"));
    }
    let value: f64 = number
        .parse()
        .map_err(|_| format!("'{number}' is not a number: {EXAMPLES}"))?;
    let scale = if unit.is_empty() {
        1.0
    } else {
        UNITS
            .iter()
            .find(|(name, _)| *name == unit)
            .map(|(_, scale)| *scale)
            .ok_or_else(|| {
                format!("unknown unit '{unit}' (known: ns, us, ms, s, min): {EXAMPLES}")
            })?
    };
    let seconds = value * scale;
    if seconds <= 0.0 {
        return Err(format!(
            "'{text}' is not positive: the duration must be greater than zero"
        ));
    }
    let duration = Duration::try_from_secs_f64(seconds)
        .map_err(|_| format!("'{text}' is too long to represent"))?;
    if duration.is_zero() {
        return Err(format!("'{text}' is shorter than a nanosecond"));
    }
    Ok(duration)
}

/// Parses a strictly positive, finite number (e.g. `--work`, units of work per run).
pub fn parse_positive_number(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        Ok(v) => Err(format!("{v} is not a positive number")),
        Err(_) => Err(format!("'{text}' is not a number")),
    }
}

/// The parser of the flags documented in seconds (`--baseline 5`, `--window 10`): the same
/// as [`parse_positive_duration`], named for what their help says.
pub fn parse_seconds(text: &str) -> Result<Duration, String> {
    parse_positive_duration(text)
}

/// As [`parse_seconds`], but 0 is allowed: for lengths where zero means "skip it".
pub fn parse_seconds_or_zero(text: &str) -> Result<Duration, String> {
    match text.trim().parse::<f64>() {
        Ok(0.0) => Ok(Duration::ZERO),
        _ => parse_seconds(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_is_allowed_only_where_it_means_skip() {
        assert_eq!(parse_seconds_or_zero("0").unwrap(), Duration::ZERO);
        assert_eq!(
            parse_seconds_or_zero("1.5").unwrap(),
            Duration::from_millis(1500)
        );
        assert!(parse_seconds_or_zero("-1").is_err() && parse_seconds("0").is_err());
    }

    #[test]
    fn positive_numbers() {
        assert_eq!(parse_positive_number("2.5").unwrap(), 2.5);
        for bad in ["0", "-1", "inf", "NaN", "x"] {
            assert!(parse_positive_number(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn bare_seconds_for_secs_flags() {
        assert_eq!(parse_seconds("2").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_seconds("0.25").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_seconds("500ms").unwrap(), Duration::from_millis(500));
        assert!(
            parse_seconds("0").is_err()
                && parse_seconds("-1").is_err()
                && parse_seconds("x").is_err()
        );
    }

    #[test]
    fn accepts_each_unit_and_fractions() {
        let cases = [
            ("2s", Duration::from_secs(2)),
            ("500ms", Duration::from_millis(500)),
            ("200us", Duration::from_micros(200)),
            ("200µs", Duration::from_micros(200)),
            ("0.1s", Duration::from_millis(100)),
            ("1ms", Duration::from_millis(1)),
            ("750ns", Duration::from_nanos(750)),
            ("1.5min", Duration::from_secs(90)),
            (" 3 ms ", Duration::from_millis(3)),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_positive_duration(text), Ok(expected), "{text}");
        }
    }

    #[test]
    fn a_bare_number_is_seconds() {
        assert_eq!(
            parse_positive_duration("0.3").unwrap(),
            Duration::from_millis(300)
        );
        assert_eq!(
            parse_positive_duration(" 2 ").unwrap(),
            Duration::from_secs(2)
        );
        assert!(parse_positive_duration("0")
            .unwrap_err()
            .contains("greater than zero"));
        assert!(parse_positive_duration("inf").is_err());
    }

    #[test]
    fn rejects_with_a_reason() {
        let cases = [
            ("ms", "no number"),
            ("", "no number"),
            ("2h", "unknown unit 'h'"),
            ("0s", "greater than zero"),
            ("-1s", "greater than zero"),
            ("1..2s", "not a number"),
            ("0.1ns", "shorter than a nanosecond"),
            ("99999999999999999999999s", "too long"),
        ];
        for (text, reason) in cases {
            let err = parse_positive_duration(text).expect_err(text);
            assert!(err.contains(reason), "{text}: {err}");
        }
    }
}
