//! Kernel tracepoints through perf (placeholder, see below).

pub mod format;
pub mod ring;
pub mod collector;
