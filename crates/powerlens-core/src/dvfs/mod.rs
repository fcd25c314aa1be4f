//! Wide-vector frequency licenses (AVX2/AVX-512): the model of the dim-silicon report,
//! made exact so that results are comparable.
//!
//! - [`level`]: the three license levels (0 normal, 1 AVX2, 2 AVX-512).
//! - [`profile`]: maximum frequency per level and active-core bucket, transition costs.
//! - [`breakeven`]: t_BE = f_high · t_o / (f_high − f_low) per swing and bucket.
//! - [`trace`]: the phase model and the `duration_us,level[,hint]` CSV parser.
//! - [`policy`] and [`simulate`]: `fixed:T`, `fixed:breakeven`, `hint`, `oracle`.
//! - [`classify`]: the per-process power score from `time_us,pid,level` samples.
//! - [`gen`]: synthetic traces (periodic, random, adversarial) from a seeded PRNG.
//! - [`counters`]: whether the CPU's license-level counters can be read, and why not.
//!
//! Everything here is deterministic and free of I/O: callers hand in text and lines.

pub mod breakeven;
pub mod classify;
pub mod counters;
mod csv;
pub mod gen;
pub mod level;
pub mod measure;
pub mod policy;
pub mod profile;
pub mod simulate;
#[cfg(test)]
mod simulate_tests;
pub mod trace;

pub use csv::{InputError, InputErrorKind};
pub use level::Level;
