//! The unit of work of the compute-bound workloads: a fixed amount of integer arithmetic
//! that the optimizer cannot delete or shorten, so that "W units" means the same amount of
//! retired work in every run and every workload.

use std::hint::black_box;
use std::time::Instant;

/// Mixing rounds in one compute unit (about 1.5 µs in an optimized build on a current
/// x86-64 core; roughly ten times longer in an unoptimized test build).
pub const ROUNDS_PER_UNIT: u32 = 1024;

/// What one unit is called in reports: [`ROUNDS_PER_UNIT`] dependent integer
/// multiply-xorshift rounds.
pub const COMPUTE_UNIT: &str = "compute unit";

/// Runs one compute unit on `state` and returns the new state. Each round depends on the
/// previous one (no vectorization, no closed form); `black_box` at both ends keeps the
/// compiler from knowing the input or dropping the output.
pub fn compute_unit(state: u64) -> u64 {
    let mut x = black_box(state) | 1;
    for _ in 0..ROUNDS_PER_UNIT {
        x ^= x >> 29;
        x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    }
    black_box(x)
}

/// Runs `units` compute units; returns the final state.
pub fn compute_units(mut state: u64, units: u64) -> u64 {
    for _ in 0..units {
        state = compute_unit(state);
    }
    state
}

/// Calls `step` until `deadline` has passed, at least once; returns how many calls ran.
/// The clock is read after every call, so a step should take about a microsecond or more
/// for the clock reads to stay a small overhead.
pub fn repeat_until(deadline: Instant, mut step: impl FnMut()) -> u64 {
    let mut calls = 0;
    loop {
        step();
        calls += 1;
        if Instant::now() >= deadline {
            return calls;
        }
    }
}

/// Runs compute units until `deadline`; returns how many ran (at least one).
pub fn compute_until(state: &mut u64, deadline: Instant) -> u64 {
    repeat_until(deadline, || *state = compute_unit(*state))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn units_are_deterministic_and_change_the_state() {
        assert_eq!(compute_units(7, 3), compute_units(compute_units(7, 1), 2));
        assert_ne!(compute_unit(7), 7);
    }

    #[test]
    fn repeat_until_runs_at_least_once_even_past_the_deadline() {
        let past = Instant::now() - Duration::from_millis(1);
        assert_eq!(repeat_until(past, || {}), 1);
    }

    #[test]
    fn compute_until_keeps_computing_until_the_deadline() {
        let start = Instant::now();
        let mut state = 1;
        let units = compute_until(&mut state, start + Duration::from_millis(20));
        assert!(start.elapsed() >= Duration::from_millis(20));
        assert!(units > 1, "only {units} unit(s) in 20 ms");
    }
}
