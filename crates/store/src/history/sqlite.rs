//! Tag history in a solution file: the SQLite statements that journal a flush, fold the
//! journal into blocks, prune whole blocks and read a page, and the upgrade that folds the
//! rows of a file from before blocks into them.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::SystemTime;

use plant_model::{AlarmEvent, Quality, TagType};
use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};

use super::block::{self, BlockSummary, Extreme, NewBlock, TailShape, kind_name, kind_of_name};
use super::journal::{self, CHECKPOINT_AGE, CHECKPOINT_SAMPLES};
use super::page::{self, HistoryRead};
use super::{
    HISTORY_BYTES, HistoryLimits, HistorySample, PRUNE_TO_SIZE, PendingSample, REMOVE_HANDLING, SET_HANDLING,
    from_unix_millis, handling_change, to_tag_value, unix_millis,
};
use crate::SolutionError;

/// The history writer of a solution file: its connection, kept open between flushes, the ids
/// of the tags it has written, and what the journal holds.
#[derive(Debug)]
pub(crate) struct HistoryWriter {
    connection: Connection,
    tags: HashMap<Arc<str>, i64>,
    /// Samples in the journal and when its oldest row was flushed (ms since the epoch);
    /// `None` until read from the file.
    journal: Option<(usize, Option<i64>)>,
}

/// The columns of a block summary, in the order [`summary_of_row`] reads them.
macro_rules! summary_columns {
    () => {
        "Id, Kind, First, Last, Count, FirstValue, LastValue, MinAt, MinTime, MinValue, \
         MaxAt, MaxTime, MaxValue, Sum, Exact"
    };
}
const SUMMARY_COLUMNS: &str = summary_columns!();

/// The summary of a tag's (`?1`) last block to start at or before an instant (`?2`): the
/// one its value then is in.
const LAST_BLOCK_BY: &str = concat!(
    "SELECT ",
    summary_columns!(),
    " FROM HistoryBlocks WHERE Tag = ?1 AND First <= ?2 ORDER BY First DESC, Id DESC LIMIT 1"
);

/// The summary of a tag's (`?1`) first block to start after an instant (`?2`).
const FIRST_BLOCK_AFTER: &str = concat!(
    "SELECT ",
    summary_columns!(),
    " FROM HistoryBlocks WHERE Tag = ?1 AND First > ?2 ORDER BY First, Id LIMIT 1"
);

fn summary_of_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<BlockSummary> {
    let extreme = |at: usize| -> rusqlite::Result<Option<Extreme>> {
        Ok(
            match (
                row.get::<_, Option<i64>>(at)?,
                row.get::<_, Option<i64>>(at + 1)?,
                row.get(at + 2)?,
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
        id: row.get(0)?,
        kind: kind_of_name(&row.get::<_, String>(1)?),
        first: row.get(2)?,
        last: row.get(3)?,
        count: usize::try_from(row.get::<_, i64>(4)?).unwrap_or(0),
        first_value: row.get(5)?,
        last_value: row.get(6)?,
        min: extreme(7)?,
        max: extreme(10)?,
        sum: row.get(13)?,
        exact: row.get(14)?,
    })
}

impl HistoryWriter {
    pub(crate) fn new(connection: Connection) -> Self {
        Self {
            connection,
            tags: HashMap::new(),
            journal: None,
        }
    }

    /// Journals `samples`, appends `events` and prunes blocks and events older than
    /// `keep_after`, in one transaction; then folds the journal into blocks when it is due.
    pub(crate) fn write(
        &mut self,
        samples: &[PendingSample],
        events: &[AlarmEvent],
        limits: &HistoryLimits,
    ) -> rusqlite::Result<()> {
        let now = unix_millis(SystemTime::now());
        let journal = match self.journal {
            Some(journal) => journal,
            None => self.connection.query_row(
                "SELECT COALESCE(SUM(Samples), 0), MIN(Time) FROM HistoryJournal",
                [],
                |row| Ok((usize::try_from(row.get::<_, i64>(0)?).unwrap_or(0), row.get(1)?)),
            )?,
        };
        let transaction = self.connection.transaction()?;
        let mut new_tags: Vec<(Arc<str>, i64)> = Vec::new();
        if !samples.is_empty() {
            let mut ids = Vec::with_capacity(samples.len());
            for sample in samples {
                let id = match self.tags.get(&sample.tag) {
                    Some(id) => *id,
                    None => {
                        let id = tag_id(&transaction, &sample.tag)?;
                        new_tags.push((Arc::clone(&sample.tag), id));
                        id
                    }
                };
                ids.push(id);
            }
            let stored: Vec<HistorySample> = samples
                .iter()
                .map(|sample| HistorySample {
                    time: sample.time,
                    value: sample.value.clone(),
                    quality: sample.quality,
                })
                .collect();
            transaction
                .prepare_cached("INSERT INTO HistoryJournal (Time, Samples, Data) VALUES (?1, ?2, ?3)")?
                .execute(params![
                    now,
                    i64::try_from(samples.len()).unwrap_or(i64::MAX),
                    journal::encode(ids.into_iter().zip(&stored))
                ])?;
        }
        insert_events(&transaction, events)?;
        let cutoff = unix_millis(limits.keep_after);
        // Tags with a retention of their own are pruned at checkpoints.
        let own = serde_json::to_string(&limits.own_names()).unwrap_or_else(|_| "[]".to_owned());
        transaction
            .prepare_cached(
                "DELETE FROM HistoryBlocks WHERE Last < ?1 AND Tag NOT IN
                 (SELECT HistoryTags.Id FROM HistoryTags JOIN json_each(?2) ON HistoryTags.Name = json_each.value)",
            )?
            .execute(params![cutoff, own])?;
        transaction
            .prepare_cached("DELETE FROM AlarmHistory WHERE Time < ?1")?
            .execute([cutoff])?;
        transaction.commit()?;
        self.tags.extend(new_tags);
        let (held, oldest) = journal;
        let held = held + samples.len();
        let oldest = oldest.or((!samples.is_empty()).then_some(now));
        let due = held >= CHECKPOINT_SAMPLES
            || oldest.is_some_and(|oldest| {
                now.saturating_sub(oldest) >= i64::try_from(CHECKPOINT_AGE.as_millis()).unwrap_or(i64::MAX)
            });
        self.journal = Some((held, oldest));
        if due {
            self.checkpoint(limits)?;
        }
        Ok(())
    }

    /// Folds the journal into blocks now (see [`checkpoint`]); returns how many samples it
    /// folded.
    pub(crate) fn checkpoint(&mut self, limits: &HistoryLimits) -> rusqlite::Result<usize> {
        let transaction = self
            .connection
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let folded = checkpoint(&transaction, limits.earliest_kept())?;
        {
            let mut own = transaction.prepare_cached(
                "DELETE FROM HistoryBlocks WHERE Tag = (SELECT Id FROM HistoryTags WHERE Name = ?1) AND Last < ?2",
            )?;
            for (tag, keep_after) in &limits.own {
                own.execute(params![tag.as_ref(), unix_millis(*keep_after)])?;
            }
        }
        if let Some(max_bytes) = limits.max_bytes {
            let held: i64 = transaction.query_row(HISTORY_BYTES, [], |row| row.get(0))?;
            let excess = held.saturating_sub(i64::try_from(max_bytes).unwrap_or(i64::MAX));
            if excess > 0 {
                let deleted = transaction.execute(PRUNE_TO_SIZE, [excess])?;
                tracing::info!(
                    deleted,
                    held,
                    max_bytes,
                    "history past HistoryMaxBytes: its oldest blocks were deleted"
                );
            }
        }
        transaction.commit()?;
        self.journal = Some((0, None));
        Ok(folded)
    }
}

/// The id of a tag's history, given it on its first sample.
fn tag_id(connection: &Connection, name: &str) -> rusqlite::Result<i64> {
    connection
        .prepare_cached("INSERT INTO HistoryTags (Name) VALUES (?1) ON CONFLICT (Name) DO NOTHING")?
        .execute([name])?;
    connection
        .prepare_cached("SELECT Id FROM HistoryTags WHERE Name = ?1")?
        .query_row([name], |row| row.get(0))
}

/// Appends `events` to the alarm history, and keeps `AlarmHandling` as the events of handling
/// leave it.
fn insert_events(connection: &Connection, events: &[AlarmEvent]) -> rusqlite::Result<()> {
    let mut insert = connection.prepare_cached(
        "INSERT INTO AlarmHistory (Time, Alarm, Tag, Condition, Event, Value, Priority, Message, UserName, Reason, Until)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?;
    for event in events {
        insert.execute(params![
            unix_millis(event.time),
            event.alarm,
            event.tag,
            event.condition.name(),
            event.kind.as_str(),
            event.value,
            event.priority,
            event.message,
            event.user,
            event.reason,
            event.until.map(unix_millis),
        ])?;
        let (set, removed) = handling_change(event.kind);
        for kind in removed {
            connection
                .prepare_cached(REMOVE_HANDLING)?
                .execute(params![event.alarm, kind])?;
        }
        if let Some(kind) = set {
            connection.prepare_cached(SET_HANDLING)?.execute(params![
                event.alarm,
                kind,
                event.user.as_deref().unwrap_or_default(),
                event.reason.as_deref().unwrap_or_default(),
                unix_millis(event.time),
                event.until.map(unix_millis),
            ])?;
        }
    }
    Ok(())
}

/// Folds every journal row into blocks and empties the journal, in the caller's transaction;
/// samples from before `cutoff` (retention has passed them) are not kept. Returns how many
/// samples it folded.
pub(crate) fn checkpoint(transaction: &Transaction<'_>, cutoff: i64) -> rusqlite::Result<usize> {
    let mut by_tag: BTreeMap<i64, Vec<HistorySample>> = BTreeMap::new();
    let mut last_row = None;
    {
        let mut rows = transaction.prepare_cached("SELECT Id, Data FROM HistoryJournal ORDER BY Id")?;
        let mut rows = rows.query([])?;
        while let Some(row) = rows.next()? {
            last_row = Some(row.get::<_, i64>(0)?);
            match journal::decode(row.get_ref(1)?.as_blob()?) {
                Ok(samples) => {
                    for (tag, sample) in samples {
                        by_tag.entry(tag).or_default().push(sample);
                    }
                }
                Err(error) => {
                    tracing::error!(row = last_row, %error, "a history journal row cannot be read; its samples are lost");
                }
            }
        }
    }
    let Some(last_row) = last_row else {
        return Ok(0);
    };
    let mut folded = 0;
    for (tag, mut samples) in by_tag {
        samples.retain(|sample| unix_millis(sample.time) >= cutoff);
        folded += samples.len();
        if !samples.is_empty() {
            store_samples(transaction, tag, samples)?;
        }
    }
    transaction
        .prepare_cached("DELETE FROM HistoryJournal WHERE Id <= ?1")?
        .execute([last_row])?;
    Ok(folded)
}

/// Puts a tag's new samples into blocks: one more unsealed block of its tail, or, when that
/// is due ([`TailShape::compacts`]), its tail and them rewritten as sealed blocks and a new
/// tail.
fn store_samples(connection: &Connection, tag: i64, samples: Vec<HistorySample>) -> rusqlite::Result<()> {
    let new = block::runs(samples);
    let tail = connection
        .prepare_cached(
            "SELECT COUNT(*), COALESCE(SUM(Count), 0), MIN(First) FROM HistoryBlocks WHERE Tag = ?1 AND Sealed = 0",
        )?
        .query_row([tag], |row| {
            Ok(TailShape {
                blocks: usize::try_from(row.get::<_, i64>(0)?).unwrap_or(0),
                samples: usize::try_from(row.get::<_, i64>(1)?).unwrap_or(0),
                first: row.get(2)?,
            })
        })?;
    let blocks = if tail.compacts(&new) {
        let mut samples = Vec::with_capacity(tail.samples);
        {
            let mut rows = connection.prepare_cached(
                "SELECT Id, Data FROM HistoryBlocks WHERE Tag = ?1 AND Sealed = 0 ORDER BY First, Id",
            )?;
            let mut rows = rows.query([tag])?;
            while let Some(row) = rows.next()? {
                match block::decode(row.get_ref(1)?.as_blob()?) {
                    Ok(stored) => samples.extend(stored),
                    Err(error) => {
                        let id: i64 = row.get(0)?;
                        tracing::error!(block = id, %error, "a history block cannot be read; its samples are lost");
                    }
                }
            }
        }
        connection
            .prepare_cached("DELETE FROM HistoryBlocks WHERE Tag = ?1 AND Sealed = 0")?
            .execute([tag])?;
        samples.extend(new.into_iter().flatten());
        block::blocks_of(samples)
    } else {
        block::blocks_of(new.into_iter().flatten())
    };
    let mut insert = connection.prepare_cached(
        "INSERT INTO HistoryBlocks (Tag, Kind, First, Last, Count, FirstValue, LastValue, MinAt, MinTime, MinValue,
             MaxAt, MaxTime, MaxValue, Sum, Exact, Sealed, Data)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
    )?;
    for NewBlock {
        sealed,
        summary,
        data,
    } in blocks
    {
        let extreme = |extreme: Option<Extreme>| {
            extreme.map_or((None, None, None), |extreme| {
                (
                    i64::try_from(extreme.at).ok(),
                    Some(extreme.time),
                    Some(extreme.value),
                )
            })
        };
        let (min_at, min_time, min_value) = extreme(summary.min);
        let (max_at, max_time, max_value) = extreme(summary.max);
        insert.execute(params![
            tag,
            kind_name(summary.kind),
            summary.first,
            summary.last,
            i64::try_from(summary.count).unwrap_or(i64::MAX),
            summary.first_value,
            summary.last_value,
            min_at,
            min_time,
            min_value,
            max_at,
            max_time,
            max_value,
            summary.sum,
            summary.exact,
            sealed,
            data,
        ])?;
    }
    Ok(())
}

/// What a page of `tag`'s history over `window` needs, read in one snapshot: the summaries of
/// the blocks that meet it, the tag's journalled samples, and the data of the blocks the
/// page must decode. `None` for a tag with no history.
pub(crate) fn read_page(
    connection: &Connection,
    tag: &str,
    mut read: HistoryRead,
) -> rusqlite::Result<(HistoryRead, HashMap<i64, Vec<u8>>)> {
    let snapshot = connection.unchecked_transaction()?;
    let (from, to) = read.window;
    let id: Option<i64> = snapshot
        .prepare_cached("SELECT Id FROM HistoryTags WHERE Name = ?1")?
        .query_row([tag], |row| row.get(0))
        .optional()?;
    let Some(id) = id else {
        return Ok((read, HashMap::new()));
    };
    read.blocks = snapshot
        .prepare_cached(&format!(
            "SELECT {SUMMARY_COLUMNS} FROM HistoryBlocks
             WHERE Tag = ?1 AND First BETWEEN ?2 AND ?3 AND Last >= ?4 ORDER BY First, Id"
        ))?
        .query_map(
            params![id, from.saturating_sub(block::MAX_BLOCK_SPAN_MS), to, from],
            summary_of_row,
        )?
        .collect::<rusqlite::Result<_>>()?;
    if read.wants_opening() {
        read.before = snapshot
            .prepare_cached(LAST_BLOCK_BY)?
            .query_row(params![id, from.saturating_sub(1)], summary_of_row)
            .optional()?;
    }
    if read.wants_closing() {
        read.after = snapshot
            .prepare_cached(FIRST_BLOCK_AFTER)?
            .query_row(params![id, to], summary_of_row)
            .optional()?;
    }
    {
        let mut rows = snapshot.prepare_cached("SELECT Data FROM HistoryJournal ORDER BY Id")?;
        let mut rows = rows.query([])?;
        while let Some(row) = rows.next()? {
            // A row that cannot be read is reported by the checkpoint that meets it.
            if let Ok(samples) = journal::decode(row.get_ref(0)?.as_blob()?) {
                read.journal.extend(
                    samples
                        .into_iter()
                        .filter(|(tag, _)| *tag == id)
                        .map(|(_, sample)| sample),
                );
            }
        }
    }
    let mut data = HashMap::new();
    let mut select = snapshot.prepare_cached("SELECT Data FROM HistoryBlocks WHERE Id = ?1")?;
    for block in read.needed() {
        data.insert(block, select.query_row([block], |row| row.get(0))?);
    }
    drop(select);
    snapshot.commit()?;
    Ok((read, data))
}

/// Each tag's last sample at or before `instant` (unix milliseconds), read in one snapshot.
pub(crate) fn values_at(
    connection: &Connection,
    tags: &[(&str, TagType)],
    instant: i64,
) -> Result<Vec<Option<HistorySample>>, SolutionError> {
    let snapshot = connection.unchecked_transaction()?;
    let mut journal = Vec::new();
    {
        let mut rows = snapshot.prepare_cached("SELECT Data FROM HistoryJournal ORDER BY Id")?;
        let mut rows = rows.query([])?;
        while let Some(row) = rows.next()? {
            // A row that cannot be read is reported by the checkpoint that meets it.
            if let Ok(samples) = journal::decode(row.get_ref(0)?.as_blob().map_err(rusqlite::Error::from)?) {
                journal.extend(samples);
            }
        }
    }
    let journalled = page::journalled_at(journal, instant);
    let mut values = Vec::with_capacity(tags.len());
    for (tag, kind) in tags {
        let id: Option<i64> = snapshot
            .prepare_cached("SELECT Id FROM HistoryTags WHERE Name = ?1")?
            .query_row([tag], |row| row.get(0))
            .optional()?;
        let Some(id) = id else {
            values.push(None);
            continue;
        };
        let block = snapshot
            .prepare_cached(LAST_BLOCK_BY)?
            .query_row(params![id, instant], summary_of_row)
            .optional()?;
        let data: Option<Vec<u8>> = match &block {
            Some(block) if page::value_at_needs_data(block, *kind, instant) => Some(
                snapshot
                    .prepare_cached("SELECT Data FROM HistoryBlocks WHERE Id = ?1")?
                    .query_row([block.id], |row| row.get(0))?,
            ),
            _ => None,
        };
        values.push(page::value_at(
            *kind,
            instant,
            block.as_ref().map(|block| (block, data.as_deref())),
            journalled.get(&id),
        )?);
    }
    snapshot.commit()?;
    Ok(values)
}

/// Deletes the history of `tag` (folding the journal first, so none of it comes back);
/// returns how many samples it held.
pub(crate) fn purge(connection: &mut Connection, tag: &str) -> rusqlite::Result<usize> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    checkpoint(&transaction, i64::MIN)?;
    let held: i64 = transaction.query_row(
        "SELECT COALESCE(SUM(Count), 0) FROM HistoryBlocks WHERE Tag = (SELECT Id FROM HistoryTags WHERE Name = ?1)",
        [tag],
        |row| row.get(0),
    )?;
    transaction.execute(
        "DELETE FROM HistoryBlocks WHERE Tag = (SELECT Id FROM HistoryTags WHERE Name = ?1)",
        [tag],
    )?;
    transaction.commit()?;
    Ok(usize::try_from(held).unwrap_or(0))
}

/// Folds the rows of a file from before blocks (`TagHistory`, one row per sample) into
/// blocks, by tag in time order, then drops that table: run by the upgrade, in its
/// transaction, so nothing is lost or kept twice.
pub(crate) fn fold_legacy_rows(transaction: &Transaction<'_>) -> rusqlite::Result<()> {
    let legacy: bool = transaction.query_row(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'TagHistory')",
        [],
        |row| row.get(0),
    )?;
    if !legacy {
        return Ok(());
    }
    transaction.execute(
        "INSERT INTO HistoryTags (Name) SELECT DISTINCT Tag FROM TagHistory ORDER BY Tag ON CONFLICT (Name) DO NOTHING",
        [],
    )?;
    let mut current: Option<(i64, Vec<HistorySample>)> = None;
    {
        let mut rows = transaction.prepare(
            "SELECT HistoryTags.Id, TagHistory.Time, TagHistory.Value, TagHistory.Quality, Tags.Type
             FROM TagHistory JOIN HistoryTags ON HistoryTags.Name = TagHistory.Tag
             LEFT JOIN Tags ON Tags.Name = TagHistory.Tag
             ORDER BY HistoryTags.Id, TagHistory.Time",
        )?;
        let mut rows = rows.query([])?;
        while let Some(row) = rows.next()? {
            let tag: i64 = row.get(0)?;
            let value: SqlValue = row.get(2)?;
            let kind = match row.get::<_, Option<String>>(4)? {
                Some(kind) => kind_of_name(&kind),
                None => match value {
                    SqlValue::Integer(_) => TagType::Integer,
                    SqlValue::Text(_) => TagType::String,
                    _ => TagType::Number,
                },
            };
            let sample = HistorySample {
                time: from_unix_millis(row.get(1)?),
                value: to_tag_value(kind, value),
                quality: Quality(u8::try_from(row.get::<_, i64>(3)?).unwrap_or(0)),
            };
            match &mut current {
                Some((held, samples)) if *held == tag => samples.push(sample),
                _ => {
                    if let Some((held, samples)) = current.take() {
                        store_samples(transaction, held, samples)?;
                    }
                    current = Some((tag, vec![sample]));
                }
            }
        }
    }
    if let Some((held, samples)) = current {
        store_samples(transaction, held, samples)?;
    }
    transaction.execute_batch("DROP TABLE TagHistory")
}
