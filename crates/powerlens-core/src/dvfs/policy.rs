//! Upclocking policies: when a core whose license is above what the running code needs
//! returns to the faster license.

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

use super::breakeven::HARDWARE_TIMEOUT_US;

/// A DVFS upclocking policy. Lowering the license is never a choice: code of level L
/// always stalls for t_down and runs under license L.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Policy {
    /// Upclock once `timeout_us` of wall time have passed since code of the current
    /// license's level (or above) last ran. `fixed:670us` is the measured hardware.
    Fixed { timeout_us: f64 },
    /// Like `Fixed`, with the timeout equal to the break-even time of the swing between
    /// the current license and the level of the code now running.
    FixedBreakEven,
    /// Like `fixed:670us`, but upclock at once at the start of a phase whose hint is 1.
    Hint,
    /// Knows the future: at the start of each stretch of lower-level phases, upclock at
    /// once if that finishes sooner than staying, else stay for the whole stretch.
    Oracle,
}

/// How policies are written, quoted in errors and help.
pub const POLICY_SYNTAX: &str =
    "fixed:T (T in us or ms, e.g. fixed:670us, fixed:0.2ms), fixed:breakeven, hint, oracle";

#[derive(Debug, Clone, PartialEq, Error)]
#[error("unknown policy `{text}`: use {POLICY_SYNTAX}")]
pub struct PolicyError {
    pub text: String,
}

impl Policy {
    /// The hardware policy: a fixed 670 µs timeout.
    pub const HARDWARE: Policy = Policy::Fixed {
        timeout_us: HARDWARE_TIMEOUT_US,
    };
}

impl FromStr for Policy {
    type Err = PolicyError;

    fn from_str(text: &str) -> Result<Policy, PolicyError> {
        let err = || PolicyError {
            text: text.to_string(),
        };
        match text.trim() {
            "oracle" => return Ok(Policy::Oracle),
            "hint" => return Ok(Policy::Hint),
            "fixed:breakeven" => return Ok(Policy::FixedBreakEven),
            _ => {}
        }
        let timeout = text.trim().strip_prefix("fixed:").ok_or_else(err)?;
        let (number, scale) = if let Some(n) = timeout.strip_suffix("ms") {
            (n, 1000.0)
        } else if let Some(n) = timeout
            .strip_suffix("us")
            .or_else(|| timeout.strip_suffix("µs"))
        {
            (n, 1.0)
        } else {
            (timeout, 1.0)
        };
        let value: f64 = number.trim().parse().map_err(|_| err())?;
        if !value.is_finite() || value < 0.0 {
            return Err(err());
        }
        Ok(Policy::Fixed {
            timeout_us: value * scale,
        })
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::Fixed { timeout_us } => write!(f, "fixed:{timeout_us}us"),
            Policy::FixedBreakEven => f.write_str("fixed:breakeven"),
            Policy::Hint => f.write_str("hint"),
            Policy::Oracle => f.write_str("oracle"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        let p = |s: &str| s.parse::<Policy>().unwrap();
        assert_eq!(p("fixed:670us"), Policy::HARDWARE);
        assert_eq!(p("fixed:670"), Policy::HARDWARE);
        assert_eq!(p("fixed:0.2ms"), Policy::Fixed { timeout_us: 200.0 });
        assert_eq!(p("fixed:180µs"), Policy::Fixed { timeout_us: 180.0 });
        assert_eq!(p("fixed:breakeven"), Policy::FixedBreakEven);
        assert_eq!(p("hint"), Policy::Hint);
        assert_eq!(p("oracle"), Policy::Oracle);
        assert_eq!(Policy::HARDWARE.to_string(), "fixed:670us");
    }

    #[test]
    fn rejects_unknown_policies_with_the_syntax() {
        for bad in [
            "fixed",
            "fixed:",
            "fixed:-3us",
            "fixed:abc",
            "timeout:5",
            "ORACLE",
        ] {
            let err = bad.parse::<Policy>().unwrap_err().to_string();
            assert!(
                err.contains("fixed:breakeven, hint, oracle"),
                "{bad}: {err}"
            );
        }
    }
}
