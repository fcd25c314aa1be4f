//! The powerlens results database (SQLite). The schema is versioned and documented in
//! docs/FORMAT.md.
//!
//! A results database holds one row per `powerlens run` (its command, options and the full
//! JSON result) and one row per measured run, so that results can be listed, shown,
//! compared later and queried with `sqlite3`.
//!
//! A recording (`powerlens record`) is a separate SQLite file with its own id: raw event
//! chunks, samples, threads and metadata (see [`recording`]).

mod checksum;
mod files;
pub mod recording;
mod results;

pub use recording::{
    Chunk, ChunkCursor, ContentCheck, RecordingHeader, RecordingReader, RecordingWriter, ThreadRow,
    RECORDING_APPLICATION_ID, RECORDING_SCHEMA_VERSION,
};
pub use results::{NewResult, ResultRow, ResultsDb, RunRow};

use std::path::PathBuf;

/// SQLite `application_id` of powerlens files ("PWLN"), so a foreign SQLite file is refused.
pub const APPLICATION_ID: i32 = 0x5057_4C4E;

/// Schema version of the results database (`PRAGMA user_version`).
pub const RESULTS_SCHEMA_VERSION: i32 = 2;

/// What went wrong with a results database or a recording. The messages name the file
/// and the fix but no command-line flag: the command line adds the flag that chooses
/// another file where it has one (`--db`).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot create the directory {path} for the results database: {cause}")]
    CreateDir {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error(
        "cannot create the results database {path}: {cause}; check that its directory is writable"
    )]
    CreateFile {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("cannot open the results database {path}: {cause}; check its permissions")]
    Open {
        path: PathBuf,
        cause: rusqlite::Error,
    },
    #[error("{path} is not a powerlens results database ({detail}); it was left untouched — move it aside")]
    NotOurs { path: PathBuf, detail: String },
    #[error("{path} is a symbolic link: powerlens does not write a database through one (a link planted there would send command lines elsewhere); give the real file's path, or remove the link")]
    Symlink { path: PathBuf },
    #[error("the results database {path} has schema version {found}, newer than this powerlens understands ({supported}); upgrade powerlens")]
    TooNew {
        path: PathBuf,
        found: i32,
        supported: i32,
    },
    #[error("results database {path}: {}{}", brief(cause), damage_hint(cause))]
    Sql {
        path: PathBuf,
        cause: rusqlite::Error,
    },
    #[error("result {id} in {path} is damaged: its contents no longer match the checksum saved with it, so its figures cannot be trusted (`powerlens runs list` leaves it out; run the measurement again)")]
    ResultDamaged { id: i64, path: PathBuf },
    #[error("the results database {path} is damaged: a result written to it reads back as another one (its tables are out of order), so the result was not saved; move the file aside (powerlens starts a new one) or restore a copy")]
    WriteNotReadBack { path: PathBuf },
    #[error("no result with id {id} in {path} (list them with `powerlens runs list`)")]
    NoSuchResult { id: i64, path: PathBuf },
    #[error("{path} already exists; move it aside or choose another name with -o FILE")]
    RecordingExists { path: PathBuf },
    #[error("cannot create the recording {path}: {cause} (check that the directory exists and is writable, or choose another place with -o FILE)")]
    RecordingCreate {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("cannot open the recording {path}: {cause}")]
    RecordingOpen {
        path: PathBuf,
        cause: rusqlite::Error,
    },
    #[error("no recording at {path} (make one with `powerlens record -o FILE -- CMD`)")]
    NoRecording { path: PathBuf },
    #[error("cannot read the recording {path}: {cause}")]
    RecordingRead {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{path} is not a powerlens recording ({detail}); it was left untouched")]
    NotARecording { path: PathBuf, detail: String },
    #[error("the recording {path} has schema version {found}, newer than this powerlens understands ({supported}); upgrade powerlens")]
    RecordingTooNew {
        path: PathBuf,
        found: i32,
        supported: i32,
    },
    #[error("the recording {path} is damaged ({detail}); record again, or read what is left with sqlite3 (docs/FORMAT.md)")]
    RecordingCorrupt { path: PathBuf, detail: String },
    #[error("disk full while writing the recording {path}: it keeps everything flushed until now, the events since the last flush are lost (free space, or record to another disk with -o FILE)")]
    DiskFull { path: PathBuf },
    #[error("cannot write the recording {path}: {detail}; it keeps everything flushed until now")]
    RecordingWrite { path: PathBuf, detail: String },
    #[error("recording {path}: {}{}", brief(cause), damage_hint(cause))]
    RecordingSql {
        path: PathBuf,
        cause: rusqlite::Error,
    },
}

/// SQLite's message alone, on one line: rusqlite's own display of a statement error
/// repeats the message around the whole multi-line statement.
fn brief(e: &rusqlite::Error) -> String {
    let text = match e {
        rusqlite::Error::SqliteFailure(_, Some(msg)) => msg.clone(),
        rusqlite::Error::SqlInputError { msg, .. } => msg.clone(),
        other => other.to_string(),
    };
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A table or column the schema should have and does not: the file was damaged or
/// altered (its schema version is the one this powerlens reads).
fn damage_hint(e: &rusqlite::Error) -> &'static str {
    let text = brief(e);
    if text.starts_with("no such table") || text.starts_with("no such column") {
        " — the file is damaged or was altered; it was left untouched: restore it from a copy, or move it aside"
    } else {
        ""
    }
}
