//! Sources of powerlens: everything that reads the machine.
//!
//! Every reader takes a [`Roots`] so that tests can point it at a fixture tree laid out
//! like `/sys` and `/proc`. Nothing here analyses or prints: readers return typed values
//! and typed errors ([`SysError`]) that name the path, the reason and the fix.

pub mod availability;
pub mod counter;
pub mod cpufreq;
pub mod cpuidle;
pub mod energy;
pub mod error;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixture;
pub mod machine;
pub mod nudge;
pub mod perf;
pub mod perf_caps;
pub mod platform;
pub mod power_supply;
pub mod procfs;
pub mod roots;
pub mod settings;
pub mod symbolize;
pub mod sysfs;
pub mod taskstats;
pub mod thread;
pub mod topology;
pub mod trace;
pub mod unwind;

pub use availability::Availability;
pub use error::SysError;
pub use roots::Roots;
