//! `/proc/PID/maps`, as the recorder reads it to place user-stack addresses in files.
//! Checks: the mappings come sorted by start, and every address inside a mapping has a
//! file offset (no overflow for any mapping the parser accepted).

use powerlens_sys::procfs::maps::parse_executable_maps;

pub const DICT: &[&str] = &[
    "r-xp",
    "r--p",
    "rw-p",
    "--xp",
    "[vdso]",
    "[stack]",
    "(deleted)",
    "ffffffffff600000",
];

pub fn run(input: &[u8]) {
    let text = String::from_utf8_lossy(input);
    let maps = parse_executable_maps(&text);
    assert!(
        maps.windows(2).all(|w| w[0].start <= w[1].start),
        "mappings not in address order"
    );
    for m in &maps {
        assert!(
            !m.path.is_empty(),
            "a mapping without a path or pseudo name"
        );
        for addr in [m.start, m.end.wrapping_sub(1), m.start / 2 + m.end / 2] {
            if m.contains(addr) {
                let _ = m.file_offset_of(addr);
            }
        }
    }
}
