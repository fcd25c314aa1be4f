//! Parsing of durations on the command line: `2`, `2s`, `500ms`, `200us`, `1.5m`.

use std::time::Duration;

/// Parses a duration: a number with an optional unit `ns`, `us`/`µs`, `ms`, `s`, `m`, `h`.
/// A bare number is seconds. Zero, negative and non-finite values are refused.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| {
            !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E')
        })
        .unwrap_or(t.len());
    // "1e3ms" is fine, but a unit starting with 'e' doesn't exist, so the split is unambiguous.
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (examples: 2s, 500ms, 200us, 1.5)"))?;
    let scale = match unit.trim() {
        "" | "s" | "sec" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "ns" => 1e-9,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {text:?} (use ns, us, ms, s, m or h)"
            ))
        }
    };
    let secs = value * scale;
    if !secs.is_finite() || secs <= 0.0 {
        return Err(format!("{text:?}: a duration must be greater than zero"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("200us").unwrap(), Duration::from_micros(200));
        assert_eq!(parse_duration("200µs").unwrap(), Duration::from_micros(200));
        assert_eq!(parse_duration("1.5m").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("0.25s").unwrap(), Duration::from_millis(250));
        for bad in ["0", "-1s", "abc", "5 parsecs", "", "nan"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
