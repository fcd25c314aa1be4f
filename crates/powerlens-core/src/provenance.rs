//! Where a figure comes from: every number powerlens prints is measured, estimated or
//! unavailable, and says which.

use serde::{Deserialize, Serialize};

/// The provenance of a figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Provenance {
    /// Read from a meter: `source` names it (e.g. `rapl-powercap`).
    Measured { source: String },
    /// Computed by a model: `model` names it, `parameters` describes its inputs.
    Estimated { model: String, parameters: String },
    /// Not available: why, and how to make it available.
    Unavailable { reason: String, fix: Option<String> },
}

impl Provenance {
    /// A one-line label for tables, e.g. `measured (rapl-powercap)`.
    pub fn label(&self) -> String {
        match self {
            Provenance::Measured { source } => format!("measured ({source})"),
            Provenance::Estimated { model, .. } => format!("estimated ({model})"),
            Provenance::Unavailable { reason, .. } => format!("unavailable ({reason})"),
        }
    }

    pub fn is_estimate(&self) -> bool {
        matches!(self, Provenance::Estimated { .. })
    }
}
