//! Checksums of what SQLite does not check: it has no checksum of its own, so a flipped
//! bit in a stored number is read back as another number. Each recording chunk carries a
//! CRC-32 of its bytes (the codec); this covers the rest of a recording that figures are
//! computed from, and each result row of the results database.

use rusqlite::types::ValueRef;
use rusqlite::{Connection, Row};

/// A CRC-32 over rows, column by column, each value with its type.
#[derive(Default)]
pub(crate) struct RowHasher(crc32fast::Hasher);

impl RowHasher {
    pub(crate) fn row(&mut self, row: &Row<'_>, columns: usize) -> rusqlite::Result<()> {
        for i in 0..columns {
            self.value(row.get_ref(i)?);
        }
        Ok(())
    }

    /// One row given as its values.
    pub(crate) fn values(&mut self, values: &[ValueRef<'_>]) {
        for v in values {
            self.value(*v);
        }
    }

    fn value(&mut self, v: ValueRef<'_>) {
        let h = &mut self.0;
        match v {
            ValueRef::Null => h.update(&[0]),
            ValueRef::Integer(n) => {
                h.update(&[1]);
                h.update(&n.to_le_bytes());
            }
            ValueRef::Real(x) => {
                h.update(&[2]);
                h.update(&x.to_bits().to_le_bytes());
            }
            ValueRef::Text(t) => {
                h.update(&[3]);
                h.update(&(t.len() as u64).to_le_bytes());
                h.update(t);
            }
            ValueRef::Blob(b) => {
                h.update(&[4]);
                h.update(&(b.len() as u64).to_le_bytes());
                h.update(b);
            }
        }
    }

    /// Every row of `sql`.
    pub(crate) fn query(&mut self, conn: &Connection, sql: &str) -> rusqlite::Result<()> {
        let mut stmt = conn.prepare(sql)?;
        let columns = stmt.column_count();
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            self.row(row, columns)?;
        }
        Ok(())
    }

    /// Appends what `other` hashed, as if hashed here after what this one did.
    pub(crate) fn combine(&mut self, other: RowHasher) {
        self.0.combine(&other.0);
    }

    pub(crate) fn finish(self) -> u32 {
        self.0.finalize()
    }
}
