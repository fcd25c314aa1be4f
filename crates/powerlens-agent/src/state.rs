//! What the server shows: the state the last closed interval left, shared between the
//! interval loop (which writes it) and the connections (which read it).

use std::time::{Duration, Instant};

use powerlens_core::monitor::Monitor;
use powerlens_record::live::Mode;

pub struct State {
    pub monitor: Monitor,
    /// Whether wake-ups are measured (traced throughout or in windows).
    pub traced: bool,
    /// `trace`, `windows` or `reduced` (powerlens_build_info's `mode`).
    pub mode: &'static str,
    /// The share of each interval traced: 1 throughout, 0 reduced.
    pub trace_duty: f64,
    pub per_process: bool,
    pub mode_reason: String,
    pub idle_states: Vec<(u32, String, f64)>,
    pub lost_records: Option<u64>,
    pub interval: Duration,
    /// powerlens_build_info's `version`.
    pub version: &'static str,
    /// powerlens_build_info's `tracing_path`.
    pub tracing_path: &'static str,
    /// When the last interval closed (or the agent started).
    pub last_close: Instant,
}

/// `mode`, `trace_duty` and `mode_reason` of a session in `mode`.
pub fn build_info_mode(mode: &Mode) -> (&'static str, f64, String) {
    match mode {
        Mode::Trace => ("trace", 1.0, String::new()),
        Mode::Windows { duty } => ("windows", *duty, String::new()),
        Mode::Reduced { reason } => ("reduced", 0.0, reason.clone()),
    }
}
