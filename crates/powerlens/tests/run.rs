//! `powerlens run` end to end: the JSON contract, exports, the results database, and bad
//! input (missing commands, failing and killed commands, Ctrl-C, corrupt databases).
//!
//! Every test points the sysfs root at an empty directory, so no meter is found and the
//! power model is used whatever machine runs the tests; measured energy against a fake meter
//! is tested in `run_meter.rs`. The statistics are checked exactly on the mock executor
//! (`--mock-executor`: scripted runs, no process, no clock); one live run of a real
//! process is ignored by default (`cargo test -- --ignored live_`).

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

mod common;
use common::{
    assert_close, assert_close_pair, json, log_interval, num, stderr, t975, MOCKED, MOCKED_VERDICT,
};

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sys")).unwrap();
        Env { dir }
    }

    fn db(&self) -> PathBuf {
        self.dir.path().join("results.db")
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn cmd(&self) -> Command {
        let mut c = common::command(&self.dir.path().join("sys"), &self.db());
        c.current_dir(self.dir.path());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }

    fn saved(&self) -> serde_json::Value {
        let out = self.run(&["runs", "list", "--json"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

impl Env {
    /// `run --mock-executor=SETUP ARGS` as JSON; panics with stderr unless it succeeds.
    fn mock(&self, setup: &str, args: &[&str]) -> serde_json::Value {
        let flag = format!("--mock-executor={setup}");
        let out = self.run(&[&["run", flag.as_str(), "--json"], args].concat());
        assert!(out.status.success(), "{}", stderr(&out));
        json(&out)
    }
}

/// Issue 46 (5): the JSON contract of `run`, every figure by hand, from runs scripted on
/// the mock executor (no process, no clock: the figures are exact).
#[test]
fn json_contract_of_scripted_runs_by_hand() {
    let env = Env::new();
    // At 5 W idle: spin at 30 W, then sleep 0.1 s. The warm-up spins 9 s and is not
    // measured; the runs spin 0.5, 0.6 and 0.7 s.
    let out = env.run(&[
        "run",
        "--mock-executor=idle 5W",
        "--runs",
        "3",
        "--warmup",
        "1",
        "--json",
        "--",
        "sh",
        "-c",
        "spin 9,0.5,0.6,0.7 30W; sleep 0.1",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json(&out);
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    for (i, (r, spin)) in runs.iter().zip([0.5, 0.6, 0.7]).enumerate() {
        let what = |f: &str| format!("run {i} {f}");
        assert_eq!(r["index"], i);
        // Wall: the spin and the sleep; CPU: the spin; energy: 30 W × spin + 5 W × 0.1 s.
        let (wall, energy) = (spin + 0.1, 30.0 * spin + 0.5);
        assert_close(num(&r["wall_s"]), wall, &what("wall_s"));
        assert_close(num(&r["cpu_s"]), spin, &what("cpu_s"));
        assert_close(num(&r["energy_j"]), energy, &what("energy_j"));
        assert_close(num(&r["domains"]["mock"]), energy, &what("mock"));
        assert_close(
            num(&r["domains"]["mock/spin"]),
            30.0 * spin,
            &what("mock/spin"),
        );
        assert_close(num(&r["power_w"]), energy / wall, &what("power_w"));
        assert_close(num(&r["edp_js"]), energy * wall, &what("edp_js"));
        assert_eq!(r["energy_above_baseline_j"], serde_json::Value::Null);
        assert_eq!(r["exit"]["code"], 0);
        assert_eq!(r["provenance"]["kind"], "mocked", "never `measured`");
    }
    let s = &v["summary"];
    assert_eq!(s["runs"], 3);
    // Wall 0.6, 0.7, 0.8 s: mean 0.7, sd 0.1; energy 15.5, 18.5, 21.5 J: mean 18.5, sd 3.
    // Each interval on the log scale, half-width t(0.975, 2) · sd / √3.
    let t2 = t975(2);
    for (figure, mean, sd) in [("wall_s", 0.7, 0.1), ("energy_j", 18.5, 3.0)] {
        let f = &s[figure];
        assert_close(num(&f["mean"]), mean, figure);
        assert_close(num(&f["stddev"]), sd, figure);
        assert_close(num(&f["median"]), mean, figure);
        assert_close(num(&f["min"]), mean - sd, figure);
        assert_close(num(&f["max"]), mean + sd, figure);
        assert_close_pair(
            &f["ci95"],
            log_interval(mean, t2 * sd / 3f64.sqrt()),
            figure,
        );
    }
    assert_close(num(&s["cpu_s"]["mean"]), 0.6, "cpu_s");
    let powers = [15.5 / 0.6, 18.5 / 0.7, 21.5 / 0.8];
    assert_close(
        num(&s["power_w"]["mean"]),
        powers.iter().sum::<f64>() / 3.0,
        "power",
    );
    let edps = [15.5 * 0.6, 18.5 * 0.7, 21.5 * 0.8];
    assert_close(
        num(&s["edp_js"]["mean"]),
        edps.iter().sum::<f64>() / 3.0,
        "edp",
    );
    assert_close(num(&s["domains"]["mock/spin"]["mean"]), 18.0, "mock/spin");
    assert_eq!(v["complete"], true);
    assert_eq!(v["stopped_early"], serde_json::Value::Null);
    // It says it is mocked wherever it goes: provenance, warnings, stderr, the text view.
    assert_eq!(v["provenance"]["kind"], "mocked");
    assert_eq!(
        v["provenance"]["source"],
        "mock executor: every run scripted, nothing measured"
    );
    assert_eq!(v["warnings"], serde_json::json!([MOCKED_VERDICT.trim()]));
    assert!(
        stderr(&out).contains("energy: MOCKED by the mock executor"),
        "{}",
        stderr(&out)
    );
    let saved = env.saved();
    assert_eq!(saved.as_array().unwrap().len(), 1);
    assert_eq!(saved[0]["runs"], 3);
    let text = env.run(&["runs", "show", "1"]);
    assert!(String::from_utf8_lossy(&text.stdout).contains(MOCKED));
}

/// Without a meter the energy is the power model's, and every output says so. (How the
/// model's figures follow its parameters: `an_estimate_names_the_machine_class…`.)
#[test]
fn without_a_meter_the_energy_is_an_estimate_and_says_so() {
    let env = Env::new();
    let out = env.run(&["run", "--runs", "2", "--json", "--", "true"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json(&out);
    for r in v["runs"].as_array().unwrap() {
        let energy = num(&r["energy_j"]);
        assert!(
            energy > 0.0,
            "the model's idle power over the run: {energy}"
        );
        assert_eq!(num(&r["domains"]["system"]), energy);
        assert_eq!(
            r["provenance"]["kind"], "estimated",
            "no meter in an empty sysfs"
        );
    }
    assert!(v["summary"]["energy_j"]["ci95"].is_array());
    assert!(stderr(&out).contains("ESTIMATED"), "{}", stderr(&out));
}

/// An idle baseline before and after the runs, a drift between them, and a run below it,
/// by hand: the machine idles at 5 W, then at 4 W from the fourth run on.
#[test]
fn baseline_subtraction_drift_and_a_run_below_it_by_hand() {
    let env = Env::new();
    let v = env.mock(
        "idle 5W",
        &[
            "--runs",
            "4",
            "--baseline",
            "2",
            "--",
            "sh",
            "-c",
            "idle 5W,5W,5W,4W; spin 0.5,0.6,0.7,0 30W; sleep 0,0,0,1",
        ],
    );
    // Before: 2 s at 5 W. After: 2 s at 4 W. The runs are charged the mean, 4.5 W.
    let b = &v["baseline"];
    assert_close(num(&b["seconds"]), 2.0, "seconds");
    assert_close(num(&b["before_w"]), 5.0, "before");
    assert_close(num(&b["after_w"]), 4.0, "after");
    assert_eq!(b["provenance"]["kind"], "mocked");
    // Runs 1–3: 30 W × 0.5, 0.6, 0.7 s less 4.5 W × the same. Run 4: 4 W × 1 s = 4 J, below
    // 4.5 J of baseline: reported as 0 and flagged.
    let above = [15.0 - 2.25, 18.0 - 2.7, 21.0 - 3.15, 0.0];
    for (i, (r, expected)) in v["runs"].as_array().unwrap().iter().zip(above).enumerate() {
        let what = format!("run {i} above baseline");
        assert_close(num(&r["energy_above_baseline_j"]), expected, &what);
        assert_eq!(r["below_baseline"], i == 3, "run {i}");
    }
    assert_close(num(&v["runs"][3]["energy_j"]), 4.0, "run 4's energy");
    let mean_above = &v["summary"]["energy_above_baseline_j"]["mean"];
    assert_close(
        num(mean_above),
        above.iter().sum::<f64>() / 4.0,
        "mean above baseline",
    );
    // From 5 to 4 W: −20%, beyond the 5% a baseline may drift.
    let warnings = v["warnings"].to_string();
    assert!(
        warnings.contains("idle baseline drifted by -20.0%"),
        "{warnings}"
    );
    assert!(
        warnings.contains("1 run(s) measured at or below the idle baseline"),
        "{warnings}"
    );
}

/// One run far from the others is named, by the modified z-score of its wall time and of
/// its energy.
#[test]
fn an_outlier_run_is_named_by_hand() {
    let env = Env::new();
    let v = env.mock(
        "idle 10W",
        &["--runs", "6", "--", "sleep", "1,1.02,0.99,1.01,1,1.4"],
    );
    // Sorted 0.99, 1, 1, 1.01, 1.02, 1.4: median 1.005; deviations from it 0.005, 0.015,
    // 0.015, 0.005, 0.005, 0.395, whose median (the MAD) is 0.01. The last run's score is
    // 0.6745 × 0.395 / 0.01 = 26.6 > 3.5; the next largest 0.6745 × 0.015 / 0.01 = 1.01.
    // Energy is 10 W × the same times: the same scores.
    let s = &v["summary"]["wall_s"];
    assert_close(num(&s["median"]), 1.005, "median");
    assert_close(num(&s["mean"]), 6.42 / 6.0, "mean");
    let warnings = v["warnings"].as_array().unwrap();
    for what in ["wall time", "energy"] {
        let expected = format!("statistical outliers in {what} (modified z-score > 3.5): run #6;");
        assert!(
            warnings
                .iter()
                .any(|w| w.as_str().unwrap().starts_with(&expected)),
            "{expected} in {warnings:?}"
        );
    }
}

/// A failing run ends the series and keeps the runs before it; with --ignore-failure it is
/// measured, with its exit status.
#[test]
fn a_failing_run_ends_the_series_and_ignore_failure_measures_it() {
    let command = ["--runs", "3", "--", "sh", "-c", "sleep 0.2; exit 0,0,3"];
    let env = Env::new();
    let flag = "--mock-executor=idle 10W";
    let out = env.run(&[&["run", flag, "--json"], &command[..]].concat());
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["runs"].as_array().unwrap().len(), 2);
    assert_eq!(v["complete"], false);
    assert_eq!(
        v["stopped_early"],
        "run 3: the command failed (exit code 3); use --ignore-failure to measure it anyway, --show-output to see its output"
    );
    assert_close(num(&v["summary"]["energy_j"]["mean"]), 2.0, "10 W × 0.2 s");
    assert_eq!(env.saved()[0]["runs"], 2);

    let v = Env::new().mock("idle 10W", &[&["--ignore-failure"], &command[..]].concat());
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    assert_eq!(runs[2]["exit"]["code"], 3);
    assert_close(num(&runs[2]["energy_j"]), 2.0, "the failed run's energy");
    assert_eq!(v["complete"], true);
}

/// The one live run: a real `sleep` on this machine's scheduler, its wall and CPU time
/// (`cargo test -- --ignored live_`).
#[test]
#[ignore = "live: a real process timed by the kernel's clock"]
fn live_run_times_a_real_sleep() {
    let env = Env::new();
    let out = env.run(&["run", "--runs", "5", "--json", "--", "sleep", "0.2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json(&out);
    let figure = |f: &str| -> Vec<f64> {
        v["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| num(&r[f]))
            .collect()
    };
    let (walls, cpus) = (figure("wall_s"), figure("cpu_s"));
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let figures = format!("wall {walls:?} s, CPU {cpus:?} s");
    // A sleep never ends early; its start-up takes milliseconds, so half the runs end within
    // 0.3 s of it even on a loaded machine, and it uses almost no CPU.
    assert!(walls.iter().all(|w| *w >= 0.2), "{figures}");
    assert!(median(&walls) < 0.5, "median wall: {figures}");
    assert!(median(&cpus) < 0.05, "median CPU: {figures}");
}
#[test]
fn exports_and_show() {
    let env = Env::new();
    let (j, c, m) = (env.path("r.json"), env.path("r.csv"), env.path("r.md"));
    let out = env.run(&[
        "run",
        "--runs",
        "2",
        "--label",
        "first",
        "--export-json",
        j.to_str().unwrap(),
        "--export-csv",
        c.to_str().unwrap(),
        "--export-markdown",
        m.to_str().unwrap(),
        "--",
        "true",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("energy") && text.contains("estimated"),
        "{text}"
    );
    let exported: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&j).unwrap()).unwrap();
    assert_eq!(exported["runs"].as_array().unwrap().len(), 2);
    assert_eq!(std::fs::read_to_string(&c).unwrap().lines().count(), 3);
    assert!(std::fs::read_to_string(&m).unwrap().contains("| energy |"));

    let show = env.run(&["runs", "show", "1", "--json"]);
    assert_eq!(
        json(&show),
        exported,
        "the database keeps the exact document"
    );
    let show_text = env.run(&["runs", "show", "1"]);
    assert!(String::from_utf8_lossy(&show_text.stdout).contains("result 1 (first)"));
    let missing = env.run(&["runs", "show", "42"]);
    assert!(!missing.status.success());
    assert!(
        stderr(&missing).contains("no result with id 42"),
        "{}",
        stderr(&missing)
    );
}

/// Over a fixed window the energy covers the idle tail after the command, by hand: at 5 W
/// idle, 30 W × 0.1 s + 5 W × 0.4 s = 5 J, then 30 W × 0.2 s + 5 W × 0.3 s = 7.5 J.
#[test]
fn fixed_window_covers_the_idle_tail() {
    let env = Env::new();
    let v = env.mock(
        "idle 5W",
        &[
            "--runs", "2", "--window", "0.5s", "--", "spin", "0.1,0.2", "30W",
        ],
    );
    assert_close(num(&v["window_s"]), 0.5, "window");
    for (i, (r, (wall, energy))) in v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .zip([(0.1, 5.0), (0.2, 7.5)])
        .enumerate()
    {
        assert_close(num(&r["wall_s"]), wall, &format!("run {i} wall"));
        assert_close(num(&r["energy_j"]), energy, &format!("run {i} energy"));
        // Power is over the window, not the wall time.
        assert_close(num(&r["power_w"]), energy / 0.5, &format!("run {i} power"));
        assert_close(num(&r["edp_js"]), energy * wall, &format!("run {i} edp"));
    }

    // A run longer than the window ends the series, saying by how much.
    let too_long = env.run(&[
        "run",
        "--mock-executor",
        "--runs",
        "1",
        "--window",
        "0.1s",
        "--",
        "sleep",
        "0.3",
    ]);
    assert!(!too_long.status.success());
    let text = String::from_utf8_lossy(&too_long.stdout);
    assert!(
        text.contains("run 1: the command ran 0.300 s, longer than the --window of 0.100 s"),
        "{text}"
    );
}

/// The power model over a window charges its idle power over the whole window.
#[test]
fn the_models_window_charges_idle_power_over_it() {
    let env = Env::new();
    let out = env.run(&[
        "run", "--runs", "1", "--window", "0.5s", "--json", "--", "sleep", "0.1",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json(&out);
    let r = &v["runs"][0];
    // The model charges idle power over the whole window: energy / window = power.
    let power = r["power_w"].as_f64().unwrap();
    assert!((r["energy_j"].as_f64().unwrap() / 0.5 - power).abs() < 1e-9);
    // The model `info` shows for the same roots: its idle power over the whole window,
    // plus the little CPU a sleep takes (under 5% of a CPU).
    let model = json(&env.run(&["info", "--json"]))["power_model"].clone();
    let (idle_w, busy_w) = (
        model["idle_w"].as_f64().unwrap(),
        model["busy_cpu_w"].as_f64().unwrap(),
    );
    assert!(
        power >= idle_w && power <= idle_w + 0.05 * busy_w / 0.5,
        "idle power of the default model ({model}) over the window: {power}"
    );
    assert_eq!(r["provenance"]["model"], model["name"]);
}
#[test]
fn bad_input_names_the_problem() {
    let env = Env::new();
    let unknown = env.run(&["run", "--frobnicate", "--", "true"]);
    assert!(!unknown.status.success());
    assert!(
        stderr(&unknown).contains("--frobnicate"),
        "{}",
        stderr(&unknown)
    );

    let none = env.run(&["run"]);
    assert!(!none.status.success());
    assert!(stderr(&none).contains("CMD"), "{}", stderr(&none));

    let not_found = env.run(&["run", "--", "no-such-command-powerlens-test"]);
    assert!(!not_found.status.success());
    assert!(
        stderr(&not_found).contains("command not found"),
        "{}",
        stderr(&not_found)
    );

    let zero = env.run(&["run", "--runs", "0", "--", "true"]);
    assert!(!zero.status.success());
    assert!(stderr(&zero).contains("--runs"), "{}", stderr(&zero));

    let bad_root = env
        .cmd()
        .env("POWERLENS_SYSFS_ROOT", "/nonexistent/sys")
        .args(["run", "--", "true"])
        .output()
        .unwrap();
    assert!(!bad_root.status.success());
    assert!(
        stderr(&bad_root).contains("/nonexistent/sys"),
        "{}",
        stderr(&bad_root)
    );

    let bad_model = env.path("model.json");
    std::fs::write(&bad_model, "{not json").unwrap();
    let out = env.run(&[
        "run",
        "--power-model",
        bad_model.to_str().unwrap(),
        "--",
        "true",
    ]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("model.json"), "{}", stderr(&out));
}

#[test]
fn killed_command_stops_the_series_and_keeps_finished_runs() {
    let env = Env::new();
    // The first run leaves a marker; the second kills itself with SIGKILL.
    let script = "if [ -f marker ]; then kill -9 $$; fi; touch marker";
    let out = env.run(&["run", "--runs", "3", "--json", "--", "sh", "-c", script]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["runs"].as_array().unwrap().len(), 1);
    assert_eq!(v["complete"], false);
    let why = v["stopped_early"].as_str().unwrap();
    assert!(
        why.contains("run 2") && why.contains("killed by signal 9"),
        "{why}"
    );
    let saved = env.saved();
    assert_eq!(saved[0]["runs"], 1);
    assert_eq!(saved[0]["complete"], false);

    // With --ignore-failure the failing runs are measured and their status recorded.
    let out = env.run(&[
        "run",
        "--runs",
        "2",
        "--ignore-failure",
        "--json",
        "--",
        "sh",
        "-c",
        "exit 3",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(json(&out)["runs"][1]["exit"]["code"], 3);
}

/// `powerlens run ARGS` started in the background, its output captured, to be signalled.
fn spawn_run(env: &Env, args: &[&str]) -> std::process::Child {
    env.cmd()
        .arg("run")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until `ready()` (something the measured command did), however long a loaded
/// machine takes: the test waits for an event, not for a time. Panics after 120 s, a hang.
fn wait_for(what: &str, ready: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while !ready() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: never happened"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn ctrl_c_prints_and_saves_finished_runs() {
    let env = Env::new();
    // Each run appends a line first: the fourth line means three runs have finished.
    let log = env.path("runs.log");
    let child = spawn_run(
        &env,
        &[
            "--runs",
            "1000",
            "--json",
            "--",
            "sh",
            "-c",
            "echo run >> runs.log; sleep 0.1",
        ],
    );
    wait_for("a fourth run", || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.lines().count() >= 4)
    });
    // SAFETY: signalling our own child.
    unsafe { libc_kill(child.id() as i32, 2) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    let v = json(&out);
    let n = v["runs"].as_array().unwrap().len();
    assert!((3..1000).contains(&n), "{n} runs finished before Ctrl-C");
    assert!(v["stopped_early"].as_str().unwrap().contains("interrupted"));
    assert_eq!(env.saved()[0]["runs"].as_u64().unwrap() as usize, n);
}

/// A SIGINT sent to powerlens alone (not to the terminal's process group) reaches the
/// measured command too, and the series stops as on Ctrl-C. The command says it got the
/// signal: without it, it would sleep its 30 s and leave no mark.
#[test]
fn an_interrupt_sent_to_powerlens_alone_reaches_the_command() {
    let env = Env::new();
    let script = "trap 'touch got-int; kill $!; exit 130' INT; touch started; sleep 30 & wait";
    let child = spawn_run(&env, &["--runs", "3", "--json", "--", "sh", "-c", script]);
    wait_for("the command's start", || env.path("started").exists());
    // SAFETY: signalling our own child.
    unsafe { libc_kill(child.id() as i32, 2) };
    let out = child.wait_with_output().unwrap();
    assert!(env.path("got-int").exists(), "the command got no SIGINT");
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(json(&out)["stopped_early"]
        .as_str()
        .unwrap()
        .contains("interrupted"));
}

#[test]
fn corrupt_database_is_refused_and_untouched() {
    let env = Env::new();
    let precious = b"not a database at all\n".repeat(64);
    std::fs::write(env.db(), &precious).unwrap();
    let out = env.run(&["run", "--runs", "1", "--", "true"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("not a powerlens results database") && err.contains("--db"),
        "{err}"
    );
    assert_eq!(std::fs::read(env.db()).unwrap(), precious);
    // --no-save measures without touching it.
    let out = env.run(&["run", "--runs", "1", "--no-save", "--", "true"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn results_are_queryable_with_sqlite3() {
    let env = Env::new();
    assert!(env
        .run(&["run", "--runs", "2", "--", "true"])
        .status
        .success());
    let Ok(out) = Command::new("sqlite3")
        .arg(env.db())
        .arg("SELECT count(*), min(energy_j) > 0 FROM runs;")
        .output()
    else {
        eprintln!("SKIP: sqlite3 is not installed (scripts/test.sh installs it)");
        return;
    };
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "2|1");
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

/// Issue 17 (10): `runs list` says when each result was made (UTC), the day `date -u`
/// gives.
#[test]
fn runs_list_has_a_date_column() {
    let env = Env::new();
    let out = env.run(&["run", "--runs", "1", "--", "true"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let today = Command::new("date")
        .args(["-u", "+%Y-%m-%d"])
        .output()
        .unwrap();
    let today = String::from_utf8_lossy(&today.stdout).trim().to_string();
    let list = env.run(&["runs", "list"]);
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(
        text.lines().next().unwrap().contains("date (UTC)"),
        "{text}"
    );
    assert!(text.contains(&today), "no {today} in:\n{text}");
}

/// Eight `run`s at once, twenty each, into one results database: all 160 results are kept,
/// and the database still checks out (SQLite's own integrity check). Runs queue on the
/// database (WAL, a busy timeout, immediate transactions) instead of failing with
/// "database is locked".
#[test]
fn concurrent_runs_lose_no_result() {
    let env = Env::new();
    std::thread::scope(|scope| {
        for w in 0..8 {
            let env = &env;
            scope.spawn(move || {
                let label = format!("writer{w}");
                for i in 0..20 {
                    let o = env.run(&["run", "--runs", "1", "--label", &label, "--", "true"]);
                    assert!(o.status.success(), "{label}, run {i}: {}", stderr(&o));
                }
            });
        }
    });
    let db = rusqlite::Connection::open(env.db()).unwrap();
    let count = |sql: &str| -> i64 { db.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(count("SELECT count(*) FROM results"), 160);
    assert_eq!(count("SELECT count(*) FROM runs"), 160);
    assert_eq!(
        count(
            "SELECT count(*) FROM (SELECT label FROM results GROUP BY label HAVING count(*) = 20)"
        ),
        8
    );
    let check: String = db
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
}

/// Issue 17, point 1: `run` on a machine without a meter estimates with the model of its
/// class and says which and why, in JSON (provenance with the class and reason) and on
/// stderr. The fixture procfs is a 128-thread EPYC; the oracle is the model's formula by
/// hand from the run's own interval and CPU time: 0.74 W × 128 × interval + (3.5 − 0.74) W × CPU.
#[test]
fn an_estimate_names_the_machine_class_and_follows_its_parameters() {
    let env = Env::new();
    let proc = env.path("proc");
    std::fs::create_dir(&proc).unwrap();
    let cpuinfo: Vec<String> = (0..128)
        .map(|n| format!("processor\t: {n}\nmodel name\t: AMD EPYC 7B13 64-Core Processor\nflags\t\t: fpu sse\n"))
        .collect();
    std::fs::write(proc.join("cpuinfo"), cpuinfo.join("\n")).unwrap();
    std::fs::write(proc.join("stat"), "cpu  100 0 100 1000 0 0 0 0 0 0\n").unwrap();
    let html = env.path("run.html");
    let out = env
        .cmd()
        .env("POWERLENS_PROCFS_ROOT", &proc)
        .args([
            "run",
            "--runs",
            "2",
            "--json",
            "--html",
            html.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; sleep 0.1",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json(&out);
    let p = &v["provenance"];
    assert_eq!(p["kind"], "estimated");
    assert_eq!(p["model"], "server-vcpu-linear");
    assert_eq!(p["machine_class"], "server");
    assert_eq!(
        p["machine_class_reason"],
        "AMD EPYC 7B13 64-Core Processor is a server part (EPYC)"
    );
    for r in v["runs"].as_array().unwrap() {
        // The model charges the interval between the meter's readings (energy / power),
        // which holds the command's wall time and the moments around its start and end:
        // by hand over that interval, so that no scheduling delay is in the oracle.
        let (energy, cpu) = (num(&r["energy_j"]), num(&r["cpu_s"]));
        let interval = energy / num(&r["power_w"]);
        assert!(interval >= num(&r["wall_s"]), "{r}");
        let expected = 0.74 * 128.0 * interval + (3.5 - 0.74) * cpu;
        assert_close(
            energy,
            expected,
            &format!("energy over {interval} s with {cpu} s of CPU"),
        );
    }
    let err = stderr(&out);
    assert!(
        err.contains("ESTIMATED by the power model server-vcpu-linear (94.72 W idle + 2.76 W per busy CPU of the command; chosen because AMD EPYC 7B13 64-Core Processor is a server part (EPYC))"),
        "{err}"
    );
    // The page says it too, as Chromium renders it.
    let why = "ESTIMATED: server-vcpu-linear is the power model for a server machine, chosen because AMD EPYC 7B13 64-Core Processor is a server part (EPYC).";
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains(&format!("<p class=\"note\">{why}</p>")),
        "{page}"
    );
    if let Some(dom) = common::chromium(&["--dump-dom", &format!("file://{}", html.display())]) {
        assert!(dom.status.success(), "{}", stderr(&dom));
        assert!(String::from_utf8_lossy(&dom.stdout).contains(why));
    }
}

/// Issue 51 point 10: the README tells scripts where `run --json` keeps the energy. Every
/// `.a.b.c` path it names after "scripts read" resolves to a number in a run's JSON (it
/// named `.summary.energy_j`, an object).
#[test]
fn the_json_paths_the_readme_names_are_numbers() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let line = readme
        .lines()
        .find(|l| l.contains("run --json") && l.contains("scripts read"))
        .expect("the README's run --json line");
    let paths: Vec<&str> = line
        .split_whitespace()
        .filter(|w| w.starts_with('.'))
        .collect();
    assert!(!paths.is_empty(), "{line}");
    let env = Env::new();
    let v = env.mock(
        "idle 5W",
        &["--runs", "3", "--", "sh", "-c", "spin 0.5 30W"],
    );
    for path in paths {
        let value = path[1..].split('.').fold(&v, |at, key| &at[key]);
        assert!(
            value.is_number()
                || value
                    .as_array()
                    .is_some_and(|a| a.iter().all(|x| x.is_number())),
            "{path} in {line}: {value}"
        );
    }
}
