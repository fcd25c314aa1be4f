//! Break-even times: how long a stretch of lower-level code must last at the low
//! frequency before upclocking (and paying to come back down) pays off.
//!
//! From p_low · t_BE = p_high · (t_BE − t_o) with performance proportional to frequency:
//! t_BE = f_high · t_o / (f_high − f_low), where t_o = t_down + t_up.

use serde::Serialize;

use super::profile::{Profile, TransitionCosts};
use super::Level;
use crate::provenance::Provenance;

/// The upclock delay measured on Skylake-SP and the i9-7940X (report, section 4).
pub const HARDWARE_TIMEOUT_US: f64 = 670.0;

/// The three swings of the table: (faster level, slower level).
pub const SWINGS: [(Level, Level); 3] = [
    (Level::Normal, Level::Avx2),
    (Level::Normal, Level::Avx512),
    (Level::Avx2, Level::Avx512),
];

/// t_BE in µs, or `None` when the swing has no frequency difference (upclocking never
/// pays off then, so no timeout is competitive but "never").
pub fn break_even_us(f_high_ghz: f64, f_low_ghz: f64, round_trip_us: f64) -> Option<f64> {
    (f_high_ghz > f_low_ghz).then(|| f_high_ghz * round_trip_us / (f_high_ghz - f_low_ghz))
}

/// Worst-case ratio of a fixed timeout's overhead to the oracle's on one stretch of
/// lower-level code (the ski-rental argument of Karlin et al.): the adversary ends the
/// stretch just after the timeout fires, so the timeout pays r·T + t_o = r·(T + t_BE)
/// (r the loss rate while staying low), the oracle r·min(T, t_BE). Equals 2, the best a
/// deterministic policy can do, exactly when T = t_BE.
pub fn fixed_timeout_competitive_ratio(timeout_us: f64, break_even_us: f64) -> f64 {
    (timeout_us + break_even_us) / timeout_us.min(break_even_us)
}

/// One swing in one active-core bucket.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BreakEvenRow {
    /// The active-core bucket, e.g. `1-2`.
    pub cores: String,
    /// The faster level of the swing.
    pub from: Level,
    /// The slower level of the swing.
    pub to: Level,
    pub f_high_ghz: f64,
    pub f_low_ghz: f64,
    /// t_o = t_down(from → to) + t_up.
    pub round_trip_cost_us: f64,
    pub break_even_us: Option<f64>,
    /// Worst-case overhead ratio to the oracle of the fixed hardware timeout here.
    pub fixed_timeout_competitive_ratio: Option<f64>,
}

/// The break-even table of a profile.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BreakEvenTable {
    pub provenance: Provenance,
    pub profile: String,
    pub costs: TransitionCosts,
    /// The fixed timeout the ratios are computed for (the hardware's 670 µs).
    pub fixed_timeout_us: f64,
    /// The ratio a timeout equal to t_BE achieves: the optimum for deterministic policies.
    pub optimal_competitive_ratio: f64,
    pub rows: Vec<BreakEvenRow>,
}

/// Break-even times for every bucket of `profile` and every swing.
pub fn break_even_table(profile: &Profile, fixed_timeout_us: f64) -> BreakEvenTable {
    let mut rows = Vec::with_capacity(profile.buckets.len() * SWINGS.len());
    for bucket in &profile.buckets {
        let ghz = bucket.ghz();
        for (from, to) in SWINGS {
            let (f_high, f_low) = (ghz[from.index()], ghz[to.index()]);
            let round_trip = profile.costs.round_trip_us(from, to);
            let be = break_even_us(f_high, f_low, round_trip);
            rows.push(BreakEvenRow {
                cores: bucket.label(),
                from,
                to,
                f_high_ghz: f_high,
                f_low_ghz: f_low,
                round_trip_cost_us: round_trip,
                break_even_us: be,
                fixed_timeout_competitive_ratio: be
                    .map(|be| fixed_timeout_competitive_ratio(fixed_timeout_us, be)),
            });
        }
    }
    BreakEvenTable {
        provenance: Provenance::estimated(
            "break-even time t_BE = f_high * t_o / (f_high - f_low), t_o = t_down + t_up",
            format!("profile {}, {}", profile.name, profile.costs.describe()),
        ),
        profile: profile.name.clone(),
        costs: profile.costs,
        fixed_timeout_us,
        optimal_competitive_ratio: 2.0,
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn xeon_gold_6130_matches_the_report_figures() {
        let table = break_even_table(&Profile::builtin("xeon-gold-6130").unwrap(), 670.0);
        let be = |cores: &str, from: Level, to: Level| {
            table
                .rows
                .iter()
                .find(|r| r.cores == cores && r.from == from && r.to == to)
                .unwrap()
                .break_even_us
                .unwrap()
        };
        use Level::*;
        // normal<->AVX2, t_o = 17 + 10 = 27 µs:
        //   1-2 cores:  3.7 GHz * 27 / (3.7 - 3.6) = 99.9 / 0.1 = 999 µs   ("about 1000")
        //   9-12 cores: 3.1 * 27 / (3.1 - 2.6) = 83.7 / 0.5 = 167.4 µs     (150..190)
        //   13-16:      2.8 * 27 / (2.8 - 2.4) = 75.6 / 0.4 = 189 µs       (150..190)
        assert!(close(be("1-2", Normal, Avx2), 999.0));
        assert!(close(be("3-4", Normal, Avx2), 945.0)); // 3.5*27/0.1
        assert!(close(be("5-8", Normal, Avx2), 306.0)); // 3.4*27/0.3
        assert!(close(be("9-12", Normal, Avx2), 167.4));
        assert!(close(be("13-16", Normal, Avx2), 189.0));
        // normal<->AVX-512, t_o = 24 + 10 = 34 µs: 1-2: 3.7*34/0.2 = 629; 9-12: 3.1*34/1.0.
        assert!(close(be("1-2", Normal, Avx512), 629.0));
        assert!(close(be("9-12", Normal, Avx512), 105.4));
        // AVX2<->AVX-512, t_o = 17 + 10 = 27 µs: 1-2: 3.6*27/0.1 = 972; 13-16: 2.4*27/0.5.
        assert!(close(be("1-2", Avx2, Avx512), 972.0));
        assert!(close(be("13-16", Avx2, Avx512), 129.6));
        assert_eq!(table.rows.len(), 15);
    }

    #[test]
    fn competitive_ratio_is_two_only_at_break_even() {
        assert_eq!(fixed_timeout_competitive_ratio(167.4, 167.4), 2.0);
        // 670 µs against t_BE = 167.4 µs: (670 + 167.4) / 167.4 = 5.0024...
        assert!(close(
            fixed_timeout_competitive_ratio(670.0, 167.4),
            837.4 / 167.4
        ));
        // 670 µs against t_BE = 999 µs: (670 + 999) / 670 = 2.4910...
        assert!(close(
            fixed_timeout_competitive_ratio(670.0, 999.0),
            1669.0 / 670.0
        ));
    }

    #[test]
    fn no_swing_has_no_break_even() {
        assert_eq!(break_even_us(3.0, 3.0, 27.0), None);
        let table = break_even_table(&Profile::builtin("i9-7940x").unwrap(), 670.0);
        // 3.1 -> 2.7 GHz, t_o 27: 3.1 * 27 / 0.4 = 209.25 µs in every bucket.
        assert!(close(table.rows[0].break_even_us.unwrap(), 209.25));
    }
}
