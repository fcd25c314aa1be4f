//! CPU identity and topology: model and vendor from `/proc/cpuinfo`, online CPUs and the
//! package/core of each from `/sys/devices/system/cpu`.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::{sysfs, Roots, SysError};

/// Where one logical CPU sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CpuPlace {
    pub cpu: u32,
    pub package: u32,
    pub core: u32,
}

/// The CPUs of this machine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Topology {
    /// `model name` of the first processor in cpuinfo (absent on some architectures).
    pub model: Option<String>,
    /// `vendor_id` of the first processor in cpuinfo.
    pub vendor: Option<String>,
    /// Online logical CPUs, ascending.
    pub online: Vec<u32>,
    /// Package and core of every online CPU, in the order of `online`.
    pub places: Vec<CpuPlace>,
    /// What had to be assumed, e.g. a CPU without a `topology` directory.
    pub notes: Vec<String>,
}

impl Topology {
    /// Reads the topology below the roots. Fails only when the online CPU list is missing
    /// or corrupt; cpuinfo and per-CPU topology files are optional (noted when absent).
    pub fn read(roots: &Roots) -> Result<Self, SysError> {
        let online = read_online(roots)?;
        let mut notes = Vec::new();
        let (model, vendor) = match crate::procfs::cpuinfo::read(roots) {
            Ok(info) => (info.model_name, info.vendor),
            Err(e) => {
                notes.push(format!("no CPU model: {e}"));
                (None, None)
            }
        };
        let mut places = Vec::with_capacity(online.len());
        let mut guessed = Vec::new();
        let mut first_error = None;
        for &cpu in &online {
            let dir = roots.sys(format!("devices/system/cpu/cpu{cpu}/topology"));
            let place = sysfs::read_u64(dir.join("physical_package_id")).and_then(|package| {
                Ok(CpuPlace {
                    cpu,
                    package: package as u32,
                    core: sysfs::read_u64(dir.join("core_id"))? as u32,
                })
            });
            places.push(place.unwrap_or_else(|e| {
                guessed.push(cpu);
                first_error.get_or_insert(e);
                // Without topology, each CPU is assumed to be a core of its own in package 0.
                CpuPlace {
                    cpu,
                    package: 0,
                    core: cpu,
                }
            }));
        }
        if let Some(err) = first_error {
            notes.push(format!(
                "no topology for CPUs {guessed:?} ({err}): each counted as its own core in package 0"
            ));
        }
        Ok(Topology {
            model,
            vendor,
            online,
            places,
            notes,
        })
    }

    /// Number of packages (sockets) with an online CPU.
    pub fn packages(&self) -> usize {
        self.places
            .iter()
            .map(|p| p.package)
            .collect::<BTreeSet<_>>()
            .len()
    }

    /// Number of physical cores with an online CPU.
    pub fn cores(&self) -> usize {
        self.places
            .iter()
            .map(|p| (p.package, p.core))
            .collect::<BTreeSet<_>>()
            .len()
    }

    /// Number of online logical CPUs (hardware threads).
    pub fn threads(&self) -> usize {
        self.online.len()
    }

    /// The package of an online CPU.
    pub fn package_of(&self, cpu: u32) -> Option<u32> {
        self.places.iter().find(|p| p.cpu == cpu).map(|p| p.package)
    }

    /// The lowest online CPU of each package, in package order: where per-package work
    /// (the perf power PMU, per-package readings) is done.
    pub fn first_cpu_of_each_package(&self) -> Vec<u32> {
        let mut seen = BTreeSet::new();
        let mut firsts: Vec<(u32, u32)> = Vec::new();
        for place in &self.places {
            if seen.insert(place.package) {
                firsts.push((place.package, place.cpu));
            }
        }
        firsts.sort();
        firsts.into_iter().map(|(_, cpu)| cpu).collect()
    }
}

/// The online CPUs (`devices/system/cpu/online`).
pub fn read_online(roots: &Roots) -> Result<Vec<u32>, SysError> {
    let path = roots.sys("devices/system/cpu/online");
    let text = sysfs::read_string(&path)?;
    match sysfs::parse_cpu_list(&text) {
        Some(cpus) if !cpus.is_empty() => Ok(cpus),
        _ => Err(SysError::Parse {
            path,
            expected: "a non-empty CPU list such as 0-3,6",
            found: text,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::FixtureTree;

    #[test]
    fn two_packages_with_smt() {
        let tree = FixtureTree::new();
        tree.cpuinfo("Test CPU 9000", "GenuineTest");
        // cpu N: package N/4, core (N/2)%2: 2 packages x 2 cores x 2 threads, cpu 7 offline.
        tree.online_cpus("0-6");
        for cpu in 0..7 {
            tree.cpu_topology(cpu, cpu / 4, (cpu / 2) % 2);
        }
        let topo = Topology::read(&tree.roots()).unwrap();
        assert_eq!(topo.model.as_deref(), Some("Test CPU 9000"));
        assert_eq!(topo.vendor.as_deref(), Some("GenuineTest"));
        assert_eq!(topo.threads(), 7);
        assert_eq!(topo.packages(), 2);
        assert_eq!(topo.cores(), 4);
        assert_eq!(topo.first_cpu_of_each_package(), vec![0, 4]);
        assert_eq!(topo.package_of(5), Some(1));
        assert!(topo.notes.is_empty(), "{:?}", topo.notes);
    }

    #[test]
    fn missing_topology_is_noted_not_fatal() {
        let tree = FixtureTree::new();
        tree.online_cpus("0-1");
        let topo = Topology::read(&tree.roots()).unwrap();
        assert_eq!(topo.cores(), 2);
        assert_eq!(topo.packages(), 1);
        assert_eq!(topo.model, None);
        assert_eq!(topo.notes.len(), 2, "{:?}", topo.notes);
        assert!(topo.notes[1].contains("CPUs [0, 1]"), "{:?}", topo.notes);
        assert!(
            topo.notes[1].contains("cpu0/topology/physical_package_id"),
            "{:?}",
            topo.notes
        );
    }

    #[test]
    fn corrupt_online_list_names_the_file() {
        let tree = FixtureTree::new();
        tree.online_cpus("zero");
        let err = Topology::read(&tree.roots()).unwrap_err().to_string();
        assert!(
            err.contains("devices/system/cpu/online") && err.contains("zero"),
            "{err}"
        );
    }

    #[test]
    fn live_machine() {
        let topo = Topology::read(&Roots::default()).unwrap();
        let online = std::thread::available_parallelism().unwrap().get();
        assert_eq!(topo.threads(), online);
        assert!(topo.packages() >= 1 && topo.cores() >= 1);
        assert_eq!(topo.first_cpu_of_each_package()[0], topo.online[0]);
    }
}
