//! Everything `powerlens info` shows, gathered once: topology, cpuidle, cpufreq, energy
//! sources and perf access. Collecting never fails: each section is available or carries
//! the reason and the fix. The JSON keys are a contract (snake_case, units in the key).

use std::path::PathBuf;

use serde::Serialize;

use crate::cpufreq::{self, Policy};
use crate::cpuidle::{self, IdleState};
use crate::energy::{self, SourceStatus};
use crate::topology::Topology;
use crate::{perf_caps, Availability, Roots};

/// What this machine offers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MachineInfo {
    pub cpu: CpuSection,
    pub cpuidle: CpuidleSection,
    pub cpufreq: CpufreqSection,
    /// Every energy source in order of preference, available or not.
    pub energy_sources: Vec<SourceStatus>,
    pub perf: PerfSection,
}

/// CPU identity and topology.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuSection {
    #[serde(flatten)]
    pub availability: Availability,
    pub model: Option<String>,
    pub vendor: Option<String>,
    pub packages: usize,
    pub cores: usize,
    pub threads: usize,
    /// Online CPU numbers.
    pub online: Vec<u32>,
    /// What had to be assumed while reading the topology.
    pub notes: Vec<String>,
}

/// The idle states of one CPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuIdleStates {
    pub cpu: u32,
    pub states: Vec<IdleState>,
}

/// cpuidle driver, governor and states.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuidleSection {
    #[serde(flatten)]
    pub availability: Availability,
    pub driver: Option<String>,
    pub governor: Option<String>,
    /// The states of the first online CPU (usually the same on every CPU).
    pub states: Vec<IdleState>,
    pub per_cpu: Vec<CpuIdleStates>,
    /// CPUs whose states could not be read, and why.
    pub notes: Vec<String>,
}

/// cpufreq driver, governor, EPP and limits; the top-level fields are those of the first policy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpufreqSection {
    #[serde(flatten)]
    pub availability: Availability,
    pub driver: Option<String>,
    pub governor: Option<String>,
    pub energy_performance_preference: Option<String>,
    pub policies: Vec<Policy>,
    /// Policies that could not be read (an offline CPU's), and why.
    pub notes: Vec<String>,
}

/// What perf lets this process open.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PerfSection {
    /// `None` when it could not be read (see `notes`).
    pub perf_event_paranoid: Option<i64>,
    /// The mounted tracefs, if any.
    pub tracefs: Option<PathBuf>,
    pub tracepoints: Availability,
    pub hardware_counters: Availability,
    pub notes: Vec<String>,
}

impl MachineInfo {
    /// Reads everything below `roots`. The perf probes open events on the running kernel.
    pub fn collect(roots: &Roots) -> MachineInfo {
        MachineInfo {
            cpu: cpu_section(roots),
            cpuidle: cpuidle_section(roots),
            cpufreq: cpufreq_section(roots),
            energy_sources: energy::discover(roots),
            perf: perf_section(roots),
        }
    }
}

fn cpu_section(roots: &Roots) -> CpuSection {
    match Topology::read(roots) {
        Ok(t) => CpuSection {
            availability: Availability::yes(format!(
                "read from {}",
                roots.sys("devices/system/cpu").display()
            )),
            packages: t.packages(),
            cores: t.cores(),
            threads: t.threads(),
            model: t.model,
            vendor: t.vendor,
            online: t.online,
            notes: t.notes,
        },
        Err(e) => {
            // cpuinfo still names the CPU when the topology cannot be read.
            let info = crate::procfs::cpuinfo::read(roots).unwrap_or_default();
            CpuSection {
                availability: Availability::from_error(&e),
                model: info.model_name,
                vendor: info.vendor,
                packages: 0,
                cores: 0,
                threads: 0,
                online: Vec::new(),
                notes: Vec::new(),
            }
        }
    }
}

fn cpuidle_section(roots: &Roots) -> CpuidleSection {
    let mut section = CpuidleSection {
        availability: Availability::yes(""),
        driver: None,
        governor: None,
        states: Vec::new(),
        per_cpu: Vec::new(),
        notes: Vec::new(),
    };
    match cpuidle::read_driver(roots) {
        Ok(d) => {
            section.availability = Availability::yes(format!("cpuidle driver {}", d.driver));
            section.driver = Some(d.driver);
            section.governor = Some(d.governor);
        }
        Err(e) => {
            section.availability = Availability::from_error(&e);
            return section;
        }
    }
    let online = match crate::topology::read_online(roots) {
        Ok(cpus) => cpus,
        Err(e) => {
            section.notes.push(format!("no per-CPU states: {e}"));
            return section;
        }
    };
    for cpu in online {
        match cpuidle::read_states(roots, cpu) {
            Ok(states) => section.per_cpu.push(CpuIdleStates { cpu, states }),
            Err(e) => section.notes.push(format!("cpu{cpu}: {e}")),
        }
    }
    if let Some(first) = section.per_cpu.first() {
        section.states = first.states.clone();
    }
    if section.per_cpu.iter().all(|c| c.states.is_empty()) {
        // cpuidle exists but no driver registered states (`current_driver` is `none`): the
        // CPUs idle in the kernel's default routine and nothing can be selected or counted.
        section.availability = Availability::no(
            format!(
                "cpuidle driver {} registered no idle states: the CPUs idle in the kernel's default idle routine, with no per-state counters",
                section.driver.as_deref().unwrap_or("none")
            ),
            Some(NO_IDLE_STATES_FIX.to_string()),
        );
    }
    section
}

/// How to get idle states where the driver is `none`.
const NO_IDLE_STATES_FIX: &str = "in a KVM guest, boot with cpuidle_haltpoll.force=1 (or run on a host that advertises KVM_HINTS_REALTIME); on bare metal, use intel_idle or acpi_idle (not idle=poll/halt)";

fn cpufreq_section(roots: &Roots) -> CpufreqSection {
    match cpufreq::read_policies_noting(roots) {
        Ok(cpufreq::Policies { policies, notes }) => {
            let first = policies.first();
            CpufreqSection {
                availability: Availability::yes(format!("{} policies", policies.len())),
                driver: first.map(|p| p.driver.clone()),
                governor: first.map(|p| p.governor.clone()),
                energy_performance_preference: first
                    .and_then(|p| p.energy_performance_preference.clone()),
                policies,
                notes,
            }
        }
        Err(e) => CpufreqSection {
            availability: Availability::from_error(&e),
            driver: None,
            governor: None,
            energy_performance_preference: None,
            policies: Vec::new(),
            notes: Vec::new(),
        },
    }
}

fn perf_section(roots: &Roots) -> PerfSection {
    let mut notes = Vec::new();
    let perf_event_paranoid = perf_caps::read_paranoid(roots)
        .map_err(|e| notes.push(format!("perf_event_paranoid: {e}")))
        .ok();
    PerfSection {
        perf_event_paranoid,
        tracefs: perf_caps::tracefs_dir(roots),
        tracepoints: perf_caps::probe_tracepoints(roots),
        hardware_counters: perf_caps::probe_hardware_counters(roots),
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::{FixtureTree, IdleStateSpec, PolicySpec};

    /// A small laptop-like machine: 1 package, 2 cores, 4 threads, RAPL, cpufreq with EPP.
    fn laptop() -> FixtureTree {
        let tree = FixtureTree::new();
        tree.cpuinfo("Fixture Core i7", "GenuineIntel");
        tree.online_cpus("0-3");
        tree.cpuidle_driver("intel_idle", "menu");
        for cpu in 0..4 {
            tree.cpu_topology(cpu, 0, cpu % 2);
            for (k, (name, lat, res)) in [("POLL", 0, 0), ("C1E", 10, 20), ("C6", 133, 400)]
                .into_iter()
                .enumerate()
            {
                let spec = IdleStateSpec {
                    name: name.into(),
                    desc: format!("MWAIT {name}"),
                    latency_us: lat,
                    residency_us: res,
                    ..Default::default()
                };
                tree.cpuidle_state(cpu, k as u32, &spec);
            }
        }
        tree.cpufreq_policy(
            0,
            &PolicySpec {
                cpus: "0 1 2 3".into(),
                driver: "intel_pstate".into(),
                governor: "powersave".into(),
                epp: Some("balance_performance".into()),
                scaling_max_khz: 4_000_000,
                ..Default::default()
            },
        );
        tree.rapl_zone(0, "package-0", 0, 262_143_328_850);
        tree.rapl_subzone(0, 0, "core", 0, 262_143_328_850);
        tree.perf_event_paranoid(2);
        tree
    }

    #[test]
    fn collects_every_section() {
        let tree = laptop();
        let info = MachineInfo::collect(&tree.roots());
        assert_eq!(
            (info.cpu.packages, info.cpu.cores, info.cpu.threads),
            (1, 2, 4)
        );
        assert_eq!(info.cpu.model.as_deref(), Some("Fixture Core i7"));
        assert_eq!(info.cpuidle.driver.as_deref(), Some("intel_idle"));
        assert_eq!(info.cpuidle.per_cpu.len(), 4);
        assert_eq!(info.cpuidle.states[2].name, "C6");
        assert_eq!(
            info.cpufreq.energy_performance_preference.as_deref(),
            Some("balance_performance")
        );
        assert!(info.energy_sources[0].available);
        assert_eq!(info.perf.perf_event_paranoid, Some(2));
        assert!(!info.perf.tracepoints.available, "fixture has no tracefs");
    }

    #[test]
    fn json_keys_are_the_contract() {
        let tree = laptop();
        let json = serde_json::to_value(MachineInfo::collect(&tree.roots())).unwrap();
        let state = &json["cpuidle"]["states"][2];
        let mut keys: Vec<&str> = state
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "desc",
                "disabled",
                "latency_us",
                "name",
                "target_residency_us"
            ]
        );
        assert_eq!(state["latency_us"], 133);
        assert_eq!(state["target_residency_us"], 400);
        assert_eq!(json["cpuidle"]["available"], true);
        assert_eq!(json["cpuidle"]["per_cpu"][3]["cpu"], 3);
        assert_eq!(json["cpufreq"]["policies"][0]["scaling_max_khz"], 4_000_000);
        let source = &json["energy_sources"][0];
        assert_eq!(source["name"], "rapl-powercap");
        assert_eq!(source["available"], true);
        assert_eq!(source["domains"][1]["name"], "package-0/core");
        assert_eq!(source["domains"][1]["kind"], "core");
        assert!(json["energy_sources"][1]["reason"].is_string());
        assert!(json["perf"]["tracepoints"]["available"].is_boolean());
        assert_eq!(json["perf"]["perf_event_paranoid"], 2);
    }

    #[test]
    fn the_model_without_an_online_list() {
        let tree = FixtureTree::new();
        tree.cpuinfo("Fixture Core i7", "GenuineIntel");
        let cpu = MachineInfo::collect(&tree.roots()).cpu;
        assert!(!cpu.availability.available);
        assert_eq!(cpu.model.as_deref(), Some("Fixture Core i7"));
        assert_eq!(cpu.vendor.as_deref(), Some("GenuineIntel"));
    }

    #[test]
    fn empty_tree_is_all_unavailable_with_reasons() {
        let tree = FixtureTree::new();
        let info = MachineInfo::collect(&tree.roots());
        assert!(!info.cpu.availability.available);
        assert!(info
            .cpu
            .availability
            .reason
            .contains("devices/system/cpu/online"));
        assert!(!info.cpuidle.availability.available && info.cpuidle.availability.fix.is_some());
        assert!(info.cpufreq.availability.reason.contains("virtual machine"));
        assert!(info
            .energy_sources
            .iter()
            .all(|s| !s.available && !s.reason.is_empty()));
        assert_eq!(info.perf.perf_event_paranoid, None);
        assert_eq!(info.perf.notes.len(), 1);
    }
}
