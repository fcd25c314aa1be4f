//! The CPU's license-level counters (CORE_POWER.LVL0/LVL1/LVL2_TURBO_LICENSE): can they be
//! read here, and if not, why. The decision is pure; the caller reads /proc/cpuinfo and
//! checks for the core PMU in sysfs.
//!
//! How `classify` consumes them once `powerlens record` exists: at every sched_switch the
//! recorder reads the three counters twice in a row; the one that advanced in between is
//! the current license. Each switch becomes a `time_us,pid,level` row (pid = the task
//! switched out), which is exactly the input of [`super::classify`].

use serde::Serialize;

/// A raw perf event of the core PMU (`perf stat -e cpu/event=0x28,umask=0x07/`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LicenseEvent {
    pub name: &'static str,
    pub event: u8,
    pub umask: u8,
}

/// The three events, identical on every CPU model that has them.
pub const LICENSE_EVENTS: [LicenseEvent; 3] = [
    LicenseEvent {
        name: "core_power.lvl0_turbo_license",
        event: 0x28,
        umask: 0x07,
    },
    LicenseEvent {
        name: "core_power.lvl1_turbo_license",
        event: 0x28,
        umask: 0x18,
    },
    LicenseEvent {
        name: "core_power.lvl2_turbo_license",
        event: 0x28,
        umask: 0x20,
    },
];

/// Intel family-6 models known to count license levels: Skylake-SP, Cascade Lake and
/// Cooper Lake all report model 0x55 (the events were introduced with Skylake Server).
const KNOWN_MODELS: [u32; 1] = [0x55];

/// What the caller found on the machine.
#[derive(Debug, Clone, PartialEq)]
pub struct CounterProbe<'a> {
    /// The text of /proc/cpuinfo.
    pub cpuinfo: &'a str,
    /// Whether the core PMU is exposed (`/sys/bus/event_source/devices/cpu` exists).
    pub core_pmu: bool,
}

/// Whether the license counters can be read, with every reason they cannot.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CounterStatus {
    pub available: bool,
    pub cpu: String,
    pub reasons: Vec<String>,
    pub fix: Option<String>,
    pub events: Vec<LicenseEvent>,
}

fn cpuinfo_field<'a>(cpuinfo: &'a str, key: &str) -> Option<&'a str> {
    cpuinfo.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k.trim() == key).then(|| v.trim())
    })
}

/// The CPU's `model name` from /proc/cpuinfo.
pub fn cpu_model_name(cpuinfo: &str) -> &str {
    cpuinfo_field(cpuinfo, "model name").unwrap_or("unknown model")
}

/// True when /proc/cpuinfo's flags include `hypervisor`: a virtual machine, where the
/// host may hide or smear frequency changes.
pub fn runs_under_hypervisor(cpuinfo: &str) -> bool {
    cpuinfo_field(cpuinfo, "flags")
        .is_some_and(|flags| flags.split_whitespace().any(|f| f == "hypervisor"))
}

/// Decides from the probe.
pub fn license_counter_status(probe: &CounterProbe<'_>) -> CounterStatus {
    let vendor = cpuinfo_field(probe.cpuinfo, "vendor_id").unwrap_or("unknown vendor");
    let family: Option<u32> =
        cpuinfo_field(probe.cpuinfo, "cpu family").and_then(|v| v.parse().ok());
    let model: Option<u32> = cpuinfo_field(probe.cpuinfo, "model").and_then(|v| v.parse().ok());
    let name = cpu_model_name(probe.cpuinfo);
    let mut reasons = Vec::new();
    let mut fix = None;
    let known = vendor == "GenuineIntel"
        && family == Some(6)
        && model.is_some_and(|m| KNOWN_MODELS.contains(&m));
    if !known {
        reasons.push(format!(
            "{vendor} {name} (family {}, model {}) has no known license-level counters: they exist on Intel Skylake-SP, Cascade Lake and Cooper Lake (family 6, model 85)",
            family.map_or("?".into(), |f| f.to_string()),
            model.map_or("?".into(), |m| m.to_string()),
        ));
        fix = Some(
            "none on this CPU: record samples on such a machine, or use `dvfs simulate` on traces"
                .to_string(),
        );
    }
    if !probe.core_pmu {
        reasons.push(
            "no core PMU is exposed (/sys/bus/event_source/devices/cpu is missing), as on virtual machines without a virtual PMU".to_string(),
        );
        fix.get_or_insert_with(|| {
            "run on bare metal, or enable the virtual PMU (e.g. QEMU/KVM `-cpu host,pmu=on`)"
                .to_string()
        });
    }
    CounterStatus {
        available: reasons.is_empty(),
        cpu: name.to_string(),
        reasons,
        fix,
        events: LICENSE_EVENTS.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SKYLAKE_SP: &str = "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\nmodel name\t: Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz\n";
    const EPYC: &str =
        "vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\n";

    #[test]
    fn skylake_sp_with_a_pmu_has_them() {
        let s = license_counter_status(&CounterProbe {
            cpuinfo: SKYLAKE_SP,
            core_pmu: true,
        });
        assert!(s.available && s.reasons.is_empty() && s.fix.is_none());
        assert_eq!(s.events[2].umask, 0x20);
    }

    #[test]
    fn a_vm_without_pmu_says_why() {
        let s = license_counter_status(&CounterProbe {
            cpuinfo: SKYLAKE_SP,
            core_pmu: false,
        });
        assert!(!s.available);
        assert!(s.reasons[0].contains("no core PMU"), "{:?}", s.reasons);
        assert!(s.fix.unwrap().contains("pmu=on"));
    }

    #[test]
    fn reads_name_and_hypervisor_flag() {
        assert_eq!(cpu_model_name(EPYC), "AMD EPYC");
        assert!(!runs_under_hypervisor(EPYC));
        assert!(runs_under_hypervisor(
            "flags\t\t: fpu vme hypervisor avx2\n"
        ));
        assert!(!runs_under_hypervisor("flags\t\t: fpu vme hypervisorx\n"));
    }

    #[test]
    fn other_cpus_have_none() {
        let s = license_counter_status(&CounterProbe {
            cpuinfo: EPYC,
            core_pmu: false,
        });
        assert_eq!(s.reasons.len(), 2);
        assert!(
            s.reasons[0].contains("AuthenticAMD AMD EPYC (family 25, model 17)"),
            "{:?}",
            s.reasons
        );
    }
}
