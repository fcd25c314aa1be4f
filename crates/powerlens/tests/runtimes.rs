//! Managed runtimes end to end (issue 30): the default `record` of an unmodified `node
//! hot.js`, `java Hot` or `python3.12 hot.py` names the script's hot function from the
//! runtime's perf map, which `--jit-names` (the default) had the runtime write; CPython
//! 3.11's interpreter time is one labelled row. The oracles: the hot function
//! is known (the scripts spend their time in it); the process's own CPU samples and
//! energy (the shares must agree, and the function rows sum to the process's energy); and
//! the same report after the map is deleted. Skips, saying why, without root or without
//! the runtime (scripts/test.sh installs Debian's nodejs and openjdk-17-jdk-headless).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

mod common;
use common::{json, live_recording, recording_diagnostics, stderr, with_tracefs, Serial};

// The workloads do a fixed amount of work (about 1.3 s of CPU on this project's VMs),
// not work for a fixed wall time: on a loaded machine a wall-time loop gets fewer CPU
// samples while start-up and the runtime's own threads keep theirs, and its share falls
// below the 80% that check_hot_row asks.

/// The hot loop: a recursive Fibonacci.
const HOT_JS: &str = "\
function fibonacciHotLoop(n) { return n < 2 ? n : fibonacciHotLoop(n - 1) + fibonacciHotLoop(n - 2); }
let total = 0;
for (let i = 0; i < 50; i++) total += fibonacciHotLoop(32);
console.log(total > 0 ? 'done' : 'none');
";

/// The hot loop in one method that runs long, so that the JIT compiles it on its own
/// (on-stack replacement) rather than inlined into `main`, as a short method called from
/// a loop in `main` would be. `main` returns normally: the JVM writes its map at exit.
const HOT_JAVA: &str = "\
public class Hot {
    static long collatzSteps(long count) {
        long steps = 0;
        for (long n = 1; n <= count; n++) {
            long m = n;
            while (m != 1) { m = (m % 2 == 0) ? m / 2 : 3 * m + 1; steps++; }
        }
        return steps;
    }
    public static void main(String[] args) {
        System.out.println(collatzSteps(3_000_000L) > 0 ? \"done\" : \"none\");
    }
}
";

/// The path of `program` on PATH, or `None` after saying the test is skipped.
fn runtime(program: &str, package: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        eprintln!(
            "SKIP: {program} is not installed (Debian package {package}; scripts/test.sh installs it)"
        );
    }
    found
}

/// `report REC --by function --json`.
fn functions_report(rec: &Path) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_powerlens"))
        .args([
            "report",
            rec.to_str().unwrap(),
            "--by",
            "function",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    json(&out)
}

/// Records `command` into `dir` with the default options (`--jit-names`, which it must
/// say it applied); returns the recording and its `report --by function --json`.
fn record_default(dir: &Path, command: &[&str]) -> (PathBuf, Value) {
    let rec = dir.join("runtime.rec");
    let mut args = vec![
        env!("CARGO_BIN_EXE_powerlens"),
        "record",
        "-o",
        rec.to_str().unwrap(),
        "--",
    ];
    args.extend_from_slice(command);
    let out = with_tracefs(&args, &[]);
    let said = stderr(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("--jit-names: for the command's managed runtimes to write perf maps"),
        "record says what it set: {said}"
    );
    let report = functions_report(&rec);
    (rec, report)
}

/// Checks the top function row of a one-process recording: named `hot`, with ≥ 80% of
/// the process's CPU samples (every function row is the target's, so the rows' samples
/// are the process's) and that share of its energy; the rows sum to the process's
/// energy. `process` picks the process row. Returns the top row.
fn check_hot_row<'a>(report: &'a Value, hot: &str, process: impl Fn(&Value) -> bool) -> &'a Value {
    let diag = recording_diagnostics(report);
    let functions = report["functions"].as_array().expect("function rows");
    let top = &functions[0];
    let name = top["function"].as_str().unwrap();
    assert!(
        name.contains(hot),
        "top row {name} ({}), not {hot}: {:#?}; {diag}",
        top["module"],
        &functions[..functions.len().min(5)]
    );
    let process = report["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| process(p))
        .unwrap_or_else(|| panic!("no process row for {name}: {:#}", report["processes"]));
    let samples = |f: &Value| f["samples"].as_u64().unwrap() as f64;
    let all_samples: f64 = functions.iter().map(samples).sum();
    let share = samples(top) / all_samples;
    assert!(
        share >= 0.8,
        "{name} has {} of {all_samples} samples ({:.1}%); {diag}",
        samples(top),
        share * 100.0
    );
    // Closure: the rows sum to the process's energy, and the hot row holds its share
    // (its threads' energy per sample differs by their frequency: 2 points allowed).
    let process_j = process["energy_j"].as_f64().expect("the process's energy");
    let rows_j: f64 = functions
        .iter()
        .map(|f| f["energy_j"].as_f64().unwrap())
        .sum();
    assert!(
        (rows_j - process_j).abs() <= 1e-6 * process_j,
        "function rows {rows_j} J, process {process_j} J; {diag}"
    );
    let energy_share = top["energy_j"].as_f64().unwrap() / process_j;
    assert!(
        (energy_share - share).abs() <= 0.02,
        "{name}: {:.1}% of the energy, {:.1}% of the samples; {diag}",
        energy_share * 100.0,
        share * 100.0
    );
    top
}

/// The pid of a one-process command: the busiest of the target's processes.
fn command_pid(report: &Value) -> u64 {
    report["processes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["pid"].is_u64())
        .max_by(|a, b| {
            let cpu = |p: &Value| p["cpu_time_s"].as_f64().unwrap_or(0.0);
            cpu(a).total_cmp(&cpu(b))
        })
        .and_then(|p| p["pid"].as_u64())
        .expect("a process row")
}

/// Records `command` into `dir` and checks that the top function row is `hot`, named
/// from the process's perf map ([`check_hot_row`]); then deletes the map and checks that
/// the report names the same functions. Returns the process's pid.
fn record_and_check(dir: &Path, command: &[&str], hot: &str) -> u64 {
    let (rec, report) = record_default(dir, command);
    let pid = command_pid(&report);
    let top = check_hot_row(&report, hot, |p| p["pid"].as_u64() == Some(pid));
    // One module for JIT code in every run, so that `diff` matches its functions.
    assert_eq!(top["module"], "[jit]");
    let module = format!("/tmp/perf-{pid}.map");
    // The map deleted (as /tmp is cleaned): the recording holds the names.
    let map = PathBuf::from(&module);
    assert!(map.is_file(), "the runtime wrote {module}");
    std::fs::remove_file(&map).unwrap();
    let again = functions_report(&rec);
    let names = |r: &Value| -> Vec<String> {
        r["functions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["function"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&again), names(&report));
    pid
}

/// The real executable of a Python on PATH (pyenv's `python3.12` is a shell shim), or
/// `None`, saying the test is skipped.
fn python(version: &str) -> Option<String> {
    let program = format!("python{version}");
    let skip = |why: String| {
        eprintln!("SKIP: {why}");
        None
    };
    let Ok(out) = Command::new(&program)
        .args([
            "-c",
            "import os, sys; print(os.path.realpath(sys.executable))",
        ])
        .output()
    else {
        return skip(format!("{program} is not installed"));
    };
    let exe = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || exe.is_empty() {
        return skip(format!("{program} does not run here: {}", stderr(&out)));
    }
    Some(exe)
}

/// A recursive Python function.
const HOT_PY: &str = "\
def fib(n): return n if n < 2 else fib(n - 1) + fib(n - 2)
for _ in range(40): fib(25)
";

/// For a Python test: the live-recording lock, a directory with [`HOT_PY`] in it, the
/// interpreter and the script; `None`, saying why, without the Python or root.
fn python_with_script(version: &str) -> Option<(Serial, tempfile::TempDir, String, PathBuf)> {
    let python = python(version)?;
    let serial = live_recording()?;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("hot.py");
    std::fs::write(&script, HOT_PY).unwrap();
    Some((serial, dir, python, script))
}

/// CPython 3.11 has no perf trampoline: its interpreter time is one labelled row, with
/// the process's CPU samples and energy, not dozens of `_PyEval_*` rows: in one recording,
/// with the share [`check_hot_row`] asks, and no `PyEval` row at all.
#[test]
#[ignore = "live: records real runtimes on the real kernel (root)"]
fn python_311_interpreter_time_is_one_labelled_row() {
    let Some((_serial, dir, python, script)) = python_with_script("3.11") else {
        return;
    };
    let (_, report) = record_default(dir.path(), &[&python, script.to_str().unwrap()]);
    let top = check_hot_row(
        &report,
        "python3.11 [interpreter: run with Python ≥ 3.12 -X perf for function names]",
        |p| p["comm"].as_str().is_some_and(|c| c.starts_with("python")),
    );
    // The interpreter's executable, or its library when it is built shared (pyenv).
    let module = top["module"].as_str().unwrap();
    assert!(
        module == python || module.ends_with("/libpython3.11.so.1.0"),
        "{module}"
    );
    let eval_rows = report["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["function"].as_str().unwrap().contains("PyEval"))
        .count();
    assert_eq!(
        eval_rows,
        0,
        "{:#}; {}",
        report["functions"],
        recording_diagnostics(&report)
    );
}

/// Python 3.12 with PYTHONPERFSUPPORT=1 (which --jit-names sets) names each Python
/// function through a perf trampoline: the hot function is the top row, in one recording,
/// with the share [`check_hot_row`] asks.
#[test]
#[ignore = "live: records real runtimes on the real kernel (root)"]
fn python_312_names_the_hot_python_function_from_an_unmodified_command() {
    let Some((_serial, dir, python, script)) = python_with_script("3.12") else {
        return;
    };
    record_and_check(
        dir.path(),
        &[&python, script.to_str().unwrap()],
        &format!("py::fib:{}", script.display()),
    );
}

/// node names the script's hot function from its perf map: the top row of one recording,
/// with the share [`check_hot_row`] asks, and node leaves no log behind.
#[test]
#[ignore = "live: records real runtimes on the real kernel (root)"]
fn node_names_the_hot_javascript_function_from_an_unmodified_command() {
    let Some(node) = runtime("node", "nodejs") else {
        return;
    };
    let Some(_serial) = live_recording() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("hot.js");
    std::fs::write(&script, HOT_JS).unwrap();
    let pid = record_and_check(
        dir.path(),
        &[node.to_str().unwrap(), script.to_str().unwrap()],
        "fibonacciHotLoop",
    );
    // Plain --perf-basic-prof made V8 write `isolate-ADDRESS-PID-v8.log` into node's
    // working directory (the test's): --jit-names must leave no litter there.
    let litter: Vec<_> = std::fs::read_dir(".")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("isolate-") && n.ends_with(&format!("-{pid}-v8.log")))
        .collect();
    assert!(
        litter.is_empty(),
        "node left {litter:?} in its working directory"
    );
}

/// The JVM names the class's hot method from its perf map: the top row of one recording,
/// with the share [`check_hot_row`] asks.
#[test]
#[ignore = "live: records real runtimes on the real kernel (root)"]
fn java_names_the_hot_method_from_an_unmodified_command() {
    let (Some(java), Some(javac)) = (
        runtime("java", "openjdk-17-jdk-headless"),
        runtime("javac", "openjdk-17-jdk-headless"),
    ) else {
        return;
    };
    let Some(_serial) = live_recording() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("Hot.java"), HOT_JAVA).unwrap();
    let built = Command::new(&javac)
        .arg("Hot.java")
        .current_dir(dir.path())
        .status()
        .unwrap();
    assert!(built.success(), "javac Hot.java: {built}");
    let _pid = record_and_check(
        dir.path(),
        &[
            java.to_str().unwrap(),
            "-cp",
            dir.path().to_str().unwrap(),
            "Hot",
        ],
        "Hot.collatzSteps",
    );
}

/// `diff --by function` of two node runs matches the JavaScript function with itself (its
/// row's module is the same `[jit]` in both, not each run's perf map), and three times the work
/// shows as more of its samples and energy: in one recording of each run, B's samples of
/// the function 1.4 to 7 times A's, and more of its energy.
#[test]
#[ignore = "live: records real runtimes on the real kernel (root)"]
fn diff_matches_a_javascript_function_across_runs() {
    let Some(node) = runtime("node", "nodejs") else {
        return;
    };
    let Some(_serial) = live_recording() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (mut recs, mut diags) = (Vec::new(), Vec::new());
    // One script, as a user edits it between runs: the function keeps its name.
    let script = dir.path().join("hot.js");
    for (name, runs) in [("a", 15), ("b", 45)] {
        std::fs::write(&script, HOT_JS.replace("i < 50", &format!("i < {runs}"))).unwrap();
        let rec = dir.path().join(format!("{name}.rec"));
        let out = with_tracefs(
            &[
                env!("CARGO_BIN_EXE_powerlens"),
                "record",
                "-o",
                rec.to_str().unwrap(),
                "--",
                node.to_str().unwrap(),
                script.to_str().unwrap(),
            ],
            &[],
        );
        assert!(out.status.success(), "{}", stderr(&out));
        // The runtime's map is left in /tmp: remove it once the names are in.
        let report = functions_report(&rec);
        let pid = command_pid(&report);
        let _ = std::fs::remove_file(format!("/tmp/perf-{pid}.map"));
        diags.push(format!(
            "{} {}",
            name.to_uppercase(),
            recording_diagnostics(&report)
        ));
        recs.push(rec);
    }
    let diags = diags.join("; ");
    let out = Command::new(env!("CARGO_BIN_EXE_powerlens"))
        .args(["diff", "--by", "function", "--json"])
        .args(&recs)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let diff = json(&out);
    let rows = diff["rows"].as_array().unwrap();
    let hot: Vec<&Value> = rows
        .iter()
        .filter(|r| r["key"].as_str().unwrap().starts_with("fibonacciHotLoop "))
        .collect();
    assert_eq!(
        hot.len(),
        1,
        "one row, matched: {:#}; {diags}",
        diff["rows"]
    );
    let (a, b) = (&hot[0]["a"], &hot[0]["b"]);
    let samples = |side: &Value| side["samples"].as_f64().expect("matched on both sides");
    // Three times the calls, but not exactly three times the samples: the first calls run
    // in V8's slower tiers in both runs (the same row), and one run in a few takes up to
    // 1.75× longer for the same calls. So either run may be the slow one: B/A lies between
    // about 3 / 1.75 = 1.7 and 3 × 1.75 = 5.25. The bounds leave room beyond those, and
    // still fail if B's calls were not counted (≈ 1) or A's samples went to another row
    // (far above).
    let ratio = samples(b) / samples(a);
    assert!(
        (1.4..=7.0).contains(&ratio),
        "B/A samples {ratio}: {:#}; {diags}",
        hot[0]
    );
    assert!(
        b["energy_j"].as_f64() > a["energy_j"].as_f64(),
        "{:#}; {diags}",
        hot[0]
    );
}

/// The command sees what `--jit-names` set, after what the user set; `--no-jit-names`
/// leaves its environment alone and says nothing.
#[test]
#[ignore = "live: records real runtimes on the real kernel (root)"]
fn the_command_gets_the_jit_environment_unless_told_not_to() {
    let Some(_serial) = live_recording() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("env.rec");
    let run = |option: &[&str]| {
        let mut args = vec![
            env!("CARGO_BIN_EXE_powerlens"),
            "record",
            "--no-stacks",
            "-o",
            rec.to_str().unwrap(),
        ];
        args.extend_from_slice(option);
        args.extend([
            "--",
            "sh",
            "-c",
            "echo \"[$NODE_OPTIONS] [${PYTHONPERFSUPPORT-unset}]\"",
        ]);
        // The user's own NODE_OPTIONS, set for powerlens (which the command inherits).
        let mut line = vec!["env", "NODE_OPTIONS=--max-old-space-size=64"];
        line.extend(args);
        let out = with_tracefs(&line, &[]);
        assert!(out.status.success(), "{}", stderr(&out));
        (
            String::from_utf8_lossy(&out.stdout).trim().to_string(),
            stderr(&out),
        )
    };
    let (seen, said) = run(&[]);
    assert_eq!(
        seen,
        "[--max-old-space-size=64 --perf-basic-prof-only-functions] [1]"
    );
    assert!(
        said.contains("NODE_OPTIONS: appended --perf-basic-prof-only-functions to yours"),
        "{said}"
    );
    let (seen, said) = run(&["--no-jit-names"]);
    assert_eq!(seen, "[--max-old-space-size=64] [unset]");
    assert!(!said.contains("--jit-names:"), "{said}");
}
