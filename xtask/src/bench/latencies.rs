//! Latency samples of the in-process bench sides, summed up as the quantiles the reports carry.

use serde_json::{Value, json};

/// Latency samples in nanoseconds.
#[derive(Debug, Default)]
pub(crate) struct Latencies {
    nanos: Vec<u64>,
}

impl Latencies {
    pub(crate) fn push(&mut self, nanos: u64) {
        self.nanos.push(nanos);
    }

    pub(crate) fn len(&self) -> usize {
        self.nanos.len()
    }

    /// The sample at quantile `q` (0 to 1), in microseconds; 0 without samples.
    fn quantile_us(sorted: &[u64], q: f64) -> f64 {
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss,
            reason = "an index into the samples"
        )]
        let index = ((sorted.len() as f64 - 1.0) * q).round() as usize;
        sorted.get(index).map_or(0.0, |nanos| *nanos as f64 / 1000.0)
    }

    /// `samples`, `p50Us`, `p99Us` and `maxUs`.
    pub(crate) fn to_json(&self) -> Value {
        let mut sorted = self.nanos.clone();
        sorted.sort_unstable();
        json!({
            "samples": sorted.len(),
            "p50Us": Self::quantile_us(&sorted, 0.5),
            "p99Us": Self::quantile_us(&sorted, 0.99),
            "maxUs": Self::quantile_us(&sorted, 1.0),
        })
    }
}

impl FromIterator<u64> for Latencies {
    fn from_iter<I: IntoIterator<Item = u64>>(nanos: I) -> Self {
        Self {
            nanos: nanos.into_iter().collect(),
        }
    }
}
