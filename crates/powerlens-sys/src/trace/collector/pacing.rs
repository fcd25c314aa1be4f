//! Pacing of sampled stacks: the period of each stack-sample event (one hit in N carries
//! a stack) follows the event's rate, so that the stacks a CPU records stay near a
//! chosen rate whatever the load. A load that switches a few hundred times a second gets
//! a stack on every switch; a ping-pong that switches 100,000 times a second gets one in
//! about a hundred, and pays for a hundredth of the stacks.

/// How often the rates are read, `since_start_ns` after the first call: every 1 ms in the
/// first 10 ms (every hit carries its stack until a reading has seen the load's rate, and
/// a switch-bound load pays full price until then: read first at 10 ms, the default
/// recording of a pinned ping-pong carried 3× the stacks its rate asked for), then every
/// 10 ms in the first second and every 100 ms after. Each reading is a read of every
/// twin's count, an interrupt to its CPU.
pub fn interval_ns(since_start_ns: u64) -> u64 {
    if since_start_ns < 10_000_000 {
        1_000_000
    } else if since_start_ns < 1_000_000_000 {
        10_000_000
    } else {
        100_000_000
    }
}

/// When the reading after one at `last_ns` is due, for pacing that started at
/// `started_ns`: by the schedule at that reading, not at the time of asking (1 ms into
/// a recording the next reading is due at 2 ms, while a schedule taken then would say 10
/// ms apart and put it at 11).
pub fn next_reading_ns(started_ns: u64, last_ns: u64) -> u64 {
    last_ns + interval_ns(last_ns.saturating_sub(started_ns))
}

/// Whether to replace the period `current` with `wanted`: when the rate moved by half
/// or more either way, or fell under the limit. The kernel samples the first hit after
/// a new period, so a period set at every reading would itself sample hits.
pub fn worth_changing(current: u64, wanted: u64) -> bool {
    if wanted == current {
        return false;
    }
    wanted == 1 || wanted * 2 >= current * 3 || wanted * 3 <= current * 2
}

/// The largest period: beyond it a stack is too rare to say anything.
pub const MAX_PERIOD: u64 = 1 << 20;

/// The period that brings `hits` in `elapsed_ns` down to about `max_per_s` samples a
/// second: 1 (every hit) while the rate is under it. An odd period, so that a CPU whose
/// hits alternate between two threads (a ping-pong) samples both; `jitter` (any value,
/// e.g. from a clock) adds up to a quarter of the period, so that no longer regular
/// pattern of hits is sampled at the same phase interval after interval.
pub fn period_for(hits: u64, elapsed_ns: u64, max_per_s: u32, jitter: u64) -> u64 {
    if elapsed_ns == 0 || max_per_s == 0 {
        return 1;
    }
    let per_s = hits as f64 * 1e9 / elapsed_ns as f64;
    let base = (per_s / f64::from(max_per_s)).ceil() as u64;
    if base <= 1 {
        return 1;
    }
    let spread = base / 4;
    let jittered = base + if spread > 0 { jitter % (spread + 1) } else { 0 };
    (jittered | 1).min(MAX_PERIOD)
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn periods_change_only_when_the_rate_moved() {
        assert!(!worth_changing(101, 101));
        assert!(!worth_changing(101, 121));
        assert!(!worth_changing(101, 81));
        assert!(worth_changing(101, 153));
        assert!(worth_changing(101, 67));
        assert!(worth_changing(1, 3));
        assert!(worth_changing(5, 1));
        assert_eq!(interval_ns(0), 1_000_000);
        assert_eq!(interval_ns(9_000_000), 1_000_000);
        assert_eq!(interval_ns(10_000_000), 10_000_000);
        assert_eq!(interval_ns(2_000_000_000), 100_000_000);
    }

    #[test]
    fn the_next_reading_follows_the_schedule_at_the_latest_one() {
        const MS: u64 = 1_000_000;
        let start = 5_000 * MS;
        // Readings 1 ms apart up to 10 ms in, then 10 ms apart, then 100 ms.
        assert_eq!(next_reading_ns(start, start + MS), start + 2 * MS);
        assert_eq!(next_reading_ns(start, start + 9 * MS), start + 10 * MS);
        assert_eq!(next_reading_ns(start, start + 10 * MS), start + 20 * MS);
        assert_eq!(
            next_reading_ns(start, start + 1_000 * MS),
            start + 1_100 * MS
        );
    }

    #[test]
    fn under_the_rate_every_hit_has_its_stack() {
        assert_eq!(period_for(0, S, 1000, 7), 1);
        assert_eq!(period_for(1000, S, 1000, 7), 1);
        assert_eq!(period_for(500, S / 10, 10_000, 3), 1);
        // Nothing measured yet, or no limit: every hit.
        assert_eq!(period_for(10_000, 0, 1000, 0), 1);
        assert_eq!(period_for(10_000, S, 0, 0), 1);
    }

    #[test]
    fn over_it_the_period_is_odd_and_brings_the_rate_near_the_limit() {
        // 100,000 hits a second against 1,000: every 100th, give or take a quarter.
        for jitter in 0..200 {
            let p = period_for(100_000, S, 1000, jitter);
            assert_eq!(p % 2, 1, "{p}");
            assert!((100..=126).contains(&p), "{p}");
        }
        // Jitter moves it: not one phase for ever.
        let periods: std::collections::BTreeSet<u64> =
            (0..50).map(|j| period_for(100_000, S, 1000, j)).collect();
        assert!(periods.len() > 5, "{periods:?}");
        // Twice the limit: every 2nd or 3rd hit, odd: 3.
        assert_eq!(period_for(2000, S, 1000, 0), 3);
        // Bounded.
        assert_eq!(period_for(u64::MAX / 2, 1, 1, 0), MAX_PERIOD);
    }
}
