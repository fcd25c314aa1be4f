//! `powerlens run` end to end: the JSON contract, exports, the results database, and bad
//! input (missing commands, failing and killed commands, Ctrl-C, corrupt databases).
//!
//! Every test points the sysfs root at an empty directory, so no meter is found and the
//! power model is used whatever machine runs the tests; measured energy against a fake meter
//! is tested in `run_meter.rs`.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

mod common;
use common::{json, stderr};

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

#[test]
fn json_contract_and_estimate_label() {
    let env = Env::new();
    let out = env.run(&["run", "--runs", "3", "--json", "--", "sleep", "0.1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json(&out);
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    for r in runs {
        let wall = r["wall_s"].as_f64().unwrap();
        assert!((0.1..0.5).contains(&wall), "{wall}");
        assert!(
            r["cpu_s"].as_f64().unwrap() < 0.05,
            "sleep uses almost no CPU"
        );
        let energy = r["energy_j"].as_f64().unwrap();
        assert!(energy > 0.0);
        assert_eq!(r["domains"]["system"].as_f64().unwrap(), energy);
        assert_eq!(
            r["provenance"]["kind"], "estimated",
            "no meter in an empty sysfs"
        );
    }
    assert_eq!(v["summary"]["runs"], 3);
    assert!(v["summary"]["energy_j"]["mean"].as_f64().unwrap() > 0.0);
    assert!(v["summary"]["energy_j"]["ci95"].is_array());
    assert!(stderr(&out).contains("ESTIMATED"), "{}", stderr(&out));
    let saved = env.saved();
    assert_eq!(saved.as_array().unwrap().len(), 1);
    assert_eq!(saved[0]["runs"], 3);
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

#[test]
fn fixed_window_covers_the_idle_tail() {
    let env = Env::new();
    let out = env.run(&[
        "run", "--runs", "1", "--window", "0.5s", "--json", "--", "sleep", "0.1",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json(&out);
    let r = &v["runs"][0];
    assert!(r["wall_s"].as_f64().unwrap() < 0.3);
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

    let too_long = env.run(&[
        "run", "--runs", "1", "--window", "0.1s", "--", "sleep", "0.3",
    ]);
    assert!(!too_long.status.success());
    let text = String::from_utf8_lossy(&too_long.stdout);
    assert!(text.contains("longer than the --window"), "{text}");
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

#[test]
fn ctrl_c_prints_and_saves_finished_runs() {
    let env = Env::new();
    let child = spawn_run(&env, &["--runs", "1000", "--json", "--", "sleep", "0.1"]);
    std::thread::sleep(Duration::from_millis(1200));
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
/// measured command too: a 30 s sleep ends at once, and the series stops as on Ctrl-C.
#[test]
fn an_interrupt_sent_to_powerlens_alone_reaches_the_command() {
    let env = Env::new();
    let child = spawn_run(&env, &["--runs", "3", "--json", "--", "sleep", "30"]);
    std::thread::sleep(Duration::from_millis(1000));
    let started = std::time::Instant::now();
    // SAFETY: signalling our own child.
    unsafe { libc_kill(child.id() as i32, 2) };
    let out = child.wait_with_output().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the sleep was not interrupted"
    );
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
/// hand from the run's own wall and CPU times: 0.74 W × 128 × wall + (3.5 − 0.74) W × CPU.
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
        let (wall, cpu) = (r["wall_s"].as_f64().unwrap(), r["cpu_s"].as_f64().unwrap());
        let expected = 0.74 * 128.0 * wall + (3.5 - 0.74) * cpu;
        let energy = r["energy_j"].as_f64().unwrap();
        assert!(
            (energy - expected).abs() <= 0.02 * expected,
            "{energy} J vs {expected} J by hand (wall {wall} s, cpu {cpu} s)"
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
