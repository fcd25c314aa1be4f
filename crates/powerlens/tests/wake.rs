//! `powerlens wake` end to end: bad input against fixture trees (clear error, nothing
//! changed), idle-state selection and restore with a fixture cpuidle tree and the real
//! tracepoints, Ctrl-C, and UserLatency against cyclictest on the live kernel.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use powerlens_sys::fixture::{FixtureTree, IdleStateSpec};

use common::is_root;

/// A KVM guest's cpuidle as other boots of this project's VMs have it: two CPUs, the
/// haltpoll driver, POLL (0 µs) and haltpoll idle (1 µs).
fn haltpoll_tree() -> FixtureTree {
    let tree = FixtureTree::new();
    tree.online_cpus("0-1");
    tree.cpuidle_driver("haltpoll", "haltpoll");
    for cpu in 0..2 {
        for (k, (name, latency)) in [("POLL", 0), ("haltpoll idle", 1)].into_iter().enumerate() {
            let spec = IdleStateSpec {
                name: name.into(),
                latency_us: latency,
                ..IdleStateSpec::default()
            };
            tree.cpuidle_state(cpu, k as u32, &spec);
        }
    }
    tree
}

/// This VM's boot: CPUs but no cpuidle driver.
fn no_driver_tree() -> FixtureTree {
    let tree = FixtureTree::new();
    tree.online_cpus("0-1");
    tree.cpuidle_driver("none", "menu");
    for cpu in 0..2 {
        tree.cpu_topology(cpu, 0, cpu);
    }
    tree
}

/// Every file below the tree's sysfs, byte for byte: the oracle of "nothing changed".
fn snapshot(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(dir: &Path, files: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                walk(&path, files);
            } else if kind.is_file() {
                files.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    let mut files = BTreeMap::new();
    walk(root, &mut files);
    files
}

struct Setup {
    tree: FixtureTree,
    scratch: tempfile::TempDir,
}

impl Setup {
    fn new(tree: FixtureTree) -> Self {
        Setup {
            tree,
            scratch: tempfile::tempdir().unwrap(),
        }
    }

    fn journal(&self) -> PathBuf {
        self.scratch.path().join("journal.json")
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = common::command(&self.tree.sys_path(""), &self.scratch.path().join("db"));
        c.env("POWERLENS_SETTINGS_JOURNAL", self.journal())
            .arg("wake")
            .args(args);
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// Runs, expects failure with every one of `expected` in the error, and checks that
    /// the fixture tree is exactly as before.
    fn fails(&self, args: &[&str], expected: &[&str]) {
        let before = snapshot(&self.tree.sys_path(""));
        let o = self.run(args);
        let err = common::stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        for e in expected {
            assert!(err.contains(e), "{args:?}: expected `{e}` in: {err}");
        }
        assert!(
            o.stdout.is_empty(),
            "{}",
            String::from_utf8_lossy(&o.stdout)
        );
        assert_eq!(
            snapshot(&self.tree.sys_path("")),
            before,
            "{args:?} changed the tree"
        );
        assert!(!self.journal().exists(), "{args:?} left a journal");
    }
}

#[test]
fn nonexistent_and_offline_cpus() {
    let s = Setup::new(haltpoll_tree());
    s.fails(&["--cpu", "7"], &["no cpu7", "online CPUs: 0, 1"]);
    s.tree.online_cpus("0");
    s.fails(
        &["--cpu", "1"],
        &["cpu1 is offline", "online CPUs: 0", "fix:"],
    );
}

#[test]
fn unknown_state_names_the_available_ones() {
    let s = Setup::new(haltpoll_tree());
    s.fails(
        &["--cpu", "1", "--cstates", "POLL,C6"],
        &["no idle state named `C6`", "available: POLL, haltpoll idle"],
    );
}

#[test]
fn no_cpuidle_driver_has_nothing_to_select() {
    let s = Setup::new(no_driver_tree());
    s.fails(
        &["--cpu", "1", "--cstates", "POLL"],
        &[
            "no cpuidle states to select",
            "available: none",
            "intel_idle",
        ],
    );
}

/// A `disable` file the kernel will not let anyone write (here a read-only sysfs
/// attribute, which refuses even root): refused before any state changes.
#[test]
fn a_state_that_cannot_be_disabled() {
    if !is_root() {
        powerlens_sys::skip_test!("the check under test runs after the root check");
        return;
    }
    let readonly = Path::new("/sys/devices/system/cpu/cpu0/topology/core_id");
    if std::fs::OpenOptions::new()
        .write(true)
        .open(readonly)
        .is_ok()
    {
        powerlens_sys::skip_test!("{} is writable here", readonly.display());
        return;
    }
    let s = Setup::new(haltpoll_tree());
    let disable = s
        .tree
        .sys_path("devices/system/cpu/cpu1/cpuidle/state1/disable");
    std::fs::remove_file(&disable).unwrap();
    std::os::unix::fs::symlink(readonly, &disable).unwrap();
    s.fails(
        &["--cpu", "1", "--cstates", "all"],
        &["cannot select idle state `POLL`", "not writable"],
    );
}

#[test]
fn bad_ldist_and_output() {
    let s = Setup::new(haltpoll_tree());
    s.fails(&["--ldist", "8ms,1ms"], &["MIN is above MAX"]);
    s.fails(&["--ldist", "8"], &["MIN,MAX"]);
    let out = s.scratch.path().join("busy");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("unrelated.txt"), "x").unwrap();
    if is_root() {
        s.fails(
            &["--cpu", "1", "-o", out.to_str().unwrap()],
            &["holds other files"],
        );
    }
}

#[test]
fn not_root_is_refused_with_the_fix() {
    if !is_root() {
        // Then this is the test: the caller is not root.
        let s = Setup::new(haltpoll_tree());
        s.fails(&["--cpu", "1"], &["needs root", "sudo"]);
        return;
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        powerlens_sys::skip_test!("no setpriv to drop root");
        return;
    }
    let s = Setup::new(haltpoll_tree());
    // The unprivileged user must reach the fixture tree.
    use std::os::unix::fs::PermissionsExt;
    for dir in [s.tree.sys_path(""), s.scratch.path().to_path_buf()] {
        let mut d = dir.as_path();
        while let Some(parent) = d.parent() {
            if d.starts_with(std::env::temp_dir()) && d != std::env::temp_dir() {
                let _ = std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755));
            }
            d = parent;
        }
    }
    let before = snapshot(&s.tree.sys_path(""));
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_powerlens"))
        .args(["wake", "--cpu", "1", "--cstates", "all"])
        .env("POWERLENS_SYSFS_ROOT", s.tree.sys_path(""))
        .env("POWERLENS_SETTINGS_JOURNAL", s.journal())
        .output()
        .unwrap();
    let err = common::stderr(&o);
    if err.contains("Permission denied") && !err.contains("needs root") {
        powerlens_sys::skip_test!("the unprivileged user cannot reach the test files: {err}");
        return;
    }
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("needs root") && err.contains("sudo"), "{err}");
    assert_eq!(snapshot(&s.tree.sys_path("")), before);
}

// ---- live: the real kernel's tracepoints ------------------------------------------

const TRACEFS: &str = "/sys/kernel/tracing";

/// `command` with tracefs reachable: directly when the host has it mounted, else in a
/// private mount namespace that mounts it (the host's mounts stay as they are).
fn with_tracefs(command: Command) -> Command {
    if Path::new(TRACEFS).join("events").is_dir() {
        return command;
    }
    let mut wrapped = Command::new("unshare");
    wrapped
        .args(["-m", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "mount -t tracefs nodev {TRACEFS} || exit 77; exec \"$0\" \"$@\""
        ))
        .arg(command.get_program())
        .args(command.get_args());
    for (k, v) in command.get_envs() {
        match v {
            Some(v) => wrapped.env(k, v),
            None => wrapped.env_remove(k),
        };
    }
    wrapped
}

/// `powerlens wake` on this machine's sysfs, its settings journal in `scratch`.
fn live_wake(scratch: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_powerlens"));
    c.arg("wake")
        .env_remove("POWERLENS_SYSFS_ROOT")
        .env("POWERLENS_SETTINGS_JOURNAL", scratch.join("journal.json"));
    c
}

/// The serial lock (and watchdog) of a live test, or `None`, said why, where it cannot run
/// here. One live measurement at a time: each sets cpuidle states and PM QoS for its run,
/// which a measurement beside it would take for its own (a default-CPU run beside another
/// kept none of its 19 datapoints in CI).
fn live_measurement() -> Option<common::Serial> {
    if let Some(why) = live_skip() {
        powerlens_sys::skip_test!("{why}");
        return None;
    }
    Some(common::serial())
}

/// Why a live test cannot run here, if it cannot.
fn live_skip() -> Option<&'static str> {
    if !is_root() {
        return Some("not root (wake needs perf tracepoints, SCHED_FIFO and cpuidle writes)");
    }
    if !Path::new("/sys/devices/system/cpu/online").exists() {
        return Some("no sysfs");
    }
    None
}

/// The fixture's sysfs sees the real tracefs (the tracepoints are the kernel's; the
/// idle states written are the fixture's).
fn link_tracefs(tree: &FixtureTree) {
    let kernel = tree.sys_path("kernel");
    std::fs::create_dir_all(&kernel).unwrap();
    std::os::unix::fs::symlink(TRACEFS, kernel.join("tracing")).unwrap();
}

fn real_online_matches(tree_online: &str) -> bool {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .map(|s| s.trim() == tree_online)
        .unwrap_or(false)
}

/// `--cstates all` walks POLL then haltpoll idle, each with only itself enabled, then puts
/// every `disable` back byte for byte and removes the journal; the result directory
/// holds every measurement and `wake report` draws it.
#[test]
#[ignore = "live: wake latency on the real CPUs (root)"]
fn live_cstates_all_selects_each_state_and_restores() {
    let Some(_serial) = live_measurement() else {
        return;
    };
    if !real_online_matches("0-1") {
        powerlens_sys::skip_test!("the fixture models two online CPUs (0-1), this machine differs");
        return;
    }
    let s = Setup::new(haltpoll_tree());
    link_tracefs(&s.tree);
    let before = snapshot(&s.tree.sys_path("devices"));
    let out = s.scratch.path().join("result");
    let o = with_tracefs(s.command(&[
        "--cpu",
        "1",
        "--cstates",
        "all",
        "--datapoints",
        "60",
        "--json",
        "-o",
        out.to_str().unwrap(),
    ]))
    .output()
    .unwrap();
    if o.status.code() == Some(77) {
        powerlens_sys::skip_test!("cannot mount tracefs: {}", common::stderr(&o));
        return;
    }
    let json = common::json(&o);
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert_eq!(
        snapshot(&s.tree.sys_path("devices")),
        before,
        "not restored"
    );
    assert!(!s.journal().exists(), "journal left behind");
    let states = json["states"].as_array().unwrap();
    let names: Vec<&str> = states.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["POLL", "haltpoll idle"], "{json}");
    assert_eq!(states[0]["declared_latency_us"], 0);
    assert_eq!(states[1]["declared_latency_us"], 1);
    for state in states {
        let kept = state["count"].as_u64().unwrap();
        let dropped = state["dropped"].as_u64().unwrap();
        assert_eq!(kept + dropped, 60, "{state}");
        let user = &state["user_latency_ns"];
        assert_eq!(user["kind"], "measured", "{state}");
        for key in ["min", "median", "mean", "std", "p99", "p99_9", "max"] {
            assert!(user[key].as_f64().is_some(), "{key} in {user}");
        }
        // Ordered statistics, and a latency above the tool's own floor of ~ns.
        let (min, median, max) = (
            user["min"].as_f64().unwrap(),
            user["median"].as_f64().unwrap(),
            user["max"].as_f64().unwrap(),
        );
        assert!(0.0 < min && min <= median && median <= max, "{user}");
        for key in ["wake_latency_ns", "intr_latency_ns", "silent_time_ns"] {
            let kind = state[key]["kind"].as_str().unwrap();
            assert!(kind == "measured" || kind == "unavailable", "{key}");
            if kind == "unavailable" {
                assert!(state[key]["reason"].as_str().unwrap().contains("cpu1"));
            }
        }
    }
    let overhead = &json["self_overhead"];
    assert!(overhead["timestamp_ns"]["median"].as_f64().unwrap() > 0.0);
    let csv = std::fs::read_to_string(out.join("datapoints.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 120);
    let info: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("info.json")).unwrap()).unwrap();
    assert_eq!(info, json);

    let plots = s.scratch.path().join("plots");
    let o = s
        .command(&[
            "report",
            out.to_str().unwrap(),
            "--out",
            plots.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(
        table.contains("haltpoll idle") && table.contains("result"),
        "{table}"
    );
    for svg in ["latency-scatter.svg", "latency-histogram.svg"] {
        let text = std::fs::read_to_string(plots.join(svg)).unwrap();
        assert!(
            text.starts_with("<svg") && text.contains("<circle"),
            "{svg}"
        );
    }
}

/// Ctrl-C stops the series cleanly: exit 130, the datapoints so far reported, the idle
/// states restored.
#[test]
#[ignore = "live: wake latency on the real CPUs (root)"]
fn live_ctrl_c_keeps_datapoints_and_restores() {
    let Some(_serial) = live_measurement() else {
        return;
    };
    if !real_online_matches("0-1") {
        powerlens_sys::skip_test!("the fixture models two online CPUs (0-1), this machine differs");
        return;
    }
    let s = Setup::new(haltpoll_tree());
    link_tracefs(&s.tree);
    let before = snapshot(&s.tree.sys_path("devices"));
    let child = with_tracefs(s.command(&[
        "--cpu",
        "1",
        "--cstates",
        "haltpoll idle",
        "--duration",
        "30s",
        "--json",
    ]))
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // While it measures, only haltpoll idle is enabled on the fixture's CPUs.
    let poll = s
        .tree
        .sys_path("devices/system/cpu/cpu1/cpuidle/state0/disable");
    let mut applied = false;
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(50));
        if std::fs::read_to_string(&poll).unwrap().trim() == "1" {
            applied = true;
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: kill sends a signal to the child we started, by its pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    if o.status.code() == Some(77) {
        powerlens_sys::skip_test!("cannot mount tracefs: {}", common::stderr(&o));
        return;
    }
    assert!(applied, "POLL was never disabled: {}", common::stderr(&o));
    assert_eq!(o.status.code(), Some(130), "{}", common::stderr(&o));
    let json = common::json(&o);
    assert!(json["stopped_early"]
        .as_str()
        .unwrap()
        .contains("interrupted"));
    let state = &json["states"][0];
    assert_eq!(state["name"], "haltpoll idle");
    assert!(state["count"].as_u64().unwrap() > 50, "{state}");
    assert_eq!(
        snapshot(&s.tree.sys_path("devices")),
        before,
        "not restored"
    );
    assert!(!s.journal().exists());
}

/// The median of a cyclictest histogram (`-h`): bucket b holds latencies in [b, b+1) µs,
/// so the median is taken at the middle of its bucket.
fn histogram_median_us(text: &str) -> Option<f64> {
    let buckets: Vec<(u64, u64)> = text
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
        })
        .collect();
    let total: u64 = buckets.iter().map(|b| b.1).sum();
    let overflows: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("# Histogram Overflows:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let all = total + overflows;
    let mut seen = 0;
    for (bucket, count) in buckets {
        seen += count;
        if all > 0 && seen * 2 >= all {
            return Some(bucket as f64 + 0.5);
        }
    }
    None
}

#[test]
fn cyclictest_histogram_median_by_hand() {
    let text =
        "# Histogram\n000018 000001\n000019 000003\n000020 000001\n# Histogram Overflows: 00000\n";
    assert_eq!(histogram_median_us(text), Some(19.5));
}

/// Issue 17 point 5: without --cpu, wake measures a CPU whose power:cpu_idle records reach
/// perf (on this project's VMs cpu0: cpu1 fires none, and the highest CPU, the old default,
/// gave "wake latency unavailable"), and says which and why. Oracle: `perf stat -A`
/// counting power:cpu_idle per CPU over the same kind of interval.
#[test]
#[ignore = "live: wake latency on the real CPUs (root)"]
fn live_default_cpu_is_one_whose_idle_records_arrive() {
    let Some(_serial) = live_measurement() else {
        return;
    };
    // Its oracle is which CPUs deliver idle records in a short probe: busy CPUs deliver none.
    if !powerlens_sys::fixture::needs_idle_cpus() {
        return;
    }
    let Ok(perf) = Command::new("perf")
        .args([
            "stat",
            "-e",
            "power:cpu_idle",
            "-a",
            "-A",
            "-x",
            ",",
            "sleep",
            "0.3",
        ])
        .output()
    else {
        powerlens_sys::skip_test!("perf is not installed (Debian: linux-perf)");
        return;
    };
    // "CPU0,44,,power:cpu_idle,…": the CPUs perf got records from.
    let delivering: Vec<u64> = String::from_utf8_lossy(&perf.stderr)
        .lines()
        .filter_map(|l| {
            let mut f = l.split(',');
            let cpu = f.next()?.strip_prefix("CPU")?.parse().ok()?;
            let n: u64 = f.next()?.parse().ok()?;
            (n > 0).then_some(cpu)
        })
        .collect();
    let scratch = tempfile::tempdir().unwrap();
    let out = with_tracefs({
        let mut c = live_wake(scratch.path());
        // 1 s: in 0.4 s a CI run measured 6 datapoints and this VM's idle records left
        // none of them kept ("no datapoint kept (6 measured, 6 dropped)").
        c.args(["--duration", "1", "--json"]);
        c
    })
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", common::stderr(&out));
    let run = common::json(&out);
    let cpu = run["cpu"].as_u64().unwrap();
    let note = run["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .find(|n| n.starts_with("--cpu not given"))
        .unwrap_or_else(|| panic!("no note on the CPU chosen: {}", run["notes"]))
        .to_string();
    eprintln!("perf delivered power:cpu_idle on cpus {delivering:?}; {note}");
    assert!(
        note.starts_with(&format!("--cpu not given, measuring cpu{cpu}:")),
        "{note}"
    );
    if delivering.is_empty() {
        assert!(note.contains("WakeLatency will be unavailable"), "{note}");
        return;
    }
    assert!(
        delivering.contains(&cpu),
        "cpu{cpu} is not among {delivering:?}"
    );
    let wake = &run["states"][0]["wake_latency_ns"];
    assert!(
        wake["count"].as_u64().is_some_and(|n| n > 0),
        "the chosen CPU measured no WakeLatency: {wake}"
    );
}

/// The oracle: UserLatency is what cyclictest measures. Same CPU, SCHED_FIFO 95,
/// locked memory, a 1 ms sleep (cyclictest -i 1000; powerlens --ldist 1ms,1ms), both with
/// the system's idle settings (--default-system), nothing traced (powerlens --no-trace:
/// cyclictest traces nothing either), and no other thread of the tool on the measured CPU.
/// The tools alternate, 1 s each, seven rounds; the ratio of the medians of each tool's
/// seven round medians must be within 20% of 1. Not the median of per-round ratios: on
/// this VM one second's median moves by 10–20% from the next, whichever tool measured it,
/// so a pair's ratio is two independent draws' noise (one run's ratios spread 0.98–1.23
/// while each tool's own round medians held steady), and the median of each tool's rounds
/// is the steadier figure of what it measures. A traced run follows for the record: its UserLatency includes the
/// tracepoints on the wake-up path (the run reports that cost as `trace_cost_ns`).
#[test]
#[ignore = "live: wake latency on the real CPUs (root)"]
fn live_user_latency_median_agrees_with_cyclictest() {
    let Some(_serial) = live_measurement() else {
        return;
    };
    if Command::new("cyclictest").arg("--help").output().is_err() {
        powerlens_sys::skip_test!("cyclictest (Debian rt-tests) is not installed");
        return;
    }
    let cpu = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .unwrap()
        .trim()
        .rsplit(['-', ','])
        .next()
        .unwrap()
        .to_string();
    let scratch = tempfile::tempdir().unwrap();
    let powerlens = |extra: &[&str]| {
        let o = live_wake(scratch.path())
            .args(["--cpu", &cpu, "--ldist", "1ms,1ms", "--json"])
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", common::stderr(&o));
        common::json(&o)
    };
    let median_us = |json: &serde_json::Value| {
        json["states"][0]["user_latency_ns"]["median"]
            .as_f64()
            .unwrap()
            / 1e3
    };
    // cyclictest's `-a` pins its main thread to the measured CPU too, where it wakes every
    // 10 ms to print: that alone takes 5-6 µs off the measured median here (a C loop of
    // absolute 1 ms sleeps: 34-35 µs with a 10 ms waker on its CPU, 39-41 µs without).
    // Its main thread goes to another CPU, as powerlens's does not share the measured one.
    let main_cpu = if cpu == "0" { "1" } else { "0" };
    let cyclictest = || {
        let o = Command::new("cyclictest")
            .args(["-q", "-D", "1", "-a", &cpu, "-i", "1000", "-p", "95", "-m"])
            .args(["--mainaffinity", main_cpu])
            .args(["--default-system", "-h", "2000"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        histogram_median_us(&text)
            .unwrap_or_else(|| panic!("no histogram from cyclictest: {text}{}", common::stderr(&o)))
    };
    // Paired rounds, back to back: the machine is shared, and its load moves both tools'
    // medians together (one cyclictest median went from 19.5 to 41.5 µs between rounds;
    // with the haltpoll cpuidle driver both are bimodal, about 40 or 56 µs on cpu1 from
    // one round to the next), so each round's ratio is compared, and the median ratio of
    // seven rounds must be within 20% of 1. (With cyclictest's main thread on the measured
    // CPU the ratio was 1.19-1.30 and the check had been widened to 40%; with it moved,
    // hand-run rounds gave 0.97-1.02, 2026-11-25.)
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for _ in 0..7 {
        ours.push(median_us(&powerlens(&["--no-trace", "--duration", "1s"])));
        theirs.push(cyclictest());
    }
    let traced = powerlens(&["--duration", "1s"]);
    let ratio = common::median(ours.clone()) / common::median(theirs.clone());
    let mut ratios: Vec<f64> = ours.iter().zip(&theirs).map(|(a, b)| a / b).collect();
    ratios.sort_by(f64::total_cmp);
    let off = (ratio - 1.0).abs();
    eprintln!(
        "cpu{cpu}: powerlens --no-trace UserLatency medians {ours:.2?} µs, cyclictest medians \
         {theirs:.1?} µs; ratio of the medians {ratio:.3} ({:.0}% apart). Traced run: median \
         {:.2} µs, trace cost {:.2} µs per event",
        off * 100.0,
        median_us(&traced),
        traced["self_overhead"]["trace_cost_ns"]
            .as_f64()
            .unwrap_or(f64::NAN)
            / 1e3
    );
    assert!(
        off <= 0.20,
        "the medians' ratio is {:.0}% from 1 (per-round ratios {ratios:.3?})",
        off * 100.0
    );
    // The untraced run says why the other metrics are missing.
    let untraced = powerlens(&["--no-trace", "--duration", "0.2s"]);
    let wake = &untraced["states"][0]["wake_latency_ns"];
    assert_eq!(wake["kind"], "unavailable");
    assert!(
        wake["reason"].as_str().unwrap().contains("--no-trace"),
        "{wake}"
    );
}

#[test]
fn report_of_something_else_names_the_fix() {
    let s = Setup::new(haltpoll_tree());
    let empty = s.scratch.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let o = s.run(&["report", empty.to_str().unwrap(), "--out", "/nonexistent/x"]);
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("info.json: not a wake result") && err.contains("powerlens wake -o"),
        "{err}"
    );
    // A damaged info.json says so.
    std::fs::write(empty.join("info.json"), "{}").unwrap();
    let err = common::stderr(&s.run(&["report", empty.to_str().unwrap()]));
    assert!(err.contains("not a powerlens wake info.json"), "{err}");
}
