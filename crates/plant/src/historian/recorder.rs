//! Which of a tag's samples the historian keeps: every change is a candidate, none is dropped
//! for coming soon after another. By default a numeric tag's samples go through swinging-door
//! compression (the method of OSIsoft PI): a sample is stored only when the line from the last
//! stored one can no longer pass within the tag's deviation of every sample since, so a line
//! through the stored samples never departs from a received one by more than the deviation,
//! and every excursion past it is kept. A tag may ask instead for exception reporting (a value
//! that moved more than the deviation from the last stored) or every change. Other values are
//! stored when they change. A change of quality is always stored, and the value is stored again
//! at least every `max_interval` (by default [`MAX_INTERVAL`]) while samples come, so a flat
//! line still shows.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use plant_model::{Compression, HistoryRule, Quality, TagValue};

use crate::objects::TagSample;

/// The longest a tag that keeps receiving samples goes without one stored.
pub const MAX_INTERVAL: Duration = Duration::from_secs(600);

/// What one tag's recorder has seen.
#[derive(Debug, Clone)]
pub struct TagRecorder {
    /// The last sample stored.
    stored: TagSample,
    /// The last sample received since, not (yet) stored: the end of the current door.
    held: Option<TagSample>,
    /// The door from the stored sample: the lowest and highest slope (value per millisecond) a
    /// line from it may have and still pass within the deviation of every sample since.
    door: (f64, f64),
}

/// A sample's time in milliseconds since the epoch, as a number to draw lines with.
fn millis(time: SystemTime) -> f64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(since) => since.as_secs_f64() * 1000.0,
        Err(before) => -before.duration().as_secs_f64() * 1000.0,
    }
}

/// A value on a line: numbers and integers; booleans and text are stored on change.
fn on_a_line(value: &TagValue) -> Option<f64> {
    match value {
        TagValue::Number(number) if number.is_finite() => Some(*number),
        TagValue::Integer(integer) => Some(*integer as f64),
        _ => None,
    }
}

impl TagRecorder {
    /// The recorder of a tag whose first sample (stored) is `first`.
    pub fn new(first: &TagSample) -> Self {
        Self {
            stored: first.clone(),
            held: None,
            door: (f64::NEG_INFINITY, f64::INFINITY),
        }
    }

    /// Takes `sample`, received after the ones before, and says which samples to store now,
    /// oldest first: none, the one held until now, `sample` itself, or both.
    pub fn take(&mut self, sample: &TagSample, rule: &HistoryRule) -> Vec<TagSample> {
        let max_interval = Duration::from_secs(rule.max_interval);
        let mut store = Vec::new();
        let elapsed = sample
            .timestamp
            .duration_since(self.stored.timestamp)
            .unwrap_or_default();
        let quality_changed = sample.quality != self.stored.quality
            || self
                .held
                .as_ref()
                .is_some_and(|held| held.quality != sample.quality);
        let line = match (on_a_line(&self.stored.value), on_a_line(&sample.value)) {
            (Some(from), Some(to))
                if sample.quality == Quality::GOOD && self.stored.quality == Quality::GOOD =>
            {
                Some((from, to))
            }
            _ => None,
        };
        let dt = millis(sample.timestamp) - millis(self.stored.timestamp);
        let in_the_door = line.is_some_and(|(from, to)| {
            let slope = (to - from) / dt;
            dt > 0.0 && slope >= self.door.0 && slope <= self.door.1
        });
        if elapsed >= max_interval && !quality_changed && in_the_door {
            // Due again, and the line to it passes every sample since: it alone is stored.
            store.push(sample.clone());
            self.restart(sample);
            return store;
        }
        if quality_changed || elapsed >= max_interval || dt <= 0.0 {
            store.extend(self.held.take());
            store.push(sample.clone());
            self.restart(sample);
            return store;
        }
        let Some((from, to)) = line else {
            // Booleans, text, and anything not Good: stored when the value changes.
            return self.stored_on_change(sample, sample.value != self.stored.value);
        };
        let deviation = rule.deadband.max(0.0);
        let moved = match rule.compression {
            Compression::SwingingDoor => None,
            Compression::Deadband => Some((to - from).abs() > deviation),
            Compression::None => Some(to != from),
        };
        if let Some(moved) = moved {
            return self.stored_on_change(sample, moved);
        }
        let slope = (to - from) / dt;
        let (low, high) = self.door;
        if slope < low || slope > high {
            // Outside the door: the line from the stored sample to the one held is the last
            // that passes every sample since; the held one is stored and opens the next door.
            match self.held.take() {
                Some(held) => {
                    store.push(held.clone());
                    self.restart(&held);
                    return {
                        store.extend(self.take(sample, rule));
                        store
                    };
                }
                None => {
                    store.push(sample.clone());
                    self.restart(sample);
                    return store;
                }
            }
        }
        self.door = (
            low.max((to - deviation - from) / dt),
            high.min((to + deviation - from) / dt),
        );
        self.held = Some(sample.clone());
        store
    }

    /// What storing on change keeps of `sample`: when it `changed`, the sample held before it
    /// (so the step shows) and itself; else nothing, holding it.
    fn stored_on_change(&mut self, sample: &TagSample, changed: bool) -> Vec<TagSample> {
        if !changed {
            self.held = Some(sample.clone());
            return Vec::new();
        }
        let mut store: Vec<TagSample> = self.held.take().into_iter().collect();
        store.push(sample.clone());
        self.restart(sample);
        store
    }

    /// Starts anew from `stored`, the sample just stored.
    fn restart(&mut self, stored: &TagSample) {
        self.stored = stored.clone();
        self.held = None;
        self.door = (f64::NEG_INFINITY, f64::INFINITY);
    }

    /// Ends the current line at the sample held, if any, and says it is to be stored: a
    /// reader of the history then sees the line up to the last sample taken. Storing one more
    /// sample keeps every line within the deviation.
    pub(crate) fn close(&mut self) -> Option<TagSample> {
        let held = self.held.take()?;
        self.restart(&held);
        Some(held)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn at(ms: u64, value: f64) -> TagSample {
        TagSample {
            value: TagValue::Number(value),
            quality: Quality::GOOD,
            timestamp: UNIX_EPOCH + Duration::from_millis(ms),
        }
    }

    /// Feeds `samples` (the first stored as it comes) and ends with the held one stored: what
    /// a recorder stores of them.
    fn stored(samples: &[TagSample], deviation: f64) -> Vec<TagSample> {
        stored_as(samples, Compression::SwingingDoor, deviation)
    }

    fn stored_as(samples: &[TagSample], compression: Compression, deviation: f64) -> Vec<TagSample> {
        let rule = HistoryRule {
            retention_hours: None,
            deadband: deviation,
            compression,
            max_interval: MAX_INTERVAL.as_secs(),
        };
        let mut recorder = TagRecorder::new(&samples[0]);
        let mut kept = vec![samples[0].clone()];
        for sample in &samples[1..] {
            kept.extend(recorder.take(sample, &rule));
        }
        kept.extend(recorder.close());
        kept
    }

    #[test]
    fn exception_reporting_keeps_each_move_past_the_deadband_and_the_sample_before_it() {
        let samples = [
            at(0, 10.0),
            at(1000, 10.3),
            at(2000, 10.4),
            at(3000, 12.0),
            at(4000, 12.1),
        ];
        assert_eq!(
            values(&stored_as(&samples, Compression::Deadband, 0.5)),
            [10.0, 10.4, 12.0, 12.1]
        );
        assert_eq!(
            values(&stored_as(&samples, Compression::None, 0.5)),
            [10.0, 10.3, 10.4, 12.0, 12.1]
        );
    }

    fn values(samples: &[TagSample]) -> Vec<f64> {
        samples
            .iter()
            .filter_map(|sample| on_a_line(&sample.value))
            .collect()
    }

    #[test]
    fn a_one_second_excursion_is_stored() {
        let samples = [
            at(0, 11.0),
            at(1_000, 150.0),
            at(2_000, 12.0),
            at(3_000, 13.0),
            at(15_000, 14.0),
        ];
        assert_eq!(values(&stored(&samples, 0.5)), [11.0, 150.0, 12.0, 13.0, 14.0]);
    }

    #[test]
    fn a_straight_line_is_its_ends() {
        let samples: Vec<TagSample> = (0..100)
            .map(|second| at(second * 1000, second as f64 * 0.5))
            .collect();
        assert_eq!(values(&stored(&samples, 0.01)), [0.0, 49.5]);
    }

    #[test]
    fn a_flat_line_is_stored_again_every_max_interval() {
        let samples: Vec<TagSample> = (0..=1_800).map(|second| at(second * 1000, 7.0)).collect();
        let kept = stored(&samples, 0.0);
        let seconds: Vec<u64> = kept
            .iter()
            .map(|sample| {
                sample
                    .timestamp
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |since| since.as_secs())
            })
            .collect();
        assert_eq!(seconds, [0, 600, 1_200, 1_800]);
    }

    #[test]
    fn a_change_of_quality_and_of_text_is_stored() {
        let mut bad = at(2_000, 5.0);
        bad.quality = Quality::BAD;
        let samples = [at(0, 5.0), at(1_000, 5.0), bad, at(3_000, 5.0)];
        assert_eq!(stored(&samples, 1.0).len(), 4, "the held 5.0, Bad, Good again");
        let text = |ms: u64, text: &str| TagSample {
            value: TagValue::Text(text.into()),
            quality: Quality::GOOD,
            timestamp: UNIX_EPOCH + Duration::from_millis(ms),
        };
        let modes = [
            text(0, "Auto"),
            text(1_000, "Auto"),
            text(2_000, "Manual"),
            text(3_000, "Manual"),
        ];
        let kept: Vec<TagValue> = stored(&modes, 0.0)
            .into_iter()
            .map(|sample| sample.value)
            .collect();
        assert_eq!(
            kept,
            [
                TagValue::Text("Auto".into()),
                TagValue::Text("Auto".into()),
                TagValue::Text("Manual".into()),
                TagValue::Text("Manual".into())
            ],
            "the last Auto before the change, the change, and the held end"
        );
    }

    proptest! {
        /// For any series and deviation, the line through the stored samples passes within the
        /// deviation of every sample received.
        #[test]
        fn the_stored_line_never_departs_from_a_sample_by_more_than_the_deviation(
            steps in prop::collection::vec((1u64..20_000, -1.0e3f64..1.0e3), 2..400),
            deviation in 0.0f64..50.0,
        ) {
            let mut time = 0;
            let samples: Vec<TagSample> = steps
                .iter()
                .map(|(gap, value)| {
                    time += gap;
                    at(time, *value)
                })
                .collect();
            let kept = stored(&samples, deviation);
            prop_assert!(kept.windows(2).all(|pair| pair[0].timestamp < pair[1].timestamp));
            for sample in &samples {
                let t = millis(sample.timestamp);
                let after = kept.iter().position(|kept| millis(kept.timestamp) >= t).expect("the last is kept");
                let line = if millis(kept[after].timestamp) == t {
                    on_a_line(&kept[after].value).expect("a number")
                } else {
                    let (a, b) = (&kept[after - 1], &kept[after]);
                    let (ta, tb) = (millis(a.timestamp), millis(b.timestamp));
                    let (va, vb) = (on_a_line(&a.value).expect("a number"), on_a_line(&b.value).expect("a number"));
                    va + (vb - va) * (t - ta) / (tb - ta)
                };
                let value = on_a_line(&sample.value).expect("a number");
                prop_assert!(
                    (line - value).abs() <= deviation + 1e-6 * value.abs().max(1.0),
                    "{value} at {t}: the line says {line} (deviation {deviation})"
                );
            }
        }
    }
}
