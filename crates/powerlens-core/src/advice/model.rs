//! What a piece of advice is, apart from the rules that make it (`advice/mod.rs`): the
//! recording's report holds advice, and the rules read the report.

use serde::{Deserialize, Serialize};

use crate::sched::event::Tid;

/// One piece of advice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Advice {
    /// `short-sleeps`, `preemption`, `interpreter-lock`, `imbalance`, `frequency-drop`,
    /// `polling`, `timer-coalescing`.
    pub rule: String,
    /// What was measured, with the numbers.
    pub evidence: String,
    /// The change to make.
    pub suggestion: String,
    /// The function (or thread) the evidence points at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tid: Option<Tid>,
    /// The rule's main figure and its threshold (e.g. mean sleep µs vs residency µs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threshold: Option<f64>,
}
