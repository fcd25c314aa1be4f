//! The files managed runtimes write about their JIT code, as `record` reads them when a
//! recording ends: perf maps (`/tmp/perf-PID.map`) and jitdump files (`jit-PID.dump`).

use powerlens_sys::symbolize::jitdump::Jitdump;
use powerlens_sys::symbolize::perf_map::PerfMap;

pub const PERF_MAP_DICT: &[&str] = &[
    "0x",
    "JS:*",
    "JS:~",
    "LazyCompile:",
    "Builtin:",
    "py::",
    "Interpreter",
    "ffffffffffffffff",
];

/// Checks: each line counts as an entry or a bad line, and the code at every entry's
/// start and last byte has a name (its own, or a later line's over the same bytes).
pub fn perf_map(input: &[u8]) {
    let text = String::from_utf8_lossy(input);
    let map = PerfMap::parse(&text);
    let lines = text.lines().filter(|l| !l.trim().is_empty()).count();
    assert_eq!(
        map.len() + map.bad_lines,
        lines,
        "a line neither parsed nor bad"
    );
    for (start, size) in map.ranges() {
        for addr in [start, start + (size - 1)] {
            assert!(map.lookup(addr).is_some(), "no name at {addr:#x}");
        }
    }
}

/// Checks: each piece of code is named at its start for as long as it lived (its own
/// name, or newer code over the same bytes: a load ends the code it replaces).
pub fn jitdump(input: &[u8]) {
    let Ok(dump) = Jitdump::parse(input) else {
        return;
    };
    for s in dump.spans() {
        if s.from_ns < s.until_ns && s.size > 0 {
            assert!(
                dump.lookup(s.start, s.from_ns).is_some(),
                "{s:?} not named in its own lifetime"
            );
        }
    }
}
