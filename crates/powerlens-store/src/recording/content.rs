//! The content checksums a recording keeps of itself: of its events, samples and thread
//! table, and of its symbol cache, so that a damaged or altered file is told apart.

use std::path::Path;

use rusqlite::types::ValueRef;
use rusqlite::Connection;

use super::{to_sql, ChunkIndexRow};
use crate::checksum::RowHasher;

/// The metadata key of [`content_checksum`]'s value, written when a recording ends.
pub const CONTENT_CHECKSUM: &str = "content_crc32";

/// The metadata key of [`symbols_checksum`]'s value, rewritten with the symbol cache.
pub const SYMBOLS_CHECKSUM: &str = "symbols_crc32";

/// A CRC-32 of the symbol cache, in key order.
pub(super) fn symbols_checksum(conn: &Connection) -> rusqlite::Result<u32> {
    let mut h = RowHasher::default();
    h.query(conn, SYMBOLS_IN_KEY_ORDER)?;
    Ok(h.finish())
}

/// The symbol cache in the order its checksum is computed in.
pub(super) const SYMBOLS_IN_KEY_ORDER: &str =
    "SELECT module, offset, function FROM symbols ORDER BY module, offset";

/// A recording's content checksum computed but for the chunk index
/// ([`RecordingReader::content_parts`]).
pub struct ContentParts {
    /// The checksum written when the recording ended, if it was.
    pub(super) stored: Option<serde_json::Value>,
    /// What comes before the chunk index in the checksum, and what after it.
    pub(super) before: RowHasher,
    pub(super) after: RowHasher,
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
    pub(super) fn of(stored: &serde_json::Value, computed: u32) -> ContentCheck {
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
pub(super) fn content_checksum(conn: &Connection) -> rusqlite::Result<u32> {
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
pub(super) fn content_around_chunks(conn: &Connection) -> rusqlite::Result<(RowHasher, RowHasher)> {
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
pub(super) fn chunk_rows_hasher(rows: &[ChunkIndexRow]) -> RowHasher {
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
