//! `powerlens agent` end to end: a real Prometheus server (Debian's `prometheus`) scrapes
//! it every second on loopback while a fake RAPL meter gives a known power and a spinner
//! runs; what Prometheus's query API answers is checked against the meter. Then the faults
//! a long-running server meets: a port in use, a client that never reads, a thousand rapid
//! scrapes, SIGTERM, a meter that disappears.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::agent::{agent, finish, free_port, get, which, Prometheus, Reaped};
use common::{is_root, median, serial, wakeups_per_second};
use powerlens_sys::fixture::{FakeMeter, FixtureTree};

const BIN: &str = env!("CARGO_BIN_EXE_powerlens");

/// What a test of the traced agent starts with: root, the live tests' lock, and a
/// fixture tree whose tracefs is the machine's; `None` (after saying so) without root.
fn traced_agent_fixture() -> Option<(common::Serial, FixtureTree)> {
    if !is_root() {
        powerlens_sys::skip_test!("the agent's tracepoints need root");
        return None;
    }
    let serial = serial();
    Some((serial, common::fixture_with_live_tracing()))
}

/// Two threads spinning for `seconds` at nice −10, above the agent's own threads and
/// the machine's other work; `nice` execs the workload: the child's pid is the spinner's.
fn raised_spinner(seconds: u32) -> Reaped {
    Reaped::new(
        Command::new("nice")
            .args(["-n", "-10", BIN, "workload", "spin", "--threads", "2"])
            .args(["--duration", &seconds.to_string()])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// Waits until `port` answers /healthz with 200.
fn wait_healthy(port: u16, agent: &mut Reaped) {
    let agent = agent.child();
    let start = Instant::now();
    loop {
        if let Ok((200, _)) = get(port, "/healthz", None) {
            return;
        }
        if let Ok(Some(status)) = agent.try_wait() {
            panic!("the agent exited ({status}) before serving");
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the agent never became healthy"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs `powerlens workload ARGS --json` to its end beside a healthy agent, then stops the
/// agent: the workload's pid, its JSON report, and the exposition once the workload's last
/// events are in a closed interval a scrape has shown (two intervals later).
fn workload_beside(port: u16, agent: Reaped, args: &[&str]) -> (u32, serde_json::Value, String) {
    let load = Command::new(BIN)
        .arg("workload")
        .args(args)
        .arg("--json")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = load.id();
    let out = load.wait_with_output().unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    let _ = get(port, "/metrics", None).unwrap();
    let (_, body) = get(port, "/metrics", None).unwrap();
    let _ = finish(agent);
    (pid, report, body)
}

/// The value of the first sample of `name{…}` whose labels contain each of `with`.
fn sample(body: &str, name: &str, with: &[&str]) -> Option<f64> {
    body.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .find(|l| with.iter().all(|w| l.contains(w)))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// A fixture sysfs: this machine's online CPUs and tracefs, one RAPL zone.
fn fixture_with_rapl() -> (FixtureTree, PathBuf) {
    let tree = common::fixture_with_live_tracing();
    let zone = tree.rapl_zone(0, "package-0", 0, 1 << 40);
    (tree, zone.join("energy_uj"))
}

/// A percent-encoded query string value.
fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Prometheus's answer to `endpoint` (`query` or `query_range`) for `promql` and the
/// extra `params` (`&time=…`): its `data`, once the status says it ran.
fn prometheus_data(port: u16, endpoint: &str, promql: &str, params: &str) -> serde_json::Value {
    let (status, body) = get(
        port,
        &format!("/api/v1/{endpoint}?query={}{params}", encode(promql)),
        None,
    )
    .unwrap();
    assert_eq!(status, 200, "{promql}: {body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    v["data"].clone()
}

/// An instant query against Prometheus: the vector's (labels, value) pairs.
fn query(port: u16, promql: &str) -> Vec<(serde_json::Value, f64)> {
    prometheus_data(port, "query", promql, "")["result"]
        .as_array()
        .unwrap_or_else(|| panic!("{promql}: no vector"))
        .iter()
        .map(|r| {
            (
                r["metric"].clone(),
                r["value"][1].as_str().unwrap().parse().unwrap(),
            )
        })
        .collect()
}

/// Now, in Unix seconds: Prometheus's clock.
fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The median of a scalar query evaluated every second over the last 10 s.
fn median_over_last_10s(port: u16, promql: &str) -> f64 {
    let now = unix_now();
    let params = format!("&start={:.3}&end={now:.3}&step=1", now - 10.0);
    let data = prometheus_data(port, "query_range", promql, &params);
    let values: Vec<f64> = data["result"][0]["values"]
        .as_array()
        .unwrap_or_else(|| panic!("{promql}: {data}"))
        .iter()
        .map(|p| p[1].as_str().unwrap().parse().unwrap())
        .collect();
    median(values)
}

/// A one-value instant query evaluated at `at` (Unix seconds).
fn scalar_at(port: u16, promql: &str, at: f64) -> f64 {
    let data = prometheus_data(port, "query", promql, &format!("&time={at:.3}"));
    data["result"][0]["value"][1]
        .as_str()
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("{promql}: {data}"))
}

/// The end-to-end test. Prometheus asks for OpenMetrics (it lists it first in its
/// Accept header), so a target that stays `up` is an exposition Prometheus parsed.
#[test]
#[ignore = "live: the agent on the real kernel (root)"]
fn a_real_prometheus_scrapes_the_agent_and_the_figures_close_on_the_meter() {
    if !is_root() {
        powerlens_sys::skip_test!("the agent's tracepoints need root");
        return;
    }
    let Some(prometheus) = Prometheus::find() else {
        return;
    };
    let _serial = serial();
    const WATTS: f64 = 20.0;
    let (tree, energy_uj) = fixture_with_rapl();
    let meter = FakeMeter::start(&energy_uj, WATTS, 1 << 40);
    // At a higher priority than the machine's other work (a developer's build), so that it
    // is the top process there too.
    let spinner = raised_spinner(90);
    let port = free_port();
    let mut agent = agent(
        tree.sys_path("").as_path(),
        port,
        // Per pid: the spinner is found by its pid.
        &["--idle-w", "5", "--top", "500", "--by", "pid"],
    );
    wait_healthy(port, &mut agent);

    // The exposition passes Prometheus's own linter.
    let (_, text) = get(port, "/metrics", None).unwrap();
    let mut promtool = Command::new(which("promtool").expect("promtool, of Debian's prometheus"))
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let lint = promtool.wait_with_output().unwrap();
    assert!(
        lint.status.success(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&lint.stdout),
        String::from_utf8_lossy(&lint.stderr)
    );

    let dir = tempfile::tempdir().unwrap();
    let server = Prometheus::start(
        &prometheus,
        dir.path(),
        &format!(
            "  - job_name: powerlens\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
        ),
    );
    let prom_port = server.port;
    // 25 s of scrapes: the queries below look at the last 20. The spinner's CPU time, as
    // the kernel counts it, is read along (the machine may be busy: it gets what it gets).
    let spinner_cpu_s = || {
        powerlens_sys::procfs::process::read_process(&Default::default(), spinner.id())
            .unwrap()
            .cpu_time_ns as f64
            / 1e9
    };
    // Until Prometheus holds 32 scrapes (it may take a while to start on a busy machine).
    let start = Instant::now();
    let mut readings = Vec::new();
    loop {
        std::thread::sleep(Duration::from_millis(500));
        readings.push((Instant::now(), spinner_cpu_s()));
        assert!(
            agent.child().try_wait().unwrap().is_none(),
            "the agent died"
        );
        let scrapes = get(
            prom_port,
            &format!(
                "/api/v1/query?query={}",
                encode("count_over_time(powerlens_intervals_total[60s])")
            ),
            None,
        )
        .ok()
        .and_then(|(_, body)| {
            let v: serde_json::Value = serde_json::from_str(&body).ok()?;
            v["data"]["result"][0]["value"][1]
                .as_str()?
                .parse::<f64>()
                .ok()
        });
        if scrapes.is_some_and(|n| n >= 32.0) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "Prometheus scraped {scrapes:?} times in 120 s"
        );
    }
    let targets = get(prom_port, "/api/v1/targets", None).unwrap().1;
    assert!(
        targets.contains("\"health\":\"up\""),
        "the target is not up: {targets}"
    );

    // The agent's own figure of the meter's power: each interval's energy over its length.
    let power = median_over_last_10s(prom_port, "powerlens_node_power_watts");
    assert!(
        (power - WATTS).abs() / WATTS < 0.03,
        "node power {power:.3} W, the meter's {WATTS} W"
    );
    // The counters step once an interval (1 s) and are scraped once a second. When the
    // scrapes fall on the agent's interval closes, each sees the close or not by a hair:
    // a run's samples read 287, 287, 324, 344, 344, 384, 384, 426 J, and a close that a
    // busy machine delayed makes a larger step. So a 20-s increase is off by up to a step
    // at each end, in every window alike (CI read 440 J; a local run whose closes came
    // late, 480 J). The counter's raw difference over 30 s is checked to a step at each
    // end; the shares below divide by the node's energy from the same samples, exact
    // whatever the steps, and the meter's constant power makes it a clock.
    let node = scalar_at(
        prom_port,
        "sum(powerlens_node_energy_joules_total) - sum(powerlens_node_energy_joules_total offset 30s)",
        unix_now(),
    );
    let expected = WATTS * 30.0;
    assert!(
        (node - expected).abs() <= 0.03 * expected + 2.0 * 1.5 * WATTS,
        "node energy over 30 s: {node:.2} J, the meter's {WATTS} W × 30 s = {expected} J, give or take a (late) 1-s interval's at each end"
    );
    // The processes' increases, as differences of the summed counters 20 s apart: a
    // process series born inside the window counts from 0. (Summing increase() of each
    // series instead lets Prometheus extrapolate a two-sample newcomer by half a scrape
    // interval at the window's end, relatively far more than a series 20 s long: on a
    // machine where processes come and go the sum overshoots the node by a few percent.)
    // All three at one instant: queried each at its own "now", a scrape between them made
    // one a 1-s interval longer than another (CI: 299.9 + 95.0 J against 380.0 J).
    let at = unix_now();
    let delta = |metric: &str| {
        scalar_at(
            prom_port,
            &format!("sum({metric}) - sum({metric} offset 20s)"),
            at,
        )
    };
    let (processes, idle, node_delta) = (
        delta("powerlens_process_energy_joules_total"),
        delta("powerlens_idle_energy_joules_total"),
        delta("powerlens_node_energy_joules_total"),
    );
    assert!(
        (processes + idle - node_delta).abs() / node_delta < 0.01,
        "processes {processes:.3} + idle {idle:.3} J against node {node_delta:.3} J"
    );
    // A share of the node's energy, from the same samples (two samples 20 s apart span
    // 19 to 21 of the agent's 1-s intervals when the scrapes fall on its closes: ±5%).
    let idle_share = median_over_last_10s(
        prom_port,
        "(sum(powerlens_idle_energy_joules_total) - sum(powerlens_idle_energy_joules_total offset 20s)) / (sum(powerlens_node_energy_joules_total) - sum(powerlens_node_energy_joules_total offset 20s))",
    );
    assert!(
        (idle_share * WATTS - 5.0).abs() / 5.0 < 0.03,
        "idle {:.3} W of the node's {WATTS} W, --idle-w 5",
        idle_share * WATTS
    );
    let top = query(
        prom_port,
        "topk(1, rate(powerlens_process_energy_joules_total[20s]))",
    );
    assert_eq!(
        top[0].0["pid"].as_str(),
        Some(spinner.id().to_string().as_str()),
        "the spinner is the top process: {top:?}"
    );
    // The spinner's CPU rate, timed by the meter as the idle share above (a 20-s rate
    // alone moves by one interval's CPU seconds, ~2 in 20, with where the window's ends
    // fall: one CI run read 2.10 CPUs on this 2-CPU machine against the kernel's 1.81),
    // the median over the last 10 s, against the kernel's rates over the 20 s before
    // each reading of the last 10 s.
    let spinner_cpu = median_over_last_10s(
        prom_port,
        &format!(
            "sum(increase(powerlens_process_cpu_seconds_total{{pid=\"{}\"}}[20s])) / sum(increase(powerlens_node_energy_joules_total[20s])) * {WATTS}",
            spinner.id()
        ),
    );
    let last = readings.last().unwrap().0;
    let kernel_rates: Vec<f64> = readings
        .iter()
        .filter(|(t, _)| last.duration_since(*t) <= Duration::from_secs(10))
        .filter_map(|&(t1, c1)| {
            let &(t0, c0) = readings
                .iter()
                .find(|(t, _)| t1.duration_since(*t) <= Duration::from_secs(20))?;
            let span = t1.duration_since(t0).as_secs_f64();
            (span >= 15.0).then(|| (c1 - c0) / span)
        })
        .collect();
    assert!(!kernel_rates.is_empty(), "{} readings", readings.len());
    let kernel_rate = median(kernel_rates);
    assert!(
        (spinner_cpu - kernel_rate).abs() / kernel_rate < 0.1,
        "the spinner's CPU rate: {spinner_cpu:.3} against the kernel's {kernel_rate:.3} (medians)"
    );
    let provenance = query(prom_port, "powerlens_node_energy_joules_total");
    assert_eq!(provenance[0].0["provenance"], "measured");
    assert_eq!(
        provenance[0].0["source"]
            .as_str()
            .map(|s| s.starts_with("rapl-powercap")),
        Some(true)
    );

    // The Grafana dashboard's queries are PromQL this Prometheus runs, over these series.
    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contrib/grafana-powerlens.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let mut answered = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"]
                .as_str()
                .unwrap()
                .replace("$__rate_interval", "20s")
                .replace("$instance", ".*")
                .replace("$top", "10");
            let data = prometheus_data(prom_port, "query", &expr, "");
            answered += usize::from(data["result"].as_array().is_some_and(|r| !r.is_empty()));
        }
    }
    assert!(
        answered >= 8,
        "only {answered} dashboard queries returned series"
    );

    // The meter disappears: the node's energy goes on, estimated, under its own series.
    drop(meter);
    std::fs::remove_file(&energy_uj).unwrap();
    // The next close notices: within two intervals, or later when a busy machine delays
    // the closes (beside the spinner at nice -10, a debug build's came up to seconds late).
    let gone = Instant::now();
    let (after, estimated) = loop {
        std::thread::sleep(Duration::from_millis(500));
        let (_, after) = get(port, "/metrics", None).unwrap();
        let estimated = sample(
            &after,
            "powerlens_node_energy_joules_total",
            &["provenance=\"estimated\""],
        );
        // The series is born at the close that noticed (0 J), and grows from the next.
        match estimated {
            Some(e) if e > 0.0 => break (after, e),
            _ => assert!(
                gone.elapsed() < Duration::from_secs(20),
                "no estimated node energy 20 s after the meter went away ({estimated:?}):\n{after}"
            ),
        }
    };
    assert!(estimated > 0.0, "{after}");
    assert!(sample(
        &after,
        "powerlens_process_energy_joules_total",
        &["provenance=\"estimated\""]
    )
    .is_some());
    drop((server, spinner));
    let stderr = finish(agent);
    assert!(
        stderr.contains("the energy meter stopped answering") && stderr.contains("ESTIMATED"),
        "{stderr}"
    );
}

/// Faults, on a reduced agent (procfs, no privileges needed): each is served or refused
/// cleanly and the agent keeps serving.
#[test]
#[ignore = "live: the agent on the real kernel (root)"]
fn faults_a_server_meets_are_survived() {
    let _serial = serial();
    let tree = FixtureTree::new();
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    tree.online_cpus(online.trim());
    let sysfs = tree.sys_path("");

    // A port in use: a clear error, before anything else.
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let out = Command::new(BIN)
        .env("POWERLENS_SYSFS_ROOT", &sysfs)
        .args([
            "agent",
            "--reduced",
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("cannot listen on 127.0.0.1:{port}")) && err.contains("--listen"),
        "{err}"
    );
    drop(taken);

    let port = free_port();
    let mut agent = agent(&sysfs, port, &["--reduced"]);
    wait_healthy(port, &mut agent);
    std::thread::sleep(Duration::from_millis(1200));

    // Reduced: labelled so, CPU time without wake-ups.
    let (status, body) = get(port, "/metrics", None).unwrap();
    assert_eq!(status, 200);
    assert!(body.contains("mode=\"reduced\""), "{body}");
    assert!(
        !body.contains("powerlens_process_wakeups_total"),
        "a reduced agent has no wake-ups"
    );
    assert!(
        body.contains("powerlens_process_cpu_seconds_total{"),
        "{body}"
    );
    assert!(
        body.contains("provenance=\"estimated\""),
        "no meter in the fixture: estimated"
    );

    // A client that connects and never sends, and one that sends and never reads: others
    // are still served at once.
    let silent = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut sluggish = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(sluggish, "GET /metrics HTTP/1.1\r\n\r\n").unwrap();
    let t = Instant::now();
    assert_eq!(get(port, "/metrics", None).unwrap().0, 200);
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "served in {:?} beside idle clients",
        t.elapsed()
    );

    // Bad requests get their status, and the agent goes on.
    assert_eq!(get(port, "/nothing", None).unwrap().0, 404);
    let mut raw = TcpStream::connect(("127.0.0.1", port)).unwrap();
    raw.write_all(b"\x16\x03\x01garbage\r\n\r\n").unwrap();
    let mut reply = String::new();
    let _ = raw.read_to_string(&mut reply);
    assert!(reply.starts_with("HTTP/1.1 400"), "{reply}");
    let (_, index) = get(port, "/", None).unwrap();
    assert!(index.contains("href=\"/metrics\"") && index.contains("href=\"/healthz\""));

    // A thousand rapid scrapes: all answered, no growth of the agent's memory.
    let rss = |body: &str| sample(body, "powerlens_self_resident_memory_bytes", &[]).unwrap();
    let before = rss(&get(port, "/metrics", None).unwrap().1);
    for i in 0..1000 {
        let (status, _) = get(
            port,
            "/metrics",
            if i % 2 == 0 {
                None
            } else {
                Some("application/openmetrics-text")
            },
        )
        .unwrap();
        assert_eq!(status, 200, "scrape {i}");
    }
    let after = rss(&get(port, "/metrics", None).unwrap().1);
    assert!(
        after < before + 8.0 * 1024.0 * 1024.0,
        "resident memory grew from {before} to {after} bytes over 1000 scrapes"
    );
    drop((silent, sluggish));

    // SIGTERM: a clean exit, promptly.
    stops_cleanly_within(&mut agent, libc::SIGTERM, Duration::from_secs(3));
}

/// Sends `signal` to the agent, which must exit successfully within `limit`.
fn stops_cleanly_within(agent: &mut Reaped, signal: libc::c_int, limit: Duration) {
    let start = Instant::now();
    unsafe { libc::kill(agent.id() as i32, signal) };
    let status = agent.child().wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(
        start.elapsed() < limit,
        "signal {signal} stopped the agent in {:?}",
        start.elapsed()
    );
}

/// The agent's per-process figures, traced throughout (`--trace-duty 100`), against the
/// kernel's own counters: a ping-pong whose
/// players preempt a spinner, run to its end beside the agent. Its CPU seconds are the
/// threads' CLOCK_THREAD_CPUTIME_ID, its thread wake-ups the players' voluntary switches
/// (each blocking wait ends with a wake-up by the other player), both within 2% plus the
/// share of the load's wake-ups the agent itself reports unrecorded
/// (`powerlens_process_unrecorded_wakeups_total`): through perf rings (the second pass
/// of the live step) a ping-pong at ~40,000 wake-ups a second can lose records, and
/// one such run read 2.3% short with 2.6% of its wake-ups reported unrecorded. The
/// figure may be short by what the agent says it missed, never silently.
#[test]
#[ignore = "live: the agent on the real kernel (root)"]
fn the_agents_figures_are_the_kernels() {
    let Some((_serial, tree)) = traced_agent_fixture() else {
        return;
    };
    let port = free_port();
    // Traced throughout: the exact figures, CPU time from the trace.
    let mut agent = agent(
        &tree.sys_path(""),
        port,
        &["--top", "100", "--trace-duty", "100", "--by", "pid"],
    );
    wait_healthy(port, &mut agent);
    let (pid, report, body) = workload_beside(
        port,
        agent,
        &[
            "pingpong",
            "--iterations",
            "20000",
            "--pin",
            "0,1",
            "--spinner",
            "1",
        ],
    );
    let threads = report["threads"].as_array().unwrap();
    let cpu_s: f64 = threads
        .iter()
        .map(|t| t["cpu_clock_s"].as_f64().unwrap())
        .sum();
    let blocked: f64 = threads
        .iter()
        .map(|t| t["voluntary_switches"].as_f64().unwrap())
        .sum();
    let with = format!("pid=\"{pid}\"");
    let agent_cpu =
        sample(&body, "powerlens_process_cpu_seconds_total", &[&with]).expect("the load's series");
    let wakeups = sample(
        &body,
        "powerlens_process_wakeups_total",
        &[&with, "cause=\"thread\""],
    )
    .expect("the load's thread wake-ups");
    let unrecorded = sample(
        &body,
        "powerlens_process_unrecorded_wakeups_total",
        &[&with],
    )
    .unwrap_or(0.0);
    let said_missed = unrecorded / blocked;
    let series = || {
        body.lines()
            .filter(|l| l.contains(&with) || l.contains("other") || l.contains("lost"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        (agent_cpu - cpu_s).abs() / cpu_s < 0.02 + said_missed,
        "agent {agent_cpu:.4} s against the threads' own clocks {cpu_s:.4} s ({unrecorded} wake-ups reported unrecorded); the load's series:\n{}",
        series()
    );
    assert!(
        (wakeups - blocked).abs() / blocked < 0.02 + said_missed,
        "agent {wakeups} thread wake-ups against {blocked} voluntary switches ({unrecorded} reported unrecorded):\n{}",
        series()
    );
    // Issue 28: the agent says what its tracing cost the load. Each of the load's blocking
    // switches was traced in its context (and each of its wake-ups): at least 100 ns of
    // its CPU time apiece on any machine, and never more than the load's whole CPU time.
    let tracing = sample(
        &body,
        "powerlens_process_tracing_cpu_seconds_total",
        &[&with],
    )
    .expect("the load's tracing cost");
    assert!(
        tracing >= blocked * 100e-9 && tracing < agent_cpu,
        "the tracing cost the load {tracing} s of its {agent_cpu} s, for {blocked} blocking switches"
    );
    let node_tracing =
        sample(&body, "powerlens_tracing_cpu_seconds_total", &[]).expect("the node's tracing cost");
    assert!(node_tracing >= tracing, "{node_tracing} < {tracing}");
    // The path it traced by: in the kernel where it has BTF (the default), perf rings
    // when told (the suite's second pass sets POWERLENS_PERF_RINGS).
    let path = if std::env::var_os("POWERLENS_PERF_RINGS").is_none()
        && std::path::Path::new("/sys/kernel/btf/vmlinux").exists()
    {
        "bpf"
    } else {
        "perf_ring"
    };
    assert!(
        sample(
            &body,
            "powerlens_build_info",
            &[&format!("tracing_path=\"{path}\"")]
        )
        .is_some(),
        "{}",
        body.lines()
            .filter(|l| l.starts_with("powerlens_build_info"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Issue 28, at the agent's defaults: CPU time from /proc (which costs the watched
/// processes nothing) and wake-ups from tracing 5% of each interval, scaled. Oracles: a
/// 1 ms sleeper's CPU time is its threads' CPU clocks (within 2% and 2 clock ticks, /proc's
/// resolution), and its wake-ups, received or unrecorded, are its voluntary switches
/// (each sleep ends in one) within 30% — the windows see about 400 of its ~8,000, so an
/// estimate, as the exposition says. Its idle wake-ups never exceed those wake-ups.
#[test]
#[ignore = "live: the agent on the real kernel (root)"]
fn by_default_the_agent_reads_cpu_time_from_proc_and_samples_the_wakeups() {
    let Some((_serial, tree)) = traced_agent_fixture() else {
        return;
    };
    let port = free_port();
    let mut agent = agent(&tree.sys_path(""), port, &["--top", "100", "--by", "pid"]);
    wait_healthy(port, &mut agent);
    let (pid, report, body) = workload_beside(
        port,
        agent,
        &["sleepy", "--period", "1ms", "--duration", "8s"],
    );
    assert!(body.contains("mode=\"windows\""), "{body}");
    assert!(body.contains("trace_duty=\"0.05\""), "{body}");
    let threads = report["threads"].as_array().unwrap();
    let sum = |key: &str| -> f64 { threads.iter().map(|t| t[key].as_f64().unwrap()).sum() };
    let (cpu_s, blocked) = (sum("cpu_clock_s"), sum("voluntary_switches"));
    let with = format!("pid=\"{pid}\"");
    let series = || {
        body.lines()
            .filter(|l| l.contains(&with))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let agent_cpu = sample(&body, "powerlens_process_cpu_seconds_total", &[&with])
        .unwrap_or_else(|| panic!("no CPU series for the sleeper:\n{body}"));
    assert!(
        (agent_cpu - cpu_s).abs() <= 0.02 * cpu_s + 0.02,
        "agent {agent_cpu:.3} s against the threads' clocks {cpu_s:.3} s:\n{}",
        series()
    );
    let received: f64 = ["thread", "timer", "irq", "ipi"]
        .iter()
        .map(|cause| {
            sample(
                &body,
                "powerlens_process_wakeups_total",
                &[&with, &format!("cause=\"{cause}\"")],
            )
            .unwrap_or_else(|| panic!("no {cause} wake-ups:\n{}", series()))
        })
        .sum();
    let unrecorded = sample(
        &body,
        "powerlens_process_unrecorded_wakeups_total",
        &[&with],
    )
    .unwrap_or_else(|| panic!("no unrecorded wake-ups series:\n{}", series()));
    let idle = sample(&body, "powerlens_process_idle_wakeups_total", &[&with]).unwrap();
    let wakeups = received + unrecorded;
    assert!(
        (wakeups - blocked).abs() / blocked < 0.30,
        "{wakeups:.0} estimated wake-ups ({received:.0} received + {unrecorded:.0} unrecorded) against {blocked} voluntary switches:\n{}",
        series()
    );
    assert!(
        idle <= wakeups * 1.05,
        "{idle:.0} idle wake-ups above {wakeups:.0} wake-ups:\n{}",
        series()
    );
    let traced = sample(&body, "powerlens_traced_seconds_total", &[]).unwrap();
    let intervals = sample(&body, "powerlens_intervals_total", &[]).unwrap();
    assert!(
        traced > 0.04 * intervals && traced < 0.06 * intervals,
        "{traced} s traced over {intervals} intervals of 1 s at 5%"
    );
}

/// A watcher that polls is a wake-up source of its own, on the machine it measures: the
/// agent wakes for its work (a tracing window's two edges, its drain and decoding, an
/// interval's end), and Ctrl-C or SIGTERM still stop it at once.
#[test]
#[ignore = "live: the agent on the real kernel (root)"]
fn an_idle_agent_wakes_for_its_work_only() {
    let Some((_serial, tree)) = traced_agent_fixture() else {
        return;
    };
    let port = free_port();
    let mut windows = agent(&tree.sys_path(""), port, &[]);
    wait_healthy(port, &mut windows);
    let rate = wakeups_per_second(windows.id());
    let stderr = finish(windows);
    assert!(stderr.contains("wake-ups traced 5%"), "{stderr}");
    // Per 1-s interval: the session's thread at the window's edges and the interval's
    // end; the drain when the window opens, once or twice in it and at its close; the
    // decoder once per copy. Each of the three polled every 50 ms before: 88 a second.
    assert!(
        rate <= 20.0,
        "the agent at its defaults woke {rate:.1} times a second"
    );

    let port = free_port();
    let mut reduced = Reaped::new(
        Command::new(BIN)
            .env("POWERLENS_SYSFS_ROOT", tree.sys_path(""))
            .env_remove("POWERLENS_PROCFS_ROOT")
            .args(["agent", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--reduced", "--interval", "10s"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    wait_healthy(port, &mut reduced);
    // No interval ends in the 6 s: nothing is due.
    let rate = wakeups_per_second(reduced.id());
    assert!(
        rate * 5.0 <= 2.0,
        "the reduced agent woke {:.0} times in 5 s with nothing due",
        rate * 5.0
    );
    // Ctrl-C, with the next interval's end seconds away: the signal ends the wait.
    stops_cleanly_within(&mut reduced, libc::SIGINT, Duration::from_secs(2));
}

/// Beside CPU-bound work at a higher priority than its own (two spinners at nice −10 on
/// two CPUs), the traced agent's intervals still close on time: each is 1 s long, as the
/// agent measured it (`powerlens_traced_seconds_total` grows by each interval's length
/// when it traces throughout), read at every step of `powerlens_intervals_total`.
/// Before, intervals read 0.73–1.25 s here: the session's thread waited for its batches in
/// std's channel, whose lock the nice-19 decoder could hold while it waited for a CPU, and
/// a hand-on of events at nice 19 that the spinners preempted could not raise itself back
/// for the interval's end (0.80–1.20 s with only the channel fixed).
#[test]
#[ignore = "live: the agent on the real kernel (root)"]
fn intervals_close_on_time_beside_work_at_a_raised_priority() {
    let Some((_serial, tree)) = traced_agent_fixture() else {
        return;
    };
    let spinner = raised_spinner(40);
    let port = free_port();
    let mut traced = agent(&tree.sys_path(""), port, &["--trace-duty", "100"]);
    wait_healthy(port, &mut traced);
    let mut lengths = Vec::new();
    // The interval count and traced seconds at the latest step of the count.
    let mut step: Option<(f64, f64)> = None;
    let until = Instant::now() + Duration::from_secs(15);
    while Instant::now() < until {
        let (_, body) = get(port, "/metrics", None).unwrap();
        let intervals = sample(&body, "powerlens_intervals_total", &[]).unwrap();
        let traced_s = sample(&body, "powerlens_traced_seconds_total", &[]).unwrap();
        match step {
            Some((n, _)) if n == intervals => {}
            Some((n, before)) => {
                // At 20 scrapes a second every step is of one interval.
                assert_eq!(intervals, n + 1.0, "two intervals closed within 50 ms");
                lengths.push(traced_s - before);
                step = Some((intervals, traced_s));
            }
            None => step = Some((intervals, traced_s)),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let stderr = finish(traced);
    drop(spinner);
    // Traced throughout, not in windows nor reduced.
    assert!(
        stderr.contains("powerlens: tracing:") && !stderr.contains("wake-ups traced"),
        "{stderr}"
    );
    assert!(
        lengths.len() >= 12,
        "{} intervals closed in 15 s",
        lengths.len()
    );
    // A close comes a few milliseconds after its due time here; 0.15 s is a close that
    // waited for a CPU the spinners held.
    assert!(
        lengths.iter().all(|l| (l - 1.0).abs() <= 0.15),
        "intervals of 1 s closed after {lengths:.3?} s"
    );
}

/// A meter that wraps around every 1.5 s (a 30 J range at 20 W, as RAPL's 32-bit counters
/// wrap within minutes on a busy server): the node's counter never goes backwards and
/// grows at the meter's power. Reduced (no tracing needed): the energy is the meter's
/// either way.
#[test]
#[ignore = "live: the agent on the real kernel (root)"]
fn counters_never_go_backwards_across_a_meter_wrap() {
    let _serial = serial();
    let tree = common::fixture_with_live_tracing();
    let zone = tree.rapl_zone(0, "package-0", 0, 30_000_000);
    let _meter = FakeMeter::start(zone.join("energy_uj"), 20.0, 30_000_000);
    let port = free_port();
    let mut agent = agent(&tree.sys_path(""), port, &["--reduced"]);
    wait_healthy(port, &mut agent);
    let node = || {
        sample(
            &get(port, "/metrics", None).unwrap().1,
            "powerlens_node_energy_joules_total",
            &["provenance=\"measured\""],
        )
        .unwrap()
    };
    // The first scrape shows the series; from the second on, readings every 0.25 s.
    let _ = get(port, "/metrics", None).unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    let (t0, first) = (Instant::now(), node());
    let mut last = first;
    while t0.elapsed() < Duration::from_secs(6) {
        std::thread::sleep(Duration::from_millis(250));
        let now = node();
        assert!(
            now >= last,
            "the node's counter went back from {last} to {now}"
        );
        last = now;
    }
    let watts = (last - first) / t0.elapsed().as_secs_f64();
    assert!(
        (watts - 20.0).abs() < 4.0,
        "{watts:.2} W across four wraps of a 20 W meter (±1 interval of 6 s)"
    );
    let _ = finish(agent);
}

/// Without privileges the agent falls back to /proc by itself, says so with the fix, and
/// labels its figures reduced (run as nobody through setpriv when we are root).
#[test]
#[ignore = "live: the agent on the real kernel (root)"]
fn without_privileges_the_agent_says_it_is_reduced() {
    if !is_root() {
        powerlens_sys::skip_test!("needs root to become nobody (setpriv)");
        return;
    }
    let _serial = serial();
    let port = free_port();
    let mut child = Reaped::new(
        Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                BIN,
                "agent",
                "--listen",
                &format!("127.0.0.1:{port}"),
            ])
            .env_remove("POWERLENS_SYSFS_ROOT")
            .env_remove("POWERLENS_PROCFS_ROOT")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    wait_healthy(port, &mut child);
    std::thread::sleep(Duration::from_millis(1500));
    let (_, body) = get(port, "/metrics", None).unwrap();
    let stderr = finish(child);
    assert!(body.contains("mode=\"reduced\""), "{body}");
    assert!(
        !body.contains("powerlens_process_wakeups_total"),
        "no wake-ups when reduced"
    );
    assert!(
        body.contains("powerlens_process_cpu_seconds_total{"),
        "{body}"
    );
    assert!(
        stderr.contains("REDUCED") && stderr.contains("root or with CAP_PERFMON"),
        "{stderr}"
    );
}
