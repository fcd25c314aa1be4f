//! Recorded traces, replayed exactly (issue 46, point 3). The live tests record the kernel
//! as it runs, so their figures move from run to run and they can only check bounds; these
//! replay recordings made once (tests/data/recordings, whose README says how each was
//! made) and pin every figure the analyses print: `report --json` of every `--by` (thread
//! and process rows, functions with their sample-and-hold charges, stacks, wake-up causes,
//! tracing cost, advice), the text, CSV, tree and folded views, `diff` of the two sleepers,
//! and what `export` writes. A change to an analysis moves a snapshot
//! (tests/snapshots/replay__*.snap) and fails here: re-accept deliberately, after reading
//! the diff, with `INSTA_UPDATE=always cargo test -p powerlens --test replay`.
//!
//! The binary reads nothing of this machine (an empty sysfs and procfs, a private results
//! database), works on copies of the fixtures (a report may write the symbol cache into its
//! recording), and reads no clock that the output depends on: these tests are
//! deterministic, not live.

use serde_json::{json, Value};

mod common;
use common::replay::{recordings, Replay};
use common::stderr;

/// Every fixture, by name (`NAME.rec`).
const FIXTURES: [&str; 6] = [
    "stack_program",
    "pingpong",
    "sleepy_short",
    "sleepy_long",
    "pipes",
    "node_jit",
];

/// The fixtures recorded with call stacks (the others with `--no-stacks`).
const WITH_STACKS: [&str; 3] = ["stack_program", "pingpong", "node_jit"];

fn rec(name: &str) -> String {
    format!("{name}.rec")
}

/// FNV-1a (64-bit) of `bytes`, in hex: a digest of an output too large to keep whole in a
/// snapshot, which any changed byte moves.
fn fnv1a(bytes: &[u8]) -> String {
    let hash = bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x}")
}

/// What pins an output too large for a snapshot: its size, lines and digest, and its
/// first `head` lines to read.
fn digest(bytes: &[u8], head: usize) -> Value {
    let text = String::from_utf8_lossy(bytes);
    json!({
        "bytes": bytes.len(),
        "lines": bytes.iter().filter(|&&b| b == b'\n').count(),
        "fnv1a64": fnv1a(bytes),
        "head": text.lines().take(head).collect::<Vec<_>>(),
    })
}

#[test]
fn the_fixtures_are_of_a_schema_version_the_reader_reads() {
    use powerlens_store::recording::{RecordingReader, RECORDING_SCHEMA_VERSION};
    // A format bump keeps these files as they were recorded: they are the test that old
    // recordings still read (docs/FORMAT.md, tests/data/recordings/README.md). A bump
    // that cannot read them must say why here, and re-record them.
    for name in FIXTURES {
        let path = recordings().join(rec(name));
        let db = rusqlite::Connection::open_with_flags(
            &path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap();
        let version: i32 = db
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert!(
            (1..=RECORDING_SCHEMA_VERSION).contains(&version),
            "{name}: schema version {version}, the reader reads 1 to {RECORDING_SCHEMA_VERSION}"
        );
        let reader = RecordingReader::open(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let codec = reader.meta("codec_version").unwrap().unwrap();
        assert!(
            (1..=powerlens_core::codec::CODEC_VERSION as u64).contains(&codec.as_u64().unwrap()),
            "{name}: chunk codec version {codec}"
        );
        assert_eq!(reader.has_stacks().unwrap(), WITH_STACKS.contains(&name));
    }
}

/// `report --json` of each fixture. `--by` chooses the grid's rows, not the document
/// (which has the thread and the process rows both): `--by process` prints the same.
#[test]
fn report_json_by_thread_and_process() {
    let r = Replay::of(&FIXTURES);
    for name in FIXTURES {
        let by_thread = r.json(&["report", &rec(name), "--json"]);
        let by_process = r.json(&["report", &rec(name), "--by", "process", "--json"]);
        assert_eq!(by_thread, by_process, "{name}");
        insta::assert_json_snapshot!(format!("{name}-report"), by_thread);
    }
}

/// `report --by function --json` (the function grid, the sampled stacks' holds) and
/// `--by stack --json`; a recording without stacks says it has none. node's stacks, 30
/// frames of recursion each, are pinned by digest.
#[test]
fn report_json_by_function_and_stack() {
    let r = Replay::of(&FIXTURES);
    for name in FIXTURES {
        let functions = ["report", &rec(name), "--by", "function", "--json"];
        let stacks = ["report", &rec(name), "--by", "stack", "--json"];
        if !WITH_STACKS.contains(&name) {
            for args in [functions, stacks] {
                let out = r.run(&args);
                assert_eq!(out.status.code(), Some(2), "{name}");
                assert!(
                    stderr(&out)
                        .contains("has no call stacks: they were not recorded (--no-stacks)"),
                    "{name}: {}",
                    stderr(&out)
                );
            }
            continue;
        }
        insta::assert_json_snapshot!(format!("{name}-by_function"), r.json(&functions));
        if name == "node_jit" {
            let out = r.ok(&stacks);
            insta::assert_json_snapshot!(format!("{name}-by_stack"), digest(&out.stdout, 0));
        } else {
            insta::assert_json_snapshot!(format!("{name}-by_stack"), r.json(&stacks));
        }
    }
}

/// A report that found a frame missing from a recording's symbol cache would name it from
/// this machine's files and write it into the recording: the fixtures' caches are whole,
/// so the copies are byte for byte the committed files after every stack view.
#[test]
fn replay_names_every_frame_from_the_recordings_own_cache() {
    let r = Replay::of(&FIXTURES);
    for name in WITH_STACKS {
        for by in ["function", "stack"] {
            r.ok(&["report", &rec(name), "--by", by, "--json"]);
        }
        r.ok(&["report", &rec(name), "--format", "folded"]);
        let committed = std::fs::read(recordings().join(rec(name))).unwrap();
        assert!(
            std::fs::read(r.copy(name)).unwrap() == committed,
            "{name}: the report wrote to its recording"
        );
    }
}

/// The text report of each fixture, by thread and by process; by function for those with
/// stacks.
#[test]
fn report_text_views() {
    let r = Replay::of(&FIXTURES);
    for name in FIXTURES {
        insta::assert_snapshot!(
            format!("{name}-text_by_thread"),
            r.text(&["report", &rec(name)])
        );
        insta::assert_snapshot!(
            format!("{name}-text_by_process"),
            r.text(&["report", &rec(name), "--by", "process"])
        );
        if WITH_STACKS.contains(&name) {
            insta::assert_snapshot!(
                format!("{name}-text_by_function"),
                r.text(&["report", &rec(name), "--by", "function"])
            );
        }
    }
}

/// The other views: CSV grids, the caller/callee tree and the folded stacks (node's by
/// digest, as its stacks above).
#[test]
fn report_csv_tree_and_folded() {
    let r = Replay::of(&FIXTURES);
    for name in FIXTURES {
        insta::assert_snapshot!(
            format!("{name}-csv"),
            r.text(&["report", &rec(name), "--csv"])
        );
    }
    for name in ["stack_program", "pingpong"] {
        insta::assert_snapshot!(
            format!("{name}-tree"),
            r.text(&["report", &rec(name), "--tree"])
        );
        insta::assert_snapshot!(
            format!("{name}-folded"),
            r.text(&["report", &rec(name), "--format", "folded"])
        );
    }
    let node = r.ok(&["report", &rec("node_jit"), "--format", "folded"]);
    insta::assert_json_snapshot!("node_jit-folded", digest(&node.stdout, 0));
    insta::assert_snapshot!(
        "stack_program-by_function_csv",
        r.text(&["report", &rec("stack_program"), "--by", "function", "--csv"])
    );
}

/// `diff` of the two sleepers (2 ms and 50 ms periods): every system figure, the matched
/// rows, the findings, as JSON and as text, by thread and by process.
#[test]
fn diff_of_the_sleepers() {
    let r = Replay::of(&FIXTURES);
    let (a, b) = (rec("sleepy_short"), rec("sleepy_long"));
    for by in ["thread", "process"] {
        insta::assert_json_snapshot!(
            format!("sleepy-diff_by_{by}"),
            r.json(&["diff", &a, &b, "--by", by, "--json"])
        );
    }
    insta::assert_snapshot!("sleepy-diff_text", r.text(&["diff", &a, &b]));
}

/// What `export` writes of each fixture in every format: size, lines and digest, the
/// first events of the JSON Lines and CSV, and export's own summary.
#[test]
fn exports() {
    let r = Replay::of(&FIXTURES);
    for name in FIXTURES {
        let mut formats = serde_json::Map::new();
        for (format, head) in [("json", 3), ("csv", 4), ("perfetto", 0), ("firefox", 0)] {
            let out = r.ok(&["export", &rec(name), "--format", format, "-o", "-"]);
            let mut pinned = digest(&out.stdout, head);
            pinned["stderr"] = stderr(&out).lines().collect::<Vec<_>>().into();
            formats.insert(format.into(), pinned);
        }
        insta::assert_json_snapshot!(format!("{name}-export"), Value::Object(formats));
    }
}

/// The live tests' failure line (`common::recording_diagnostics`): on hand-written reports
/// (every figure, a reduced recording's, none at all) and on the report of a recorded
/// ping-pong, whose figures its snapshot pins (1 switch-in inferred on cpu1, 9 wake-ups
/// not recorded, stacks sampled down to 1 in 9).
#[test]
fn the_recording_diagnostics_line() {
    use common::recording_diagnostics;
    let full = json!({
        "system": {
            "lost_records": 12,
            "inferred_switch_ins": 3,
            "unrecorded_wakeups": 40,
            "start_up_s": 0.412,
            "tracing_path": {
                "events": "perf_ring",
                "stack_unwinding": "stack_copy_and_frame_pointers",
                "user_stack_bytes": 512,
                "stack_samples_per_s": 1000,
                "max_stack_sample_period": 14,
                "stack_samples_dropped": 2
            }
        },
        "cpus": [
            {"cpu": 0, "lost_records": 0, "inferred_switch_ins": 1, "unrecorded_wakeups": 0},
            {"cpu": 1, "lost_records": 12, "inferred_switch_ins": 2, "unrecorded_wakeups": 40}
        ]
    });
    assert_eq!(
        recording_diagnostics(&full),
        "recording: lost_records=12(cpu1=12) inferred_switch_ins=3(cpu0=1,cpu1=2) \
         unrecorded_wakeups=40(cpu1=40) max_stack_sample_period=14 stack_samples_dropped=2 \
         stack_samples_per_s=1000 events=perf_ring stack_unwinding=stack_copy_and_frame_pointers \
         start_up_s=0.412"
    );
    // A reduced recording: no CPUs, no tracing path.
    let reduced = json!({
        "system": {
            "lost_records": 0,
            "inferred_switch_ins": 0,
            "unrecorded_wakeups": 0,
            "start_up_s": 0.05,
            "tracing_path": null
        },
        "cpus": []
    });
    assert_eq!(
        recording_diagnostics(&reduced),
        "recording: lost_records=0 inferred_switch_ins=0 unrecorded_wakeups=0 \
         max_stack_sample_period=null stack_samples_dropped=null stack_samples_per_s=null \
         events=null stack_unwinding=null start_up_s=0.05"
    );
    assert_eq!(
        recording_diagnostics(&json!({})),
        "recording: lost_records=null inferred_switch_ins=null unrecorded_wakeups=null \
         max_stack_sample_period=null stack_samples_dropped=null stack_samples_per_s=null \
         events=null stack_unwinding=null start_up_s=null"
    );
    let r = Replay::of(&FIXTURES);
    assert_eq!(
        recording_diagnostics(&r.json(&["report", &rec("pingpong"), "--json"])),
        "recording: lost_records=0 inferred_switch_ins=1(cpu1=1) \
         unrecorded_wakeups=9(cpu0=8,cpu1=1) max_stack_sample_period=9 \
         stack_samples_dropped=0 stack_samples_per_s=10000 events=bpf \
         stack_unwinding=stack_copy start_up_s=null"
    );
}
