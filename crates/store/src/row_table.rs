//! The row-per-sample table the historian kept before blocks (one row a sample, the tag's name
//! as text, indexed by tag and time and by time), kept so `cargo xtask bench` can set the
//! blocks beside it in the same run: written and read the way that historian did.

use std::path::Path;

use plant_model::TagValue;
use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, params};

use crate::history::unix_millis;
use crate::{PendingSample, SolutionError};

/// The table, in a file of its own.
#[derive(Debug)]
pub struct RowTable {
    connection: Connection,
}

impl RowTable {
    /// A new, empty table at `path` (a file there is replaced).
    pub fn create(path: &Path) -> Result<Self, SolutionError> {
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
        let connection = Connection::open(path)?;
        connection.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE TagHistory (Tag TEXT NOT NULL, Time INTEGER NOT NULL, Value, Quality INTEGER NOT NULL);
             CREATE INDEX TagHistoryByTagTime ON TagHistory (Tag, Time);
             CREATE INDEX TagHistoryByTime ON TagHistory (Time);",
        )?;
        Ok(Self { connection })
    }

    /// Opens the table at `path`.
    pub fn open(path: &Path) -> Result<Self, SolutionError> {
        Ok(Self {
            connection: Connection::open(path)?,
        })
    }

    /// Inserts one batch of samples, one row each, in one transaction.
    pub fn insert(&mut self, samples: &[PendingSample]) -> Result<(), SolutionError> {
        let transaction = self.connection.transaction()?;
        {
            let mut insert = transaction.prepare_cached(
                "INSERT INTO TagHistory (Tag, Time, Value, Quality) VALUES (?1, ?2, ?3, ?4)",
            )?;
            for sample in samples {
                let value = match &sample.value {
                    TagValue::Number(number) => SqlValue::Real(*number),
                    TagValue::Integer(integer) => SqlValue::Integer(*integer),
                    TagValue::Bool(flag) => SqlValue::Integer(i64::from(*flag)),
                    TagValue::Text(text) => SqlValue::Text(text.to_string()),
                };
                insert.execute(params![
                    &*sample.tag,
                    unix_millis(sample.time),
                    value,
                    sample.quality.0
                ])?;
            }
        }
        transaction.commit()?;
        Ok(())
    }

    /// `tag`'s samples over `window` (unix milliseconds) reduced to `buckets` buckets, as the
    /// historian read them: statistics over the window, then every row in time order, each
    /// bucket keeping its first, lowest, highest and last. Returns how many samples it keeps.
    pub fn trend(&self, tag: &str, (from, to): (i64, i64), buckets: i64) -> Result<usize, SolutionError> {
        let _statistics: (i64, Option<f64>, Option<f64>, Option<f64>) = self
            .connection
            .prepare_cached(
                "SELECT COUNT(*), MIN(Value), MAX(Value), AVG(Value) FROM TagHistory
                 WHERE Tag = ?1 AND Time BETWEEN ?2 AND ?3",
            )?
            .query_row(params![tag, from, to], |row| {
                Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
            })?;
        let mut statement = self.connection.prepare_cached(
            "SELECT Time, Value, Quality FROM TagHistory WHERE Tag = ?1 AND Time BETWEEN ?2 AND ?3 ORDER BY Time",
        )?;
        let mut rows = statement.query(params![tag, from, to])?;
        let span = (to - from + 1).max(1);
        let mut kept = 0;
        let mut bucket: Option<(i64, f64, f64)> = None;
        while let Some(row) = rows.next()? {
            let (time, value): (i64, f64) = (row.get(0)?, row.get(1)?);
            let index = (time - from) * buckets / span;
            match &mut bucket {
                Some((current, low, high)) if *current == index => {
                    *low = low.min(value);
                    *high = high.max(value);
                }
                _ => {
                    kept += usize::from(bucket.is_some()) * 4;
                    bucket = Some((index, value, value));
                }
            }
        }
        Ok(kept + usize::from(bucket.is_some()) * 4)
    }
}

/// The bytes the pages of the SQLite file at `path` take.
pub fn file_bytes(path: &Path) -> Result<i64, SolutionError> {
    let connection = Connection::open(path)?;
    let pages: i64 = connection.query_row("PRAGMA page_count", [], |row| row.get(0))?;
    let size: i64 = connection.query_row("PRAGMA page_size", [], |row| row.get(0))?;
    Ok(pages * size)
}
