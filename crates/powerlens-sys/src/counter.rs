//! Turning a hardware counter that wraps into a monotonic 64-bit total.

/// Accumulates a counter that counts up from 0 and wraps back to 0 at `range`
/// (RAPL's `energy_uj` wraps at `max_energy_range_uj`).
///
/// Correct as long as it is fed at least once per wrap period: two wraps between reads are
/// indistinguishable from one, which is why energy sources choose their read interval
/// from the range and the highest plausible power (see `energy::safe_read_interval`).
#[derive(Debug, Clone)]
pub struct WrapAccumulator {
    range: u64,
    last: u64,
    total: u64,
}

impl WrapAccumulator {
    /// Starts at the raw reading `first`; the total counts from zero.
    pub fn new(first: u64, range: u64) -> Self {
        WrapAccumulator {
            range,
            last: first,
            total: 0,
        }
    }

    /// Feeds a new raw reading and returns the total since the first reading.
    pub fn update(&mut self, raw: u64) -> u64 {
        let delta = if raw >= self.last {
            raw - self.last
        } else {
            // Wrapped: the counter ran from `last` up to `range`, then from 0 to `raw`.
            self.range.saturating_sub(self.last) + raw
        };
        self.last = raw;
        self.total += delta;
        self.total
    }

    /// The total so far.
    pub fn total(&self) -> u64 {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_without_wrap() {
        let mut acc = WrapAccumulator::new(100, 1000);
        assert_eq!(acc.update(150), 50);
        assert_eq!(acc.update(150), 50);
        assert_eq!(acc.update(999), 899);
    }

    #[test]
    fn counts_across_several_wraps() {
        // Range 1000; true energy advances 700 per read, so it wraps on most reads.
        let mut acc = WrapAccumulator::new(0, 1000);
        let mut truth = 0u64;
        for _ in 0..10 {
            truth += 700;
            assert_eq!(acc.update(truth % 1000), truth);
        }
        assert_eq!(acc.total(), 7000);
    }
}
