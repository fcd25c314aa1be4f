//! `powerlens export`: the Perfetto trace decoded by Perfetto's own protos (the `perfetto`
//! Python package's perfetto_trace_pb2) holds exactly the recording's events, per CPU and
//! kind; JSON Lines and CSV have one line per event; a target that cannot be written and a
//! recording without events are refused with the reason, leaving nothing behind.
//!
//! The oracle for the recording's counts is its chunks decoded directly
//! (`powerlens_core::codec::decode_chunk`), not the replay the export uses.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use powerlens_core::codec::{decode_chunk, ChunkEncoder};
use powerlens_core::sched::event::{Event, EventKind, InterruptKind, SwitchedOut};
use powerlens_store::recording::{RecordingReader, RecordingWriter, ThreadRow};
use serde_json::{json, Value};

mod common;
use common::{
    assert_renders_in_chromium, assert_self_contained, layout_in_chromium, on_this_machine,
    recording_diagnostics, stderr, with_tracefs,
};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_powerlens")
}

fn powerlens(args: &[&str]) -> Output {
    on_this_machine(args)
}

fn ok(o: Output) -> Output {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        stderr(&o)
    );
    o
}

fn ev(time_ns: u64, cpu: u32, kind: EventKind) -> Event {
    Event { time_ns, cpu, kind }
}

/// A hand-made recording: every event kind on two CPUs, three energy samples, a thread
/// table with a name full of HTML and CSV metacharacters.
fn synthetic(dir: &Path) -> PathBuf {
    use EventKind::*;
    let path = dir.join("synthetic.rec");
    let mut w = RecordingWriter::create(&path).unwrap();
    w.set_meta("mode", &json!("trace")).unwrap();
    w.set_meta(
        "start",
        &json!({"monotonic_ns": 900, "unix_s": 0.0, "powerlens_version": "test"}),
    )
    .unwrap();
    let cpu0 = vec![
        ev(
            1_000,
            0,
            Wakeup {
                tid: 101,
                target_cpu: 0,
                new_thread: false,
            },
        ),
        ev(
            1_100,
            0,
            Switch {
                prev: 0,
                how: SwitchedOut::Preempted,
                next: 101,
            },
        ),
        ev(1_200, 0, Frequency { khz: 2_000_000 }),
        ev(
            1_300,
            0,
            Migrate {
                tid: 103,
                from: 1,
                to: 0,
            },
        ),
        ev(
            1_400,
            0,
            Fork {
                parent: 101,
                child: 102,
            },
        ),
        ev(
            1_500,
            0,
            Exec {
                tid: 101,
                comm: "<i>pwn</i>,\"x\"".into(),
            },
        ),
        ev(
            1_600,
            0,
            InterruptEnter(InterruptKind::Timer {
                timer: 0,
                function: 0,
            }),
        ),
        ev(1_700, 0, InterruptExit),
        ev(
            1_800,
            0,
            Switch {
                prev: 101,
                how: SwitchedOut::Blocked,
                next: 0,
            },
        ),
        ev(1_900, 0, IdleEnter { state: 1 }),
        ev(2_500, 0, IdleExit),
    ];
    let cpu1 = vec![
        ev(
            1_450,
            1,
            Wakeup {
                tid: 102,
                target_cpu: 1,
                new_thread: true,
            },
        ),
        ev(
            1_460,
            1,
            Switch {
                prev: 0,
                how: SwitchedOut::Preempted,
                next: 102,
            },
        ),
        ev(
            1_470,
            1,
            InterruptEnter(InterruptKind::Irq("virtio0".into())),
        ),
        ev(1_480, 1, InterruptExit),
        ev(2_000, 1, Exit { tid: 102 }),
        ev(
            2_100,
            1,
            Switch {
                prev: 102,
                how: SwitchedOut::Exited,
                next: 0,
            },
        ),
    ];
    for (cpu, events) in [(0, &cpu0), (1, &cpu1)] {
        // Two chunks per CPU, as a long recording has.
        for part in events.chunks(4) {
            let mut enc = ChunkEncoder::new();
            for e in part {
                enc.push(e);
            }
            let (first, last) = (enc.first_ns().unwrap(), enc.last_ns().unwrap());
            let n = enc.len() as u32;
            w.append_chunk(cpu, first, last, n, &enc.finish()).unwrap();
        }
    }
    // 2 J over the first 0.5 s (4 W), 1 J over the next 0.25 s (4 W).
    for (t, j) in [(1_000u64, 10.0), (500_001_000, 12.0), (750_001_000, 13.0)] {
        w.append_sample(
            t,
            "energy",
            &json!({"total_j": j, "domains_j": {"package-0": j}}),
        )
        .unwrap();
    }
    for (tid, pid, comm) in [
        (101, 100, "<i>pwn</i>,\"x\""),
        (102, 100, "child"),
        (103, 103, "other"),
    ] {
        w.upsert_thread(&ThreadRow {
            tid,
            pid: Some(pid),
            ppid: Some(1),
            parent_tid: None,
            comm: comm.into(),
        })
        .unwrap();
    }
    w.finish().unwrap();
    path
}

/// The recording's events per CPU and Perfetto event name, from its chunks.
fn recording_counts(rec: &Path) -> BTreeMap<(u32, &'static str), u64> {
    let reader = RecordingReader::open(rec).unwrap();
    let mut counts = BTreeMap::new();
    let mut events = Vec::new();
    for cpu in reader.cpus().unwrap() {
        let mut cursor = reader.chunks(cpu);
        while let Some(chunk) = cursor.next_chunk().unwrap() {
            events.clear();
            decode_chunk(&chunk.data, &mut events).unwrap();
            for e in &events {
                let name = match &e.kind {
                    EventKind::Switch { .. } => "sched_switch",
                    EventKind::Wakeup {
                        new_thread: false, ..
                    } => "sched_wakeup",
                    EventKind::Wakeup {
                        new_thread: true, ..
                    } => "sched_wakeup_new",
                    EventKind::Migrate { .. } => "sched_migrate_task",
                    EventKind::Fork { .. } => "sched_process_fork",
                    EventKind::Exec { .. } => "sched_process_exec",
                    EventKind::Exit { .. } => "sched_process_exit",
                    EventKind::IdleEnter { .. } | EventKind::IdleExit => "cpu_idle",
                    EventKind::Frequency { .. } => "cpu_frequency",
                    // Not written to Perfetto: see export/perfetto.rs.
                    EventKind::InterruptEnter(_)
                    | EventKind::InterruptExit
                    | EventKind::Runtime { .. }
                    | EventKind::TimerArm { .. }
                    | EventKind::CpuSample { .. }
                    | EventKind::Stack { .. } => continue,
                };
                *counts.entry((e.cpu, name)).or_insert(0) += 1;
            }
        }
    }
    counts
}

/// The trace decoded by perfetto_trace_pb2, or `None` (after printing why) when the
/// `perfetto` Python package is not installed (scripts/test.sh installs it).
fn decode_perfetto(trace: &Path) -> Option<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/perfetto_decode.py");
    let out = match Command::new("python3").arg(&script).arg(trace).output() {
        Ok(o) => o,
        Err(e) => {
            powerlens_sys::skip_test!("python3 not runnable ({e}); the Perfetto decode needs it");
            return None;
        }
    };
    if out.status.code() == Some(3) {
        powerlens_sys::skip_test!("{} (python3 -m pip install perfetto)", stderr(&out).trim());
        return None;
    }
    assert!(out.status.success(), "decoder failed: {}", stderr(&out));
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

fn decoded_counts(v: &Value) -> BTreeMap<(u32, String), u64> {
    let mut out = BTreeMap::new();
    for (cpu, kinds) in v["cpus"].as_object().unwrap() {
        let cpu: u32 = cpu
            .parse()
            .unwrap_or_else(|_| panic!("non-ftrace packets: {kinds}"));
        for (k, n) in kinds.as_object().unwrap() {
            out.insert((cpu, k.clone()), n.as_u64().unwrap());
        }
    }
    out
}

fn as_owned(c: BTreeMap<(u32, &'static str), u64>) -> BTreeMap<(u32, String), u64> {
    c.into_iter()
        .map(|((c, k), n)| ((c, k.to_string()), n))
        .collect()
}

#[test]
fn perfetto_trace_holds_every_event_of_a_synthetic_recording() {
    let dir = tempfile::tempdir().unwrap();
    let rec = synthetic(dir.path());
    let out = dir.path().join("t.pftrace");
    let o = ok(powerlens(&[
        "export",
        rec.to_str().unwrap(),
        "--format",
        "perfetto",
        "-o",
        out.to_str().unwrap(),
    ]));
    let err = stderr(&o);
    assert!(err.contains("17 events on 2 CPUs"), "{err}");
    assert!(
        err.contains("4 interrupt entries/exits not written"),
        "{err}"
    );
    assert!(err.contains("4 counter tracks"), "{err}");
    assert!(!dir.path().join("t.pftrace.tmp").exists());
    let Some(v) = decode_perfetto(&out) else {
        return;
    };
    let expected: BTreeMap<(u32, String), u64> = [
        ((0, "sched_switch"), 2),
        ((0, "sched_wakeup"), 1),
        ((0, "cpu_frequency"), 1),
        ((0, "sched_migrate_task"), 1),
        ((0, "sched_process_fork"), 1),
        ((0, "sched_process_exec"), 1),
        ((0, "cpu_idle"), 2),
        ((1, "sched_wakeup_new"), 1),
        ((1, "sched_switch"), 2),
        ((1, "sched_process_exit"), 1),
    ]
    .into_iter()
    .map(|((c, k), n)| ((c, k.to_string()), n))
    .collect();
    assert_eq!(decoded_counts(&v), expected, "{v:#}");
    assert_eq!(as_owned(recording_counts(&rec)), expected);
    assert_eq!(v["out_of_order"], 0);
    assert_eq!(v["processes"], 2);
    assert_eq!(v["threads"], 3);
    assert_eq!(v["thread_names"]["101"], "<i>pwn</i>,\"x\"");
    assert_eq!(v["switch_comms"]["101"], "<i>pwn</i>,\"x\"");
    assert_eq!(v["switch_comms"]["0"], "swapper/1");
    assert_eq!(
        v["tracks"],
        json!([
            "energy package-0 (J)",
            "energy total (J)",
            "power package-0 (W)",
            "power total (W)"
        ])
    );
    assert_eq!(
        v["counters"]["power total (W)"],
        json!([[1000, 4.0], [500001000, 4.0]])
    );
    assert_eq!(
        v["counters"]["energy total (J)"],
        json!([[1000, 0.0], [500001000, 2.0], [750001000, 3.0]])
    );
}

#[test]
fn json_lines_and_csv_have_one_line_per_event() {
    let dir = tempfile::tempdir().unwrap();
    let rec = synthetic(dir.path());
    let o = ok(powerlens(&[
        "export",
        rec.to_str().unwrap(),
        "--format",
        "json",
        "-o",
        "-",
    ]));
    let lines: Vec<Value> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 17);
    let times: Vec<u64> = lines
        .iter()
        .map(|l| l["time_ns"].as_u64().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    assert_eq!(
        lines[0],
        json!({"time_ns": 1000, "cpu": 0, "event": "wakeup", "tid": 101, "comm": "<i>pwn</i>,\"x\"", "target_cpu": 0})
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| l["event"] == "interrupt_enter")
            .count(),
        2
    );

    // Default output name: REC with .events.csv.
    ok(powerlens(&[
        "export",
        rec.to_str().unwrap(),
        "--format",
        "csv",
    ]));
    let csv = std::fs::read_to_string(dir.path().join("synthetic.events.csv")).unwrap();
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows.len(), 18);
    assert!(rows[0].starts_with("time_ns,cpu,event,"));
    assert_eq!(
        rows[1],
        "1000,0,wakeup,101,\"<i>pwn</i>,\"\"x\"\"\",,,,,,0,,,,,,,,,,,"
    );
}

/// A symbolic link planted at the export's `FILE.tmp` (where the export is written before
/// its rename) is not written through: the victim file keeps its content and the export
/// lands at FILE.
#[test]
fn a_link_planted_at_the_temporary_file_is_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let rec = synthetic(dir.path());
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep").unwrap();
    let out = dir.path().join("events.jsonl");
    std::os::unix::fs::symlink(&victim, dir.path().join("events.jsonl.tmp")).unwrap();
    ok(powerlens(&[
        "export",
        rec.to_str().unwrap(),
        "--format",
        "json",
        "-o",
        out.to_str().unwrap(),
    ]));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 17);
    assert!(!out.symlink_metadata().unwrap().file_type().is_symlink());
}

#[test]
fn an_unwritable_target_is_named_and_nothing_is_left_behind() {
    let dir = tempfile::tempdir().unwrap();
    let rec = synthetic(dir.path());
    let missing_dir = dir.path().join("no/such/dir/t.pftrace");
    let o = powerlens(&[
        "export",
        rec.to_str().unwrap(),
        "-f",
        "perfetto",
        "-o",
        missing_dir.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "cannot write the export to {}",
            missing_dir.display()
        )),
        "{err}"
    );
    assert!(err.contains("No such file or directory"), "{err}");

    // A directory in the target's place: the temporary file is removed, the directory stays.
    let target = dir.path().join("taken");
    std::fs::create_dir(&target).unwrap();
    let o = powerlens(&[
        "export",
        rec.to_str().unwrap(),
        "-f",
        "csv",
        "-o",
        target.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("cannot write the export to {}", target.display())),
        "{}",
        stderr(&o)
    );
    assert!(target.is_dir());
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 2, "{left:?}");
}

#[test]
fn a_recording_without_events_says_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    // A reduced recording: no event stream at all.
    let reduced = dir.path().join("reduced.rec");
    let mut w = RecordingWriter::create(&reduced).unwrap();
    w.set_meta("mode", &json!("reduced")).unwrap();
    for (t, cpu_ns) in [(1_000_000u64, 0u64), (101_000_000, 50_000_000)] {
        w.append_sample(t, "threads", &json!([[7, 7, "seven", cpu_ns, 3, 1]]))
            .unwrap();
    }
    w.finish().unwrap();
    let out = dir.path().join("r.pftrace");
    let o = powerlens(&[
        "export",
        reduced.to_str().unwrap(),
        "-f",
        "perfetto",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("is a reduced recording"),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists());
    // The HTML report of it says, per view, what is missing.
    let html = dir.path().join("reduced.html");
    ok(powerlens(&[
        "report",
        reduced.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]));
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(
        page.matches("<p class=\"note\">Unavailable:").count(),
        6,
        "{page}"
    );
    assert!(page.contains("a reduced recording has no wake-up events"));

    // A trace recording with only wake-ups on one CPU: exported, with what it lacks.
    let sparse = dir.path().join("sparse.rec");
    let mut w = RecordingWriter::create(&sparse).unwrap();
    w.set_meta("mode", &json!("trace")).unwrap();
    let mut enc = ChunkEncoder::new();
    enc.push(&ev(
        6,
        0,
        EventKind::Wakeup {
            tid: 9,
            target_cpu: 0,
            new_thread: false,
        },
    ));
    w.append_chunk(0, 5, 5, 1, &enc.finish()).unwrap();
    w.finish().unwrap();
    let o = ok(powerlens(&[
        "export",
        sparse.to_str().unwrap(),
        "-f",
        "perfetto",
        "-o",
        out.to_str().unwrap(),
    ]));
    let err = stderr(&o);
    assert!(err.contains("note: no sched_switch records"), "{err}");
    assert!(err.contains("note: no power:cpu_idle records"), "{err}");
    assert!(err.contains("note: no energy samples"), "{err}");
    assert!(out.exists());
}

/// A real recording of the ping-pong workload (root: tracepoints): the trace decoded by
/// Perfetto's protos has, per CPU, exactly the recording's switches, wake-ups, idle and
/// frequency events. Exact, in one recording of 5000 round trips on cpu0 (at least 10,000
/// switches): the export and the oracle read the same chunks.
#[test]
#[ignore = "live: records the real kernel (root)"]
fn live_perfetto_counts_equal_the_recordings() {
    let Some(_serial) = common::live_recording() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("p.rec");
    ok(with_tracefs(
        &[
            bin(),
            "record",
            // The counts are the oracle; stacks (unwound in this debug build at ~20 µs
            // each) would only slow the drain of a million-event-per-second ping-pong.
            "--no-stacks",
            "-o",
            rec.to_str().unwrap(),
            "--",
            // On one CPU every handoff is a switch; on two idle CPUs the threads can pass
            // the token without ever sleeping, and the floor on switches below would fail.
            "taskset",
            "-c",
            "0",
            bin(),
            "workload",
            "pingpong",
            "--iterations",
            "5000",
        ],
        &[],
    ));
    let diag = recording_diagnostics(&common::json(&ok(powerlens(&[
        "report",
        rec.to_str().unwrap(),
        "--json",
    ]))));
    let out = dir.path().join("p.pftrace");
    ok(powerlens(&[
        "export",
        rec.to_str().unwrap(),
        "-f",
        "perfetto",
        "-o",
        out.to_str().unwrap(),
    ]));
    let expected = as_owned(recording_counts(&rec));
    let switches: u64 = expected
        .iter()
        .filter(|((_, k), _)| k == "sched_switch")
        .map(|(_, n)| n)
        .sum();
    assert!(
        switches >= 10_000,
        "a 5000-round-trip ping-pong switches at least 10000 times: {expected:?}; {diag}"
    );
    // The Firefox profile: a wake-up marker per recorded wake-up.
    let fx = dir.path().join("p.json");
    ok(powerlens(&[
        "export",
        rec.to_str().unwrap(),
        "-f",
        "firefox",
        "-o",
        fx.to_str().unwrap(),
    ]));
    let p: Value = serde_json::from_slice(&std::fs::read(&fx).unwrap()).unwrap();
    let wakeup_markers: u64 = p["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| marker_names(t).get("Wake-up").copied().unwrap_or(0))
        .sum();
    let wakeups: u64 = expected
        .iter()
        .filter(|((_, k), _)| k.starts_with("sched_wakeup"))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(wakeup_markers, wakeups, "{diag}");

    let Some(v) = decode_perfetto(&out) else {
        return;
    };
    assert_eq!(decoded_counts(&v), expected, "{diag}");
    assert_eq!(v["out_of_order"], 0, "{diag}");
}

/// Marker names of a Firefox profile thread, counted.
fn marker_names(thread: &Value) -> BTreeMap<String, u64> {
    let strings = thread["stringArray"].as_array().unwrap();
    let m = &thread["markers"];
    let mut out = BTreeMap::new();
    for i in 0..m["length"].as_u64().unwrap() as usize {
        let name = strings[m["name"][i].as_u64().unwrap() as usize]
            .as_str()
            .unwrap();
        *out.entry(name.to_string()).or_insert(0) += 1;
    }
    out
}

#[test]
fn firefox_profile_has_threads_state_markers_and_power_counters() {
    let dir = tempfile::tempdir().unwrap();
    let rec = synthetic(dir.path());
    let out = dir.path().join("t.json");
    let o = ok(powerlens(&[
        "export",
        rec.to_str().unwrap(),
        "-f",
        "firefox",
        "-o",
        out.to_str().unwrap(),
    ]));
    let err = stderr(&o);
    assert!(
        err.contains("markers: 2 running, 2 runnable, 1 blocked intervals, 2 wake-ups"),
        "{err}"
    );
    let p: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let threads = p["threads"].as_array().unwrap();
    let by_tid = |tid: &str| {
        threads
            .iter()
            .find(|t| t["tid"] == tid)
            .unwrap_or_else(|| panic!("no thread {tid} in {threads:?}"))
    };
    // The threads with scheduler events, plus the counters' own.
    assert_eq!(threads.len(), 3);
    let t101 = by_tid("101");
    assert_eq!(t101["name"], "<i>pwn</i>,\"x\"");
    assert_eq!(t101["pid"], "100");
    assert_eq!(
        marker_names(t101),
        BTreeMap::from([
            ("Blocked".to_string(), 1),
            ("Runnable".to_string(), 1),
            ("Running".to_string(), 1),
            ("Wake-up".to_string(), 1)
        ])
    );
    let t102 = by_tid("102");
    assert_eq!(t102["name"], "child");
    assert_eq!(
        marker_names(t102),
        BTreeMap::from([
            ("Runnable".to_string(), 1),
            ("Running".to_string(), 1),
            ("Wake-up".to_string(), 1)
        ])
    );
    // 102 exited at 2000 ns: 1.1 µs after the recorded start (900 ns).
    assert!(
        (t102["unregisterTime"].as_f64().unwrap() - 0.0011).abs() < 1e-9,
        "{}",
        t102["unregisterTime"]
    );
    let counters = p["counters"].as_array().unwrap();
    let names: Vec<&str> = counters
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "energy total (J)",
            "power total (W)",
            "energy package-0 (J)",
            "power package-0 (W)"
        ]
    );
    // Counter samples are deltas: energy 0, +2, +1 J; power 4, +0 W.
    assert_eq!(counters[0]["samples"]["count"], json!([0.0, 2.0, 1.0]));
    assert_eq!(counters[1]["samples"]["count"], json!([4.0, 0.0]));
}

/// A target on a full file system: the write error names the file, and neither the file nor
/// its temporary is left (a 64 KiB tmpfs in a private mount namespace; root).
#[test]
fn a_full_disk_fails_the_export_and_leaves_nothing() {
    if !common::is_root() {
        powerlens_sys::skip_test!("needs root to mount a small tmpfs");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // 20,000 switches: about 2 MB of JSON Lines, far over the tmpfs.
    let rec = dir.path().join("big.rec");
    let mut w = RecordingWriter::create(&rec).unwrap();
    w.set_meta("mode", &json!("trace")).unwrap();
    let mut enc = ChunkEncoder::new();
    for i in 0..20_000u64 {
        enc.push(&ev(
            1_000 + i * 1_000,
            0,
            EventKind::Switch {
                prev: 10 + (i % 2) as u32,
                how: SwitchedOut::Blocked,
                next: 11 - (i % 2) as u32,
            },
        ));
        if enc.len() == 4096 {
            let (a, b, n) = (
                enc.first_ns().unwrap(),
                enc.last_ns().unwrap(),
                enc.len() as u32,
            );
            w.append_chunk(0, a, b, n, &enc.finish()).unwrap();
        }
    }
    let (a, b, n) = (
        enc.first_ns().unwrap(),
        enc.last_ns().unwrap(),
        enc.len() as u32,
    );
    w.append_chunk(0, a, b, n, &enc.finish()).unwrap();
    w.finish().unwrap();
    let mnt = dir.path().join("small");
    std::fs::create_dir(&mnt).unwrap();
    let target = mnt.join("out.json");
    let script = format!(
        "mount -t tmpfs -o size=64k none {mnt} || exit 77
         {bin} export {rec} -f json -o {target}; echo exit=$?; ls -A {mnt}",
        mnt = mnt.display(),
        bin = bin(),
        rec = rec.display(),
        target = target.display()
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
    assert!(text.starts_with("exit=2\n"), "{text}{err}");
    assert_eq!(text.trim_end(), "exit=2", "files left on the tmpfs: {text}");
    assert!(
        err.contains(&format!(
            "exporting to {} failed; nothing was left behind",
            target.display()
        )),
        "{err}"
    );
    assert!(err.contains("No space left on device"), "{err}");
}

/// The HTML report in a real browser: it loads with no console message (no script error,
/// nothing fetched), the screenshot is far from blank, and a thread named `<i>pwn</i>,"x"`
/// is text, not markup.
#[test]
fn html_report_renders_in_chromium_with_names_as_text() {
    let dir = tempfile::tempdir().unwrap();
    let rec = synthetic(dir.path());
    let html = dir.path().join("r.html");
    let o = ok(powerlens(&[
        "report",
        rec.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]));
    assert!(o.stdout.is_empty());
    let page = assert_self_contained(&html, "<i>pwn</i>", "&lt;i&gt;pwn&lt;/i&gt;,&quot;x&quot;");
    // Every plot, with axes and units, and the grid.
    for want in [
        "Power and energy over time",
        ">power total</text>",
        ">energy since the first sample</text>",
        ">W</text>",
        "aria-label=\"CPU time\"",
        "aria-label=\"thread timeline\"",
        "aria-label=\"wake-up causes\"",
        ">CPU frequency</text>",
        ">MHz</text>",
        "From power:cpu_frequency records",
        // cpu0 has power:cpu_idle records, cpu1 none (and no sysfs counters).
        "aria-label=\"idle-state residency\"",
        "From the power:cpu_idle records. No data for cpu1 (empty bars)",
        "time since the start of the recording (s)",
        "<table class=\"grid\">",
        // Issue 17 point 8: the grid has its totals row; system figures, wake-up causes,
        // advice and what is unavailable are tables and lists whose text wraps, not
        // preformatted blocks clipped at the page's width.
        "<tfoot><tr>",
        ">total</td>",
        "<h2>System</h2>\n<table class=\"kv\">",
        "<h2>Advice</h2>\n<p>Judged against:",
        "<h2>Unavailable</h2>\n<ul><li>",
    ] {
        assert!(page.contains(want), "missing {want:?}");
    }
    // No preformatted block anywhere: the per-CPU tables are tables too.
    assert!(!page.contains("<pre>"), "a <pre> block is left");
    for section in [
        "CPUs: busy, idle and unknown time",
        "System",
        "Advice",
        "Unavailable",
        "Energy",
        "Thread balance",
    ] {
        let at = page.find(&format!("<h2>{section}</h2>"));
        if let Some(at) = at {
            let next = page[at + 4..]
                .find("<h2>")
                .map_or(page.len(), |n| at + 4 + n);
            assert!(
                !page[at..next].contains("<pre>"),
                "{section} is preformatted"
            );
        }
    }
    let causes = page.find("<h2>Wake-up causes</h2>").unwrap();
    let next = causes + page[causes + 4..].find("<h2>").unwrap() + 4;
    assert!(
        !page[causes..next].contains("<pre>"),
        "{}",
        &page[causes..next]
    );

    assert_renders_in_chromium(&html, "<i>pwn</i>", "i");
}

/// Issue 17 point 8: the report page's per-CPU figures are tables (not a preformatted
/// block clipped at the page's width), each n/a reason a note under its table, and in a
/// real browser they fit the window and wrap: at the page's width (1100 px) and in a 700 px
/// window no table or note runs past the viewport, and the notes take more lines when
/// narrower. (At Chromium's narrowest, 500 px, the nine-column CPU table is about 480 px
/// of numbers and overruns the 485 px viewport: a table cannot wrap a number.)
#[test]
fn html_per_cpu_tables_are_tables_that_wrap_with_their_notes() {
    let dir = tempfile::tempdir().unwrap();
    let rec = synthetic(dir.path());
    let html = dir.path().join("r.html");
    ok(powerlens(&[
        "report",
        rec.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]));
    let page = std::fs::read_to_string(&html).unwrap();
    const HEADING: &str = "CPUs: busy, idle and unknown time";
    let at = page.find(&format!("<h2>{HEADING}</h2>")).unwrap();
    let end = at + 4 + page[at + 4..].find("<h2>").unwrap();
    let section = &page[at..end];
    assert!(!section.contains("<pre"), "{section}");
    // The CPU table and the idle-residency table, with their headers as the text view's.
    assert_eq!(
        section.matches("<table class=\"grid\">").count(),
        2,
        "{section}"
    );
    for header in [
        ">cpu</th>",
        ">util</th>",
        ">idle wake-ups</th>",
        ">state</th>",
        ">sysfs time s</th>",
    ] {
        assert!(section.contains(header), "missing {header}: {section}");
    }
    // cpu1 has no power:cpu_idle records and no sysfs counters: its n/a cells are
    // explained in notes, not in the table's lines.
    assert!(
        section.contains("<p class=\"note\">cpu1 trace n/a: "),
        "{section}"
    );
    assert!(
        section.contains("<p class=\"note\">idle residency (trace: power:cpu_idle; sysfs: cpuidle usage/time deltas):</p>"),
        "{section}"
    );

    let Some((wide_vw, wide)) = layout_in_chromium(&html, 1100, HEADING) else {
        return;
    };
    let (narrow_vw, narrow) = layout_in_chromium(&html, 700, HEADING).unwrap();
    for (vw, laid) in [(wide_vw, &wide), (narrow_vw, &narrow)] {
        let tables = laid.iter().filter(|l| l.element == "table.grid").count();
        let notes = laid.iter().filter(|l| l.element == "p.note").count();
        assert!(tables == 2 && notes >= 2, "{laid:?}");
        for l in laid.iter() {
            assert!(l.right <= vw, "{l:?} runs past the {vw} px viewport");
        }
    }
    // The notes wrap: in the narrow window they take more lines (their total height
    // grows), where preformatted text would have run on past the edge.
    let notes_height = |laid: &[common::Laid]| -> f64 {
        laid.iter()
            .filter(|l| l.element == "p.note")
            .map(|l| l.height)
            .sum()
    };
    assert!(
        notes_height(&narrow) > notes_height(&wide),
        "notes do not wrap: {wide:?} vs {narrow:?}"
    );
}
