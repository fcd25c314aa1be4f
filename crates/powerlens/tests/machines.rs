//! The corpus of real machines (`tests/data/machines/`): `info --json` on each, every
//! reported attribute compared with the captured files by a checker of its own. The checker
//! reads the capture (not the laid-out tree) and shares no code with powerlens' readers:
//! it knows only the kernel's file layout.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use common::machines::{self, Capture, Entry};
use serde_json::{json, Value};

/// `info --json` on a laid-out tree, reading nothing of this machine.
fn info_json(root: &Path) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_powerlens"))
        .args(["info", "--json", "--sysfs-root"])
        .arg(root.join("sys"))
        .arg("--procfs-root")
        .arg(root.join("proc"))
        .env_remove("POWERLENS_SYSFS_ROOT")
        .env_remove("POWERLENS_PROCFS_ROOT")
        .env_remove("POWERLENS_POWER_MODEL")
        .env("POWERLENS_DB", root.join("db.sqlite"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A kernel CPU list (`0-3,8`), expanded.
fn cpu_list(text: &str) -> Vec<u64> {
    let mut cpus = Vec::new();
    for part in text.split([',', ' ']).filter(|p| !p.trim().is_empty()) {
        let part = part.trim();
        if let Some((a, b)) = part.split_once('-') {
            cpus.extend(a.parse::<u64>().unwrap()..=b.parse().unwrap());
        } else {
            cpus.push(part.parse().unwrap());
        }
    }
    cpus
}

/// The checker's findings for one machine.
struct Check<'a> {
    machine: &'a str,
    checked: usize,
    mismatches: Vec<String>,
}

impl Check<'_> {
    fn eq(&mut self, what: &str, reported: &Value, expected: Value) {
        self.checked += 1;
        if *reported != expected {
            self.mismatches.push(format!(
                "{}: {what}: info says {reported}, the files say {expected}",
                self.machine
            ));
        }
    }
}

fn text(c: &Capture, path: &str) -> Option<String> {
    machines::file(c, path).map(str::to_string)
}

fn num(c: &Capture, path: &str) -> Option<u64> {
    text(c, path).and_then(|t| t.trim().parse().ok())
}

const CPU: &str = "sys/devices/system/cpu";

fn online(c: &Capture) -> Option<Vec<u64>> {
    text(c, &format!("{CPU}/online")).map(|t| cpu_list(&t))
}

fn cpuinfo_field(c: &Capture, key: &str) -> Option<String> {
    text(c, "proc/cpuinfo")?.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| v.trim().to_string())
    })
}

fn check_cpu(check: &mut Check, c: &Capture, info: &Value) {
    let cpu = &info["cpu"];
    if cpuinfo_field(c, "processor").is_some() {
        check.eq(
            "cpu.model",
            &cpu["model"],
            json!(cpuinfo_field(c, "model name")),
        );
        check.eq(
            "cpu.vendor",
            &cpu["vendor"],
            json!(cpuinfo_field(c, "vendor_id")),
        );
    }
    let Some(online) = online(c) else {
        return;
    };
    check.eq("cpu.online", &cpu["online"], json!(online));
    check.eq("cpu.threads", &cpu["threads"], json!(online.len()));
    let place = |cpu: u64, file: &str| num(c, &format!("{CPU}/cpu{cpu}/topology/{file}"));
    let packages: BTreeSet<_> = online
        .iter()
        .map(|&n| place(n, "physical_package_id"))
        .collect();
    let cores: BTreeSet<_> = online
        .iter()
        .map(|&n| (place(n, "physical_package_id"), place(n, "core_id")))
        .collect();
    check.eq("cpu.packages", &cpu["packages"], json!(packages.len()));
    check.eq("cpu.cores", &cpu["cores"], json!(cores.len()));
}

/// `{prefix}N` directories (or files below them) of the capture under `dir`, by N.
fn numbered(c: &Capture, dir: &str, prefix: &str) -> BTreeSet<u64> {
    let start = format!("{dir}/{prefix}");
    c.keys()
        .filter_map(|k| {
            let rest = k.strip_prefix(&start)?;
            let n = rest.split('/').next()?;
            n.parse().ok()
        })
        .collect()
}

fn check_cpuidle(check: &mut Check, c: &Capture, info: &Value) {
    let idle = &info["cpuidle"];
    let driver = text(c, &format!("{CPU}/cpuidle/current_driver"));
    if driver.is_none() {
        check.eq("cpuidle.available", &idle["available"], json!(false));
        return;
    }
    check.eq("cpuidle.driver", &idle["driver"], json!(driver));
    let governor = text(c, &format!("{CPU}/cpuidle/current_governor"))
        .or_else(|| text(c, &format!("{CPU}/cpuidle/current_governor_ro")));
    check.eq("cpuidle.governor", &idle["governor"], json!(governor));
    let reported: BTreeMap<u64, &Value> = idle["per_cpu"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["cpu"].as_u64().unwrap(), &p["states"]))
        .collect();
    for cpu in online(c).unwrap_or_default() {
        let dir = format!("{CPU}/cpu{cpu}/cpuidle");
        let states: Vec<Value> = numbered(c, &dir, "state")
            .into_iter()
            .map(|k| {
                let f = |file: &str| text(c, &format!("{dir}/state{k}/{file}"));
                json!({
                    "name": f("name"),
                    "desc": f("desc").unwrap_or_default(),
                    "latency_us": f("latency").map(|v| v.parse::<u64>().unwrap()),
                    "target_residency_us": f("residency").map(|v| v.parse::<u64>().unwrap()),
                    "disabled": f("disable").is_some_and(|v| v != "0"),
                })
            })
            .collect();
        let got = reported.get(&cpu).copied().unwrap_or(&Value::Null);
        check.eq(&format!("cpuidle cpu{cpu} states"), got, json!(states));
    }
}

/// The policy directories: `cpufreq/policyN`, or `cpuN/cpufreq` on older kernels.
fn policy_dirs(c: &Capture) -> Vec<(u64, String)> {
    let dir = format!("{CPU}/cpufreq");
    let policies = numbered(c, &dir, "policy");
    if !policies.is_empty() {
        return policies
            .into_iter()
            .map(|n| (n, format!("{dir}/policy{n}")))
            .collect();
    }
    numbered(c, CPU, "cpu")
        .into_iter()
        .map(|n| (n, format!("{CPU}/cpu{n}/cpufreq")))
        .filter(|(_, d)| c.keys().any(|k| k.starts_with(&format!("{d}/"))))
        .collect()
}

fn check_cpufreq(check: &mut Check, c: &Capture, info: &Value) {
    let freq = &info["cpufreq"];
    let dirs = policy_dirs(c);
    // A policy without the attributes every policy has (an offline CPU's is empty) is
    // skipped with a note.
    let required = [
        "scaling_driver",
        "scaling_governor",
        "scaling_min_freq",
        "scaling_max_freq",
        "cpuinfo_min_freq",
        "cpuinfo_max_freq",
    ];
    let readable: Vec<_> = dirs
        .iter()
        .filter(|(_, d)| {
            required
                .iter()
                .all(|f| text(c, &format!("{d}/{f}")).is_some())
        })
        .collect();
    check.eq(
        "cpufreq.available",
        &freq["available"],
        json!(!readable.is_empty()),
    );
    if !readable.is_empty() {
        let skipped = freq["notes"].as_array().map_or(0, Vec::len);
        check.eq(
            "cpufreq skipped policies",
            &json!(skipped),
            json!(dirs.len() - readable.len()),
        );
    }
    let expected: Vec<Value> = readable
        .iter()
        .map(|(n, d)| {
            let f = |file: &str| text(c, &format!("{d}/{file}"));
            let k = |file: &str| num(c, &format!("{d}/{file}"));
            let cpus = f("affected_cpus").map_or(vec![*n], |t| cpu_list(&t));
            json!({
                "policy": n,
                "cpus": cpus,
                "driver": f("scaling_driver"),
                "governor": f("scaling_governor"),
                "energy_performance_preference": f("energy_performance_preference"),
                "scaling_min_khz": k("scaling_min_freq"),
                "scaling_max_khz": k("scaling_max_freq"),
                "cpuinfo_min_khz": k("cpuinfo_min_freq"),
                "cpuinfo_max_khz": k("cpuinfo_max_freq"),
                "current_khz": k("scaling_cur_freq"),
            })
        })
        .collect();
    check.eq("cpufreq.policies", &freq["policies"], json!(expected));
}

/// RAPL zone names: `intel-rapl:N` → its name, `intel-rapl:N:M` → `parent/name`.
fn check_rapl(check: &mut Check, c: &Capture, info: &Value) {
    let class = "sys/class/powercap";
    let zone_dirs: BTreeSet<(u64, Option<u64>)> = c
        .keys()
        .filter_map(|k| {
            let rest = k.strip_prefix(&format!("{class}/intel-rapl:"))?;
            let zone = rest.split('/').next()?;
            let mut ids = zone.split(':').map(|p| p.parse::<u64>());
            let n = ids.next()?.ok()?;
            match ids.next() {
                None => Some((n, None)),
                Some(m) => Some((n, Some(m.ok()?))),
            }
        })
        .collect();
    if zone_dirs.is_empty() {
        return;
    }
    let name = |n: u64, m: Option<u64>| {
        let dir = match m {
            None => format!("{class}/intel-rapl:{n}"),
            Some(m) => format!("{class}/intel-rapl:{n}:{m}"),
        };
        let counted = num(c, &format!("{dir}/energy_uj")).is_some()
            && num(c, &format!("{dir}/max_energy_range_uj")).is_some();
        text(c, &format!("{dir}/name")).filter(|_| counted)
    };
    let expected: Vec<String> = zone_dirs
        .iter()
        .filter_map(|&(n, m)| {
            let own = name(n, m)?;
            Some(match m {
                None => own,
                Some(_) => format!("{}/{own}", name(n, None)?),
            })
        })
        .collect();
    let rapl = info["energy_sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "rapl-powercap")
        .unwrap();
    let reported: Vec<Value> = rapl["domains"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].clone())
        .collect();
    check.eq("rapl-powercap domains", &json!(reported), json!(expected));
}

#[test]
fn info_is_exact_on_every_real_machine() {
    let mut total = 0;
    let mut mismatches = Vec::new();
    let names = machines::names();
    assert!(names.len() >= 10, "the corpus has {} machines", names.len());
    for name in &names {
        let capture = machines::capture(name);
        let dir = tempfile::tempdir().unwrap();
        machines::lay_out(&capture, dir.path());
        let info = info_json(dir.path());
        let mut check = Check {
            machine: name,
            checked: 0,
            mismatches: Vec::new(),
        };
        check_cpu(&mut check, &capture, &info);
        check_cpuidle(&mut check, &capture, &info);
        check_cpufreq(&mut check, &capture, &info);
        check_rapl(&mut check, &capture, &info);
        eprintln!(
            "{name}: {} attributes checked, {} mismatches",
            check.checked,
            check.mismatches.len()
        );
        total += check.checked;
        mismatches.extend(check.mismatches);
    }
    eprintln!(
        "corpus: {} machines, {total} attributes, {} mismatches",
        names.len(),
        mismatches.len()
    );
    assert!(total > 1000, "only {total} attributes checked");
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[test]
fn layout_keeps_the_captured_bytes() {
    // The tool writes each captured value as the kernel does, one line with its newline.
    let capture = machines::capture("dell-latitude-5420-tgl");
    let dir = tempfile::tempdir().unwrap();
    machines::lay_out(&capture, dir.path());
    let name = std::fs::read_to_string(
        dir.path()
            .join("sys/devices/system/cpu/cpu0/cpuidle/state3/name"),
    )
    .unwrap();
    assert_eq!(name, "C3_ACPI\n");
    let package = std::fs::read_to_string(
        dir.path()
            .join("sys/devices/system/cpu/cpu7/topology/physical_package_id"),
    )
    .unwrap();
    assert_eq!(package, "0\n");
    assert!(matches!(
        capture.get("proc/cpuinfo"),
        Some(Entry::File(t)) if t.contains("i7-1185G7")
    ));
}
