//! Tag history in PostgreSQL, as in a solution file: each flush journalled in one row, the
//! journal folded into blocks by a checkpoint (one node at a time, under an advisory lock),
//! blocks in weekly partitions of `HistoryBlocks` that retention drops whole, and a page read
//! in one snapshot and assembled as the file's is.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use futures::TryStreamExt;
use plant_model::{Quality, TagType};
use sqlx::PgConnection;
use sqlx::postgres::PgRow;

use super::PgStore;
use crate::SolutionError;
use crate::history::block::{
    self, BlockSummary, Extreme, MAX_BLOCK_SPAN_MS, NewBlock, TailShape, kind_name, kind_of_name,
};
use crate::history::journal::{self, CHECKPOINT_AGE, CHECKPOINT_SAMPLES};
use crate::history::page::HistoryRead;
use crate::history::{
    HISTORY_BYTES, HistoryLimits, HistorySample, PRUNE_TO_SIZE, PendingSample, from_unix_millis,
    sql_value_of_json, to_tag_value, unix_millis,
};

/// The advisory lock a checkpoint holds, so two nodes never fold the journal at once ("thist"
/// in ASCII).
const CHECKPOINT_LOCK: i64 = 0x0074_6869_7374;

/// One partition of `HistoryBlocks` holds the blocks whose first sample falls in a week.
const PARTITION_MS: i64 = 7 * 24 * 60 * 60 * 1000;

/// What a node's history writer knows between flushes.
#[derive(Debug, Default)]
pub(crate) struct PgHistoryWriter {
    /// History ids of the tags written so far.
    tags: Mutex<HashMap<Arc<str>, i64>>,
    /// Samples in the journal and when its oldest row was flushed; `None` until read.
    journal: Mutex<Option<(usize, Option<i64>)>>,
}

/// The columns of a block summary, in the order `summary_of_row` reads them.
const SUMMARY_COLUMNS: &str = "Id, Kind, First, Last, Count, FirstValue, LastValue, MinAt, MinTime, MinValue, \
     MaxAt, MaxTime, MaxValue, Sum, Exact";

/// A page of a tag's (`$1`) history in one statement, its rows told apart by the last column.
/// Part 0, one row: the tag's id, the whole journal and, when `$7`, the summary of the tag's
/// last block to start before the window (`$4`), with its data unless the summary alone gives
/// its last value. Part 1: the summary of each block that meets the window (first time between
/// `$2` and `$3`, last at or after `$4`), from the covering index alone. Part 2: the data of the
/// first `$6` of them to end at or after `$5` ([`HistoryRead::data_ahead`]). No row: no such
/// tag.
const PAGE: &str = "
(SELECT Tag.Id, ARRAY(SELECT Data FROM HistoryJournal ORDER BY Id), Opening.*, 0
 FROM HistoryTags AS Tag LEFT JOIN LATERAL (
     SELECT Id, Kind, First, Last, Count, FirstValue, LastValue, MinAt, MinTime, MinValue,
            MaxAt, MaxTime, MaxValue, Sum, Exact,
            CASE WHEN Exact = 0 OR Last >= $4 THEN Data END
     FROM HistoryBlocks
     WHERE $7 AND Tag = Tag.Id AND First < $4
     ORDER BY First DESC, Id DESC LIMIT 1
 ) AS Opening ON true
 WHERE Tag.Name = $1)
UNION ALL
SELECT Tag, NULL, Id, Kind, First, Last, Count, FirstValue, LastValue, MinAt, MinTime, MinValue,
       MaxAt, MaxTime, MaxValue, Sum, Exact, NULL, 1
FROM HistoryBlocks
WHERE Tag = (SELECT Id FROM HistoryTags WHERE Name = $1)
  AND First BETWEEN $2 AND $3 AND Last >= $4
UNION ALL
(SELECT Tag, NULL, Id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
        NULL, NULL, Data, 2
 FROM HistoryBlocks
 WHERE Tag = (SELECT Id FROM HistoryTags WHERE Name = $1)
   AND First BETWEEN $2 AND $3 AND Last >= GREATEST($4, $5)
 ORDER BY First LIMIT $6)";

/// The partition a block starting at `first` goes in: its name and range.
fn partition_of(first: i64) -> (String, i64, i64) {
    let week = first.div_euclid(PARTITION_MS);
    let name = if week < 0 {
        format!("historyblocks_wm{}", week.unsigned_abs())
    } else {
        format!("historyblocks_w{week}")
    };
    (name, week * PARTITION_MS, (week + 1) * PARTITION_MS)
}

/// The week a partition's name says it holds.
fn week_of_partition(name: &str) -> Option<i64> {
    let week = name.strip_prefix("historyblocks_w")?;
    match week.strip_prefix('m') {
        Some(negative) => negative.parse::<i64>().ok().map(|week| -week),
        None => week.parse().ok(),
    }
}

/// A stored block's summary and data.
type StoredBlock = (BlockSummary, Vec<u8>);

impl PgStore {
    fn summary_of_row(&self, row: &PgRow) -> Result<BlockSummary, SolutionError> {
        self.summary_of_row_at(row, 0)
    }

    /// A block summary whose columns start at `base` in `row`.
    fn summary_of_row_at(&self, row: &PgRow, base: usize) -> Result<BlockSummary, SolutionError> {
        let extreme = |at: usize| -> Result<Option<Extreme>, SolutionError> {
            let at = base + at;
            Ok(
                match (
                    self.get::<Option<i32>>(row, at)?,
                    self.get::<Option<i64>>(row, at + 1)?,
                    self.get::<Option<f64>>(row, at + 2)?,
                ) {
                    (Some(index), Some(time), Some(value)) => Some(Extreme {
                        at: usize::try_from(index).unwrap_or(0),
                        time,
                        value,
                    }),
                    _ => None,
                },
            )
        };
        Ok(BlockSummary {
            id: self.get(row, base)?,
            kind: kind_of_name(self.get::<&str>(row, base + 1)?),
            first: self.get(row, base + 2)?,
            last: self.get(row, base + 3)?,
            count: usize::try_from(self.get::<i32>(row, base + 4)?).unwrap_or(0),
            first_value: self.get(row, base + 5)?,
            last_value: self.get(row, base + 6)?,
            min: extreme(7)?,
            max: extreme(10)?,
            sum: self.get(row, base + 13)?,
            exact: self.get::<i32>(row, base + 14)? != 0,
        })
    }

    /// The history ids of `names`, given on their first samples.
    async fn tag_ids(
        &self,
        connection: &mut PgConnection,
        names: &[Arc<str>],
    ) -> Result<HashMap<Arc<str>, i64>, SolutionError> {
        let mut ids = HashMap::new();
        let missing: Vec<&str> = {
            let known = self.history.tags.lock().unwrap_or_else(PoisonError::into_inner);
            let mut missing = HashSet::new();
            for name in names {
                match known.get(name) {
                    Some(id) => {
                        ids.insert(Arc::clone(name), *id);
                    }
                    None => {
                        missing.insert(&**name);
                    }
                }
            }
            missing.into_iter().collect()
        };
        if missing.is_empty() {
            return Ok(ids);
        }
        sqlx::query(
            "INSERT INTO HistoryTags (Name) SELECT * FROM UNNEST($1::text[]) ON CONFLICT (Name) DO NOTHING",
        )
        .bind(&missing)
        .execute(&mut *connection)
        .await
        .map_err(|error| self.error(error))?;
        let rows = sqlx::query("SELECT Name, Id FROM HistoryTags WHERE Name = ANY($1)")
            .bind(&missing)
            .fetch_all(&mut *connection)
            .await
            .map_err(|error| self.error(error))?;
        for row in rows {
            let name: String = self.get(&row, 0)?;
            let name: Arc<str> = names
                .iter()
                .find(|known| ***known == *name)
                .map_or_else(|| Arc::from(name.as_str()), Arc::clone);
            ids.insert(name, self.get(&row, 1)?);
        }
        Ok(ids)
    }

    /// Journals `samples` in the caller's transaction; returns the ids it gave new tags, to
    /// be remembered once the transaction commits.
    pub(crate) async fn journal_samples(
        &self,
        connection: &mut PgConnection,
        samples: &[PendingSample],
        now: i64,
    ) -> Result<HashMap<Arc<str>, i64>, SolutionError> {
        if samples.is_empty() {
            return Ok(HashMap::new());
        }
        let names: Vec<Arc<str>> = samples.iter().map(|sample| Arc::clone(&sample.tag)).collect();
        let ids = self.tag_ids(connection, &names).await?;
        let stored: Vec<(i64, HistorySample)> = samples
            .iter()
            .map(|sample| {
                (
                    ids.get(&sample.tag).copied().unwrap_or_default(),
                    HistorySample {
                        time: sample.time,
                        value: sample.value.clone(),
                        quality: sample.quality,
                    },
                )
            })
            .collect();
        sqlx::query("INSERT INTO HistoryJournal (Time, Samples, Data) VALUES ($1, $2, $3)")
            .bind(now)
            .bind(i32::try_from(samples.len()).unwrap_or(i32::MAX))
            .bind(journal::encode(stored.iter().map(|(id, sample)| (*id, sample))))
            .execute(&mut *connection)
            .await
            .map_err(|error| self.error(error))?;
        Ok(ids)
    }

    /// After a flush that committed `samples` new ones: remembers the tags' ids and folds the
    /// journal into blocks when it is due.
    pub(crate) async fn after_journal(
        &self,
        ids: HashMap<Arc<str>, i64>,
        samples: usize,
        now: i64,
        limits: &HistoryLimits,
    ) -> Result<(), SolutionError> {
        self.history
            .tags
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend(ids);
        let known = *self
            .history
            .journal
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (held, oldest) = match known {
            Some(known) => known,
            None => {
                let row =
                    sqlx::query("SELECT COALESCE(SUM(Samples), 0)::bigint, MIN(Time) FROM HistoryJournal")
                        .fetch_one(&self.pool)
                        .await
                        .map_err(|error| self.error(error))?;
                let held = usize::try_from(self.get::<i64>(&row, 0)?).unwrap_or(0);
                // Counted already when read after this flush committed.
                (held.saturating_sub(samples), self.get::<Option<i64>>(&row, 1)?)
            }
        };
        let held = held + samples;
        let oldest = oldest.or((samples > 0).then_some(now));
        let due = held >= CHECKPOINT_SAMPLES
            || oldest.is_some_and(|oldest| {
                now.saturating_sub(oldest) >= i64::try_from(CHECKPOINT_AGE.as_millis()).unwrap_or(i64::MAX)
            });
        *self
            .history
            .journal
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some((held, oldest));
        if due {
            self.checkpoint_history(limits).await?;
        }
        Ok(())
    }

    /// Folds the journal into blocks and empties it, then drops the partitions retention has
    /// emptied, in one transaction; samples from before `keep_after` are not kept. Returns how
    /// many samples it folded.
    pub(crate) async fn checkpoint_history(&self, limits: &HistoryLimits) -> Result<usize, SolutionError> {
        let mut transaction = self.locked(CHECKPOINT_LOCK).await?;
        let rows = sqlx::query("SELECT Id, Data FROM HistoryJournal ORDER BY Id")
            .fetch_all(&mut *transaction)
            .await
            .map_err(|error| self.error(error))?;
        let mut by_tag: BTreeMap<i64, Vec<HistorySample>> = BTreeMap::new();
        let mut last_row = None;
        for row in &rows {
            let id: i64 = self.get(row, 0)?;
            last_row = Some(id);
            match journal::decode(&self.get::<Vec<u8>>(row, 1)?) {
                Ok(samples) => {
                    for (tag, sample) in samples {
                        by_tag.entry(tag).or_default().push(sample);
                    }
                }
                Err(error) => {
                    tracing::error!(row = id, %error, "a history journal row cannot be read; its samples are lost");
                }
            }
        }
        let cutoff = limits.earliest_kept();
        for samples in by_tag.values_mut() {
            samples.retain(|sample| unix_millis(sample.time) >= cutoff);
        }
        by_tag.retain(|_, samples| !samples.is_empty());
        let folded = by_tag.values().map(Vec::len).sum();
        if let Some(last_row) = last_row {
            self.store_samples(&mut transaction, by_tag).await?;
            sqlx::query("DELETE FROM HistoryJournal WHERE Id <= $1")
                .bind(last_row)
                .execute(&mut *transaction)
                .await
                .map_err(|error| self.error(error))?;
        }
        sqlx::query(
            "DELETE FROM HistoryBlocks USING
                 (SELECT HistoryTags.Id, Own.KeepAfter
                  FROM UNNEST($1::text[], $2::bigint[]) AS Own (Name, KeepAfter)
                  JOIN HistoryTags ON HistoryTags.Name = Own.Name) AS Kept
             WHERE HistoryBlocks.Tag = Kept.Id AND HistoryBlocks.Last < Kept.KeepAfter",
        )
        .bind(limits.own_names())
        .bind(
            limits
                .own
                .iter()
                .map(|(_, keep_after)| unix_millis(*keep_after))
                .collect::<Vec<_>>(),
        )
        .execute(&mut *transaction)
        .await
        .map_err(|error| self.error(error))?;
        self.drop_old_partitions(&mut transaction, cutoff).await?;
        if let Some(max_bytes) = limits.max_bytes {
            let held: i64 = sqlx::query_scalar(HISTORY_BYTES)
                .fetch_one(&mut *transaction)
                .await
                .map_err(|error| self.error(error))?;
            let excess = held.saturating_sub(i64::try_from(max_bytes).unwrap_or(i64::MAX));
            if excess > 0 {
                let deleted = sqlx::query(PRUNE_TO_SIZE)
                    .bind(excess)
                    .execute(&mut *transaction)
                    .await
                    .map_err(|error| self.error(error))?
                    .rows_affected();
                tracing::info!(
                    deleted,
                    held,
                    max_bytes,
                    "history past HistoryMaxBytes: its oldest blocks were deleted"
                );
            }
        }
        transaction.commit().await.map_err(|error| self.error(error))?;
        *self
            .history
            .journal
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some((0, None));
        Ok(folded)
    }

    /// Puts each tag's new samples into blocks: one more unsealed block of its tail, or, when
    /// that is due (`TailShape::compacts`), its tail and them rewritten as sealed blocks and a
    /// new tail.
    async fn store_samples(
        &self,
        connection: &mut PgConnection,
        by_tag: BTreeMap<i64, Vec<HistorySample>>,
    ) -> Result<(), SolutionError> {
        let tags: Vec<i64> = by_tag.keys().copied().collect();
        let rows = sqlx::query(
            "SELECT Tag, COUNT(*), SUM(Count)::bigint, MIN(First) FROM HistoryBlocks
             WHERE Tag = ANY($1) AND Sealed = 0 GROUP BY Tag",
        )
        .bind(&tags)
        .fetch_all(&mut *connection)
        .await
        .map_err(|error| self.error(error))?;
        let mut tails: HashMap<i64, TailShape> = HashMap::new();
        for row in &rows {
            tails.insert(
                self.get(row, 0)?,
                TailShape {
                    blocks: usize::try_from(self.get::<i64>(row, 1)?).unwrap_or(0),
                    samples: usize::try_from(self.get::<i64>(row, 2)?).unwrap_or(0),
                    first: self.get(row, 3)?,
                },
            );
        }
        let new: Vec<(i64, Vec<Vec<HistorySample>>)> = by_tag
            .into_iter()
            .map(|(tag, samples)| (tag, block::runs(samples)))
            .collect();
        let compacting: Vec<i64> = new
            .iter()
            .filter(|(tag, runs)| tails.get(tag).copied().unwrap_or_default().compacts(runs))
            .map(|(tag, _)| *tag)
            .collect();
        let mut tail_samples: HashMap<i64, Vec<HistorySample>> = HashMap::new();
        if !compacting.is_empty() {
            let rows = sqlx::query(
                "DELETE FROM HistoryBlocks WHERE Tag = ANY($1) AND Sealed = 0 RETURNING Tag, First, Id, Data",
            )
            .bind(&compacting)
            .fetch_all(&mut *connection)
            .await
            .map_err(|error| self.error(error))?;
            let mut deleted: Vec<(i64, i64, i64, Vec<u8>)> = Vec::with_capacity(rows.len());
            for row in &rows {
                deleted.push((
                    self.get(row, 0)?,
                    self.get(row, 1)?,
                    self.get(row, 2)?,
                    self.get(row, 3)?,
                ));
            }
            deleted.sort_by_key(|(tag, first, id, _)| (*tag, *first, *id));
            for (tag, _, id, data) in deleted {
                match block::decode(&data) {
                    Ok(samples) => tail_samples.entry(tag).or_default().extend(samples),
                    Err(error) => {
                        tracing::error!(block = id, %error, "a history block cannot be read; its samples are lost");
                    }
                }
            }
        }
        let mut blocks: Vec<(i64, NewBlock)> = Vec::new();
        for (tag, runs) in new {
            let mut samples = tail_samples.remove(&tag).unwrap_or_default();
            samples.extend(runs.into_iter().flatten());
            blocks.extend(block::blocks_of(samples).into_iter().map(|block| (tag, block)));
        }
        self.write_blocks(connection, &blocks).await
    }

    /// Inserts blocks, creating the partitions they go in.
    async fn write_blocks(
        &self,
        connection: &mut PgConnection,
        blocks: &[(i64, NewBlock)],
    ) -> Result<(), SolutionError> {
        if blocks.is_empty() {
            return Ok(());
        }
        self.create_partitions(connection, blocks.iter().map(|(_, block)| block.summary.first))
            .await?;
        let extreme = |extreme: Option<Extreme>, pick: usize| {
            extreme.map(|extreme| match pick {
                0 => f64::from(i32::try_from(extreme.at).unwrap_or(i32::MAX)),
                1 => extreme.time as f64,
                _ => extreme.value,
            })
        };
        let column = |pick: &dyn Fn(&BlockSummary) -> Option<f64>| {
            blocks
                .iter()
                .map(|(_, block)| pick(&block.summary))
                .collect::<Vec<_>>()
        };
        sqlx::query(
            "INSERT INTO HistoryBlocks (Tag, Kind, First, Last, Count, FirstValue, LastValue, MinAt, MinTime,
                 MinValue, MaxAt, MaxTime, MaxValue, Sum, Exact, Sealed, Data)
             SELECT Tag, Kind, First, Last, Count, FirstValue, LastValue, MinAt::integer, MinTime::bigint, MinValue,
                 MaxAt::integer, MaxTime::bigint, MaxValue, Sum, Exact, Sealed, Data
             FROM UNNEST($1::bigint[], $2::text[], $3::bigint[], $4::bigint[], $5::integer[], $6::float8[],
                         $7::float8[], $8::float8[], $9::float8[], $10::float8[], $11::float8[], $12::float8[],
                         $13::float8[], $14::float8[], $15::integer[], $16::integer[], $17::bytea[])
                  AS Blocks (Tag, Kind, First, Last, Count, FirstValue, LastValue, MinAt, MinTime, MinValue, MaxAt,
                             MaxTime, MaxValue, Sum, Exact, Sealed, Data)",
        )
        .bind(blocks.iter().map(|(tag, _)| *tag).collect::<Vec<_>>())
        .bind(blocks.iter().map(|(_, block)| kind_name(block.summary.kind)).collect::<Vec<_>>())
        .bind(blocks.iter().map(|(_, block)| block.summary.first).collect::<Vec<_>>())
        .bind(blocks.iter().map(|(_, block)| block.summary.last).collect::<Vec<_>>())
        .bind(
            blocks
                .iter()
                .map(|(_, block)| i32::try_from(block.summary.count).unwrap_or(i32::MAX))
                .collect::<Vec<_>>(),
        )
        .bind(column(&|summary| summary.first_value))
        .bind(column(&|summary| summary.last_value))
        .bind(column(&|summary| extreme(summary.min, 0)))
        .bind(column(&|summary| extreme(summary.min, 1)))
        .bind(column(&|summary| extreme(summary.min, 2)))
        .bind(column(&|summary| extreme(summary.max, 0)))
        .bind(column(&|summary| extreme(summary.max, 1)))
        .bind(column(&|summary| extreme(summary.max, 2)))
        .bind(column(&|summary| summary.sum))
        .bind(blocks.iter().map(|(_, block)| i32::from(block.summary.exact)).collect::<Vec<_>>())
        .bind(blocks.iter().map(|(_, block)| i32::from(block.sealed)).collect::<Vec<_>>())
        .bind(blocks.iter().map(|(_, block)| block.data.as_slice()).collect::<Vec<_>>())
        .execute(&mut *connection)
        .await
        .map_err(|error| self.error(error))?;
        Ok(())
    }

    /// Drops the partitions whose every block ended before `cutoff` (retention prunes the rest
    /// block by block).
    async fn drop_old_partitions(
        &self,
        connection: &mut PgConnection,
        cutoff: i64,
    ) -> Result<(), SolutionError> {
        let names: Vec<String> = sqlx::query_scalar(
            "SELECT Child.relname::text FROM pg_inherits
             JOIN pg_class AS Child ON Child.oid = pg_inherits.inhrelid
             WHERE pg_inherits.inhparent = 'historyblocks'::regclass",
        )
        .fetch_all(&mut *connection)
        .await
        .map_err(|error| self.error(error))?;
        for name in names {
            // A block spans at most a day: one that starts before the partition's end ends
            // before the cutoff when the partition ends a day before it.
            let old = week_of_partition(&name)
                .is_some_and(|week| (week + 1) * PARTITION_MS + MAX_BLOCK_SPAN_MS < cutoff);
            if old {
                sqlx::query(&format!("DROP TABLE {name}"))
                    .execute(&mut *connection)
                    .await
                    .map_err(|error| self.error(error))?;
            }
        }
        Ok(())
    }

    /// What a query of `tag`'s history needs read, as `SolutionDb::read_tag_history` reads
    /// it. [`PAGE`] reads the journal, the block the window opens in and the window's blocks
    /// in one statement, which is a snapshot of its own; a block's data never changes under its
    /// id, and the first value after the window is the same read twice (journalled, then folded
    /// into a block meanwhile). So the block after the window (intervals) and the data of the
    /// needed blocks the page did not carry are read after it, without a transaction: one round
    /// trip for a page that fits, two for a long trend. Only when a needed block went meanwhile
    /// (a checkpoint rewrote a tail) is the query read again in one snapshot.
    pub(crate) async fn read_tag_history(
        &self,
        tag: &str,
        read: HistoryRead,
    ) -> Result<(HistoryRead, HashMap<i64, Vec<u8>>), SolutionError> {
        let again = read.again();
        let mut connection = self.pool.acquire().await.map_err(|error| self.error(error))?;
        let (read, data, whole) = self.page_and_data(&mut connection, tag, read).await?;
        if whole {
            return Ok((read, data));
        }
        drop(connection);
        let mut snapshot = self.snapshot().await?;
        let (read, data, _) = self.page_and_data(&mut snapshot, tag, again).await?;
        snapshot.commit().await.map_err(|error| self.error(error))?;
        Ok((read, data))
    }

    /// `read` filled by [`PAGE`] (and the block after the window when it wants it), the data
    /// of the needed blocks by id, and whether every needed block was found (one gone
    /// meanwhile is missing from the map).
    async fn page_and_data(
        &self,
        connection: &mut PgConnection,
        tag: &str,
        mut read: HistoryRead,
    ) -> Result<(HistoryRead, HashMap<i64, Vec<u8>>, bool), SolutionError> {
        let (from, to) = read.window;
        let earliest = from.saturating_sub(MAX_BLOCK_SPAN_MS);
        let (ahead_from, ahead_blocks) = read.data_ahead();
        let rows = sqlx::query(PAGE)
            .bind(tag)
            .bind(earliest)
            .bind(to)
            .bind(from)
            .bind(ahead_from)
            .bind(ahead_blocks)
            .bind(read.wants_opening())
            .fetch_all(&mut *connection)
            .await
            .map_err(|error| self.error(error))?;
        let mut data = HashMap::new();
        let Some(id) = rows.first().map(|row| self.get::<i64>(row, 0)).transpose()? else {
            return Ok((read, data, true));
        };
        for row in &rows {
            match self.get::<i32>(row, 18)? {
                0 => {
                    for bytes in self.get::<Option<Vec<Vec<u8>>>>(row, 1)?.unwrap_or_default() {
                        // A row that cannot be read is reported by the checkpoint that meets it.
                        if let Ok(samples) = journal::decode(&bytes) {
                            read.journal.extend(
                                samples
                                    .into_iter()
                                    .filter(|(tag, _)| *tag == id)
                                    .map(|(_, sample)| sample),
                            );
                        }
                    }
                    if self.get::<Option<i64>>(row, 2)?.is_some() {
                        let before = self.summary_of_row_at(row, 2)?;
                        if let Some(bytes) = self.get::<Option<Vec<u8>>>(row, 17)? {
                            data.insert(before.id, bytes);
                        }
                        read.before = Some(before);
                    }
                }
                1 => read.blocks.push(self.summary_of_row_at(row, 2)?),
                _ => {
                    data.insert(self.get::<i64>(row, 2)?, self.get::<Vec<u8>>(row, 17)?);
                }
            }
        }
        read.blocks.sort_unstable_by_key(|block| (block.first, block.id));
        if read.wants_closing() {
            let row = sqlx::query(&format!(
                "SELECT {SUMMARY_COLUMNS} FROM HistoryBlocks
                 WHERE Tag = $1 AND First > $2 ORDER BY First, Id LIMIT 1"
            ))
            .bind(id)
            .bind(to)
            .fetch_optional(&mut *connection)
            .await
            .map_err(|error| self.error(error))?;
            read.after = row.map(|row| self.summary_of_row(&row)).transpose()?;
        }
        let missing: Vec<i64> = read
            .needed()
            .into_iter()
            .filter(|id| !data.contains_key(id))
            .collect();
        if !missing.is_empty() {
            // The blocks around the window may start outside the range every other is in.
            let earliest = read
                .before
                .as_ref()
                .map_or(earliest, |before| before.first.min(earliest));
            let latest = read.after.as_ref().map_or(to, |after| after.first.max(to));
            let rows = sqlx::query(
                "SELECT Id, Data FROM HistoryBlocks WHERE Id = ANY($1) AND First BETWEEN $2 AND $3",
            )
            .bind(&missing)
            .bind(earliest)
            .bind(latest)
            .fetch_all(&mut *connection)
            .await
            .map_err(|error| self.error(error))?;
            for row in rows {
                data.insert(self.get::<i64>(&row, 0)?, self.get::<Vec<u8>>(&row, 1)?);
            }
        }
        let whole = missing.iter().all(|id| data.contains_key(id));
        Ok((read, data, whole))
    }

    /// The trend of `tag` over `window` (unix milliseconds), for the store's own tests.
    #[cfg(test)]
    pub(crate) async fn tag_history(
        &self,
        tag: &str,
        kind: TagType,
        window: (i64, i64),
        max: usize,
    ) -> Result<crate::HistoryPage, SolutionError> {
        let read = HistoryRead::new(kind, window, crate::history::page::HistoryShape::Trend { max });
        let (read, data) = self.read_tag_history(tag, read).await?;
        Ok(read.finish(&data)?)
    }

    /// Each tag's last sample at or before `instant` (unix milliseconds), read in one snapshot.
    pub(crate) async fn values_at(
        &self,
        tags: &[(&str, TagType)],
        instant: i64,
    ) -> Result<Vec<Option<HistorySample>>, SolutionError> {
        let mut snapshot = self.snapshot().await?;
        let names: Vec<&str> = tags.iter().map(|(name, _)| *name).collect();
        let rows = sqlx::query(&format!(
            "SELECT HistoryTags.Name, HistoryTags.Id, Last.* FROM HistoryTags
             LEFT JOIN LATERAL (SELECT {SUMMARY_COLUMNS}, Data FROM HistoryBlocks
                                WHERE Tag = HistoryTags.Id AND First <= $2 ORDER BY First DESC, Id DESC LIMIT 1) AS Last
                 ON true
             WHERE HistoryTags.Name = ANY($1)"
        ))
        .bind(&names)
        .bind(instant)
        .fetch_all(&mut *snapshot)
        .await
        .map_err(|error| self.error(error))?;
        let mut journal = Vec::new();
        let mut journal_rows =
            sqlx::query("SELECT Data FROM HistoryJournal ORDER BY Id").fetch(&mut *snapshot);
        while let Some(row) = journal_rows.try_next().await.map_err(|error| self.error(error))? {
            // A row that cannot be read is reported by the checkpoint that meets it.
            if let Ok(samples) = journal::decode(&self.get::<Vec<u8>>(&row, 0)?) {
                journal.extend(samples);
            }
        }
        drop(journal_rows);
        snapshot.commit().await.map_err(|error| self.error(error))?;
        let journalled = crate::history::page::journalled_at(journal, instant);
        let mut found: HashMap<String, (i64, Option<StoredBlock>)> = HashMap::new();
        for row in &rows {
            // The block's columns follow the name and id; a tag with no block has them null.
            let block = match self.get::<Option<i64>>(row, 2)? {
                Some(_) => Some((self.summary_of_row_at(row, 2)?, self.get::<Vec<u8>>(row, 17)?)),
                None => None,
            };
            found.insert(self.get(row, 0)?, (self.get(row, 1)?, block));
        }
        tags.iter()
            .map(|(name, kind)| {
                let Some((id, block)) = found.get(*name) else {
                    return Ok(None);
                };
                Ok(crate::history::page::value_at(
                    *kind,
                    instant,
                    block
                        .as_ref()
                        .map(|(summary, data)| (summary, Some(data.as_slice()))),
                    journalled.get(id),
                )?)
            })
            .collect()
    }

    /// Deletes the history of `tag`, folding the journal first so none of it comes back;
    /// returns how many samples it held.
    pub(crate) async fn purge_history_blocks(&self, tag: &str) -> Result<usize, SolutionError> {
        self.checkpoint_history(&HistoryLimits::NONE).await?;
        let held: Option<i64> = sqlx::query_scalar(
            "WITH Deleted AS (DELETE FROM HistoryBlocks WHERE Tag = (SELECT Id FROM HistoryTags WHERE Name = $1)
                              RETURNING Count)
             SELECT SUM(Count)::bigint FROM Deleted",
        )
        .bind(tag)
        .fetch_one(&self.pool)
        .await
        .map_err(|error| self.error(error))?;
        Ok(usize::try_from(held.unwrap_or(0)).unwrap_or(0))
    }

    /// Folds the rows of a database from before blocks (`TagHistory`) into blocks, by tag in
    /// time order, then drops that table: run by the upgrade, in its transaction.
    pub(crate) async fn fold_legacy_rows(&self, connection: &mut PgConnection) -> Result<(), SolutionError> {
        let legacy: bool = sqlx::query_scalar("SELECT to_regclass('taghistory') IS NOT NULL")
            .fetch_one(&mut *connection)
            .await
            .map_err(|error| self.error(error))?;
        if !legacy {
            return Ok(());
        }
        sqlx::query(
            "INSERT INTO HistoryTags (Name) SELECT DISTINCT Tag FROM TagHistory ORDER BY Tag ON CONFLICT (Name) DO NOTHING",
        )
        .execute(&mut *connection)
        .await
        .map_err(|error| self.error(error))?;
        let rows = sqlx::query(
            "SELECT HistoryTags.Id, TagHistory.Time, TagHistory.Value::text, TagHistory.Quality, Tags.Type
             FROM TagHistory JOIN HistoryTags ON HistoryTags.Name = TagHistory.Tag
             LEFT JOIN Tags ON Tags.Name = TagHistory.Tag
             ORDER BY HistoryTags.Id, TagHistory.Time",
        )
        .fetch_all(&mut *connection)
        .await
        .map_err(|error| self.error(error))?;
        let mut by_tag: BTreeMap<i64, Vec<HistorySample>> = BTreeMap::new();
        for row in &rows {
            let value = self
                .get::<Option<String>>(row, 2)?
                .map_or(rusqlite::types::Value::Null, |json| sql_value_of_json(&json));
            let kind = match self.get::<Option<String>>(row, 4)? {
                Some(kind) => kind_of_name(&kind),
                None => match value {
                    rusqlite::types::Value::Integer(_) => TagType::Integer,
                    rusqlite::types::Value::Text(_) => TagType::String,
                    _ => TagType::Number,
                },
            };
            by_tag.entry(self.get(row, 0)?).or_default().push(HistorySample {
                time: from_unix_millis(self.get(row, 1)?),
                value: to_tag_value(kind, value),
                quality: Quality(u8::try_from(self.get::<i32>(row, 3)?).unwrap_or(0)),
            });
        }
        self.store_samples(connection, by_tag).await?;
        sqlx::query("DROP TABLE TagHistory")
            .execute(&mut *connection)
            .await
            .map_err(|error| self.error(error))?;
        Ok(())
    }

    /// Creates the partitions that blocks starting at `firsts` go in (a copy into a new
    /// database writes blocks as rows).
    pub(crate) async fn create_partitions(
        &self,
        connection: &mut PgConnection,
        firsts: impl IntoIterator<Item = i64>,
    ) -> Result<(), SolutionError> {
        let mut partitions: Vec<(String, i64, i64)> = firsts.into_iter().map(partition_of).collect();
        partitions.sort();
        partitions.dedup();
        for (name, from, to) in partitions {
            sqlx::query(&format!(
                "CREATE TABLE IF NOT EXISTS {name} PARTITION OF HistoryBlocks FOR VALUES FROM ({from}) TO ({to})"
            ))
            .execute(&mut *connection)
            .await
            .map_err(|error| self.error(error))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_is_named_by_its_week_and_the_name_gives_the_week_back() {
        for first in [
            0,
            1,
            PARTITION_MS - 1,
            PARTITION_MS,
            1_800_000_000_000,
            -1,
            -PARTITION_MS - 5,
        ] {
            let (name, from, to) = partition_of(first);
            assert!((from..to).contains(&first), "{first} in {name}");
            assert_eq!(week_of_partition(&name), Some(from / PARTITION_MS), "{name}");
        }
        assert_eq!(week_of_partition("historyblocks_wx"), None);
    }
}
