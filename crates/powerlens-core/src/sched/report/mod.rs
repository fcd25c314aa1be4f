//! The report model of a recording: from a [`SchedSummary`] and what the recording knows
//! besides the trace (thread table, cpuidle states and sysfs counters, energy, sampled
//! frequency, lost records) to every figure of `powerlens report`, each computed or
//! unavailable with its reason. Views (text, JSON, CSV) live in `powerlens-report`; the
//! JSON view is this model serialized, so field names are the JSON contract
//! (docs/REPORT.md).

mod build;
mod model;

pub use build::*;
pub use model::*;
