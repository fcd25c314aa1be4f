//! cpufreq settings of every policy: `governor=`, `epp=`, `min_freq=`, `max_freq=`.

use super::error::SettingsError;
use super::parse::format_khz;
use super::select::select;
use super::write::FileWrite;
use super::Setting;
use crate::cpufreq::{read_policies, Policy};
use crate::{sysfs, Roots};

/// The writes of the cpufreq settings among `settings`: governors first (the EPP a driver
/// accepts depends on the governor), then EPP, then frequency limits.
pub(crate) fn plan(roots: &Roots, settings: &[Setting]) -> Result<Vec<FileWrite>, SettingsError> {
    let governor = select(settings, |s| match s {
        Setting::Governor(g) => Some(g.as_str()),
        _ => None,
    });
    let epp = select(settings, |s| match s {
        Setting::Epp(e) => Some(e.as_str()),
        _ => None,
    });
    let min = select(settings, |s| match s {
        Setting::MinFreqKhz(khz) => Some(*khz),
        _ => None,
    });
    let max = select(settings, |s| match s {
        Setting::MaxFreqKhz(khz) => Some(*khz),
        _ => None,
    });
    let labels = [
        governor.as_ref().map(|(label, _)| label),
        epp.as_ref().map(|(label, _)| label),
        min.as_ref().map(|(label, _)| label),
        max.as_ref().map(|(label, _)| label),
    ];
    let Some(first) = labels.into_iter().flatten().next() else {
        return Ok(Vec::new());
    };
    let policies = read_policies(roots).map_err(|e| SettingsError::from_sys(first, e))?;
    let mut writes = Vec::new();
    for policy in &policies {
        if let Some((label, name)) = &governor {
            writes.push(governor_write(policy, label, name)?);
        }
        if let Some((label, name)) = &epp {
            let governor_after = governor.as_ref().map_or(policy.governor.as_str(), |g| g.1);
            writes.push(epp_write(policy, label, name, governor_after)?);
        }
        writes.extend(limit_writes(policy, min.as_ref(), max.as_ref())?);
    }
    Ok(writes)
}

fn write(policy: &Policy, label: &str, attribute: &str, value: impl ToString) -> FileWrite {
    FileWrite {
        setting: label.to_string(),
        path: policy.dir.join(attribute),
        value: value.to_string(),
    }
}

/// Names a policy offers in a space-separated `available` attribute; `None` when the
/// driver does not list them (then the kernel is the judge, at write time).
fn available(
    policy: &Policy,
    label: &str,
    attribute: &str,
) -> Result<Option<Vec<String>>, SettingsError> {
    let text = sysfs::read_optional_string(policy.dir.join(attribute))
        .map_err(|e| SettingsError::from_sys(label, e))?;
    Ok(text.map(|t| t.split_whitespace().map(str::to_string).collect()))
}

fn governor_write(policy: &Policy, label: &str, name: &str) -> Result<FileWrite, SettingsError> {
    if let Some(valid) = available(policy, label, "scaling_available_governors")? {
        if !valid.iter().any(|g| g == name) {
            return Err(SettingsError::InvalidValue {
                setting: label.to_string(),
                reason: format!(
                    "policy{} (driver {}) has no governor `{name}` (scaling_available_governors)",
                    policy.policy, policy.driver
                ),
                valid,
            });
        }
    }
    Ok(write(policy, label, "scaling_governor", name))
}

fn epp_write(
    policy: &Policy,
    label: &str,
    name: &str,
    governor_after: &str,
) -> Result<FileWrite, SettingsError> {
    if policy.energy_performance_preference.is_none() {
        return Err(SettingsError::Unsupported {
            setting: label.to_string(),
            reason: format!(
                "the cpufreq driver {} of policy{} has no energy_performance_preference",
                policy.driver, policy.policy
            ),
            fix: "EPP needs intel_pstate or amd-pstate in active mode with HWP/CPPC".to_string(),
        });
    }
    // Drivers with HWP also take a raw 0–255 preference.
    let raw = name.parse::<u8>().is_ok();
    if let Some(valid) = available(policy, label, "energy_performance_available_preferences")? {
        if !raw && !valid.iter().any(|e| e == name) {
            return Err(SettingsError::InvalidValue {
                setting: label.to_string(),
                reason: format!("policy{} has no EPP `{name}`", policy.policy),
                valid,
            });
        }
    }
    if policy.driver == "intel_pstate" && governor_after == "performance" && name != "performance" {
        return Err(SettingsError::Unsupported {
            setting: label.to_string(),
            reason: "intel_pstate refuses any EPP but `performance` under the performance governor"
                .to_string(),
            fix: "add governor=powersave to the configuration".to_string(),
        });
    }
    Ok(write(policy, label, "energy_performance_preference", name))
}

/// The frequency-limit writes of one policy, in an order the kernel accepts at every step:
/// when the new minimum is above the current maximum, the maximum goes first.
fn limit_writes(
    policy: &Policy,
    min: Option<&(String, u64)>,
    max: Option<&(String, u64)>,
) -> Result<Vec<FileWrite>, SettingsError> {
    let range = format!(
        "{}–{} (cpuinfo_min_freq–cpuinfo_max_freq of policy{})",
        format_khz(policy.cpuinfo_min_khz),
        format_khz(policy.cpuinfo_max_khz),
        policy.policy
    );
    for (label, khz) in [min, max].into_iter().flatten() {
        if !(policy.cpuinfo_min_khz..=policy.cpuinfo_max_khz).contains(khz) {
            return Err(SettingsError::InvalidValue {
                setting: label.clone(),
                reason: "the frequency is outside what the CPU offers".to_string(),
                valid: vec![range],
            });
        }
    }
    if let (Some((min_label, min_khz)), Some((max_label, max_khz))) = (min, max) {
        if min_khz > max_khz {
            return Err(SettingsError::InvalidValue {
                setting: format!("{min_label},{max_label}"),
                reason: "the minimum frequency is above the maximum".to_string(),
                valid: vec![range],
            });
        }
    }
    let min_write = min.map(|(label, khz)| write(policy, label, "scaling_min_freq", khz));
    let max_write = max.map(|(label, khz)| write(policy, label, "scaling_max_freq", khz));
    let raise_max_first = min.is_some_and(|(_, khz)| *khz > policy.scaling_max_khz);
    let ordered = if raise_max_first {
        [max_write, min_write]
    } else {
        [min_write, max_write]
    };
    Ok(ordered.into_iter().flatten().collect())
}
