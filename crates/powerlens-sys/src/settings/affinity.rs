//! `cpus=LIST`: the CPUs the measured command may run on. powerlens does not pin itself;
//! the runner applies the list to the child (`sched_setaffinity` before exec).

use super::error::SettingsError;
use super::parse::format_cpu_list;
use super::plan::select;
use super::Setting;
use crate::{topology, Roots};

/// The affinity of the `cpus=` setting, once every CPU of it is known to be online.
pub(crate) fn plan(roots: &Roots, settings: &[Setting]) -> Result<Option<Vec<u32>>, SettingsError> {
    let Some((label, cpus)) = select(settings, |s| match s {
        Setting::Cpus(cpus) => Some(cpus),
        _ => None,
    }) else {
        return Ok(None);
    };
    let online = topology::read_online(roots).map_err(|e| SettingsError::from_sys(&label, e))?;
    let offline: Vec<u32> = cpus
        .iter()
        .copied()
        .filter(|c| !online.contains(c))
        .collect();
    if !offline.is_empty() {
        return Err(SettingsError::InvalidValue {
            setting: label,
            reason: format!("CPU {} is not online", format_cpu_list(&offline)),
            valid: vec![format!("online CPUs {}", format_cpu_list(&online))],
        });
    }
    Ok(Some(cpus.clone()))
}
