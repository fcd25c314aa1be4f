//! `powerlens info` end to end: on fixture trees through POWERLENS_SYSFS_ROOT, and live on
//! this machine against sysfs itself.

use std::path::Path;
use std::process::{Command, Output};

use powerlens_sys::fixture::{FixtureTree, IdleStateSpec};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_powerlens");

fn run(args: &[&str], sysfs: Option<&Path>, procfs: Option<&Path>) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env_remove("POWERLENS_SYSFS_ROOT")
        .env_remove("POWERLENS_PROCFS_ROOT");
    if let Some(dir) = sysfs {
        cmd.env("POWERLENS_SYSFS_ROOT", dir);
    }
    if let Some(dir) = procfs {
        cmd.env("POWERLENS_PROCFS_ROOT", dir);
    }
    cmd.output().expect("run powerlens")
}

fn json_of(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("info --json prints JSON")
}

fn source<'a>(json: &'a Value, name: &str) -> &'a Value {
    json["energy_sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no energy source {name}"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap().trim().to_string()
}

#[test]
fn fixture_tree_with_rapl_through_the_environment() {
    let tree = FixtureTree::new();
    tree.online_cpus("0-1");
    tree.cpuidle_driver("intel_idle", "menu");
    let c6 = IdleStateSpec {
        name: "C6".into(),
        desc: "MWAIT 0x20".into(),
        latency_us: 133,
        residency_us: 400,
        disabled: true,
        ..Default::default()
    };
    tree.cpuidle_state(0, 0, &c6);
    tree.rapl_zone(0, "package-0", 1, 262_143_328_850);
    tree.rapl_subzone(0, 0, "dram", 1, 65_712_999_613);
    tree.perf_event_paranoid(1);
    let roots = tree.roots();
    let json = json_of(&run(
        &["info", "--json"],
        Some(&roots.sysfs),
        Some(&roots.procfs),
    ));
    let state = &json["cpuidle"]["states"][0];
    assert_eq!(state["name"], "C6");
    assert_eq!(state["latency_us"], 133);
    assert_eq!(state["target_residency_us"], 400);
    assert_eq!(state["disabled"], true);
    let rapl = source(&json, "rapl-powercap");
    assert_eq!(rapl["available"], true);
    assert_eq!(rapl["domains"][1]["name"], "package-0/dram");
    assert_eq!(json["perf"]["perf_event_paranoid"], 1);

    // The same through the flag, as text.
    let sysfs = roots.sysfs.to_str().unwrap();
    let procfs = roots.procfs.to_str().unwrap();
    let out = run(
        &["--sysfs-root", sysfs, "--procfs-root", procfs, "info"],
        None,
        None,
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success());
    assert!(
        text.contains("=> measuring with      rapl-powercap"),
        "{text}"
    );
    assert!(text.contains("C6"), "{text}");
}

#[test]
fn missing_sysfs_root_is_an_error_naming_it() {
    let out = run(
        &["info"],
        Some(Path::new("/nonexistent/powerlens-sysfs")),
        None,
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/nonexistent/powerlens-sysfs"), "{stderr}");
    assert!(stderr.contains("POWERLENS_SYSFS_ROOT"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
#[ignore = "live: this machine's sysfs and perf"]
fn live_json_matches_sysfs() {
    let json = json_of(&run(&["info", "--json"], None, None));
    // cpuidle: the states of cpu0 are what sysfs holds.
    let states = json["cpuidle"]["states"].as_array().unwrap();
    let state_dirs = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cpuidle")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().starts_with("state"))
                .count()
        })
        .unwrap_or(0);
    assert_eq!(
        states.len(),
        state_dirs,
        "one state per cpu0/cpuidle/stateK"
    );
    if state_dirs == 0 {
        // A driver that registered no states (`none`): unavailable, with the reason.
        eprintln!(
            "no cpuidle states on this machine: {}",
            json["cpuidle"]["reason"]
        );
        assert_eq!(json["cpuidle"]["available"], false);
        assert!(json["cpuidle"]["fix"].is_string());
    } else if Path::new("/sys/devices/system/cpu/cpuidle").is_dir() {
        for (k, s) in states.iter().enumerate() {
            let dir = format!("/sys/devices/system/cpu/cpu0/cpuidle/state{k}");
            assert_eq!(s["name"], read(&format!("{dir}/name")));
            assert_eq!(s["latency_us"].to_string(), read(&format!("{dir}/latency")));
            assert_eq!(
                s["target_residency_us"].to_string(),
                read(&format!("{dir}/residency"))
            );
        }
    } else {
        eprintln!("skipped cpuidle check: no cpuidle on this machine");
    }
    // Energy sources: every unavailable one says why; powercap matches the machine.
    for s in json["energy_sources"].as_array().unwrap() {
        assert!(s["available"].is_boolean());
        assert!(!s["reason"].as_str().unwrap().is_empty(), "{s}");
    }
    let rapl = source(&json, "rapl-powercap");
    if Path::new("/sys/class/powercap").exists() {
        eprintln!("skipped powercap-unavailable check: this machine has powercap");
    } else {
        assert_eq!(rapl["available"], false);
        assert!(rapl["reason"]
            .as_str()
            .unwrap()
            .contains("no RAPL powercap driver"));
    }
    // Hardware counters: available, or unavailable with a reason and a fix.
    let hw = &json["perf"]["hardware_counters"];
    if hw["available"] == false {
        assert!(!hw["reason"].as_str().unwrap().is_empty());
        assert!(hw["fix"].is_string());
    }
    assert_eq!(
        json["perf"]["perf_event_paranoid"].to_string(),
        read("/proc/sys/kernel/perf_event_paranoid")
    );
}

/// As root, tracepoints open. Where tracefs is not mounted, the binary runs in a private
/// mount namespace with tracefs mounted, so the host is left as it was.
#[test]
#[ignore = "live: this machine's tracefs (root)"]
fn live_tracepoints_available_as_root() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        powerlens_sys::skip_test!("not root");
        return;
    }
    let mounted = Path::new("/sys/kernel/tracing/events").is_dir()
        || Path::new("/sys/kernel/debug/tracing/events").is_dir();
    let output = if mounted {
        run(&["info", "--json"], None, None)
    } else {
        let script =
            format!("mount -t tracefs nodev /sys/kernel/tracing && exec {BIN} info --json");
        match Command::new("unshare")
            .args(["-m", "sh", "-c", &script])
            .env_remove("POWERLENS_SYSFS_ROOT")
            .env_remove("POWERLENS_PROCFS_ROOT")
            .output()
        {
            Ok(out) if out.status.success() => out,
            other => {
                powerlens_sys::skip_test!(
                    "tracefs not mounted and cannot mount it privately: {other:?}"
                );
                return;
            }
        }
    };
    let json = json_of(&output);
    let tp = &json["perf"]["tracepoints"];
    assert_eq!(tp["available"], true, "{tp}");
    assert!(json["perf"]["tracefs"]
        .as_str()
        .unwrap()
        .ends_with("tracing"));
}

/// The perf power PMU is a meter only when it measures something. Oracle: `perf stat`
/// counting the same events system-wide for 0.2 s. This project's VMs expose a power PMU
/// (energy-psys) whose count never moves, which powerlens once took as a meter and reported
/// "0 J measured"; on bare metal with RAPL perf reads joules and powerlens must use them.
#[test]
#[ignore = "live: this machine's perf"]
fn live_perf_power_is_a_meter_only_when_perf_reads_energy() {
    let events = Path::new("/sys/bus/event_source/devices/power/events");
    let Ok(dir) = std::fs::read_dir(events) else {
        powerlens_sys::skip_test!("no perf power PMU on this machine (nothing to tell apart)");
        return;
    };
    let names: Vec<String> = dir
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("energy-") && !n.contains('.'))
        .collect();
    let mut perf = Command::new("perf");
    perf.args(["stat", "-x", ",", "-a"]);
    for n in &names {
        perf.args(["-e", &format!("power/{n}/")]);
    }
    let Ok(out) = perf.args(["sleep", "0.2"]).output() else {
        powerlens_sys::skip_test!("perf is not installed (Debian: linux-perf)");
        return;
    };
    // CSV lines: value,unit,event,…; "<not supported>" or "<not counted>" when refused.
    let joules: Vec<f64> = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains("power/energy-"))
        .filter_map(|l| l.split(',').next()?.parse().ok())
        .collect();
    if joules.is_empty() {
        powerlens_sys::skip_test!(
            "perf could not count the power events: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        return;
    }
    let perf_measures = joules.iter().any(|j| *j > 0.0);
    let info = json_of(&run(&["info", "--json"], None, None));
    let s = source(&info, "perf-power");
    eprintln!("perf stat: {joules:?} J; powerlens: {s}");
    assert_eq!(s["available"], perf_measures, "{s}");
    if !perf_measures {
        let reason = s["reason"].as_str().unwrap();
        assert!(reason.contains("did not advance"), "{reason}");
    }
}

/// `info` on a fixture machine: `(power_model JSON, text)`.
fn power_model_of(tree: &FixtureTree, extra: &[&str]) -> (Value, String) {
    let roots = tree.roots();
    let mut args = vec!["info", "--json"];
    args.extend_from_slice(extra);
    let json = json_of(&run(&args, Some(&roots.sysfs), Some(&roots.procfs)));
    args.remove(1);
    let out = run(&args, Some(&roots.sysfs), Some(&roots.procfs));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        json["power_model"].clone(),
        String::from_utf8(out.stdout).unwrap(),
    )
}

fn close(a: &Value, b: f64) -> bool {
    (a.as_f64().unwrap() - b).abs() < 1e-9
}

/// Issue 17, point 1: without a meter the default model fits the kind of machine, and
/// `info` says which model and why — on fixture procfs/sysfs trees whose CPU, chassis and
/// count are known. The parameters are the sources' (docs/ENERGY.md), computed by hand:
/// a server's 0.74 W idle and 3.5 W at full load per vCPU, a desktop's 1.14 and 5.42 W per
/// thread, the laptop's 27.06 W + 16 W per busy CPU.
#[test]
fn the_default_power_model_follows_the_machine_class() {
    // An EPYC server, 128 threads, no chassis information: a server part.
    let epyc = FixtureTree::new();
    epyc.cpuinfo_with(Some("AMD EPYC 7B13 64-Core Processor"), 128, "fpu vme sse");
    let (m, text) = power_model_of(&epyc, &[]);
    assert_eq!(m["name"], "server-vcpu-linear");
    assert_eq!(m["machine_class"], "server");
    assert_eq!(
        m["machine_class_reason"],
        "AMD EPYC 7B13 64-Core Processor is a server part (EPYC)"
    );
    assert!(
        close(&m["idle_w"], 0.74 * 128.0) && close(&m["busy_cpu_w"], 3.5 - 0.74),
        "{m}"
    );
    assert!(m["file"].is_null());
    assert!(
        text.contains(
            "model                  server-vcpu-linear: 94.72 W idle + 2.76 W per busy CPU"
        ),
        "{text}"
    );
    assert!(
        text.contains("machine class          server: AMD EPYC 7B13 64-Core Processor is a server part (EPYC)"),
        "{text}"
    );
    assert!(text.contains("Cloud Carbon Footprint"), "{text}");
    // The same model is the one the power-model source describes.
    assert!(
        text.contains("power-model            available: estimates, not measurements, from /proc/stat CPU time: 94.72 W idle + 2.76 W per busy CPU (server-vcpu-linear)"),
        "{text}"
    );

    // A laptop part in a notebook chassis (SMBIOS type 10).
    let laptop = FixtureTree::new();
    laptop.cpuinfo_with(
        Some("11th Gen Intel(R) Core(TM) i7-1185G7 @ 3.00GHz"),
        8,
        "fpu",
    );
    laptop.chassis_type("10");
    let (m, text) = power_model_of(&laptop, &[]);
    assert_eq!(m["name"], "laptop-linear");
    assert_eq!(m["machine_class"], "laptop");
    assert_eq!(
        m["machine_class_reason"],
        "DMI chassis type 10 (Notebook) is a laptop chassis"
    );
    assert!(
        close(&m["idle_w"], 27.06) && close(&m["busy_cpu_w"], 16.0),
        "{m}"
    );
    assert!(
        text.contains("laptop: DMI chassis type 10 (Notebook)"),
        "{text}"
    );

    // A desktop part, nothing else known.
    let desktop = FixtureTree::new();
    desktop.cpuinfo_with(Some("Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz"), 12, "fpu");
    let (m, _) = power_model_of(&desktop, &[]);
    assert_eq!(m["name"], "desktop-thread-linear");
    assert_eq!(m["machine_class"], "desktop");
    assert!(
        close(&m["idle_w"], 1.14 * 12.0) && close(&m["busy_cpu_w"], 5.42 - 1.14),
        "{m}"
    );

    // An unknown part: the documented fallback, per vCPU, with the reason.
    let unknown = FixtureTree::new();
    unknown.cpuinfo_with(Some("Mystery CPU 1"), 4, "fpu");
    let (m, text) = power_model_of(&unknown, &[]);
    assert_eq!(m["name"], "fallback-vcpu-linear");
    assert_eq!(m["machine_class"], "unknown");
    assert!(close(&m["idle_w"], 0.74 * 4.0), "{m}");
    assert!(
        m["machine_class_reason"]
            .as_str()
            .unwrap()
            .contains("\"Mystery CPU 1\" is not one powerlens recognises"),
        "{m}"
    );
    assert!(text.contains("unknown: the CPU model"), "{text}");

    // A virtual machine: the hypervisor flag outranks the part and the (virtual) chassis.
    let vm = FixtureTree::new();
    vm.cpuinfo_with(Some("AMD EPYC 7B13 64-Core Processor"), 4, "fpu hypervisor");
    vm.chassis_type("1");
    let (m, _) = power_model_of(&vm, &[]);
    assert_eq!(m["name"], "server-vcpu-linear");
    assert!(close(&m["idle_w"], 0.74 * 4.0), "{m}");
    assert!(
        m["machine_class_reason"]
            .as_str()
            .unwrap()
            .starts_with("a virtual machine (the `hypervisor` flag"),
        "{m}"
    );

    // A user's model file overrides the class, and says so.
    let file = epyc.sys_path("lab.json");
    std::fs::write(
        &file,
        r#"{"name":"lab","idle_w":50,"busy_cpu_w":7.5,"source":"bench"}"#,
    )
    .unwrap();
    let (m, text) = power_model_of(&epyc, &["--power-model", file.to_str().unwrap()]);
    assert_eq!(m["name"], "lab");
    assert!(m.get("machine_class").is_none(), "{m}");
    assert_eq!(m["file"], file.to_str().unwrap());
    assert!(
        text.contains(&format!(
            "chosen by              --power-model {} (the machine class is not used)",
            file.display()
        )),
        "{text}"
    );
}
