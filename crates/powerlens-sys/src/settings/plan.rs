//! What a configuration will do, worked out before anything is written: the file writes in
//! the order they must happen, the PM QoS request, and the affinity for the child. Building
//! the plan is where every setting is validated against this machine.

use std::collections::HashMap;
use std::path::PathBuf;

use super::error::SettingsError;
use super::journal::{read_original, refuse_existing, Original};
use super::write::{probe_writable, FileWrite};
use super::{affinity, cpufreq, cstate, pm_qos, turbo, ApplyOptions, Setting};
use crate::Roots;

#[derive(Debug)]
pub(crate) struct Plan {
    /// In order: governor before EPP (EPP may depend on it), frequency limits, turbo, idle
    /// states. Restoring runs them backwards, which passes through the same valid states.
    pub writes: Vec<FileWrite>,
    /// What each of `writes` overwrites, read now so that a file that cannot be read fails
    /// the check rather than the apply.
    pub originals: Vec<Original>,
    /// The `pm_qos=` setting's text and its latency in µs.
    pub pm_qos: Option<(String, u32)>,
    pub affinity: Option<Vec<u32>>,
}

impl Plan {
    pub fn build(
        roots: &Roots,
        settings: &[Setting],
        options: &ApplyOptions,
    ) -> Result<Plan, SettingsError> {
        let mut writes = cpufreq::plan(roots, settings)?;
        writes.extend(turbo::plan(roots, settings)?);
        writes.extend(cstate::plan(roots, settings)?);
        reject_conflicts(&writes)?;
        let originals = writes
            .iter()
            .map(|w| read_original(&w.setting, &w.path))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Plan {
            writes,
            originals,
            pm_qos: pm_qos::plan(settings, &options.pm_qos_device)?,
            affinity: affinity::plan(roots, settings)?,
        })
    }

    /// Checks that this user may write every target, without writing anything, and that
    /// no journal of unrestored settings is in the way.
    pub fn preflight(&self, options: &ApplyOptions) -> Result<(), SettingsError> {
        if !self.writes.is_empty() {
            refuse_existing(&options.journal)?;
        }
        for write in &self.writes {
            probe_writable(&write.setting, &write.path)?;
        }
        if let Some((setting, _)) = &self.pm_qos {
            probe_writable(setting, &options.pm_qos_device)?;
        }
        Ok(())
    }
}

/// Two settings writing one file (e.g. `cstates=POLL` and `cstate.C1=on`) would leave the
/// result to their order: refuse instead.
fn reject_conflicts(writes: &[FileWrite]) -> Result<(), SettingsError> {
    let mut first_writer: HashMap<&PathBuf, &str> = HashMap::new();
    for write in writes {
        match first_writer.get(&write.path) {
            Some(first) if *first != write.setting => {
                return Err(SettingsError::Conflict {
                    first: first.to_string(),
                    second: write.setting.clone(),
                    path: write.path.clone(),
                })
            }
            _ => {
                first_writer.insert(&write.path, &write.setting);
            }
        }
    }
    Ok(())
}
