//! Where a figure comes from: every number powerlens prints is measured, estimated or
//! unavailable, and says which.

use serde::{Deserialize, Serialize};

/// The provenance of a figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Provenance {
    /// Read from a meter: `source` names it (e.g. `rapl-powercap`).
    Measured { source: String },
    /// Computed by a model: `model` names it, `parameters` describes its inputs. A power
    /// model chosen for the kind of machine also says which (`server`, `desktop`,
    /// `laptop`, `unknown`) and why.
    Estimated {
        model: String,
        parameters: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        machine_class: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        machine_class_reason: Option<String>,
    },
    /// Not available: why, and how to make it available.
    Unavailable { reason: String, fix: Option<String> },
    /// Scripted by the mock executor, a test backend: no command ran and no meter was
    /// read, so that the arithmetic on the figures can be checked exactly. Its own kind,
    /// so that it cannot pass for a measurement wherever the provenance goes.
    Mocked { source: String },
}

impl Provenance {
    /// An estimate by a model that is not chosen per machine (no machine class).
    pub fn estimated(model: impl Into<String>, parameters: impl Into<String>) -> Self {
        Provenance::Estimated {
            model: model.into(),
            parameters: parameters.into(),
            machine_class: None,
            machine_class_reason: None,
        }
    }

    /// A one-line label for tables, e.g. `measured (rapl-powercap)`.
    pub fn label(&self) -> String {
        match self {
            Provenance::Measured { source } => format!("measured ({source})"),
            Provenance::Estimated { model, .. } => format!("estimated ({model})"),
            Provenance::Unavailable { reason, .. } => format!("unavailable ({reason})"),
            Provenance::Mocked { source } => format!("MOCKED ({source})"),
        }
    }

    /// For an estimate by a model chosen for the kind of machine: which kind and why, e.g.
    /// "the power model for a server, chosen because AMD EPYC 7B13 … is a server part".
    pub fn chosen_because(&self) -> Option<String> {
        match self {
            Provenance::Estimated {
                model,
                machine_class: Some(class),
                machine_class_reason: Some(reason),
                ..
            } => Some(format!(
                "{model} is the power model for a {class} machine, chosen because {reason}"
            )),
            _ => None,
        }
    }

    pub fn is_estimate(&self) -> bool {
        matches!(self, Provenance::Estimated { .. })
    }

    pub fn is_mock(&self) -> bool {
        matches!(self, Provenance::Mocked { .. })
    }
}
