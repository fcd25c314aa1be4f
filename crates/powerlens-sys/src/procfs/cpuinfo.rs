//! `/proc/cpuinfo`: the CPU's model name and vendor, how many logical CPUs it lists, and
//! whether the kernel runs under a hypervisor (the `hypervisor` flag).

use crate::{sysfs, Roots, SysError};

/// What `/proc/cpuinfo` says about the CPUs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuInfo {
    /// `model name` of the first processor (absent on arm64 and some other architectures).
    pub model_name: Option<String>,
    /// `vendor_id` of the first processor.
    pub vendor: Option<String>,
    /// Number of `processor` entries: the online logical CPUs.
    pub processors: usize,
    /// The `hypervisor` flag of the first processor: CPUID says a hypervisor runs this
    /// kernel (x86 only; other architectures list no flags).
    pub hypervisor: bool,
}

/// Reads `/proc/cpuinfo` below the procfs root.
pub fn read(roots: &Roots) -> Result<CpuInfo, SysError> {
    Ok(parse(&sysfs::read_string(roots.proc("cpuinfo"))?))
}

/// Parses the text of `/proc/cpuinfo`.
pub fn parse(text: &str) -> CpuInfo {
    let field = |key: &str| {
        text.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            (k.trim() == key).then(|| v.trim().to_string())
        })
    };
    let processors = text
        .lines()
        .filter(|line| {
            line.split_once(':')
                .is_some_and(|(k, _)| k.trim() == "processor")
        })
        .count();
    CpuInfo {
        model_name: field("model name"),
        vendor: field("vendor_id"),
        processors,
        hypervisor: field("flags")
            .is_some_and(|flags| flags.split_whitespace().any(|f| f == "hypervisor")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_count_and_hypervisor_flag() {
        let text = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13 64-Core Processor\nflags\t\t: fpu vme hypervisor lahf_lm\n\nprocessor\t: 1\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13 64-Core Processor\nflags\t\t: fpu vme hypervisor lahf_lm\n";
        let info = parse(text);
        assert_eq!(
            info.model_name.as_deref(),
            Some("AMD EPYC 7B13 64-Core Processor")
        );
        assert_eq!(info.vendor.as_deref(), Some("AuthenticAMD"));
        assert_eq!(info.processors, 2);
        assert!(info.hypervisor);
        // `hypervisor` must be a whole flag, not part of another one.
        let bare = parse("processor : 0\nflags : fpu hypervisor_x\n");
        assert!(!bare.hypervisor);
        assert_eq!(bare.model_name, None);
    }

    #[test]
    fn live_machine_lists_every_online_cpu() {
        let info = read(&Roots::default()).unwrap();
        let online = std::thread::available_parallelism().unwrap().get();
        assert!(info.processors >= online, "{info:?} vs {online}");
    }
}
