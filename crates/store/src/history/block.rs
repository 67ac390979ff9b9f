//! A history block: up to [`BLOCK_SAMPLES`] samples of one tag in time order, stored as one
//! value with a summary beside it (count, first, last, min, max, sum), so a long window reads
//! summaries and decodes only the blocks it must cut.
//!
//! A sealed block is packed: times and numbers are columns compressed by pco (delta encoding
//! finds a steady sample period; float-multiple detection finds a transmitter's fixed
//! decimals); qualities are runs, since they rarely change; text is kept as it came. A tag's
//! newest samples, fewer than a block, are kept plainly in a few unsealed blocks (cheap to
//! write at every checkpoint) until [`TailShape::compacts`] says to pack them.

use std::sync::Arc;

use plant_model::{Quality, TagType, TagValue};
use serde::{Deserialize, Serialize};

use super::HistorySample;
use super::unix_millis;

/// The most samples one block holds.
pub(crate) const BLOCK_SAMPLES: usize = 1024;

/// The longest time one block spans, so a window's reader finds every block that meets it
/// among those that start at most this long before the window.
pub(crate) const MAX_BLOCK_SPAN_MS: i64 = 24 * 60 * 60 * 1000;

/// The largest integer a summary's `f64` holds exactly.
const EXACT_INTEGER: i64 = 1 << 53;

/// Why a stored block cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum BlockError {
    /// The block's framing is not one this build wrote.
    #[error("history block framing: {0}")]
    Framing(#[from] postcard::Error),
    /// A column does not decompress.
    #[error("history block column: {0}")]
    Column(#[from] pco::errors::PcoError),
    /// The columns disagree on how many samples the block holds.
    #[error("history block holds {times} times but {values} values")]
    Length {
        /// Times decoded.
        times: usize,
        /// Values decoded.
        values: usize,
    },
}

/// A block's values column.
#[derive(Debug, Serialize, Deserialize)]
enum Values {
    Number(Vec<u8>),
    Integer(Vec<u8>),
    Bool(Vec<u8>),
    Text(Vec<String>),
}

/// A block as stored: packed (sealed) or plain (a tag's newest samples).
#[derive(Debug, Serialize, Deserialize)]
enum Stored {
    Packed(Packed),
    Plain(Vec<(i64, u8, super::journal::Value)>),
}

/// A packed block's columns.
#[derive(Debug, Serialize, Deserialize)]
struct Packed {
    /// Milliseconds since the epoch, pco-compressed.
    times: Vec<u8>,
    /// Runs of one quality: how many samples, then the quality.
    qualities: Vec<(u32, u8)>,
    values: Values,
}

/// A block's value kind, as its `Kind` column names it.
pub(crate) fn kind_name(kind: TagType) -> &'static str {
    match kind {
        TagType::Number => "number",
        TagType::Integer => "integer",
        TagType::Bool => "bool",
        TagType::String => "text",
    }
}

/// The kind a `Kind` column names (the table's CHECK keeps it to these).
pub(crate) fn kind_of_name(name: &str) -> TagType {
    match name {
        "integer" => TagType::Integer,
        "bool" => TagType::Bool,
        "text" => TagType::String,
        _ => TagType::Number,
    }
}

/// The kind of a value.
pub(crate) fn kind_of(value: &TagValue) -> TagType {
    match value {
        TagValue::Number(_) => TagType::Number,
        TagValue::Integer(_) => TagType::Integer,
        TagValue::Bool(_) => TagType::Bool,
        TagValue::Text(_) => TagType::String,
    }
}

/// A value as a number to summarise: numbers, integers and booleans; text has none.
pub(crate) fn ordered(value: &TagValue) -> Option<f64> {
    match value {
        TagValue::Number(number) => Some(*number),
        TagValue::Integer(integer) => Some(*integer as f64),
        TagValue::Bool(boolean) => Some(f64::from(u8::from(*boolean))),
        TagValue::Text(_) => None,
    }
}

/// One extreme of a block: its sample's place in the block, time and value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Extreme {
    /// The sample's index in the block.
    pub at: usize,
    /// Its time, in milliseconds since the epoch.
    pub time: i64,
    /// Its value.
    pub value: f64,
}

/// What a block's summary columns say of it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BlockSummary {
    /// The block's row.
    pub id: i64,
    /// Its values' kind.
    pub kind: TagType,
    /// Its first sample's time (ms since the epoch).
    pub first: i64,
    /// Its last sample's time.
    pub last: i64,
    /// How many samples it holds.
    pub count: usize,
    /// The first and last values (none for text).
    pub first_value: Option<f64>,
    /// See `first_value`.
    pub last_value: Option<f64>,
    /// The smallest value (the first of equals; none for text).
    pub min: Option<Extreme>,
    /// The largest value (the first of equals; none for text).
    pub max: Option<Extreme>,
    /// The sum of its values (none for text).
    pub sum: Option<f64>,
    /// Whether the summary alone gives the block's first, min, max and last samples exactly:
    /// every sample good, values that are not text and integers an `f64` holds.
    pub exact: bool,
}

impl BlockSummary {
    /// The summary of `samples` (time-ordered, at least one, all of one kind).
    pub(crate) fn of(id: i64, samples: &[HistorySample]) -> Self {
        let kind = samples
            .first()
            .map_or(TagType::Number, |sample| kind_of(&sample.value));
        let mut min: Option<Extreme> = None;
        let mut max: Option<Extreme> = None;
        let mut sum = None;
        let mut exact = kind != TagType::String;
        for (at, sample) in samples.iter().enumerate() {
            exact &= sample.quality == Quality::GOOD;
            if let TagValue::Integer(integer) = sample.value {
                exact &= integer.unsigned_abs() <= EXACT_INTEGER.unsigned_abs();
            }
            let Some(value) = ordered(&sample.value) else {
                continue;
            };
            let extreme = Extreme {
                at,
                time: unix_millis(sample.time),
                value,
            };
            if min.is_none_or(|min| value < min.value) {
                min = Some(extreme);
            }
            if max.is_none_or(|max| value > max.value) {
                max = Some(extreme);
            }
            sum = Some(sum.unwrap_or(0.0) + value);
        }
        let time = |sample: Option<&HistorySample>| sample.map_or(0, |sample| unix_millis(sample.time));
        Self {
            id,
            kind,
            first: time(samples.first()),
            last: time(samples.last()),
            count: samples.len(),
            first_value: samples.first().and_then(|sample| ordered(&sample.value)),
            last_value: samples.last().and_then(|sample| ordered(&sample.value)),
            min,
            max,
            sum,
            exact,
        }
    }

    /// A summarised value as a sample of the block's kind, good (only exact summaries are
    /// read this way).
    pub(crate) fn sample(&self, time: i64, value: f64) -> HistorySample {
        let value = match self.kind {
            TagType::Integer => TagValue::Integer(value as i64),
            TagType::Bool => TagValue::Bool(value != 0.0),
            TagType::Number | TagType::String => TagValue::Number(value),
        };
        HistorySample {
            time: super::from_unix_millis(time),
            value,
            quality: Quality::GOOD,
        }
    }
}

/// The bytes of `samples` (time-ordered, all of one kind) kept plainly: a few tens of
/// nanoseconds a sample to write, for a tail rewritten at checkpoints.
pub(crate) fn encode_plain(samples: &[HistorySample]) -> Vec<u8> {
    let plain = samples
        .iter()
        .map(|sample| {
            (
                unix_millis(sample.time),
                sample.quality.0,
                super::journal::Value::of(&sample.value),
            )
        })
        .collect();
    // Serialising integers, floats and strings into a vector cannot fail.
    postcard::to_allocvec(&Stored::Plain(plain)).unwrap_or_default()
}

/// The packed bytes of `samples` (time-ordered, all of one kind).
pub(crate) fn encode(samples: &[HistorySample]) -> Vec<u8> {
    let config = pco::ChunkConfig::default().with_compression_level(4);
    let column = |compressed: pco::errors::PcoResult<Vec<u8>>| {
        // pco refuses only an invalid configuration, and this one is fixed.
        compressed.unwrap_or_default()
    };
    let times: Vec<i64> = samples.iter().map(|sample| unix_millis(sample.time)).collect();
    let mut qualities: Vec<(u32, u8)> = Vec::new();
    for sample in samples {
        match qualities.last_mut() {
            Some((run, quality)) if *quality == sample.quality.0 => *run += 1,
            _ => qualities.push((1, sample.quality.0)),
        }
    }
    let values = match samples.first().map(|sample| kind_of(&sample.value)) {
        Some(TagType::Integer) => Values::Integer(column(pco::standalone::simple_compress(
            &samples
                .iter()
                .map(|sample| match sample.value {
                    TagValue::Integer(integer) => integer,
                    _ => 0,
                })
                .collect::<Vec<i64>>(),
            &config,
        ))),
        Some(TagType::Bool) => Values::Bool(column(pco::standalone::simple_compress(
            &samples
                .iter()
                .map(|sample| u32::from(sample.value == TagValue::Bool(true)))
                .collect::<Vec<u32>>(),
            &config,
        ))),
        Some(TagType::String) => Values::Text(
            samples
                .iter()
                .map(|sample| match &sample.value {
                    TagValue::Text(text) => text.to_string(),
                    _ => String::new(),
                })
                .collect(),
        ),
        Some(TagType::Number) | None => Values::Number(column(pco::standalone::simple_compress(
            &samples
                .iter()
                .map(|sample| ordered(&sample.value).unwrap_or(0.0))
                .collect::<Vec<f64>>(),
            &config,
        ))),
    };
    let packed = Packed {
        times: column(pco::standalone::simple_compress(&times, &config)),
        qualities,
        values,
    };
    // Serialising owned bytes, strings and integers into a vector cannot fail.
    postcard::to_allocvec(&Stored::Packed(packed)).unwrap_or_default()
}

/// A decoded block's values, one column of the block's kind.
#[derive(Debug)]
pub(crate) enum ColumnValues {
    Number(Vec<f64>),
    Integer(Vec<i64>),
    Bool(Vec<bool>),
    Text(Vec<TagValue>),
}

/// A decoded block as columns: what a trend reduces without making a sample of each row.
#[derive(Debug)]
pub(crate) struct Columns {
    /// Milliseconds since the epoch, in time order.
    pub times: Vec<i64>,
    /// The values.
    pub values: ColumnValues,
    /// Each row's quality.
    pub qualities: Vec<u8>,
}

impl Columns {
    /// The rows of the smallest and the largest value among `rows` (non-empty), the first of
    /// equals, integers and booleans ordered as numbers, and the values' sum; none for text.
    pub(crate) fn extremes(&self, rows: std::ops::Range<usize>) -> Option<RowExtremes> {
        let start = rows.start;
        match &self.values {
            ColumnValues::Number(values) => Some(extremes_of(values[rows].iter().copied(), start)),
            ColumnValues::Integer(values) => {
                Some(extremes_of(values[rows].iter().map(|value| *value as f64), start))
            }
            ColumnValues::Bool(values) => Some(extremes_of(
                values[rows].iter().map(|value| f64::from(u8::from(*value))),
                start,
            )),
            ColumnValues::Text(_) => None,
        }
    }

    /// Row `at` as a sample.
    pub(crate) fn sample(&self, at: usize) -> HistorySample {
        let value = match &self.values {
            ColumnValues::Number(values) => TagValue::Number(values[at]),
            ColumnValues::Integer(values) => TagValue::Integer(values[at]),
            ColumnValues::Bool(values) => TagValue::Bool(values[at]),
            ColumnValues::Text(values) => values[at].clone(),
        };
        HistorySample {
            time: super::from_unix_millis(self.times[at]),
            value,
            quality: Quality(self.qualities[at]),
        }
    }

    /// Every row as a sample, in time order.
    pub(crate) fn samples(&self) -> Vec<HistorySample> {
        (0..self.times.len()).map(|at| self.sample(at)).collect()
    }
}

/// The smallest and the largest of some rows' values (each by its row and value) and their sum.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RowExtremes {
    pub low: (usize, f64),
    pub high: (usize, f64),
    pub sum: f64,
}

/// The smallest and the largest of `keys` (rows counted from `start`, the first of equals)
/// and their sum: one pass, no sample made.
fn extremes_of(mut keys: impl Iterator<Item = f64>, start: usize) -> RowExtremes {
    let first = keys.next().unwrap_or(f64::NAN);
    let mut extremes = RowExtremes {
        low: (start, first),
        high: (start, first),
        sum: first,
    };
    for (at, key) in (start + 1..).zip(keys) {
        if key < extremes.low.1 {
            extremes.low = (at, key);
        }
        if key > extremes.high.1 {
            extremes.high = (at, key);
        }
        extremes.sum += key;
    }
    extremes
}

/// The samples of a stored block, in time order.
pub(crate) fn decode(bytes: &[u8]) -> Result<Vec<HistorySample>, BlockError> {
    Ok(decode_columns(bytes)?.samples())
}

/// A stored block as columns.
pub(crate) fn decode_columns(bytes: &[u8]) -> Result<Columns, BlockError> {
    let encoded = match postcard::from_bytes(bytes)? {
        Stored::Packed(packed) => packed,
        Stored::Plain(plain) => {
            let mut times = Vec::with_capacity(plain.len());
            let mut qualities = Vec::with_capacity(plain.len());
            let mut values = Vec::with_capacity(plain.len());
            for (time, quality, value) in plain {
                times.push(time);
                qualities.push(quality);
                values.push(value.into_value());
            }
            // A plain block holds one kind, as every block does.
            let values = match values.first().map(kind_of) {
                Some(TagType::Number) => {
                    ColumnValues::Number(values.iter().map(|value| ordered(value).unwrap_or(0.0)).collect())
                }
                Some(TagType::Integer) => ColumnValues::Integer(
                    values
                        .iter()
                        .map(|value| match value {
                            TagValue::Integer(integer) => *integer,
                            _ => 0,
                        })
                        .collect(),
                ),
                Some(TagType::Bool) => ColumnValues::Bool(
                    values
                        .iter()
                        .map(|value| *value == TagValue::Bool(true))
                        .collect(),
                ),
                Some(TagType::String) | None => ColumnValues::Text(values),
            };
            return Ok(Columns {
                times,
                values,
                qualities,
            });
        }
    };
    let times: Vec<i64> = pco::standalone::simple_decompress(&encoded.times)?;
    let values = match encoded.values {
        Values::Number(column) => ColumnValues::Number(pco::standalone::simple_decompress::<f64>(&column)?),
        Values::Integer(column) => ColumnValues::Integer(pco::standalone::simple_decompress::<i64>(&column)?),
        Values::Bool(column) => ColumnValues::Bool(
            pco::standalone::simple_decompress::<u32>(&column)?
                .into_iter()
                .map(|flag| flag != 0)
                .collect(),
        ),
        Values::Text(texts) => ColumnValues::Text(
            texts
                .into_iter()
                .map(|text| TagValue::Text(Arc::from(text)))
                .collect(),
        ),
    };
    let count = match &values {
        ColumnValues::Number(values) => values.len(),
        ColumnValues::Integer(values) => values.len(),
        ColumnValues::Bool(values) => values.len(),
        ColumnValues::Text(values) => values.len(),
    };
    if times.len() != count {
        return Err(BlockError::Length {
            times: times.len(),
            values: count,
        });
    }
    let mut qualities: Vec<u8> = encoded
        .qualities
        .iter()
        .flat_map(|&(run, quality)| std::iter::repeat_n(quality, run as usize))
        .take(count)
        .collect();
    qualities.resize(count, Quality::GOOD.0);
    Ok(Columns {
        times,
        values,
        qualities,
    })
}

/// Samples cut into runs a block each holds: one kind of value, in time order, at most
/// [`BLOCK_SAMPLES`] over at most [`MAX_BLOCK_SPAN_MS`]. A sample older than the one before it
/// starts a run of its own, so a source's late sample is kept, never dropped or reordered into
/// stored data.
pub(crate) fn runs(samples: impl IntoIterator<Item = HistorySample>) -> Vec<Vec<HistorySample>> {
    let mut runs: Vec<Vec<HistorySample>> = Vec::new();
    for sample in samples {
        let fits = runs.last().is_some_and(|run| {
            run.len() < BLOCK_SAMPLES
                && run.first().is_some_and(|first| {
                    unix_millis(sample.time) - unix_millis(first.time) <= MAX_BLOCK_SPAN_MS
                })
                && run.last().is_some_and(|last| {
                    last.time <= sample.time && kind_of(&last.value) == kind_of(&sample.value)
                })
        });
        match runs.last_mut() {
            Some(run) if fits => run.push(sample),
            _ => runs.push(vec![sample]),
        }
    }
    runs
}

/// The most unsealed blocks a tag keeps before its tail is rewritten as one.
const MAX_TAIL_BLOCKS: usize = 16;

/// A tag's unsealed tail as its summaries show it: how many blocks, samples, and its first
/// sample's time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TailShape {
    /// Unsealed blocks.
    pub blocks: usize,
    /// Samples in them.
    pub samples: usize,
    /// The earliest first time among them.
    pub first: Option<i64>,
}

impl TailShape {
    /// Whether adding `new` (as [`runs`] cut it) makes the tail worth rewriting: it fills a
    /// block, spans more than a block may, breaks into several runs, or has grown to too many
    /// pieces. Otherwise the new samples are one more unsealed block.
    pub(crate) fn compacts(&self, new: &[Vec<HistorySample>]) -> bool {
        let added: usize = new.iter().map(Vec::len).sum();
        let last = new
            .last()
            .and_then(|run| run.last())
            .map(|sample| unix_millis(sample.time));
        let first = match (self.first, new.first().and_then(|run| run.first())) {
            (Some(first), _) => Some(first),
            (None, Some(sample)) => Some(unix_millis(sample.time)),
            (None, None) => None,
        };
        self.samples + added >= BLOCK_SAMPLES
            || new.len() > 1
            || self.blocks + 1 > MAX_TAIL_BLOCKS
            || matches!((first, last), (Some(first), Some(last)) if last - first > MAX_BLOCK_SPAN_MS)
    }
}

/// A block to write: sealed (packed) or the tail's (plain), and its samples.
pub(crate) struct NewBlock {
    /// Whether it is sealed.
    pub sealed: bool,
    /// Its summary (id 0: the row gives it one).
    pub summary: BlockSummary,
    /// Its stored bytes.
    pub data: Vec<u8>,
}

/// The blocks `samples` (a tag's tail and new samples, in order) are written as: every run
/// but the last sealed, the last sealed when full, else kept plainly as the new tail.
pub(crate) fn blocks_of(samples: impl IntoIterator<Item = HistorySample>) -> Vec<NewBlock> {
    let runs = runs(samples);
    let count = runs.len();
    runs.into_iter()
        .enumerate()
        .map(|(index, run)| {
            let sealed = index + 1 < count || run.len() >= BLOCK_SAMPLES;
            NewBlock {
                sealed,
                summary: BlockSummary::of(0, &run),
                data: if sealed { encode(&run) } else { encode_plain(&run) },
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::history::from_unix_millis;

    fn sample(ms: i64, value: TagValue, quality: u8) -> HistorySample {
        HistorySample {
            time: from_unix_millis(ms),
            value,
            quality: Quality(quality),
        }
    }

    fn value_of() -> impl Strategy<Value = TagValue> {
        prop_oneof![
            any::<f64>()
                .prop_filter("NaN has no equal", |n| !n.is_nan())
                .prop_map(TagValue::Number),
            any::<i64>().prop_map(TagValue::Integer),
            any::<bool>().prop_map(TagValue::Bool),
            ".{0,12}".prop_map(|text| TagValue::Text(Arc::from(text))),
        ]
    }

    proptest! {
        /// Any run of one kind of values comes back from its block, packed or plain, exactly,
        /// with every time and quality.
        #[test]
        fn a_block_keeps_every_sample_exactly(
            start in -10_000_000_000i64..10_000_000_000,
            steps in prop::collection::vec((0i64..100_000, prop::sample::select(vec![192u8, 64, 0])), 1..300),
            kind in 0usize..4,
            values in prop::collection::vec(value_of(), 300),
        ) {
            let wanted = [TagType::Number, TagType::Integer, TagType::Bool, TagType::String][kind];
            let of_kind: Vec<TagValue> = values.into_iter().filter(|value| kind_of(value) == wanted).collect();
            prop_assume!(!of_kind.is_empty());
            let mut time = start;
            let samples: Vec<HistorySample> = steps
                .iter()
                .zip(of_kind.iter().cycle())
                .map(|((gap, quality), value)| {
                    time += gap;
                    sample(time, value.clone(), *quality)
                })
                .collect();
            let packed = decode(&encode(&samples)).map_err(|error| TestCaseError::fail(error.to_string()))?;
            prop_assert_eq!(&packed, &samples);
            let plain = decode(&encode_plain(&samples)).map_err(|error| TestCaseError::fail(error.to_string()))?;
            prop_assert_eq!(&plain, &samples);
        }
    }

    #[test]
    fn a_steady_second_of_decimal_readings_takes_about_a_byte_a_sample() {
        let samples: Vec<HistorySample> = (0..BLOCK_SAMPLES as i64)
            .map(|second| {
                let reading =
                    50.0 + 20.0 * (second as f64 / 60.0).sin() + ((second * 7919 % 100) as f64 / 100.0);
                sample(
                    1_800_000_000_000 + second * 1000,
                    TagValue::Number((reading * 100.0).round() / 100.0),
                    192,
                )
            })
            .collect();
        let bytes = encode(&samples).len();
        assert!(
            bytes < BLOCK_SAMPLES * 2,
            "{bytes} bytes for {BLOCK_SAMPLES} samples"
        );
        let summary = BlockSummary::of(7, &samples);
        assert!(summary.exact);
        assert_eq!(summary.count, BLOCK_SAMPLES);
        let min = summary.min.expect("numbers have a minimum");
        assert_eq!(samples[min.at].value, TagValue::Number(min.value));
    }

    #[test]
    fn runs_split_at_the_limit_a_kind_change_a_late_sample_and_a_day() {
        let mut samples: Vec<HistorySample> = (0..BLOCK_SAMPLES as i64 + 2)
            .map(|ms| sample(ms, TagValue::Number(1.0), 192))
            .collect();
        samples.extend([
            sample(5_003, TagValue::Integer(4), 192),
            sample(4_000, TagValue::Integer(5), 192),
            sample(4_000 + MAX_BLOCK_SPAN_MS + 1, TagValue::Integer(6), 192),
        ]);
        let lengths: Vec<usize> = runs(samples.clone()).iter().map(Vec::len).collect();
        assert_eq!(lengths, [BLOCK_SAMPLES, 2, 1, 1, 1]);
        let blocks = blocks_of(samples);
        let sealed: Vec<bool> = blocks.iter().map(|block| block.sealed).collect();
        assert_eq!(sealed, [true, true, true, true, false]);
        let tail = decode(&blocks[4].data).expect("a plain block reads back");
        assert_eq!(
            tail,
            [sample(4_000 + MAX_BLOCK_SPAN_MS + 1, TagValue::Integer(6), 192)]
        );
    }

    #[test]
    fn a_tail_is_rewritten_when_it_fills_a_block_breaks_spans_a_day_or_has_many_pieces() {
        let new = |count: i64, from: i64| -> Vec<Vec<HistorySample>> {
            runs((from..from + count).map(|ms| sample(ms, TagValue::Number(1.0), 192)))
        };
        let tail = TailShape {
            blocks: 3,
            samples: 100,
            first: Some(0),
        };
        assert!(!tail.compacts(&new(10, 200)));
        assert!(tail.compacts(&new(BLOCK_SAMPLES as i64 - 100, 200)));
        assert!(TailShape { blocks: 16, ..tail }.compacts(&new(1, 200)));
        assert!(tail.compacts(&new(1, MAX_BLOCK_SPAN_MS + 1)));
        let mut broken = new(3, 200);
        broken.extend(new(1, 0));
        assert!(tail.compacts(&broken));
        assert!(!TailShape::default().compacts(&new(5, 0)));
    }
}
