//! `compare` and `sweep` with `--config`: system configurations applied around each run and
//! restored afterwards. The machine is a fixture tree with cpufreq policies, and the runs
//! are the mock executor's (scripted, no process, no clock): the measured command reads
//! the governor that is in force and draws power accordingly, so the verdict is only right
//! if each configuration really was applied to its own runs. On real hardware the governor
//! would change the frequency; the test cannot, and says so.

use std::path::{Path, PathBuf};
use std::process::Output;

use powerlens_sys::fixture::{FixtureTree, PolicySpec};

mod common;
use common::{assert_close, num};

struct Machine {
    tree: FixtureTree,
}

impl Machine {
    fn new() -> Machine {
        let tree = FixtureTree::new();
        tree.online_cpus("0-1");
        for cpu in 0..2 {
            tree.cpufreq_policy(
                cpu,
                &PolicySpec {
                    cpus: cpu.to_string(),
                    driver: "acpi-cpufreq".into(),
                    governor: "schedutil".into(),
                    epp: None,
                    scaling_min_khz: 800_000,
                    scaling_max_khz: 3_000_000,
                    cpuinfo_min_khz: 800_000,
                    cpuinfo_max_khz: 3_000_000,
                    cur_khz: 1_000_000,
                },
            );
            tree.write_sys(
                format!("devices/system/cpu/cpufreq/policy{cpu}/scaling_available_governors"),
                "performance powersave schedutil",
            );
        }
        Machine { tree }
    }

    fn governor_file(&self, cpu: u32) -> PathBuf {
        self.tree.sys_path(format!(
            "devices/system/cpu/cpufreq/policy{cpu}/scaling_governor"
        ))
    }

    /// A mock command: under powersave 15 W for 0.45 s, under performance 30 W for 0.3 s
    /// (and nothing under any other governor).
    fn workload(&self) -> String {
        format!(
            "[{gov}=powersave] spin 0.45 15W; [{gov}=performance] spin 0.3 30W",
            gov = self.governor_file(0).display(),
        )
    }

    fn powerlens(&self, args: &[&str]) -> Output {
        common::command(&self.tree.roots().sysfs, &self.tree.sys_path("r.db"))
            .env(
                "POWERLENS_SETTINGS_JOURNAL",
                self.tree.sys_path("journal.json"),
            )
            .args(args)
            .output()
            .unwrap()
    }
}

fn governor(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap().trim().to_string()
}

#[test]
fn compare_applies_each_configuration_to_its_own_runs_and_restores() {
    let m = Machine::new();
    let workload = m.workload();
    let out = m.powerlens(&[
        "compare",
        "--mock-executor",
        "--runs",
        "3",
        "--json",
        "--config",
        "perf=governor=performance",
        "--config",
        "save=governor=powersave",
        "--",
        &workload,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["baseline"], "perf");
    let c = &v["candidates"][0];
    assert_eq!(c["label"], "save");
    // Each configuration's own runs: perf 30 W × 0.3 s = 9 J, save 15 W × 0.45 s = 6.75 J,
    // so energy × 0.75, time × 1.5 and power × 0.5. Every run alike: each interval is its
    // ratio, and a trade-off.
    for (figure, expected) in [("energy", 0.75), ("time", 1.5), ("power", 0.5)] {
        assert_close(num(&c["ratios"][figure]), expected, figure);
        assert_close(num(&c["ratio_ci95"][figure][0]), expected, figure);
        assert_eq!(c["significant"][figure], true, "{figure}");
    }
    assert_close(
        num(&v["labels"][0]["energy_j"]["mean"]),
        9.0,
        "perf's energy",
    );
    assert_eq!(c["class"], "trade_off");
    for cpu in 0..2 {
        assert_eq!(
            governor(&m.governor_file(cpu)),
            "schedutil",
            "restored on cpu {cpu}"
        );
    }
    assert!(
        !m.tree.sys_path("journal.json").exists(),
        "journal removed after restoring"
    );
}

#[test]
fn sweep_adds_configurations_as_a_parameter() {
    let m = Machine::new();
    let workload = m.workload();
    let out = m.powerlens(&[
        "sweep",
        "--mock-executor",
        "--runs",
        "1",
        "--json",
        "--param",
        "n=1,2",
        "--config",
        "perf=governor=performance",
        "--config",
        "save=governor=powersave",
        "--",
        "sh",
        "-c",
        // {n}: 0.1 or 0.2 s more at the mock's 0 W idle.
        &format!("{workload}; sleep 0.{{n}}"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    for r in rows {
        let (expected_j, spin) = if r["params"]["config"] == "save" {
            (15.0 * 0.45, 0.45)
        } else {
            (30.0 * 0.3, 0.3)
        };
        let tail = if r["params"]["n"] == "1" { 0.1 } else { 0.2 };
        let what = r["params"].to_string();
        assert_close(num(&r["energy_j"]), expected_j, &what);
        assert_close(num(&r["wall_s"]), spin + tail, &what);
    }
    assert_eq!(governor(&m.governor_file(0)), "schedutil");
}

#[test]
fn settings_this_machine_cannot_apply_fail_before_anything_runs() {
    let m = Machine::new();
    for (config, expected) in [
        ("x=governor=ondemand", "ondemand"),
        ("x=turbo=off", "turbo"),
        // The settings library names the token; the command line, the --config.
        ("x=nonsense", "--config x: setting `nonsense`: "),
        ("justaname", "expected NAME=SETTING"),
    ] {
        let out = m.powerlens(&[
            "compare",
            "--config",
            config,
            "--config",
            "y=governor=powersave",
            "--",
            "true",
        ]);
        assert!(!out.status.success(), "{config}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expected), "{config}: {err}");
        assert_eq!(
            governor(&m.governor_file(0)),
            "schedutil",
            "{config}: nothing changed"
        );
        assert!(!m.tree.sys_path("r.db").exists(), "{config}: nothing ran");
    }
    let csv = m.powerlens(&[
        "compare",
        "--config",
        "a=governor=powersave",
        "--from-csv",
        "x.csv",
    ]);
    assert!(String::from_utf8_lossy(&csv.stderr).contains("--config applies to commands"));
}
