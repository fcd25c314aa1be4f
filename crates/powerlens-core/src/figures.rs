//! Numbers as powerlens prints them in its lines of text and tables.

/// Formats a value with `significant` significant digits, without exponent for the
/// magnitudes powerlens prints (µJ to MJ).
pub fn sig(value: f64, significant: usize) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let magnitude = value.abs().log10().floor() as i32;
    let decimals = (significant as i32 - 1 - magnitude).max(0) as usize;
    format!("{value:.decimals$}")
}

/// Seconds in a line of text, with the unit: three decimals from 10 ms up, two significant
/// digits below, so that a small figure (a sleeping command's 0.14 ms of CPU time) is never
/// printed as `0.000 s`.
pub fn seconds(value: f64) -> String {
    if value.abs() >= 0.01 || value == 0.0 || !value.is_finite() {
        format!("{value:.3} s")
    } else {
        format!("{} s", sig(value, 2))
    }
}

/// A range of seconds in a line of text, each end as [`seconds`] prints it: `0.053–0.136 s`.
pub fn seconds_range(low: f64, high: f64) -> String {
    format!("{}–{}", seconds(low).trim_end_matches(" s"), seconds(high))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn significant_digits() {
        assert_eq!(sig(43186.848, 4), "43187");
        assert_eq!(sig(1.23456, 4), "1.235");
        assert_eq!(sig(0.0012345, 3), "0.00123");
        assert_eq!(sig(0.0, 3), "0");
    }

    #[test]
    fn small_seconds_keep_their_digits() {
        assert_eq!(seconds(0.084), "0.084 s");
        assert_eq!(seconds(1.5), "1.500 s");
        assert_eq!(seconds(0.01), "0.010 s");
        assert_eq!(seconds(0.0014), "0.0014 s");
        assert_eq!(seconds(0.000_14), "0.00014 s");
        assert_eq!(seconds(0.0), "0.000 s");
        assert_eq!(seconds_range(0.0031, 0.136), "0.0031–0.136 s");
    }
}
