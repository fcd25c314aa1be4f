use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rusqlite::Connection;
use serde_json::json;

use super::*;
use crate::files::SIDE_FILES;
use crate::StoreError;

/// The checksum written at the end covers what figures come from: a changed sample,
/// thread or chunk index row is found; the symbol cache (which reports add to) is not
/// covered; a recording that never ended has no checksum and is unverified.
#[test]
fn the_content_checksum_finds_changed_values() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.rec");
    let mut w = RecordingWriter::create(&path).unwrap();
    w.set_meta("mode", &json!("trace")).unwrap();
    w.append_chunk(0, 10, 20, 2, &chunk_bytes(1, 40)).unwrap();
    w.append_sample(15, "energy", &json!({"package-0": 12.5}))
        .unwrap();
    w.finish().unwrap();
    // Checked by SQL, and with the rows of the chunks a reader read: the same answer.
    let check = |sql: &str| {
        let copy = dir.path().join("copy.rec");
        std::fs::copy(&path, &copy).unwrap();
        Connection::open(&copy).unwrap().execute_batch(sql).unwrap();
        let r = RecordingReader::open(&copy).unwrap();
        let read: Vec<ChunkIndexRow> = (0..4)
            .flat_map(|cpu| all_chunks(&r, cpu))
            .map(|c| c.index_row())
            .collect();
        let by_sql = r.check_content().unwrap();
        assert_eq!(
            r.content_parts().unwrap().check_read(&read),
            by_sql,
            "{sql}"
        );
        by_sql
    };
    assert_eq!(check("SELECT 1"), ContentCheck::Verified);
    for damage in [
        "UPDATE samples SET data = '{\"package-0\":13.5}'",
        "UPDATE chunks SET cpu = 1",
        "UPDATE chunks SET events = 3",
        "UPDATE chunks SET data = X'00'",
        "UPDATE meta SET value = '\"reduced\"' WHERE key = 'mode'",
    ] {
        let found = check(damage);
        assert!(
            matches!(found, ContentCheck::Mismatch { .. }),
            "{damage}: {found:?}"
        );
        assert!(found.warning(&path).unwrap().contains("is damaged"));
    }
    let unended = dir.path().join("unended.rec");
    let mut w = RecordingWriter::create(&unended).unwrap();
    w.flush().unwrap();
    std::mem::forget(w);
    let r = RecordingReader::open(&unended).unwrap();
    assert_eq!(r.check_content().unwrap(), ContentCheck::Unverified);
}

/// A recording holds command lines: created for its owner only; a link planted at its
/// path or at its `-wal` (even dangling) is refused, and nothing is created through it.
#[test]
fn a_new_recording_is_private_and_planted_links_are_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.rec");
    let w = RecordingWriter::create(&path).unwrap();
    drop(w);
    let mode = path.metadata().unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    let target = dir.path().join("target");
    let linked = dir.path().join("linked.rec");
    std::os::unix::fs::symlink(&target, &linked).unwrap();
    assert!(RecordingWriter::create(&linked).is_err());
    let side = dir.path().join("other.rec-wal");
    std::os::unix::fs::symlink(&target, &side).unwrap();
    let err = RecordingWriter::create(&dir.path().join("other.rec"))
        .map(|_| ())
        .unwrap_err();
    assert!(err.to_string().contains("other.rec-wal"), "{err}");
    assert!(!target.exists(), "nothing created through a link");
}

fn chunk_bytes(i: u32, len: usize) -> Vec<u8> {
    (0..len).map(|k| (k as u32 ^ i) as u8).collect()
}

fn all_chunks(r: &RecordingReader, cpu: u32) -> Vec<Chunk> {
    let mut c = r.chunks(cpu);
    let mut out = Vec::new();
    while let Some(chunk) = c.next_chunk().unwrap() {
        out.push(chunk);
    }
    assert_eq!(c.next_chunk().unwrap(), None, "stays exhausted");
    out
}

#[test]
fn round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.rec");
    let mut w = RecordingWriter::create(&path).unwrap();
    assert_eq!(w.path(), path);
    w.set_meta("command", &json!(["sleep", "1"])).unwrap();
    w.set_meta("lost_records", &json!(3)).unwrap();
    w.set_meta("lost_records", &json!(5)).unwrap();
    // Interleaved CPUs, appended out of CPU order.
    w.append_chunk(1, 10, 20, 2, &chunk_bytes(1, 100)).unwrap();
    w.append_chunk(0, 5, 30, 7, &chunk_bytes(2, 70_000))
        .unwrap();
    w.append_chunk(1, 21, u64::MAX, 1, &chunk_bytes(3, 1))
        .unwrap();
    w.append_chunk(7, 0, 0, 0, &[]).unwrap();
    w.append_sample(2_000, "energy", &json!({"uj": 2})).unwrap();
    w.append_sample(1_000, "energy", &json!({"uj": 1})).unwrap();
    w.append_sample(1_500, "cpuidle", &json!([1, 2])).unwrap();
    w.append_sample(2_000, "energy", &json!({"uj": 3})).unwrap();
    w.upsert_thread(&ThreadRow {
        tid: 42,
        pid: Some(40),
        ppid: None,
        parent_tid: None,
        comm: "worker".into(),
    })
    .unwrap();
    // None and an empty comm keep what is known; values win.
    w.upsert_thread(&ThreadRow {
        tid: 42,
        pid: None,
        ppid: Some(1),
        parent_tid: Some(40),
        comm: String::new(),
    })
    .unwrap();
    w.upsert_thread(&ThreadRow {
        tid: 40,
        comm: "main".into(),
        ..Default::default()
    })
    .unwrap();
    w.upsert_thread(&ThreadRow {
        tid: 40,
        pid: Some(40),
        comm: "main2".into(),
        ..Default::default()
    })
    .unwrap();
    let before = w.bytes_written();
    w.flush().unwrap();
    assert!(w.bytes_written() >= 70_000, "{}", w.bytes_written());
    assert!(before >= 70_000);
    w.finish().unwrap();
    for side in SIDE_FILES {
        let mut p = path.clone().into_os_string();
        p.push(side);
        assert!(!Path::new(&p).exists(), "{side} left behind after finish");
    }

    let r = RecordingReader::open(&path).unwrap();
    assert_eq!(r.meta("command").unwrap(), Some(json!(["sleep", "1"])));
    assert_eq!(r.meta("lost_records").unwrap(), Some(json!(5)));
    assert_eq!(r.meta("nope").unwrap(), None);
    // The two set, and the content checksum written at the end.
    assert_eq!(r.all_meta().unwrap().len(), 3);
    assert_eq!(r.check_content().unwrap(), ContentCheck::Verified);
    assert_eq!(r.cpus().unwrap(), vec![0, 1, 7]);
    assert_eq!(r.event_count().unwrap(), 10);
    let c1 = all_chunks(&r, 1);
    assert_eq!(
        c1,
        vec![
            Chunk {
                seq: 1,
                cpu: 1,
                first_ns: 10,
                last_ns: 20,
                events: 2,
                data: chunk_bytes(1, 100)
            },
            Chunk {
                seq: 3,
                cpu: 1,
                first_ns: 21,
                last_ns: u64::MAX,
                events: 1,
                data: chunk_bytes(3, 1)
            },
        ]
    );
    assert_eq!(all_chunks(&r, 0)[0].data, chunk_bytes(2, 70_000));
    assert_eq!(all_chunks(&r, 7)[0].data, Vec::<u8>::new());
    assert!(all_chunks(&r, 3).is_empty());
    let mut energy = Vec::new();
    r.samples("energy", |t, v| energy.push((t, v))).unwrap();
    assert_eq!(
        energy,
        vec![
            (1_000, json!({"uj": 1})),
            (2_000, json!({"uj": 2})),
            (2_000, json!({"uj": 3}))
        ]
    );
    assert_eq!(
        r.threads().unwrap(),
        vec![
            ThreadRow {
                tid: 40,
                pid: Some(40),
                ppid: None,
                parent_tid: None,
                comm: "main2".into()
            },
            ThreadRow {
                tid: 42,
                pid: Some(40),
                ppid: Some(1),
                parent_tid: Some(40),
                comm: "worker".into()
            },
        ]
    );
}

#[test]
fn stacks_modules_and_the_symbol_cache_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.rec");
    let mut w = RecordingWriter::create(&path).unwrap();
    w.add_module(0, "[kernel]", None).unwrap();
    w.add_module(1, "/tmp/t", Some("0a1b2c")).unwrap();
    w.add_stack(0, &[1, 2, 3]).unwrap();
    w.add_stack(7, &[]).unwrap();
    w.finish().unwrap();
    let r = RecordingReader::open(&path).unwrap();
    assert!(r.has_stack_tables().unwrap());
    assert_eq!(
        r.modules().unwrap(),
        vec![(0, "[kernel]".to_string()), (1, "/tmp/t".to_string())]
    );
    assert_eq!(
        r.module_build_ids().unwrap(),
        HashMap::from([(1, "0a1b2c".to_string())])
    );
    let mut stacks = Vec::new();
    r.stacks(|id, frames| stacks.push((id, frames.to_vec())))
        .unwrap();
    assert_eq!(stacks, vec![(0, vec![1, 2, 3]), (7, vec![])]);
    assert!(r.symbols().unwrap().is_empty());
    let rows = vec![
        SymbolRow {
            module: 0,
            offset: u64::MAX - 5,
            function: Some("schedule".into()),
        },
        SymbolRow {
            module: 1,
            offset: 0x1139,
            function: None,
        },
    ];
    r.save_symbols(&rows).unwrap();
    // The open reader sees the cache it saved; a new one does too.
    let mut got = r.symbols().unwrap();
    got.sort_by_key(|s| s.module);
    assert_eq!(got, rows);
    let mut again = RecordingReader::open(&path).unwrap().symbols().unwrap();
    again.sort_by_key(|s| s.module);
    assert_eq!(again, rows);
    // The cache's checksum is saved with it: intact now, not after a name changed in
    // the file (SQLite would read the changed name back without a word).
    assert!(r.symbols_intact().unwrap());
    let mut checked = r.symbols_checked().unwrap().expect("intact");
    checked.sort_by_key(|s| s.module);
    assert_eq!(checked, rows);
    Connection::open(&path)
        .unwrap()
        .execute_batch("UPDATE symbols SET function = 'evil' WHERE function IS NOT NULL")
        .unwrap();
    let damaged = RecordingReader::open(&path).unwrap();
    assert!(!damaged.symbols_intact().unwrap());
    assert_eq!(damaged.symbols_checked().unwrap(), None);
}

/// A recording made before build IDs were recorded (its `modules` table without the
/// column) reads its modules, and no build IDs.
#[test]
fn modules_without_build_ids_read_as_none() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.rec");
    let mut w = RecordingWriter::create(&path).unwrap();
    w.add_module(1, "/usr/bin/prog", Some("ff")).unwrap();
    w.finish().unwrap();
    Connection::open(&path)
        .unwrap()
        .execute_batch(
            "DROP TABLE modules; CREATE TABLE modules (id INTEGER PRIMARY KEY, path TEXT NOT NULL);
                 INSERT INTO modules VALUES (1, '/usr/bin/prog');",
        )
        .unwrap();
    let r = RecordingReader::open(&path).unwrap();
    assert_eq!(r.modules().unwrap(), vec![(1, "/usr/bin/prog".to_string())]);
    assert!(r.module_build_ids().unwrap().is_empty());
}

/// A version-1 recording (before stacks) still opens, with no stacks.
#[test]
fn version_one_recordings_read_without_stacks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.rec");
    let mut w = RecordingWriter::create(&path).unwrap();
    w.set_meta("command", &json!(["true"])).unwrap();
    w.finish().unwrap();
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(
        "DROP TABLE modules; DROP TABLE stacks; DROP TABLE symbols; PRAGMA user_version = 1;",
    )
    .unwrap();
    drop(conn);
    let r = RecordingReader::open(&path).unwrap();
    assert!(!r.has_stack_tables().unwrap());
    assert!(r.modules().unwrap().is_empty() && r.symbols().unwrap().is_empty());
    let mut n = 0;
    r.stacks(|_, _| n += 1).unwrap();
    assert_eq!(n, 0);
    assert_eq!(r.meta("command").unwrap(), Some(json!(["true"])));
}

#[test]
fn create_refuses_an_existing_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.rec");
    std::fs::write(&path, "precious").unwrap();
    let err = RecordingWriter::create(&path).err().unwrap();
    assert!(matches!(err, StoreError::RecordingExists { .. }), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), b"precious");
    std::fs::remove_file(&path).unwrap();
    std::fs::write(dir.path().join("a.rec-wal"), "stale").unwrap();
    let err = RecordingWriter::create(&path).err().unwrap();
    assert!(err.to_string().contains("a.rec-wal"), "{err}");
    assert!(!path.exists());
    let err = RecordingWriter::create(&dir.path().join("no/such/dir.rec"))
        .err()
        .unwrap();
    assert!(matches!(err, StoreError::RecordingCreate { .. }), "{err}");
}

fn side_file(path: &Path, suffix: &str) -> PathBuf {
    let mut p = path.to_path_buf().into_os_string();
    p.push(suffix);
    PathBuf::from(p)
}

fn write_flushed_part(w: &mut RecordingWriter) {
    w.set_meta("command", &json!(["pingpong"])).unwrap();
    w.upsert_thread(&ThreadRow {
        tid: 9,
        comm: "flushed".into(),
        ..Default::default()
    })
    .unwrap();
    for i in 0..50 {
        w.append_chunk(i % 2, i as u64, i as u64, 100, &chunk_bytes(i, 10_000))
            .unwrap();
        w.append_sample(i as u64, "energy", &json!(i)).unwrap();
    }
    w.flush().unwrap();
}

fn write_unflushed_part(w: &mut RecordingWriter) {
    w.set_meta("stop", &json!("never flushed")).unwrap();
    w.upsert_thread(&ThreadRow {
        tid: 9,
        comm: "unflushed".into(),
        ..Default::default()
    })
    .unwrap();
    // 20 MB: more than SQLite's page cache, so part of it reaches the -wal.
    for i in 50..2_050 {
        w.append_chunk(i % 2, i as u64, i as u64, 100, &chunk_bytes(i, 10_000))
            .unwrap();
        w.append_sample(i as u64, "energy", &json!(i)).unwrap();
    }
}

/// What a reader must find after the writer died right after `write_flushed_part`.
fn assert_exactly_flushed_part(path: &Path) {
    let r = RecordingReader::open(path).unwrap();
    assert_eq!(r.meta("command").unwrap(), Some(json!(["pingpong"])));
    assert_eq!(r.meta("stop").unwrap(), None);
    assert_eq!(r.threads().unwrap()[0].comm, "flushed");
    assert_eq!(r.cpus().unwrap(), vec![0, 1]);
    assert_eq!(r.event_count().unwrap(), 50 * 100);
    for cpu in 0..2 {
        let chunks = all_chunks(&r, cpu);
        assert_eq!(chunks.len(), 25);
        for (k, c) in chunks.iter().enumerate() {
            let i = (2 * k) as u32 + cpu;
            assert_eq!(c.first_ns, i as u64);
            assert_eq!(c.data, chunk_bytes(i, 10_000), "chunk {i}");
        }
    }
    let mut n = 0;
    r.samples("energy", |t, v| {
        assert_eq!(json!(t), v);
        n += 1;
    })
    .unwrap();
    assert_eq!(n, 50);
}

const CHILD_ENV: &str = "POWERLENS_TEST_RECORDING_CHILD";

/// Run by `sigkill_keeps_exactly_what_was_flushed` in a child process: writes, flushes,
/// writes more without flushing, says READY and waits to be killed.
#[test]
#[ignore = "helper process of sigkill_keeps_exactly_what_was_flushed"]
fn helper_sigkill_child() {
    let path = PathBuf::from(std::env::var_os(CHILD_ENV).expect("run by the parent test"));
    let mut w = RecordingWriter::create(&path).unwrap();
    write_flushed_part(&mut w);
    write_unflushed_part(&mut w);
    println!("READY");
    std::thread::sleep(std::time::Duration::from_secs(120));
    panic!("not killed");
}

#[test]
fn sigkill_keeps_exactly_what_was_flushed() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("killed.rec");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "recording::tests::helper_sigkill_child",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "child ended before READY"
        );
        if line.contains("READY") {
            break;
        }
    }
    child.kill().unwrap(); // SIGKILL
    let status = child.wait().unwrap();
    assert!(!status.success());
    // The writer died mid-transaction, with uncommitted frames in the -wal.
    let wal = side_file(&path, "-wal");
    assert!(
        std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0) > 0,
        "the unflushed part should have reached the -wal for this test to mean anything"
    );
    let main_before = std::fs::read(&path).unwrap();
    assert_exactly_flushed_part(&path);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        main_before,
        "the reader modified the recording"
    );
    // A user who copies only the main file has everything flushed too.
    let copy_dir = tempfile::tempdir().unwrap();
    let copy = copy_dir.path().join("copy.rec");
    std::fs::copy(&path, &copy).unwrap();
    assert_exactly_flushed_part(&copy);
}

#[test]
fn full_database_keeps_what_was_flushed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("full.rec");
    let mut w = RecordingWriter::create(&path).unwrap();
    write_flushed_part(&mut w);
    let pages: i64 = w
        .conn
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .unwrap();
    // SQLite's own size limit: the same SQLITE_FULL path as a full file system.
    w.conn
        .execute_batch(&format!("PRAGMA max_page_count = {}", pages + 100))
        .unwrap();
    let mut err = None;
    for i in 50..1_000 {
        if let Err(e) = w.append_chunk(0, i, i, 100, &chunk_bytes(i as u32, 10_000)) {
            err = Some(e);
            break;
        }
    }
    let err = err.expect("the database never filled up");
    assert!(matches!(err, StoreError::DiskFull { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains(path.to_str().unwrap()), "{msg}");
    assert!(msg.contains("keeps everything flushed"), "{msg}");
    // The writer is still usable: small writes after the failure fit again.
    w.set_meta("stop", &json!("after disk full")).unwrap();
    drop(w);
    let r = RecordingReader::open(&path).unwrap();
    assert_eq!(r.event_count().unwrap(), 50 * 100);
    assert_eq!(r.meta("stop").unwrap(), Some(json!("after disk full")));
}

const TMPFS_ENV: &str = "POWERLENS_TEST_RECORDING_TMPFS";

/// A real ENOSPC on a 2 MiB tmpfs, mounted in a private mount namespace.
#[test]
fn full_file_system_keeps_what_was_flushed() {
    let Some(dir) = std::env::var_os(TMPFS_ENV) else {
        let dir = tempfile::tempdir().unwrap();
        let script = r#"mount -t tmpfs -o size=2m powerlens-test "$2" || exit 77
exec "$0" --exact "$1" --nocapture --test-threads=1"#;
        let out = std::process::Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c", script])
            .arg(std::env::current_exe().unwrap())
            .arg("recording::tests::full_file_system_keeps_what_was_flushed")
            .arg(dir.path())
            .env(TMPFS_ENV, dir.path())
            .output();
        match out {
            Ok(o)
                if o.status.code() == Some(77)
                    || String::from_utf8_lossy(&o.stderr).starts_with("unshare:") =>
            {
                eprintln!(
                    "skipped: cannot mount a small tmpfs in a private namespace: {}",
                    String::from_utf8_lossy(&o.stderr)
                );
            }
            Ok(o) => {
                let stdout = String::from_utf8_lossy(&o.stdout);
                eprintln!("{stdout}{}", String::from_utf8_lossy(&o.stderr));
                assert!(o.status.success(), "failed on the small tmpfs");
                assert!(stdout.contains("1 passed"), "did not run on the tmpfs");
            }
            Err(e) => eprintln!("skipped: cannot run unshare: {e}"),
        }
        return;
    };
    let path = PathBuf::from(dir).join("full.rec");
    let mut w = RecordingWriter::create(&path).unwrap();
    write_flushed_part(&mut w); // about 500 kB
    let mut err = None;
    for i in 50..1_000u32 {
        if let Err(e) = w.append_chunk(0, i as u64, i as u64, 100, &chunk_bytes(i, 10_000)) {
            err = Some(e);
            break;
        }
        if i % 20 == 0 {
            if let Err(e) = w.flush() {
                err = Some(e);
                break;
            }
        }
    }
    let err = err.expect("2 MiB never filled up");
    assert!(matches!(err, StoreError::DiskFull { .. }), "{err}");
    println!("error: {err}");
    drop(w);
    let r = RecordingReader::open(&path).unwrap();
    // Everything flushed before the failure is there, intact.
    let chunks = all_chunks(&r, 0);
    assert!(chunks.len() >= 25, "{}", chunks.len());
    for c in &chunks {
        assert_eq!(c.data, chunk_bytes(c.first_ns as u32, 10_000));
    }
    assert_eq!(r.meta("command").unwrap(), Some(json!(["pingpong"])));
}

fn refused(path: &Path) -> StoreError {
    let before = std::fs::read(path).unwrap();
    let err = RecordingReader::open(path).err().expect("must refuse");
    assert_eq!(
        std::fs::read(path).unwrap(),
        before,
        "the file was modified"
    );
    for side in SIDE_FILES {
        assert!(!side_file(path, side).exists(), "{side} created");
    }
    err
}

#[test]
fn foreign_files_are_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();

    let garbage = dir.path().join("garbage.rec");
    std::fs::write(&garbage, b"not a database at all\n".repeat(500)).unwrap();
    let err = refused(&garbage);
    assert!(matches!(err, StoreError::NotARecording { .. }), "{err}");
    assert!(err.to_string().contains("not an SQLite file"), "{err}");

    let empty = dir.path().join("empty.rec");
    std::fs::write(&empty, b"").unwrap();
    let err = refused(&empty);
    assert!(err.to_string().contains("an empty file"), "{err}");

    let results = dir.path().join("results.db");
    drop(crate::ResultsDb::open(&results).unwrap());
    let err = refused(&results);
    assert!(err.to_string().contains("results database"), "{err}");

    let foreign = dir.path().join("foreign.db");
    Connection::open(&foreign)
        .unwrap()
        .execute_batch("CREATE TABLE chunks(x); PRAGMA application_id = 7;")
        .unwrap();
    let err = refused(&foreign);
    assert!(matches!(err, StoreError::NotARecording { .. }), "{err}");

    let missing = dir.path().join("missing.rec");
    let err = RecordingReader::open(&missing).err().unwrap();
    assert!(matches!(err, StoreError::NoRecording { .. }), "{err}");
    assert!(!missing.exists());

    // And the results database refuses a recording.
    let rec = dir.path().join("a.rec");
    RecordingWriter::create(&rec).unwrap().finish().unwrap();
    let before = std::fs::read(&rec).unwrap();
    let err = crate::ResultsDb::open(&rec).err().unwrap();
    assert!(matches!(err, StoreError::NotOurs { .. }), "{err}");
    assert!(err.to_string().contains("powerlens report"), "{err}");
    assert_eq!(std::fs::read(&rec).unwrap(), before);
}

#[test]
fn newer_schema_says_upgrade() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.rec");
    RecordingWriter::create(&path).unwrap().finish().unwrap();
    Connection::open(&path)
        .unwrap()
        .execute_batch(&format!(
            "PRAGMA user_version = {}",
            RECORDING_SCHEMA_VERSION + 1
        ))
        .unwrap();
    let err = refused(&path);
    assert!(
        matches!(err, StoreError::RecordingTooNew { found, .. } if found == RECORDING_SCHEMA_VERSION + 1),
        "{err}"
    );
    assert!(err.to_string().contains("upgrade powerlens"), "{err}");
}

fn big_recording(path: &Path) {
    let mut w = RecordingWriter::create(path).unwrap();
    w.set_meta("command", &json!(["x"])).unwrap();
    for i in 0..400u32 {
        w.append_chunk(i % 4, i as u64, i as u64, 10, &chunk_bytes(i, 5_000))
            .unwrap();
        if i % 100 == 0 {
            w.flush().unwrap();
        }
    }
    w.finish().unwrap();
}

/// Reads everything; returns the first error.
fn read_all(path: &Path) -> Result<(), StoreError> {
    let r = RecordingReader::open(path)?;
    r.all_meta()?;
    r.threads()?;
    r.event_count()?;
    for cpu in r.cpus()? {
        let mut c = r.chunks(cpu);
        while c.next_chunk()?.is_some() {}
    }
    r.samples("energy", |_, _| {})?;
    r.modules()?;
    r.stacks(|_, _| {})?;
    r.symbols()?;
    Ok(())
}

#[test]
fn truncated_recordings_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("whole.rec");
    big_recording(&path);
    read_all(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert!(bytes.len() > 1_000_000);
    for cut in [
        100,
        4096,
        5000,
        bytes.len() / 3,
        bytes.len() / 2,
        bytes.len() - 4096,
    ] {
        let t = dir.path().join(format!("cut{cut}.rec"));
        std::fs::write(&t, &bytes[..cut]).unwrap();
        let err = read_all(&t)
            .err()
            .unwrap_or_else(|| panic!("cut at {cut} read fine"));
        assert!(
            matches!(
                err,
                StoreError::RecordingCorrupt { .. } | StoreError::NotARecording { .. }
            ),
            "cut at {cut}: {err:?}"
        );
        assert_eq!(std::fs::read(&t).unwrap(), &bytes[..cut]);
    }
}

#[test]
fn damaged_recordings_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("whole.rec");
    big_recording(&path);
    let bytes = std::fs::read(&path).unwrap();
    let mut seed = 0x1234_5678_9ABC_DEF1u64;
    let mut rnd = |m: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % m as u64) as usize
    };
    let mut errors = 0;
    for i in 0..60 {
        let mut m = bytes.clone();
        // Damage the first pages (header, schema, b-tree roots) more often.
        let span = if i % 2 == 0 { 16_384 } else { m.len() };
        for _ in 0..20 {
            let at = rnd(span);
            m[at] = rnd(256) as u8;
        }
        let t = dir.path().join("damaged.rec");
        std::fs::write(&t, &m).unwrap();
        if read_all(&t).is_err() {
            errors += 1;
        }
        std::fs::remove_file(&t).unwrap();
    }
    assert!(errors > 0, "no damage was ever noticed");
}

#[test]
fn reading_leaves_a_finished_recording_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.rec");
    big_recording(&path);
    let before = std::fs::read(&path).unwrap();
    read_all(&path).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), before);
    for side in SIDE_FILES {
        assert!(
            !side_file(&path, side).exists(),
            "{side} created by the reader"
        );
    }
}

/// The header reads, in one trip, what the per-item readers read one by one: the asked
/// metadata, the thread table and each asked kind's samples in the same order (ties by
/// append order). A damaged value of a key or kind not asked for is not read, so it
/// fails no one; a damaged one asked for fails as `meta`/`samples` would.
#[test]
fn the_header_holds_what_the_item_readers_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("h.rec");
    let mut w = RecordingWriter::create(&path).unwrap();
    w.set_meta("mode", &json!("trace")).unwrap();
    w.set_meta("target", &json!({"kind": "all"})).unwrap();
    w.set_meta("notes", &json!(["x"])).unwrap();
    for (t, kind, v) in [
        (30, "energy", 3),
        (10, "cpufreq", 1),
        (10, "energy", 1),
        (10, "energy", 2),
        (20, "threads", 9),
        (5, "cpuidle", 0),
    ] {
        w.append_sample(t, kind, &json!(v)).unwrap();
    }
    w.upsert_thread(&ThreadRow {
        tid: 7,
        pid: Some(7),
        comm: "seven".into(),
        ..Default::default()
    })
    .unwrap();
    w.finish().unwrap();
    Connection::open(&path)
        .unwrap()
        .execute_batch(
            "UPDATE meta SET value = 'not json' WHERE key = 'notes';
             UPDATE samples SET data = 'not json' WHERE kind = 'threads';",
        )
        .unwrap();
    let r = RecordingReader::open(&path).unwrap();
    let kinds = ["energy", "cpuidle", "cpufreq", "battery"];
    let h = r.header(&["mode", "target", "stop"], &kinds).unwrap();
    assert_eq!(
        h.meta.keys().collect::<Vec<_>>(),
        ["mode", "target"],
        "absent keys are absent, keys not asked for are not read"
    );
    assert_eq!(h.meta["target"], r.meta("target").unwrap().unwrap());
    assert_eq!(h.threads, r.threads().unwrap());
    for kind in kinds {
        let mut one_by_one = Vec::new();
        r.samples(kind, |t, v| one_by_one.push((t, v))).unwrap();
        assert_eq!(h.samples[kind], one_by_one, "{kind}");
    }
    assert_eq!(
        h.samples["energy"],
        [(10, json!(1)), (10, json!(2)), (30, json!(3))]
    );
    let damaged = r.header(&["notes"], &[]).unwrap_err().to_string();
    assert!(
        damaged.contains("metadata \"notes\" is not JSON"),
        "{damaged}"
    );
    let damaged = r.header(&[], &["threads"]).unwrap_err().to_string();
    assert!(
        damaged.contains("a \"threads\" sample is not JSON"),
        "{damaged}"
    );
}
