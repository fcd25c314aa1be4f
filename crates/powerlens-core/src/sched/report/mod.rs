//! The report model of a recording: from a [`SchedSummary`] and what the recording knows
//! besides the trace (thread table, cpuidle states and sysfs counters, energy, sampled
//! frequency, lost records) to every figure of `powerlens report`, each computed or
//! unavailable with its reason. Views (text, JSON, CSV) live in `powerlens-report`; the
//! JSON view is this model serialized, so field names are the JSON contract
//! (docs/REPORT.md).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use super::analysis::{CpuTimeSource, SchedAnalysis, SchedSummary, ThreadStats, WakeupCauses};
use super::attribution::{attribute_weighted, frequency_weights};
use super::cpu_accounts::{cpu_time_accounts, CpuTimeAccounts};
use super::event::Tid;
use super::tracing_cost::{EventCosts, Perturbation};
use super::wakeups::WakeupCause;
use crate::advice::model::Advice;
use crate::provenance::Provenance;

mod build;
mod model;

pub use build::*;
pub use model::*;
