//! The recording file of `powerlens record`: one SQLite file per recording holding raw
//! event chunks (encoded by `powerlens_core::codec`, opaque here), periodic samples,
//! the thread table and JSON metadata. Schema version 1 is documented in docs/FORMAT.md.
//!
//! The writer keeps one transaction open between [`RecordingWriter::flush`]es, in WAL
//! mode, and checkpoints at every flush: after the recorder is killed the file holds
//! exactly what was flushed, and the main file alone (without its `-wal`) already does.
//! A clean [`RecordingWriter::finish`] (or drop) leaves a single self-contained file.
//!
//! The reader streams: chunks come one blob at a time, samples row by row.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, ErrorCode, OpenFlags, OptionalExtension};

use crate::checksum::RowHasher;
use crate::files::{create_private, side_file, SIDE_FILES};
use crate::{StoreError, APPLICATION_ID};

/// SQLite `application_id` of recordings ("PWLR"), distinct from the results database.
pub const RECORDING_APPLICATION_ID: i32 = 0x5057_4C52;

/// Schema version of recordings (`PRAGMA user_version`). Version 2 added call stacks (the
/// `modules`, `stacks` and `symbols` tables); version-1 files still read, without stacks.
pub const RECORDING_SCHEMA_VERSION: i32 = 2;

const SCHEMA: &str = "
CREATE TABLE meta (
    key   TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
);
CREATE TABLE chunks (
    seq      INTEGER PRIMARY KEY,
    cpu      INTEGER NOT NULL,
    first_ns INTEGER NOT NULL,
    last_ns  INTEGER NOT NULL,
    events   INTEGER NOT NULL,
    data     BLOB    NOT NULL
);
CREATE INDEX chunks_by_cpu ON chunks (cpu);
CREATE TABLE samples (
    seq     INTEGER PRIMARY KEY,
    time_ns INTEGER NOT NULL,
    kind    TEXT    NOT NULL,
    data    TEXT    NOT NULL
);
CREATE INDEX samples_by_kind ON samples (kind, time_ns);
CREATE TABLE threads (
    tid        INTEGER PRIMARY KEY,
    pid        INTEGER,
    ppid       INTEGER,
    parent_tid INTEGER,
    comm       TEXT NOT NULL
);
CREATE TABLE modules (
    id       INTEGER PRIMARY KEY,
    path     TEXT NOT NULL,
    build_id TEXT
);
CREATE TABLE stacks (
    id     INTEGER PRIMARY KEY,
    frames BLOB NOT NULL
);
CREATE TABLE symbols (
    module   INTEGER NOT NULL,
    offset   INTEGER NOT NULL,
    function TEXT,
    PRIMARY KEY (module, offset)
) WITHOUT ROWID;
";

/// The tables of version 1, which every readable recording has.
const VERSION_1_TABLES: [&str; 4] = ["meta", "chunks", "samples", "threads"];

/// One resolved frame of the symbol cache: `function` is `None` where the module's
/// symbols did not cover the address (the frame keeps module and offset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SymbolRow {
    pub module: u32,
    pub offset: u64,
    pub function: Option<String>,
}

/// One thread seen during the recording.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ThreadRow {
    pub tid: u32,
    pub pid: Option<u32>,
    pub ppid: Option<u32>,
    /// The thread that created it (sched_process_fork), when seen.
    pub parent_tid: Option<u32>,
    /// Last known command name; empty when unknown.
    pub comm: String,
}

/// One chunk of encoded events of one CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Its place in the order chunks were written, all CPUs together.
    pub seq: i64,
    pub cpu: u32,
    pub first_ns: u64,
    pub last_ns: u64,
    pub events: u32,
    /// The chunk bytes (`powerlens_core::codec::decode_chunk`).
    pub data: Vec<u8>,
}

impl Chunk {
    /// Its row in the chunk index as the content checksum covers it.
    pub fn index_row(&self) -> ChunkIndexRow {
        let tail = &self.data[self.data.len().saturating_sub(4)..];
        let mut trailer = [0; 4];
        trailer[..tail.len()].copy_from_slice(tail);
        ChunkIndexRow {
            seq: self.seq,
            cpu: self.cpu,
            first_ns: self.first_ns,
            last_ns: self.last_ns,
            events: self.events,
            trailer,
            trailer_len: tail.len() as u8,
        }
    }
}

/// A chunk's row in the chunk index, as the content checksum covers it: its columns but
/// the bytes, and the last four bytes (the chunk's own CRC-32). A reader that reads every
/// chunk anyway checks the content with these ([`ContentParts::check_read`])
/// instead of having SQLite read every chunk a second time to find its trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkIndexRow {
    seq: i64,
    cpu: u32,
    first_ns: u64,
    last_ns: u64,
    events: u32,
    trailer: [u8; 4],
    trailer_len: u8,
}

// Times are u64 nanoseconds; SQLite integers are i64. The bits are stored as they are
// (CLOCK_MONOTONIC stays below 2^63 for 292 years).
fn to_sql(v: u64) -> i64 {
    v as i64
}

fn from_sql(v: i64) -> u64 {
    v as u64
}

fn is_corruption(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase)
    )
}

/// Writes a new recording.
pub struct RecordingWriter {
    conn: Connection,
    path: PathBuf,
    /// File size after the last flush.
    flushed_bytes: u64,
    /// Approximate bytes appended since.
    pending_bytes: u64,
    finished: bool,
}

impl RecordingWriter {
    /// Creates a new recording at `path`. An existing file (or a leftover `-wal`,
    /// `-shm` or `-journal` of one) is an error: the caller moves it aside first.
    pub fn create(path: &Path) -> Result<Self, StoreError> {
        let path = path.to_path_buf();
        for suffix in SIDE_FILES {
            let side = side_file(&path, suffix);
            // symlink_metadata: a dangling link counts (SQLite would create its target).
            if side.symlink_metadata().is_ok() {
                return Err(StoreError::RecordingExists { path: side });
            }
        }
        // create_new: atomic, never truncates a file that appeared meanwhile, never follows
        // a link; for its owner only (a recording holds command lines).
        match create_private(&path) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(StoreError::RecordingExists { path })
            }
            Err(source) => return Err(StoreError::RecordingCreate { path, source }),
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE;
        let conn = Connection::open_with_flags(&path, flags).map_err(|source| {
            StoreError::RecordingOpen {
                path: path.clone(),
                source,
            }
        })?;
        let mut w = RecordingWriter {
            conn,
            path,
            flushed_bytes: 0,
            pending_bytes: 0,
            finished: false,
        };
        let sql = format!(
            "BEGIN; {SCHEMA}
             PRAGMA application_id = {RECORDING_APPLICATION_ID};
             PRAGMA user_version = {RECORDING_SCHEMA_VERSION};
             COMMIT;"
        );
        w.conn.execute_batch(&sql).map_err(|e| w.write_error(e))?;
        // WAL: a commit is an append to the -wal, so a writer killed mid-transaction never
        // leaves a hot rollback journal that a read-only reader could not replay.
        // synchronous=OFF: commits survive the process being killed (the kernel has the
        // pages) without an fsync; an fsync per flush (NORMAL fsyncs at each checkpoint)
        // cost the recorded workload disk interrupts for nothing a profiler needs. Only a
        // crash of the machine loses the last seconds.
        let mode: String = w
            .conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(|e| w.write_error(e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::RecordingWrite {
                path: w.path.clone(),
                detail: format!("the file system refused WAL mode (journal mode {mode})"),
            });
        }
        w.conn
            .execute_batch("PRAGMA synchronous = OFF; PRAGMA wal_autocheckpoint = 0; BEGIN;")
            .map_err(|e| w.write_error(e))?;
        w.flushed_bytes = w.file_size();
        Ok(w)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn file_size(&self) -> u64 {
        std::fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0)
    }

    /// Maps a write failure to a typed error. The open transaction is rolled back (its
    /// data is lost: everything flushed before stays) and a new one begins, so the writer
    /// stays usable if the caller frees space and carries on.
    fn write_error(&mut self, e: rusqlite::Error) -> StoreError {
        let _ = self.conn.execute_batch("ROLLBACK");
        let _ = self.conn.execute_batch("BEGIN");
        self.pending_bytes = 0;
        let path = self.path.clone();
        match e.sqlite_error_code() {
            Some(ErrorCode::DiskFull) => StoreError::DiskFull { path },
            Some(ErrorCode::ReadOnly) | Some(ErrorCode::PermissionDenied) => {
                StoreError::RecordingWrite {
                    path,
                    detail: format!("{e} (the file or its directory is not writable)"),
                }
            }
            _ => StoreError::RecordingWrite {
                path,
                detail: e.to_string(),
            },
        }
    }

    /// Sets a metadata value (JSON), replacing any previous value of `key`.
    pub fn set_meta(&mut self, key: &str, value: &serde_json::Value) -> Result<(), StoreError> {
        let text = value.to_string();
        self.pending_bytes += (key.len() + text.len() + 16) as u64;
        let r = self
            .conn
            .prepare_cached("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)")
            .and_then(|mut s| s.execute(params![key, text]));
        r.map(|_| ()).map_err(|e| self.write_error(e))
    }

    /// Appends one chunk of `cpu`'s events (`data` from `ChunkEncoder::finish`).
    pub fn append_chunk(
        &mut self,
        cpu: u32,
        first_ns: u64,
        last_ns: u64,
        events: u32,
        data: &[u8],
    ) -> Result<(), StoreError> {
        self.pending_bytes += data.len() as u64 + 32;
        let r = self
            .conn
            .prepare_cached(
                "INSERT INTO chunks (cpu, first_ns, last_ns, events, data) VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .and_then(|mut s| {
                s.execute(params![cpu, to_sql(first_ns), to_sql(last_ns), events, data])
            });
        r.map(|_| ()).map_err(|e| self.write_error(e))
    }

    /// Appends one periodic sample of `kind` (e.g. `energy`, `cpuidle`) taken at `time_ns`.
    pub fn append_sample(
        &mut self,
        time_ns: u64,
        kind: &str,
        data: &serde_json::Value,
    ) -> Result<(), StoreError> {
        let text = data.to_string();
        self.pending_bytes += (kind.len() + text.len() + 24) as u64;
        let r = self
            .conn
            .prepare_cached("INSERT INTO samples (time_ns, kind, data) VALUES (?1, ?2, ?3)")
            .and_then(|mut s| s.execute(params![to_sql(time_ns), kind, text]));
        r.map(|_| ()).map_err(|e| self.write_error(e))
    }

    /// Records what is known of a thread. Later values win, but an unknown value (`None`,
    /// an empty `comm`) never overwrites a known one.
    pub fn upsert_thread(&mut self, t: &ThreadRow) -> Result<(), StoreError> {
        self.pending_bytes += t.comm.len() as u64 + 32;
        let r = self
            .conn
            .prepare_cached(
                "INSERT INTO threads (tid, pid, ppid, parent_tid, comm) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (tid) DO UPDATE SET
                     pid = coalesce(excluded.pid, pid),
                     ppid = coalesce(excluded.ppid, ppid),
                     parent_tid = coalesce(excluded.parent_tid, parent_tid),
                     comm = CASE WHEN excluded.comm = '' THEN comm ELSE excluded.comm END",
            )
            .and_then(|mut s| s.execute(params![t.tid, t.pid, t.ppid, t.parent_tid, t.comm]));
        r.map(|_| ()).map_err(|e| self.write_error(e))
    }

    /// Records a module (an executable file, `[kernel]`, `[vdso]`…) that stack frames name
    /// by `id`, with the GNU build ID of the file as it was mapped, when it has one.
    pub fn add_module(
        &mut self,
        id: u32,
        path: &str,
        build_id: Option<&str>,
    ) -> Result<(), StoreError> {
        self.pending_bytes += path.len() as u64 + 16;
        let r = self
            .conn
            .prepare_cached(
                "INSERT OR REPLACE INTO modules (id, path, build_id) VALUES (?1, ?2, ?3)",
            )
            .and_then(|mut s| s.execute(params![id, path, build_id]));
        r.map(|_| ()).map_err(|e| self.write_error(e))
    }

    /// Records a call stack that `Stack` events name by `id` (`frames` encoded by
    /// `powerlens_core::stacks::encode_frames`, opaque here).
    pub fn add_stack(&mut self, id: u32, frames: &[u8]) -> Result<(), StoreError> {
        self.pending_bytes += frames.len() as u64 + 16;
        let r = self
            .conn
            .prepare_cached("INSERT OR REPLACE INTO stacks (id, frames) VALUES (?1, ?2)")
            .and_then(|mut s| s.execute(params![id, frames]));
        r.map(|_| ()).map_err(|e| self.write_error(e))
    }

    /// Commits everything appended since the last flush and copies it into the main file
    /// (a WAL checkpoint): from now on it survives the recorder being killed, and a copy
    /// of the main file alone holds it.
    pub fn flush(&mut self) -> Result<(), StoreError> {
        if let Err(e) = self.conn.execute_batch("COMMIT") {
            return Err(self.write_error(e));
        }
        let r = self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                r.get::<_, i64>(0)
            });
        let begin = self.conn.execute_batch("BEGIN");
        match (r, begin) {
            (Err(e), _) | (_, Err(e)) => return Err(self.write_error(e)),
            (Ok(busy), _) if busy != 0 => {
                // A reader held the WAL: the data is committed (in the -wal) and the next
                // flush copies it. Not an error.
            }
            _ => {}
        }
        self.flushed_bytes = self.file_size();
        self.pending_bytes = 0;
        Ok(())
    }

    /// Approximate size of the recording so far, for progress display.
    pub fn bytes_written(&self) -> u64 {
        self.flushed_bytes + self.pending_bytes
    }

    /// Flushes and closes the recording, leaving a single self-contained file (rollback
    /// journal mode, no `-wal`/`-shm` side files). Dropping the writer does the same but
    /// cannot report an error.
    pub fn finish(mut self) -> Result<(), StoreError> {
        self.finished = true;
        let crc = content_checksum(&self.conn).map_err(|e| self.write_error(e))?;
        self.set_meta(CONTENT_CHECKSUM, &serde_json::json!(crc))?;
        self.flush()?;
        self.conn
            .execute_batch("COMMIT; PRAGMA journal_mode = DELETE;")
            .map_err(|e| self.write_error(e))?;
        Ok(())
    }
}

impl Drop for RecordingWriter {
    fn drop(&mut self) {
        if !self.finished {
            let _ = self.flush();
            let _ = self
                .conn
                .execute_batch("COMMIT; PRAGMA journal_mode = DELETE;");
        }
    }
}

/// Reads a recording. Opens the file read-only: never creates or modifies it.
pub struct RecordingReader {
    conn: Connection,
    path: PathBuf,
}

impl RecordingReader {
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let path = path.to_path_buf();
        let meta = match std::fs::metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(StoreError::NoRecording { path })
            }
            Err(source) => return Err(StoreError::RecordingRead { path, source }),
        };
        if meta.is_dir() {
            return Err(StoreError::NotARecording {
                path,
                detail: "a directory".into(),
            });
        }
        if meta.len() == 0 {
            return Err(StoreError::NotARecording {
                path,
                detail: "an empty file: was the recorder stopped before it wrote anything?".into(),
            });
        }
        // NO_MUTEX: a connection is used by one thread at a time (rusqlite's Connection is
        // not Sync), so SQLite's own locking of every call is work for nothing; a report
        // makes one call per chunk read and several per row of the smaller tables.
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&path, flags).map_err(|source| {
            StoreError::RecordingOpen {
                path: path.clone(),
                source,
            }
        })?;
        let r = RecordingReader { conn, path };
        r.check()?;
        Ok(r)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn not_ours(&self, detail: impl Into<String>) -> StoreError {
        StoreError::NotARecording {
            path: self.path.clone(),
            detail: detail.into(),
        }
    }

    fn sql(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        |e| read_error(&self.path, e)
    }

    fn check(&self) -> Result<(), StoreError> {
        let header = |e: rusqlite::Error| {
            if e.sqlite_error_code() == Some(ErrorCode::NotADatabase) {
                self.not_ours("not an SQLite file")
            } else {
                read_error(&self.path, e)
            }
        };
        let app_id: i32 = self
            .conn
            .query_row("PRAGMA application_id", [], |r| r.get(0))
            .map_err(header)?;
        let version: i32 = self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(header)?;
        if app_id == APPLICATION_ID {
            return Err(self.not_ours("it is a powerlens results database"));
        }
        if app_id != RECORDING_APPLICATION_ID {
            return Err(self.not_ours(if app_id == 0 {
                "an SQLite file without the powerlens recording id".to_string()
            } else {
                format!("SQLite application_id {app_id:#x}, not a powerlens recording")
            }));
        }
        if version > RECORDING_SCHEMA_VERSION {
            return Err(StoreError::RecordingTooNew {
                path: self.path.clone(),
                found: version,
                supported: RECORDING_SCHEMA_VERSION,
            });
        }
        if version < 1 {
            return Err(self.not_ours(format!("schema version {version}")));
        }
        let expected: Vec<&str> = if version >= 2 {
            VERSION_1_TABLES
                .into_iter()
                .chain(["modules", "stacks", "symbols"])
                .collect()
        } else {
            VERSION_1_TABLES.to_vec()
        };
        let present = expected
            .iter()
            .filter(|t| self.has_table(t).unwrap_or(false))
            .count();
        if present != expected.len() {
            return Err(StoreError::RecordingCorrupt {
                path: self.path.clone(),
                detail: format!(
                    "{} of its {} tables are missing",
                    expected.len() - present,
                    expected.len()
                ),
            });
        }
        Ok(())
    }

    fn has_table(&self, name: &str) -> Result<bool, StoreError> {
        self.conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1",
                [name],
                |r| r.get::<_, i64>(0),
            )
            .map(|n| n > 0)
            .map_err(self.sql())
    }

    /// Whether the recording can hold call stacks (schema version 2 or later).
    pub fn has_stack_tables(&self) -> Result<bool, StoreError> {
        self.has_table("stacks")
    }

    /// Whether the recording holds call stacks: its stack table has a row.
    pub fn has_stacks(&self) -> Result<bool, StoreError> {
        if !self.has_stack_tables()? {
            return Ok(false);
        }
        self.conn
            .query_row("SELECT EXISTS (SELECT 1 FROM stacks)", [], |r| r.get(0))
            .map_err(self.sql())
    }

    /// The module table, by id; empty for a recording without stacks.
    pub fn modules(&self) -> Result<Vec<(u32, String)>, StoreError> {
        if !self.has_stack_tables()? {
            return Ok(Vec::new());
        }
        let mut stmt = self
            .conn
            .prepare("SELECT id, path FROM modules ORDER BY id")
            .map_err(self.sql())?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(self.sql())?;
        rows.collect::<Result<_, _>>().map_err(self.sql())
    }

    /// The build IDs recorded with the modules, by module id. Empty for a recording made
    /// before they were recorded (its `modules` table has no `build_id` column).
    pub fn module_build_ids(&self) -> Result<HashMap<u32, String>, StoreError> {
        if !self.has_stack_tables()? {
            return Ok(HashMap::new());
        }
        let recorded: bool = self
            .conn
            .query_row(
                "SELECT COUNT(*) > 0 FROM pragma_table_info('modules') WHERE name = 'build_id'",
                [],
                |r| r.get(0),
            )
            .map_err(self.sql())?;
        if !recorded {
            return Ok(HashMap::new());
        }
        let mut stmt = self
            .conn
            .prepare("SELECT id, build_id FROM modules WHERE build_id IS NOT NULL")
            .map_err(self.sql())?;
        let rows = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(self.sql())?;
        rows.collect::<Result<_, _>>().map_err(self.sql())
    }

    /// Calls `f(id, frames)` for every stack, by id, streaming.
    pub fn stacks(&self, mut f: impl FnMut(u32, &[u8])) -> Result<(), StoreError> {
        if !self.has_stack_tables()? {
            return Ok(());
        }
        let mut stmt = self
            .conn
            .prepare("SELECT id, frames FROM stacks ORDER BY id")
            .map_err(self.sql())?;
        let mut rows = stmt.query([]).map_err(self.sql())?;
        while let Some(row) = rows.next().map_err(self.sql())? {
            let id: u32 = row.get(0).map_err(self.sql())?;
            let frames = row.get_ref(1).map_err(self.sql())?;
            let bytes = frames.as_blob().map_err(|e| StoreError::RecordingCorrupt {
                path: self.path.clone(),
                detail: format!("stack {id}: {e}"),
            })?;
            f(id, bytes);
        }
        Ok(())
    }

    /// Whether the symbol cache still matches the checksum saved with it (true when it
    /// has none: written before checksums, or empty).
    pub fn symbols_intact(&self) -> Result<bool, StoreError> {
        Ok(self.symbols_checked()?.is_some())
    }

    /// The symbol cache (frames resolved by an earlier report); empty when none.
    pub fn symbols(&self) -> Result<Vec<SymbolRow>, StoreError> {
        if !self.has_stack_tables()? {
            return Ok(Vec::new());
        }
        let mut stmt = self
            .conn
            .prepare("SELECT module, offset, function FROM symbols")
            .map_err(self.sql())?;
        let rows = stmt
            .query_map([], |r| {
                Ok(SymbolRow {
                    module: r.get(0)?,
                    offset: from_sql(r.get(1)?),
                    function: r.get(2)?,
                })
            })
            .map_err(self.sql())?;
        rows.collect::<Result<_, _>>().map_err(self.sql())
    }

    /// The symbol cache when it still matches its checksum (or has none, from before
    /// checksums), else `None`: [`RecordingReader::symbols_intact`] and
    /// [`RecordingReader::symbols`] in one read of the table.
    pub fn symbols_checked(&self) -> Result<Option<Vec<SymbolRow>>, StoreError> {
        if !self.has_stack_tables()? {
            return Ok(Some(Vec::new()));
        }
        let stored = self.meta(SYMBOLS_CHECKSUM)?;
        let mut h = RowHasher::default();
        let mut stmt = self
            .conn
            .prepare(SYMBOLS_IN_KEY_ORDER)
            .map_err(self.sql())?;
        let mut rows = stmt.query([]).map_err(self.sql())?;
        let mut out = Vec::new();
        while let Some(r) = rows.next().map_err(self.sql())? {
            h.row(r, 3).map_err(self.sql())?;
            out.push(SymbolRow {
                module: r.get(0).map_err(self.sql())?,
                offset: from_sql(r.get(1).map_err(self.sql())?),
                function: r.get(2).map_err(self.sql())?,
            });
        }
        let intact = stored.is_none_or(|s| s.as_u64() == Some(h.finish() as u64));
        Ok(intact.then_some(out))
    }

    /// Adds resolved frames to the symbol cache, through a short-lived writable
    /// connection (the reader itself stays read-only). Fails on a read-only file or
    /// directory; the caller then carries on without the cache.
    pub fn save_symbols(&self, rows: &[SymbolRow]) -> Result<(), StoreError> {
        let write_error = |e: rusqlite::Error| StoreError::RecordingWrite {
            path: self.path.clone(),
            detail: e.to_string(),
        };
        let mut conn = Connection::open_with_flags(&self.path, OpenFlags::SQLITE_OPEN_READ_WRITE)
            .map_err(write_error)?;
        conn.busy_timeout(std::time::Duration::from_secs(2))
            .map_err(write_error)?;
        let tx = conn.transaction().map_err(write_error)?;
        {
            let mut stmt = tx
                .prepare(
                    "INSERT OR REPLACE INTO symbols (module, offset, function) VALUES (?1, ?2, ?3)",
                )
                .map_err(write_error)?;
            for r in rows {
                stmt.execute(params![r.module, to_sql(r.offset), r.function])
                    .map_err(write_error)?;
            }
        }
        let crc = symbols_checksum(&tx).map_err(write_error)?;
        tx.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
            params![SYMBOLS_CHECKSUM, crc.to_string()],
        )
        .map_err(write_error)?;
        tx.commit().map_err(write_error)
    }

    fn parse_json(&self, what: &str, text: &str) -> Result<serde_json::Value, StoreError> {
        serde_json::from_str(text).map_err(|e| StoreError::RecordingCorrupt {
            path: self.path.clone(),
            detail: format!("{what} is not JSON: {e}"),
        })
    }

    /// Whether the tables figures are computed from still hold what the recorder wrote
    /// (see [`content_checksum`]).
    pub fn check_content(&self) -> Result<ContentCheck, StoreError> {
        let Some(stored) = self.meta(CONTENT_CHECKSUM)? else {
            return Ok(ContentCheck::Unverified);
        };
        let computed = content_checksum(&self.conn).map_err(|e| read_error(&self.path, e))?;
        Ok(ContentCheck::of(&stored, computed))
    }

    /// The recording's content checksum but for the chunk index, for
    /// [`ContentParts::check_read`]: a reader that reads every chunk computes these on
    /// another thread meanwhile, and checks with the chunks' rows once it read them.
    pub fn content_parts(&self) -> Result<ContentParts, StoreError> {
        let stored = self.meta(CONTENT_CHECKSUM)?;
        let (before, after) = match stored {
            Some(_) => content_around_chunks(&self.conn).map_err(|e| read_error(&self.path, e))?,
            None => Default::default(),
        };
        Ok(ContentParts {
            stored,
            before,
            after,
        })
    }

    /// One metadata value.
    pub fn meta(&self, key: &str) -> Result<Option<serde_json::Value>, StoreError> {
        let text: Option<String> = self
            .conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()
            .map_err(self.sql())?;
        text.map(|t| self.parse_json(&format!("metadata {key:?}"), &t))
            .transpose()
    }

    /// All metadata, by key.
    pub fn all_meta(&self) -> Result<BTreeMap<String, serde_json::Value>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT key, value FROM meta")
            .map_err(self.sql())?;
        let mut rows = stmt.query([]).map_err(self.sql())?;
        let mut out = BTreeMap::new();
        while let Some(row) = rows.next().map_err(self.sql())? {
            let key: String = row.get(0).map_err(self.sql())?;
            let text: String = row.get(1).map_err(self.sql())?;
            let value = self.parse_json(&format!("metadata {key:?}"), &text)?;
            out.insert(key, value);
        }
        Ok(out)
    }

    /// The thread table, by tid.
    pub fn threads(&self) -> Result<Vec<ThreadRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT tid, pid, ppid, parent_tid, comm FROM threads ORDER BY tid")
            .map_err(self.sql())?;
        let rows = stmt
            .query_map([], |r| {
                Ok(ThreadRow {
                    tid: r.get(0)?,
                    pid: r.get(1)?,
                    ppid: r.get(2)?,
                    parent_tid: r.get(3)?,
                    comm: r.get(4)?,
                })
            })
            .map_err(self.sql())?;
        rows.collect::<Result<_, _>>().map_err(self.sql())
    }

    /// CPUs that have chunks, ascending.
    pub fn cpus(&self) -> Result<Vec<u32>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT DISTINCT cpu FROM chunks ORDER BY cpu")
            .map_err(self.sql())?;
        let rows = stmt.query_map([], |r| r.get(0)).map_err(self.sql())?;
        rows.collect::<Result<_, _>>().map_err(self.sql())
    }

    /// The time of the last event committed (CLOCK_MONOTONIC ns), from the chunk index;
    /// `None` without events.
    pub fn last_event_ns(&self) -> Result<Option<u64>, StoreError> {
        self.conn
            .query_row("SELECT max(last_ns) FROM chunks", [], |r| {
                r.get::<_, Option<i64>>(0)
            })
            .map(|t| t.map(|t| t as u64))
            .map_err(self.sql())
    }

    /// Number of events in all chunks.
    pub fn event_count(&self) -> Result<u64, StoreError> {
        self.conn
            .query_row("SELECT coalesce(sum(events), 0) FROM chunks", [], |r| {
                r.get::<_, i64>(0)
            })
            .map(|n| n as u64)
            .map_err(self.sql())
    }

    /// `cpu`'s chunks in the order they were appended, one at a time.
    pub fn chunks(&self, cpu: u32) -> ChunkCursor<'_> {
        ChunkCursor {
            reader: self,
            cpu,
            after: i64::MIN,
            done: false,
            spare: Vec::new(),
        }
    }

    /// Calls `f(time_ns, data)` for every sample of `kind`, in time order (ties in the
    /// order they were appended), streaming.
    pub fn samples(
        &self,
        kind: &str,
        mut f: impl FnMut(u64, serde_json::Value),
    ) -> Result<(), StoreError> {
        let mut stmt = self
            .conn
            // NOT INDEXED: the table itself, not its by-kind index, which a damaged page
            // could make skip readings silently (the content checksum covers the table).
            .prepare(
                "SELECT time_ns, data FROM samples NOT INDEXED WHERE kind = ?1 ORDER BY time_ns, seq",
            )
            .map_err(self.sql())?;
        let mut rows = stmt.query([kind]).map_err(self.sql())?;
        while let Some(row) = rows.next().map_err(self.sql())? {
            let t: i64 = row.get(0).map_err(self.sql())?;
            let text: String = row.get(1).map_err(self.sql())?;
            let value = self.parse_json(&format!("a {kind:?} sample"), &text)?;
            f(from_sql(t), value);
        }
        Ok(())
    }
}

/// The metadata key of [`content_checksum`]'s value, written when a recording ends.
pub const CONTENT_CHECKSUM: &str = "content_crc32";

/// The metadata key of [`symbols_checksum`]'s value, rewritten with the symbol cache.
pub const SYMBOLS_CHECKSUM: &str = "symbols_crc32";

/// A CRC-32 of the symbol cache, in key order.
fn symbols_checksum(conn: &Connection) -> rusqlite::Result<u32> {
    let mut h = RowHasher::default();
    h.query(conn, SYMBOLS_IN_KEY_ORDER)?;
    Ok(h.finish())
}

/// The symbol cache in the order its checksum is computed in.
const SYMBOLS_IN_KEY_ORDER: &str =
    "SELECT module, offset, function FROM symbols ORDER BY module, offset";

/// A recording's content checksum computed but for the chunk index
/// ([`RecordingReader::content_parts`]).
pub struct ContentParts {
    /// The checksum written when the recording ended, if it was.
    stored: Option<serde_json::Value>,
    /// What comes before the chunk index in the checksum, and what after it.
    before: RowHasher,
    after: RowHasher,
}

impl ContentParts {
    /// The check, with the index rows of the chunks a reader read (every one, in any
    /// order): a chunk the reader did not get to (a damaged index) is a mismatch.
    pub fn check_read(self, chunks: &[ChunkIndexRow]) -> ContentCheck {
        let Some(stored) = self.stored else {
            return ContentCheck::Unverified;
        };
        let mut rows = chunks.to_vec();
        rows.sort_unstable_by_key(|r| r.seq);
        let mut h = self.before;
        h.combine(chunk_rows_hasher(&rows));
        h.combine(self.after);
        ContentCheck::of(&stored, h.finish())
    }
}

/// What [`RecordingReader::check_content`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContentCheck {
    /// The checksum matches.
    Verified,
    /// No checksum: the recorder was killed before the end, or an older powerlens wrote it.
    Unverified,
    /// Something changed since the recorder wrote it.
    Mismatch { stored: String, computed: u32 },
}

impl ContentCheck {
    /// The stored checksum against the one computed now.
    fn of(stored: &serde_json::Value, computed: u32) -> ContentCheck {
        match stored.as_u64() {
            Some(s) if s == computed as u64 => ContentCheck::Verified,
            _ => ContentCheck::Mismatch {
                stored: stored.to_string(),
                computed,
            },
        }
    }

    /// The warning a reader prints, when there is one to print.
    pub fn warning(&self, path: &Path) -> Option<String> {
        match self {
            ContentCheck::Mismatch { stored, computed } => Some(format!(
                "the recording {} is damaged: its tables (metadata, samples, threads, stacks, chunk index) no longer match the checksum written when it ended ({stored}, now {computed}); figures computed from them may be wrong: record again, or restore a copy",
                path.display()
            )),
            _ => None,
        }
    }
}

/// A CRC-32 of everything a recording's figures are computed from besides the events' own
/// bytes: the metadata (but this checksum), the samples, the thread table, the stacks and
/// modules, and each chunk's index row with the CRC its bytes end with. Not the symbol
/// cache, which reports add to later. A reader that read the chunks gets the same value
/// from their index rows ([`ContentParts::check_read`]).
fn content_checksum(conn: &Connection) -> rusqlite::Result<u32> {
    let (mut h, after) = content_around_chunks(conn)?;
    let mut rows = RowHasher::default();
    rows.query(
        conn,
        "SELECT seq, cpu, first_ns, last_ns, events, substr(data, -4) FROM chunks ORDER BY seq",
    )?;
    h.combine(rows);
    h.combine(after);
    Ok(h.finish())
}

/// [`content_checksum`]'s hashes of what comes before the chunk index (the metadata) and
/// of what comes after it.
fn content_around_chunks(conn: &Connection) -> rusqlite::Result<(RowHasher, RowHasher)> {
    let mut before = RowHasher::default();
    before.query(
        conn,
        &format!(
            "SELECT key, value FROM meta WHERE key NOT IN ('{CONTENT_CHECKSUM}', '{SYMBOLS_CHECKSUM}') ORDER BY key"
        ),
    )?;
    let mut after = RowHasher::default();
    for sql in [
        "SELECT * FROM samples ORDER BY rowid",
        "SELECT * FROM threads ORDER BY rowid",
        "SELECT * FROM stacks ORDER BY rowid",
        "SELECT * FROM modules ORDER BY rowid",
    ] {
        after.query(conn, sql)?;
    }
    Ok((before, after))
}

/// The chunk index rows (in `seq` order) hashed as [`content_checksum`]'s query gives
/// them: integers in range, the trailer a blob of bytes.
fn chunk_rows_hasher(rows: &[ChunkIndexRow]) -> RowHasher {
    let mut h = RowHasher::default();
    for r in rows {
        h.values(&[
            ValueRef::Integer(r.seq),
            ValueRef::Integer(r.cpu as i64),
            ValueRef::Integer(to_sql(r.first_ns)),
            ValueRef::Integer(to_sql(r.last_ns)),
            ValueRef::Integer(r.events as i64),
            ValueRef::Blob(&r.trailer[..r.trailer_len as usize]),
        ]);
    }
    h
}

fn read_error(path: &Path, e: rusqlite::Error) -> StoreError {
    if is_corruption(&e) {
        StoreError::RecordingCorrupt {
            path: path.to_path_buf(),
            detail: e.to_string(),
        }
    } else {
        StoreError::RecordingSql {
            path: path.to_path_buf(),
            cause: e,
        }
    }
}

/// Walks one CPU's chunks; holds one chunk in memory at a time.
pub struct ChunkCursor<'a> {
    reader: &'a RecordingReader,
    cpu: u32,
    after: i64,
    done: bool,
    /// A chunk's bytes handed back ([`ChunkCursor::recycle`]), filled by the next chunk.
    spare: Vec<u8>,
}

impl ChunkCursor<'_> {
    /// Hands back a chunk's bytes once read: the next chunk is read into them. A reader
    /// that walks every chunk (the replay) allocates one buffer per CPU this way, instead
    /// of one per chunk, whose pages the allocator returned to the kernel and faulted in
    /// again each time (a chunk is tens of kilobytes).
    pub fn recycle(&mut self, data: Vec<u8>) {
        self.spare = data;
    }

    /// The next chunk, or `None` after the last one.
    pub fn next_chunk(&mut self) -> Result<Option<Chunk>, StoreError> {
        if self.done {
            return Ok(None);
        }
        let r = self.reader;
        let spare = &mut self.spare;
        let row = r
            .conn
            .prepare_cached(
                "SELECT seq, first_ns, last_ns, events, data FROM chunks
                 WHERE cpu = ?1 AND seq > ?2 ORDER BY seq LIMIT 1",
            )
            .and_then(|mut s| {
                s.query_row(params![self.cpu, self.after], |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        Chunk {
                            seq: row.get(0)?,
                            cpu: self.cpu,
                            first_ns: from_sql(row.get(1)?),
                            last_ns: from_sql(row.get(2)?),
                            events: row.get(3)?,
                            data: match row.get_ref(4)? {
                                ValueRef::Blob(bytes) => {
                                    let mut data = std::mem::take(spare);
                                    data.clear();
                                    data.extend_from_slice(bytes);
                                    data
                                }
                                other => {
                                    return Err(rusqlite::Error::InvalidColumnType(
                                        4,
                                        "data".into(),
                                        other.data_type(),
                                    ))
                                }
                            },
                        },
                    ))
                })
                .optional()
            });
        match row {
            Ok(Some((seq, chunk))) => {
                self.after = seq;
                Ok(Some(chunk))
            }
            Ok(None) => {
                self.done = true;
                Ok(None)
            }
            Err(e) => {
                self.done = true;
                Err(read_error(&r.path, e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
    fn sigkill_child() {
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
                "recording::tests::sigkill_child",
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
}
