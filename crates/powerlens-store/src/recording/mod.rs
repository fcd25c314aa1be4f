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

use std::collections::BTreeMap;

use rusqlite::ErrorCode;

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

/// What a reader needs of a recording besides its events, read in one trip
/// ([`RecordingReader::header`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecordingHeader {
    /// The metadata asked for, by key; a key the recording lacks is absent.
    pub meta: BTreeMap<String, serde_json::Value>,
    /// The thread table, by tid.
    pub threads: Vec<ThreadRow>,
    /// The samples of each kind asked for (`(time_ns, data)`), in time order, ties in the
    /// order they were appended; a kind without samples has an empty list.
    pub samples: BTreeMap<String, Vec<(u64, serde_json::Value)>>,
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

mod content;
mod reader;
#[cfg(test)]
mod tests;
mod writer;

pub use content::*;
pub use reader::*;
pub use writer::*;
