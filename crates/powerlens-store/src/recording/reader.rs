//! Reading a recording: metadata, threads, samples, symbols and the chunks, streamed one
//! blob at a time through a cursor.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, ErrorCode, OpenFlags, OptionalExtension};

use super::content::{
    content_around_chunks, content_checksum, symbols_checksum, ContentCheck, ContentParts,
    CONTENT_CHECKSUM, SYMBOLS_CHECKSUM, SYMBOLS_IN_KEY_ORDER,
};
use super::{
    from_sql, is_corruption, to_sql, Chunk, RecordingHeader, SymbolRow, ThreadRow,
    RECORDING_APPLICATION_ID, RECORDING_SCHEMA_VERSION, VERSION_1_TABLES,
};
use crate::checksum::RowHasher;
use crate::{StoreError, APPLICATION_ID};

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
            Err(source) => {
                return Err(StoreError::RecordingRead {
                    path,
                    cause: source,
                })
            }
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
                cause: source,
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
        self.meta_where(|_| true)
    }

    /// The metadata whose keys `keep` keeps, by key; the others are not parsed.
    fn meta_where(
        &self,
        keep: impl Fn(&str) -> bool,
    ) -> Result<BTreeMap<String, serde_json::Value>, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT key, value FROM meta")
            .map_err(self.sql())?;
        let mut rows = stmt.query([]).map_err(self.sql())?;
        let mut out = BTreeMap::new();
        while let Some(row) = rows.next().map_err(self.sql())? {
            let key: String = row.get(0).map_err(self.sql())?;
            if keep(&key) {
                let text: String = row.get(1).map_err(self.sql())?;
                let value = self.parse_json(&format!("metadata {key:?}"), &text)?;
                out.insert(key, value);
            }
        }
        Ok(out)
    }

    /// What a reader needs of the recording besides its events, in one read transaction
    /// (one snapshot, even of a file a recorder is still writing): the metadata of
    /// `meta_keys`, the thread table, and the samples of `sample_kinds` from one scan of
    /// the sample table. Keys and kinds not asked for are not parsed, so damage there
    /// fails only the readers that ask for them.
    pub fn header(
        &self,
        meta_keys: &[&str],
        sample_kinds: &[&str],
    ) -> Result<RecordingHeader, StoreError> {
        let _snapshot = self.conn.unchecked_transaction().map_err(self.sql())?;
        let meta = self.meta_where(|key| meta_keys.contains(&key))?;
        let threads = self.threads()?;
        let mut samples: BTreeMap<String, Vec<(u64, serde_json::Value)>> = sample_kinds
            .iter()
            .map(|k| (k.to_string(), Vec::new()))
            .collect();
        self.samples_of(sample_kinds, |t, kind, value| {
            if let Some(of_kind) = samples.get_mut(kind) {
                of_kind.push((t, value));
            }
        })?;
        Ok(RecordingHeader {
            meta,
            threads,
            samples,
        })
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
        self.samples_of(&[kind], |t, _, value| f(t, value))
    }

    /// Calls `f(time_ns, kind, data)` for every sample of `kinds`, in time order (ties in
    /// the order they were appended), from one scan of the table, streaming.
    fn samples_of(
        &self,
        kinds: &[&str],
        mut f: impl FnMut(u64, &str, serde_json::Value),
    ) -> Result<(), StoreError> {
        if kinds.is_empty() {
            return Ok(());
        }
        let wanted = vec!["?"; kinds.len()].join(", ");
        let mut stmt = self
            .conn
            // NOT INDEXED: the table itself, not its by-kind index, which a damaged page
            // could make skip readings silently (the content checksum covers the table).
            .prepare(&format!(
                "SELECT time_ns, kind, data FROM samples NOT INDEXED WHERE kind IN ({wanted}) ORDER BY time_ns, seq"
            ))
            .map_err(self.sql())?;
        let mut rows = stmt
            .query(rusqlite::params_from_iter(kinds))
            .map_err(self.sql())?;
        while let Some(row) = rows.next().map_err(self.sql())? {
            let t: i64 = row.get(0).map_err(self.sql())?;
            let kind: String = row.get(1).map_err(self.sql())?;
            let text: String = row.get(2).map_err(self.sql())?;
            let value = self.parse_json(&format!("a {kind:?} sample"), &text)?;
            f(from_sql(t), &kind, value);
        }
        Ok(())
    }
}

pub(super) fn read_error(path: &Path, e: rusqlite::Error) -> StoreError {
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
