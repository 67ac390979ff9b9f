//! Tag history and alarm history in a solution file: the types a history query answers with,
//! the SQLite statements that append, prune and read them, and the value reading and
//! downsampling both backends share, so a file and a database answer a query alike.

use std::sync::{Arc, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use plant_model::{AlarmEvent, AlarmEventKind, Condition, Quality, TagType, TagValue};
use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, params};

use crate::{SolutionDb, SolutionError};

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
    /// Appends samples and alarm events in one transaction and prunes rows older than
    /// `keep_after`, on the one history writer connection (kept open between calls).
    pub(crate) fn write_history(
        &self,
        samples: &[PendingSample],
        events: &[AlarmEvent],
        keep_after: SystemTime,
    ) -> Result<(), SolutionError> {
        let mut writer = self.history_writer.lock().unwrap_or_else(PoisonError::into_inner);
        // The kept writer would go on writing into a file that is gone.
        self.refuse_if_lost()?;
        let connection = match writer.as_mut() {
            Some(connection) => connection,
            None => writer.insert(self.writer()?),
        };
        Ok(write_rows(connection, samples, events, keep_after)?)
    }

    /// Samples of `tag` (of `kind`) between `from` and `to` (unix milliseconds) inclusive.
    pub(crate) fn tag_history(
        &self,
        tag: &str,
        kind: TagType,
        (from, to): (i64, i64),
        max_samples: usize,
    ) -> Result<HistoryPage, SolutionError> {
        self.read(|connection| {
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
                (TagType::String, ..) => None,
                (_, Some(min), Some(max), Some(mean)) => Some(HistoryStats { min, max, mean }),
                _ => None,
            };
            let mut statement = connection.prepare_cached(
                "SELECT Time, Value, Quality FROM TagHistory
                 WHERE Tag = ?1 AND Time BETWEEN ?2 AND ?3 ORDER BY Time",
            )?;
            let mut rows = statement.query(params![tag, from, to])?;
            let mut trend = Trend::new(total, max_samples, (from, to));
            let mut at = 0;
            while let Some(row) = rows.next()? {
                let quality = Quality(u8::try_from(row.get::<_, i64>(2)?).unwrap_or(0));
                trend.push(
                    at,
                    HistorySample {
                        time: from_unix_millis(row.get(0)?),
                        value: to_tag_value(kind, row.get(1)?),
                        quality,
                    },
                );
                at += 1;
            }
            let samples = trend.finish();
            Ok(HistoryPage {
                samples,
                total,
                stats,
            })
        })
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
    samples: &[PendingSample],
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
                event.condition.name(),
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

/// Which samples of a window a history page keeps, read in time order: all when they fit;
/// otherwise the window is cut into `max / 4` buckets of equal time and each keeps its first,
/// smallest, largest and last sample (M4, Jugel et al., VLDB 2014): a line drawn through them
/// is the line drawn through every sample, so no excursion between two kept samples is hidden.
/// Text has no order: a bucket of text keeps its first and last. A page of fewer than 4
/// samples keeps the window's smallest, largest and last, as many as fit.
#[derive(Debug)]
pub(crate) struct Trend {
    all: bool,
    max: usize,
    from: i64,
    span: i128,
    buckets: usize,
    kept: Vec<HistorySample>,
    bucket: Option<(usize, Bucket)>,
}

/// One bucket's extremes so far: each by its sample's place in the window (to keep a sample
/// once when it is two of them) and the sample.
#[derive(Debug)]
struct Bucket {
    first: (usize, HistorySample),
    min: Option<(usize, f64, HistorySample)>,
    max: Option<(usize, f64, HistorySample)>,
    last: (usize, HistorySample),
}

/// A sample's value as a number to order by: numbers, integers and booleans; text has none.
fn ordered(value: &TagValue) -> Option<f64> {
    match value {
        TagValue::Number(number) => Some(*number),
        TagValue::Integer(integer) => Some(*integer as f64),
        TagValue::Bool(boolean) => Some(f64::from(u8::from(*boolean))),
        TagValue::Text(_) => None,
    }
}

impl Bucket {
    fn new(at: usize, sample: HistorySample) -> Self {
        let key = ordered(&sample.value);
        Self {
            min: key.map(|key| (at, key, sample.clone())),
            max: key.map(|key| (at, key, sample.clone())),
            last: (at, sample.clone()),
            first: (at, sample),
        }
    }

    fn add(&mut self, at: usize, sample: HistorySample) {
        if let Some(key) = ordered(&sample.value) {
            if self.min.as_ref().is_none_or(|(_, min, _)| key < *min) {
                self.min = Some((at, key, sample.clone()));
            }
            if self.max.as_ref().is_none_or(|(_, max, _)| key > *max) {
                self.max = Some((at, key, sample.clone()));
            }
        }
        self.last = (at, sample);
    }

    /// The bucket's kept samples, each once, in time order.
    fn samples(self) -> impl Iterator<Item = HistorySample> {
        let mut kept: Vec<(usize, HistorySample)> = vec![self.first, self.last];
        kept.extend(self.min.map(|(at, _, sample)| (at, sample)));
        kept.extend(self.max.map(|(at, _, sample)| (at, sample)));
        kept.sort_by_key(|(at, _)| *at);
        kept.dedup_by_key(|(at, _)| *at);
        kept.into_iter().map(|(_, sample)| sample)
    }
}

impl Trend {
    /// For a window `from..=to` (unix milliseconds) of `total` samples, `max` of which fit.
    pub(crate) fn new(total: usize, max: usize, (from, to): (i64, i64)) -> Self {
        let max = max.max(1);
        Self {
            all: total <= max,
            max,
            from,
            span: (i128::from(to) - i128::from(from) + 1).max(1),
            buckets: (max / 4).max(1),
            kept: Vec::with_capacity(total.min(max)),
            bucket: None,
        }
    }

    /// The next sample of the window, the `at`-th, in time order.
    pub(crate) fn push(&mut self, at: usize, sample: HistorySample) {
        if self.all {
            self.kept.push(sample);
            return;
        }
        let offset = i128::from(unix_millis(sample.time)) - i128::from(self.from);
        let index = usize::try_from(
            (offset.max(0) * i128::try_from(self.buckets).unwrap_or(i128::MAX) / self.span)
                .min(i128::try_from(self.buckets - 1).unwrap_or(0)),
        )
        .unwrap_or(0);
        match &mut self.bucket {
            Some((current, bucket)) if *current == index => bucket.add(at, sample),
            _ => {
                if let Some((_, done)) = self.bucket.take() {
                    self.kept.extend(done.samples());
                }
                self.bucket = Some((index, Bucket::new(at, sample)));
            }
        }
    }

    /// The page's samples, oldest first.
    pub(crate) fn finish(mut self) -> Vec<HistorySample> {
        if let Some((_, done)) = self.bucket.take() {
            self.kept.extend(done.samples());
        }
        if self.max < 4 && self.kept.len() > self.max {
            return fewest(self.kept, self.max);
        }
        self.kept
    }
}

/// The `max` (< 4) samples a tiny page keeps of one bucket's M4 samples: the smallest, the
/// largest, then the last, in time order.
fn fewest(samples: Vec<HistorySample>, max: usize) -> Vec<HistorySample> {
    let by = |pick: fn(f64, f64) -> bool| {
        samples
            .iter()
            .enumerate()
            .filter_map(|(at, sample)| Some((at, ordered(&sample.value)?)))
            .reduce(|best, next| if pick(next.1, best.1) { next } else { best })
            .map(|(at, _)| at)
    };
    let mut wanted: Vec<usize> = Vec::new();
    for at in [by(|a, b| a < b), by(|a, b| a > b), Some(samples.len() - 1)]
        .into_iter()
        .flatten()
    {
        if !wanted.contains(&at) && wanted.len() < max {
            wanted.push(at);
        }
    }
    wanted.sort_unstable();
    wanted.into_iter().map(|at| samples[at].clone()).collect()
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
        condition: Condition::parse(condition).unwrap_or(Condition::Hi),
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn sample(ms: i64, value: f64) -> HistorySample {
        HistorySample {
            time: from_unix_millis(ms),
            value: TagValue::Number(value),
            quality: Quality::GOOD,
        }
    }

    fn trend(samples: &[HistorySample], max: usize, window: (i64, i64)) -> Vec<HistorySample> {
        let mut trend = Trend::new(samples.len(), max, window);
        for (at, sample) in samples.iter().enumerate() {
            trend.push(at, sample.clone());
        }
        trend.finish()
    }

    #[test]
    fn a_one_second_excursion_survives_a_hundred_buckets() {
        // A day of one-second samples around 12 with one second at 150.
        let samples: Vec<HistorySample> = (0..86_400)
            .map(|second| {
                sample(
                    second * 1000,
                    if second == 40_000 {
                        150.0
                    } else {
                        12.0 + (second % 3) as f64
                    },
                )
            })
            .collect();
        let kept = trend(&samples, 400, (0, 86_399_999));
        assert!(kept.len() <= 400, "{}", kept.len());
        assert!(kept.iter().any(|sample| sample.value == TagValue::Number(150.0)));
    }

    #[test]
    fn a_tiny_page_keeps_the_extremes() {
        let samples = [sample(0, 5.0), sample(1, 1.0), sample(2, 9.0), sample(3, 4.0)];
        let values = |kept: Vec<HistorySample>| -> Vec<TagValue> {
            kept.into_iter().map(|sample| sample.value).collect()
        };
        assert_eq!(values(trend(&samples, 1, (0, 3))), [TagValue::Number(1.0)]);
        assert_eq!(
            values(trend(&samples, 2, (0, 3))),
            [TagValue::Number(1.0), TagValue::Number(9.0)]
        );
        assert_eq!(
            values(trend(&samples, 3, (0, 3))),
            [
                TagValue::Number(1.0),
                TagValue::Number(9.0),
                TagValue::Number(4.0)
            ]
        );
    }

    proptest! {
        /// For any series in a window, the trend holds the window's smallest and largest value
        /// and each bucket's first and last sample, in time order, within the page's size.
        #[test]
        fn the_m4_trend_keeps_every_extreme_and_each_buckets_ends(
            steps in prop::collection::vec((0i64..5_000, -1.0e6f64..1.0e6), 1..3_000),
            max in 4usize..400,
        ) {
            let mut time = 0i64;
            let samples: Vec<HistorySample> = steps
                .iter()
                .map(|(gap, value)| {
                    time += gap;
                    sample(time, *value)
                })
                .collect();
            let window = (0, time);
            let kept = trend(&samples, max, window);
            prop_assert!(kept.len() <= max);
            prop_assert!(kept.windows(2).all(|pair| pair[0].time <= pair[1].time));
            let value = |sample: &HistorySample| ordered(&sample.value).unwrap_or(f64::NAN);
            let low = samples.iter().map(value).fold(f64::INFINITY, f64::min);
            let high = samples.iter().map(value).fold(f64::NEG_INFINITY, f64::max);
            prop_assert!(kept.iter().any(|sample| value(sample) == low));
            prop_assert!(kept.iter().any(|sample| value(sample) == high));
            if samples.len() > max {
                let buckets = max / 4;
                let span = i128::from(time) + 1;
                let bucket_of = |sample: &HistorySample| {
                    (i128::from(unix_millis(sample.time)) * buckets as i128 / span) as usize
                };
                for bucket in 0..buckets {
                    let inside: Vec<&HistorySample> =
                        samples.iter().filter(|sample| bucket_of(sample) == bucket).collect();
                    if let (Some(first), Some(last)) = (inside.first(), inside.last()) {
                        prop_assert!(kept.contains(first), "bucket {bucket}'s first");
                        prop_assert!(kept.contains(last), "bucket {bucket}'s last");
                    }
                }
            } else {
                prop_assert_eq!(kept.len(), samples.len());
            }
        }
    }
}
