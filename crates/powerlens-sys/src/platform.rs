//! What kind of machine this is, as far as the kernel tells: the CPU model and count and
//! the `hypervisor` flag (`/proc/cpuinfo`), the SMBIOS chassis type
//! (`/sys/class/dmi/id/chassis_type`) and the batteries (`class/power_supply`). The power
//! model's default parameters are chosen from these (`powerlens_core::model::class`).

use crate::procfs::cpuinfo;
use crate::{power_supply, sysfs, topology, Roots};

/// The facts read; a missing file is an absent fact, noted in `notes` when it matters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlatformFacts {
    pub cpu_model: Option<String>,
    /// Logical CPUs: `processor` entries of cpuinfo, else the sysfs online list, else 0.
    pub logical_cpus: usize,
    pub hypervisor: bool,
    /// SMBIOS chassis type; `None` without DMI (most non-x86 machines, some VMs).
    pub chassis_type: Option<u32>,
    /// Names of the batteries (`BAT0`, …).
    pub batteries: Vec<String>,
    /// What could not be read, e.g. an unreadable cpuinfo.
    pub notes: Vec<String>,
}

/// Reads the facts below the roots. Never fails: what cannot be read is left out and noted.
pub fn read(roots: &Roots) -> PlatformFacts {
    let mut facts = PlatformFacts::default();
    match cpuinfo::read(roots) {
        Ok(info) => {
            facts.cpu_model = info.model_name;
            facts.logical_cpus = info.processors;
            facts.hypervisor = info.hypervisor;
        }
        Err(e) => facts.notes.push(format!("no CPU model: {e}")),
    }
    if facts.logical_cpus == 0 {
        if let Ok(online) = topology::read_online(roots) {
            facts.logical_cpus = online.len();
        }
    }
    let chassis = roots.sys("class/dmi/id/chassis_type");
    match sysfs::read_optional_string(&chassis) {
        Ok(Some(text)) => match text.trim().parse() {
            Ok(n) => facts.chassis_type = Some(n),
            Err(_) => facts.notes.push(format!(
                "{} holds {text:?}, not an SMBIOS chassis type number",
                chassis.display()
            )),
        },
        Ok(None) => {}
        Err(e) => facts.notes.push(format!("no chassis type: {e}")),
    }
    match power_supply::batteries(roots) {
        Ok(found) => facts.batteries = found.into_iter().map(|b| b.name).collect(),
        Err(e) => facts.notes.push(format!("no battery list: {e}")),
    }
    facts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::{BatterySpec, FixtureTree};

    #[test]
    fn a_laptop_fixture() {
        let tree = FixtureTree::new();
        tree.cpuinfo(
            "11th Gen Intel(R) Core(TM) i7-1185G7 @ 3.00GHz",
            "GenuineIntel",
        );
        tree.chassis_type("10");
        tree.battery(
            "BAT0",
            &BatterySpec {
                status: "Full".into(),
                ..Default::default()
            },
        );
        tree.write_sys("class/power_supply/AC/type", "Mains");
        let facts = read(&tree.roots());
        assert_eq!(
            facts.cpu_model.as_deref(),
            Some("11th Gen Intel(R) Core(TM) i7-1185G7 @ 3.00GHz")
        );
        assert_eq!(facts.logical_cpus, 2, "the fixture lists two processors");
        assert!(!facts.hypervisor);
        assert_eq!(facts.chassis_type, Some(10));
        assert_eq!(facts.batteries, vec!["BAT0".to_string()]);
        assert!(facts.notes.is_empty(), "{:?}", facts.notes);
    }

    #[test]
    fn missing_files_are_absent_facts_and_garbage_is_noted() {
        let tree = FixtureTree::new();
        tree.online_cpus("0-3");
        tree.chassis_type("notebook");
        let facts = read(&tree.roots());
        assert_eq!(facts.cpu_model, None);
        assert_eq!(facts.logical_cpus, 4, "from the sysfs online list");
        assert_eq!(facts.chassis_type, None);
        assert!(facts.batteries.is_empty());
        assert!(
            facts.notes.iter().any(|n| n.contains("cpuinfo"))
                && facts
                    .notes
                    .iter()
                    .any(|n| n.contains("chassis_type") && n.contains("notebook")),
            "{:?}",
            facts.notes
        );
    }
}
