//! System settings that `compare` and `sweep` apply for a configuration, and always restore:
//! cpufreq governor, EPP, frequency limits, turbo, cpuidle states, a PM QoS wake-latency
//! limit, and the CPU affinity of the measured command.
//!
//! The flow is [`parse_settings`] (the text of `--config NAME=…`), [`check`] before anything
//! runs (is every setting applicable on this machine, by this user?), then [`apply`], whose
//! [`Applied`] guard restores every original value when dropped. `apply` is all or none:
//! when one write fails, the writes before it are undone before the error returns.
//!
//! Crash safety: before the first write, the original values go to a journal file (see
//! [`journal`]); the guard removes it after restoring. A journal left behind means powerlens
//! was killed with its settings applied, and [`restore_from_journal`] puts them back. The PM
//! QoS request needs no journal: the kernel drops it when the file descriptor closes, also
//! when the process dies.

mod affinity;
mod applied;
mod cpufreq;
mod cstate;
mod error;
pub mod journal;
mod parse;
mod plan;
pub mod pm_qos;
mod select;
mod turbo;
mod write;

use std::fmt;
use std::path::PathBuf;

pub use affinity::restrict_command_to;
pub use applied::Applied;
pub use error::SettingsError;
pub use journal::{default_journal_path, restore_from_journal, JOURNAL_ENV};
pub use parse::parse_settings;
pub use pm_qos::PM_QOS_DEVICE;

use crate::Roots;

/// One system setting of a configuration, as parsed from `--config`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Setting {
    /// `governor=NAME`: cpufreq `scaling_governor` of every policy.
    Governor(String),
    /// `epp=NAME`: `energy_performance_preference` of every policy.
    Epp(String),
    /// `min_freq=FREQ`: `scaling_min_freq` of every policy, in kHz.
    MinFreqKhz(u64),
    /// `max_freq=FREQ`: `scaling_max_freq` of every policy, in kHz.
    MaxFreqKhz(u64),
    /// `turbo=on|off`: intel_pstate `no_turbo` (inverted) or cpufreq `boost`.
    Turbo(bool),
    /// `cstate.NAME=on|off`: the cpuidle state of that name on every online CPU.
    CState { name: String, enabled: bool },
    /// `cstates=NAME[,NAME…]`: only these cpuidle states enabled, every other one disabled.
    CStatesOnly(Vec<String>),
    /// `pm_qos=LATENCY`: a CPU wake-latency limit in µs, held through `/dev/cpu_dma_latency`.
    PmQosUs(u32),
    /// `cpus=LIST`: the CPUs the measured command may run on (applied to the child only).
    Cpus(Vec<u32>),
}

impl Setting {
    /// What two settings must not share: a setting given twice is an error.
    fn key(&self) -> String {
        match self {
            Setting::Governor(_) => "governor".into(),
            Setting::Epp(_) => "epp".into(),
            Setting::MinFreqKhz(_) => "min_freq".into(),
            Setting::MaxFreqKhz(_) => "max_freq".into(),
            Setting::Turbo(_) => "turbo".into(),
            Setting::CState { name, .. } => format!("cstate.{}", name.to_lowercase()),
            Setting::CStatesOnly(_) => "cstates".into(),
            Setting::PmQosUs(_) => "pm_qos".into(),
            Setting::Cpus(_) => "cpus".into(),
        }
    }
}

/// The canonical text of a setting; [`parse_settings`] reads it back to the same value.
impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Setting::Governor(g) => write!(f, "governor={g}"),
            Setting::Epp(e) => write!(f, "epp={e}"),
            Setting::MinFreqKhz(khz) => write!(f, "min_freq={}", parse::format_khz(*khz)),
            Setting::MaxFreqKhz(khz) => write!(f, "max_freq={}", parse::format_khz(*khz)),
            Setting::Turbo(on) => write!(f, "turbo={}", on_off(*on)),
            Setting::CState { name, enabled } => write!(f, "cstate.{name}={}", on_off(*enabled)),
            Setting::CStatesOnly(names) => write!(f, "cstates={}", names.join(",")),
            Setting::PmQosUs(us) => write!(f, "pm_qos={us}us"),
            Setting::Cpus(cpus) => write!(f, "cpus={}", parse::format_cpu_list(cpus)),
        }
    }
}

fn on_off(on: bool) -> &'static str {
    if on {
        "on"
    } else {
        "off"
    }
}

/// The text of a whole configuration, e.g. `governor=powersave,turbo=off`.
pub fn settings_text(settings: &[Setting]) -> String {
    settings
        .iter()
        .map(Setting::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Where the journal and the PM QoS device are. The defaults are the real ones; tests and
/// `powerlens restore --journal` override them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyOptions {
    /// The journal of original values (see [`default_journal_path`]).
    pub journal: PathBuf,
    /// The PM QoS device, `/dev/cpu_dma_latency`.
    pub pm_qos_device: PathBuf,
}

impl Default for ApplyOptions {
    fn default() -> Self {
        ApplyOptions {
            journal: default_journal_path(),
            pm_qos_device: PathBuf::from(PM_QOS_DEVICE),
        }
    }
}

/// Checks, before anything runs, that every setting can be applied here: the files exist,
/// the values are ones this machine offers, this user may write them, and no journal of
/// unrestored settings is in the way. Changes nothing. Check every configuration before
/// applying the first: while one is applied, the journal makes this fail.
pub fn check(roots: &Roots, settings: &[Setting]) -> Result<(), SettingsError> {
    check_with(roots, settings, &ApplyOptions::default())
}

/// [`check`] with explicit journal and PM QoS device paths.
pub fn check_with(
    roots: &Roots,
    settings: &[Setting],
    options: &ApplyOptions,
) -> Result<(), SettingsError> {
    plan::Plan::build(roots, settings, options)?.preflight(options)
}

/// Checks and applies `settings`, all or none. The returned guard restores every original
/// value when dropped (or by [`Applied::restore`], which reports failures).
pub fn apply(roots: &Roots, settings: &[Setting]) -> Result<Applied, SettingsError> {
    apply_with(roots, settings, &ApplyOptions::default())
}

/// [`apply`] with explicit journal and PM QoS device paths.
pub fn apply_with(
    roots: &Roots,
    settings: &[Setting],
    options: &ApplyOptions,
) -> Result<Applied, SettingsError> {
    let plan = plan::Plan::build(roots, settings, options)?;
    plan.preflight(options)?;
    applied::execute(roots, plan, options)
}

#[cfg(test)]
mod tests;
