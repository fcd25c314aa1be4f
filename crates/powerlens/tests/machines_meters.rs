//! Meters of real machines (`tests/data/machines/`, laid out as trees) read by `info` and
//! by `run`, with their counters advanced at known power by the mock executor's `draw`
//! (the fake-meter writer `energy::files`, docs/COMPARE.md). Issue 47's defects, each on
//! the capture that showed it.

mod common;

use std::path::Path;

use common::machines;
use common::{assert_close, json, num, powerlens, stderr};
use serde_json::Value;

/// A corpus machine laid out in a temporary directory, then changed by `edit`.
fn machine(name: &str, edit: impl FnOnce(&Path)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    machines::lay_out(&machines::capture(name), dir.path());
    edit(&dir.path().join("sys"));
    dir
}

fn info(root: &Path) -> Value {
    let out = powerlens(
        &root.join("sys"),
        &root.join("results.db"),
        &[
            "info",
            "--json",
            "--procfs-root",
            root.join("proc").to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    json(&out)
}

fn source<'a>(info: &'a Value, name: &str) -> &'a Value {
    info["energy_sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap()
}

/// `run --runs 2 -- sleep SECS` on the mock executor with the meter script `setup`.
fn mocked_run(root: &Path, setup: &str, secs: &str) -> Value {
    let flag = format!("--mock-executor={setup}");
    let args = ["run", &flag, "--json", "--runs", "2", "--", "sleep", secs];
    let out = powerlens(&root.join("sys"), &root.join("results.db"), &args);
    assert!(out.status.success(), "{}", stderr(&out));
    json(&out)
}

const PACKAGE: &str = "class/powercap/intel-rapl:0";
const CORE: &str = "class/powercap/intel-rapl:0:0";

#[test]
fn rapl_package_and_core_give_the_package_power_not_their_sum() {
    let tree = machine("node-exporter", |_| {});
    // Each zone's wrap range, and the time one wrap takes at its power limit: 262143328850
    // µJ at 4090000000 µW is 64.1 s; the core states a limit of 0 W.
    let reason = source(&info(tree.path()), "rapl-powercap")["reason"].clone();
    assert!(
        reason.as_str().unwrap().contains(
            "wrap at package-0 262.1 kJ (1.1 min at its 4090 W limit), package-0/core 262.1 kJ (no power limit stated)"
        ),
        "{reason}"
    );
    let setup = format!("draw {PACKAGE} 20W; draw {CORE} 12W");
    let v = mocked_run(tree.path(), &setup, "0.8");
    // 0.8 s at 20 W in the package, 12 W of it in the cores: 16 J, 20 W; the core's 9.6 J
    // is inside the package's.
    for r in v["runs"].as_array().unwrap() {
        assert_close(num(&r["energy_j"]), 16.0, "energy_j");
        assert_close(num(&r["power_w"]), 20.0, "power_w");
        assert_close(num(&r["domains"]["package-0/core"]), 9.6, "core");
    }
}

/// Issue 47, defect 1: a zone whose `max_energy_range_uj` reads 0 (powercap/powercap#3)
/// made all of RAPL unavailable.
#[test]
fn issue_47_a_zone_without_range_keeps_the_other_zones() {
    let tree = machine("node-exporter", |sys| {
        let range = sys.join(CORE).join("max_energy_range_uj");
        std::fs::write(range, "0\n").unwrap();
    });
    let rapl = source(&info(tree.path()), "rapl-powercap").clone();
    assert_eq!(rapl["available"], true, "{rapl}");
    let names: Vec<&str> = rapl["domains"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["package-0", "package-0/core"]);
    let reason = rapl["reason"].as_str().unwrap();
    assert!(
        reason.contains("intel-rapl:0:0: max_energy_range_uj is 0, its wrap range is unknown"),
        "{reason}"
    );
    let setup = format!("draw {PACKAGE} 20W; draw {CORE} 12W");
    let v = mocked_run(tree.path(), &setup, "0.8");
    for r in v["runs"].as_array().unwrap() {
        assert_close(num(&r["energy_j"]), 16.0, "energy_j");
        assert_close(num(&r["domains"]["package-0/core"]), 9.6, "core");
    }
}

/// Issue 47, defect 2: an offline CPU's empty policy (prometheus/procfs) made the whole
/// frequency section unavailable.
#[test]
fn issue_47_an_offline_cpus_policy_is_skipped_and_noted() {
    let tree = machine("procfs", |_| {});
    let freq = info(tree.path())["cpufreq"].clone();
    assert_eq!(freq["available"], true, "{freq}");
    assert_eq!(freq["policies"].as_array().unwrap().len(), 1);
    assert_eq!(freq["policies"][0]["policy"], 0);
    let notes = freq["notes"].as_array().unwrap();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0]
            .as_str()
            .unwrap()
            .starts_with("policy1 skipped (its CPUs offline?)"),
        "{notes:?}"
    );
}

/// `run --runs 2 -- sleep SECS` on a fixture tree's meters, drawn by `setup`.
fn mocked_run_on(tree: &powerlens_sys::fixture::FixtureTree, setup: &str, secs: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let flag = format!("--mock-executor={setup}");
    let args = ["run", &flag, "--json", "--runs", "2", "--", "sleep", secs];
    let out = powerlens(&tree.roots().sysfs, &dir.path().join("results.db"), &args);
    assert!(out.status.success(), "{}", stderr(&out));
    json(&out)
}

/// Issue 47, defect 3: with only `amd_energy`, the total added the socket and the cores
/// inside it. No public capture of the chip was found; the tree has its real labels.
#[test]
fn issue_47_amd_energy_gives_the_sockets_power() {
    let tree = powerlens_sys::fixture::FixtureTree::new();
    let chip = tree.hwmon(0, "amd_energy");
    for (k, label) in [
        (1, "Ecore000"),
        (2, "Ecore001"),
        (3, "Esocket0"),
        (4, "Esocket1"),
    ] {
        tree.write_sys(format!("class/hwmon/hwmon0/energy{k}_input"), 1_000_000);
        tree.write_sys(format!("class/hwmon/hwmon0/energy{k}_label"), label);
    }
    assert!(chip.is_dir());
    let setup = [
        "draw class/hwmon/hwmon0/energy1_input 9W",
        "draw class/hwmon/hwmon0/energy2_input 6W",
        "draw class/hwmon/hwmon0/energy3_input 50W",
        "draw class/hwmon/hwmon0/energy4_input 30W",
    ]
    .join("; ");
    let v = mocked_run_on(&tree, &setup, "0.8");
    // 0.8 s at 50 W and 30 W in the sockets: 64 J, 80 W; the cores' 12 J are inside them.
    for r in v["runs"].as_array().unwrap() {
        assert_close(num(&r["energy_j"]), 64.0, "energy_j");
        assert_close(num(&r["power_w"]), 80.0, "power_w");
        assert_close(num(&r["domains"]["amd_energy/Ecore000"]), 7.2, "core 0");
    }
}

/// Issue 47, defect 4: an ACPI 4.0 power meter's `power1_average` in `hwmonN/device/`.
#[test]
fn issue_47_an_acpi_power_meter_gives_its_average() {
    let tree = powerlens_sys::fixture::FixtureTree::new();
    tree.hwmon(0, "power_meter");
    tree.write_sys("class/hwmon/hwmon0/device/power1_average", 245_000_000);
    tree.write_sys("class/hwmon/hwmon0/device/power1_average_interval", 1000);
    let v = mocked_run_on(
        &tree,
        "draw class/hwmon/hwmon0/device/power1_average 245W",
        "3",
    );
    for r in v["runs"].as_array().unwrap() {
        let w = num(&r["power_w"]);
        eprintln!("ACPI power meter at 245 W: run reads {w} W");
        assert!(
            (w - 245.0).abs() <= 245.0 * 0.01,
            "{w} W, not 245 W within 1%"
        );
    }
}

/// `info` as text on a laid-out tree.
fn info_text(root: &Path) -> String {
    let out = powerlens(
        &root.join("sys"),
        &root.join("results.db"),
        &["info", "--procfs-root", root.join("proc").to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// Issue 47, defect 5: a missing `cpu/online` hid the CPU model line.
#[test]
fn issue_47_a_missing_online_list_keeps_the_model() {
    let tree = machine("dell-latitude-5420-tgl", |sys| {
        std::fs::remove_file(sys.join("devices/system/cpu/online")).unwrap();
    });
    let cpu = info(tree.path())["cpu"].clone();
    assert_eq!(cpu["available"], false, "{cpu}");
    let model = "11th Gen Intel(R) Core(TM) i7-1185G7 @ 3.00GHz";
    assert_eq!(cpu["model"], model);
    let text = info_text(tree.path());
    let line = text
        .lines()
        .find(|l| l.contains("model"))
        .unwrap_or_default();
    assert!(line.contains(model), "{text}");
}

/// Issue 47, defect 5: 320 identical frequency policies printed 320 lines; they fold as
/// idle states do, and `info` fits 60 lines on the 4-socket Sapphire Rapids.
#[test]
fn issue_47_info_on_320_cpus_fits_60_lines() {
    let tree = machine("spr1", |_| {});
    let text = info_text(tree.path());
    let lines = text.lines().count();
    eprintln!("{text}");
    assert!(lines <= 60, "{lines} lines:\n{text}");
    let folded = text
        .lines()
        .find(|l| l.contains("policies (the same on CPUs"))
        .unwrap_or_else(|| panic!("no folded policy line:\n{text}"));
    assert!(folded.contains("CPUs 0-319"), "{folded}");
}

/// Issue 47, defect 5: a dangling `intel-rapl:0` link got the advice to load the driver,
/// whose zones are there; the honest reason is the missing target.
#[test]
fn issue_47_a_dangling_zone_link_says_so() {
    let tree = machine("node-exporter", |sys| {
        for zone in [PACKAGE, CORE] {
            let dir = sys.join(zone);
            std::fs::remove_dir_all(&dir).unwrap();
            let target = format!("../../devices/virtual/powercap/intel-rapl/{}", &zone[15..]);
            std::os::unix::fs::symlink(target, &dir).unwrap();
        }
    });
    let rapl = source(&info(tree.path()), "rapl-powercap").clone();
    assert_eq!(rapl["available"], false, "{rapl}");
    let reason = rapl["reason"].as_str().unwrap();
    assert!(
        reason.contains(
            "intel-rapl:0 links to ../../devices/virtual/powercap/intel-rapl/intel-rapl:0, which does not exist"
        ),
        "{reason}"
    );
    assert_eq!(rapl["fix"], Value::Null, "no modprobe advice: {rapl}");
}

/// Issue 47, defect 5: `info` never showed the battery's figures.
#[test]
fn issue_47_the_battery_figures_are_shown() {
    let tree = machine("node-exporter", |_| {});
    let battery = source(&info(tree.path()), "battery").clone();
    assert_eq!(battery["available"], true, "{battery}");
    // energy_full 45070000 µWh, energy_now 36580000 µWh (81.2% of full), power_now 5002000 µW.
    let reason = battery["reason"].as_str().unwrap();
    assert!(
        reason.contains(
            "BAT0 (power_now integrated; full 45.07 Wh, now 36.58 Wh (81%), rate 5.00 W)"
        ),
        "{reason}"
    );
}
