//! Simulator tests: small traces worked out by hand for every policy, and properties on
//! many randomized traces (the fixed-timeout competitive bound, accounting identities).

use super::gen::{generate, Pattern, SplitMix64};
use super::policy::Policy;
use super::profile::{Profile, DEFAULT_COSTS};
use super::simulate::{
    simulate, simulate_policies, Machine, PolicyResult, SimulateError, MAX_SIMULATED_US,
};
use super::trace::Phase;
use super::Level::{self, Avx2, Avx512, Normal};

/// 4 / 2 / 1 GHz: work takes 1x, 2x, 4x as long under licenses 0, 1, 2. Default costs:
/// down 0->1 17, 0->2 24, 1->2 17, up 10 µs.
fn toy() -> Machine {
    Machine::new([4.0, 2.0, 1.0], &DEFAULT_COSTS)
}

fn phases(rows: &[(f64, Level, bool)]) -> Vec<Phase> {
    rows.iter().map(|&(d, l, h)| Phase::new(d, l, h)).collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9
}

/// Checks total, overhead, transitions and the time split of a result.
fn check(r: &PolicyResult, total: f64, ideal: f64, transitions: u64, levels: [f64; 3], stall: f64) {
    let got = [r.time_normal_us, r.time_avx2_us, r.time_avx512_us];
    assert!(
        close(r.total_time_us, total),
        "{}: total {} != {total}",
        r.policy,
        r.total_time_us
    );
    assert!(
        close(r.ideal_time_us, ideal),
        "{}: ideal {}",
        r.policy,
        r.ideal_time_us
    );
    assert!(
        close(r.overhead_us, total - ideal),
        "{}: overhead {}",
        r.policy,
        r.overhead_us
    );
    assert_eq!(r.transitions, transitions, "{}: transitions", r.policy);
    for (g, want) in got.iter().zip(levels) {
        assert!(
            close(*g, want),
            "{}: level times {got:?} != {levels:?}",
            r.policy
        );
    }
    assert!(
        close(r.stall_us, stall),
        "{}: stall {}",
        r.policy,
        r.stall_us
    );
}

/// AVX2 10 µs, scalar 100 µs, AVX2 10 µs. Ideal: 10*2 + 100*1 + 10*2 = 140 µs.
fn two_level() -> Vec<Phase> {
    phases(&[
        (10.0, Avx2, false),
        (100.0, Normal, false),
        (10.0, Avx2, false),
    ])
}

#[test]
fn fixed_timeout_by_hand() {
    // fixed:100us.
    // Phase 1: level 1 > C = 0: stall 17 (now 17), C = 1; 10 µs work * 2 = 20 (now 37).
    // Phase 2: level 0 < C; timer from 37 fires at 137. At C = 1 the phase would take
    //   100 * 2 = 200 (until 237) > 137, so 100 µs run at C = 1 (work done 50), stall up
    //   10 (now 147), C = 0, the remaining 50 µs of work at 1x (now 197).
    // Phase 3: stall 17 (now 214), 10 * 2 = 20 (now 234).
    // Levels: normal 50, AVX2 20 + 100 + 20 = 140; stalls 17 + 10 + 17 = 44.
    let r = simulate(&toy(), &two_level(), &Policy::Fixed { timeout_us: 100.0 });
    check(&r, 234.0, 140.0, 3, [50.0, 140.0, 0.0], 44.0);
}

#[test]
fn fixed_hardware_timeout_never_fires_on_a_short_stretch() {
    // fixed:670us: the timer would fire at 37 + 670 = 707, after phase 2 ends (237).
    // 17 + 20 + 200 + 20 = 257; one transition.
    let r = simulate(&toy(), &two_level(), &Policy::HARDWARE);
    check(&r, 257.0, 140.0, 1, [0.0, 240.0, 0.0], 17.0);
}

#[test]
fn oracle_by_hand() {
    // Phase 2 starts a stretch at C = 1 ending before phase 3 (level 1).
    // Stay: 100 * 2 = 200. Upclock: 10 + 100 * 1 + t_down(0->1) 17 = 127 < 200: upclock.
    // 17 + 20 (37) + 10 (47) + 100 (147) + 17 (164) + 20 (184).
    let r = simulate(&toy(), &two_level(), &Policy::Oracle);
    check(&r, 184.0, 140.0, 3, [100.0, 40.0, 0.0], 44.0);
}

#[test]
fn fixed_breakeven_by_hand() {
    // t_BE(0<->1) = 4 * (17 + 10) / (4 - 2) = 54 µs. Timer from 37 fires at 91: 54 µs at
    // C = 1 (work 27), stall 10 (101), remaining 73 at 1x (174), 17 (191), 20 (211).
    // Overhead 71 <= 2 * 44 (the oracle's): the competitive bound.
    let r = simulate(&toy(), &two_level(), &Policy::FixedBreakEven);
    check(&r, 211.0, 140.0, 3, [73.0, 94.0, 0.0], 44.0);
}

#[test]
fn hint_by_hand() {
    // With the hint on phase 2: upclock at its start, as the oracle did: 184.
    let mut trace = two_level();
    trace[1].hint = true;
    check(
        &simulate(&toy(), &trace, &Policy::Hint),
        184.0,
        140.0,
        3,
        [100.0, 40.0, 0.0],
        44.0,
    );
    // Without it, hint is fixed:670us: 257.
    check(
        &simulate(&toy(), &two_level(), &Policy::Hint),
        257.0,
        140.0,
        1,
        [0.0, 240.0, 0.0],
        17.0,
    );
}

/// AVX-512 10, AVX2 5, scalar 100, AVX-512 10. Ideal: 40 + 10 + 100 + 40 = 190 µs.
fn three_level() -> Vec<Phase> {
    phases(&[
        (10.0, Avx512, false),
        (5.0, Avx2, false),
        (100.0, Normal, false),
        (10.0, Avx512, false),
    ])
}

#[test]
fn oracle_decides_nested_stretches_by_hand() {
    // Phase 1: stall 0->2 24, 10 * 4 = 40 (now 64).
    // Phase 2 starts a stretch at C = 2 (phases 2, 3; phase 4 is level 2).
    //   Stay: 5*4 + 100*4 = 420. Upclock: 10 + 5*2 + 100*2 + t_down(1->2) 17 = 237: upclock
    //   to C = 1 (74), 5 * 2 = 10 (84).
    // Phase 3 starts a stretch at C = 1 (phase 3 only).
    //   Stay: 100*2 + t_down(1->2) 17 = 217. Upclock: 10 + 100 + t_down(0->2) 24 = 134:
    //   upclock (94), 100 (194).
    // Phase 4: stall 24 (218), 40 (258). Stalls 24 + 10 + 10 + 24 = 68 = the overhead.
    let r = simulate(&toy(), &three_level(), &Policy::Oracle);
    check(&r, 258.0, 190.0, 4, [100.0, 10.0, 80.0], 68.0);
}

#[test]
fn fixed_breakeven_uses_the_swing_of_each_phase() {
    // After phase 1 (now 64, C = 2):
    // Phase 2 (level 1): t_BE(1<->2) = 2 * 27 / (2 - 1) = 54, deadline 118; the phase
    //   takes 5 * 4 = 20 (until 84): stays.
    // Phase 3 (level 0): t_BE(0<->2) = 4 * 34 / 3 = 45.333..., deadline 109.333...;
    //   25.333... at C = 2 (work 6.333...), stall 10 (119.333...), remaining 93.666... at
    //   1x (213).
    // Phase 4: stall 24 (237), 40 (277). AVX-512 time 40 + 20 + 25.333... + 40.
    let r = simulate(&toy(), &three_level(), &Policy::FixedBreakEven);
    let t_be = 4.0 * 34.0 / 3.0;
    let before = t_be - 20.0; // 109.333... - 84: the part of phase 3 run at C = 2
                              // Normal: 100 - before / 4 = 93.666...; AVX-512: 40 + 20 + before + 40 = 125.333...
    check(
        &r,
        277.0,
        190.0,
        3,
        [100.0 - before / 4.0, 0.0, 100.0 + before],
        58.0,
    );
    assert!(close(r.time_avx512_us, 125.0 + 1.0 / 3.0));
}

#[test]
fn fixed_hardware_stays_through_both_lower_phases() {
    // Timer from 64 fires at 734; phases 2 and 3 end at 84 and 484: no upclock.
    // 24 + 40 + 20 + 400 + 40 = 524, one transition.
    let r = simulate(&toy(), &three_level(), &Policy::HARDWARE);
    check(&r, 524.0, 190.0, 1, [0.0, 0.0, 500.0], 24.0);
}

#[test]
fn scalar_only_traces_have_no_overhead_and_ratio_one() {
    let trace = phases(&[(5.0, Normal, true), (7.5, Normal, false)]);
    let xeon = Profile::builtin("xeon-gold-6130").unwrap();
    let sim = simulate_policies(&xeon, 1, &trace, &[Policy::HARDWARE, Policy::Hint]).unwrap();
    for row in &sim.rows {
        check(row, 12.5, 12.5, 0, [12.5, 0.0, 0.0], 0.0);
        assert_eq!(row.overhead_ratio_to_oracle, Some(1.0));
    }
}

fn random_two_level(rng: &mut SplitMix64) -> (Machine, Vec<Phase>) {
    let xeon = Profile::builtin("xeon-gold-6130").unwrap();
    let bucket = &xeon.buckets[rng.below(xeon.buckets.len())];
    let pairs = [(Normal, Avx2), (Normal, Avx512), (Avx2, Avx512)];
    let (a, b) = pairs[rng.below(pairs.len())];
    let pattern = Pattern::Random {
        min_us: 1.0,
        max_us: 3000.0,
        levels: vec![a, b],
        hint_min_us: f64::INFINITY,
    };
    let len = 1 + rng.below(200);
    let trace = generate(&pattern, len, rng.next_u64()).collect();
    (Machine::new(bucket.ghz(), &xeon.costs), trace)
}

#[test]
fn fixed_breakeven_is_two_competitive_on_random_two_level_traces() {
    let mut rng = SplitMix64::new(2024);
    for round in 0..2000 {
        let (machine, trace) = random_two_level(&mut rng);
        let oracle = simulate(&machine, &trace, &Policy::Oracle).overhead_us;
        let be = simulate(&machine, &trace, &Policy::FixedBreakEven).overhead_us;
        // The bound is tight (equality when the last stretch ends the trace right after
        // the timer fired), so allow only rounding.
        assert!(
            be <= 2.0 * oracle * (1.0 + 1e-9) + 1e-9,
            "round {round}: {be} > 2 * {oracle}"
        );
    }
}

#[test]
fn the_oracle_is_optimal_on_two_level_traces() {
    let mut rng = SplitMix64::new(7);
    for round in 0..1000 {
        let (machine, trace) = random_two_level(&mut rng);
        let oracle = simulate(&machine, &trace, &Policy::Oracle).overhead_us;
        let timeout = rng.next_f64() * 2000.0;
        for policy in [
            Policy::Fixed {
                timeout_us: timeout,
            },
            Policy::HARDWARE,
            Policy::FixedBreakEven,
        ] {
            let other = simulate(&machine, &trace, &policy).overhead_us;
            assert!(
                oracle <= other + 1e-9,
                "round {round}: oracle {oracle} > {policy} {other}"
            );
        }
    }
}

#[test]
fn accounting_identities_hold_on_random_three_level_traces() {
    let mut rng = SplitMix64::new(99);
    let xeon = Profile::builtin("xeon-gold-6130").unwrap();
    for _ in 0..300 {
        let pattern = Pattern::Random {
            min_us: 0.5,
            max_us: 2000.0,
            levels: Level::ALL.to_vec(),
            hint_min_us: 300.0,
        };
        let trace: Vec<Phase> = generate(&pattern, 1 + rng.below(300), rng.next_u64()).collect();
        let cores = 1 + rng.below(16) as u32;
        let policies = [
            Policy::HARDWARE,
            Policy::FixedBreakEven,
            Policy::Hint,
            Policy::Oracle,
            Policy::Fixed { timeout_us: 0.0 },
        ];
        let sim = simulate_policies(&xeon, cores, &trace, &policies).unwrap();
        for r in &sim.rows {
            let parts = r.time_normal_us + r.time_avx2_us + r.time_avx512_us + r.stall_us;
            assert!(
                (parts - r.total_time_us).abs() <= 1e-6 * r.total_time_us.max(1.0),
                "{r:?}"
            );
            // Code never runs faster than its own level allows, so no policy beats ideal.
            assert!(r.overhead_us >= -1e-6 * r.total_time_us.max(1.0), "{r:?}");
        }
        assert_eq!(sim.rows[3].overhead_ratio_to_oracle, Some(1.0));
    }
}

#[test]
fn adversarial_trace_pushes_the_hardware_timeout_past_twice_the_oracle() {
    // Xeon Gold 6130 with 9-12 cores, normal<->AVX2: 3.1 vs 2.6 GHz, t_BE = 167.4 µs.
    // Each scalar stretch lasts 671 µs at AVX2 speed: fixed:670us loses 670 * 0.5/3.1
    // = 108 µs at the low frequency, then pays 10 + 17 for the round trip; the oracle
    // upclocks at once for 27 µs. Ratio about 135 / 27 = 5.
    let xeon = Profile::builtin("xeon-gold-6130").unwrap();
    let pattern = Pattern::Adversarial {
        vector_us: 10.0,
        level: Avx2,
        timeout_us: 670.0,
        slowdown: 3.1 / 2.6,
    };
    let trace: Vec<Phase> = generate(&pattern, 2000, 0).collect();
    let sim = simulate_policies(
        &xeon,
        10,
        &trace,
        &[Policy::HARDWARE, Policy::FixedBreakEven, Policy::Oracle],
    )
    .unwrap();
    let ratio = |i: usize| sim.rows[i].overhead_ratio_to_oracle.unwrap();
    // The simulated ratio agrees with the analytic worst case of the break-even table,
    // (T + t_BE) / t_BE = (670 + 167.4) / 167.4 = 5.0024 (up to the 1 µs margin).
    assert!(
        (ratio(0) - 837.4 / 167.4).abs() < 0.01,
        "fixed:670us ratio {}",
        ratio(0)
    );
    assert!(ratio(1) <= 2.0 + 1e-9, "fixed:breakeven ratio {}", ratio(1));
    assert_eq!(ratio(2), 1.0);
}

#[test]
fn an_empty_trace_takes_no_time() {
    let xeon = Profile::builtin("xeon-gold-6130").unwrap();
    let sim = simulate_policies(&xeon, 4, &[], &[Policy::Oracle]).unwrap();
    assert_eq!(sim.work_us.to_bits(), 0.0f64.to_bits(), "+0, not -0");
    check(&sim.rows[0], 0.0, 0.0, 0, [0.0; 3], 0.0);
    assert_eq!(sim.rows[0].ideal_time_us.to_bits(), 0.0f64.to_bits());
}

#[test]
fn hinting_every_phase_is_a_zero_timeout() {
    // Both upclock at the start of every lower-level phase, so they must agree exactly.
    let mut rng = SplitMix64::new(5);
    let xeon = Profile::builtin("xeon-gold-6130").unwrap();
    for _ in 0..200 {
        let pattern = Pattern::Random {
            min_us: 1.0,
            max_us: 1000.0,
            levels: Level::ALL.to_vec(),
            hint_min_us: f64::INFINITY,
        };
        let mut trace: Vec<Phase> =
            generate(&pattern, 1 + rng.below(100), rng.next_u64()).collect();
        trace.iter_mut().for_each(|p| p.hint = true);
        let machine = Machine::from_profile(&xeon, 1 + rng.below(16) as u32).unwrap();
        let hint = simulate(&machine, &trace, &Policy::Hint);
        let zero = simulate(&machine, &trace, &Policy::Fixed { timeout_us: 0.0 });
        assert_eq!(
            (hint.total_time_us, hint.transitions),
            (zero.total_time_us, zero.transitions)
        );
    }
}

/// Regression (fuzz/regressions/dvfs_trace/phase-of-1.8e18-us): a trace of 1.8e18 µs was
/// simulated at a resolution of 256 µs, and the hint policy's overhead came out at −256 µs.
#[test]
fn a_trace_longer_than_the_simulator_resolves_is_refused() {
    let xeon = Profile::builtin("xeon-gold-6130").unwrap();
    let long = phases(&[
        (1_844_674_407_370_955_168.0, Normal, false),
        (3.0, Avx2, true),
        (425.5, Normal, true),
    ]);
    let err = simulate_policies(&xeon, 1, &long, &[Policy::Hint]).unwrap_err();
    assert!(matches!(err, SimulateError::TooLong { .. }), "{err}");
    assert!(err.to_string().contains("11.6 days"), "{err}");
    // Just inside the bound: simulated, and no policy beats the ideal.
    let slowest = 3.7 / 3.5; // the xeon's 1–2-core bucket, normal over AVX-512
    let fits = phases(&[(MAX_SIMULATED_US / slowest / 2.0, Avx512, false)]);
    let sim = simulate_policies(&xeon, 1, &fits, &[Policy::Hint]).unwrap();
    assert!(sim.rows[0].overhead_us >= 0.0);
}
