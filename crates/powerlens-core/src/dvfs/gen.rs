//! Synthetic traces, deterministic for a seed: periodic (a fixed vector/scalar cycle),
//! random (log-uniform durations, uniform levels) and adversarial (scalar stretches that
//! end just after a fixed timeout fires, the worst case for that timeout).

use super::trace::Phase;
use super::Level;

/// SplitMix64 (Steele, Lea, Flood 2014): a tiny, fast generator whose output is fixed
/// by the seed, so generated traces are reproducible across machines and versions.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), from the top 53 bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in 0..n (n > 0); the modulo bias is below 2^-40 for the small n used here.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// What to generate.
#[derive(Debug, Clone, PartialEq)]
pub enum Pattern {
    /// Repeats: `vector_us` at `level`, then `scalar_us` at level 0 (hinted if `hint`).
    Periodic {
        vector_us: f64,
        scalar_us: f64,
        level: Level,
        hint: bool,
    },
    /// Each phase: a level drawn uniformly from `levels`, a duration log-uniform in
    /// [`min_us`, `max_us`]. Level-0 phases of at least `hint_min_us` carry the hint.
    Random {
        min_us: f64,
        max_us: f64,
        levels: Vec<Level>,
        hint_min_us: f64,
    },
    /// Repeats: `vector_us` at `level`, then level-0 work that, under license `level`,
    /// lasts `timeout_us` + 1 µs of wall time: a `fixed:timeout_us` policy upclocks 1 µs
    /// before the next vector phase and pays the whole round trip for nothing.
    /// `slowdown` is f(0)/f(level) of the profile the trace is meant for.
    Adversarial {
        vector_us: f64,
        level: Level,
        timeout_us: f64,
        slowdown: f64,
    },
}

/// Rounds to whole nanoseconds, so that the CSV text stays short and parses exactly.
fn round_ns(us: f64) -> f64 {
    (us * 1000.0).round() / 1000.0
}

/// `phases` phases of `pattern`, drawn from `seed` where the pattern is random.
pub fn generate(pattern: &Pattern, phases: usize, seed: u64) -> impl Iterator<Item = Phase> + '_ {
    let mut rng = SplitMix64::new(seed);
    (0..phases).map(move |i| match pattern {
        Pattern::Periodic {
            vector_us,
            scalar_us,
            level,
            hint,
        } => {
            if i % 2 == 0 {
                Phase::new(*vector_us, *level, false)
            } else {
                Phase::new(*scalar_us, Level::Normal, *hint)
            }
        }
        Pattern::Random {
            min_us,
            max_us,
            levels,
            hint_min_us,
        } => {
            let level = levels[rng.below(levels.len())];
            let (lo, hi) = (min_us.ln(), max_us.ln());
            let duration = round_ns((lo + rng.next_f64() * (hi - lo)).exp());
            Phase::new(
                duration,
                level,
                level == Level::Normal && duration >= *hint_min_us,
            )
        }
        Pattern::Adversarial {
            vector_us,
            level,
            timeout_us,
            slowdown,
        } => {
            if i % 2 == 0 {
                Phase::new(*vector_us, *level, false)
            } else {
                Phase::new(
                    round_ns((timeout_us + 1.0) / slowdown),
                    Level::Normal,
                    false,
                )
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_is_the_published_sequence() {
        // First outputs of SplitMix64 seeded with 0, as in the reference implementation.
        let mut rng = SplitMix64::new(0);
        assert_eq!(rng.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(rng.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn random_traces_are_deterministic_and_in_range() {
        let pattern = Pattern::Random {
            min_us: 5.0,
            max_us: 5000.0,
            levels: vec![Level::Normal, Level::Avx512],
            hint_min_us: 1000.0,
        };
        let a: Vec<Phase> = generate(&pattern, 1000, 42).collect();
        let b: Vec<Phase> = generate(&pattern, 1000, 42).collect();
        let c: Vec<Phase> = generate(&pattern, 1000, 43).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.iter().all(|p| (5.0..=5000.0).contains(&p.duration_us)));
        assert!(a.iter().all(|p| p.level != Level::Avx2));
        assert!(a
            .iter()
            .all(|p| p.hint == (p.level == Level::Normal && p.duration_us >= 1000.0)));
        assert!(
            a.iter().any(|p| p.level == Level::Normal)
                && a.iter().any(|p| p.level == Level::Avx512)
        );
    }

    #[test]
    fn adversarial_scalar_phases_outlast_the_timeout_by_one_microsecond() {
        // Xeon 9-12 cores, AVX2: slowdown 3.1/2.6; scalar work = 671 * 2.6 / 3.1 µs.
        let slowdown = 3.1 / 2.6;
        let pattern = Pattern::Adversarial {
            vector_us: 10.0,
            level: Level::Avx2,
            timeout_us: 670.0,
            slowdown,
        };
        let phases: Vec<Phase> = generate(&pattern, 4, 0).collect();
        assert_eq!(phases[0], Phase::new(10.0, Level::Avx2, false));
        assert!((phases[1].duration_us * slowdown - 671.0).abs() < 0.001 * slowdown);
        assert_eq!(phases[2], phases[0]);
    }
}
