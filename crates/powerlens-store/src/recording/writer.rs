//! Writing a recording: one transaction open between flushes, in WAL mode, checkpointed
//! at every flush, so that a killed recorder leaves what it flushed.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, ErrorCode, OpenFlags};

use super::content::{content_checksum, CONTENT_CHECKSUM};
use super::{to_sql, ThreadRow, RECORDING_APPLICATION_ID, RECORDING_SCHEMA_VERSION, SCHEMA};
use crate::files::{create_private, side_file, SIDE_FILES};
use crate::StoreError;

/// Writes a new recording.
pub struct RecordingWriter {
    pub(super) conn: Connection,
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
            Err(source) => {
                return Err(StoreError::RecordingCreate {
                    path,
                    cause: source,
                })
            }
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE;
        let conn = Connection::open_with_flags(&path, flags).map_err(|source| {
            StoreError::RecordingOpen {
                path: path.clone(),
                cause: source,
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
