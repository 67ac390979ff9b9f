//! The trend of a window: which of its samples a history page keeps when there are more than
//! fit, by M4 (Jugel et al., VLDB 2014), so no excursion between two kept samples is hidden.
//! Whole blocks that fall inside one bucket are taken by their summaries, unread.

use super::block::{BlockSummary, ordered};
use super::{HistorySample, unix_millis};

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

    /// The bucket a time (unix milliseconds) falls in; none when every sample is kept.
    pub(crate) fn bucket_of(&self, time: i64) -> Option<usize> {
        if self.all {
            return None;
        }
        let offset = i128::from(time) - i128::from(self.from);
        Some(
            usize::try_from(
                (offset.max(0) * i128::try_from(self.buckets).unwrap_or(i128::MAX) / self.span)
                    .min(i128::try_from(self.buckets - 1).unwrap_or(0)),
            )
            .unwrap_or(0),
        )
    }

    /// The last time (unix milliseconds) that falls in bucket `index`: the next bucket starts
    /// at the first time whose offset times the bucket count reaches `(index + 1) * span`.
    /// `None` when every sample is kept or `index` is the last bucket (it runs to the end).
    pub(crate) fn bucket_end(&self, index: usize) -> Option<i64> {
        let buckets = i128::try_from(self.buckets).ok()?;
        let next = i128::try_from(index).ok()? + 1;
        if self.all || next >= buckets {
            return None;
        }
        let offset = (next * self.span + buckets - 1) / buckets;
        i64::try_from(i128::from(self.from) + offset - 1).ok()
    }

    /// The next sample of the window, the `at`-th, in time order.
    pub(crate) fn push(&mut self, at: usize, sample: HistorySample) {
        let Some(index) = self.bucket_of(unix_millis(sample.time)) else {
            self.kept.push(sample);
            return;
        };
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

    /// The next samples of the window, `at..at + block.count`, as a block whose summary is
    /// exact and which lies inside one bucket: its first, smallest, largest and last samples
    /// are all such a bucket keeps of it, so they go in alone, in time order.
    pub(crate) fn push_block(&mut self, at: usize, block: &BlockSummary) {
        let mut ends: Vec<(usize, i64, f64)> = Vec::with_capacity(4);
        ends.extend(block.first_value.map(|value| (0, block.first, value)));
        ends.extend(block.min.map(|min| (min.at, min.time, min.value)));
        ends.extend(block.max.map(|max| (max.at, max.time, max.value)));
        ends.extend(
            block
                .last_value
                .map(|value| (block.count.saturating_sub(1), block.last, value)),
        );
        ends.sort_by_key(|(offset, ..)| *offset);
        ends.dedup_by_key(|(offset, ..)| *offset);
        for (offset, time, value) in ends {
            self.push(at + offset, block.sample(time, value));
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::history::from_unix_millis;
    use plant_model::{Quality, TagValue};

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
        /// A bucket's end splits the times: those up to it fall in it or before, those after
        /// it in a later bucket (a window shorter than its bucket count leaves some empty).
        #[test]
        fn a_buckets_end_is_where_the_next_begins(
            from in -1_000_000i64..1_000_000,
            length in 0i64..40_000_000_000,
            max in 8usize..8_000,
            pick in 0.0f64..1.0,
        ) {
            let trend = Trend::new(usize::MAX, max, (from, from + length));
            let index = ((max / 4) as f64 * pick) as usize;
            match trend.bucket_end(index) {
                Some(end) => {
                    prop_assert!(trend.bucket_of(end) <= Some(index));
                    prop_assert!(trend.bucket_of(end + 1) > Some(index));
                    if length >= (max / 4) as i64 {
                        prop_assert_eq!(trend.bucket_of(end), Some(index));
                    }
                }
                None => prop_assert_eq!(index, max / 4 - 1),
            }
        }
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
