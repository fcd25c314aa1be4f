//! A whole results database file: read as `runs list`, `runs show ID` and `compare ID`
//! read it (the rows, their checksums, the stored JSON documents), then opened for
//! writing as `run` opens it to append a result. Checks: a result `get` returns is not
//! one `list` marks damaged, and a result appended to a file the library accepted reads
//! back whole and undamaged — or the append is refused.

use powerlens_core::run::RunResult;
use powerlens_store::{NewResult, ResultsDb, RunRow};

use super::scratch;

pub const DICT: &[&str] = &[
    "SQLite format 3\0",
    "results",
    "runs",
    "meta",
    "schema_version",
    "crc",
    "document",
    "\"summary\"",
    "\"runs\"",
    "measured (rapl-powercap)",
];

pub fn run(input: &[u8]) {
    scratch::with_file("results.db", input, |path| {
        if let Ok(db) = ResultsDb::open_existing(path) {
            if let Ok(rows) = db.list() {
                for row in rows {
                    if let Ok(got) = db.get(row.id) {
                        assert!(!got.damaged, "get returned a damaged result");
                        assert!(!row.damaged, "get returned what list marked damaged");
                        if let Ok(result) = serde_json::from_str::<RunResult>(&got.document) {
                            let _ = powerlens_core::compare::samples_of(&result);
                        }
                    }
                }
            }
        }
        append(path);
    });
}

fn append(path: &std::path::Path) {
    let Ok(mut db) = ResultsDb::open(path) else {
        return;
    };
    let new = NewResult {
        created_unix: 1.5e9,
        kind: "run".into(),
        command: "fuzz".into(),
        label: Some("appended".into()),
        complete: true,
        provenance: "estimated (default-linear)".into(),
        mean_wall_s: Some(0.25),
        mean_energy_j: Some(2.0),
        document: "{}".into(),
        runs: vec![RunRow {
            wall_s: 0.25,
            cpu_s: 0.125,
            energy_j: 2.0,
            power_w: 8.0,
            exit_code: Some(0),
            signal: None,
            domains: "{}".into(),
        }],
    };
    let Ok(id) = db.insert(&new) else {
        return;
    };
    // The file took the write: what was written must read back, or be refused.
    if let Ok(row) = db.get(id) {
        assert_eq!(row.command, "fuzz", "an appended result read back changed");
        assert_eq!(row.label.as_deref(), Some("appended"));
        assert_eq!(row.mean_energy_j, Some(2.0));
        assert_eq!(row.runs, 1);
    }
}
