//! Views of a recording's report (`powerlens report`): the terminal grid by thread or by
//! process with the system section above it and the energy split below it, JSON (the
//! report model serialized: the contract of docs/REPORT.md) and CSV (one line per grid
//! row).
//!
//! Grid columns are named by the same keys as the JSON fields; `--sort`, `--show`,
//! `--hide` take those keys and [`list_columns`] describes them.

use std::cmp::Ordering;
use std::fmt::{self, Write};

use powerlens_core::sched::report::{
    CpuReport, ProcessRow, RecordingReport, RowMetrics, ThreadRow, WakeupCounts,
};
use powerlens_core::stacks::grid::FunctionRow;

use crate::names::NameFit;
use crate::table::{csv_field, sig, Table, NOT_AVAILABLE};

mod columns;
mod grid;
mod sections;
#[cfg(test)]
mod tests;

pub use columns::*;
pub use grid::*;
pub use sections::*;
