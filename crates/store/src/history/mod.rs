//! Tag history and alarm history: the types a history query answers with, the alarm history's
//! SQLite statements, and the value reading both backends share. Tag samples are kept in
//! compressed blocks with summaries ([`block`]), made durable first in a journal
//! ([`journal`]), and read back as pages ([`page`]) whose trends keep every excursion
//! ([`trend`]).

use std::collections::HashMap;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use plant_model::{AlarmEvent, AlarmEventKind, Condition, Quality, TagType, TagValue};
use rusqlite::params;
use rusqlite::types::Value as SqlValue;

use crate::{SolutionDb, SolutionError};

pub(crate) mod block;
mod intervals;
pub(crate) mod journal;
pub(crate) mod page;
mod raw;
pub(crate) mod sqlite;
mod trend;

pub use block::BlockError as HistoryDataError;
pub use intervals::{HistoryInterval, MAX_HISTORY_INTERVALS, MAX_INTERVAL_STATES, interval_count};
pub use raw::{HistoryCursor, RawHistoryPage};

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
    /// At most the requested number of samples, oldest first; when the window holds more,
    /// each of its time buckets' first, smallest, largest and last ([`Trend`]'s M4), so every
    /// excursion shows.
    pub samples: Vec<HistorySample>,
    /// How many samples the window holds.
    pub total: usize,
    /// The tag's last sample before the window: the value it held when the window began,
    /// `None` when nothing is recorded before it.
    pub opening: Option<HistorySample>,
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

/// What an alarm report reads of the alarm history: how each alarm stood when its window began,
/// and the window's events.
#[derive(Debug, Clone, PartialEq)]
pub struct AlarmRecord {
    /// The last event before the window of each alarm's condition (`Active`, `Cleared`), its
    /// shelving, its service and its suppression, oldest first.
    pub standing: Vec<AlarmEvent>,
    /// The window's events, oldest first: at most the number asked for.
    pub events: Vec<AlarmEvent>,
    /// How many events the window holds.
    pub total: usize,
}

/// [`AlarmRecord::standing`], in the SQL both backends speak (parameter: the window's start).
pub(crate) const SELECT_STANDING: &str =
    "SELECT Time, Alarm, Tag, Condition, Event, Value, Priority, Message, UserName, Reason, Until
     FROM AlarmHistory WHERE Id IN (
         SELECT max(Id) FROM AlarmHistory WHERE Time < $1 AND Event <> 'Acknowledged'
         GROUP BY Alarm, CASE WHEN Event IN ('Active', 'Cleared') THEN 0
                              WHEN Event IN ('Shelved', 'Unshelved', 'ShelvingExpired') THEN 1
                              WHEN Event IN ('OutOfService', 'InService') THEN 2
                              ELSE 3 END)
     ORDER BY Id";

/// [`AlarmRecord::events`] (parameters: from, to, how many at most).
pub(crate) const SELECT_WINDOW_EVENTS: &str =
    "SELECT Time, Alarm, Tag, Condition, Event, Value, Priority, Message, UserName, Reason, Until
     FROM AlarmHistory WHERE Time BETWEEN $1 AND $2 ORDER BY Time, Id LIMIT $3";

/// How many events a window holds (parameters: from, to).
pub(crate) const COUNT_WINDOW_EVENTS: &str = "SELECT COUNT(*) FROM AlarmHistory WHERE Time BETWEEN $1 AND $2";

/// What the history keeps: samples and events from `keep_after` on (retention by age), a
/// tag with a retention of its own from its own time on, and its blocks within `max_bytes`
/// when set (retention by size: the oldest sealed blocks go).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryLimits {
    /// The oldest time kept.
    pub keep_after: SystemTime,
    /// The most bytes the blocks' data may take.
    pub max_bytes: Option<u64>,
    /// The tags (dotted names) that keep their samples from another time than `keep_after`.
    pub own: Vec<(Arc<str>, SystemTime)>,
}

impl HistoryLimits {
    /// Everything kept: no retention by age or size.
    pub const NONE: Self = Self {
        keep_after: UNIX_EPOCH,
        max_bytes: None,
        own: Vec::new(),
    };

    /// The oldest time any tag keeps (unix milliseconds): what is older goes whatever its tag.
    pub(crate) fn earliest_kept(&self) -> i64 {
        let earliest = self
            .own
            .iter()
            .map(|(_, keep_after)| *keep_after)
            .fold(self.keep_after, SystemTime::min);
        unix_millis(earliest)
    }

    /// The names of the tags with a retention of their own.
    pub(crate) fn own_names(&self) -> Vec<&str> {
        self.own.iter().map(|(name, _)| name.as_ref()).collect()
    }
}

/// Deletes the oldest sealed blocks whose data, with all older, goes past `$1` bytes too many
/// (SQL both backends speak: a running sum by last time).
pub(crate) const PRUNE_TO_SIZE: &str = "WITH Oldest AS (
        SELECT Id, First, SUM(octet_length(Data)) OVER (ORDER BY Last, Id ROWS UNBOUNDED PRECEDING)
            - octet_length(Data) AS Before
        FROM HistoryBlocks WHERE Sealed = 1)
    DELETE FROM HistoryBlocks WHERE (Id, First) IN (SELECT Id, First FROM Oldest WHERE Before < $1)";

/// The bytes the blocks' data take.
pub(crate) const HISTORY_BYTES: &str =
    "SELECT CAST(COALESCE(SUM(octet_length(Data)), 0) AS BIGINT) FROM HistoryBlocks";

/// A sample of one tag, to be appended to the tag history.
#[derive(Debug)]
pub struct PendingSample {
    /// The tag's dotted name.
    pub tag: Arc<str>,
    /// When it was taken.
    pub time: SystemTime,
    /// The value.
    pub value: TagValue,
    /// Its quality.
    pub quality: Quality,
}

impl SolutionDb {
    /// Journals samples and appends alarm events in one transaction, prunes blocks and events
    /// past the `limits`, and folds the journal into blocks when it is due, on the one
    /// history writer connection (kept open between calls).
    pub(crate) fn write_history(
        &self,
        samples: &[PendingSample],
        events: &[AlarmEvent],
        limits: &HistoryLimits,
    ) -> Result<(), SolutionError> {
        let mut writer = self.history_writer.lock().unwrap_or_else(PoisonError::into_inner);
        // The kept writer would go on writing into a file that is gone.
        self.refuse_if_lost()?;
        let writer = match writer.as_mut() {
            Some(writer) => writer,
            None => writer.insert(sqlite::HistoryWriter::new(self.writer()?)),
        };
        Ok(writer.write(samples, events, limits)?)
    }

    /// Folds the history journal into blocks now; returns how many samples it folded.
    pub(crate) fn checkpoint_history(&self, limits: &HistoryLimits) -> Result<usize, SolutionError> {
        let mut writer = self.history_writer.lock().unwrap_or_else(PoisonError::into_inner);
        self.refuse_if_lost()?;
        let writer = match writer.as_mut() {
            Some(writer) => writer,
            None => writer.insert(sqlite::HistoryWriter::new(self.writer()?)),
        };
        Ok(writer.checkpoint(limits)?)
    }

    /// What a query of `tag`'s history needs read: the blocks' summaries, the journal and
    /// the data of the blocks its answer needs, in one snapshot.
    pub(crate) fn read_tag_history(
        &self,
        tag: &str,
        read: page::HistoryRead,
    ) -> Result<(page::HistoryRead, HashMap<i64, Vec<u8>>), SolutionError> {
        self.read(|connection| sqlite::read_page(connection, tag, read))
    }

    /// The trend of `tag` over `window` (unix milliseconds), for the store's own tests.
    #[cfg(test)]
    pub(crate) fn tag_history(
        &self,
        tag: &str,
        kind: TagType,
        window: (i64, i64),
        max: usize,
    ) -> Result<HistoryPage, SolutionError> {
        let read = page::HistoryRead::new(kind, window, page::HistoryShape::Trend { max });
        let (read, data) = self.read_tag_history(tag, read)?;
        Ok(read.finish(&data)?)
    }

    /// Each tag's last sample at or before `instant` (unix milliseconds).
    pub(crate) fn values_at(
        &self,
        tags: &[(&str, TagType)],
        instant: i64,
    ) -> Result<Vec<Option<HistorySample>>, SolutionError> {
        self.read(|connection| Ok(sqlite::values_at(connection, tags, instant)))?
    }

    /// Alarm transitions between `from` and `to` (unix milliseconds) inclusive, newest first,
    /// optionally of one tag only.
    pub(crate) fn alarm_history(
        &self,
        tag: Option<&str>,
        (from, to): (i64, i64),
        max_events: usize,
    ) -> Result<AlarmHistoryPage, SolutionError> {
        let limit = i64::try_from(max_events).unwrap_or(i64::MAX);
        self.read(|connection| {
            let total: i64 = connection
                .prepare_cached(
                    "SELECT COUNT(*) FROM AlarmHistory
                     WHERE Time BETWEEN ?1 AND ?2 AND (?3 IS NULL OR Tag = ?3)",
                )?
                .query_row(params![from, to, tag], |row| row.get(0))?;
            let events = connection
                .prepare_cached(
                    "SELECT Time, Alarm, Tag, Condition, Event, Value, Priority, Message, UserName, Reason, Until
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

    /// How each alarm stood at `from` and the events between `from` and `to` (unix
    /// milliseconds), at most `max_events` of them, oldest first.
    pub(crate) fn alarm_record(
        &self,
        (from, to): (i64, i64),
        max_events: usize,
    ) -> Result<AlarmRecord, SolutionError> {
        let limit = i64::try_from(max_events).unwrap_or(i64::MAX);
        self.read(|connection| {
            let standing = connection
                .prepare_cached(SELECT_STANDING)?
                .query_map(params![from], alarm_event_of_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let total: i64 = connection
                .prepare_cached(COUNT_WINDOW_EVENTS)?
                .query_row(params![from, to], |row| row.get(0))?;
            let events = connection
                .prepare_cached(SELECT_WINDOW_EVENTS)?
                .query_map(params![from, to, limit], alarm_event_of_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(AlarmRecord {
                standing,
                events,
                total: usize::try_from(total).unwrap_or(0),
            })
        })
    }
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
        SqlValue::Integer(value) => Some(*value as f64),
        _ => None,
    }
}

/// A stored value as the tag's type; a row that does not fit (the tag's type changed since it
/// was recorded) reads as the type's zero rather than failing the whole query.
pub(crate) fn to_tag_value(kind: TagType, value: SqlValue) -> TagValue {
    let converted = match (kind, value) {
        (TagType::Number, value) => as_f64(&value).map(TagValue::Number),
        (TagType::Integer, SqlValue::Integer(value)) => Some(TagValue::Integer(value)),
        (TagType::Bool, SqlValue::Integer(value)) => Some(TagValue::Bool(value != 0)),
        (TagType::String, SqlValue::Text(value)) => Some(TagValue::Text(Arc::from(value))),
        _ => None,
    };
    converted.unwrap_or_else(|| TagValue::zero(kind))
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

/// An `AlarmHistory` row read from SQLite (its columns in the order [`StoredAlarmEvent`] has
/// them) as an event.
pub(crate) fn alarm_event_of_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<AlarmEvent> {
    Ok(StoredAlarmEvent {
        time: row.get(0)?,
        alarm: row.get(1)?,
        tag: row.get(2)?,
        condition: row.get(3)?,
        kind: row.get(4)?,
        value: row.get(5)?,
        priority: row.get(6)?,
        message: row.get(7)?,
        user: row.get(8)?,
        reason: row.get(9)?,
        until: row.get(10)?,
    }
    .into_event())
}

/// An `AlarmHistory` row as stored: `Time, Alarm, Tag, Condition, Event, Value, Priority,
/// Message, UserName, Reason, Until`.
pub(crate) struct StoredAlarmEvent {
    pub(crate) time: i64,
    pub(crate) alarm: String,
    pub(crate) tag: String,
    pub(crate) condition: String,
    pub(crate) kind: String,
    pub(crate) value: Option<f64>,
    pub(crate) priority: u32,
    pub(crate) message: String,
    pub(crate) user: Option<String>,
    pub(crate) reason: Option<String>,
    pub(crate) until: Option<i64>,
}

impl StoredAlarmEvent {
    /// The event; the table's CHECK constraints keep the condition and event columns to known
    /// names.
    pub(crate) fn into_event(self) -> AlarmEvent {
        AlarmEvent {
            time: from_unix_millis(self.time),
            alarm: self.alarm,
            tag: self.tag,
            condition: Condition::parse(&self.condition).unwrap_or(Condition::Hi),
            kind: AlarmEventKind::parse(&self.kind).unwrap_or(AlarmEventKind::Cleared),
            value: self.value,
            priority: self.priority,
            message: self.message,
            user: self.user,
            reason: self.reason,
            until: self.until.map(from_unix_millis),
        }
    }
}

/// An alarm shelved or out of service, as the store keeps it (`AlarmHandling`) until that
/// ends: what a starting server takes up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptHandling {
    /// The alarm's name.
    pub alarm: String,
    /// `Shelved` or `OutOfService`.
    pub kind: AlarmEventKind,
    /// Who shelved it or took it out of service.
    pub by: String,
    /// Why.
    pub reason: String,
    /// Since when.
    pub since: SystemTime,
    /// Until when it is shelved.
    pub until: Option<SystemTime>,
}

/// What an event does to `AlarmHandling`: the kind of row it sets (from the event's user,
/// reason, time and until) and the kinds of row it removes first, by the alarm's name.
pub(crate) fn handling_change(kind: AlarmEventKind) -> (Option<&'static str>, &'static [&'static str]) {
    match kind {
        AlarmEventKind::Shelved => (Some("Shelved"), &[]),
        AlarmEventKind::Unshelved | AlarmEventKind::ShelvingExpired => (None, &["Shelved"]),
        AlarmEventKind::OutOfService => (Some("OutOfService"), &["Shelved"]),
        AlarmEventKind::InService => (None, &["OutOfService"]),
        // Suppression by design follows the plant's values, evaluated again at start.
        AlarmEventKind::Active
        | AlarmEventKind::Acknowledged
        | AlarmEventKind::Cleared
        | AlarmEventKind::Suppressed
        | AlarmEventKind::Unsuppressed => (None, &[]),
    }
}

/// An `AlarmHandling` row as kept: alarm, kind, user, reason, and since and until in Unix
/// milliseconds (the table's CHECK keeps the kind to `Shelved` and `OutOfService`).
pub(crate) fn kept_handling(
    alarm: String,
    kind: &str,
    by: String,
    reason: String,
    (since, until): (i64, Option<i64>),
) -> KeptHandling {
    KeptHandling {
        alarm,
        kind: AlarmEventKind::parse(kind).unwrap_or(AlarmEventKind::Shelved),
        by,
        reason,
        since: from_unix_millis(since),
        until: until.map(from_unix_millis),
    }
}

/// Sets the `AlarmHandling` row of `kind` for `alarm` (the same SQL for SQLite and
/// PostgreSQL, parameters: alarm, kind, user, reason, since, until).
pub(crate) const SET_HANDLING: &str =
    "INSERT INTO AlarmHandling (Alarm, Kind, UserName, Reason, Since, Until) VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (Alarm, Kind) DO UPDATE SET UserName = excluded.UserName, Reason = excluded.Reason,
         Since = excluded.Since, Until = excluded.Until";

/// Removes the `AlarmHandling` row of a kind for an alarm (parameters: alarm, kind).
pub(crate) const REMOVE_HANDLING: &str = "DELETE FROM AlarmHandling WHERE Alarm = $1 AND Kind = $2";

/// Every `AlarmHandling` row: `Alarm, Kind, UserName, Reason, Since, Until`.
pub(crate) const SELECT_HANDLING: &str =
    "SELECT Alarm, Kind, UserName, Reason, Since, Until FROM AlarmHandling ORDER BY Alarm, Kind";

/// One event of every kind, a millisecond apart from `start` (Unix milliseconds): what a store
/// test writes to see each kind read back.
#[cfg(test)]
pub(crate) fn one_event_of_each_kind(start: i64) -> Vec<AlarmEvent> {
    AlarmEventKind::ALL
        .into_iter()
        .zip(0..)
        .map(|(kind, offset)| AlarmEvent {
            time: from_unix_millis(start + offset),
            alarm: "T.Hi".to_owned(),
            tag: "T".to_owned(),
            condition: Condition::Hi,
            kind,
            value: None,
            priority: 700,
            message: "T high".to_owned(),
            user: Some("ops".to_owned()),
            reason: Some("a reason".to_owned()),
            until: Some(from_unix_millis(start + 3_600_000)),
        })
        .collect()
}
