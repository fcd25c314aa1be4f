//! Pure analysis of powerlens: statistics, energy accounting and power models.
//!
//! Deterministic and free of I/O: callers feed measured values in, typed results come out.

pub mod dvfs;
pub mod provenance;
pub mod stats;
