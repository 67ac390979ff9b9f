//! Aggregates of a tag's history per interval of a window: how many samples, the first, last,
//! smallest and largest, the time-weighted average and, for booleans and text, how long the
//! tag held each value. The window's samples are read once in time order, after the last one
//! before the window (the value the window opens with).

use std::time::{Duration, SystemTime};

use plant_model::{Quality, TagType, TagValue};

use super::block::ordered;
use super::{HistorySample, from_unix_millis, unix_millis};

/// The most intervals one query answers.
pub const MAX_HISTORY_INTERVALS: usize = 10_000;

/// The most values one interval names the time in; the time in any further value is summed in
/// [`HistoryInterval::other_states`].
pub const MAX_INTERVAL_STATES: usize = 32;

/// The aggregates of one interval of a window.
///
/// Between two samples a number tag moves along the line between them (as the trend draws it,
/// and as swinging-door compression keeps it within its deviation of every reading); any other
/// tag holds its value until the next sample. The window opens with the last sample before it
/// and its last line goes to the first sample after it; after the tag's last sample of all the
/// value holds to the window's end, or to now when the window reaches past it. Time from a sample of bad or
/// uncertain quality to the next counts in no average or state.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryInterval {
    /// Where the interval starts (included).
    pub start: SystemTime,
    /// Where it ends (excluded): the next interval's start, or just after the window's end.
    pub end: SystemTime,
    /// How many samples were recorded in it.
    pub count: usize,
    /// Its first sample.
    pub first: Option<HistorySample>,
    /// Its last sample.
    pub last: Option<HistorySample>,
    /// Its smallest sample (the first of equals; none for text).
    pub min: Option<HistorySample>,
    /// Its largest sample (the first of equals; none for text).
    pub max: Option<HistorySample>,
    /// The time-weighted average of its good time (none for text, or when no time was good).
    pub average: Option<f64>,
    /// How long in it the value was known and of good quality.
    pub good: Duration,
    /// Booleans and text: how long in it the tag held each value (of good quality), in the
    /// order the values were first held; at most [`MAX_INTERVAL_STATES`] of them.
    pub states: Vec<(TagValue, Duration)>,
    /// Time in values past the first [`MAX_INTERVAL_STATES`].
    pub other_states: Duration,
}

/// One interval's aggregates so far.
#[derive(Debug, Default)]
struct Accumulating {
    count: usize,
    first: Option<HistorySample>,
    last: Option<HistorySample>,
    min: Option<(f64, HistorySample)>,
    max: Option<(f64, HistorySample)>,
    area: f64,
    good_ms: i64,
    states: Vec<(TagValue, i64)>,
    other_ms: i64,
}

impl Accumulating {
    fn add_sample(&mut self, sample: &HistorySample) {
        self.count += 1;
        if self.first.is_none() {
            self.first = Some(sample.clone());
        }
        if let Some(key) = ordered(&sample.value) {
            if self.min.as_ref().is_none_or(|(min, _)| key < *min) {
                self.min = Some((key, sample.clone()));
            }
            if self.max.as_ref().is_none_or(|(max, _)| key > *max) {
                self.max = Some((key, sample.clone()));
            }
        }
        self.last = Some(sample.clone());
    }

    fn add_state(&mut self, value: &TagValue, ms: i64) {
        if let Some((_, time)) = self.states.iter_mut().find(|(held, _)| held == value) {
            *time += ms;
        } else if self.states.len() < MAX_INTERVAL_STATES {
            self.states.push((value.clone(), ms));
        } else {
            self.other_ms += ms;
        }
    }
}

/// How many intervals of `step` milliseconds cut the window `from..=to`: its length over the
/// step, rounded up, at least one; the last interval also holds the window's last instant, so a
/// window a whole number of steps long has that many intervals, not one more of a millisecond.
pub fn interval_count((from, to): (i64, i64), step: i64) -> usize {
    let span = i128::from(to.max(from)) - i128::from(from);
    let step = i128::from(step.max(1));
    usize::try_from((span + step - 1) / step)
        .unwrap_or(usize::MAX)
        .max(1)
}

/// The aggregates of a window `from..=to` per interval of `step` milliseconds, fed its samples
/// in time order.
#[derive(Debug)]
pub(crate) struct IntervalFold {
    kind: TagType,
    from: i64,
    /// Just after the window's end.
    end: i64,
    /// Where the value after the last sample stops holding.
    held_until: i64,
    step: i64,
    intervals: Vec<Accumulating>,
    /// The latest sample so far: the value from its time on.
    latest: Option<HistorySample>,
}

impl IntervalFold {
    /// For the window `from..=to` (unix milliseconds, `from <= to`) cut into
    /// [`interval_count`] intervals of `step` milliseconds (the last one shorter when the window
    /// is not a multiple; a step that would make more than [`MAX_HISTORY_INTERVALS`] is widened
    /// to make that many), of a
    /// tag of `kind`, read at `now`; `opening` is the last sample before the window.
    pub(crate) fn new(
        kind: TagType,
        (from, to): (i64, i64),
        step: i64,
        now: i64,
        opening: Option<HistorySample>,
    ) -> Self {
        let end = to.saturating_add(1).max(from.saturating_add(1));
        let count = interval_count((from, to), step);
        let most = MAX_HISTORY_INTERVALS as i128;
        let span = i128::from(to.max(from)) - i128::from(from);
        let (step, count) = if count > MAX_HISTORY_INTERVALS {
            let step = (span + most - 1) / most;
            (
                step,
                usize::try_from((span + step - 1) / step)
                    .unwrap_or(MAX_HISTORY_INTERVALS)
                    .max(1),
            )
        } else {
            (i128::from(step.max(1)), count)
        };
        Self {
            kind,
            from,
            end,
            held_until: now.clamp(from, end),
            step: i64::try_from(step).unwrap_or(i64::MAX),
            intervals: (0..count).map(|_| Accumulating::default()).collect(),
            latest: opening,
        }
    }

    /// Where interval `index` starts and ends (excluded): the last one ends with the window.
    fn bounds(&self, index: usize) -> (i64, i64) {
        let start = self
            .from
            .saturating_add(self.step.saturating_mul(i64::try_from(index).unwrap_or(i64::MAX)));
        if index + 1 >= self.intervals.len() {
            (start, self.end)
        } else {
            (start, start.saturating_add(self.step).min(self.end))
        }
    }

    /// The interval `time` (inside the window) falls in.
    fn interval_of(&self, time: i64) -> usize {
        let index = (i128::from(time) - i128::from(self.from)) / i128::from(self.step);
        usize::try_from(index)
            .unwrap_or(0)
            .min(self.intervals.len().saturating_sub(1))
    }

    /// Adds the window's next sample (in time order; one outside the window is only the value
    /// from its time on).
    pub(crate) fn push(&mut self, sample: HistorySample) {
        let time = unix_millis(sample.time);
        if let Some(latest) = self.latest.take() {
            self.hold(&latest, Some(&sample), time);
        }
        if (self.from..self.end).contains(&time) {
            let interval = self.interval_of(time);
            self.intervals[interval].add_sample(&sample);
        }
        self.latest = Some(sample);
    }

    /// Counts the time from `sample` to `until` (clipped to the window), moving towards `next`
    /// for a number tag whose both ends are good.
    fn hold(&mut self, sample: &HistorySample, next: Option<&HistorySample>, until: i64) {
        if sample.quality != Quality::GOOD {
            return;
        }
        let since = unix_millis(sample.time);
        let (start, stop) = (since.max(self.from), until.min(self.end));
        if start >= stop {
            return;
        }
        let at_since = ordered(&sample.value);
        let at_until = match next {
            Some(next) if self.kind == TagType::Number && next.quality == Quality::GOOD => {
                ordered(&next.value).or(at_since)
            }
            _ => at_since,
        };
        // The value along the line from (since, at_since) to (until, at_until).
        let value_at = |time: i64| -> Option<f64> {
            let (low, high) = (at_since?, at_until?);
            if until == since {
                return Some(low);
            }
            Some(low + (high - low) * ((time - since) as f64 / (until - since) as f64))
        };
        let states = matches!(self.kind, TagType::Bool | TagType::String);
        let mut piece_start = start;
        while piece_start < stop {
            let index = self.interval_of(piece_start);
            // Past `piece_start`, as `piece_start` is inside the window: so each turn moves on.
            let piece_end = self.bounds(index).1.min(stop);
            let length = piece_end - piece_start;
            let interval = &mut self.intervals[index];
            interval.good_ms += length;
            if let (Some(a), Some(b)) = (value_at(piece_start), value_at(piece_end)) {
                interval.area += (a + b) / 2.0 * length as f64;
            }
            if states {
                interval.add_state(&sample.value, length);
            }
            piece_start = piece_end;
        }
    }

    /// Each interval's aggregates, in time order; `closing` is the first sample after the
    /// window, which the last sample's line goes to.
    pub(crate) fn finish(mut self, closing: Option<HistorySample>) -> Vec<HistoryInterval> {
        if let Some(latest) = self.latest.take() {
            match closing {
                Some(closing) => {
                    let until = unix_millis(closing.time);
                    self.hold(&latest, Some(&closing), until);
                }
                None => {
                    let until = self.held_until;
                    self.hold(&latest, None, until);
                }
            }
        }
        let bounds: Vec<(i64, i64)> = (0..self.intervals.len())
            .map(|index| self.bounds(index))
            .collect();
        let kind = self.kind;
        self.intervals
            .into_iter()
            .zip(bounds)
            .map(|(interval, (start, end))| HistoryInterval {
                start: from_unix_millis(start),
                end: from_unix_millis(end),
                count: interval.count,
                first: interval.first,
                last: interval.last,
                min: interval.min.map(|(_, sample)| sample),
                max: interval.max.map(|(_, sample)| sample),
                average: (kind != TagType::String && interval.good_ms > 0)
                    .then(|| interval.area / interval.good_ms as f64),
                good: Duration::from_millis(interval.good_ms.unsigned_abs()),
                states: interval
                    .states
                    .into_iter()
                    .map(|(value, ms)| (value, Duration::from_millis(ms.unsigned_abs())))
                    .collect(),
                other_states: Duration::from_millis(interval.other_ms.unsigned_abs()),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn at(ms: i64, value: TagValue) -> HistorySample {
        HistorySample {
            time: from_unix_millis(ms),
            value,
            quality: Quality::GOOD,
        }
    }

    fn fold(
        kind: TagType,
        window: (i64, i64),
        step: i64,
        now: i64,
        opening: Option<HistorySample>,
        samples: &[HistorySample],
    ) -> Vec<HistoryInterval> {
        let mut fold = IntervalFold::new(kind, window, step, now, opening);
        for sample in samples {
            fold.push(sample.clone());
        }
        fold.finish(None)
    }

    #[test]
    fn a_number_moves_along_the_line_between_samples() {
        // 0 at 0 s, 10 at 10 s, then held at 10 until 20 s: the first 10 s average 5, the
        // next 10 s average 10.
        let samples = [at(0, TagValue::Number(0.0)), at(10_000, TagValue::Number(10.0))];
        let intervals = fold(TagType::Number, (0, 19_999), 10_000, i64::MAX, None, &samples);
        assert_eq!(intervals.len(), 2);
        assert_eq!(intervals[0].average, Some(5.0));
        assert_eq!(intervals[0].count, 1);
        assert_eq!(intervals[1].average, Some(10.0));
        assert_eq!(intervals[1].good, Duration::from_secs(10));
        assert_eq!(intervals[1].first, Some(samples[1].clone()));
    }

    #[test]
    fn the_value_before_the_window_opens_it_and_an_integer_steps() {
        let opening = at(-5_000, TagValue::Integer(4));
        let samples = [at(2_000, TagValue::Integer(8))];
        let intervals = fold(
            TagType::Integer,
            (0, 3_999),
            4_000,
            i64::MAX,
            Some(opening),
            &samples,
        );
        assert_eq!(intervals.len(), 1);
        // 4 for 2 s, then 8 for 2 s.
        assert_eq!(intervals[0].average, Some(6.0));
        assert_eq!(intervals[0].count, 1);
        assert_eq!(intervals[0].min, Some(samples[0].clone()));
    }

    #[test]
    fn time_in_each_state_and_bad_time_counted_in_none() {
        let mut bad = at(6_000, TagValue::Bool(false));
        bad.quality = Quality(0);
        let samples = [
            at(0, TagValue::Bool(true)),
            at(4_000, TagValue::Bool(false)),
            bad,
            at(8_000, TagValue::Bool(true)),
        ];
        let intervals = fold(TagType::Bool, (0, 9_999), 10_000, i64::MAX, None, &samples);
        let states = &intervals[0].states;
        assert_eq!(
            states,
            &vec![
                (TagValue::Bool(true), Duration::from_millis(4_000 + 2_000)),
                (TagValue::Bool(false), Duration::from_millis(2_000)),
            ]
        );
        assert_eq!(intervals[0].good, Duration::from_millis(8_000));
        assert_eq!(intervals[0].average, Some(0.75));
    }

    #[test]
    fn the_last_value_holds_until_now_not_past_it() {
        let samples = [at(0, TagValue::Number(2.0))];
        let intervals = fold(TagType::Number, (0, 9_999), 5_000, 7_000, None, &samples);
        assert_eq!(intervals[0].good, Duration::from_millis(5_000));
        assert_eq!(intervals[1].good, Duration::from_millis(2_000));
        assert_eq!(intervals[1].average, Some(2.0));
        assert_eq!(intervals[1].count, 0);
    }

    #[test]
    fn a_window_of_whole_steps_has_that_many_intervals_the_last_holding_its_end() {
        let samples = [at(0, TagValue::Number(1.0)), at(20_000, TagValue::Number(3.0))];
        let intervals = fold(TagType::Number, (0, 20_000), 10_000, i64::MAX, None, &samples);
        assert_eq!(intervals.len(), 2);
        assert_eq!(intervals[1].end, from_unix_millis(20_001));
        assert_eq!(intervals[1].count, 1, "the sample at the window's end");
        assert_eq!(interval_count((5, 5), 1_000), 1);
    }

    #[test]
    fn a_step_that_makes_too_many_intervals_is_widened() {
        let intervals = fold(TagType::Number, (0, 999_999), 1, i64::MAX, None, &[]);
        assert_eq!(intervals.len(), MAX_HISTORY_INTERVALS);
        assert_eq!(intervals[0].end, from_unix_millis(100));
        assert!(intervals.iter().all(|interval| interval.average.is_none()));
    }

    proptest! {
        /// Counts, extremes and good time agree with the samples of each interval taken alone,
        /// and the average lies between the interval's bounds.
        #[test]
        fn each_interval_agrees_with_its_own_samples(
            steps in prop::collection::vec((1i64..5_000, -100.0f64..100.0), 1..300),
            step in 500i64..50_000,
            whole in any::<bool>(),
        ) {
            let mut time = 0;
            let samples: Vec<HistorySample> = steps
                .iter()
                .map(|(gap, value)| {
                    time += gap;
                    at(time, TagValue::Number(*value))
                })
                .collect();
            // Some windows a whole number of steps long, whose last instant the last interval
            // holds.
            let window = (1, if whole { 1 + step * ((time - 1 + step - 1) / step).max(1) } else { time });
            let intervals = fold(TagType::Number, window, step, i64::MAX, None, &samples);
            prop_assert_eq!(intervals.len(), interval_count(window, step));
            let mut counted = 0;
            let mut good = Duration::ZERO;
            for interval in &intervals {
                let (start, end) = (unix_millis(interval.start), unix_millis(interval.end));
                let inside: Vec<&HistorySample> = samples
                    .iter()
                    .filter(|sample| (start..end).contains(&unix_millis(sample.time)))
                    .collect();
                prop_assert_eq!(interval.count, inside.len());
                counted += inside.len();
                good += interval.good;
                let keys: Vec<f64> = inside.iter().filter_map(|sample| ordered(&sample.value)).collect();
                if let Some(min) = keys.iter().copied().reduce(f64::min) {
                    prop_assert_eq!(interval.min.as_ref().and_then(|sample| ordered(&sample.value)), Some(min));
                }
                if let Some(average) = interval.average {
                    let all: Vec<f64> = samples.iter().filter_map(|sample| ordered(&sample.value)).collect();
                    let low = all.iter().copied().fold(f64::INFINITY, f64::min);
                    let high = all.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    prop_assert!(average >= low - 1e-9 && average <= high + 1e-9);
                }
            }
            prop_assert_eq!(counted, samples.len());
            // The first sample opens the good time; it lasts to the window's end.
            let first = unix_millis(samples[0].time);
            prop_assert_eq!(good, Duration::from_millis((window.1 + 1 - first.max(1)).unsigned_abs()));
        }
    }
}
