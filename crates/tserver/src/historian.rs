//! The historian: tag samples and alarm transitions kept in the solution database for a
//! retention period, and the queries the history tools run on them.
//!
//! Writers (the simulator, tag writes) only append to an in-memory queue under a short lock;
//! [`Historian::flush`] moves the queue to SQLite in one transaction and prunes what is older
//! than the retention. Queries flush first, so they see every sample recorded before them.
//! Every method that touches SQLite blocks: async callers run it on the blocking pool.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, params};

use crate::objects::{AlarmCondition, AlarmEvent, AlarmEventKind, Quality, TagKind, TagSample, TagValue};
use crate::plant::WriteCapability;
use crate::solution::{SolutionError, Store};

/// A tag is recorded at most once per this interval (sooner when its quality changes), which
/// bounds the table at a few hundred thousand rows per tag-year of one-second updates.
pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(10);

/// Queued rows kept while the database cannot be written; past this the oldest are dropped
/// (and counted in the log) rather than letting memory grow without bound.
const MAX_QUEUED: usize = 100_000;

/// One stored sample.
#[derive(Debug, Clone, PartialEq)]
pub struct HistorySample {
    /// When it was taken.
    pub time: SystemTime,
    /// The value.
    pub value: TagValue,
    /// Its quality.
    pub quality: Quality,
}

/// Statistics over every sample of a window (numeric tags only).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HistoryStats {
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Mean value.
    pub mean: f64,
}

/// The answer to a tag-history query.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryPage {
    /// At most the requested number of samples, oldest first; evenly spread over the window
    /// when it holds more.
    pub samples: Vec<HistorySample>,
    /// How many samples the window holds.
    pub total: usize,
    /// Statistics over all of them.
    pub stats: Option<HistoryStats>,
}

/// The answer to an alarm-history query.
#[derive(Debug, Clone, PartialEq)]
pub struct AlarmHistoryPage {
    /// At most the requested number of events, newest first.
    pub events: Vec<AlarmEvent>,
    /// How many events the window holds.
    pub total: usize,
}

/// A sample waiting to be written.
#[derive(Debug)]
pub(crate) struct QueuedSample {
    pub(crate) tag: Arc<str>,
    pub(crate) time: SystemTime,
    pub(crate) value: TagValue,
    pub(crate) quality: Quality,
}

#[derive(Debug, Default)]
struct Queue {
    samples: Vec<QueuedSample>,
    events: Vec<AlarmEvent>,
    /// The time and quality of the last sample recorded per tag, for [`SAMPLE_INTERVAL`].
    last_recorded: HashMap<Arc<str>, (SystemTime, Quality, Option<f64>)>,
    dropped: u64,
}

/// The historian of one solution.
#[derive(Debug)]
pub struct Historian {
    store: Arc<Store>,
    /// How long rows are kept, in milliseconds: `HistoryRetentionHours`, followed live.
    retention_ms: AtomicU64,
    queue: Mutex<Queue>,
    /// One writer connection, opened on first flush and kept; also serializes flushes.
    writer: Mutex<Option<Connection>>,
    /// Whether this node records what every node sees alike (samples, alarms becoming active
    /// or clear): on a database several nodes share, only the leader does, so each sample is
    /// stored once. What happens on this node alone (an acknowledgement) is always recorded.
    records_shared: AtomicBool,
}

impl Historian {
    /// A historian writing to `store`, keeping samples and events for `retention`.
    pub fn new(store: Arc<Store>, retention: Duration) -> Self {
        Self {
            store,
            retention_ms: AtomicU64::new(u64::try_from(retention.as_millis()).unwrap_or(u64::MAX)),
            queue: Mutex::new(Queue::default()),
            writer: Mutex::new(None),
            records_shared: AtomicBool::new(true),
        }
    }

    /// Whether this node stores the samples and alarm transitions every node sees alike (see
    /// `records_shared`); set by the runtime from its leadership.
    pub(crate) fn set_records_shared(&self, records: bool) {
        self.records_shared.store(records, Ordering::Relaxed);
    }

    /// How long samples and events are kept.
    pub fn retention(&self) -> Duration {
        Duration::from_millis(self.retention_ms.load(Ordering::Relaxed))
    }

    /// Keeps samples and events for `retention` from the next flush on (a changed
    /// `HistoryRetentionHours`).
    pub(crate) fn set_retention(&self, retention: Duration) {
        let ms = u64::try_from(retention.as_millis()).unwrap_or(u64::MAX);
        if self.retention_ms.swap(ms, Ordering::Relaxed) != ms {
            tracing::info!(?retention, "history retention changed");
        }
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        // The queue is plain data changed in single steps; a panic elsewhere leaves it usable.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues a tag sample, unless, with the same quality as the last one recorded, it comes
    /// less than [`SAMPLE_INTERVAL`] after it or its value moved less than `deadband` from it.
    pub fn record(&self, tag: &str, sample: &TagSample, deadband: f64, _: &WriteCapability) {
        let mut queue = self.queue();
        let value = sample.value.as_f64();
        if let Some((last_time, last_quality, last_value)) = queue.last_recorded.get(tag) {
            let recent = sample
                .timestamp
                .duration_since(*last_time)
                .is_ok_and(|since| since < SAMPLE_INTERVAL);
            let within_deadband = match (value, last_value) {
                (Some(value), Some(last)) => (value - last).abs() < deadband,
                _ => false,
            };
            if (recent || within_deadband) && *last_quality == sample.quality {
                return;
            }
        }
        let tag: Arc<str> = match queue.last_recorded.get_key_value(tag) {
            Some((known, _)) => Arc::clone(known),
            None => Arc::from(tag),
        };
        queue
            .last_recorded
            .insert(Arc::clone(&tag), (sample.timestamp, sample.quality, value));
        queue.samples.push(QueuedSample {
            tag,
            time: sample.timestamp,
            value: sample.value.clone(),
            quality: sample.quality,
        });
        if queue.samples.len() > MAX_QUEUED {
            let excess = queue.samples.len() - MAX_QUEUED;
            queue.samples.drain(..excess);
            queue.dropped += excess as u64;
        }
    }

    /// Queues alarm transitions.
    pub fn record_events(&self, events: impl IntoIterator<Item = AlarmEvent>, _: &WriteCapability) {
        let mut queue = self.queue();
        queue.events.extend(events);
        if queue.events.len() > MAX_QUEUED {
            let excess = queue.events.len() - MAX_QUEUED;
            queue.events.drain(..excess);
            queue.dropped += excess as u64;
        }
    }

    /// Writes everything queued in one transaction and prunes rows older than the retention.
    /// Returns the number of rows written. On failure the rows stay queued for the next flush.
    pub fn flush(&self) -> Result<usize, SolutionError> {
        // The kept writer would go on writing into a file that is gone: rows stay queued.
        if let Store::File(db) = &*self.store {
            db.refuse_if_lost()?;
        }
        let mut writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let (samples, mut events, dropped) = {
            let mut queue = self.queue();
            (
                std::mem::take(&mut queue.samples),
                std::mem::take(&mut queue.events),
                std::mem::take(&mut queue.dropped),
            )
        };
        let samples = if self.records_shared.load(Ordering::Relaxed) {
            samples
        } else {
            events.retain(|event| event.kind == AlarmEventKind::Acknowledged);
            Vec::new()
        };
        if dropped > 0 {
            tracing::warn!(dropped, "historian queue overflowed; oldest rows were dropped");
        }
        let keep_after = SystemTime::now()
            .checked_sub(self.retention())
            .unwrap_or(UNIX_EPOCH);
        let written = match &*self.store {
            Store::File(db) => match writer.as_mut() {
                Some(connection) => write_rows(connection, &samples, &events, keep_after).map_err(Into::into),
                None => db.writer().and_then(|connection| {
                    let connection = writer.insert(connection);
                    write_rows(connection, &samples, &events, keep_after).map_err(Into::into)
                }),
            },
            Store::Postgres(pg) => pg.block_on(pg.write_history(&samples, &events, keep_after)),
        };
        match written {
            Ok(()) => Ok(samples.len() + events.len()),
            Err(error) => {
                // Put the rows back in front of anything queued since, so none is lost.
                let mut queue = self.queue();
                let newer_samples = std::mem::replace(&mut queue.samples, samples);
                queue.samples.extend(newer_samples);
                let newer_events = std::mem::replace(&mut queue.events, events);
                queue.events.extend(newer_events);
                Err(error)
            }
        }
    }

    /// Rows (samples and alarm events) queued and not yet written.
    pub fn queued(&self) -> usize {
        let queue = self.queue();
        queue.samples.len() + queue.events.len()
    }

    /// Samples of `tag` (dotted name, of `kind`) between `from` and `to` inclusive: at most
    /// `max_samples`, evenly spread when the window holds more, with statistics over all.
    pub fn tag_history(
        &self,
        tag: &str,
        kind: TagKind,
        from: SystemTime,
        to: SystemTime,
        max_samples: usize,
    ) -> Result<HistoryPage, SolutionError> {
        self.flush()?;
        let (from, to) = (unix_millis(from), unix_millis(to));
        let db = match &*self.store {
            Store::File(db) => db,
            Store::Postgres(pg) => return pg.block_on(pg.tag_history(tag, kind, (from, to), max_samples)),
        };
        db.read(|connection| {
            let (total, min, max, mean) = connection
                .prepare_cached(
                    "SELECT COUNT(*), MIN(Value), MAX(Value), AVG(Value) FROM TagHistory
                     WHERE Tag = ?1 AND Time BETWEEN ?2 AND ?3",
                )?
                .query_row(params![tag, from, to], |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, SqlValue>(1)?,
                        row.get::<_, SqlValue>(2)?,
                        row.get::<_, Option<f64>>(3)?,
                    ))
                })?;
            let total = usize::try_from(total).unwrap_or(0);
            let stats = match (kind, as_f64(&min), as_f64(&max), mean) {
                (TagKind::Text, ..) => None,
                (_, Some(min), Some(max), Some(mean)) => Some(HistoryStats { min, max, mean }),
                _ => None,
            };
            let mut statement = connection.prepare_cached(
                "SELECT Time, Value, Quality FROM TagHistory
                 WHERE Tag = ?1 AND Time BETWEEN ?2 AND ?3 ORDER BY Time",
            )?;
            let mut rows = statement.query(params![tag, from, to])?;
            let mut samples = Vec::with_capacity(total.min(max_samples));
            let mut downsample = Downsample::new(total, max_samples);
            while let Some(row) = rows.next()? {
                if !downsample.keep(samples.len()) {
                    continue;
                }
                let quality = Quality(u8::try_from(row.get::<_, i64>(2)?).unwrap_or(0));
                samples.push(HistorySample {
                    time: from_unix_millis(row.get(0)?),
                    value: to_tag_value(kind, row.get(1)?),
                    quality,
                });
            }
            Ok(HistoryPage {
                samples,
                total,
                stats,
            })
        })
    }

    /// Alarm transitions between `from` and `to` inclusive, newest first, optionally of one
    /// tag (dotted name) only.
    pub fn alarm_history(
        &self,
        tag: Option<&str>,
        from: SystemTime,
        to: SystemTime,
        max_events: usize,
    ) -> Result<AlarmHistoryPage, SolutionError> {
        self.flush()?;
        let (from, to) = (unix_millis(from), unix_millis(to));
        let limit = i64::try_from(max_events).unwrap_or(i64::MAX);
        let db = match &*self.store {
            Store::File(db) => db,
            Store::Postgres(pg) => return pg.block_on(pg.alarm_history(tag, (from, to), max_events)),
        };
        db.read(|connection| {
            let total: i64 = connection
                .prepare_cached(
                    "SELECT COUNT(*) FROM AlarmHistory
                     WHERE Time BETWEEN ?1 AND ?2 AND (?3 IS NULL OR Tag = ?3)",
                )?
                .query_row(params![from, to, tag], |row| row.get(0))?;
            let events = connection
                .prepare_cached(
                    "SELECT Time, Alarm, Tag, Condition, Event, Value, Priority, Message, UserName
                     FROM AlarmHistory WHERE Time BETWEEN ?1 AND ?2 AND (?3 IS NULL OR Tag = ?3)
                     ORDER BY Time DESC, Id DESC LIMIT ?4",
                )?
                .query_map(params![from, to, tag, limit], alarm_event_of_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(AlarmHistoryPage {
                events,
                total: usize::try_from(total).unwrap_or(0),
            })
        })
    }
}

fn write_rows(
    connection: &mut Connection,
    samples: &[QueuedSample],
    events: &[AlarmEvent],
    keep_after: SystemTime,
) -> rusqlite::Result<()> {
    let transaction = connection.transaction()?;
    {
        let mut insert = transaction
            .prepare_cached("INSERT INTO TagHistory (Tag, Time, Value, Quality) VALUES (?1, ?2, ?3, ?4)")?;
        for sample in samples {
            let value = match &sample.value {
                TagValue::Number(value) => SqlValue::Real(*value),
                TagValue::Integer(value) => SqlValue::Integer(*value),
                TagValue::Bool(value) => SqlValue::Integer(i64::from(*value)),
                TagValue::Text(value) => SqlValue::Text(value.to_string()),
            };
            insert.execute(params![
                &*sample.tag,
                unix_millis(sample.time),
                value,
                sample.quality.0
            ])?;
        }
        let mut insert = transaction.prepare_cached(
            "INSERT INTO AlarmHistory (Time, Alarm, Tag, Condition, Event, Value, Priority, Message, UserName)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?;
        for event in events {
            insert.execute(params![
                unix_millis(event.time),
                event.alarm,
                event.tag,
                event.condition.as_str(),
                event.kind.as_str(),
                event.value,
                event.priority,
                event.message,
                event.user,
            ])?;
        }
        let cutoff = unix_millis(keep_after);
        transaction
            .prepare_cached("DELETE FROM TagHistory WHERE Time < ?1")?
            .execute([cutoff])?;
        transaction
            .prepare_cached("DELETE FROM AlarmHistory WHERE Time < ?1")?
            .execute([cutoff])?;
    }
    transaction.commit()
}

/// Milliseconds since the Unix epoch (negative before it), saturating.
pub(crate) fn unix_millis(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(since) => i64::try_from(since.as_millis()).unwrap_or(i64::MAX),
        Err(before) => i64::try_from(before.duration().as_millis()).map_or(i64::MIN, |ms| -ms),
    }
}

pub(crate) fn from_unix_millis(millis: i64) -> SystemTime {
    let magnitude = Duration::from_millis(millis.unsigned_abs());
    if millis >= 0 {
        UNIX_EPOCH + magnitude
    } else {
        UNIX_EPOCH - magnitude
    }
}

fn as_f64(value: &SqlValue) -> Option<f64> {
    match value {
        SqlValue::Real(value) => Some(*value),
        #[allow(clippy::cast_precision_loss)]
        SqlValue::Integer(value) => Some(*value as f64),
        _ => None,
    }
}

/// A stored value as the tag's type; a row that does not fit (the tag's type changed since it
/// was recorded) reads as the type's zero rather than failing the whole query.
pub(crate) fn to_tag_value(kind: TagKind, value: SqlValue) -> TagValue {
    let converted = match (kind, value) {
        (TagKind::Number, value) => as_f64(&value).map(TagValue::Number),
        (TagKind::Integer, SqlValue::Integer(value)) => Some(TagValue::Integer(value)),
        (TagKind::Bool, SqlValue::Integer(value)) => Some(TagValue::Bool(value != 0)),
        (TagKind::Text, SqlValue::Text(value)) => Some(TagValue::Text(Arc::from(value))),
        _ => None,
    };
    converted.unwrap_or_else(|| TagValue::zero(kind))
}

/// Which rows of a window a history page keeps: all when they fit, else the first row of each
/// of `max` equal slices of the window, so the trend's shape survives.
#[derive(Debug)]
pub(crate) struct Downsample {
    total: usize,
    max: usize,
    index: usize,
    last_bucket: Option<usize>,
}

impl Downsample {
    /// For a window of `total` rows read in order, `max` of which fit on the page.
    pub(crate) fn new(total: usize, max: usize) -> Self {
        Self {
            total,
            max,
            index: 0,
            last_bucket: None,
        }
    }

    /// Whether the next row is kept, `kept` rows being on the page so far.
    pub(crate) fn keep(&mut self, kept: usize) -> bool {
        let bucket = if self.total > self.max {
            self.index * self.max / self.total
        } else {
            self.index
        };
        self.index += 1;
        if self.last_bucket == Some(bucket) || kept >= self.max {
            return false;
        }
        self.last_bucket = Some(bucket);
        true
    }
}

/// A history value stored as a JSON scalar (PostgreSQL's `TagHistory.Value`) as SQLite's
/// untyped value: a whole number as an integer, any other number as a real, a string as text.
pub(crate) fn sql_value_of_json(json: &str) -> SqlValue {
    match serde_json::from_str::<serde_json::Value>(json) {
        Ok(serde_json::Value::Number(number)) => number.as_i64().map_or_else(
            || number.as_f64().map_or(SqlValue::Null, SqlValue::Real),
            SqlValue::Integer,
        ),
        Ok(serde_json::Value::String(text)) => SqlValue::Text(text),
        Ok(_) | Err(_) => SqlValue::Null,
    }
}

/// An `AlarmHistory` row read from SQLite (its columns in the order `alarm_event_of_stored`
/// takes them) as an event.
pub(crate) fn alarm_event_of_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<AlarmEvent> {
    Ok(alarm_event_of_stored(
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        &row.get::<_, String>(3)?,
        &row.get::<_, String>(4)?,
        row.get(5)?,
        row.get(6)?,
        row.get(7)?,
        row.get(8)?,
    ))
}

/// An `AlarmHistory` row as an event; the table's CHECK constraints keep the condition and
/// event columns to known names.
#[expect(clippy::too_many_arguments, reason = "one argument per stored column")]
pub(crate) fn alarm_event_of_stored(
    time: i64,
    alarm: String,
    tag: String,
    condition: &str,
    kind: &str,
    value: Option<f64>,
    priority: u32,
    message: String,
    user: Option<String>,
) -> AlarmEvent {
    AlarmEvent {
        time: from_unix_millis(time),
        alarm,
        tag,
        condition: AlarmCondition::parse(condition).unwrap_or(AlarmCondition::Hi),
        kind: match kind {
            "Active" => AlarmEventKind::Active,
            "Acknowledged" => AlarmEventKind::Acknowledged,
            _ => AlarmEventKind::Cleared,
        },
        value,
        priority,
        message,
        user,
    }
}
