//! `powerlens record` and `report` against outside oracles: the kernel's own per-thread
//! context-switch counts (getrusage, as the workloads print them), `perf sched timehist`
//! recorded on the same run, and a fake meter of known power. Live tests need root (the
//! tracepoints); they print why when they skip.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use powerlens_sys::fixture::FakeMeter;
use serde_json::Value;

mod common;
use common::{
    is_root, json, live_recording, recording_diagnostics, serial, stderr, wakeups_per_second,
    with_tracefs,
};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_powerlens")
}

/// The binary on the real machine (no fixture roots).
fn live() -> Command {
    let mut c = Command::new(bin());
    c.env_remove("POWERLENS_SYSFS_ROOT")
        .env_remove("POWERLENS_PROCFS_ROOT");
    c
}

fn ok(o: &Output) -> &Output {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        stderr(o)
    );
    o
}

/// `report --json` of a recording, by thread.
fn report_json(rec: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["report", rec.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    json(ok(&live().args(&args).output().unwrap()))
}

/// The report's row of thread `tid`.
fn thread_row(report: &Value, tid: u64) -> &Value {
    report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["tid"] == tid)
        .unwrap_or_else(|| panic!("no row for tid {tid} in {report:#}"))
}

/// A workload's own account of its threads (getrusage RUSAGE_THREAD at each thread's end):
/// (tid, voluntary, involuntary, cpu_s).
fn workload_threads(stdout: &[u8]) -> Vec<(u64, u64, u64, f64)> {
    let v: Value = serde_json::from_slice(stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(stdout)));
    v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["tid"].as_u64().unwrap(),
                t["voluntary_switches"].as_u64().unwrap(),
                t["involuntary_switches"].as_u64().unwrap(),
                t["cpu_s"].as_f64().unwrap(),
            )
        })
        .collect()
}

fn scratch() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("r.rec");
    (dir, rec)
}

/// Per-thread synchronization and preemption switch counts from the trace equal the
/// kernel's own voluntary and nonvoluntary counts for every worker thread. Every worker of
/// one recording of each of two workloads (a two-thread barrier, a ping-pong) may count
/// one switch of each kind above the kernel's and none below: the one a thread may make
/// after its last getrusage ([`assert_switches_are_the_kernels`]).
#[test]
#[ignore = "live: records the real kernel (root)"]
fn live_switch_counts_equal_the_kernels() {
    let Some(_serial) = live_recording() else {
        return;
    };
    for workload in [
        &[
            "barrier",
            "--threads",
            "2",
            "--iterations",
            "400",
            "--work",
            "40",
        ][..],
        &["pingpong", "--iterations", "2000"][..],
    ] {
        let (_dir, rec) = scratch();
        let mut args = vec![
            "record",
            "--no-stacks", // see record_live
            "-o",
            rec.to_str().unwrap(),
            "--",
            bin(),
            "workload",
        ];
        args.extend_from_slice(workload);
        args.push("--json");
        let out = live().args(&args).output().unwrap();
        ok(&out);
        assert!(
            !stderr(&out).contains("REDUCED"),
            "tracing was not possible: {}",
            stderr(&out)
        );
        let report = report_json(&rec, &[]);
        for (tid, voluntary, involuntary, _) in workload_threads(&out.stdout) {
            let row = thread_row(&report, tid);
            eprintln!(
                "{workload:?} tid {tid}: sync {} (kernel {voluntary}), preempt {} (kernel {involuntary})",
                row["sync_switches"], row["preempt_switches"]
            );
            let label = format!("{workload:?} tid {tid}");
            assert_switches_are_the_kernels(&report, row, voluntary, involuntary, &label);
        }
    }
}

/// A thread row's switches against the kernel's counts of them (getrusage). The workload
/// reads getrusage as each thread's last act; the thread's way out (unmapping its stack,
/// releasing its mm) may still block or be preempted once after that, which the trace
/// sees and the snapshot cannot. Never fewer. `row` is of `report`, whose diagnostics a
/// failure prints.
fn assert_switches_are_the_kernels(
    report: &Value,
    row: &Value,
    voluntary: u64,
    involuntary: u64,
    label: &str,
) {
    let (sync, preempt) = (
        row["sync_switches"].as_u64().unwrap(),
        row["preempt_switches"].as_u64().unwrap(),
    );
    let diag = recording_diagnostics(report);
    assert!(
        (voluntary..=voluntary + 1).contains(&sync),
        "{label}: sync {sync} vs {voluntary}; {diag}"
    );
    assert!(
        (involuntary..=involuntary + 1).contains(&preempt),
        "{label}: preempt {preempt} vs {involuntary}; {diag}"
    );
    assert!(
        sync + preempt <= voluntary + involuntary + 1,
        "{label}: at most one switch after the snapshot; {diag}"
    );
}

/// One row of `perf sched timehist -s --state`'s wait-time summary, in seconds.
#[derive(Debug, Clone, Copy)]
struct PerfTask {
    run: f64,
    sleep: f64,
    iowait: f64,
    preempt: f64,
    delay: f64,
}

/// Rows of the wait-time summary by tid: `comm[tid/pid] parent count run sleep iowait
/// preempt delay` (milliseconds).
fn perf_timehist(data: &Path) -> std::collections::HashMap<u64, PerfTask> {
    let out = Command::new("perf")
        .args(["sched", "timehist", "-s", "--state", "-i"])
        .arg(data)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let mut rows = std::collections::HashMap::new();
    for line in text.lines() {
        let Some(open) = line.rfind('[') else {
            continue;
        };
        let Some(close) = line[open..].find(']') else {
            continue;
        };
        let ids = &line[open + 1..open + close];
        let Ok(tid) = ids.split('/').next().unwrap().parse::<u64>() else {
            continue;
        };
        let numbers: Vec<f64> = line[open + close + 1..]
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        if numbers.len() == 7 {
            let ms = |i: usize| numbers[i] / 1e3;
            rows.insert(
                tid,
                PerfTask {
                    run: ms(2),
                    sleep: ms(3),
                    iowait: ms(4),
                    preempt: ms(5),
                    delay: ms(6),
                },
            );
        }
    }
    rows
}

/// The scheduling delay before each task's first run (its creation delay, seconds), from
/// `perf sched timehist`'s per-switch lines: `time [cpu] comm[tid/pid] wait sch-delay run`.
fn perf_first_delays(data: &Path) -> std::collections::HashMap<u64, f64> {
    let out = Command::new("perf")
        .args(["sched", "timehist", "-i"])
        .arg(data)
        .output()
        .unwrap();
    let mut first = std::collections::HashMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(open) = line.rfind('[') else {
            continue;
        };
        let Some(close) = line[open..].find(']') else {
            continue;
        };
        let Some(Ok(tid)) = line[open + 1..open + close]
            .split_once('/')
            .map(|(t, _)| t.parse::<u64>())
        else {
            continue;
        };
        let numbers: Vec<f64> = line[open + close + 1..]
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        if numbers.len() == 3 {
            first.entry(tid).or_insert(numbers[1] / 1e3);
        }
    }
    first
}

/// What `perf sched timehist` leaves out of a task that exits: its switch-out at exit is
/// sampled after the task is gone (tid -1 in `perf script`), so timehist has no line for
/// the last run nor for the off-CPU interval before it, which can be more than the
/// comparison allows. Computed here from perf's own raw events: per tid, the run from the
/// last switch-in to the exit switch-out, and the off-CPU time before it, blocked until the
/// wake-up and runnable after it (all runnable when it was preempted).
#[derive(Debug, Default, Clone, Copy)]
struct PerfExitTail {
    run: f64,
    wait: f64,
    inactive: f64,
}

fn perf_exit_tails(data: &Path) -> std::collections::HashMap<u64, PerfExitTail> {
    let out = Command::new("perf")
        .args(["script", "-F", "time,event,trace", "-i"])
        .arg(data)
        .output()
        .unwrap();
    let field = |line: &str, key: &str| -> Option<String> {
        let start = line.find(key)? + key.len();
        line[start..].split_whitespace().next().map(str::to_string)
    };
    // Per tid: (last switch-out time, preempted?), last wake-up, last switch-in.
    let mut out_at = std::collections::HashMap::<u64, (f64, bool)>::new();
    let mut woken_at = std::collections::HashMap::<u64, f64>::new();
    let mut in_at = std::collections::HashMap::<u64, f64>::new();
    let mut tails = std::collections::HashMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(Ok(time)) = line.split_once(':').map(|(t, _)| t.trim().parse::<f64>()) else {
            continue;
        };
        let tid = |key| field(line, key).and_then(|v| v.parse::<u64>().ok());
        if line.contains("sched:sched_waking:") {
            if let Some(t) = tid(" pid=") {
                woken_at.insert(t, time);
            }
        } else if line.contains("sched:sched_switch:") {
            let (Some(prev), Some(next)) = (tid("prev_pid="), tid("next_pid=")) else {
                continue;
            };
            let state = field(line, "prev_state=").unwrap_or_default();
            if state.starts_with('X') {
                if let (Some(&start), Some(&(off, preempted))) =
                    (in_at.get(&prev), out_at.get(&prev))
                {
                    let woken = woken_at
                        .get(&prev)
                        .copied()
                        .filter(|&w| (off..=start).contains(&w));
                    let runnable_from = if preempted {
                        off
                    } else {
                        woken.unwrap_or(start)
                    };
                    tails.insert(
                        prev,
                        PerfExitTail {
                            run: time - start,
                            wait: runnable_from - off,
                            inactive: start - runnable_from,
                        },
                    );
                }
            } else {
                out_at.insert(prev, (time, state.starts_with('R')));
            }
            in_at.insert(next, time);
        }
    }
    tails
}

fn within(ours: f64, theirs: f64, relative: f64, absolute: f64) -> bool {
    (ours - theirs).abs() <= (relative * theirs.abs()).max(absolute)
}

/// Per-task run, wait and runnable times agree within 2% with `perf sched timehist`
/// recorded on the same run. The workload is pinned to cpu0: this project's VMs drop trace
/// events in the idle task's context on cpu1 (docs/COLLECTOR.md), which perf and powerlens
/// would account differently (powerlens infers the lost switch-ins; perf charges the gap).
/// timehist drops each task's last run and the off-CPU time before it (the exit switch is
/// sampled with tid -1); that tail is taken from perf's raw events and added back.
///
/// Now and then, more often under load, the kernel drops a switch-in of a workload thread
/// on cpu0 too, for perf and powerlens alike: the thread is seen switching out while
/// another task was current. perf then charges the whole gap since that task's switch-in
/// as the thread's run; powerlens places the lost switch-in by the scheduler's own runtime
/// account and leaves the time before it runnable, which can be more than the comparison
/// of runnable times allows. The blocked time and the sum of run and runnable time agree either way.
/// The split is compared with perf's for a thread with no switch-in inferred (its row's
/// `inferred_switch_ins`); otherwise the run is compared with the scheduler's own account
/// (`cpu_time_s`), and perf's run bounds ours from above and its runnable time ours from
/// below. Each of the two workers of one recording is held to its own figures: 2% of
/// perf's or 0.5 ms (0.2 ms for the run), 3% or 0.2 ms of the scheduler's account.
#[test]
#[ignore = "live: records the real kernel (root)"]
fn live_times_agree_with_perf_sched_timehist() {
    if Command::new("perf").arg("--version").output().is_err() {
        powerlens_sys::skip_test!(
            "perf is not installed (Debian: linux-perf; scripts/test.sh installs it)"
        );
        return;
    }
    let Some(_serial) = live_recording() else {
        return;
    };
    let (dir, rec) = scratch();
    let data = dir.path().join("perf.data");
    let out = with_tracefs(
        &[
            "perf",
            "sched",
            "record",
            "-q",
            "-o",
            data.to_str().unwrap(),
            "--",
            bin(),
            "record",
            "--no-stacks", // see record_live
            "-o",
            rec.to_str().unwrap(),
            "--",
            "taskset",
            "-c",
            "0",
            bin(),
            "workload",
            "barrier",
            "--threads",
            "2",
            "--iterations",
            "300",
            "--work",
            "200",
            "--json",
        ],
        &[],
    );
    ok(&out);
    let report = report_json(&rec, &[]);
    let diag = recording_diagnostics(&report);
    let perf = perf_timehist(&data);
    let first_delays = perf_first_delays(&data);
    let exit_tails = perf_exit_tails(&data);
    for (tid, _, _, _) in workload_threads(&out.stdout) {
        let row = thread_row(&report, tid);
        let p = perf
            .get(&tid)
            .unwrap_or_else(|| panic!("perf has no row for {tid}: {perf:?}"));
        // perf's run time is the switch intervals: compare it with ours, `on_cpu_s`
        // (`cpu_time_s` is the scheduler's account; see the test after this one).
        let (run, wait, inactive) = (
            row["on_cpu_s"].as_f64().unwrap(),
            row["wait_time_s"].as_f64().unwrap(),
            row["inactive_time_s"].as_f64().unwrap(),
        );
        let (scheduler, inferred) = (
            row["cpu_time_s"].as_f64().unwrap(),
            row["inferred_switch_ins"].as_u64().unwrap(),
        );
        // perf's sleep/iowait/preempt are whole off-CPU intervals between a switch-out and
        // the next switch-in, by the state the task left in; its delay is the runnable tail
        // after each wake-up, the first one (creation to first run) included. So blocked
        // time is sleep + iowait − (delay − creation delay), and runnable-not-running time
        // is delay + preempt.
        // The exit tail timehist leaves out is added back (see PerfExitTail).
        let creation = first_delays.get(&tid).copied().unwrap_or(0.0);
        let tail = exit_tails.get(&tid).copied().unwrap_or_default();
        let perf_run = p.run + tail.run;
        let perf_wait = p.sleep + p.iowait - (p.delay - creation) + tail.wait;
        let perf_inactive = p.delay + p.preempt + tail.inactive;
        eprintln!(
            "tid {tid}: run {run:.6} s (perf {perf_run:.6}, scheduler {scheduler:.6}), wait {wait:.6} s (perf {perf_wait:.6}), inactive {inactive:.6} s (perf {perf_inactive:.6}); perf {p:?}, exit tail {tail:?}; {inferred} switch-ins inferred"
        );
        assert!(
            within(wait, perf_wait, 0.02, 0.000_5),
            "wait time, tid {tid}; {diag}"
        );
        assert!(
            within(run + inactive, perf_run + perf_inactive, 0.02, 0.000_5),
            "run + runnable time, tid {tid}; {diag}"
        );
        if inferred == 0 {
            assert!(
                within(run, perf_run, 0.02, 0.000_2),
                "run time, tid {tid}; {diag}"
            );
            assert!(
                within(inactive, perf_inactive, 0.02, 0.000_5),
                "inactive time, tid {tid}; {diag}"
            );
        } else {
            assert!(
                within(run, scheduler, 0.03, 0.000_2),
                "run time against the scheduler's, tid {tid}; {diag}"
            );
            assert!(
                run <= perf_run + 0.000_2,
                "run time above perf's, tid {tid}; {diag}"
            );
            assert!(
                inactive >= perf_inactive - 0.000_5,
                "inactive time below perf's, tid {tid}; {diag}"
            );
        }
    }
}

/// A live recording of `workload pingpong` with ping pinned to cpu0 and pong to cpu1
/// (`spinner`: a busy thread beside pong): the workload's JSON and the report's. `None`,
/// saying why, without root or on fewer than two CPUs.
fn record_pinned_pingpong(iterations: &str, spinner: bool) -> Option<(Value, Value)> {
    let _serial = live_recording()?;
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        powerlens_sys::skip_test!("needs two CPUs (ping on cpu0, pong on cpu1)");
        return None;
    }
    let (_dir, rec) = scratch();
    let mut command = vec![
        bin(),
        "workload",
        "pingpong",
        "--iterations",
        iterations,
        "--pin",
        "0,1",
        "--json",
    ];
    if spinner {
        command.extend(["--spinner", "1"]);
    }
    let out = record_live(&rec, &[], &command, &[]);
    ok(&out);
    let workload = serde_json::from_slice(&out.stdout).unwrap();
    Some((workload, report_json(&rec, &[])))
}

/// Issue 28: the report charges each thread the tracing its own events cost. The kernel
/// counted every switch-out of ping and pong (getrusage), each one traced in the thread's
/// context at the cost the recording measured for a switch when it started: their rows'
/// `tracing_cpu_s` is at least that (other events add to it: wake-ups, runtime updates,
/// CPU-time samples) and at most the thread's CPU time; the process row sums its threads,
/// the whole recording holds the process, and the perturbation line is the target's.
/// Each player of one recording (5000 round trips) may fall 2% short of its switches'
/// cost: this VM drops a switch on cpu0 now and then (docs/COLLECTOR.md).
#[test]
#[ignore = "live: records the real kernel (root)"]
fn live_tracing_cost_covers_each_threads_own_switches() {
    let Some((workload, report)) = record_pinned_pingpong("5000", false) else {
        return;
    };
    let diag = recording_diagnostics(&report);
    let switch_ns = report["system"]["tracing_event_cost_ns"]["sched_switch"]
        .as_f64()
        .expect("the recording measured the cost of a switch");
    assert!(switch_ns > 0.0, "{switch_ns}; {diag}");
    let mut sum = 0.0;
    for t in workload["threads"].as_array().unwrap() {
        let row = thread_row(&report, t["tid"].as_u64().unwrap());
        let switches =
            t["voluntary_switches"].as_f64().unwrap() + t["involuntary_switches"].as_f64().unwrap();
        let (tracing, cpu) = (
            row["tracing_cpu_s"].as_f64().unwrap(),
            row["cpu_time_s"].as_f64().unwrap(),
        );
        assert!(
            tracing >= 0.98 * switches * switch_ns / 1e9 && tracing <= cpu,
            "{}: tracing {tracing} s for {switches} switches at {switch_ns} ns, CPU {cpu} s; {diag}",
            t["name"]
        );
        sum += tracing;
    }
    let first_tid = workload["threads"][0]["tid"].as_u64().unwrap();
    let pid = thread_row(&report, first_tid)["pid"].clone();
    let process = report["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap();
    let process_tracing = process["tracing_cpu_s"].as_f64().unwrap();
    assert!(
        process_tracing >= sum * 0.999,
        "{process_tracing} < {sum}; {diag}"
    );
    let whole = report["system"]["tracing_cpu_s"].as_f64().unwrap();
    assert!(
        whole >= process_tracing,
        "{whole} < {process_tracing}; {diag}"
    );
    let p = &report["system"]["perturbation"];
    assert!(
        p["tracing_cpu_s"].as_f64().unwrap() >= process_tracing * 0.999,
        "{p}; {diag}"
    );
    assert!(
        p["text"]
            .as_str()
            .unwrap()
            .starts_with("tracing cost the target an estimated"),
        "{p}"
    );
    // The recorder's own threads are recorded like any other: what they ran beside the
    // target is said, within the CPUs' busy time.
    let recorder = p["recorder_cpu_s"]
        .as_f64()
        .expect("the recording names its recorder");
    let busy = report["system"]["busy_s"].as_f64().unwrap();
    assert!(
        recorder > 0.0 && recorder < busy,
        "{recorder} of {busy}: {p}; {diag}"
    );
    // A command's recording: the recorder ran beside it, not inside it.
    assert_eq!(p["recorder_in_target"], false, "{p}");
    // The calibration's confidence interval of a switch's cost holds its figure, and the
    // estimate's interval holds the estimate; the line says it.
    let [low, high] = [0, 1].map(|i| {
        report["system"]["tracing_event_cost_interval_ns"]["sched_switch"][i]
            .as_f64()
            .expect("a switch's cost has a confidence interval")
    });
    assert!(
        low <= switch_ns && switch_ns <= high,
        "{low} {switch_ns} {high}; {diag}"
    );
    let estimate = p["tracing_cpu_s"].as_f64().unwrap();
    let [low, high] = [0, 1].map(|i| p["tracing_cpu_interval_s"][i].as_f64().unwrap());
    assert!(
        low <= estimate && estimate <= high,
        "{low} {estimate} {high}: {p}; {diag}"
    );
    assert!(
        p["text"]
            .as_str()
            .unwrap()
            .contains("within the calibration's confidence intervals"),
        "{p}"
    );
}

/// Issue 28: a default recording collects the scheduler's switches, wake-ups and CPU-time
/// updates in the kernel (BPF) where the kernel has BTF, says so in its tracing path, and
/// still counts every switch the kernel counted (getrusage, in the workload's JSON) with
/// the stacks on; `--perf-rings` takes them through perf rings. With POWERLENS_PERF_RINGS
/// set (the suite's second pass over the oracle tests) both are perf rings. A kernel
/// without BTF must give the reason in the recording's `in_kernel` metadata. Over one
/// recording each way, no record may be lost, each player's switches are the kernel's or
/// one more ([`assert_switches_are_the_kernels`]), and its CPU time is its own clock's
/// within 2% (or 0.2 ms) below and 2% (or 0.5 ms) above, for its tail after its last
/// reading.
#[test]
#[ignore = "live: records the real kernel (root)"]
fn live_the_schedulers_events_are_collected_in_the_kernel_unless_told_not_to() {
    let Some(_serial) = live_recording() else {
        return;
    };
    let forced = std::env::var_os("POWERLENS_PERF_RINGS").is_some();
    let btf = Path::new("/sys/kernel/btf/vmlinux").exists();
    // The program starts on CPU 1 and its players run on CPU 0, so that its exec and
    // mappings are in one CPU's records and its stacks in the other's: the drain decodes
    // them CPU by CPU, and this short program has exited by then (see the end).
    let two_cpus = std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2);
    let mut command = if two_cpus {
        vec!["taskset", "-c", "1"]
    } else {
        vec![]
    };
    command.extend([
        bin(),
        "workload",
        "pingpong",
        "--iterations",
        "3000",
        "--pin",
        "0,0",
        "--json",
    ]);
    for perf_rings in [false, true] {
        let (_dir, rec) = scratch();
        let mut args = vec![bin(), "record", "-o", rec.to_str().unwrap()];
        if perf_rings {
            args.push("--perf-rings");
        }
        args.push("--");
        args.extend_from_slice(&command);
        let out = with_tracefs(&args, &[]);
        let workload: Value = serde_json::from_slice(&ok(&out).stdout).unwrap();
        let report = report_json(&rec, &[]);
        let diag = recording_diagnostics(&report);
        let path = &report["system"]["tracing_path"];
        let in_kernel = !perf_rings && !forced && btf;
        if in_kernel {
            assert_eq!(path["events"], "bpf", "{diag}\n{}", stderr(&out));
            let events: Vec<&str> = path["in_kernel_events"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e.as_str().unwrap())
                .collect();
            assert_eq!(
                events,
                [
                    "sched/sched_switch",
                    "sched/sched_waking",
                    "sched/sched_stat_runtime"
                ],
                "{diag}"
            );
        } else {
            assert_eq!(path["events"], "perf_ring", "{diag}");
            assert!(
                path.get("in_kernel_events").is_none(),
                "in_kernel_events {}; {diag}",
                path["in_kernel_events"]
            );
        }
        assert_eq!(path["stack_unwinding"], "stack_copy", "{diag}");
        // Every record read: this burst writes about 70 MB/s into one CPU's ring, and a
        // copier too slow for it loses records, the players' switches among them.
        assert_eq!(
            report["system"]["lost_records"],
            0,
            "in the kernel: {in_kernel}; {diag}\n{}",
            stderr(&out)
        );
        for t in workload["threads"].as_array().unwrap() {
            let row = thread_row(&report, t["tid"].as_u64().unwrap());
            let kernel = |k: &str| t[k].as_u64().unwrap();
            assert_switches_are_the_kernels(
                &report,
                row,
                kernel("voluntary_switches"),
                kernel("involuntary_switches"),
                &format!("in the kernel: {in_kernel}: {t}"),
            );
            let (ours, kernel) = (
                row["cpu_time_s"].as_f64().unwrap(),
                t["cpu_clock_s"].as_f64().unwrap(),
            );
            // 2%, or 0.2 ms of a thread this short (6 ms), under its own clock; over it
            // also by its tail: it reads its clock before it returns and exits, which the
            // trace counts too, so up to 0.5 ms more.
            assert!(
                ours >= kernel * 0.98 - 0.000_2 && ours <= kernel * 1.02 + 0.000_5,
                "{in_kernel}: {ours} vs {kernel}; {diag}"
            );
        }
        // The players' switches are charged to the program's own functions (sampled
        // stacks, unwound from the copies taken in the kernel, or every stack through perf
        // rings), also when a stack of the program's launcher (`taskset`, or the
        // recorder's own child before the exec) is decoded after the exec: the unwinder
        // then re-reads `/proc/PID/maps`, empty for a program that has exited and is not
        // yet reaped, and must keep the mappings its records gave (CHANGELOG).
        let grid = report_json(&rec, &["--by", "function"]);
        let own: u64 = grid["functions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["module"].as_str().unwrap_or("").ends_with("/powerlens"))
            .map(|f| f["sync_switches"].as_u64().unwrap())
            .sum();
        assert!(
            own > 0,
            "{in_kernel}: {:#}\n{diag}\nunwind: {}\nrecorder: {}",
            grid["functions"],
            sql(&rec, "SELECT value FROM meta WHERE key = 'unwind'"),
            stderr(&out)
        );
    }
}

/// Issue 28: the report's estimate of what tracing cost the traced threads against what
/// recording added to them, measured: the same pinned ping-pong (ping, pong and a spinner
/// on cpu0) run bare and recorded in turns, ping's and pong's CPU time read by each thread
/// (CLOCK_THREAD_CPUTIME_ID, the workload's JSON), and their rows' `tracing_cpu_s` against
/// the difference. The spinner is left out: it spins for as long as the slowed run lasts,
/// so its added CPU time is its share of a longer run, not the cost of its events.
///
/// The issue's bound is 25%, which the benchmark (scripts/bench-observer.sh, 7 rounds)
/// checks. Here the median ratio of 11 rounds on a shared VM, at least 8 of which must
/// have added CPU time, lies within 0.6–2.0: what recording adds, a few tens of
/// milliseconds, moves by up to 3× from round to round beside other work, and collected in
/// the kernel the estimate reads high, since the calibration's bare runs have no program
/// attached and no kind costs less than its program's kernel-timed run time (which holds
/// part of the timing's own cost). A calibration that reads half the cost or less still
/// fails it. The ratios measured are in docs/PERFORMANCE.md ("What the live tests
/// measured"). `--no-stacks`, as every live test here records (see `record_live`).
#[test]
#[ignore = "live: records the real kernel (root)"]
fn live_tracing_cost_estimate_holds_what_recording_adds() {
    let Some(_serial) = live_recording() else {
        return;
    };
    let command = [
        bin(),
        "workload",
        "pingpong",
        "--iterations",
        "20000",
        "--pin",
        "0,0",
        "--spinner",
        "0",
        "--json",
    ];
    let players = |workload: &Value| -> f64 {
        workload["threads"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["name"] != "spinner")
            .map(|t| t["cpu_clock_s"].as_f64().unwrap())
            .sum()
    };
    // A calibration of this test's own, made at its first round and kept for the rest:
    // one kept from earlier in the boot (another run, another moment) read 2× the cost
    // in one fresh-clone run (median ratio 2.02).
    let costs = tempfile::tempdir().unwrap();
    let costs_env = [("POWERLENS_COST_CACHE_DIR", costs.path())];
    let (mut ratios, mut diags) = (Vec::new(), Vec::new());
    for round in 0..11 {
        let bare_run = || -> f64 {
            let out = live().args(&command[1..]).output().unwrap();
            players(&serde_json::from_slice(&ok(&out).stdout).unwrap())
        };
        let (_dir, rec) = scratch();
        let bare_first = round % 2 == 0;
        let mut bare = if bare_first { bare_run() } else { 0.0 };
        let out = record_live(&rec, &[], &command, &costs_env);
        let workload: Value = serde_json::from_slice(&ok(&out).stdout).unwrap();
        if !bare_first {
            bare = bare_run();
        }
        let report = report_json(&rec, &[]);
        let estimated: f64 = workload["threads"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["name"] != "spinner")
            .map(|t| {
                thread_row(&report, t["tid"].as_u64().unwrap())["tracing_cpu_s"]
                    .as_f64()
                    .unwrap()
            })
            .sum();
        let added = players(&workload) - bare;
        eprintln!("round {round}: added {added:.4} s, estimated {estimated:.4} s");
        diags.push(format!("round {round}: {}", recording_diagnostics(&report)));
        if added > 0.0 {
            ratios.push(estimated / added);
        }
    }
    let diags = diags.join("\n");
    assert!(
        ratios.len() >= 8,
        "recording added no CPU time: {ratios:?}\n{diags}"
    );
    ratios.sort_by(f64::total_cmp);
    let median = ratios[ratios.len() / 2];
    assert!(
        (0.6..=2.0).contains(&median),
        "estimated / added: median {median:.2} of {ratios:.2?}\n{diags}"
    );
}

/// Issue 28: `--untraced-runs` runs the command untraced before recording it, and the
/// report sets the recorded run's CPU time against theirs. Oracles: a one-thread spin of
/// 150 ms uses about 150 ms of CPU time untraced (its own clock, and the kernel's getrusage
/// of the process); the recorded run's figure is getrusage of the command, which holds
/// its thread's own account (RUSAGE_THREAD, as the workload prints it) and little more; its
/// wall time holds the spin's own. In one recording, each of the 3 untraced runs reads
/// 0.14–0.20 s of CPU time, the recorded run at most 30 ms above its thread's account and
/// its wall time at most 0.25 s above the spin's (the process's start and exit).
#[test]
#[ignore = "live: records the real kernel (root)"]
fn live_untraced_runs_set_what_recording_added_beside_the_estimate() {
    let Some(_serial) = live_recording() else {
        return;
    };
    // A spin of 150 ms wall time is 150 ms of CPU time only on a CPU of its own.
    if !powerlens_sys::fixture::needs_idle_cpus() {
        return;
    }
    let (_dir, rec) = scratch();
    let command = [
        bin(),
        "workload",
        "spin",
        "--threads",
        "1",
        "--duration",
        "150ms",
        "--json",
    ];
    let out = record_live(&rec, &["--untraced-runs", "3"], &command, &[]);
    let err = stderr(ok(&out));
    for k in 1..=3 {
        assert!(
            err.contains(&format!("running the command untraced, {k} of 3")),
            "{err}"
        );
    }
    // The recorded run's output is shown, the untraced runs' are not: one JSON object.
    let workload: Value = serde_json::from_slice(&out.stdout).unwrap();
    let own: f64 = workload["threads"][0]["cpu_s"].as_f64().unwrap();
    let report = report_json(&rec, &[]);
    let diag = recording_diagnostics(&report);
    let u = &report["system"]["perturbation"]["untraced_runs"];
    assert_eq!(u["runs"], 3, "{u}");
    for (cpu_s, wall_s) in u["cpu_s"]
        .as_array()
        .unwrap()
        .iter()
        .zip(u["wall_s"].as_array().unwrap())
    {
        let (cpu_s, wall_s) = (cpu_s.as_f64().unwrap(), wall_s.as_f64().unwrap());
        assert!(
            (0.14..0.20).contains(&cpu_s),
            "an untraced run: {u}; {diag}"
        );
        assert!(
            wall_s >= 0.15 && wall_s >= cpu_s * 0.9,
            "an untraced run: {u}; {diag}"
        );
    }
    let recorded = u["recorded_cpu_s"].as_f64().unwrap();
    assert!(
        recorded >= own && recorded <= own + 0.03,
        "recorded {recorded} s against the thread's own {own} s: {u}; {diag}"
    );
    // Its wall time holds the spin's own (the workload's clock, inside the process) and
    // the process's start and exit, and ends within the recording; it was taken at the
    // exit, not when the recorder's loop noticed it (the exec tests check that apart).
    let wall = u["recorded_wall_s"].as_f64().unwrap();
    let spun = workload["wall_s"].as_f64().unwrap();
    let elapsed = report["system"]["elapsed_s"].as_f64().unwrap();
    assert!(
        wall >= spun && wall <= spun + 0.25 && wall <= elapsed,
        "recorded wall {wall} s, spin {spun} s, recording {elapsed} s: {u}; {diag}"
    );
    assert_eq!(u["failed_runs"], 0);
    assert!(u["text"]
        .as_str()
        .unwrap()
        .starts_with("measured against 3 untraced runs of the command (getrusage)"));
    // Runs that do not read leave the comparison out, and the report says why.
    let damaged = Command::new("sqlite3")
        .arg(&rec)
        .arg(r#"UPDATE meta SET value = '[{"cpu_s": "fast"}]' WHERE key = 'untraced_runs';"#)
        .status();
    match damaged {
        Ok(s) if s.success() => {
            let report = report_json(&rec, &[]);
            assert!(report["system"]["perturbation"]
                .get("untraced_runs")
                .is_none());
            let said = report["unavailable"]
                .as_array()
                .unwrap()
                .iter()
                .find(|u| u["figure"].as_str().unwrap().contains("untraced_runs"))
                .unwrap_or_else(|| panic!("no reason in {:#}", report["unavailable"]));
            assert!(
                said["reason"]
                    .as_str()
                    .unwrap()
                    .starts_with("the recording's untraced runs do not read"),
                "{said}"
            );
        }
        _ => eprintln!("skipped the damaged case: sqlite3 is not installed"),
    }
}

/// Ctrl-C (here SIGINT to powerlens alone) during the untraced runs stops the running
/// command and the recording, says so, and leaves no file: nothing was recorded yet.
#[test]
#[ignore = "live: records the real kernel (root)"]
fn an_interrupt_during_the_untraced_runs_stops_them_and_records_nothing() {
    let (_dir, rec) = scratch();
    let child = live()
        .args([
            "record",
            "-o",
            rec.to_str().unwrap(),
            "--untraced-runs",
            "3",
            "--",
            "sleep",
            "30",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let sleeper = child_named(child.id(), "sleep");
    sigint(child.id());
    let out = wait_within(child, std::time::Duration::from_secs(10));
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("interrupted during the command's untraced runs (--untraced-runs): nothing was recorded"),
        "{err}"
    );
    assert!(!err.contains("untraced, 2 of 3"), "{err}");
    assert!(!std::path::Path::new(&format!("/proc/{sleeper}")).exists());
    assert!(!rec.exists());
}

/// `--untraced-runs` needs a command it can run again: refused for -p and -a, before
/// anything is recorded.
#[test]
fn untraced_runs_need_a_command() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("r.rec");
    let targets: [&[&str]; 2] = [&["-a", "--duration", "1"], &["-p", "1", "--duration", "1"]];
    for target in targets {
        let out = live()
            .args([
                "record",
                "-o",
                rec.to_str().unwrap(),
                "--untraced-runs",
                "2",
            ])
            .args(target)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("--untraced-runs") && err.contains("cannot be used with"),
            "{err}"
        );
        assert!(!rec.exists());
    }
}

/// Issue 14's oracle: a ping-pong pinned to cpu0 and cpu1, with a spinner sharing cpu1.
/// Every thread's `cpu_time_s` is its own CLOCK_THREAD_CPUTIME_ID (read by the thread at
/// its end) within 2%. On this project's VMs the switch intervals split cpu1 differently
/// (pong 0.23 s against the kernel's 0.50 s, the spinner the difference): that figure is
/// `on_cpu_s`, and the report must not mix the two. Each of the three threads of one
/// recording is held to 2% of its clock with no absolute slack: both figures are the
/// scheduler's account of the same run.
#[test]
#[ignore = "live: records the real kernel (root)"]
fn live_cpu_time_is_the_kernels_on_a_cpu_shared_with_a_spinner() {
    let Some((workload, report)) = record_pinned_pingpong("12000", true) else {
        return;
    };
    let diag = recording_diagnostics(&report);
    let threads = workload["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 3, "ping, pong and the spinner: {workload}");
    for t in threads {
        let (tid, name) = (t["tid"].as_u64().unwrap(), t["name"].as_str().unwrap());
        let clock = t["cpu_clock_s"].as_f64().unwrap();
        let row = thread_row(&report, tid);
        let (ours, on_cpu) = (
            row["cpu_time_s"].as_f64().unwrap(),
            row["on_cpu_s"].as_f64().unwrap(),
        );
        eprintln!(
            "{name} ({tid}): cpu_time_s {ours:.6} (CLOCK_THREAD_CPUTIME_ID {clock:.6}), on_cpu_s {on_cpu:.6}"
        );
        assert_eq!(row["cpu_time_source"], "sched_runtime", "{name}; {diag}");
        assert!(
            within(ours, clock, 0.02, 0.0),
            "{name}: {ours} vs {clock}; {diag}"
        );
    }
    // Issue 17 point 3, the invariants a user checks by eye, on a live recording: the
    // switch intervals add up to the CPUs' busy time exactly; the scheduler's account
    // differs by what the report states; the energy parts add up to the total.
    let accounts = &report["system"]["cpu_time_accounts"];
    let f = |v: &Value| v.as_f64().unwrap();
    assert!(
        (f(&accounts["on_cpu_s"]) - f(&report["system"]["busy_s"])).abs() < 1e-6,
        "{accounts}; {diag}"
    );
    assert!(
        (f(&accounts["cpu_time_s"]) - f(&accounts["busy_s"]) - f(&accounts["difference_s"])).abs()
            < 1e-9,
        "{accounts}; {diag}"
    );
    let explanation = accounts["explanation"].as_str().unwrap();
    assert!(
        explanation.contains("adds up to")
            || explanation.contains(&format!("{:.3} s", f(&accounts["difference_s"]).abs())),
        "the difference is stated: {explanation}"
    );
    let e = &report["energy"];
    let rows: f64 = report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["energy_j"].as_f64())
        .sum();
    let parts = f(&e["idle_j"]) + f(&e["other_j"]) + rows;
    assert!(
        (parts - f(&e["total_j"])).abs() <= 1e-9 * f(&e["total_j"]),
        "{e}; {diag}"
    );
}

/// Issue 14: an empty trace-residency cell has its reason beside it, in JSON
/// (`cpus[].idle_trace_unavailable`) and in text (a `cpuN trace n/a:` line under the
/// table), with the cpuidle sysfs count that shows the CPU did idle. On this project's VMs
/// cpu1 fires no power:cpu_idle while sysfs counts its entries; on a machine that delivers
/// every CPU's records the check runs the other way (no CPU may carry a reason). Exact, on
/// every CPU of one recording: the empty cell and its reason come from the same records.
#[test]
#[ignore = "live: records the real kernel (root)"]
fn live_empty_trace_residency_says_why() {
    let Some(_serial) = live_recording() else {
        return;
    };
    // Its oracle is the CPUs' idle time, which a busy machine does not have.
    if !powerlens_sys::fixture::needs_idle_cpus() {
        return;
    }
    if !common::machine_has_cpuidle() {
        powerlens_sys::skip_test!(
            "no cpuidle states on this machine: the per-state table it checks is not there"
        );
        return;
    }
    let (_dir, rec) = scratch();
    ok(&record_live(
        &rec,
        &["--quiet-command"],
        &["sleep", "0.5"],
        &[],
    ));
    let report = report_json(&rec, &[]);
    let diag = recording_diagnostics(&report);
    let text = String::from_utf8(
        ok(&live()
            .args(["report", rec.to_str().unwrap()])
            .output()
            .unwrap())
        .stdout
        .clone(),
    )
    .unwrap();
    for cpu in report["cpus"].as_array().unwrap() {
        let n = cpu["cpu"].as_u64().unwrap();
        let states = cpu["idle_states"].as_array().unwrap();
        let traced = states.iter().any(|s| !s["entries"].is_null());
        let reason = cpu["idle_trace_unavailable"].as_str();
        let sysfs: u64 = states
            .iter()
            .filter_map(|s| s["sysfs_entries"].as_u64())
            .sum();
        eprintln!("cpu{n}: traced {traced}, sysfs entries {sysfs}, reason {reason:?}");
        assert_eq!(traced, reason.is_none(), "cpu{n}: {cpu}; {diag}");
        let line = format!("  cpu{n} trace n/a: ");
        assert_eq!(text.contains(&line), !traced, "cpu{n} in\n{text}");
        if let Some(reason) = reason {
            if sysfs > 0 {
                assert!(
                    reason.contains(&format!("cpuidle sysfs counted {sysfs} idle entries")),
                    "{reason}; {diag}"
                );
            }
            assert!(text.contains(&format!("{line}{reason}")), "{text}");
        }
    }
}

/// The child of `parent` named `comm`, once it exists (up to 10 s).
fn child_named(parent: u32, comm: &str) -> u32 {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        let tasks = std::fs::read_dir(format!("/proc/{parent}/task")).unwrap();
        for task in tasks.flatten() {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for pid in children
                .split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok())
            {
                let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
                if name.trim() == comm {
                    return pid;
                }
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("no child {comm} of {parent} within 10 s");
}

/// Waits up to `limit` for `child` and returns its output.
fn wait_within(mut child: std::process::Child, limit: std::time::Duration) -> Output {
    let deadline = std::time::Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("still running after {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

fn sigint(pid: u32) {
    // SAFETY: kill has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) }, 0);
}

/// A recorder that polls is a wake-up source of its own, on the machine it measures: while
/// the command sleeps, the recorder wakes for its work only. That is the drain's copies
/// (every 50 ms) and their decoding, the handing on of each batch, the meter's and idle
/// states' samples (every 100 ms), and its commits (every half second). The bound is the
/// kernel's count of the recorder's voluntary switches over 5 s of one recording of a
/// sleeping command: at most 85 a second, above what that work takes and below what a
/// recorder whose main thread also woke every 50 ms between batches took (CHANGELOG).
#[test]
#[ignore = "live: records the real kernel (root)"]
fn live_a_recording_wakes_the_recorder_for_its_work_only() {
    let Some(_serial) = live_recording() else {
        return;
    };
    use std::process::Stdio;
    let (_dir, rec) = scratch();
    let recorder = live()
        .args(["record", "-o", rec.to_str().unwrap(), "--", "sleep", "7"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // From the command's start: before it, the calibration runs its loads.
    child_named(recorder.id(), "sleep");
    let rate = wakeups_per_second(recorder.id());
    let out = wait_within(recorder, std::time::Duration::from_secs(30));
    ok(&out);
    let diag = recording_diagnostics(&report_json(&rec, &[]));
    assert!(
        rate <= 85.0,
        "the recorder woke {rate:.1} times a second beside a sleeping command; {diag}"
    );
}

/// `record -p PID` ends when the process exits: its pidfd wakes the recorder. A process
/// that has exited but that its parent has not reaped (this test's own child, not waited
/// for) still has its `/proc` entry, and a recorder that looked for that entry recorded on
/// until Ctrl-C. One recording must end within 8 s of the start of a target that runs
/// 1 s: the rest is the recorder's start (its calibration up to 1.3 s, more on a busy
/// machine: `start_up_s`) and its end.
#[test]
#[ignore = "live: records the real kernel (root)"]
fn live_a_recording_of_a_process_ends_when_it_exits() {
    let Some(_serial) = live_recording() else {
        return;
    };
    let mut target = Command::new("sleep").arg("1").spawn().unwrap();
    let started = std::time::Instant::now();
    let (_dir, rec) = scratch();
    let recorder = live()
        .args(["record", "--no-stacks", "-o", rec.to_str().unwrap()])
        .args(["-p", &target.id().to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_within(recorder, std::time::Duration::from_secs(20));
    let took = started.elapsed();
    ok(&out);
    let diag = recording_diagnostics(&report_json(&rec, &[]));
    assert!(
        took < std::time::Duration::from_secs(8),
        "the recording ended {took:?} after its target started; the target ran 1 s; {diag}"
    );
    target.wait().unwrap();
}

/// Issue 17 point 6, as `perf record` does: a SIGINT sent to `record -- CMD` alone (not to
/// the terminal's process group, which would reach the command by itself) is forwarded to
/// the command; record reports how it ended, keeps the recording and exits 130. A
/// system-wide recording has no other way to end than a signal: that is its normal end
/// (exit 0, not "stopped early").
#[test]
#[ignore = "live: records the real kernel (root)"]
fn live_sigint_reaches_the_command_and_ends_a_system_wide_recording_normally() {
    let Some(_serial) = live_recording() else {
        return;
    };
    use std::process::Stdio;
    // `record --no-stacks -o REC ARGS…`, its summary readable on stderr.
    let spawn = |rec: &Path, args: &[&str]| {
        live()
            .args(["record", "--no-stacks", "-o", rec.to_str().unwrap()])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (_dir, rec) = scratch();
    let recorder = spawn(&rec, &["--", "sleep", "30"]);
    let sleeper = child_named(recorder.id(), "sleep");
    std::thread::sleep(std::time::Duration::from_millis(300));
    sigint(recorder.id());
    let out = wait_within(recorder, std::time::Duration::from_secs(15));
    let err = stderr(&out);
    eprintln!("{err}");
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("the command was killed by signal 2"), "{err}");
    assert!(
        !std::path::Path::new(&format!("/proc/{sleeper}")).exists(),
        "the command (pid {sleeper}) outlived the recording"
    );
    report_json(&rec, &[]);

    let (_dir, rec) = scratch();
    let recorder = spawn(&rec, &["-a"]);
    // Past the first commit (every second), so that the recording has events; the start
    // may wait for the first recording's events to be closed (docs/RECORD.md).
    std::thread::sleep(std::time::Duration::from_millis(2500));
    sigint(recorder.id());
    let out = wait_within(recorder, std::time::Duration::from_secs(15));
    let err = stderr(&out);
    eprintln!("{err}");
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("stopped early"), "{err}");
    assert!(err.contains("ended by Ctrl-C"), "{err}");
    // Readable, with events (report refuses a recording without any).
    let report = report_json(&rec, &[]);
    assert!(report["system"]["elapsed_s"].as_f64().unwrap() > 0.0);
}

/// `powerlens record --no-stacks -o REC OPTIONS… -- COMMAND…` (no `--` without a command)
/// where tracefs is mounted, with `env` added. Without stacks: these oracles are the
/// scheduler's figures, and this debug build unwinds a stack in ~20 µs, so a ping-pong's
/// records can outrun its drain (tests/stacks.rs and tests/advice.rs record with stacks).
fn record_live(rec: &Path, options: &[&str], command: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut args = vec![bin(), "record", "--no-stacks", "-o", rec.to_str().unwrap()];
    args.extend_from_slice(options);
    if !command.is_empty() {
        args.push("--");
        args.extend_from_slice(command);
    }
    with_tracefs(&args, env)
}

/// With a fake meter of known power, the report's energy is that power × the recording's
/// time, and the attribution sums to it exactly: total = idle + other + Σ thread rows.
/// Each of two recordings (`--baseline 0` and `0.5`) reads within 5% of 20 W × its time, for
/// a meter whose thread writes about every millisecond, as a loaded machine lets it, and
/// is sampled every 0.1 s; its parts sum to it within 0.1%.
#[test]
#[ignore = "live: records the real kernel (root)"]
fn live_attribution_sums_to_a_fake_meter() {
    let Some(_serial) = live_recording() else {
        return;
    };
    let tree = common::fixture_with_live_tracing();
    let zone = tree.rapl_zone(0, "package-0", 0, 50_000_000);
    let _meter = FakeMeter::start(zone.join("energy_uj"), 20.0, 50_000_000);
    let (_dir, rec) = scratch();
    for baseline in ["0", "0.5"] {
        let _ = std::fs::remove_file(&rec);
        let out = record_live(
            &rec,
            &["--baseline", baseline, "--quiet-command"],
            &[
                bin(),
                "workload",
                "spin",
                "--threads",
                "1",
                "--duration",
                "600ms",
            ],
            &[("POWERLENS_SYSFS_ROOT", &tree.roots().sysfs)],
        );
        ok(&out);
        assert!(!stderr(&out).contains("REDUCED"), "{}", stderr(&out));
        let report = report_json(&rec, &[]);
        let diag = recording_diagnostics(&report);
        let energy = &report["energy"];
        let total = energy["total_j"].as_f64().unwrap();
        let elapsed = report["system"]["elapsed_s"].as_f64().unwrap();
        assert_eq!(energy["provenance"]["kind"], "measured", "{energy}");
        assert!(
            within(total, 20.0 * elapsed, 0.05, 0.0),
            "{total} J over {elapsed} s at 20 W; {diag}"
        );
        let rows: f64 = report["threads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["energy_j"].as_f64().unwrap())
            .sum();
        let parts = energy["idle_j"].as_f64().unwrap() + energy["other_j"].as_f64().unwrap() + rows;
        eprintln!(
            "baseline {baseline}: total {total} J = idle {} + other {} + rows {rows}",
            energy["idle_j"], energy["other_j"]
        );
        assert!(
            (parts - total).abs() <= 0.001 * total,
            "{parts} vs {total}; {diag}"
        );
        if baseline == "0" {
            assert!(rows > 0.0, "the spinning thread gets a share; {diag}");
        } else {
            // Idle power was measured at the same 20 W: the baseline takes (nearly) all.
            assert!(
                energy["idle_j"].as_f64().unwrap() > 0.9 * total,
                "{energy}; {diag}"
            );
        }
    }
}

// ---- bad input: clear errors, nothing lost, no panic -----------------------------------

fn report_err(rec: &Path) -> String {
    let out = live()
        .args(["report", rec.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "report of {} succeeded",
        rec.display()
    );
    let err = stderr(&out);
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[test]
fn report_refuses_what_is_not_a_recording() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.rec");
    assert!(report_err(&missing).contains("missing.rec"));
    let junk = dir.path().join("junk.rec");
    std::fs::write(
        &junk,
        b"this is not an SQLite file at all, just some bytes.........",
    )
    .unwrap();
    let e = report_err(&junk);
    assert!(e.contains("junk.rec"), "{e}");
    let empty = dir.path().join("empty.rec");
    std::fs::write(&empty, b"").unwrap();
    report_err(&empty);
    // A results database is a powerlens file, but not a recording.
    let db = dir.path().join("results.db");
    let out = common::powerlens(
        Path::new("/sys"),
        &db,
        &["run", "--runs", "1", "--", "true"],
    );
    ok(&out);
    let e = report_err(&db);
    assert!(
        e.contains("not a powerlens recording") || e.contains("recording"),
        "{e}"
    );
}

/// Records a short whole-system recording (root: see `live_recording`), for the tests
/// that damage one.
fn small_recording(dir: &Path) -> PathBuf {
    let rec = dir.join("small.rec");
    let out = record_live(&rec, &["-a", "--duration", "0.3"], &[], &[]);
    ok(&out);
    rec
}

#[test]
#[ignore = "live: records the real kernel (root)"]
fn damaged_and_newer_recordings_are_refused_with_the_reason() {
    let Some(_serial) = live_recording() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let rec = small_recording(dir.path());
    let bytes = std::fs::read(&rec).unwrap();
    // Truncated in the middle.
    let cut = dir.path().join("cut.rec");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    report_err(&cut);
    // A newer schema version: "upgrade powerlens".
    let newer = dir.path().join("newer.rec");
    std::fs::copy(&rec, &newer).unwrap();
    let status = Command::new("sqlite3")
        .arg(&newer)
        .arg("PRAGMA user_version = 99;")
        .status();
    match status {
        Ok(s) if s.success() => {
            let e = report_err(&newer);
            assert!(e.contains("upgrade powerlens"), "{e}");
        }
        _ => eprintln!("skipped the newer-version case: sqlite3 is not installed"),
    }
    // The original still reports.
    let v = report_json(&rec, &[]);
    assert!(v["system"]["elapsed_s"].as_f64().unwrap() > 0.2);
}

#[test]
#[ignore = "live: records the real kernel (root)"]
fn a_command_that_is_not_found_leaves_no_recording() {
    let Some(_serial) = live_recording() else {
        return;
    };
    let (_dir, rec) = scratch();
    let out = record_live(&rec, &[], &["no-such-command-xyz"], &[]);
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(e.contains("command not found") && e.contains("PATH"), "{e}");
    assert!(!rec.exists(), "an empty recording was left behind");
}

/// A command that SIGKILLs itself after 0.2 s: the recording is closed, and covers at
/// least those 0.2 s and the command's thread.
#[test]
#[ignore = "live: records the real kernel (root)"]
fn a_command_killed_by_a_signal_still_closes_the_recording() {
    let Some(_serial) = live_recording() else {
        return;
    };
    let (_dir, rec) = scratch();
    let out = record_live(&rec, &[], &["sh", "-c", "sleep 0.2; kill -9 $$"], &[]);
    ok(&out);
    assert!(
        stderr(&out).contains("killed by signal 9"),
        "{}",
        stderr(&out)
    );
    let v = report_json(&rec, &[]);
    let diag = recording_diagnostics(&v);
    assert!(v["system"]["elapsed_s"].as_f64().unwrap() >= 0.2, "{diag}");
    assert!(!v["threads"].as_array().unwrap().is_empty(), "{diag}");
}

/// SIGKILL the recorder mid-way: the file opens and holds what was flushed (every half
/// second). Killed 2.6 s after it started, one recording must cover at least 0.9 s: what
/// its start-up (`start_up_s`) leaves of those seconds, less the commit under way.
#[test]
#[ignore = "live: records the real kernel (root)"]
fn a_killed_recorder_leaves_a_readable_recording() {
    let Some(_serial) = live_recording() else {
        return;
    };
    let (_dir, rec) = scratch();
    common::record_all_killed_after(&rec, 2.6);
    let v = report_json(&rec, &[]);
    let elapsed = v["system"]["elapsed_s"].as_f64().unwrap();
    eprintln!("killed after 2.6 s: the recording covers {elapsed:.2} s");
    assert!(
        elapsed >= 0.9,
        "at least one flush survived: {elapsed}; {}",
        recording_diagnostics(&v)
    );
}

/// A full disk stops the recording, keeps what was written, and says so. One recording
/// must keep at least 0.9 s, its first commits.
#[test]
#[ignore = "live: records the real kernel (root)"]
fn a_full_disk_stops_recording_and_keeps_what_was_written() {
    if !is_root() {
        powerlens_sys::skip_test!("needs root to mount a small tmpfs");
        return;
    }
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    let rec = mnt.join("r.rec");
    // A 1 MiB tmpfs in a private mount namespace. A thread waking every 100 µs makes about
    // 250 KB of recording a second without stacks: the first commits fit, a later one does
    // not. (With stacks the tables of stacks and modules fill 1 MiB before the first
    // commit; the commit path is the same.)
    let script = format!(
        "mount -t tmpfs -o size=1m none {mnt} || exit 77
         mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
         {bin} record --no-stacks -o {rec} -- {bin} workload sleepy --period 100us --duration 29s -q; echo exit=$?
         for f in {rec}*; do cp \"$f\" \"{mnt}/../copy.rec${{f#{rec}}}\"; done
         # The command outlives the recording ([s]: the pattern must not match this script).
         pkill -f 'sleepy --period 100u[s] --duration 29s'",
        mnt = mnt.display(),
        bin = bin(),
        rec = rec.display()
    );
    let out = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .output()
        .unwrap();
    if out.status.code() == Some(77) {
        powerlens_sys::skip_test!("cannot mount a tmpfs: {}", stderr(&out));
        return;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let err = stderr(&out);
    eprintln!("{text}{err}");
    assert!(
        !text.contains("exit=0"),
        "recording to a full disk reported success"
    );
    assert!(
        err.contains("stopped early") && !err.contains("panicked"),
        "{err}"
    );
    assert!(err.to_lowercase().contains("full"), "{err}");
    let copy = dir.path().join("copy.rec");
    let v = report_json(&copy, &[]);
    let kept = v["system"]["elapsed_s"].as_f64().unwrap();
    eprintln!("the full disk kept {kept:.2} s of recording");
    assert!(
        kept >= 0.9,
        "at least the first commit was kept: {kept} s; {}",
        recording_diagnostics(&v)
    );
}

// ---- without privileges: the reduced recording ------------------------------------------

/// Not root: `record` says tracing is not possible and why, records a reduced profile from
/// procfs, and the report labels what it cannot know as unavailable — never a silent 0.
/// Run as nobody through setpriv (util-linux) when we are root. Each of the two spinning
/// threads of one recording reads at most 10 ms above getrusage and 50 ms below it.
#[test]
#[ignore = "live: records the real kernel (root)"]
fn without_privileges_a_reduced_recording_says_so() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    // nobody must be able to write the recording and run the binary.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let rec = dir.path().join("reduced.rec");
    let (program, prefix): (&str, Vec<&str>) = if is_root() {
        (
            "setpriv",
            vec!["--reuid=65534", "--regid=65534", "--clear-groups", bin()],
        )
    } else {
        (bin(), vec![])
    };
    let mut args = prefix;
    args.extend([
        "record",
        "-o",
        rec.to_str().unwrap(),
        "--",
        bin(),
        "workload",
        "spin",
        "--threads",
        "2",
        "--duration",
        "500ms",
        "--json",
    ]);
    let out = Command::new(program)
        .args(&args)
        .env_remove("POWERLENS_SYSFS_ROOT")
        .env_remove("POWERLENS_PROCFS_ROOT")
        .output()
        .unwrap();
    let err = stderr(&out);
    if err.contains("setpriv: ") || (out.status.code() == Some(126)) {
        powerlens_sys::skip_test!("cannot run as nobody: {err}");
        return;
    }
    ok(&out);
    assert!(err.contains("REDUCED"), "{err}");
    let spun = workload_threads(&out.stdout);
    let report = report_json(&rec, &[]);
    let diag = recording_diagnostics(&report);
    for (tid, _, _, cpu_s) in spun {
        let row = thread_row(&report, tid);
        let ours = row["cpu_time_s"].as_f64().unwrap();
        eprintln!("tid {tid}: reduced CPU time {ours:.3} s, getrusage {cpu_s:.3} s");
        // Sampled every 20 ms: at most the work after the last sample is missing.
        assert!(
            ours <= cpu_s + 0.01 && ours >= cpu_s - 0.05,
            "{ours} vs {cpu_s}; {diag}"
        );
        for key in [
            "wait_time_s",
            "inactive_time_s",
            "migrations",
            "idle_wakeups",
        ] {
            assert!(
                row[key].is_null(),
                "{key} must be unavailable, not {}; {diag}",
                row[key]
            );
        }
    }
    let missing: Vec<&str> = report["unavailable"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|u| u["reason"].as_str())
        .collect();
    assert!(
        missing.iter().any(|r| r.contains("reduced recording")),
        "{missing:?}"
    );
}

/// The cpuidle sysfs columns end to end, on a fixture with the haltpoll driver whose
/// counters a thread advances at a known rate: every CPU enters state1 1000 times a second
/// and spends 900 µs of each millisecond in it. This machine has no cpuidle driver, so the
/// fixture stands in for one; on real hardware the trace's power:cpu_idle columns sit
/// beside these and must agree with them (docs/REPORT.md), which this VM cannot show (perf
/// delivers no cpu_idle records here). On each CPU of one recording of a 0.8 s sleep the
/// entries lie within 3% (or 2) of 1000 × the recorded time and the residency within 3%
/// (or 2 ms) of 0.9 × it: the writer's counters step every millisecond and are sampled
/// every 0.1 s.
#[test]
#[ignore = "live: records the real kernel (root)"]
fn live_cpuidle_sysfs_counters_over_the_traced_interval() {
    let Some(_serial) = live_recording() else {
        return;
    };
    // Its oracle is the CPUs' idle time, which a busy machine does not have.
    if !powerlens_sys::fixture::needs_idle_cpus() {
        return;
    }
    let tree = common::fixture_with_live_tracing();
    tree.cpuidle_driver("haltpoll", "haltpoll");
    let cpus = powerlens_sys::topology::read_online(&tree.roots()).unwrap();
    for &cpu in &cpus {
        for (index, name, latency) in [(0, "POLL", 0), (1, "haltpoll", 1)] {
            let spec = powerlens_sys::fixture::IdleStateSpec {
                name: name.into(),
                desc: name.into(),
                latency_us: latency,
                residency_us: latency,
                ..Default::default()
            };
            tree.cpuidle_state(cpu, index, &spec);
        }
    }
    // The fake idle loop: counters follow wall time exactly, whenever they are written.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (stop, tree_sys) = (stop.clone(), tree.roots().sysfs.clone());
        let cpus = cpus.clone();
        std::thread::spawn(move || {
            let start = std::time::Instant::now();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let us = start.elapsed().as_micros() as u64;
                for cpu in &cpus {
                    let dir = tree_sys.join(format!("devices/system/cpu/cpu{cpu}/cpuidle/state1"));
                    for (file, value) in [("usage", us / 1000), ("time", us * 9 / 10)] {
                        let tmp = dir.join(format!("{file}.tmp"));
                        std::fs::write(&tmp, format!("{value}\n")).unwrap();
                        std::fs::rename(&tmp, dir.join(file)).unwrap();
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        })
    };
    let (_dir, rec) = scratch();
    let out = record_live(
        &rec,
        &["--quiet-command"],
        &["sleep", "0.8"],
        &[("POWERLENS_SYSFS_ROOT", &tree.roots().sysfs)],
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    ok(&out);
    let report = report_json(&rec, &[]);
    let diag = recording_diagnostics(&report);
    // The sampler reads every 0.1 s (the default) from before the command starts until
    // after it ends: at least 8 while it slept.
    let samples = summary_samples(&stderr(&out));
    assert!(samples >= 8, "{samples} cpuidle samples; {diag}");
    let elapsed = report["system"]["elapsed_s"].as_f64().unwrap();
    for cpu in report["cpus"].as_array().unwrap() {
        let states = cpu["idle_states"].as_array().unwrap();
        let halt = states.iter().find(|s| s["name"] == "haltpoll").unwrap();
        let (entries, time) = (
            halt["sysfs_entries"].as_f64().unwrap(),
            halt["sysfs_time_s"].as_f64().unwrap(),
        );
        eprintln!(
            "cpu{}: {entries} entries, {time:.4} s in haltpoll over {elapsed:.4} s",
            cpu["cpu"]
        );
        assert!(
            within(entries, 1000.0 * elapsed, 0.03, 2.0),
            "{entries}; {diag}"
        );
        assert!(within(time, 0.9 * elapsed, 0.03, 0.002), "{time}; {diag}");
        let poll = states.iter().find(|s| s["name"] == "POLL").unwrap();
        assert_eq!(
            poll["sysfs_entries"], 0,
            "a state whose counters stand still; {diag}"
        );
    }
}

/// The meter/idle-state sample count of `record`'s summary line (`… and N meter/idle-state
/// samples of …`); 0 for "no meter/idle-state samples".
fn summary_samples(stderr: &str) -> u64 {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("recorded "))
        .unwrap_or_else(|| panic!("no summary line in {stderr}"));
    if line.contains(" and no meter/idle-state samples (") {
        return 0;
    }
    let before = line.split(" meter/idle-state samples of ").next().unwrap();
    before.rsplit(' ').next().unwrap().parse().unwrap()
}

/// With no meter, no cpuidle and no cpufreq to read, the summary says so and why rather
/// than printing "0 samples" as if something had been measured as zero.
#[test]
#[ignore = "live: records the real kernel (root)"]
fn live_summary_names_what_it_could_not_sample() {
    let Some(_serial) = live_recording() else {
        return;
    };
    let tree = common::fixture_with_live_tracing();
    let (_dir, rec) = scratch();
    let out = record_live(
        &rec,
        &[],
        &["sleep", "0.05"],
        &[("POWERLENS_SYSFS_ROOT", &tree.roots().sysfs)],
    );
    ok(&out);
    let err = stderr(&out);
    assert!(
        err.contains(
            "and no meter/idle-state samples (no energy meter, cpuidle or cpufreq counters to read)"
        ),
        "{err}"
    );
    assert_eq!(summary_samples(&err), 0);
}

/// A sleeper pinned to cpu1, where this project's VMs lose every switch-in from idle (and
/// the timer wake-ups with them): its switch counts still equal the kernel's, and its CPU
/// time — the scheduler's own account (sched_stat_runtime) replacing the estimate from
/// inferred switch-ins — agrees with getrusage within 3% (the estimate read 30% short:
/// docs/REPORT.md). On a CPU that loses nothing the same figures come from the switches
/// alone. One recording of a 1 s sleeper: its
/// synchronization switches are the kernel's or one more, its CPU time within 3% (or
/// 2 ms) of getrusage's.
#[test]
#[ignore = "live: records the real kernel (root)"]
fn live_cpu_time_is_exact_where_switch_ins_are_lost() {
    let Some(_serial) = live_recording() else {
        return;
    };
    let last_cpu = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .unwrap()
        .trim()
        .rsplit(['-', ','])
        .next()
        .unwrap()
        .to_string();
    let (_dir, rec) = scratch();
    let out = record_live(
        &rec,
        &[],
        &[
            "taskset",
            "-c",
            &last_cpu,
            bin(),
            "workload",
            "sleepy",
            "--period",
            "1ms",
            "--duration",
            "1s",
            "--work",
            "200us",
            "--json",
        ],
        &[],
    );
    ok(&out);
    let report = report_json(&rec, &[]);
    let diag = recording_diagnostics(&report);
    for (tid, voluntary, _, cpu_s) in workload_threads(&out.stdout) {
        let row = thread_row(&report, tid);
        let ours = row["cpu_time_s"].as_f64().unwrap();
        let sync = row["sync_switches"].as_u64().unwrap();
        eprintln!(
            "cpu{last_cpu} sleeper: CPU {ours:.4} s (getrusage {cpu_s:.4}), sync {sync} (kernel {voluntary})"
        );
        assert!(
            (voluntary..=voluntary + 1).contains(&sync),
            "sync {sync} vs {voluntary}; {diag}"
        );
        assert!(
            within(ours, cpu_s, 0.03, 0.002),
            "{ours} vs {cpu_s}; {diag}"
        );
    }
}

/// Where the kernel loses switch-ins (cpu1's idle context on this project's VMs), the
/// CPU's idle time is still at least the idle-state residency the kernel itself counted
/// (cpuidle sysfs), and a thread with inferred switch-ins ran, by the inference, no longer
/// than the scheduler charged it. Ping wakes pong from cpu0 (recorded), pong's switch-in
/// out of idle is lost, its switch-out is recorded: the switch-in is placed by the
/// scheduler's account of the run. Placed at the wake-up instead, the idle-exit latency
/// would count as pong's run, and the CPU's idle time fall short of the residency sysfs
/// counted (docs/REPORT.md). In one recording, cpu0's and cpu1's idle time is at least 97% of their
/// residency, and a player with inferred switch-ins ran by the switch intervals at most
/// 5% (and 1 ms) longer than the scheduler charged it, for interrupt time the scheduler
/// may leave out.
#[test]
#[ignore = "live: records the real kernel (root)"]
fn live_idle_time_holds_the_kernels_residency_where_switch_ins_are_lost() {
    let Some((workload, report)) = record_pinned_pingpong("5000", false) else {
        return;
    };
    let f = |v: &Value| v.as_f64().unwrap();
    let diag = recording_diagnostics(&report);
    let cpus = report["cpus"].as_array().unwrap();
    let residency = |cpu: &Value| -> Option<f64> {
        let times: Vec<f64> = cpu["idle_states"]
            .as_array()?
            .iter()
            .filter_map(|s| s["sysfs_time_s"].as_f64())
            .collect();
        (!times.is_empty()).then(|| times.iter().sum())
    };
    for cpu in &cpus[..2] {
        let (idle, busy) = (f(&cpu["idle_s"]), f(&cpu["busy_s"]));
        eprintln!(
            "cpu{}: idle {idle:.4} s (sysfs residency {:?}), busy {busy:.4} s",
            cpu["cpu"],
            residency(cpu)
        );
        match residency(cpu) {
            Some(sysfs) => assert!(
                idle >= 0.97 * sysfs,
                "cpu{}: {idle} < {sysfs}; {diag}",
                cpu["cpu"]
            ),
            None => eprintln!("no cpuidle driver: the idle residency oracle is not available"),
        }
    }
    // A thread whose switch-ins were inferred ran, by the inference, no longer than the
    // scheduler charged it (the switch intervals of this VM's recorded runs are shorter
    // than the scheduler's account, never longer). Other tasks on the two CPUs do not
    // enter it.
    for t in workload["threads"].as_array().unwrap() {
        let row = thread_row(&report, t["tid"].as_u64().unwrap());
        let (on_cpu, scheduler) = (f(&row["on_cpu_s"]), f(&row["cpu_time_s"]));
        let inferred = row["inferred_switch_ins"].as_u64().unwrap();
        eprintln!(
            "{}: on_cpu_s {on_cpu:.4}, cpu_time_s {scheduler:.4}, {inferred} switch-ins inferred",
            t["name"]
        );
        if inferred > 0 {
            assert!(
                on_cpu <= 1.05 * scheduler + 0.001,
                "{}: switch intervals {on_cpu} above the scheduler's {scheduler}; {diag}",
                t["name"]
            );
        }
    }
}

/// Wake-ups by cause against the workload's own account: in pingpong every blocking wait of
/// one thread is ended by the other thread's futex wake. So each thread's wake-ups received
/// from a thread match its blocked waits (within 2%: a wake that lands before the waiter has
/// switched out changes nothing), none come from timers, IRQs or IPIs, and what one thread
/// received the other caused. Remote wake-ups complete on the wakee's CPU (an IPI or the
/// idle loop), so this holds only because the recorder takes sched_waking, which fires in
/// the waker's context: with sched_wakeup 94% of these were blamed on "ipi/idle". Both
/// threads of one recording of 2000 round trips are held to that: 2% (or 2) of their
/// waits, at most 2 wake-ups of each other cause, and what each received from the other
/// within 2 of what the other caused.
#[test]
#[ignore = "live: records the real kernel (root)"]
fn live_pingpong_wake_ups_come_from_the_other_thread() {
    let Some(_serial) = live_recording() else {
        return;
    };
    let (_dir, rec) = scratch();
    let out = record_live(
        &rec,
        &[],
        &[
            bin(),
            "workload",
            "pingpong",
            "--iterations",
            "2000",
            "--json",
        ],
        &[],
    );
    ok(&out);
    let workload: Value = serde_json::from_slice(&out.stdout).unwrap();
    let report = report_json(&rec, &[]);
    let diag = recording_diagnostics(&report);
    let threads = workload["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 2);
    for (me, other) in [(&threads[0], &threads[1]), (&threads[1], &threads[0])] {
        let row = thread_row(&report, me["tid"].as_u64().unwrap());
        let other_row = thread_row(&report, other["tid"].as_u64().unwrap());
        let received = &row["wakeups_received"];
        let (by_thread, waits) = (
            received["thread"].as_u64().unwrap(),
            me["blocked_waits"].as_u64().unwrap(),
        );
        eprintln!(
            "{}: {received} received, {waits} blocked waits; the other caused {}",
            me["name"], other_row["wakeups_caused"]
        );
        assert!(
            within(by_thread as f64, waits as f64, 0.02, 2.0),
            "{by_thread} vs {waits}; {diag}"
        );
        for cause in ["timer", "irq", "softirq", "ipi"] {
            assert!(
                received[cause].as_u64().unwrap() <= 2,
                "{cause}: {received}; {diag}"
            );
        }
        let caused = other_row["wakeups_caused"].as_u64().unwrap();
        assert!(
            by_thread.abs_diff(caused) <= 2,
            "{by_thread} vs {caused}; {diag}"
        );
    }
}

/// Issue 14: a window (`-a --duration`) ends on time and its last second is committed:
/// events up to the moment tracing was disabled, none lost, and a sample after the end
/// (so that the energy at the end is interpolated, not extrapolated). The recorder's exit
/// holds nobody up: the events are closed by a detached process that keeps none of the
/// recorder's descriptors, so a pipe on its stdout ends when it exits (tested in
/// powerlens-sys). The wall-time targets are checked by scripts/bench-record.sh. Exact but
/// for the last event's place, in one 1-s window: no event after the stop and the last
/// within 100 ms before it (both CPUs keep events coming), no record lost, a sample at or
/// after the end.
#[test]
#[ignore = "live: records the real kernel (root)"]
fn a_window_ends_with_its_last_second_committed() {
    let Some(_serial) = live_recording() else {
        return;
    };
    let (_dir, rec) = scratch();
    let out = with_tracefs(
        &[
            bin(),
            "record",
            "-a",
            "--duration",
            "1",
            "-o",
            rec.to_str().unwrap(),
        ],
        &[],
    );
    ok(&out);
    let diag = recording_diagnostics(&report_json(&rec, &[]));
    let stop: Value =
        serde_json::from_str(&sql(&rec, "SELECT value FROM meta WHERE key = 'stop'")).unwrap();
    let stop_ns = stop["monotonic_ns"].as_u64().unwrap();
    let last_event: u64 = sql(&rec, "SELECT max(last_ns) FROM chunks")
        .parse()
        .unwrap();
    assert!(
        last_event <= stop_ns,
        "an event after the end: {last_event} > {stop_ns}; {diag}"
    );
    // Both CPUs keep trace events coming (timer ticks, the recorder's own threads): the
    // last of them lies within the last tenth of a second before tracing stopped.
    assert!(
        stop_ns - last_event < 100_000_000,
        "the last {} ms before the end are missing; {diag}",
        (stop_ns - last_event) / 1_000_000
    );
    let lost: Value = serde_json::from_str(&sql(
        &rec,
        "SELECT value FROM meta WHERE key = 'lost_records'",
    ))
    .unwrap();
    assert!(
        lost.as_array().unwrap().iter().all(|c| c["lost"] == 0),
        "lost_records metadata {lost}; {diag}"
    );
    let samples: u64 = sql(&rec, "SELECT count(*) FROM samples").parse().unwrap();
    if samples > 0 {
        let last_sample: u64 = sql(&rec, "SELECT max(time_ns) FROM samples")
            .parse()
            .unwrap();
        assert!(
            last_sample >= stop_ns,
            "no sample after the end: {last_sample} < {stop_ns}; {diag}"
        );
    } else {
        eprintln!("no sysfs samples on this machine (no meter, cpuidle or cpufreq): the sample part is not checked");
    }
}

/// Two recordings at once on one machine, each of its own command: both complete, and each
/// holds its own target (the command's sleeps) and not the other's: exactly one thread,
/// `sleep`, with at least one switch, in a recording at least as long as its sleep.
#[test]
#[ignore = "live: records the real kernel (root)"]
fn two_recordings_at_once_both_work() {
    let Some(_serial) = live_recording() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let recs = [dir.path().join("one.rec"), dir.path().join("two.rec")];
    let outputs: Vec<Output> = std::thread::scope(|scope| {
        let handles: Vec<_> = recs
            .iter()
            .zip(["0.3", "0.4"])
            .map(|(rec, secs)| scope.spawn(move || record_live(rec, &[], &["sleep", secs], &[])))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut pids = Vec::new();
    for ((rec, o), secs) in recs.iter().zip(&outputs).zip([0.3, 0.4]) {
        ok(o);
        let report = report_json(rec, &[]);
        let diag = recording_diagnostics(&report);
        let threads = report["threads"].as_array().unwrap();
        assert_eq!(threads.len(), 1, "{rec:?}: {threads:?}; {diag}");
        assert_eq!(threads[0]["comm"], "sleep", "{diag}");
        assert!(
            threads[0]["sync_switches"].as_u64().unwrap() >= 1,
            "{rec:?}; {diag}"
        );
        pids.push(threads[0]["pid"].as_u64().unwrap());
        let elapsed = report["system"]["elapsed_s"].as_f64().unwrap();
        assert!(
            elapsed >= secs,
            "{rec:?}: {elapsed} s for a {secs} s sleep; {diag}"
        );
    }
    assert_ne!(pids[0], pids[1], "each recording has its own target");
}

/// A 1 ms sleeper pinned to the last CPU: every time it blocks, something wakes it, so its
/// recorded wake-ups plus the wake-ups the report says are missing on that CPU account for
/// its synchronization switches (the switch-outs, which the kernel does deliver). On this
/// project's VMs cpu1 delivers no tracepoint from its idle loop: most wake-ups are
/// missing, and the CPU notes say so; elsewhere none are, and no note may appear. In one
/// recording of a 0.5 s sleeper (at least 300 blocks), its recorded wake-ups and those
/// missing, the CPU's and its own, come within 3 of its blocks: the last block has no
/// wake-up, and other threads' missing wake-ups may add to the CPU's.
#[test]
#[ignore = "live: records the real kernel (root)"]
fn live_missing_wakeups_are_counted_and_explained() {
    let Some(_serial) = live_recording() else {
        return;
    };
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cpu = (cpus - 1).to_string();
    let (_dir, rec) = scratch();
    ok(&record_live(
        &rec,
        &["--quiet-command"],
        &[
            "taskset",
            "-c",
            &cpu,
            bin(),
            "workload",
            "sleepy",
            "--period",
            "1ms",
            "--duration",
            "0.5s",
        ],
        &[],
    ));
    let report = report_json(&rec, &[]);
    let diag = recording_diagnostics(&report);
    let sleeper = report["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["comm"] == "sleepy-0")
        .expect("the sleeper's row");
    let blocks = sleeper["sync_switches"].as_u64().unwrap();
    let woken = sleeper["wakeups_received_total"].as_u64().unwrap();
    let cpu_row = &report["cpus"][cpus - 1];
    let missing = cpu_row["unrecorded_wakeups"].as_u64().unwrap();
    eprintln!("cpu{cpu}: sleeper blocked {blocks} times, woken {woken} recorded + {missing} missing on the CPU");
    assert!(blocks >= 300, "{sleeper}; {diag}");
    // Each block but the last is followed by a wake-up; the CPU's missing count may also
    // hold other threads' (a kworker), hence at least, within a few.
    assert!(
        woken + missing + 3 >= blocks,
        "{woken} + {missing} < {blocks}; {diag}"
    );
    assert!(
        report["system"]["unrecorded_wakeups"].as_u64().unwrap() >= missing,
        "{diag}"
    );
    // The sleeper's own row says how many of its wake-ups are missing: with them its
    // recorded wake-ups account for its blocks, and they are among the CPU's.
    let own_missing = sleeper["unrecorded_wakeups"].as_u64().unwrap();
    assert!(own_missing <= missing, "{own_missing} > {missing}; {diag}");
    assert!(
        woken + own_missing + 3 >= blocks,
        "{woken} + {own_missing} < {blocks}; {diag}"
    );
    let text = String::from_utf8(
        ok(&live()
            .args(["report", rec.to_str().unwrap()])
            .output()
            .unwrap())
        .stdout
        .clone(),
    )
    .unwrap();
    let note = format!("  cpu{cpu} wake-ups: ");
    match cpu_row["wakeups_trace_incomplete"].as_str() {
        Some(reason) => {
            assert!(missing > 0, "{reason}; {diag}");
            assert!(reason.contains(&format!("short of {missing}")), "{reason}");
            assert!(text.contains(&format!("{note}{reason}")), "{text}");
            assert!(text.contains("more not recorded, causes unknown"), "{text}");
            if own_missing > 0 {
                let row_note = format!("tid {} (sleepy-0) {own_missing}", sleeper["tid"]);
                assert!(
                    text.contains("note: wake-ups not recorded: ") && text.contains(&row_note),
                    "{text}"
                );
            }
        }
        None => {
            assert_eq!(missing, 0, "{diag}");
            assert!(!text.contains(&note), "{text}");
        }
    }
}

/// What `query` reads from the recording `rec` through sqlite3 (its first column, trimmed),
/// or why it could not be read: a diagnostic's source, and some tests' view of the file.
fn sql(rec: &Path, query: &str) -> String {
    match Command::new("sqlite3").arg(rec).arg(query).output() {
        Ok(o) => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        Err(e) => format!("(sqlite3 did not run: {e})"),
    }
}
