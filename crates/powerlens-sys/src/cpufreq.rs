//! cpufreq: per policy the scaling driver, governor, energy/performance preference and
//! frequency limits. Sysfs gives kHz; fields keep kHz (in their names) and methods give MHz.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::{sysfs, Roots, SysError};

/// One cpufreq policy: a group of CPUs that share a frequency.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Policy {
    /// The policy number (`policyN`; N is its first CPU).
    pub policy: u32,
    /// CPUs of the policy (`affected_cpus`).
    pub cpus: Vec<u32>,
    pub driver: String,
    pub governor: String,
    /// `energy_performance_preference`, where the driver has one (intel_pstate, amd-pstate).
    pub energy_performance_preference: Option<String>,
    pub scaling_min_khz: u64,
    pub scaling_max_khz: u64,
    pub cpuinfo_min_khz: u64,
    pub cpuinfo_max_khz: u64,
    /// `scaling_cur_freq` (absent on some drivers).
    pub current_khz: Option<u64>,
    /// The policy's sysfs directory, where settings write its attributes.
    #[serde(skip)]
    pub dir: PathBuf,
}

/// kHz (sysfs) to MHz (what people read).
pub fn khz_to_mhz(khz: u64) -> f64 {
    khz as f64 / 1000.0
}

impl Policy {
    pub fn scaling_min_mhz(&self) -> f64 {
        khz_to_mhz(self.scaling_min_khz)
    }
    pub fn scaling_max_mhz(&self) -> f64 {
        khz_to_mhz(self.scaling_max_khz)
    }
    pub fn cpuinfo_min_mhz(&self) -> f64 {
        khz_to_mhz(self.cpuinfo_min_khz)
    }
    pub fn cpuinfo_max_mhz(&self) -> f64 {
        khz_to_mhz(self.cpuinfo_max_khz)
    }
    pub fn current_mhz(&self) -> Option<f64> {
        self.current_khz.map(khz_to_mhz)
    }
}

const NO_CPUFREQ_REASON: &str = "no cpufreq: virtual machine? (the hypervisor controls frequency)";
const NO_CPUFREQ_FIX: &str =
    "on bare metal, load a cpufreq driver (intel_pstate, amd-pstate or acpi-cpufreq); in a VM there is none";

/// Every readable policy (see [`read_policies_noting`]).
pub fn read_policies(roots: &Roots) -> Result<Vec<Policy>, SysError> {
    Ok(read_policies_noting(roots)?.policies)
}

/// The policies that could be read, and a note for each that could not.
#[derive(Debug, Clone, PartialEq)]
pub struct Policies {
    pub policies: Vec<Policy>,
    /// Policies skipped, and why: an offline CPU's policy is empty, or answers EBUSY.
    pub notes: Vec<String>,
}

/// Every policy, from `devices/system/cpu/cpufreq/policyN`, or from `cpuN/cpufreq` on
/// kernels that predate the policy directories. A policy that cannot be read is skipped
/// and noted; none at all → `Unavailable`, and none readable → the first policy's error.
pub fn read_policies_noting(roots: &Roots) -> Result<Policies, SysError> {
    let mut dirs = numbered_dirs(&roots.sys("devices/system/cpu/cpufreq"), "policy", "")?;
    if dirs.is_empty() {
        dirs = numbered_dirs(&roots.sys("devices/system/cpu"), "cpu", "cpufreq")?;
    }
    if dirs.is_empty() {
        return Err(SysError::Unavailable {
            what: "cpufreq".to_string(),
            reason: NO_CPUFREQ_REASON.to_string(),
            fix: Some(NO_CPUFREQ_FIX.to_string()),
        });
    }
    let mut read = Policies {
        policies: Vec::new(),
        notes: Vec::new(),
    };
    let mut first_error = None;
    for (policy, dir) in dirs {
        match read_policy(policy, &dir) {
            Ok(p) => read.policies.push(p),
            Err(e) => {
                read.notes
                    .push(format!("policy{policy} skipped (its CPUs offline?): {e}"));
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) if read.policies.is_empty() => Err(e),
        _ => Ok(read),
    }
}

fn read_policy(policy: u32, dir: &Path) -> Result<Policy, SysError> {
    let cpus_path = dir.join("affected_cpus");
    let cpus_text = sysfs::read_optional_string(&cpus_path)?.unwrap_or_else(|| policy.to_string());
    // affected_cpus is space-separated; the list parser wants commas.
    let cpus = sysfs::parse_cpu_list(&cpus_text.split_whitespace().collect::<Vec<_>>().join(","))
        .ok_or(SysError::Parse {
        path: cpus_path,
        expected: "a list of CPU numbers",
        found: cpus_text,
    })?;
    Ok(Policy {
        policy,
        cpus,
        driver: sysfs::read_string(dir.join("scaling_driver"))?,
        governor: sysfs::read_string(dir.join("scaling_governor"))?,
        energy_performance_preference: sysfs::read_optional_string(
            dir.join("energy_performance_preference"),
        )?,
        scaling_min_khz: sysfs::read_u64(dir.join("scaling_min_freq"))?,
        scaling_max_khz: sysfs::read_u64(dir.join("scaling_max_freq"))?,
        cpuinfo_min_khz: sysfs::read_u64(dir.join("cpuinfo_min_freq"))?,
        cpuinfo_max_khz: sysfs::read_u64(dir.join("cpuinfo_max_freq"))?,
        current_khz: sysfs::read_optional_u64(dir.join("scaling_cur_freq"))?,
        dir: dir.to_path_buf(),
    })
}

/// `<parent>/<prefix>N[/<child>]` directories that exist, sorted by N.
fn numbered_dirs(
    parent: &Path,
    prefix: &str,
    child: &str,
) -> Result<Vec<(u32, PathBuf)>, SysError> {
    Ok(sysfs::numbered_entries(parent, prefix, "")?
        .into_iter()
        .map(|(n, path)| (n, path.join(child)))
        .filter(|(_, dir)| dir.is_dir())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::{FixtureTree, PolicySpec};

    fn spec(cpus: &str, epp: Option<&str>) -> PolicySpec {
        PolicySpec {
            cpus: cpus.to_string(),
            driver: "intel_pstate".to_string(),
            governor: "powersave".to_string(),
            epp: epp.map(str::to_string),
            scaling_min_khz: 800_000,
            scaling_max_khz: 4_200_000,
            cpuinfo_min_khz: 400_000,
            cpuinfo_max_khz: 4_700_000,
            cur_khz: 1_234_567,
        }
    }

    #[test]
    fn policies_with_and_without_epp() {
        let tree = FixtureTree::new();
        tree.cpufreq_policy(0, &spec("0 1", Some("balance_power")));
        tree.cpufreq_policy(2, &spec("2 3", None));
        let policies = read_policies(&tree.roots()).unwrap();
        assert_eq!(policies.len(), 2);
        assert_eq!(policies[0].cpus, vec![0, 1]);
        assert_eq!(policies[1].cpus, vec![2, 3]);
        assert_eq!(
            policies[0].energy_performance_preference.as_deref(),
            Some("balance_power")
        );
        assert_eq!(policies[1].energy_performance_preference, None);
        assert_eq!(policies[0].scaling_max_khz, 4_200_000);
        assert_eq!(policies[0].scaling_max_mhz(), 4200.0);
        assert_eq!(policies[0].cpuinfo_min_mhz(), 400.0);
        assert_eq!(policies[1].current_mhz(), Some(1234.567));
        assert_eq!(policies[1].governor, "powersave");
    }

    #[test]
    fn legacy_per_cpu_directories() {
        let tree = FixtureTree::new();
        tree.cpufreq_policy(0, &spec("0", None));
        let policy0 = tree.sys_path("devices/system/cpu/cpufreq/policy0");
        let legacy = tree.sys_path("devices/system/cpu/cpu0/cpufreq");
        std::fs::create_dir_all(legacy.parent().unwrap()).unwrap();
        std::fs::rename(policy0, legacy).unwrap();
        let policies = read_policies(&tree.roots()).unwrap();
        assert_eq!(policies.len(), 1);
        assert_eq!(policies[0].driver, "intel_pstate");
    }

    #[test]
    fn corrupt_frequency_names_the_file() {
        let tree = FixtureTree::new();
        tree.cpufreq_policy(0, &spec("0", None));
        tree.write_sys(
            "devices/system/cpu/cpufreq/policy0/scaling_max_freq",
            "<unsupported>",
        );
        let err = read_policies(&tree.roots()).unwrap_err().to_string();
        assert!(err.contains("policy0/scaling_max_freq"), "{err}");
    }

    #[test]
    fn an_unreadable_policy_is_skipped_and_noted() {
        let tree = FixtureTree::new();
        tree.cpufreq_policy(0, &spec("0", None));
        // An offline CPU's policy: the directory stays, its files are gone.
        std::fs::create_dir_all(tree.sys_path("devices/system/cpu/cpufreq/policy1")).unwrap();
        let read = read_policies_noting(&tree.roots()).unwrap();
        assert_eq!(read.policies.len(), 1);
        assert_eq!(read.notes.len(), 1);
        assert!(
            read.notes[0].starts_with("policy1 skipped"),
            "{:?}",
            read.notes
        );
        assert!(
            read.notes[0].contains("policy1/affected_cpus")
                || read.notes[0].contains("policy1/scaling_driver"),
            "{:?}",
            read.notes
        );
    }

    #[test]
    fn no_cpufreq_says_virtual_machine() {
        let tree = FixtureTree::new();
        // An empty cpufreq directory, as on this project's VMs.
        std::fs::create_dir_all(tree.sys_path("devices/system/cpu/cpufreq")).unwrap();
        match read_policies(&tree.roots()) {
            Err(SysError::Unavailable { reason, fix, .. }) => {
                assert!(reason.contains("virtual machine"), "{reason}");
                assert!(fix.is_some());
            }
            other => panic!("expected Unavailable, got {other:?}"),
        }
    }
}
