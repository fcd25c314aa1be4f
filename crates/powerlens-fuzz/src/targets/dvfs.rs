//! `dvfs simulate`'s inputs: the trace CSV (`duration_us,level[,hint]`) and the machine
//! profile file (TOML or JSON); and `dvfs classify`'s samples CSV (`time_us,pid,level`).
//!
//! The trace parser has a fast path for the common row shape beside the general parser;
//! every line is checked against a plain reference parser written from the documented
//! format (docs/DVFS.md), so the two paths cannot drift apart silently. Accepted traces
//! and profiles are simulated; the simulated times must be finite.

use powerlens_core::dvfs::classify::SamplesReader;
use powerlens_core::dvfs::policy::Policy;
use powerlens_core::dvfs::profile::Profile;
use powerlens_core::dvfs::simulate::simulate_policies;
use powerlens_core::dvfs::trace::{Phase, TraceParser};
use powerlens_core::dvfs::Level;

pub const TRACE_DICT: &[&str] = &[
    "duration_us,level,hint\n",
    "avx2",
    "avx512",
    "normal",
    ",1,1\n",
    ",2\n",
    "# comment",
];
pub const PROFILE_DICT: &[&str] = &[
    "name = ",
    "[[bucket]]\n",
    "min_cores = ",
    "max_cores = ",
    "normal_ghz = ",
    "avx2_ghz = ",
    "avx512_ghz = ",
    "[transition_us]\n",
    "normal_to_avx2_us = ",
    "normal_to_avx512_us = ",
    "avx2_to_avx512_us = ",
    "up_us = ",
    "\"bucket\": [",
];

pub const SAMPLES_DICT: &[&str] = &[
    "time_us,pid,level\n",
    "4294967295",
    "4294967296",
    "avx512",
    "# comment",
];

/// Traces longer than this are parsed but not simulated (the simulation is linear).
const MAX_SIMULATED: usize = 10_000;

const POLICIES: [Policy; 4] = [
    Policy::HARDWARE,
    Policy::FixedBreakEven,
    Policy::Hint,
    Policy::Oracle,
];

pub fn trace(input: &[u8]) {
    let text = String::from_utf8_lossy(input);
    let mut parser = TraceParser::new();
    let mut seen_data = false;
    let mut phases = Vec::new();
    for line in text.split_inclusive('\n') {
        let got = parser.push_line(line);
        let want = reference_row(line, &mut seen_data);
        match (&got, &want) {
            (Ok(a), Ok(b)) => assert!(
                a.map(bits) == b.map(bits),
                "line {line:?}: parsed {a:?}, the reference says {b:?}"
            ),
            (Err(_), Err(())) => {}
            _ => panic!("line {line:?}: parsed {got:?}, the reference says {want:?}"),
        }
        match got {
            Ok(Some(p)) => phases.push(p),
            Ok(None) => {}
            Err(_) => return,
        }
    }
    if phases.len() <= MAX_SIMULATED {
        simulate(
            &Profile::builtin("xeon-gold-6130").expect("built in"),
            &phases,
        );
    }
}

/// A phase's value with its bits, so that the comparison tells 0 from -0 and NaN from NaN.
fn bits(p: Phase) -> (u64, usize, bool) {
    (p.duration_us.to_bits(), p.level.index(), p.hint)
}

/// The documented format, as plainly as it can be written: `#` starts a comment, blank
/// lines and a first row starting with `duration_us` carry no data, a row is two or three
/// comma-separated fields (blanks around them ignored): a finite number ≥ 0, a level, and
/// an optional hint 0 or 1.
fn reference_row(line: &str, seen_data: &mut bool) -> Result<Option<Phase>, ()> {
    let text = line.split('#').next().unwrap_or("").trim();
    if text.is_empty() {
        return Ok(None);
    }
    let first = !std::mem::replace(seen_data, true);
    let fields: Vec<&str> = text.split(',').map(str::trim).collect();
    if first && fields[0] == "duration_us" {
        return Ok(None);
    }
    let (duration, level, hint) = match fields[..] {
        [d, l] => (d, l, None),
        [d, l, h] => (d, l, Some(h)),
        _ => return Err(()),
    };
    let duration: f64 = duration.parse().map_err(|_| ())?;
    if !duration.is_finite() || duration < 0.0 {
        return Err(());
    }
    let level = Level::parse(level).ok_or(())?;
    let hint = match hint {
        None | Some("0") => false,
        Some("1") => true,
        Some(_) => return Err(()),
    };
    Ok(Some(Phase::new(duration, level, hint)))
}

pub fn profile(input: &[u8]) {
    let text = String::from_utf8_lossy(input);
    let Ok(profile) = Profile::parse(&text) else {
        return;
    };
    profile.validate().expect("a parsed profile is valid");
    let trace = [
        Phase::new(100.0, Level::from_index(0).unwrap(), false),
        Phase::new(50.0, Level::from_index(2).unwrap(), false),
        Phase::new(2000.0, Level::from_index(0).unwrap(), true),
        Phase::new(10.0, Level::from_index(1).unwrap(), false),
    ];
    simulate(&profile, &trace);
}

fn simulate(profile: &Profile, trace: &[Phase]) {
    let mut cores: Vec<u32> = profile
        .buckets
        .iter()
        .flat_map(|b| [b.min_cores, b.max_cores])
        .collect();
    cores.truncate(8);
    for active in cores {
        let Ok(sim) = simulate_policies(profile, active, trace, &POLICIES) else {
            continue;
        };
        if !sim.work_us.is_finite() {
            continue;
        }
        for row in &sim.rows {
            for (what, v) in [
                ("total_time_us", row.total_time_us),
                ("overhead_us", row.overhead_us),
                ("stall_us", row.stall_us),
            ] {
                assert!(
                    v.is_finite() && v >= 0.0,
                    "{}: {what} = {v} for {} µs of work",
                    row.policy,
                    sim.work_us
                );
            }
        }
    }
}

/// `dvfs classify`: every accepted samples file scores each process between level 0 and
/// level 2 (a moving average of levels), each process once.
pub fn samples(input: &[u8]) {
    let text = String::from_utf8_lossy(input);
    let mut reader = SamplesReader::new();
    for line in text.split_inclusive('\n') {
        if reader.push_line(line).is_err() {
            return;
        }
    }
    let scores = reader.finish();
    let mut pids: Vec<u32> = scores.rows.iter().map(|r| r.pid).collect();
    pids.sort_unstable();
    pids.dedup();
    assert_eq!(pids.len(), scores.rows.len(), "a process scored twice");
    for r in &scores.rows {
        assert!(
            (0.0..=2.0).contains(&r.score),
            "pid {}: score {} outside the levels",
            r.pid,
            r.score
        );
        assert!(
            r.updates <= r.samples,
            "pid {}: more updates than samples",
            r.pid
        );
    }
}
