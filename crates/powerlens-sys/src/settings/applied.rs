//! Applying a plan, all or none, and the guard that restores it.

use std::path::{Path, PathBuf};

use super::error::SettingsError;
use super::journal::{self, Original};
use super::plan::Plan;
use super::pm_qos::PmQosRequest;
use super::write::write_text;
use super::ApplyOptions;
use crate::Roots;

/// Settings in force. Dropping this restores every original value, in reverse order, and
/// ends the PM QoS request; [`Applied::restore`] does the same and reports failures. When a
/// restore fails the journal stays, so that `powerlens restore` can retry.
#[derive(Debug)]
#[must_use = "dropping the guard restores the settings at once"]
pub struct Applied {
    /// The original values, in the order the settings write them.
    originals: Vec<Original>,
    /// How many of `originals` have been overwritten so far.
    written: usize,
    /// Present while there is something to restore.
    journal: Option<PathBuf>,
    pm_qos: Option<PmQosRequest>,
    affinity: Option<Vec<u32>>,
    restored: bool,
}

impl Applied {
    /// The CPUs of the `cpus=` setting, for the runner to apply to the measured command.
    pub fn affinity(&self) -> Option<Vec<u32>> {
        self.affinity.clone()
    }

    /// The PM QoS latency limit held, in µs.
    pub fn pm_qos_us(&self) -> Option<u32> {
        self.pm_qos.as_ref().map(PmQosRequest::latency_us)
    }

    /// How many sysfs attributes were changed.
    pub fn changed_files(&self) -> usize {
        self.written
    }

    /// The journal of original values, while there is one.
    pub fn journal(&self) -> Option<&Path> {
        self.journal.as_deref()
    }

    /// Restores the original values now; the errors name each value not restored.
    pub fn restore(mut self) -> Result<(), Vec<SettingsError>> {
        let failures = self.undo();
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures)
        }
    }

    /// Ends the PM QoS request, writes the originals back and, when all went back,
    /// removes the journal. Runs once.
    fn undo(&mut self) -> Vec<SettingsError> {
        if self.restored {
            return Vec::new();
        }
        self.restored = true;
        // Closing the device is what ends the request.
        self.pm_qos = None;
        let failures = journal::write_back(&self.originals[..self.written]);
        if failures.is_empty() {
            if let Some(path) = self.journal.take() {
                return journal::remove(&path).err().into_iter().collect();
            }
        }
        failures
    }
}

impl Drop for Applied {
    fn drop(&mut self) {
        // No one to report to here (the library does not print): failures leave the journal.
        let _ = self.undo();
    }
}

/// Applies `plan`: takes the PM QoS request, writes the journal, then
/// writes the values in order. When a write fails, the ones before it are undone before
/// the error returns.
pub(crate) fn execute(
    roots: &Roots,
    plan: Plan,
    options: &ApplyOptions,
) -> Result<Applied, SettingsError> {
    // First, because dropping it undoes it: nothing else to undo when it fails.
    let pm_qos = plan
        .pm_qos
        .map(|(setting, us)| PmQosRequest::hold(&setting, &options.pm_qos_device, us))
        .transpose()?;
    let journal = if plan.originals.is_empty() {
        None
    } else {
        journal::create(&options.journal, roots, &plan.originals)?;
        Some(options.journal.clone())
    };
    let mut applied = Applied {
        originals: plan.originals,
        written: 0,
        journal,
        pm_qos,
        affinity: plan.affinity,
        restored: false,
    };
    for write in &plan.writes {
        if let Err(cause) = write_text(&write.setting, &write.path, &format!("{}\n", write.value)) {
            let failures = applied.undo();
            return Err(if failures.is_empty() {
                cause
            } else {
                SettingsError::RollbackFailed {
                    cause: Box::new(cause),
                    failures,
                    journal: options.journal.clone(),
                }
            });
        }
        applied.written += 1;
    }
    Ok(applied)
}
