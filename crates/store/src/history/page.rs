//! A tag-history page assembled from what a backend read: the summaries of the blocks that
//! meet the window, the data of the blocks it must decode ([`HistoryRead::needed`]) and the
//! tag's journalled samples. Both backends answer through it, so a file and a database answer
//! a query alike.

use std::collections::HashMap;

use plant_model::{TagType, TagValue};

use super::block::{self, BlockError, BlockSummary, ColumnValues, Columns, RowExtremes, ordered};
use super::intervals::{HistoryInterval, IntervalFold};
use super::raw::{self, HistoryCursor, RawHistoryPage};
use super::trend::Trend;
use super::{HistoryPage, HistorySample, HistoryStats, unix_millis};

/// What a backend read for one tag-history query.
#[derive(Debug)]
pub(crate) struct HistoryRead {
    /// The tag's kind now: stored values of another kind are read as it.
    pub kind: TagType,
    /// The window, unix milliseconds, inclusive.
    pub window: (i64, i64),
    /// What the query answers.
    pub shape: HistoryShape,
    /// The blocks that meet the window, by first time.
    pub blocks: Vec<BlockSummary>,
    /// Intervals only: the tag's last block to start before the window, which holds the value
    /// the window opens with (it may be one of `blocks` too).
    pub before: Option<BlockSummary>,
    /// Intervals only: the tag's first block to start after the window, which may hold the
    /// sample the window's last line goes to.
    pub after: Option<BlockSummary>,
    /// The tag's journalled samples, as flushed.
    pub journal: Vec<HistorySample>,
}

/// What a tag-history query answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HistoryShape {
    /// A trend of at most `max` samples (M4 when the window holds more).
    Trend { max: usize },
    /// Every sample after a cursor, at most `limit`.
    Raw {
        after: Option<HistoryCursor>,
        limit: usize,
    },
    /// Aggregates per interval of `step` milliseconds, read at `now` (unix milliseconds).
    Intervals { step: i64, now: i64 },
}

/// A piece of the window in time order: a block taken by its summary, a decoded block's rows
/// inside the window, or samples merged by time.
enum Piece<'a> {
    Summary(&'a BlockSummary),
    Columns(Columns, std::ops::Range<usize>),
    Samples(Vec<HistorySample>),
}

/// A stored value read as a tag of `kind` now is: numbers take any number, a boolean and an
/// integer take each other; a value that does not fit reads as the kind's zero rather than
/// failing the whole query.
fn as_kind(value: TagValue, kind: TagType) -> TagValue {
    match (kind, value) {
        (TagType::Number, value) => ordered(&value).map_or(TagValue::zero(kind), TagValue::Number),
        (TagType::Integer, TagValue::Integer(integer)) => TagValue::Integer(integer),
        (TagType::Integer, TagValue::Bool(flag)) => TagValue::Integer(i64::from(flag)),
        (TagType::Bool, TagValue::Bool(flag)) => TagValue::Bool(flag),
        (TagType::Bool, TagValue::Integer(integer)) => TagValue::Bool(integer != 0),
        (TagType::String, TagValue::Text(text)) => TagValue::Text(text),
        (kind, _) => TagValue::zero(kind),
    }
}

impl HistoryRead {
    /// A query of `shape` over `window` of a tag of `kind`, before a backend reads it.
    pub(crate) fn new(kind: TagType, window: (i64, i64), shape: HistoryShape) -> Self {
        Self {
            kind,
            window,
            shape,
            blocks: Vec::new(),
            before: None,
            after: None,
            journal: Vec::new(),
        }
    }

    /// The same query, before a backend reads it (to read it again).
    pub(crate) fn again(&self) -> Self {
        Self::new(self.kind, self.window, self.shape)
    }

    /// Which blocks' data a backend may read with their summaries, before it knows what
    /// [`needed`](Self::needed) says: in order of first time, the first of the blocks that
    /// end at or after the first time (unix milliseconds), as many as the second says, enough
    /// to hold the page's samples when they are full. A page that fits is then read whole; one
    /// that needs more reads the rest by id.
    pub(crate) fn data_ahead(&self) -> (i64, i64) {
        let blocks = |samples: usize| {
            i64::try_from(samples.saturating_add(1).div_ceil(block::BLOCK_SAMPLES))
                .unwrap_or(i64::MAX)
                .saturating_add(1)
        };
        match self.shape {
            HistoryShape::Trend { max } => (i64::MIN, blocks(max)),
            HistoryShape::Raw { after, limit } => after.map_or((i64::MIN, blocks(limit)), |after| {
                let skip = usize::try_from(after.skip).unwrap_or(usize::MAX);
                (after.time_ms, blocks(limit.saturating_add(skip)))
            }),
            HistoryShape::Intervals { .. } => (i64::MIN, i64::MAX),
        }
    }

    /// Whether the backend reads the block [`before`](Self::before) the window: a trend and
    /// intervals open with the value the tag held when the window began.
    pub(crate) fn wants_opening(&self) -> bool {
        matches!(
            self.shape,
            HistoryShape::Trend { .. } | HistoryShape::Intervals { .. }
        )
    }

    /// Whether the backend reads the block [`after`](Self::after) the window: intervals close
    /// with the line to the first sample after it.
    pub(crate) fn wants_closing(&self) -> bool {
        matches!(self.shape, HistoryShape::Intervals { .. })
    }

    /// The block [`before`](Self::before) when the opening value needs its data.
    fn before_needed(&self) -> Option<i64> {
        self.before
            .as_ref()
            .filter(|before| value_at_needs_data(before, self.kind, self.window.0.saturating_sub(1)))
            .map(|before| before.id)
    }

    /// The value the tag held when the window began: its last sample before it, from the
    /// block [`before`](Self::before) (its data in `data` when it was needed) or the journal.
    fn opening(&self, data: &HashMap<i64, Vec<u8>>) -> Result<Option<HistorySample>, BlockError> {
        let opening_at = self.window.0.saturating_sub(1);
        let journalled = self
            .journal
            .iter()
            .filter(|sample| unix_millis(sample.time) <= opening_at)
            .max_by_key(|sample| sample.time);
        value_at(
            self.kind,
            opening_at,
            self.before
                .as_ref()
                .map(|before| (before, data.get(&before.id).map(Vec::as_slice))),
            journalled,
        )
    }

    fn inside(&self, block: &BlockSummary) -> bool {
        block.first >= self.window.0 && block.last <= self.window.1
    }

    fn journalled_in_window(&self) -> usize {
        self.journal
            .iter()
            .filter(|sample| (self.window.0..=self.window.1).contains(&unix_millis(sample.time)))
            .count()
    }

    /// Blocks that overlap another's time span (a late sample's block) or the journal's:
    /// their samples are merged in time order, so they are read, not summarised.
    fn overlapping(&self) -> Vec<bool> {
        let mut overlapping = vec![false; self.blocks.len()];
        let mut latest: Option<(usize, i64)> = None;
        for (index, block) in self.blocks.iter().enumerate() {
            if let Some((before, last)) = latest
                && block.first <= last
            {
                overlapping[before] = true;
                overlapping[index] = true;
            }
            if latest.is_none_or(|(_, last)| block.last > last) {
                latest = Some((index, block.last));
            }
        }
        if let Some(earliest) = self.journal.iter().map(|sample| unix_millis(sample.time)).min() {
            for (index, block) in self.blocks.iter().enumerate() {
                overlapping[index] |= block.last >= earliest;
            }
        }
        overlapping
    }

    /// The blocks whose data the page needs: all of them when every sample may fit the page,
    /// else those a summary cannot stand for (cut by the window or a bucket, not exact,
    /// overlapping, of another kind).
    pub(crate) fn needed(&self) -> Vec<i64> {
        let mut ids = match self.shape {
            HistoryShape::Trend { max } => self.needed_for_trend(max),
            HistoryShape::Raw { after, limit } => raw::blocks_to_read(&self.blocks, after, limit),
            HistoryShape::Intervals { .. } => {
                let mut ids: Vec<i64> = self.blocks.iter().map(|block| block.id).collect();
                // Its first sample is the summary's when the summary is exact.
                if let Some(after) = &self.after
                    && !(after.exact && after.kind == self.kind)
                {
                    ids.push(after.id);
                }
                ids
            }
        };
        if let Some(before) = self.before_needed()
            && !ids.contains(&before)
        {
            ids.push(before);
        }
        ids
    }

    fn needed_for_trend(&self, max: usize) -> Vec<i64> {
        let journalled = self.journalled_in_window();
        let at_least: usize = journalled
            + self
                .blocks
                .iter()
                .filter(|block| self.inside(block))
                .map(|block| block.count)
                .sum::<usize>();
        if at_least <= max {
            return self.blocks.iter().map(|block| block.id).collect();
        }
        let trend = Trend::new(at_least, max, self.window);
        let overlapping = self.overlapping();
        self.blocks
            .iter()
            .zip(overlapping)
            .filter(|(block, overlapping)| !self.summarised(&trend, block, *overlapping))
            .map(|(block, _)| block.id)
            .collect()
    }

    /// Whether `block` is taken by its summary in a trend of `trend`'s buckets.
    fn summarised(&self, trend: &Trend, block: &BlockSummary, overlapping: bool) -> bool {
        !overlapping
            && block.exact
            && block.kind == self.kind
            && self.inside(block)
            && trend
                .bucket_of(block.first)
                .is_some_and(|bucket| trend.bucket_of(block.last) == Some(bucket))
    }

    /// The raw page, with the data of (at least) the [`needed`](Self::needed) blocks by id.
    pub(crate) fn finish_raw(self, data: &HashMap<i64, Vec<u8>>) -> Result<RawHistoryPage, BlockError> {
        let HistoryShape::Raw { after, limit } = self.shape else {
            return Ok(raw::page_of(Vec::new(), self.window, None, 0, None));
        };
        let from = after.map_or(i64::MIN, |after| after.time_ms);
        let mut unread_from = None;
        let mut ordered = Vec::new();
        for block in self.blocks.iter().filter(|block| block.last >= from) {
            match data.get(&block.id) {
                Some(bytes) => ordered.extend(block::decode(bytes)?),
                None => {
                    unread_from = Some(block.first);
                    break;
                }
            }
        }
        ordered.extend(self.journal.iter().cloned());
        // Stable: samples of one time stay in the order read, on every page alike.
        ordered.sort_by_key(|sample| sample.time);
        let kind = self.kind;
        let ordered = ordered
            .into_iter()
            .map(|sample| HistorySample {
                value: as_kind(sample.value, kind),
                ..sample
            })
            .collect();
        Ok(raw::page_of(ordered, self.window, after, limit, unread_from))
    }

    /// The aggregates per interval, with the data of (at least) the
    /// [`needed`](Self::needed) blocks by id.
    pub(crate) fn finish_intervals(
        self,
        data: &HashMap<i64, Vec<u8>>,
    ) -> Result<Vec<HistoryInterval>, BlockError> {
        let (step, now) = match self.shape {
            HistoryShape::Intervals { step, now } => (step, now),
            HistoryShape::Trend { .. } | HistoryShape::Raw { .. } => (i64::MAX, i64::MIN),
        };
        let opening = self.opening(data)?;
        let closing = self.closing(data)?;
        let mut fold = IntervalFold::new(self.kind, self.window, step, now, opening);
        let kind = self.kind;
        self.in_order(data, |sample| {
            fold.push(HistorySample {
                value: as_kind(sample.value, kind),
                ..sample
            });
        })?;
        Ok(fold.finish(closing.map(|sample| HistorySample {
            value: as_kind(sample.value, kind),
            ..sample
        })))
    }

    /// The tag's first sample after the window: in a block that reaches past it, the first
    /// block after it, or the journal.
    fn closing(&self, data: &HashMap<i64, Vec<u8>>) -> Result<Option<HistorySample>, BlockError> {
        let to = self.window.1;
        let mut candidates: Vec<HistorySample> = Vec::new();
        for block in self.blocks.iter().filter(|block| block.last > to) {
            if let Some(bytes) = data.get(&block.id) {
                let columns = block::decode_columns(bytes)?;
                let row = columns.times.partition_point(|time| *time <= to);
                if row < columns.times.len() {
                    candidates.push(columns.sample(row));
                }
            }
        }
        if let Some(after) = &self.after {
            match data.get(&after.id) {
                Some(bytes) => candidates.extend(block::decode_columns(bytes)?.samples().into_iter().next()),
                None => candidates.extend(after.first_value.map(|value| after.sample(after.first, value))),
            }
        }
        candidates.extend(
            self.journal
                .iter()
                .filter(|sample| unix_millis(sample.time) > to)
                .cloned(),
        );
        Ok(candidates.into_iter().min_by_key(|sample| sample.time))
    }

    /// Every sample of the window in time order (blocks that overlap another's time, and the
    /// journal's, merged by time), given every block's data.
    fn in_order(
        &self,
        data: &HashMap<i64, Vec<u8>>,
        mut each: impl FnMut(HistorySample),
    ) -> Result<(), BlockError> {
        let (from, to) = self.window;
        let overlapping = self.overlapping();
        let mut merged: Vec<HistorySample> = Vec::new();
        let flush = |merged: &mut Vec<HistorySample>, each: &mut dyn FnMut(HistorySample)| {
            merged.sort_by_key(|sample| sample.time);
            merged.drain(..).for_each(&mut *each);
        };
        for (block, overlaps) in self.blocks.iter().zip(overlapping) {
            let Some(bytes) = data.get(&block.id) else {
                continue;
            };
            let columns = block::decode_columns(bytes)?;
            let start = columns.times.partition_point(|time| *time < from);
            let end = columns.times.partition_point(|time| *time <= to).max(start);
            if overlaps {
                merged.extend((start..end).map(|row| columns.sample(row)));
            } else {
                flush(&mut merged, &mut each);
                (start..end).for_each(|row| each(columns.sample(row)));
            }
        }
        merged.extend(
            self.journal
                .iter()
                .filter(|sample| (from..=to).contains(&unix_millis(sample.time)))
                .cloned(),
        );
        flush(&mut merged, &mut each);
        Ok(())
    }

    /// The page, with the data of (at least) the [`needed`](Self::needed) blocks by id.
    pub(crate) fn finish(self, data: &HashMap<i64, Vec<u8>>) -> Result<HistoryPage, BlockError> {
        let max = match self.shape {
            HistoryShape::Trend { max } => max,
            HistoryShape::Raw { limit, .. } => limit,
            HistoryShape::Intervals { .. } => usize::MAX,
        };
        let (from, to) = self.window;
        let in_window = |time: i64| (from..=to).contains(&time);
        let overlapping = self.overlapping();
        // Each block read is decoded as columns, with the rows inside the window.
        let mut decoded: HashMap<i64, (Columns, std::ops::Range<usize>)> = HashMap::new();
        for block in &self.blocks {
            if let Some(bytes) = data.get(&block.id) {
                let columns = block::decode_columns(bytes)?;
                let start = columns.times.partition_point(|time| *time < from);
                let end = columns.times.partition_point(|time| *time <= to);
                decoded.insert(block.id, (columns, start..end.max(start)));
            }
        }
        let journalled: Vec<HistorySample> = self
            .journal
            .iter()
            .filter(|sample| in_window(unix_millis(sample.time)))
            .cloned()
            .collect();
        let total = journalled.len()
            + self
                .blocks
                .iter()
                .map(|block| decoded.get(&block.id).map_or(block.count, |(_, rows)| rows.len()))
                .sum::<usize>();
        let mut trend = Trend::new(total, max, self.window);
        // Pieces in time order. Blocks that overlap another, and the journal's samples, are
        // merged by time, so a late sample falls in place; other decoded blocks stay columns.
        let mut pieces: Vec<Piece<'_>> = Vec::new();
        let block_pieces =
            self.blocks
                .iter()
                .zip(&overlapping)
                .map(|(block, overlaps)| match decoded.remove(&block.id) {
                    Some((columns, rows)) if *overlaps => {
                        Piece::Samples(rows.map(|row| columns.sample(row)).collect())
                    }
                    Some((columns, rows)) => Piece::Columns(columns, rows),
                    None => Piece::Summary(block),
                });
        for piece in block_pieces.chain(std::iter::once(Piece::Samples(journalled))) {
            match (pieces.last_mut(), piece) {
                (Some(Piece::Samples(before)), Piece::Samples(more)) => before.extend(more),
                (_, piece) => pieces.push(piece),
            }
        }
        let mut stats = Stats::default();
        let mut at = 0;
        for piece in pieces {
            match piece {
                Piece::Summary(block) => {
                    stats.add_block(block);
                    trend.push_block(at, block);
                    at += block.count;
                }
                Piece::Columns(columns, rows) => {
                    if !rows.is_empty()
                        && let Some(extremes) = columns.extremes(rows.clone())
                    {
                        stats.add_rows(extremes, rows.len());
                    }
                    for row in self.rows_kept(&trend, &columns, rows.clone()) {
                        let sample = columns.sample(row);
                        let value = as_kind(sample.value, self.kind);
                        trend.push(at + row - rows.start, HistorySample { value, ..sample });
                    }
                    at += rows.len();
                }
                Piece::Samples(mut samples) => {
                    samples.sort_by_key(|sample| sample.time);
                    for sample in samples {
                        stats.add(&sample.value);
                        let value = as_kind(sample.value, self.kind);
                        trend.push(at, HistorySample { value, ..sample });
                        at += 1;
                    }
                }
            }
        }
        Ok(HistoryPage {
            opening: self.opening(data)?,
            samples: trend.finish(),
            total,
            stats: if self.kind == TagType::String {
                None
            } else {
                stats.finish()
            },
        })
    }

    /// The rows of a decoded block a trend may keep, in order: every row when the page keeps
    /// all (or the values are text), else in each stretch of rows that falls in one bucket its
    /// first, smallest, largest and last (the first of equals, as the trend picks them), so
    /// the trend ends as it would given every row.
    fn rows_kept(&self, trend: &Trend, columns: &Columns, rows: std::ops::Range<usize>) -> Vec<usize> {
        // Rows read as another kind (the tag's changed) are ordered as read: every row goes in.
        let as_read = matches!(
            (&columns.values, self.kind),
            (ColumnValues::Number(_), TagType::Number)
                | (ColumnValues::Integer(_), TagType::Integer)
                | (ColumnValues::Bool(_), TagType::Bool)
        );
        if !as_read || trend.bucket_of(self.window.0).is_none() {
            return rows.collect();
        }
        let mut kept = Vec::new();
        let mut row = rows.start;
        while row < rows.end {
            // The stretch of rows in this row's bucket ends where the bucket does.
            let first = row;
            row = trend
                .bucket_of(columns.times[first])
                .and_then(|bucket| trend.bucket_end(bucket))
                .map_or(rows.end, |end| {
                    first + columns.times[first..rows.end].partition_point(|time| *time <= end)
                });
            let (low, high) = columns
                .extremes(first..row)
                .map_or((first, first), |extremes| (extremes.low.0, extremes.high.0));
            let mut stretch = [first, low, high, row - 1];
            stretch.sort_unstable();
            kept.extend(stretch);
            kept.dedup();
        }
        kept
    }
}

/// Whether the last sample at or before `instant` of a block (the tag's last to start by
/// then) needs the block's data: not when the whole block is before the instant and its
/// summary exact.
pub(crate) fn value_at_needs_data(block: &BlockSummary, kind: TagType, instant: i64) -> bool {
    !(block.exact && block.kind == kind && block.last <= instant)
}

/// A tag's last sample at or before `instant`, read as the tag's `kind`: the later of its
/// last block's (by the summary, or from `data` when [`value_at_needs_data`]) and its
/// journalled samples' (`journalled`: the latest at or before the instant).
pub(crate) fn value_at(
    kind: TagType,
    instant: i64,
    block: Option<(&BlockSummary, Option<&[u8]>)>,
    journalled: Option<&HistorySample>,
) -> Result<Option<HistorySample>, BlockError> {
    let stored = match block {
        Some((summary, Some(data))) if value_at_needs_data(summary, kind, instant) => {
            let columns = block::decode_columns(data)?;
            let before = columns.times.partition_point(|time| *time <= instant);
            before.checked_sub(1).map(|row| columns.sample(row))
        }
        Some((summary, _)) => summary
            .last_value
            .map(|value| summary.sample(summary.last, value)),
        None => None,
    };
    let latest = match (stored, journalled) {
        (Some(stored), Some(journalled)) if journalled.time >= stored.time => Some(journalled.clone()),
        (None, Some(journalled)) => Some(journalled.clone()),
        (stored, _) => stored,
    };
    Ok(latest.map(|sample| HistorySample {
        value: as_kind(sample.value, kind),
        ..sample
    }))
}

/// The latest journalled sample at or before `instant` of each tag id.
pub(crate) fn journalled_at(
    journal: impl IntoIterator<Item = (i64, HistorySample)>,
    instant: i64,
) -> HashMap<i64, HistorySample> {
    let mut latest: HashMap<i64, HistorySample> = HashMap::new();
    for (tag, sample) in journal {
        if unix_millis(sample.time) > instant {
            continue;
        }
        match latest.get(&tag) {
            Some(kept) if kept.time > sample.time => {}
            _ => {
                latest.insert(tag, sample);
            }
        }
    }
    latest
}

/// Minimum, maximum and mean of a window's numeric values.
#[derive(Debug, Default)]
struct Stats {
    min: Option<f64>,
    max: Option<f64>,
    sum: f64,
    count: usize,
}

impl Stats {
    fn add(&mut self, value: &TagValue) {
        if let Some(value) = ordered(value) {
            self.add_number(value);
        }
    }

    fn add_number(&mut self, value: f64) {
        self.extremes(value, value);
        self.sum += value;
        self.count += 1;
    }

    fn extremes(&mut self, low: f64, high: f64) {
        self.min = Some(self.min.map_or(low, |min| min.min(low)));
        self.max = Some(self.max.map_or(high, |max| max.max(high)));
    }

    fn add_rows(&mut self, rows: RowExtremes, count: usize) {
        self.extremes(rows.low.1, rows.high.1);
        self.sum += rows.sum;
        self.count += count;
    }

    fn add_block(&mut self, block: &BlockSummary) {
        if let (Some(min), Some(max), Some(sum)) = (block.min, block.max, block.sum) {
            self.extremes(min.value, max.value);
            self.sum += sum;
            self.count += block.count;
        }
    }

    fn finish(self) -> Option<HistoryStats> {
        let (min, max) = (self.min?, self.max?);
        Some(HistoryStats {
            min,
            max,
            mean: self.sum / self.count as f64,
        })
    }
}

#[cfg(test)]
mod tests {
    use plant_model::Quality;
    use proptest::prelude::*;

    use super::*;
    use crate::history::block::kind_of;
    use crate::history::block::{BLOCK_SAMPLES, runs};
    use crate::history::from_unix_millis;
    use crate::history::trend::Trend;

    /// Samples whose kind is the one given, for a test's blocks.
    fn of_kind(samples: &[HistorySample], kind: TagType) -> bool {
        samples.iter().all(|sample| kind_of(&sample.value) == kind)
    }

    /// What a backend reads of `samples` stored as blocks (and the last `journalled` of them
    /// still in the journal) for a query of `shape`: every block's data when `read_all`, else
    /// those `needed` says.
    fn read_of(
        samples: &[HistorySample],
        journalled: usize,
        window: (i64, i64),
        shape: HistoryShape,
        read_all: bool,
    ) -> (HistoryRead, HashMap<i64, Vec<u8>>) {
        let (stored, journal) = samples.split_at(samples.len() - journalled);
        let blocks = runs(stored.iter().cloned());
        let mut data = HashMap::new();
        let mut summaries = Vec::new();
        let mut read = HistoryRead::new(TagType::Number, window, shape);
        for (id, samples) in (1..).zip(&blocks) {
            assert!(of_kind(samples, TagType::Number));
            let summary = BlockSummary::of(id, samples);
            // As both backends read them.
            if summary.first < window.0
                && read
                    .before
                    .as_ref()
                    .is_none_or(|before| before.first <= summary.first)
            {
                read.before = Some(summary.clone());
            }
            if summary.first > window.1
                && read
                    .after
                    .as_ref()
                    .is_none_or(|after| after.first > summary.first)
            {
                read.after = Some(summary.clone());
            }
            // Sealed and plain blocks alike.
            let bytes = if id % 3 == 0 {
                block::encode_plain(samples)
            } else {
                block::encode(samples)
            };
            data.insert(id, bytes);
            if summary.last >= window.0 && summary.first <= window.1 {
                summaries.push(summary);
            }
        }
        summaries.sort_by_key(|summary| (summary.first, summary.id));
        read.blocks = summaries;
        read.journal = journal.to_vec();
        if !read.wants_opening() {
            read.before = None;
        }
        if !read.wants_closing() {
            read.after = None;
        }
        if !read_all {
            let needed = read.needed();
            data.retain(|id, _| needed.contains(id));
        }
        (read, data)
    }

    /// A trend page read from `samples` (see [`read_of`]).
    fn page(
        samples: &[HistorySample],
        journalled: usize,
        max: usize,
        window: (i64, i64),
        read_all: bool,
    ) -> HistoryPage {
        let (read, data) = read_of(samples, journalled, window, HistoryShape::Trend { max }, read_all);
        read.finish(&data).expect("blocks this build wrote")
    }

    /// Samples a step of milliseconds apart with values of one decimal, some of bad quality.
    fn series(steps: &[(i64, f64, bool)]) -> Vec<HistorySample> {
        let mut time = 1_800_000_000_000i64;
        steps
            .iter()
            .map(|(gap, value, good)| {
                time += gap;
                HistorySample {
                    time: from_unix_millis(time),
                    value: TagValue::Number((value * 10.0).round() / 10.0),
                    quality: if *good || *gap % 7 != 0 {
                        Quality::GOOD
                    } else {
                        Quality(0)
                    },
                }
            })
            .collect()
    }

    proptest! {
        /// Summaries stand in for the blocks they summarise: a page that reads only the blocks
        /// it needs is the page that reads them all.
        #[test]
        fn summaries_give_the_page_that_reading_every_sample_gives(
            steps in prop::collection::vec((0i64..3_000, -1.0e3f64..1.0e3, any::<bool>()), 1..6_000),
            max in 4usize..600,
            journalled in 0usize..50,
            cut in (0i64..10_000, 0i64..10_000),
        ) {
            let samples = series(&steps);
            let time = samples.last().map_or(0, |sample| unix_millis(sample.time));
            let journalled = journalled.min(samples.len());
            let window = (1_800_000_000_000 + cut.0 * 100, time - cut.1 * 100);
            prop_assume!(window.0 <= window.1);
            let read_all = page(&samples, journalled, max, window, true);
            let read_needed = page(&samples, journalled, max, window, false);
            // Both are the trend of every sample in the window, taken one by one.
            let inside: Vec<&HistorySample> = samples
                .iter()
                .filter(|sample| (window.0..=window.1).contains(&unix_millis(sample.time)))
                .collect();
            let mut every = Trend::new(inside.len(), max, window);
            for (at, sample) in inside.into_iter().enumerate() {
                every.push(at, sample.clone());
            }
            prop_assert_eq!(&read_all.samples, &every.finish());
            prop_assert_eq!(&read_needed.samples, &read_all.samples);
            prop_assert_eq!(read_needed.total, read_all.total);
            let inside = samples.iter().filter(|sample| (window.0..=window.1).contains(&unix_millis(sample.time))).count();
            prop_assert_eq!(read_all.total, inside);
            prop_assert!(read_all.samples.len() <= max);
            match (read_needed.stats, read_all.stats) {
                (Some(a), Some(b)) => {
                    prop_assert_eq!((a.min, a.max), (b.min, b.max));
                    prop_assert!((a.mean - b.mean).abs() <= 1e-6 * (1.0 + b.mean.abs()));
                }
                (a, b) => prop_assert_eq!(a, b),
            }
        }
    }

    proptest! {
        /// Raw pages read only the blocks they need and together hold every sample of the
        /// window once, in time order; aggregates read from blocks are those of every sample
        /// taken one by one, opened by the last sample before the window.
        #[test]
        fn pages_and_intervals_from_blocks_are_those_of_every_sample(
            steps in prop::collection::vec((0i64..3_000, -1.0e3f64..1.0e3, any::<bool>()), 1..4_000),
            limit in 1usize..3_000,
            journalled in 0usize..50,
            cut in (0i64..10_000, 0i64..10_000),
            step in 1_000i64..2_000_000,
        ) {
            let samples = series(&steps);
            let time = samples.last().map_or(0, |sample| unix_millis(sample.time));
            let journalled = journalled.min(samples.len());
            let window = (1_800_000_000_000 + cut.0 * 100, time - cut.1 * 100);
            prop_assume!(window.0 <= window.1);
            let inside: Vec<HistorySample> = samples
                .iter()
                .filter(|sample| (window.0..=window.1).contains(&unix_millis(sample.time)))
                .cloned()
                .collect();
            let mut paged = Vec::new();
            let mut after = None;
            for _ in 0..=inside.len() {
                let shape = HistoryShape::Raw { after, limit };
                let (read, data) = read_of(&samples, journalled, window, shape, false);
                let page = read.finish_raw(&data).expect("blocks this build wrote");
                prop_assert!(page.samples.len() <= limit);
                paged.extend(page.samples.iter().cloned());
                after = page.next(page.samples.len());
                if after.is_none() {
                    break;
                }
            }
            prop_assert!(after.is_none(), "paging ends");
            prop_assert_eq!(&paged, &inside);

            let now = time + 5_000;
            let shape = HistoryShape::Intervals { step, now };
            let (read, data) = read_of(&samples, journalled, window, shape, false);
            let intervals = read.finish_intervals(&data).expect("blocks this build wrote");
            let opening = samples
                .iter()
                .filter(|sample| unix_millis(sample.time) < window.0)
                .max_by_key(|sample| sample.time)
                .cloned();
            let closing = samples
                .iter()
                .filter(|sample| unix_millis(sample.time) > window.1)
                .min_by_key(|sample| sample.time)
                .cloned();
            let mut every = IntervalFold::new(TagType::Number, window, step, now, opening);
            for sample in inside {
                every.push(sample);
            }
            prop_assert_eq!(intervals, every.finish(closing));
        }
    }

    #[test]
    fn a_late_sample_falls_in_place() {
        let at = |ms: i64, value: f64| HistorySample {
            time: from_unix_millis(ms),
            value: TagValue::Number(value),
            quality: Quality::GOOD,
        };
        let mut samples: Vec<HistorySample> = (0..BLOCK_SAMPLES as i64 + 10)
            .map(|ms| at(ms * 10, 1.0))
            .collect();
        samples.push(at(55, 9.0));
        let page = page(&samples, 0, usize::MAX, (0, i64::MAX), false);
        assert_eq!(page.total, samples.len());
        assert!(page.samples.windows(2).all(|pair| pair[0].time <= pair[1].time));
        assert_eq!(page.samples[6], at(55, 9.0));
    }
}
