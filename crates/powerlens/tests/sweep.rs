//! `powerlens sweep` end to end: every row by hand on the mock executor (scripted runs, no
//! process, no clock), the table, JSON contract, CSV and Markdown exports, the SVG plot,
//! bad input caught before running, and one live sweep of a built-in workload's thread
//! count (ignored: `cargo test -- --ignored live_`).

mod common;
use common::{assert_close, assert_close_pair, log_interval, num, t975, MOCKED};

/// Runs the binary with `dir` as its sysfs root and `dir/r.db` as its database.
fn powerlens(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    common::powerlens(dir, &dir.join("r.db"), args)
}

/// The sweep on the mock executor as JSON (`args` after `sweep --mock-executor=SETUP`).
fn mock_sweep(dir: &std::path::Path, setup: &str, args: &[&str]) -> serde_json::Value {
    let flag = format!("--mock-executor={setup}");
    let out = powerlens(dir, &[&["sweep", flag.as_str(), "--json"], args].concat());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Issue 46 (5): every row of a two-parameter sweep by hand, from scripted runs.
#[test]
fn every_combination_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    // At 5 W idle, each run spins t s at w W, then sleeps 0.1 s (first run) or 0.2 s.
    let v = mock_sweep(
        dir.path(),
        "idle 5W",
        &[
            "--param",
            "t=0.3,0.6",
            "--param",
            "w=10,40",
            "--runs",
            "2",
            "--no-save",
            "--reference",
            "t=0.6,w=10",
            "--",
            "sh",
            "-c",
            "spin {t} {w}W; sleep 0.1,0.2",
        ],
    );
    assert_eq!(v["provenance"], MOCKED);
    assert_eq!(v["reference"], serde_json::json!({"t": "0.6", "w": "10"}));
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    // Per run: wall t + tail, energy w t + 5 W × tail, for the tails 0.1 and 0.2 s.
    let runs = |t: f64, w: f64| [0.1, 0.2].map(|tail| (t + tail, w * t + 5.0 * tail));
    let mean = |v: [f64; 2]| (v[0] + v[1]) / 2.0;
    let row_of = |t: f64, w: f64| {
        let r = runs(t, w);
        (
            mean(r.map(|(wall, _)| wall)),
            mean(r.map(|(_, e)| e)),
            mean(r.map(|(wall, e)| e / wall)),
            mean(r.map(|(wall, e)| e * wall)),
        )
    };
    let (ref_wall, ref_energy, ref_power, ref_edp) = row_of(0.6, 10.0);
    // Two runs: t(0.975, 1) × sd / √2 with sd = 0.1 / √2 for the wall (0.05 × t), and
    // 0.5 / √2 for the energy (0.25 × t), on the log scale.
    let t1 = t975(1);
    for (row, (t, w)) in rows
        .iter()
        .zip([(0.3, 10.0), (0.3, 40.0), (0.6, 10.0), (0.6, 40.0)])
    {
        let what = |f: &str| format!("t={t},w={w} {f}");
        assert_eq!(row["params"]["t"], t.to_string());
        assert_eq!(row["params"]["w"], w.to_string());
        assert_eq!(row["runs"], 2);
        let (wall, energy, power, edp) = row_of(t, w);
        assert_close(num(&row["wall_s"]), wall, &what("wall"));
        assert_close(num(&row["energy_j"]), energy, &what("energy"));
        assert_close(num(&row["power_w"]), power, &what("power"));
        assert_close(num(&row["edp_js"]), edp, &what("edp"));
        assert_close(
            num(&row["perf_per_watt"]),
            mean(runs(t, w).map(|(_, e)| 1.0 / e)),
            &what("work/J"),
        );
        assert_close_pair(
            &row["wall_ci95"],
            log_interval(wall, 0.05 * t1),
            &what("wall ci"),
        );
        assert_close_pair(
            &row["energy_ci95"],
            log_interval(energy, 0.25 * t1),
            &what("energy ci"),
        );
        let r = &row["ratios"];
        assert_close(num(&r["time"]), wall / ref_wall, &what("time ratio"));
        assert_close(
            num(&r["energy"]),
            energy / ref_energy,
            &what("energy ratio"),
        );
        assert_close(num(&r["power"]), power / ref_power, &what("power ratio"));
        assert_close(num(&r["edp"]), edp / ref_edp, &what("edp ratio"));
    }
    // Energy 3.75, 12.75, 6.75, 24.75 J: the first is the best. Time 0.45, 0.45, 0.75,
    // 0.75 s: the first two tie, and the first listed is marked.
    let marked = |key: &str| -> Vec<bool> { rows.iter().map(|r| r[key] == true).collect() };
    assert_eq!(marked("best_energy"), [true, false, false, false]);
    assert_eq!(marked("best_time"), [true, false, false, false]);
}

#[test]
fn a_sweep_produces_table_json_exports_and_plot() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).display().to_string();
    let (plot, csv, md) = (p("plot.svg"), p("s.csv"), p("s.md"));
    // 30 W for 0.15 s (4.5 J) or 0.3 s (9 J), both runs alike.
    let v = mock_sweep(
        dir.path(),
        "",
        &[
            "--param",
            "t=0.15,0.3",
            "--runs",
            "2",
            "--reference",
            "0.3",
            "--plot",
            &plot,
            "--export-csv",
            &csv,
            "--export-markdown",
            &md,
            "--",
            "spin",
            "{t}",
            "30W",
        ],
    );
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for (row, t) in rows.iter().zip([0.15, 0.3]) {
        assert_eq!(row["params"]["t"], t.to_string());
        assert_close(num(&row["wall_s"]), t, "wall");
        assert_close(num(&row["energy_j"]), 30.0 * t, "energy");
        assert_close(num(&row["power_w"]), 30.0, "power");
        assert_eq!(row["runs"], 2);
    }
    assert_eq!(v["reference"]["t"], "0.3");
    assert_eq!(rows[1]["ratios"]["energy"], 1.0);
    assert_close(num(&rows[0]["ratios"]["energy"]), 0.5, "half the energy");
    assert_eq!(rows[0]["best_energy"], true);
    assert_eq!(rows[0]["best_time"], true);
    assert_eq!(rows.iter().filter(|r| r["best_energy"] == true).count(), 1);
    assert_eq!(rows.iter().filter(|r| r["best_time"] == true).count(), 1);

    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(
        svg.starts_with("<svg")
            && svg.contains("energy per run [J]")
            && svg.contains("wall time per run [s]")
    );
    assert_eq!(svg.matches("<circle").count(), 4, "two points per panel");
    assert_eq!(std::fs::read_to_string(&csv).unwrap().lines().count(), 3);
    assert!(std::fs::read_to_string(&md).unwrap().lines().count() >= 4);

    // Each combination was saved with its label.
    let list = powerlens(dir.path(), &["runs", "list", "--json"]);
    let saved: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(saved[0]["label"], "t=0.15");
    assert_eq!(saved[1]["label"], "t=0.3");
}

/// The one live sweep: a built-in workload on real threads, over its thread count
/// (`cargo test -- --ignored live_`).
#[test]
#[ignore = "live: real threads on the kernel's scheduler"]
fn live_sweep_of_a_spinning_workload() {
    let dir = tempfile::tempdir().unwrap();
    let exe = env!("CARGO_BIN_EXE_powerlens");
    let out = powerlens(
        dir.path(),
        &[
            "sweep",
            "--param",
            "threads=1..2",
            "--runs",
            "2",
            "--json",
            "--no-save",
            "--",
            exe,
            "workload",
            "spin",
            "--threads",
            "{threads}",
            "--duration",
            "0.3s",
            "--quiet",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for row in rows {
        let (e, t, w) = (
            num(&row["energy_j"]),
            num(&row["wall_s"]),
            num(&row["power_w"]),
        );
        let figures = format!("{row}");
        // The workload spins its duration, never less; the model's power is over the
        // meter's interval, the wall time and the moments around it: within 25% of
        // energy / wall however loaded the machine is.
        assert!(t >= 0.3, "wall: {figures}");
        assert!(e > 0.0 && (e / t - w).abs() / w < 0.25, "power: {figures}");
    }
}

/// Each mistake is named with its flag (the command line adds it: the library knows no
/// flags) before anything runs.
#[test]
fn mistakes_are_caught_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    for (args, expected) in [
        (
            vec!["sweep", "--param", "threads=1,2", "--", "echo", "{thread}"],
            "uses {thread} but no --param thread",
        ),
        (
            vec!["sweep", "--param", "threads=1,2", "--", "echo", "x"],
            "--param threads is not used",
        ),
        (
            vec!["sweep", "--param", "threads", "--", "echo", "{threads}"],
            "--param \"threads\": expected NAME=V1,V2",
        ),
        (
            vec![
                "sweep",
                "--param",
                "t=1,2",
                "--reference",
                "3",
                "--",
                "echo",
                "{t}",
            ],
            "--reference \"3\" matches no combination",
        ),
        (
            vec![
                "sweep", "--param", "t=1", "--param", "t=2", "--", "echo", "{t}",
            ],
            "--param \"t\" is given twice",
        ),
    ] {
        let out = powerlens(dir.path(), &args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expected), "{args:?}: {err}");
        assert!(
            !dir.path().join("r.db").exists(),
            "nothing ran, nothing saved: {args:?}"
        );
    }
}
