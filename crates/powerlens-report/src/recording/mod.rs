//! Views of a recording's report (`powerlens report`): the terminal grid by thread or by
//! process with the system section above it and the energy split below it, JSON (the
//! report model serialized: the contract of docs/REPORT.md) and CSV (one line per grid
//! row).
//!
//! Grid columns are named by the same keys as the JSON fields; `--sort`, `--show`,
//! `--hide` take those keys and [`list_columns`] describes them.

mod columns;
mod grid;
mod sections;
#[cfg(test)]
mod tests;

pub use columns::*;
pub use grid::*;
pub use sections::*;
