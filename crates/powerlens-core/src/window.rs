//! The increase of a cumulative counter (an energy meter's joules) over an exact interval,
//! from samples taken at other times: each end of the interval is interpolated linearly
//! between the two samples around it. A meter sampled every 100 ms would otherwise charge
//! up to a sample interval of energy outside a recording to it. Streaming: only the four
//! samples around the two ends are kept.

/// One counter over `[start_ns, end_ns]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CounterWindow {
    start_ns: u64,
    end_ns: u64,
    /// The last sample at or before, and the first after, each end.
    start_before: Option<(u64, f64)>,
    start_after: Option<(u64, f64)>,
    end_before: Option<(u64, f64)>,
    end_after: Option<(u64, f64)>,
}

impl CounterWindow {
    pub fn new(start_ns: u64, end_ns: u64) -> Self {
        CounterWindow {
            start_ns,
            end_ns: end_ns.max(start_ns),
            start_before: None,
            start_after: None,
            end_before: None,
            end_after: None,
        }
    }

    /// A sample of the counter; samples must come in time order.
    pub fn push(&mut self, time_ns: u64, value: f64) {
        for (at, before, after) in [
            (self.start_ns, &mut self.start_before, &mut self.start_after),
            (self.end_ns, &mut self.end_before, &mut self.end_after),
        ] {
            if time_ns <= at {
                *before = Some((time_ns, value));
            } else if after.is_none() {
                *after = Some((time_ns, value));
            }
        }
    }

    /// The counter's value at `t`: interpolated between the samples around it, or the
    /// nearest sample when `t` is outside the sampled range.
    fn at(t: u64, before: Option<(u64, f64)>, after: Option<(u64, f64)>) -> Option<f64> {
        match (before, after) {
            (Some((t0, v0)), Some((t1, v1))) if t1 > t0 => {
                Some(v0 + (v1 - v0) * (t - t0) as f64 / (t1 - t0) as f64)
            }
            (Some((_, v)), _) | (None, Some((_, v))) => Some(v),
            (None, None) => None,
        }
    }

    /// The increase over the interval (never negative), or `None` without samples, or when
    /// the samples give no finite increase (damaged counters of ±1e308 J made it NaN,
    /// which `max(0.0)` turned into a silent 0).
    pub fn increase(&self) -> Option<f64> {
        let (start, end) = self.ends()?;
        let increase = end - start;
        increase.is_finite().then(|| increase.max(0.0))
    }

    /// The value at the start and at the end of the interval, or `None` without samples.
    pub fn ends(&self) -> Option<(f64, f64)> {
        let start = Self::at(self.start_ns, self.start_before, self.start_after)?;
        let end = Self::at(self.end_ns, self.end_before, self.end_after)?;
        Some((start, end))
    }

    /// How much of the interval the samples cover, 0 to 1: less than 1 when the meter was
    /// not sampled before the start or after the end (the missing part counts as nothing).
    pub fn coverage(&self) -> f64 {
        let first = self
            .start_before
            .map(|_| self.start_ns)
            .or(self.start_after.map(|s| s.0));
        let last = self
            .end_after
            .map(|_| self.end_ns)
            .or(self.end_before.map(|s| s.0));
        match (first, last) {
            (Some(a), Some(b)) if self.end_ns > self.start_ns => {
                (b.min(self.end_ns).saturating_sub(a.max(self.start_ns))) as f64
                    / (self.end_ns - self.start_ns) as f64
            }
            _ => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpolates_both_ends_by_hand() {
        // 20 W sampled every 100 ms; the interval is 150 ms .. 420 ms: 0.27 s × 20 W.
        let mut w = CounterWindow::new(150_000_000, 420_000_000);
        for i in 0..=6u64 {
            w.push(i * 100_000_000, i as f64 * 2.0);
        }
        assert!(
            (w.increase().unwrap() - 5.4).abs() < 1e-9,
            "{:?}",
            w.increase()
        );
        assert_eq!(w.coverage(), 1.0);
    }

    #[test]
    fn samples_only_inside_hold_the_nearest_and_say_so() {
        let mut w = CounterWindow::new(0, 1_000);
        w.push(250, 10.0);
        w.push(750, 20.0);
        assert_eq!(w.increase(), Some(10.0));
        assert!((w.coverage() - 0.5).abs() < 1e-9);
        assert_eq!(CounterWindow::new(0, 10).increase(), None);
        // A counter that went backwards (a reset) never gives a negative increase.
        let mut back = CounterWindow::new(0, 10);
        back.push(0, 5.0);
        back.push(10, 1.0);
        assert_eq!(back.increase(), Some(0.0));
    }

    #[test]
    fn samples_with_no_finite_increase_give_none_not_zero() {
        let mut w = CounterWindow::new(5, 10);
        w.push(0, -1.7e308);
        w.push(20, 1.7e308);
        assert_eq!(w.increase(), None);
    }
}
