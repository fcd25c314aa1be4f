//! Pure analysis of powerlens: statistics, energy accounting and power models.
//!
//! Deterministic and free of I/O: callers feed measured values in, typed results come out.

pub mod advice;
pub mod battery_life;
pub mod codec;
pub mod compare;
pub mod diff;
pub mod dvfs;
pub mod figures;
pub mod model;
pub mod monitor;
pub mod provenance;
pub mod run;
pub mod sched;
pub mod stacks;
pub mod stats;
pub mod sweep;
pub mod verdict;
pub mod wake;
pub mod window;
