//! Issue 29: `powerlens agent` on a host that starts processes by the hundred a second.
//! A churn of about 200 short processes a second (`sh -c 'seq | gzip'`, the issue's own
//! pipeline, under names of their own), scraped over plain HTTP: the exposition keeps one
//! series per (cgroup, name), not one per pid; and no child of the churn, whose ancestry
//! the agent knows, is `cgroup="unknown"`. Once in the default mode (CPU time from /proc
//! and the kernel's exit notifications) and once traced throughout (`--trace-duty 100`,
//! the parents from fork events). The churn's CPU time in its series is checked against
//! the kernel's own account of the processes the test waited for (getrusage of its
//! children). In the default mode a process that ends between two samples is charged
//! what its exit notification says, which misses its last stretch on the CPU when it
//! blocked at some point (a `gzip` reading its pipe); one that never blocked is charged
//! its whole life (`TaskExit::cpu_until_end_ns`). So the default mode must hold 75% of the
//! tree's time (86% seen, 57% before that fix) and the traced one 85% (94% seen).
//!
//! The issue asks for 2 minutes of churn; each mode runs 30 s here (set
//! POWERLENS_CHURN_SECONDS for more). Keyed by name, the series cannot grow with time:
//! they are the names that ran, and 30 s of 200 processes a second already holds 6,000
//! pids, three times the agent's cap of 2,000 per-pid series.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::agent::{agent, finish, free_port, get, Reaped};
use common::{is_root, serial};

/// The churn's names: copies of sh, seq and gzip, so that no other process on the machine
/// shares their series.
const NAMES: [(&str, &str); 3] = [
    ("plchurn-sh", "sh"),
    ("plchurn-seq", "seq"),
    ("plchurn-gzip", "gzip"),
];

/// Above this many process series the exposition is not one a fleet keeps: the churn is
/// 3 names, and this machine's other processes a few dozen more.
const SERIES_BOUND: usize = 200;

fn churn_seconds() -> u64 {
    std::env::var("POWERLENS_CHURN_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30)
}

/// The children's CPU time the kernel accounted to this process (every descendant waited
/// for, through the chain of waits), s.
fn children_cpu_s() -> f64 {
    // SAFETY: getrusage writes into the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    s(ru.ru_utime) + s(ru.ru_stime)
}

/// Copies of the churn's programs under their own names, in `dir`.
fn programs(dir: &Path) {
    for (name, program) in NAMES {
        let from = common::agent::which(program).unwrap_or_else(|| panic!("no {program}"));
        std::fs::copy(&from, dir.join(name)).unwrap();
    }
}

/// Runs the churn for `seconds` in the foreground: 10 pipelines of 3 processes, then
/// 50 ms of sleep, over and over (about 200 processes a second here). Returns how many
/// pipelines ran and the CPU time the kernel accounted to the whole tree.
fn churn(dir: &Path, seconds: u64) -> (u64, f64) {
    let script = format!(
        "n=0; end=$(( $(date +%s) + {seconds} )); \
         while [ $(date +%s) -lt $end ]; do \
           for i in 1 2 3 4 5 6 7 8 9 10; do plchurn-sh -c 'plchurn-seq 3000 | plchurn-gzip > /dev/null'; done; \
           n=$((n + 10)); sleep 0.05; \
         done; echo $n"
    );
    let before = children_cpu_s();
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(dir.join("plchurn-sh"))
        .args(["-c", &script])
        .env("PATH", path)
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success());
    let pipelines = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    (pipelines, children_cpu_s() - before)
}

/// The label sets of `name`'s samples.
fn series<'a>(body: &'a str, name: &str) -> Vec<&'a str> {
    body.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .map(|l| l.rsplit_once(' ').unwrap().0)
        .collect()
}

fn value(line: &str) -> f64 {
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

/// `least_share`: the share of the tree's CPU time the churn's series must hold at least.
fn churn_under_the_agent(extra: &[&str], least_share: f64) {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    programs(dir.path());
    let tree = common::fixture_with_live_tracing();
    let port = free_port();
    // Every series added to, however small: a child that got no cgroup cannot hide in
    // `other`.
    let mut args = vec!["--top", "10000", "--min-cpu", "0"];
    args.extend_from_slice(extra);
    let agent: Reaped = agent(&tree.sys_path(""), port, &args);
    let start = Instant::now();
    while get(port, "/healthz", None).map(|(s, _)| s).ok() != Some(200) {
        assert!(start.elapsed() < Duration::from_secs(30), "never healthy");
        std::thread::sleep(Duration::from_millis(100));
    }
    let seconds = churn_seconds();
    let churn_start = Instant::now();
    let (pipelines, cpu_s) = churn(dir.path(), seconds);
    let churn_s = churn_start.elapsed().as_secs_f64();
    // Two intervals: the last exits are in a closed interval, and a scrape has shown it.
    std::thread::sleep(Duration::from_millis(2500));
    let _ = get(port, "/metrics", None).unwrap();
    let (status, body) = get(port, "/metrics", None).unwrap();
    let stderr = finish(agent);
    assert_eq!(status, 200, "{stderr}");
    let processes = 3 * pipelines + pipelines / 10;
    let rate = processes as f64 / churn_s;
    eprintln!(
        "{extra:?}: {processes} processes in {churn_s:.0} s ({rate:.0}/s), {cpu_s:.2} CPU s; exposition {} bytes, {} lines",
        body.len(),
        body.lines().count()
    );
    assert!(rate > 100.0, "the churn was {rate:.0} processes a second");

    let cpu = series(&body, "powerlens_process_cpu_seconds_total");
    eprintln!("{} process series", cpu.len());
    assert!(
        cpu.len() <= SERIES_BOUND,
        "{} process series, above the bound of {SERIES_BOUND}:\n{}",
        cpu.len(),
        cpu.join("\n")
    );
    assert!(
        cpu.iter().all(|l| !l.contains("pid=")),
        "a pid label by default"
    );
    let ours: Vec<&str> = body
        .lines()
        .filter(|l| l.starts_with("powerlens_process_cpu_seconds_total{comm=\"plchurn-"))
        .collect();
    let unknown: Vec<&&str> = ours
        .iter()
        .filter(|l| l.contains("cgroup=\"unknown\""))
        .collect();
    assert!(
        unknown.is_empty(),
        "children of known processes without a cgroup:\n{}",
        unknown
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(
        ours.len(),
        NAMES.len(),
        "one series per name, in the test's cgroup:\n{}",
        ours.join("\n")
    );
    // The churn's CPU time is in its series: the kernel's account of the tree, less the
    // driver's `date` and `sleep` (a few ms a loop), never more, and at least
    // `least_share` of it.
    let seen: f64 = ours.iter().map(|l| value(l)).sum();
    eprintln!("the churn's series hold {seen:.3} CPU s of the tree's {cpu_s:.3} s");
    assert!(
        seen <= cpu_s * 1.02 && seen >= cpu_s * least_share,
        "the churn's series hold {seen:.3} CPU s, the kernel accounted {cpu_s:.3} s:\n{}",
        ours.join("\n")
    );
}

#[test]
#[ignore = "live: the agent on the real kernel (root)"]
fn a_churn_keeps_the_series_bounded_and_every_child_in_a_cgroup_by_default() {
    if !is_root() {
        powerlens_sys::skip_test!("the agent's exit notifications and tracepoints need root");
        return;
    }
    churn_under_the_agent(&[], 0.75);
}

#[test]
#[ignore = "live: the agent on the real kernel (root)"]
fn a_churn_keeps_the_series_bounded_and_every_child_in_a_cgroup_traced_throughout() {
    if !is_root() {
        powerlens_sys::skip_test!("the agent's tracepoints need root");
        return;
    }
    churn_under_the_agent(&["--trace-duty", "100"], 0.85);
}
