//! The results table and its runs.

use std::path::{Path, PathBuf};

use rusqlite::{params, Connection, OpenFlags, OptionalExtension, TransactionBehavior};

use crate::checksum::RowHasher;
use crate::files::{create_private, refuse_symlinks};
use crate::{StoreError, APPLICATION_ID, RESULTS_SCHEMA_VERSION};

const SCHEMA: &str = "
CREATE TABLE results (
    id            INTEGER PRIMARY KEY,
    created_unix  REAL    NOT NULL,
    kind          TEXT    NOT NULL,
    command       TEXT    NOT NULL,
    label         TEXT,
    runs          INTEGER NOT NULL,
    complete      INTEGER NOT NULL,
    provenance    TEXT    NOT NULL,
    mean_wall_s   REAL,
    mean_energy_j REAL,
    document      TEXT    NOT NULL,
    crc           INTEGER
);
CREATE TABLE runs (
    result_id  INTEGER NOT NULL REFERENCES results(id) ON DELETE CASCADE,
    idx        INTEGER NOT NULL,
    wall_s     REAL    NOT NULL,
    cpu_s      REAL    NOT NULL,
    energy_j   REAL    NOT NULL,
    power_w    REAL    NOT NULL,
    exit_code  INTEGER,
    signal     INTEGER,
    domains    TEXT    NOT NULL,
    PRIMARY KEY (result_id, idx)
);
";

/// How long a process waits for another one's write to the database before giving up:
/// `run`, `compare` and `sweep` processes sharing one database queue on it.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// A result to append.
#[derive(Debug, Clone, PartialEq)]
pub struct NewResult {
    pub created_unix: f64,
    /// What produced it, e.g. `run`.
    pub kind: String,
    /// The measured command line as the user wrote it.
    pub command: String,
    pub label: Option<String>,
    /// False when the series stopped early (Ctrl-C, a failing run).
    pub complete: bool,
    /// Provenance label of the energy figures, e.g. `measured (rapl-powercap)`.
    pub provenance: String,
    pub mean_wall_s: Option<f64>,
    pub mean_energy_j: Option<f64>,
    /// The whole result as JSON, exactly as `run --json` prints it.
    pub document: String,
    pub runs: Vec<RunRow>,
}

/// One measured run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    pub wall_s: f64,
    pub cpu_s: f64,
    pub energy_j: f64,
    pub power_w: f64,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// JSON object: domain name → joules.
    pub domains: String,
}

/// A stored result, as listed.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultRow {
    pub id: i64,
    pub created_unix: f64,
    pub kind: String,
    pub command: String,
    pub label: Option<String>,
    pub runs: i64,
    pub complete: bool,
    pub provenance: String,
    pub mean_wall_s: Option<f64>,
    pub mean_energy_j: Option<f64>,
    pub document: String,
    /// Its checksum does not match its contents any more (see [`ResultsDb::list`]).
    pub damaged: bool,
}

/// An open results database.
pub struct ResultsDb {
    conn: Connection,
    path: PathBuf,
    /// Whether results carry a checksum (schema version 2 on; a version-1 file opened
    /// read-only has none).
    has_crc: bool,
}

impl ResultsDb {
    /// Opens the database at `path`, creating it (and its directory) when missing. An
    /// existing file that is not a powerlens results database, or one from a newer version,
    /// is refused and left untouched.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
                path: dir.to_path_buf(),
                cause: source,
            })?;
        }
        refuse_symlinks(&path)?;
        let existed = path.exists();
        if !existed {
            // For its owner only: it holds command lines. Another process may create it
            // first: then this one opens that.
            match create_private(&path) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    return Err(StoreError::CreateFile {
                        path: path.clone(),
                        cause: e,
                    })
                }
            }
        }
        let mut db = Self::connect(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NOFOLLOW,
        )?;
        // Openers take turns (an immediate transaction: one writer at a time), so that two
        // processes creating the database at once do not both create its tables, and none
        // reads a header half written by another.
        db.conn.execute_batch("BEGIN IMMEDIATE").map_err(|e| {
            if e.sqlite_error_code() == Some(rusqlite::ErrorCode::NotADatabase) {
                db.not_ours(e.to_string())
            } else {
                db.sql()(e)
            }
        })?;
        let checked = db.check_or_create(existed, true);
        let end = if checked.is_ok() {
            "COMMIT"
        } else {
            "ROLLBACK"
        };
        db.conn.execute_batch(end).map_err(db.sql())?;
        checked?;
        Ok(db)
    }

    /// Opens an existing database read-only (for `runs list/show`): never creates one.
    pub fn open_existing(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        let mut db = Self::connect(
            path.as_ref().to_path_buf(),
            OpenFlags::SQLITE_OPEN_READ_ONLY,
        )?;
        db.check_or_create(true, false)?;
        Ok(db)
    }

    /// The connection, waiting up to [`BUSY_TIMEOUT`] for other processes' writes; its
    /// checksum column is found by [`ResultsDb::check_or_create`].
    fn connect(path: PathBuf, flags: OpenFlags) -> Result<Self, StoreError> {
        let open_error = |source| StoreError::Open {
            path: path.clone(),
            cause: source,
        };
        let conn = Connection::open_with_flags(&path, flags).map_err(open_error)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(open_error)?;
        Ok(ResultsDb {
            conn,
            path,
            has_crc: false,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn sql(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        |cause| StoreError::Sql {
            path: self.path.clone(),
            cause,
        }
    }

    fn not_ours(&self, detail: impl Into<String>) -> StoreError {
        StoreError::NotOurs {
            path: self.path.clone(),
            detail: detail.into(),
        }
    }

    /// Checks that this is a powerlens results database this version reads, creating the
    /// schema in an empty file and, when `writable`, bringing a version-1 file to version 2
    /// (a checksum column; the results already there stay unverified).
    fn check_or_create(&mut self, existed: bool, writable: bool) -> Result<(), StoreError> {
        // Reading the header is the first thing that fails on a corrupt or foreign file.
        let app_id: i32 = self
            .conn
            .query_row("PRAGMA application_id", [], |r| r.get(0))
            .map_err(|e| self.not_ours(e.to_string()))?;
        let version: i32 = self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| self.not_ours(e.to_string()))?;
        let tables: i64 = self
            .conn
            .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
            .map_err(|e| self.not_ours(e.to_string()))?;
        if app_id == 0 && tables == 0 {
            if existed
                && std::fs::metadata(&self.path)
                    .map(|m| m.len() > 0)
                    .unwrap_or(false)
            {
                // An empty SQLite database someone else made: still refuse to claim it.
                return Err(self.not_ours("an SQLite file without powerlens tables"));
            }
            self.create_schema()?;
            self.has_crc = true;
            return Ok(());
        }
        if app_id == crate::RECORDING_APPLICATION_ID {
            return Err(
                self.not_ours("it is a powerlens recording; read it with `powerlens report FILE`")
            );
        }
        if app_id != APPLICATION_ID {
            return Err(self.not_ours(format!("SQLite application_id {app_id:#x}, not powerlens")));
        }
        if version > RESULTS_SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path: self.path.clone(),
                found: version,
                supported: RESULTS_SCHEMA_VERSION,
            });
        }
        if version < RESULTS_SCHEMA_VERSION && writable {
            self.conn
                .execute_batch(&format!(
                    "ALTER TABLE results ADD COLUMN crc INTEGER; PRAGMA user_version = {RESULTS_SCHEMA_VERSION};"
                ))
                .map_err(self.sql())?;
        }
        self.has_crc = self
            .conn
            .query_row(
                "SELECT count(*) FROM pragma_table_info('results') WHERE name = 'crc'",
                [],
                |r| r.get::<_, i64>(0),
            )
            .map_err(self.sql())?
            > 0;
        Ok(())
    }

    /// Inside the opener's transaction (see [`ResultsDb::open`]).
    fn create_schema(&self) -> Result<(), StoreError> {
        let sql = format!(
            "{SCHEMA} PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {RESULTS_SCHEMA_VERSION};"
        );
        self.conn.execute_batch(&sql).map_err(self.sql())
    }

    /// Appends a result and its runs in one transaction; returns its id.
    pub fn insert(&mut self, result: &NewResult) -> Result<i64, StoreError> {
        let path = self.path.clone();
        let sql = |cause| StoreError::Sql {
            path: path.clone(),
            cause,
        };
        // Immediate: the write lock is taken (or waited for) up front, never upgraded from a
        // read lock, which SQLite refuses at once when another process writes.
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql)?;
        tx.execute(
            "INSERT INTO results (created_unix, kind, command, label, runs, complete, provenance,
                                  mean_wall_s, mean_energy_j, document)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                result.created_unix,
                result.kind,
                result.command,
                result.label,
                result.runs.len() as i64,
                result.complete,
                result.provenance,
                result.mean_wall_s,
                result.mean_energy_j,
                result.document,
            ],
        )
        .map_err(sql)?;
        let id = tx.last_insert_rowid();
        for (idx, run) in result.runs.iter().enumerate() {
            tx.execute(
                "INSERT INTO runs (result_id, idx, wall_s, cpu_s, energy_j, power_w, exit_code, signal, domains)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    id,
                    idx as i64,
                    run.wall_s,
                    run.cpu_s,
                    run.energy_j,
                    run.power_w,
                    run.exit_code,
                    run.signal,
                    run.domains
                ],
            )
            .map_err(sql)?;
        }
        // Read back what was written before anything depends on it: in a damaged file
        // SQLite can give the new row an id an old row already has (a table tree out of
        // order), and every read by that id then finds the old row, whose checksum is its
        // own (found by fuzzing: `runs show` would have shown another result). Dropping
        // the transaction rolls the write back.
        let back: (String, f64, String) = tx
            .query_row(
                "SELECT command, created_unix, document FROM results WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .map_err(sql)?;
        if back
            != (
                result.command.clone(),
                result.created_unix,
                result.document.clone(),
            )
        {
            return Err(StoreError::WriteNotReadBack { path });
        }
        let crc = result_checksum(&tx, id).map_err(sql)?;
        tx.execute(
            "UPDATE results SET crc = ?1 WHERE id = ?2",
            params![crc, id],
        )
        .map_err(sql)?;
        tx.commit().map_err(sql)?;
        Ok(id)
    }

    /// All results, newest last. A result whose checksum no longer matches its contents
    /// (SQLite has none of its own: a flipped bit reads as another number) is marked
    /// `damaged`; results saved before checksums existed cannot be and are not.
    pub fn list(&self) -> Result<Vec<ResultRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(&format!("{} ORDER BY id", self.select()))
            .map_err(self.sql())?;
        let rows = stmt.query_map([], result_row).map_err(self.sql())?;
        rows.map(|row| self.verified(row?))
            .collect::<Result<_, _>>()
            .map_err(self.sql())
    }

    /// One result by id; an error when it is damaged.
    pub fn get(&self, id: i64) -> Result<ResultRow, StoreError> {
        let row = self
            .conn
            .query_row(
                &format!("{} WHERE id = ?1", self.select()),
                [id],
                result_row,
            )
            .optional()
            .map_err(self.sql())?
            .ok_or_else(|| StoreError::NoSuchResult {
                id,
                path: self.path.clone(),
            })?;
        let row = self.verified(row).map_err(self.sql())?;
        if row.damaged {
            return Err(StoreError::ResultDamaged {
                id,
                path: self.path.clone(),
            });
        }
        Ok(row)
    }

    fn select(&self) -> String {
        let crc = if self.has_crc { "crc" } else { "NULL" };
        format!("SELECT id, {RESULT_COLUMNS}, {crc} FROM results")
    }

    /// The row with `damaged` set from its stored checksum.
    fn verified(&self, (mut row, crc): (ResultRow, Option<i64>)) -> rusqlite::Result<ResultRow> {
        if let Some(stored) = crc {
            row.damaged = result_checksum(&self.conn, row.id)? as i64 != stored;
        }
        Ok(row)
    }
}

/// The columns of a result that its checksum covers, with its runs.
const RESULT_COLUMNS: &str = "created_unix, kind, command, label, runs, complete, provenance,
    mean_wall_s, mean_energy_j, document";

/// A CRC-32 of result `id`'s row and its runs, as stored.
fn result_checksum(conn: &Connection, id: i64) -> rusqlite::Result<u32> {
    let mut h = RowHasher::default();
    h.query(
        conn,
        &format!("SELECT {RESULT_COLUMNS} FROM results WHERE id = {id}"),
    )?;
    h.query(
        conn,
        &format!("SELECT idx, wall_s, cpu_s, energy_j, power_w, exit_code, signal, domains FROM runs WHERE result_id = {id} ORDER BY idx"),
    )?;
    Ok(h.finish())
}

fn result_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(ResultRow, Option<i64>)> {
    Ok((
        ResultRow {
            id: r.get(0)?,
            created_unix: r.get(1)?,
            kind: r.get(2)?,
            command: r.get(3)?,
            label: r.get(4)?,
            runs: r.get(5)?,
            complete: r.get(6)?,
            provenance: r.get(7)?,
            mean_wall_s: r.get(8)?,
            mean_energy_j: r.get(9)?,
            document: r.get(10)?,
            damaged: false,
        },
        r.get(11)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (fuzz/regressions/results/append-reads-back-another-row): a damaged file
    /// whose results tree is out of order gave the appended result the id of an old one,
    /// and reading it back by its id found the old one.
    #[test]
    fn a_result_that_reads_back_as_another_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.db");
        std::fs::write(
            &path,
            include_bytes!("../../../fuzz/regressions/results/append-reads-back-another-row"),
        )
        .unwrap();
        let new = NewResult {
            created_unix: 1.5e9,
            kind: "run".into(),
            command: "fuzz".into(),
            label: None,
            complete: true,
            provenance: "estimated (default-linear)".into(),
            mean_wall_s: Some(0.25),
            mean_energy_j: Some(2.0),
            document: "{}".into(),
            runs: Vec::new(),
        };
        let mut db = ResultsDb::open(&path).unwrap();
        let err = db.insert(&new).unwrap_err();
        assert!(matches!(err, StoreError::WriteNotReadBack { .. }), "{err}");
        assert!(err.to_string().contains("was not saved"), "{err}");
        // Nothing of it stayed.
        drop(db);
        let conn = Connection::open(&path).unwrap();
        let kept: i64 = conn
            .query_row(
                "SELECT count(*) FROM results WHERE command = 'fuzz'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(kept, 0);
    }

    /// It holds command lines: created for its owner only, whatever the umask; a symbolic
    /// link at its path or at its journal is refused and nothing is written through it.
    #[test]
    fn a_new_database_is_private_and_links_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.db");
        let mut db = ResultsDb::open(&path).unwrap();
        db.insert(&sample("secret-token-in-argv")).unwrap();
        drop(db);
        let mode = path.metadata().unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);

        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let link = dir.path().join("linked.db");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let err = ResultsDb::open(&link).map(|_| ()).unwrap_err();
        assert!(matches!(err, StoreError::Symlink { .. }), "{err}");
        assert!(err.to_string().contains("symbolic link"), "{err}");
        std::os::unix::fs::symlink(&victim, dir.path().join("results.db-journal")).unwrap();
        let err = ResultsDb::open(&path).map(|_| ()).unwrap_err();
        assert!(err.to_string().contains("results.db-journal"), "{err}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    }

    /// Each result carries a checksum of its row and runs: a number changed in the file is
    /// found (listed as damaged, refused by id), the others stay readable; a version-1
    /// database gains the column on its next write and its old results stay unverified.
    #[test]
    fn a_changed_result_is_found_by_its_checksum() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.db");
        let mut db = ResultsDb::open(&path).unwrap();
        let (a, b) = (
            db.insert(&sample("a")).unwrap(),
            db.insert(&sample("b")).unwrap(),
        );
        db.conn
            .execute("UPDATE runs SET energy_j = 31.0 WHERE result_id = ?1", [b])
            .unwrap();
        let rows = db.list().unwrap();
        assert_eq!(
            rows.iter().map(|r| (r.id, r.damaged)).collect::<Vec<_>>(),
            [(a, false), (b, true)]
        );
        assert!(db.get(a).is_ok());
        let err = db.get(b).map(|_| ()).unwrap_err();
        assert!(matches!(err, StoreError::ResultDamaged { .. }), "{err}");

        // Version 1: no crc column. Read-only it lists unverified; a writer adds the column.
        let old = dir.path().join("old.db");
        let conn = Connection::open(&old).unwrap();
        conn.execute_batch(&format!(
            "{} PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = 1;",
            SCHEMA.replace(",\n    crc           INTEGER", "")
        ))
        .unwrap();
        conn.execute(
            "INSERT INTO results (created_unix, kind, command, runs, complete, provenance, document) VALUES (1, 'run', 'x', 0, 1, 'p', '{}')",
            [],
        )
        .unwrap();
        drop(conn);
        let ro = ResultsDb::open_existing(&old).unwrap();
        assert!(!ro.has_crc);
        assert!(!ro.list().unwrap()[0].damaged);
        drop(ro);
        let mut rw = ResultsDb::open(&old).unwrap();
        assert!(rw.has_crc);
        let new = rw.insert(&sample("new")).unwrap();
        let rows = rw.list().unwrap();
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|r| !r.damaged));
        assert!(rw.get(new).is_ok());
        let version: i32 = rw
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, RESULTS_SCHEMA_VERSION);
    }

    fn sample(command: &str) -> NewResult {
        NewResult {
            created_unix: 1.7e9,
            kind: "run".into(),
            command: command.into(),
            label: None,
            complete: true,
            provenance: "measured (rapl-powercap)".into(),
            mean_wall_s: Some(1.5),
            mean_energy_j: Some(30.0),
            document: r#"{"runs":[]}"#.into(),
            runs: vec![RunRow {
                wall_s: 1.5,
                cpu_s: 1.4,
                energy_j: 30.0,
                power_w: 20.0,
                exit_code: Some(0),
                signal: None,
                domains: r#"{"package-0":30.0}"#.into(),
            }],
        }
    }

    #[test]
    fn round_trip_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/dir/results.db");
        let mut db = ResultsDb::open(&path).unwrap();
        let a = db.insert(&sample("sleep 1")).unwrap();
        let b = db.insert(&sample("true")).unwrap();
        assert!(b > a);
        drop(db);
        let db = ResultsDb::open_existing(&path).unwrap();
        let all = db.list().unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].command, "sleep 1");
        assert_eq!(db.get(b).unwrap().command, "true");
        assert!(matches!(
            db.get(999),
            Err(StoreError::NoSuchResult { id: 999, .. })
        ));
        let n: i64 = db
            .conn
            .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 2);
    }

    #[test]
    fn corrupt_file_is_refused_and_left_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.db");
        let garbage = b"this is not a database, but a user's precious notes\n".repeat(100);
        std::fs::write(&path, &garbage).unwrap();
        let err = ResultsDb::open(&path).err().expect("must refuse");
        assert!(matches!(err, StoreError::NotOurs { .. }), "{err}");
        assert!(err.to_string().contains("left untouched"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), garbage);
    }

    #[test]
    fn foreign_and_newer_databases_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let foreign = dir.path().join("foreign.db");
        Connection::open(&foreign)
            .unwrap()
            .execute_batch("CREATE TABLE t(x);")
            .unwrap();
        assert!(matches!(
            ResultsDb::open(&foreign),
            Err(StoreError::NotOurs { .. })
        ));

        let newer = dir.path().join("newer.db");
        drop(ResultsDb::open(&newer).unwrap());
        Connection::open(&newer)
            .unwrap()
            .execute_batch(&format!(
                "PRAGMA user_version = {};",
                RESULTS_SCHEMA_VERSION + 1
            ))
            .unwrap();
        assert!(matches!(
            ResultsDb::open(&newer),
            Err(StoreError::TooNew { .. })
        ));
    }

    #[test]
    fn unwritable_location_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain-file");
        std::fs::write(&file, "x").unwrap();
        // A path below a regular file cannot be created, even by root.
        let err = ResultsDb::open(file.join("results.db"))
            .err()
            .expect("must fail");
        assert!(matches!(err, StoreError::CreateDir { .. }), "{err}");
    }
}
