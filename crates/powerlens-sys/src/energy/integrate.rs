//! Energy from a power sensor: the trapezoid rule between readings, for sources that give
//! watts rather than a cumulative counter (battery `power_now`, hwmon `powerK_input`).

use std::time::{Duration, Instant};

/// How often a power-integrating source must be read for the integral to follow changes
/// of power: sensors update about once a second, so reading slower loses detail.
pub(crate) const POWER_READ_INTERVAL: Duration = Duration::from_secs(1);

/// Cumulative joules from successive power readings, counted from the first: the
/// instants are the reader's (see [`EnergySource::read_joules`](super::EnergySource)), so
/// that the integral is over the clock the readings are taken on.
#[derive(Debug, Clone, Default)]
pub(crate) struct PowerIntegrator {
    /// The previous reading's power and instant; `None` before the first.
    last: Option<(f64, Instant)>,
    joules: f64,
}

impl PowerIntegrator {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Adds the energy since the previous reading (mean of the two powers × time) and
    /// returns the total. A reading from before the previous one adds nothing and is
    /// dropped: were it kept, the interval after it would be counted twice.
    pub(crate) fn update(&mut self, watts: f64, at: Instant) -> f64 {
        match self.last {
            Some((_, last_at)) if at < last_at => return self.joules,
            Some((last_watts, last_at)) => {
                let dt = at.duration_since(last_at).as_secs_f64();
                self.joules += (last_watts + watts) / 2.0 * dt;
            }
            None => {}
        }
        self.last = Some((watts, at));
        self.joules
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trapezoid_of_a_ramp() {
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        let mut p = PowerIntegrator::new();
        // The first reading starts the count.
        assert_eq!(p.update(10.0, t0), 0.0);
        // (10 + 20) / 2 W × 2 s, then 20 W × 1 s.
        assert_eq!(p.update(20.0, at(2)), 30.0);
        assert_eq!(p.update(20.0, at(3)), 50.0);
        // A reading from the past adds nothing rather than a negative amount, and the next
        // counts from the latest reading (20 W × 1 s), not from it again (20 W × 3 s).
        assert_eq!(p.update(40.0, at(1)), 50.0);
        assert_eq!(p.update(20.0, at(4)), 70.0);
    }
}
