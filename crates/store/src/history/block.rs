//! A history block: up to [`BLOCK_SAMPLES`] samples of one tag in time order, stored as one
//! compressed value with a summary beside it (count, first, last, min, max, sum), so a long
//! window reads summaries and decodes only the blocks it must cut.
//!
//! Times and numbers are columns compressed by pco (delta encoding finds a steady sample
//! period; float-multiple detection finds a transmitter's fixed decimals); qualities are runs,
//! since they rarely change; text is kept as it came.

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

/// A block as stored.
#[derive(Debug, Serialize, Deserialize)]
struct Encoded {
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

/// The encoded bytes of `samples` (time-ordered, all of one kind).
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
    let encoded = Encoded {
        times: column(pco::standalone::simple_compress(&times, &config)),
        qualities,
        values,
    };
    // Serialising owned bytes, strings and integers into a vector cannot fail.
    postcard::to_allocvec(&encoded).unwrap_or_default()
}

/// The samples of an encoded block, in time order.
pub(crate) fn decode(bytes: &[u8]) -> Result<Vec<HistorySample>, BlockError> {
    let encoded: Encoded = postcard::from_bytes(bytes)?;
    let times: Vec<i64> = pco::standalone::simple_decompress(&encoded.times)?;
    let values: Vec<TagValue> = match encoded.values {
        Values::Number(column) => pco::standalone::simple_decompress::<f64>(&column)?
            .into_iter()
            .map(TagValue::Number)
            .collect(),
        Values::Integer(column) => pco::standalone::simple_decompress::<i64>(&column)?
            .into_iter()
            .map(TagValue::Integer)
            .collect(),
        Values::Bool(column) => pco::standalone::simple_decompress::<u32>(&column)?
            .into_iter()
            .map(|flag| TagValue::Bool(flag != 0))
            .collect(),
        Values::Text(texts) => texts
            .into_iter()
            .map(|text| TagValue::Text(Arc::from(text)))
            .collect(),
    };
    if times.len() != values.len() {
        return Err(BlockError::Length {
            times: times.len(),
            values: values.len(),
        });
    }
    let qualities = encoded
        .qualities
        .iter()
        .flat_map(|&(run, quality)| std::iter::repeat_n(Quality(quality), run as usize))
        .chain(std::iter::repeat(Quality::GOOD));
    Ok(times
        .into_iter()
        .zip(values)
        .zip(qualities)
        .map(|((time, value), quality)| HistorySample {
            time: super::from_unix_millis(time),
            value,
            quality,
        })
        .collect())
}

/// How a tag's new samples go into blocks after its `open` one (its last stored block, when
/// it has room): the blocks to write, each with the row it replaces (the open block's) or
/// none (a new row). A block holds one kind of value, in time order, at most
/// [`BLOCK_SAMPLES`] over at most [`MAX_BLOCK_SPAN_MS`]; a sample older than the one before it starts a block of its own, so a
/// source's late sample is kept, never dropped or reordered into stored data.
pub(crate) fn fold(
    open: Option<(i64, Vec<HistorySample>)>,
    new: impl IntoIterator<Item = HistorySample>,
) -> Vec<(Option<i64>, Vec<HistorySample>)> {
    let mut blocks: Vec<(Option<i64>, Vec<HistorySample>)> = Vec::new();
    if let Some((id, samples)) = open {
        blocks.push((Some(id), samples));
    }
    let mut changed = blocks.len();
    for sample in new {
        let fits = blocks.last().is_some_and(|(_, samples)| {
            samples.len() < BLOCK_SAMPLES
                && samples.first().is_some_and(|first| {
                    unix_millis(sample.time) - unix_millis(first.time) <= MAX_BLOCK_SPAN_MS
                })
                && samples.last().is_some_and(|last| {
                    last.time <= sample.time && kind_of(&last.value) == kind_of(&sample.value)
                })
        });
        if fits {
            if let Some((_, samples)) = blocks.last_mut() {
                samples.push(sample);
            }
            changed = changed.min(blocks.len() - 1);
        } else {
            blocks.push((None, vec![sample]));
            changed = changed.min(blocks.len() - 1);
        }
    }
    // An open block nothing was added to stays as stored.
    blocks.split_off(changed.min(blocks.len()))
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
        /// Any run of one kind of values comes back from its block exactly, with every time
        /// and quality.
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
            let decoded = decode(&encode(&samples)).map_err(|error| TestCaseError::fail(error.to_string()))?;
            prop_assert_eq!(decoded, samples);
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
    fn folding_continues_the_open_block_and_splits_at_the_limit_a_kind_change_and_a_late_sample() {
        let open: Vec<HistorySample> = (0..BLOCK_SAMPLES as i64 - 2)
            .map(|ms| sample(ms, TagValue::Number(1.0), 192))
            .collect();
        let new = vec![
            sample(5_000, TagValue::Number(2.0), 192),
            sample(5_001, TagValue::Number(3.0), 192),
            sample(5_002, TagValue::Number(4.0), 192),
            sample(5_003, TagValue::Integer(4), 192),
            sample(4_000, TagValue::Integer(5), 192),
        ];
        let blocks = fold(Some((9, open)), new);
        let shape: Vec<(Option<i64>, usize)> =
            blocks.iter().map(|(id, samples)| (*id, samples.len())).collect();
        assert_eq!(shape, [(Some(9), BLOCK_SAMPLES), (None, 1), (None, 1), (None, 1)]);
        assert!(fold(Some((9, vec![sample(0, TagValue::Bool(true), 192)])), Vec::new()).is_empty());
        let full: Vec<HistorySample> = (0..BLOCK_SAMPLES as i64)
            .map(|ms| sample(ms, TagValue::Number(1.0), 192))
            .collect();
        let after_full = fold(Some((3, full)), [sample(9_999, TagValue::Number(1.0), 192)]);
        assert_eq!(after_full.len(), 1);
        assert_eq!(after_full[0].0, None);
    }
}
