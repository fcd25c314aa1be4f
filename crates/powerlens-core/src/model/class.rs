//! Which default power model fits this machine: its class (server, desktop, laptop or
//! unknown) decided from what the kernel says about it, with the reason in words.
//!
//! One default for every machine was a laptop's figures applied to 128-thread servers. The
//! class picks parameters measured on machines of that kind (docs/ENERGY.md, "The power
//! model"); the estimate stays an estimate, and `--power-model FILE` still overrides it.

use serde::{Deserialize, Serialize};

/// The kind of machine, for the power model's default parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MachineClass {
    Server,
    Desktop,
    Laptop,
    Unknown,
}

impl MachineClass {
    pub fn name(self) -> &'static str {
        match self {
            MachineClass::Server => "server",
            MachineClass::Desktop => "desktop",
            MachineClass::Laptop => "laptop",
            MachineClass::Unknown => "unknown",
        }
    }
}

/// What the class is decided from, as the kernel shows it (read by `powerlens_sys::platform`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MachineFacts {
    /// `model name` of `/proc/cpuinfo`.
    pub cpu_model: Option<String>,
    /// Logical CPUs (0 when unknown).
    pub logical_cpus: usize,
    /// The `hypervisor` CPU flag: this kernel runs in a virtual machine.
    pub hypervisor: bool,
    /// The SMBIOS chassis type (`/sys/class/dmi/id/chassis_type`).
    pub chassis_type: Option<u32>,
    /// Batteries in `class/power_supply` (`BAT0`, …).
    pub batteries: Vec<String>,
}

/// The class and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Classification {
    pub class: MachineClass,
    /// True for a virtual machine: its CPUs are a share of a host's.
    pub virtual_machine: bool,
    /// One sentence naming the facts, e.g. "AMD EPYC 7B13 is a server part (EPYC)".
    pub reason: String,
}

/// More logical CPUs than this and an unrecognised part: a server. The largest desktop
/// parts have 32 threads and high-end workstation ones (Threadripper) more, whose power is
/// a server's anyway.
pub const SERVER_MIN_CPUS: usize = 65;

/// The class of a machine. In order, the first that speaks decides:
/// 1. the `hypervisor` flag: a VM is charged as its vCPUs' share of a host server — from
///    inside a guest the host's chassis cannot be seen (DMI shows the virtual machine's);
/// 2. the DMI chassis type, when it names a kind of machine (a desktop part in a rack
///    chassis draws what a server does);
/// 3. a battery: a laptop;
/// 4. the CPU model string: a server, desktop or laptop part;
/// 5. more than [`SERVER_MIN_CPUS`] logical CPUs: a server;
/// 6. otherwise unknown.
pub fn classify(f: &MachineFacts) -> Classification {
    let model = f
        .cpu_model
        .as_deref()
        .map(str::trim)
        .filter(|m| !m.is_empty());
    let part = model.and_then(part_class);
    if f.hypervisor {
        let host = model
            .map(|m| format!(" (the host's CPU: {m})"))
            .unwrap_or_default();
        return Classification {
            class: MachineClass::Server,
            virtual_machine: true,
            reason: format!(
                "a virtual machine (the `hypervisor` flag in /proc/cpuinfo): its {} charged as a share of a host server{host}",
                vcpus(f.logical_cpus)
            ),
        };
    }
    let decided = |class, reason| Classification {
        class,
        virtual_machine: false,
        reason,
    };
    if let Some(t) = f.chassis_type {
        if let Some((class, name)) = chassis_class(t) {
            return decided(
                class,
                format!(
                    "DMI chassis type {t} ({name}) is a {} chassis",
                    class.name()
                ),
            );
        }
    }
    if let Some(first) = f.batteries.first() {
        return decided(
            MachineClass::Laptop,
            format!("a battery ({first}) in class/power_supply: a laptop"),
        );
    }
    if let (Some(m), Some((class, why))) = (model, &part) {
        return decided(*class, format!("{m} is a {} part ({why})", class.name()));
    }
    if f.logical_cpus >= SERVER_MIN_CPUS {
        return decided(
            MachineClass::Server,
            format!(
                "{} logical CPUs: more than desktop and laptop parts have",
                f.logical_cpus
            ),
        );
    }
    let what = match model {
        Some(m) => format!("the CPU model {m:?} is not one powerlens recognises"),
        None => "/proc/cpuinfo names no CPU model (arm64 kernels list none)".to_string(),
    };
    decided(
        MachineClass::Unknown,
        format!("{what}, and neither a DMI chassis type nor a battery says what the machine is"),
    )
}

fn vcpus(n: usize) -> String {
    match n {
        0 => "vCPUs are".to_string(),
        1 => "1 vCPU is".to_string(),
        n => format!("{n} vCPUs are"),
    }
}

/// The SMBIOS chassis types (DMTF DSP0134, System Enclosure, 7.4.1) that name a kind of
/// machine; Other (1), Unknown (2) and the expansion and component chassis say nothing.
fn chassis_class(t: u32) -> Option<(MachineClass, &'static str)> {
    use MachineClass::*;
    Some(match t {
        3 => (Desktop, "Desktop"),
        4 => (Desktop, "Low Profile Desktop"),
        6 => (Desktop, "Mini Tower"),
        7 => (Desktop, "Tower"),
        8 => (Laptop, "Portable"),
        9 => (Laptop, "Laptop"),
        10 => (Laptop, "Notebook"),
        11 => (Laptop, "Hand Held"),
        13 => (Desktop, "All in One"),
        14 => (Laptop, "Sub Notebook"),
        15 => (Desktop, "Space-saving"),
        17 => (Server, "Main Server Chassis"),
        23 => (Server, "Rack Mount Chassis"),
        24 => (Desktop, "Sealed-case PC"),
        25 => (Server, "Multi-system chassis"),
        28 => (Server, "Blade"),
        29 => (Server, "Blade Enclosure"),
        30 => (Laptop, "Tablet"),
        31 => (Laptop, "Convertible"),
        32 => (Laptop, "Detachable"),
        35 => (Desktop, "Mini PC"),
        36 => (Desktop, "Stick PC"),
        _ => return None,
    })
}

/// The class of a CPU part from its model string, and why; `None` when not recognised.
pub fn part_class(model: &str) -> Option<(MachineClass, String)> {
    let clean = model
        .replace("(R)", "")
        .replace("(TM)", "")
        .replace("(tm)", "");
    let words: Vec<&str> = clean.split_whitespace().collect();
    let has = |w: &str| words.iter().any(|x| x.eq_ignore_ascii_case(w));
    for family in ["Xeon", "EPYC", "Opteron", "Ampere"] {
        if has(family) {
            return Some((MachineClass::Server, family.to_string()));
        }
    }
    if has("Threadripper") {
        return Some((
            MachineClass::Desktop,
            "Threadripper, a workstation part".to_string(),
        ));
    }
    if has("Core") {
        return intel_core(&words);
    }
    if has("Ryzen") {
        return amd_ryzen(&words);
    }
    None
}

/// Intel Core: `i7-1185G7`, `i5-8250U`, `i9-12900K`, `m3-7Y30`, `Ultra 7 155H`. The
/// processor number's suffix says the segment (Intel's processor-number suffixes: U, Y, H*,
/// P, M, QM, G1–G7, V mobile; none, K, KF, KS, F, T, S, X, B, C, R desktop).
fn intel_core(words: &[&str]) -> Option<(MachineClass, String)> {
    let number = words
        .iter()
        .find_map(|w| {
            let (brand, number) = w.split_once('-')?;
            matches!(brand, "i3" | "i5" | "i7" | "i9" | "m3" | "m5" | "m7").then_some(*w)?;
            Some(number)
        })
        .or_else(|| {
            // Core Ultra: `Ultra 7 155H`.
            let at = words.iter().position(|w| *w == "Ultra")?;
            words.get(at + 2).copied()
        })?;
    by_suffix("Core", number, |suffix| match suffix {
        "" | "K" | "KF" | "KS" | "F" | "T" | "TE" | "S" | "X" | "XE" | "B" | "C" | "R" => {
            Some(MachineClass::Desktop)
        }
        s if s.starts_with(['H', 'U', 'Y', 'M', 'P', 'Q', 'V', 'G']) || s == "XM" => {
            Some(MachineClass::Laptop)
        }
        _ => None,
    })
}

/// The class of a processor number (`1185G7`, `5800X`) by its letters after the digits,
/// and why; `None` for a number without digits or an unknown suffix.
fn by_suffix(
    family: &str,
    number: &str,
    class_of: impl Fn(&str) -> Option<MachineClass>,
) -> Option<(MachineClass, String)> {
    let digits = number.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let suffix = number[digits..].to_ascii_uppercase();
    let class = class_of(&suffix)?;
    let why = if suffix.is_empty() {
        format!("{family} {number}: no mobile suffix")
    } else {
        format!("{family} {number}: suffix {suffix}")
    };
    Some((class, why))
}

/// AMD Ryzen: `Ryzen 7 5800X`, `Ryzen 7 PRO 4750U`, `Ryzen 9 7945HX`, `Ryzen AI 9 HX 370`.
/// Mobile suffixes U, H, HS, HX, C; desktop none, X, XT, X3D, G, GE, F.
fn amd_ryzen(words: &[&str]) -> Option<(MachineClass, String)> {
    let at = words.iter().position(|w| *w == "Ryzen")?;
    let rest = &words[at + 1..];
    if rest.first() == Some(&"AI") {
        return Some((MachineClass::Laptop, "Ryzen AI, a mobile part".to_string()));
    }
    let number = rest
        .iter()
        .skip(1) // the tier: 3, 5, 7, 9
        .find(|w| **w != "PRO" && w.starts_with(|c: char| c.is_ascii_digit()))?;
    by_suffix("Ryzen", number, |suffix| match suffix {
        "" | "X" | "XT" | "X3D" | "G" | "GE" | "F" | "E" => Some(MachineClass::Desktop),
        s if s.starts_with(['U', 'H', 'C']) => Some(MachineClass::Laptop),
        _ => None,
    })
}

/// A machine known only by its CPU model and count, for tests.
#[cfg(test)]
pub(crate) fn facts(model: &str, cpus: usize) -> MachineFacts {
    MachineFacts {
        cpu_model: Some(model.to_string()),
        logical_cpus: cpus,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_by_model_string() {
        use MachineClass::*;
        for (model, class) in [
            ("AMD EPYC 7B13 64-Core Processor", Server),
            ("Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz", Server),
            ("Intel(R) Xeon(R) Processor", Server),
            ("11th Gen Intel(R) Core(TM) i7-1185G7 @ 3.00GHz", Laptop),
            ("Intel(R) Core(TM) i5-8250U CPU @ 1.60GHz", Laptop),
            ("Intel(R) Core(TM) i7-4700MQ CPU @ 2.40GHz", Laptop),
            ("12th Gen Intel(R) Core(TM) i7-1260P", Laptop),
            ("Intel(R) Core(TM) Ultra 7 155H", Laptop),
            ("Intel(R) Core(TM) m3-7Y30 CPU @ 1.00GHz", Laptop),
            ("Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz", Desktop),
            ("13th Gen Intel(R) Core(TM) i9-13900K", Desktop),
            ("Intel(R) Core(TM) Ultra 9 285K", Desktop),
            ("AMD Ryzen 7 5800X 8-Core Processor", Desktop),
            ("AMD Ryzen 5 5600G with Radeon Graphics", Desktop),
            ("AMD Ryzen 7 PRO 4750U with Radeon Graphics", Laptop),
            ("AMD Ryzen 9 7945HX with Radeon Graphics", Laptop),
            ("AMD Ryzen AI 9 HX 370 w/ Radeon 890M", Laptop),
            ("AMD Ryzen Threadripper 3990X 64-Core Processor", Desktop),
        ] {
            assert_eq!(
                part_class(model).map(|p| p.0),
                Some(class),
                "{model}: {:?}",
                part_class(model)
            );
        }
        for unknown in [
            "QEMU Virtual CPU version 2.5+",
            "Intel(R) Celeron(R) N4000 CPU @ 1.10GHz",
            "Intel(R) Core(TM)2 Duo CPU P8600 @ 2.40GHz",
        ] {
            assert_eq!(part_class(unknown), None, "{unknown}");
        }
    }

    #[test]
    fn an_epyc_is_a_server() {
        let c = classify(&facts("AMD EPYC 7B13 64-Core Processor", 128));
        assert_eq!((c.class, c.virtual_machine), (MachineClass::Server, false));
        assert_eq!(
            c.reason,
            "AMD EPYC 7B13 64-Core Processor is a server part (EPYC)"
        );
    }

    #[test]
    fn a_notebook_chassis_is_a_laptop_whatever_else() {
        let mut f = facts("11th Gen Intel(R) Core(TM) i7-1185G7 @ 3.00GHz", 8);
        f.chassis_type = Some(10);
        let c = classify(&f);
        assert_eq!(c.class, MachineClass::Laptop);
        assert_eq!(
            c.reason,
            "DMI chassis type 10 (Notebook) is a laptop chassis"
        );
        // The chassis outranks the part: a desktop part in a rack server draws a server's.
        let mut rack = facts("Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz", 12);
        rack.chassis_type = Some(23);
        assert_eq!(classify(&rack).class, MachineClass::Server);
    }

    #[test]
    fn a_desktop_part_without_chassis_is_a_desktop() {
        let c = classify(&facts("Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz", 12));
        assert_eq!(c.class, MachineClass::Desktop);
        assert!(c.reason.contains("no mobile suffix"), "{}", c.reason);
        // An uninformative chassis (Other, as QEMU reports) leaves the part to decide.
        let mut other = facts("Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz", 12);
        other.chassis_type = Some(1);
        assert_eq!(classify(&other).class, MachineClass::Desktop);
    }

    #[test]
    fn a_battery_makes_a_laptop() {
        let mut f = facts("QEMU Virtual CPU version 2.5+", 4);
        f.batteries = vec!["BAT1".into()];
        let c = classify(&f);
        assert_eq!(c.class, MachineClass::Laptop);
        assert!(c.reason.contains("BAT1"), "{}", c.reason);
    }

    #[test]
    fn a_guest_is_a_share_of_a_server() {
        let mut f = facts("Intel(R) Xeon(R) Processor", 2);
        f.hypervisor = true;
        f.chassis_type = Some(1);
        let c = classify(&f);
        assert_eq!((c.class, c.virtual_machine), (MachineClass::Server, true));
        assert!(
            c.reason.contains("`hypervisor` flag")
                && c.reason.contains("2 vCPUs")
                && c.reason.contains("Intel(R) Xeon(R) Processor"),
            "{}",
            c.reason
        );
    }

    #[test]
    fn many_cpus_of_an_unknown_part_are_a_server_and_else_unknown() {
        assert_eq!(
            classify(&facts("Mystery CPU", 96)).class,
            MachineClass::Server
        );
        let c = classify(&facts("Mystery CPU", 8));
        assert_eq!(c.class, MachineClass::Unknown);
        assert!(c.reason.contains("\"Mystery CPU\""), "{}", c.reason);
        let none = classify(&MachineFacts {
            logical_cpus: 4,
            ..Default::default()
        });
        assert_eq!(none.class, MachineClass::Unknown);
        assert!(
            none.reason.contains("names no CPU model"),
            "{}",
            none.reason
        );
    }
}
