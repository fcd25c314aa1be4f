//! `turbo=on|off`: frequencies above the base frequency (Intel Turbo Boost, AMD Core
//! Performance Boost).

use super::error::SettingsError;
use super::select::select;
use super::write::FileWrite;
use super::Setting;
use crate::cpufreq::read_policies;
use crate::Roots;

/// intel_pstate's switch, inverted: `1` forbids turbo.
const INTEL_NO_TURBO: &str = "devices/system/cpu/intel_pstate/no_turbo";
/// acpi-cpufreq's global switch: `1` allows boost.
const CPUFREQ_BOOST: &str = "devices/system/cpu/cpufreq/boost";
/// Per-policy switch of newer drivers (amd-pstate), same meaning as the global one.
const POLICY_BOOST: &str = "boost";

pub(crate) fn plan(roots: &Roots, settings: &[Setting]) -> Result<Vec<FileWrite>, SettingsError> {
    let Some((label, on)) = select(settings, |s| match s {
        Setting::Turbo(on) => Some(*on),
        _ => None,
    }) else {
        return Ok(Vec::new());
    };
    let write = |path, value: bool| FileWrite {
        setting: label.clone(),
        path,
        value: u8::from(value).to_string(),
    };
    let no_turbo = roots.sys(INTEL_NO_TURBO);
    if no_turbo.is_file() {
        return Ok(vec![write(no_turbo, !on)]);
    }
    let boost = roots.sys(CPUFREQ_BOOST);
    if boost.is_file() {
        return Ok(vec![write(boost, on)]);
    }
    let policies = read_policies(roots).map_err(|e| SettingsError::from_sys(&label, e))?;
    let per_policy: Vec<FileWrite> = policies
        .iter()
        .map(|p| p.dir.join(POLICY_BOOST))
        .filter(|path| path.is_file())
        .map(|path| write(path, on))
        .collect();
    if per_policy.len() == policies.len() {
        return Ok(per_policy);
    }
    Err(SettingsError::Unsupported {
        setting: label,
        reason: format!(
            "the cpufreq driver {} has no turbo switch (no intel_pstate/no_turbo, cpufreq/boost or per-policy boost)",
            policies[0].driver
        ),
        fix: "limit the frequency instead, e.g. max_freq= at the base frequency".to_string(),
    })
}
