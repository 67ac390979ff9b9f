//! The history journal: each flush's samples appended as one row, a cheap write that makes
//! them durable at once. A checkpoint folds the journal into blocks and empties it in one
//! transaction, so a sample is in the journal or in a block, never both, and a crash loses at
//! most what was not yet flushed.

use std::sync::Arc;

use plant_model::{Quality, TagValue};
use serde::{Deserialize, Serialize};

use super::{HistorySample, from_unix_millis, unix_millis};

/// Journal rows are folded into blocks once they hold this many samples...
pub(crate) const CHECKPOINT_SAMPLES: usize = 100_000;

/// ...or once the oldest of them is this old.
pub(crate) const CHECKPOINT_AGE: std::time::Duration = std::time::Duration::from_secs(60);

/// A journalled value (and a plain block's).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Value {
    Number(f64),
    Integer(i64),
    Bool(bool),
    Text(String),
}

impl Value {
    pub(crate) fn of(value: &TagValue) -> Self {
        match value {
            TagValue::Number(number) => Self::Number(*number),
            TagValue::Integer(integer) => Self::Integer(*integer),
            TagValue::Bool(flag) => Self::Bool(*flag),
            TagValue::Text(text) => Self::Text(text.to_string()),
        }
    }

    pub(crate) fn into_value(self) -> TagValue {
        match self {
            Self::Number(number) => TagValue::Number(number),
            Self::Integer(integer) => TagValue::Integer(integer),
            Self::Bool(flag) => TagValue::Bool(flag),
            Self::Text(text) => TagValue::Text(Arc::from(text)),
        }
    }
}

/// A journalled sample: its tag's id, time (ms since the epoch), quality and value.
#[derive(Debug, Serialize, Deserialize)]
struct Entry(i64, i64, u8, Value);

/// The bytes of one journal row holding `samples`, each with its tag's id.
pub(crate) fn encode<'a>(samples: impl IntoIterator<Item = (i64, &'a HistorySample)>) -> Vec<u8> {
    let entries: Vec<Entry> = samples
        .into_iter()
        .map(|(tag, sample)| {
            Entry(
                tag,
                unix_millis(sample.time),
                sample.quality.0,
                Value::of(&sample.value),
            )
        })
        .collect();
    // Serialising integers, floats and strings into a vector cannot fail.
    postcard::to_allocvec(&entries).unwrap_or_default()
}

/// The samples of one journal row, each with its tag's id, in the order flushed.
pub(crate) fn decode(bytes: &[u8]) -> Result<Vec<(i64, HistorySample)>, postcard::Error> {
    let entries: Vec<Entry> = postcard::from_bytes(bytes)?;
    Ok(entries
        .into_iter()
        .map(|Entry(tag, time, quality, value)| {
            (
                tag,
                HistorySample {
                    time: from_unix_millis(time),
                    value: value.into_value(),
                    quality: Quality(quality),
                },
            )
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_gives_back_its_samples_in_order() {
        let samples = [
            HistorySample {
                time: from_unix_millis(1_800_000_000_123),
                value: TagValue::Number(42.8),
                quality: Quality::GOOD,
            },
            HistorySample {
                time: from_unix_millis(-5),
                value: TagValue::Text(Arc::from("Manual")),
                quality: Quality(0),
            },
        ];
        let bytes = encode([(3, &samples[0]), (70_000, &samples[1])]);
        let decoded = decode(&bytes).expect("a row this build wrote");
        assert_eq!(
            decoded,
            vec![(3, samples[0].clone()), (70_000, samples[1].clone())]
        );
        assert!(decode(&bytes[..bytes.len() - 1]).is_err());
    }
}
