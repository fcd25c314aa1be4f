//! `powerlens dvfs` end to end: the binary on small files, its JSON contract keys, and
//! its error messages.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn powerlens(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_powerlens"))
        .args(args)
        .output()
        .expect("run powerlens")
}

fn json(args: &[&str]) -> Value {
    let out = powerlens(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

fn stderr_of_failure(args: &[&str]) -> String {
    let out = powerlens(args);
    assert!(!out.status.success(), "{args:?} should fail");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

fn has_keys(row: &Value, keys: &[&str]) {
    for key in keys {
        assert!(row.get(key).is_some(), "missing `{key}` in {row}");
    }
}

#[test]
fn break_even_json_rows_carry_the_contract_keys() {
    let v = json(&[
        "dvfs",
        "break-even",
        "--profile",
        "xeon-gold-6130",
        "--json",
    ]);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 15);
    for row in rows {
        has_keys(row, &["cores", "from", "to", "break_even_us"]);
    }
    let first = &rows[0];
    assert_eq!(
        (
            first["cores"].as_str(),
            first["from"].as_str(),
            first["to"].as_str()
        ),
        (Some("1-2"), Some("normal"), Some("avx2"))
    );
    // 3.7 * 27 / 0.1 = 999 µs.
    assert!((first["break_even_us"].as_f64().unwrap() - 999.0).abs() < 1e-9);
}

#[test]
fn simulate_matches_a_hand_computed_trace_through_a_profile_file() {
    let dir = tempfile::tempdir().unwrap();
    // 4 / 2 / 1 GHz so that work takes 1x, 2x, 4x as long; default transition costs.
    let profile = write(
        dir.path(),
        "toy.toml",
        "name = \"toy\"\n[[bucket]]\nmin_cores = 1\nmax_cores = 8\nnormal_ghz = 4.0\navx2_ghz = 2.0\navx512_ghz = 1.0\n",
    );
    let trace = write(
        dir.path(),
        "t.csv",
        "duration_us,level,hint\n10,1\n100,0,1\n10,1\n",
    );
    let v = json(&[
        "dvfs",
        "simulate",
        &trace,
        "--profile",
        &profile,
        "--active-cores",
        "1",
        "--policy",
        "fixed:670us",
        "--policy",
        "hint",
        "--json",
    ]);
    let rows = v["rows"].as_array().unwrap();
    for row in rows {
        has_keys(
            row,
            &[
                "policy",
                "total_time_us",
                "ideal_time_us",
                "overhead_us",
                "transitions",
                "time_normal_us",
                "time_avx2_us",
                "time_avx512_us",
                "stall_us",
                "overhead_ratio_to_oracle",
            ],
        );
    }
    // fixed:670us stays at AVX2: 17 + 20 + 200 + 20 = 257; hint upclocks on phase 2 like
    // the oracle: 17 + 20 + 10 + 100 + 17 + 20 = 184. Ideal 140; oracle overhead 44.
    assert_eq!(rows[0]["total_time_us"].as_f64(), Some(257.0));
    assert_eq!(rows[1]["total_time_us"].as_f64(), Some(184.0));
    assert_eq!(rows[0]["ideal_time_us"].as_f64(), Some(140.0));
    assert_eq!(
        rows[0]["overhead_ratio_to_oracle"].as_f64(),
        Some(117.0 / 44.0)
    );
    assert_eq!(rows[1]["overhead_ratio_to_oracle"].as_f64(), Some(1.0));
    assert_eq!(v["profile"].as_str(), Some("toy"));
}

#[test]
fn gen_is_deterministic_and_feeds_simulate() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.csv");
    let b = dir.path().join("b.csv");
    for path in [&a, &b] {
        let out = powerlens(&[
            "dvfs",
            "gen",
            "--pattern",
            "random",
            "--phases",
            "500",
            "--seed",
            "9",
            "--out",
            path.to_str().unwrap(),
        ]);
        assert!(out.status.success());
    }
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    let v = json(&[
        "dvfs",
        "simulate",
        a.to_str().unwrap(),
        "--active-cores",
        "10",
        "--json",
    ]);
    assert_eq!(v["phases"].as_u64(), Some(500));
    let policies: Vec<&str> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["policy"].as_str().unwrap())
        .collect();
    assert_eq!(
        policies,
        ["fixed:670us", "fixed:breakeven", "hint", "oracle"]
    );
}

#[test]
fn classify_json_rows_carry_the_contract_keys() {
    let dir = tempfile::tempdir().unwrap();
    // P = 0; pid 5 at L = 1 moves past P and S = 0: S = 0.2. pid 6 at L = 1 == P: stays 0.
    let samples = write(
        dir.path(),
        "s.csv",
        "time_us,pid,level\n0,1,0\n100,5,1\n200,6,1\n",
    );
    let v = json(&["dvfs", "classify", &samples, "--json"]);
    let rows = v["rows"].as_array().unwrap();
    for row in rows {
        has_keys(row, &["pid", "score", "samples", "updates"]);
    }
    assert_eq!(rows[0]["pid"].as_u64(), Some(5));
    assert_eq!(rows[0]["score"].as_f64(), Some(0.2));
    assert_eq!(rows[1]["score"].as_f64(), Some(0.0));
}

#[test]
fn bad_input_is_named_with_file_line_and_fix() {
    let dir = tempfile::tempdir().unwrap();
    let bad_level = write(dir.path(), "lvl.csv", "10,0\n20,1\n30,3\n");
    let err = stderr_of_failure(&["dvfs", "simulate", &bad_level, "--active-cores", "1"]);
    assert!(
        err.contains("lvl.csv: line 3: unknown level `3`") && err.contains("1 (AVX2)"),
        "{err}"
    );
    let negative = write(dir.path(), "neg.csv", "10,0\n-2,1\n");
    let err = stderr_of_failure(&["dvfs", "simulate", &negative, "--active-cores", "1"]);
    assert!(err.contains("line 2") && err.contains("negative"), "{err}");
    let malformed = write(dir.path(), "m.csv", "10;0\n");
    let err = stderr_of_failure(&["dvfs", "simulate", &malformed, "--active-cores", "1"]);
    assert!(
        err.contains("line 1") && err.contains("duration_us,level[,hint]"),
        "{err}"
    );
    let good = write(dir.path(), "g.csv", "10,1\n");
    let err = stderr_of_failure(&[
        "dvfs",
        "simulate",
        &good,
        "--active-cores",
        "1",
        "--policy",
        "fixed:soon",
    ]);
    assert!(
        err.contains("unknown policy `fixed:soon`") && err.contains("fixed:breakeven"),
        "{err}"
    );
    let err = stderr_of_failure(&["dvfs", "break-even", "--profile", "xeon-6130"]);
    assert!(
        err.contains("unknown profile `xeon-6130`") && err.contains("xeon-gold-6130, i9-7940x"),
        "{err}"
    );
    let err = stderr_of_failure(&["dvfs", "simulate", &good, "--active-cores", "99"]);
    assert!(err.contains("no bucket for 99"), "{err}");
    let samples = write(dir.path(), "back.csv", "0,1,0\n50,1,1\n40,1,1\n");
    let err = stderr_of_failure(&["dvfs", "classify", &samples]);
    assert!(
        err.contains("back.csv: line 3") && err.contains("backwards"),
        "{err}"
    );
}

#[test]
fn counters_are_decided_from_fixture_trees() {
    let dir = tempfile::tempdir().unwrap();
    let sys = dir.path().join("sys");
    let proc_ = dir.path().join("proc");
    std::fs::create_dir_all(sys.join("bus/event_source/devices/cpu")).unwrap();
    std::fs::create_dir_all(&proc_).unwrap();
    std::fs::write(
        proc_.join("cpuinfo"),
        "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 85\nmodel name\t: Intel(R) Xeon(R) Gold 6130\n",
    )
    .unwrap();
    let roots = [
        "--sysfs-root",
        sys.to_str().unwrap(),
        "--procfs-root",
        proc_.to_str().unwrap(),
    ];
    let v = json(&[&["dvfs", "counters", "--json"][..], &roots[..]].concat());
    assert_eq!(v["available"].as_bool(), Some(true));
    std::fs::remove_dir(sys.join("bus/event_source/devices/cpu")).unwrap();
    let v = json(&[&["dvfs", "counters", "--json"][..], &roots[..]].concat());
    assert_eq!(v["available"].as_bool(), Some(false));
    assert!(v["reasons"][0].as_str().unwrap().contains("no core PMU"));
}

#[test]
fn help_explains_licenses_and_break_even() {
    let out = powerlens(&["dvfs", "--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("license") && help.contains("break-even time") && help.contains("Examples:"),
        "{help}"
    );
}

#[test]
#[ignore = "live: measures this machine's CPUs"]
fn measure_runs_here_and_reports_with_spread() {
    // Short settings: this checks that it runs and what it reports, not the figures.
    let v = json(&[
        "dvfs",
        "measure",
        "--repeats",
        "2",
        "--settle-us",
        "300",
        "--watch-us",
        "300",
        "--block-us",
        "20",
        "--json",
    ]);
    assert_eq!(v["provenance"]["kind"].as_str(), Some("measured"));
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let notes = v["notes"].to_string();
    if cpuinfo.contains(" hypervisor") {
        assert!(notes.contains("virtual machine"), "{notes}");
    }
    let measured = v["down"].as_array().unwrap().len() + v["up"].as_array().unwrap().len();
    let skipped = v["skipped"].as_array().unwrap().len();
    assert!(measured > 0 || skipped == 2, "{v}");
    for row in v["down"].as_array().unwrap() {
        has_keys(&row["cost_us"], &["median", "min", "max", "stddev", "n"]);
    }
    for row in v["up"].as_array().unwrap() {
        has_keys(row, &["from", "series", "visible", "delay_us", "cost_us"]);
    }
}
