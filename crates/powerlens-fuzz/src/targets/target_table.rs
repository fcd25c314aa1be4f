//! `report --target FILE` (and `diff --target`): a table of idle states in JSON, or the
//! output of `powerlens info --json`. Checks: an accepted table has states, each named,
//! indexed in order.

use powerlens_core::advice::targets;

pub const DICT: &[&str] = &[
    "{\"states\": [",
    "\"name\": ",
    "\"latency_us\": ",
    "\"target_residency_us\": ",
    "\"cpuidle\": {",
];

pub fn run(input: &[u8]) {
    let text = String::from_utf8_lossy(input);
    let Ok(states) = targets::parse(&text) else {
        return;
    };
    assert!(!states.is_empty(), "an accepted table without states");
    for (i, s) in states.iter().enumerate() {
        assert_eq!(s.index as usize, i, "states out of order");
    }
}
