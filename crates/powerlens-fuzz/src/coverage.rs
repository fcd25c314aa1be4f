//! Coverage feedback on stable Rust, when the fuzzer is built with LLVM's SanitizerCoverage
//! (`-C passes=sancov-module -C llvm-args=-sanitizer-coverage-inline-8bit-counters`, what
//! `scripts/fuzz.sh` passes): every edge of the instrumented code gets an 8-bit counter,
//! and LLVM hands the counters' range to [`__sanitizer_cov_8bit_counters_init`] before
//! `main`. An input is kept when it drives some edge into a hit-count bucket (1, 2, 3,
//! 4–7, 8–15, 16–31, 32–127, 128+) no earlier input reached, as AFL and libFuzzer do.
//!
//! Built without the instrumentation (a plain `cargo build`), no range is registered and
//! the fuzzer mutates its seeds blindly: still useful, and what `cargo test` runs.

use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// Registered counter ranges (one per instrumented object; a linked binary has one).
const MAX_REGIONS: usize = 64;
static REGION_START: [AtomicPtr<u8>; MAX_REGIONS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_REGIONS];
static REGION_LEN: [AtomicUsize; MAX_REGIONS] = [const { AtomicUsize::new(0) }; MAX_REGIONS];
static REGIONS: AtomicUsize = AtomicUsize::new(0);

/// Called by the instrumentation's module constructors with the bounds of the counters.
///
/// # Safety
/// `start..stop` must be a live counter array for the life of the program, as LLVM's
/// constructors pass it.
#[no_mangle]
pub unsafe extern "C" fn __sanitizer_cov_8bit_counters_init(start: *mut u8, stop: *mut u8) {
    let len = (stop as usize).saturating_sub(start as usize);
    if len == 0 {
        return;
    }
    let registered = REGIONS.load(Ordering::Acquire).min(MAX_REGIONS);
    if REGION_START[..registered]
        .iter()
        .any(|r| r.load(Ordering::Relaxed) == start)
    {
        return;
    }
    let i = REGIONS.fetch_add(1, Ordering::AcqRel);
    if i < MAX_REGIONS {
        REGION_START[i].store(start, Ordering::Relaxed);
        REGION_LEN[i].store(len, Ordering::Release);
    }
}

fn regions() -> impl Iterator<Item = &'static mut [u8]> {
    (0..REGIONS.load(Ordering::Acquire).min(MAX_REGIONS)).filter_map(|i| {
        let start = REGION_START[i].load(Ordering::Acquire);
        let len = REGION_LEN[i].load(Ordering::Acquire);
        // SAFETY: LLVM registered this range for the life of the program; the counters
        // are plain bytes that instrumented code increments (races only blur counts).
        (!start.is_null()).then(|| unsafe { std::slice::from_raw_parts_mut(start, len) })
    })
}

/// The edges the instrumentation counts (0 when the build is not instrumented).
pub fn edges() -> usize {
    regions().map(|r| r.len()).sum()
}

/// The hit-count buckets each edge has reached so far.
pub struct Coverage {
    seen: Vec<u8>,
}

impl Default for Coverage {
    fn default() -> Self {
        Coverage::new()
    }
}

impl Coverage {
    pub fn new() -> Coverage {
        Coverage {
            seen: vec![0; edges()],
        }
    }

    /// Whether the build is instrumented.
    pub fn guided(&self) -> bool {
        !self.seen.is_empty()
    }

    /// Zeroes the counters before an input runs.
    pub fn reset(&self) {
        for r in regions() {
            r.fill(0);
        }
    }

    /// Folds the counters of the input that just ran into what was seen; true when it
    /// reached a new bucket of some edge.
    pub fn merge(&mut self) -> bool {
        let mut new = false;
        let mut at = 0;
        for r in regions() {
            let seen = &mut self.seen[at..at + r.len()];
            at += r.len();
            // Most counters are zero: compare eight at a time.
            for (counters, seen) in r.chunks(8).zip(seen.chunks_mut(8)) {
                if counters.iter().all(|&c| c == 0) {
                    continue;
                }
                for (&c, s) in counters.iter().zip(seen.iter_mut()) {
                    let b = bucket(c);
                    if b & !*s != 0 {
                        *s |= b;
                        new = true;
                    }
                }
            }
        }
        new
    }

    /// Edges hit at least once so far.
    pub fn covered(&self) -> usize {
        self.seen.iter().filter(|&&s| s != 0).count()
    }
}

/// The hit-count bucket of a counter, as one bit.
fn bucket(count: u8) -> u8 {
    match count {
        0 => 0,
        1 => 1,
        2 => 2,
        3 => 4,
        4..=7 => 8,
        8..=15 => 16,
        16..=31 => 32,
        32..=127 => 64,
        _ => 128,
    }
}
