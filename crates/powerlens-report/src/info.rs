//! The text view of `powerlens info`: an aligned summary in which every unavailable item
//! shows its reason and its fix.

use std::fmt::Write;
use std::path::Path;

use powerlens_core::model::PowerModel;

use powerlens_sys::cpufreq::{khz_to_mhz, Policy};
use powerlens_sys::energy::SourceStatus;
use powerlens_sys::machine::{CpufreqSection, CpuidleSection, MachineInfo, PerfSection};
use powerlens_sys::Availability;

/// Width of the label column.
const LABEL: usize = 22;

/// The power model `info` shows: the one estimates would use, and the file it came from
/// (`--power-model`) if not chosen for the machine's class.
pub struct ModelChoice<'a> {
    pub model: &'a PowerModel,
    pub file: Option<&'a Path>,
}

/// Renders `info` as text for a terminal.
pub fn render_info(info: &MachineInfo, model: &ModelChoice<'_>) -> String {
    let mut out = String::new();
    cpu(&mut out, info);
    cpuidle(&mut out, &info.cpuidle);
    cpufreq(&mut out, &info.cpufreq);
    energy(&mut out, &info.energy_sources);
    power_model(&mut out, model);
    perf(&mut out, &info.perf);
    out
}

/// Which model estimates would use, and why: the machine class and its reason, or the
/// file that overrides it.
fn power_model(out: &mut String, choice: &ModelChoice<'_>) {
    let m = choice.model;
    out.push_str("\nPower model (when no meter can be read; its figures are ESTIMATES)\n");
    line(
        out,
        "model",
        format!(
            "{}: {:.2} W idle + {:.2} W per busy CPU",
            m.name, m.idle_w, m.busy_cpu_w
        ),
    );
    match (choice.file, m.machine_class, &m.machine_class_reason) {
        (Some(file), ..) => line(
            out,
            "chosen by",
            format!(
                "--power-model {} (the machine class is not used)",
                file.display()
            ),
        ),
        (None, Some(class), Some(reason)) => {
            line(out, "machine class", format!("{}: {reason}", class.name()))
        }
        (None, ..) => line(out, "chosen by", "the default"),
    }
    line(out, "source", &m.source);
    if choice.file.is_none() {
        line(
            out,
            "override",
            "--power-model FILE (`powerlens calibrate -o FILE` fits one on a machine with a meter)",
        );
    }
}

/// `label  value` with the label column aligned.
fn line(out: &mut String, label: &str, value: impl std::fmt::Display) {
    let _ = writeln!(out, "  {label:<LABEL$} {value}");
}

/// An unavailable item: its reason, and its fix on the next line.
fn unavailable(out: &mut String, label: &str, reason: &str, fix: Option<&str>) {
    line(out, label, format!("unavailable: {reason}"));
    if let Some(fix) = fix {
        line(out, "", format!("fix: {fix}"));
    }
}

fn unavailable_item(out: &mut String, label: &str, a: &Availability) {
    unavailable(out, label, &a.reason, a.fix.as_deref());
}

fn notes(out: &mut String, notes: &[String]) {
    for note in notes {
        line(out, "note", note);
    }
}

/// `0-3,6,8-9` from CPU numbers.
pub fn format_cpu_list(cpus: &[u32]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    for cpu in sorted {
        match ranges.last_mut() {
            Some((_, end)) if *end + 1 == cpu => *end = cpu,
            _ => ranges.push((cpu, cpu)),
        }
    }
    let parts: Vec<String> = ranges
        .into_iter()
        .map(|(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect();
    parts.join(",")
}

fn plural(n: usize, one: &str) -> String {
    format!("{n} {one}{}", if n == 1 { "" } else { "s" })
}

fn cpu(out: &mut String, info: &MachineInfo) {
    let cpu = &info.cpu;
    out.push_str("CPU\n");
    // The model comes from cpuinfo: shown even when the topology cannot be read.
    let model = match (&cpu.model, &cpu.vendor) {
        (Some(m), Some(v)) => format!("{m} ({v})"),
        (Some(m), None) => m.clone(),
        (None, _) => "unknown (no model name in cpuinfo)".to_string(),
    };
    line(out, "model", model);
    if !cpu.availability.available {
        unavailable_item(out, "topology", &cpu.availability);
        return;
    }
    line(
        out,
        "topology",
        format!(
            "{}, {}, {} (online {})",
            plural(cpu.packages, "package"),
            plural(cpu.cores, "core"),
            plural(cpu.threads, "thread"),
            format_cpu_list(&cpu.online)
        ),
    );
    notes(out, &cpu.notes);
}

fn cpuidle(out: &mut String, idle: &CpuidleSection) {
    out.push_str("\nIdle states (cpuidle)\n");
    if !idle.availability.available {
        unavailable_item(out, "cpuidle", &idle.availability);
        return;
    }
    let driver = idle.driver.as_deref().unwrap_or("?");
    let governor = idle.governor.as_deref().unwrap_or("?");
    line(out, "driver / governor", format!("{driver} / {governor}"));
    let name_width = idle
        .states
        .iter()
        .map(|s| s.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let _ = writeln!(
        out,
        "  {:<5}  {:<name_width$}  {:>12}  {:>16}  {:<8}  description",
        "state", "name", "exit latency", "target residency", "disabled"
    );
    for (k, s) in idle.states.iter().enumerate() {
        let _ = writeln!(
            out,
            "  {:<5}  {:<name_width$}  {:>9} µs  {:>13} µs  {:<8}  {}",
            k,
            s.name,
            s.latency_us,
            s.target_residency_us,
            if s.disabled { "yes" } else { "no" },
            s.desc
        );
    }
    let differ: Vec<u32> = idle
        .per_cpu
        .iter()
        .filter(|c| c.states != idle.states)
        .map(|c| c.cpu)
        .collect();
    let all: Vec<u32> = idle.per_cpu.iter().map(|c| c.cpu).collect();
    if differ.is_empty() {
        line(
            out,
            "",
            format!("(the same on CPUs {})", format_cpu_list(&all)),
        );
    } else {
        line(
            out,
            "",
            format!(
                "(of CPU {}; CPUs {} differ: see --json)",
                all.first().copied().unwrap_or(0),
                format_cpu_list(&differ)
            ),
        );
    }
    notes(out, &idle.notes);
}

fn cpufreq(out: &mut String, freq: &CpufreqSection) {
    out.push_str("\nFrequency (cpufreq)\n");
    if !freq.availability.available {
        unavailable_item(out, "cpufreq", &freq.availability);
        return;
    }
    // Policies alike but for their current frequency fold into one line, as idle states do.
    let mut groups: Vec<Vec<&Policy>> = Vec::new();
    for p in &freq.policies {
        match groups.iter_mut().find(|g| same_settings(g[0], p)) {
            Some(group) => group.push(p),
            None => groups.push(vec![p]),
        }
    }
    for group in groups {
        let p = group[0];
        let epp = p
            .energy_performance_preference
            .as_deref()
            .map(|e| format!(", EPP {e}"))
            .unwrap_or_default();
        let now: Vec<f64> = group.iter().filter_map(|p| p.current_mhz()).collect();
        let current = match (
            now.iter().copied().reduce(f64::min),
            now.iter().copied().reduce(f64::max),
        ) {
            (Some(lo), Some(hi)) if (hi - lo).abs() >= 0.5 => format!(", now {lo:.0}-{hi:.0} MHz"),
            (Some(m), _) => format!(", now {m:.0} MHz"),
            _ => String::new(),
        };
        let cpus: Vec<u32> = group.iter().flat_map(|p| p.cpus.iter().copied()).collect();
        let label = if group.len() == 1 {
            format!("policy{} (CPUs {})", p.policy, format_cpu_list(&cpus))
        } else {
            format!(
                "{} policies (the same on CPUs {})",
                group.len(),
                format_cpu_list(&cpus)
            )
        };
        line(
            out,
            &label,
            format!(
                "{} / {}{epp}; scaling {:.0}-{:.0} MHz of {:.0}-{:.0} MHz{current}",
                p.driver,
                p.governor,
                khz_to_mhz(p.scaling_min_khz),
                khz_to_mhz(p.scaling_max_khz),
                khz_to_mhz(p.cpuinfo_min_khz),
                khz_to_mhz(p.cpuinfo_max_khz),
            ),
        );
    }
    notes(out, &freq.notes);
}

/// Whether two policies have the same settings (all but the current frequency).
fn same_settings(a: &Policy, b: &Policy) -> bool {
    (
        &a.driver,
        &a.governor,
        &a.energy_performance_preference,
        a.scaling_min_khz,
        a.scaling_max_khz,
        a.cpuinfo_min_khz,
        a.cpuinfo_max_khz,
    ) == (
        &b.driver,
        &b.governor,
        &b.energy_performance_preference,
        b.scaling_min_khz,
        b.scaling_max_khz,
        b.cpuinfo_min_khz,
        b.cpuinfo_max_khz,
    )
}

fn energy(out: &mut String, sources: &[SourceStatus]) {
    out.push_str("\nEnergy sources (in order of preference)\n");
    for s in sources {
        if s.available {
            line(out, &s.name, format!("available: {}", s.reason));
        } else {
            unavailable(out, &s.name, &s.reason, s.fix.as_deref());
        }
    }
    // The power model is listed last and always available: reaching it means no meter.
    match sources
        .iter()
        .find(|s| s.available && s.name != powerlens_sys::energy::POWER_MODEL_SOURCE)
    {
        Some(best) => line(out, "=> measuring with", &best.name),
        None => line(
            out,
            "=> measuring with",
            "nothing readable: energy figures will be estimates from a power model",
        ),
    }
}

fn perf(out: &mut String, perf: &PerfSection) {
    out.push_str("\nperf\n");
    match perf.perf_event_paranoid {
        Some(level) => line(out, "perf_event_paranoid", level),
        None => line(out, "perf_event_paranoid", "unknown (see note)"),
    }
    match &perf.tracefs {
        Some(dir) => line(out, "tracefs", dir.display()),
        None => line(out, "tracefs", "not mounted"),
    }
    for (label, a) in [
        ("tracepoints", &perf.tracepoints),
        ("hardware counters", &perf.hardware_counters),
    ] {
        if a.available {
            line(out, label, format!("available: {}", a.reason));
        } else {
            unavailable_item(out, label, a);
        }
    }
    notes(out, &perf.notes);
}

#[cfg(test)]
mod tests {
    use super::*;
    use powerlens_sys::fixture::{FixtureTree, IdleStateSpec};

    #[test]
    fn cpu_lists_are_compact() {
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 6, 8, 9]), "0-3,6,8-9");
        assert_eq!(format_cpu_list(&[5]), "5");
        assert_eq!(format_cpu_list(&[]), "");
    }

    #[test]
    fn every_unavailable_item_has_reason_and_fix() {
        let tree = FixtureTree::new();
        tree.online_cpus("0-1");
        tree.cpuinfo("Fixture CPU", "GenuineTest");
        tree.cpuidle_driver("haltpoll", "haltpoll");
        for cpu in 0..2 {
            let spec = IdleStateSpec {
                name: "POLL".into(),
                desc: "CPUIDLE CORE POLL IDLE".into(),
                ..Default::default()
            };
            tree.cpuidle_state(cpu, 0, &spec);
        }
        let roots = tree.roots();
        let model = PowerModel::for_machine(&powerlens_core::model::class::MachineFacts {
            cpu_model: Some("Fixture CPU".into()),
            logical_cpus: 2,
            ..Default::default()
        });
        let text = render_info(
            &MachineInfo::collect(&roots),
            &ModelChoice {
                model: &model,
                file: None,
            },
        );
        assert!(
            text.contains(
                "model                  fallback-vcpu-linear: 1.48 W idle + 2.76 W per busy CPU"
            ),
            "{text}"
        );
        assert!(
            text.contains("machine class          unknown: the CPU model \"Fixture CPU\" is not one powerlens recognises"),
            "{text}"
        );
        assert!(text.contains("Fixture CPU (GenuineTest)"), "{text}");
        assert!(
            text.contains("1 package, 2 cores, 2 threads (online 0-1)"),
            "{text}"
        );
        assert!(text.contains("haltpoll / haltpoll"), "{text}");
        assert!(text.contains("(the same on CPUs 0-1)"), "{text}");
        assert!(
            text.contains("unavailable: no cpufreq: virtual machine?"),
            "{text}"
        );
        assert!(
            text.contains("fix: on bare metal: modprobe intel_rapl_msr"),
            "{text}"
        );
        assert!(text.contains("estimates from a power model"), "{text}");
        // Each energy source appears, unavailable, with a reason.
        for name in ["rapl-powercap", "perf-power", "battery", "hwmon"] {
            let row = text
                .lines()
                .find(|l| l.trim_start().starts_with(name))
                .unwrap();
            assert!(row.contains("unavailable: "), "{row}");
        }
    }
}
