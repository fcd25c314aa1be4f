//! The powerlens results database (SQLite). The schema is versioned and documented in
//! docs/FORMAT.md.
//!
//! A results database holds one row per `powerlens run` (its command, options and the full
//! JSON result) and one row per measured run, so that results can be listed, shown,
//! compared later and queried with `sqlite3`.

mod results;

pub use results::{NewResult, ResultRow, ResultsDb, RunRow};

use std::path::PathBuf;

/// SQLite `application_id` of powerlens files ("PWLN"), so a foreign SQLite file is refused.
pub const APPLICATION_ID: i32 = 0x5057_4C4E;

/// Schema version of the results database (`PRAGMA user_version`).
pub const RESULTS_SCHEMA_VERSION: i32 = 1;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot create the directory {path} for the results database: {source} (choose another place with --db PATH)")]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open the results database {path}: {source} (check its permissions, or choose another with --db PATH)")]
    Open {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("{path} is not a powerlens results database ({detail}); it was left untouched — move it aside or choose another file with --db PATH")]
    NotOurs { path: PathBuf, detail: String },
    #[error("the results database {path} has schema version {found}, newer than this powerlens understands ({supported}); upgrade powerlens")]
    TooNew {
        path: PathBuf,
        found: i32,
        supported: i32,
    },
    #[error("results database {path}: {source}")]
    Sql {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("no result with id {id} in {path} (list them with `powerlens runs list`)")]
    NoSuchResult { id: i64, path: PathBuf },
}
