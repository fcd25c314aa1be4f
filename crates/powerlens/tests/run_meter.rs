//! `powerlens run` against fake meters: fixture powercap trees whose `energy_uj` counters a
//! test thread advances at a known power, wrapping at a small `max_energy_range_uj`. On real
//! hardware the same path reads RAPL; here the oracle is the power we set, P × wall time.

use powerlens_sys::fixture::{FakeMeter, FixtureTree};

mod common;
use common::json;

/// Runs the binary with the tree as its sysfs.
fn powerlens(tree: &FixtureTree, db: &std::path::Path, args: &[&str]) -> std::process::Output {
    common::powerlens(&tree.roots().sysfs, db, args)
}

// The fake meters are threads that must write every millisecond; tests in this binary run
// one at a time (common::serial) so they do not starve each other's meters on 2 cores.
use common::serial;

#[test]
fn energy_is_power_times_time_across_many_wraps() {
    let _serial = serial();
    let tree = FixtureTree::new();
    // 5 J range at 25 W: the counter wraps every 0.2 s, three times per run.
    let zone = tree.rapl_zone(0, "package-0", 0, 5_000_000);
    let _meter = FakeMeter::start(zone.join("energy_uj"), 25.0, 5_000_000);
    let db = tree.sys_path("results.db");
    let out = powerlens(
        &tree,
        &db,
        &["run", "--runs", "3", "--json", "--", "sleep", "0.6"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    for r in v["runs"].as_array().unwrap() {
        let (wall, energy) = (
            r["wall_s"].as_f64().unwrap(),
            r["energy_j"].as_f64().unwrap(),
        );
        let expected = 25.0 * wall;
        assert!(
            (energy - expected).abs() / expected < 0.02,
            "{energy} J vs {expected} J over {wall} s"
        );
        assert_eq!(r["provenance"]["kind"], "measured");
        // Read from a fixture tree, and labelled so (issue 17 point 10).
        assert_eq!(
            r["provenance"]["source"].as_str().unwrap(),
            format!(
                "rapl-powercap, fixture sysfs {}",
                tree.roots().sysfs.display()
            )
        );
    }
    let mean_power = v["summary"]["power_w"]["mean"].as_f64().unwrap();
    assert!((mean_power - 25.0).abs() < 0.5, "{mean_power} W");
    assert!(String::from_utf8_lossy(&out.stderr).contains("measured by rapl-powercap"));
}

#[test]
fn totals_add_packages_and_dram_but_not_core_or_psys() {
    let _serial = serial();
    let tree = FixtureTree::new();
    let range = 50_000_000;
    let pkg = tree.rapl_zone(0, "package-0", 0, range);
    let core = tree.rapl_subzone(0, 0, "core", 0, range);
    let dram = tree.rapl_subzone(0, 1, "dram", 0, range);
    let psys = tree.rapl_zone(1, "psys", 0, range);
    let _m = [
        FakeMeter::start(pkg.join("energy_uj"), 20.0, range),
        FakeMeter::start(core.join("energy_uj"), 12.0, range),
        FakeMeter::start(dram.join("energy_uj"), 3.0, range),
        FakeMeter::start(psys.join("energy_uj"), 40.0, range),
    ];
    let db = tree.sys_path("results.db");
    let out = powerlens(
        &tree,
        &db,
        &["run", "--runs", "2", "--json", "--", "sleep", "0.8"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    for r in v["runs"].as_array().unwrap() {
        let wall = r["wall_s"].as_f64().unwrap();
        let total = r["energy_j"].as_f64().unwrap();
        assert!(
            (total - 23.0 * wall).abs() / (23.0 * wall) < 0.02,
            "package + dram: {total} J over {wall} s"
        );
        let domains = r["domains"].as_object().unwrap();
        assert_eq!(domains.len(), 4, "{domains:?}");
        let core_j = domains["package-0/core"].as_f64().unwrap();
        assert!(
            (core_j - 12.0 * wall).abs() / (12.0 * wall) < 0.02,
            "core subzone {core_j} J"
        );
        let psys_j = domains["psys"].as_f64().unwrap();
        assert!(
            (psys_j - 40.0 * wall).abs() / (40.0 * wall) < 0.02,
            "psys {psys_j} J"
        );
    }
}

#[test]
fn baseline_and_forced_slow_sampling_are_reported() {
    let _serial = serial();
    let tree = FixtureTree::new();
    let zone = tree.rapl_zone(0, "package-0", 0, 2_000_000);
    let meter = FakeMeter::start(zone.join("energy_uj"), 10.0, 2_000_000);
    let db = tree.sys_path("results.db");
    // Idle at 10 W throughout: energy above the baseline is ~0, never negative.
    let out = powerlens(
        &tree,
        &db,
        &[
            "run",
            "--runs",
            "2",
            "--baseline",
            "1",
            "--json",
            "--",
            "sleep",
            "0.5",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    let b = &v["baseline"];
    assert!((b["before_w"].as_f64().unwrap() - 10.0).abs() < 0.3, "{b}");
    assert!((b["after_w"].as_f64().unwrap() - 10.0).abs() < 0.3, "{b}");
    // The fake meter's thread can lag ~10 ms behind under load; over 1 s baselines and
    // 0.5 s runs that stays within 2%, so "about zero above idle" is judged relative to the
    // run's own energy (5 J).
    for r in v["runs"].as_array().unwrap() {
        let above = r["energy_above_baseline_j"].as_f64().unwrap();
        let energy = r["energy_j"].as_f64().unwrap();
        assert!(
            above >= 0.0 && above < 0.05 * energy,
            "{above} J above idle of {energy} J"
        );
    }
    drop(meter);

    // A 2 J range at 10 W wraps every 0.2 s; forcing 1 s reads must warn.
    let _meter = FakeMeter::start(zone.join("energy_uj"), 10.0, 2_000_000);
    let out = powerlens(
        &tree,
        &db,
        &[
            "run",
            "--runs",
            "1",
            "--meter-read-every",
            "1s",
            "--json",
            "--",
            "true",
        ],
    );
    assert!(out.status.success());
    let warnings = json(&out)["warnings"].to_string();
    assert!(warnings.contains("miss wraps"), "{warnings}");
    assert!(warnings.contains("--meter-read-every"), "{warnings}");
    // The old name of the option still works.
    let old = powerlens(
        &tree,
        &db,
        &[
            "run",
            "--runs",
            "1",
            "--sample-interval",
            "1s",
            "--json",
            "--",
            "true",
        ],
    );
    assert!(
        old.status.success(),
        "{}",
        String::from_utf8_lossy(&old.stderr)
    );
}
