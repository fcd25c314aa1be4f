//! Issue 51 (6): `diff` of a parallel build pairs each process with the one that did the
//! same job. Replays two committed recordings (tests/data/recordings/README.md) of the
//! project in tests/data/make_project — one generated big.c and four tiny files — built
//! with `make -j1` and with `make -j2`. Under -j2 big.c is generated while the tiny files
//! compile, so its `cc1` starts last where under -j1 it starts first: paired by start
//! order (before issue 51), every `cc1` met another file's. Deterministic: replay only.

use std::collections::BTreeMap;
use std::path::Path;

use powerlens_sys::fixture::FixtureTree;
use serde_json::Value;

mod common;
use common::{command_on_fixture, stderr};

/// The file each process compiled or assembled, by pid, from the recording's own
/// `commands` samples: the `.c` (cc1) or `.o` (as) among its words.
fn files_by_pid(rec: &Path, suffix: &str) -> BTreeMap<u64, String> {
    let db = rusqlite::Connection::open(rec).unwrap();
    let mut stmt = db
        .prepare("SELECT data FROM samples WHERE kind = 'commands'")
        .unwrap();
    let rows = stmt.query_map([], |r| r.get::<_, String>(0)).unwrap();
    let mut out = BTreeMap::new();
    for data in rows {
        let v: Value = serde_json::from_str(&data.unwrap()).unwrap();
        let file = v["argv"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .find(|w| w.ends_with(suffix) && !w.starts_with('/'));
        if let (Some(pid), Some(file)) = (v["pid"].as_u64(), file) {
            out.insert(pid, file.to_string());
        }
    }
    out
}

#[test]
fn diff_of_make_j1_and_j2_pairs_every_cc1_with_the_one_that_compiled_the_same_file() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/recordings");
    let dir = tempfile::tempdir().unwrap();
    for name in ["make_j1.rec", "make_j2.rec"] {
        std::fs::copy(data.join(name), dir.path().join(name)).unwrap();
    }
    let tree = FixtureTree::new();
    let out = command_on_fixture(&tree, &dir.path().join("results.db"))
        .current_dir(dir.path())
        .args([
            "diff",
            "make_j1.rec",
            "make_j2.rec",
            "--by",
            "process",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (a_files, b_files) = (
        files_by_pid(&dir.path().join("make_j1.rec"), ".c"),
        files_by_pid(&dir.path().join("make_j2.rec"), ".c"),
    );
    let rows = v["rows"].as_array().unwrap();
    let cc1: Vec<&Value> = rows
        .iter()
        .filter(|r| [&r["a"], &r["b"]].iter().any(|s| s["comm"] == "cc1"))
        .collect();
    // Five files, five cc1 in each build, each in both recordings.
    assert_eq!(cc1.len(), 5, "{cc1:#?}");
    let mut compiled = Vec::new();
    for r in cc1 {
        let (pa, pb) = (r["a"]["pid"].as_u64(), r["b"]["pid"].as_u64());
        let fa = pa
            .and_then(|p| a_files.get(&p))
            .expect("A's cc1 has its file");
        let fb = pb
            .and_then(|p| b_files.get(&p))
            .expect("B's cc1 has its file");
        assert_eq!(fa, fb, "{}: A's cc1 compiled {fa}, B's {fb}", r["key"]);
        assert_eq!(r["key"], format!("cc1 [{fa}]"));
        compiled.push(fa.clone());
    }
    compiled.sort();
    assert_eq!(compiled, ["big.c", "m1.c", "m2.c", "m3.c", "main.c"]);
    // The assembler of each file too, by its .o.
    let (a_obj, b_obj) = (
        files_by_pid(&dir.path().join("make_j1.rec"), ".o"),
        files_by_pid(&dir.path().join("make_j2.rec"), ".o"),
    );
    for r in rows.iter().filter(|r| r["a"]["comm"] == "as") {
        let oa = a_obj.get(&r["a"]["pid"].as_u64().unwrap());
        let ob = r["b"]["pid"].as_u64().and_then(|p| b_obj.get(&p));
        assert_eq!(oa, ob, "{}", r["key"]);
    }
    // The two builds' big.c cc1 did the same work: no tenfold note about it. The tiny
    // files' cc1 against big.c's would have been (0.9 s against 0.02 s).
    let notes = v["notes"].to_string();
    assert!(!notes.contains("cc1 [big.c]"), "{notes}");
}

/// Recordings made before issue 51 have no command lines (the sleepers of
/// tests/data/recordings): they still read, and their rows keep matching by name in
/// order, as before.
#[test]
fn recordings_without_command_lines_still_match_by_name() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/recordings");
    let dir = tempfile::tempdir().unwrap();
    let name = "sleepy_short.rec";
    std::fs::copy(data.join(name), dir.path().join(name)).unwrap();
    let tree = FixtureTree::new();
    let out = command_on_fixture(&tree, &dir.path().join("results.db"))
        .current_dir(dir.path())
        .args(["diff", "sleepy_short.rec", "sleepy_short.rec", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let keys: Vec<&str> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["powerlens / powerlens", "powerlens / sleepy-0"]);
}
