//! Energy from a power sensor: the trapezoid rule between readings, for sources that give
//! watts rather than a cumulative counter (battery `power_now`, hwmon `powerK_input`).

use std::time::{Duration, Instant};

/// How often a power-integrating source must be read for the integral to follow changes
/// of power: sensors update about once a second, so reading slower loses detail.
pub(crate) const POWER_READ_INTERVAL: Duration = Duration::from_secs(1);

/// Cumulative joules from successive power readings.
#[derive(Debug, Clone)]
pub(crate) struct PowerIntegrator {
    last_watts: f64,
    last_at: Instant,
    joules: f64,
}

impl PowerIntegrator {
    pub(crate) fn new(watts: f64, at: Instant) -> Self {
        PowerIntegrator {
            last_watts: watts,
            last_at: at,
            joules: 0.0,
        }
    }

    /// Adds the energy since the previous reading (mean of the two powers × time) and
    /// returns the total.
    pub(crate) fn update(&mut self, watts: f64, at: Instant) -> f64 {
        let dt = at.saturating_duration_since(self.last_at).as_secs_f64();
        self.joules += (self.last_watts + watts) / 2.0 * dt;
        self.last_watts = watts;
        self.last_at = at;
        self.joules
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trapezoid_of_a_ramp() {
        let t0 = Instant::now();
        let mut p = PowerIntegrator::new(10.0, t0);
        assert_eq!(p.update(20.0, t0 + Duration::from_secs(2)), 30.0);
        assert_eq!(p.update(20.0, t0 + Duration::from_secs(3)), 50.0);
        // A reading from the past adds nothing rather than a negative amount.
        assert_eq!(p.update(20.0, t0), 50.0);
    }
}
