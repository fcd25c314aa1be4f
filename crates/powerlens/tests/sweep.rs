//! `powerlens sweep` end to end over a built-in workload's thread count: table, JSON
//! contract, CSV and Markdown exports, the SVG plot, and bad input caught before running.

mod common;

/// Runs the binary with `dir` as its sysfs root and `dir/r.db` as its database.
fn powerlens(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    common::powerlens(dir, &dir.join("r.db"), args)
}

#[test]
fn thread_count_sweep_produces_table_json_exports_and_plot() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).display().to_string();
    let exe = env!("CARGO_BIN_EXE_powerlens");
    let (plot, csv, md) = (p("plot.svg"), p("s.csv"), p("s.md"));
    let out = powerlens(
        dir.path(),
        &[
            "sweep",
            "--param",
            "threads=1..2",
            "--runs",
            "2",
            "--json",
            "--reference",
            "2",
            "--plot",
            &plot,
            "--export-csv",
            &csv,
            "--export-markdown",
            &md,
            "--",
            exe,
            "workload",
            "spin",
            "--threads",
            "{threads}",
            "--duration",
            "0.15s",
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
    for (row, threads) in rows.iter().zip(["1", "2"]) {
        assert_eq!(row["params"]["threads"], threads);
        let (e, t, w) = (
            row["energy_j"].as_f64().unwrap(),
            row["wall_s"].as_f64().unwrap(),
            row["power_w"].as_f64().unwrap(),
        );
        assert!(e > 0.0 && t >= 0.15 && w > 0.0);
        assert!(
            (e / t - w).abs() / w < 0.05,
            "power is energy over time: {e} J / {t} s vs {w} W"
        );
        assert_eq!(row["runs"], 2);
    }
    assert_eq!(v["reference"]["threads"], "2");
    assert_eq!(rows[1]["ratios"]["energy"], 1.0);
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
    assert_eq!(saved[0]["label"], "threads=1");
    assert_eq!(saved[1]["label"], "threads=2");
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
