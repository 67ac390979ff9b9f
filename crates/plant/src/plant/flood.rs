//! Alarm floods (EEMUA 191, ISA-18.2): more annunciated activations within 10 minutes than the
//! solution's `AlarmFloodCount` puts the plant in a flood, which panels show with its first-out
//! alarm and the count, while every alarm is still recorded. A flood ends once the last 10
//! minutes hold half the count or fewer, so a rate hovering at the threshold does not flicker.

use std::collections::VecDeque;
use std::time::{Duration, SystemTime};

/// The window a flood is counted in.
pub(crate) const FLOOD_WINDOW: Duration = Duration::from_secs(600);

/// The most activations the watch remembers: a burst larger than this in 10 minutes is a flood
/// whatever the count, and the count says "at least".
const MAX_REMEMBERED: usize = 100_000;

/// A flood going on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlarmFlood {
    /// When its first alarm activated.
    pub since: SystemTime,
    /// Its first alarm (the first-out: often the cause of the rest).
    pub first_out: String,
    /// Alarms activated in the last 10 minutes.
    pub count: usize,
}

/// The activations of the last 10 minutes, and the flood they make.
#[derive(Debug, Default)]
pub(crate) struct FloodWatch {
    recent: VecDeque<(SystemTime, String)>,
    flood: Option<(SystemTime, String)>,
}

impl FloodWatch {
    /// An annunciated alarm activated at `time`; `threshold`: `AlarmFloodCount`.
    pub(crate) fn activated(&mut self, time: SystemTime, alarm: &str, threshold: usize) {
        if self.recent.len() == MAX_REMEMBERED {
            self.recent.pop_front();
        }
        self.recent.push_back((time, alarm.to_owned()));
        self.forget_before(time);
        if self.flood.is_none() && self.recent.len() > threshold {
            self.flood = self.recent.front().cloned();
        }
    }

    /// The flood at `now`, if one goes on (it ends once 10 minutes hold half the count or
    /// fewer).
    pub(crate) fn at(&mut self, now: SystemTime, threshold: usize) -> Option<AlarmFlood> {
        self.forget_before(now);
        if self.recent.len() <= threshold / 2 {
            self.flood = None;
        }
        let (since, first_out) = self.flood.clone()?;
        Some(AlarmFlood {
            since,
            first_out,
            count: self.recent.len(),
        })
    }

    fn forget_before(&mut self, now: SystemTime) {
        let Some(start) = now.checked_sub(FLOOD_WINDOW) else {
            return;
        };
        while self.recent.front().is_some_and(|(time, _)| *time < start) {
            self.recent.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + seconds)
    }

    #[test]
    fn more_than_the_count_in_ten_minutes_is_a_flood_until_half_of_it_is_left() {
        let mut watch = FloodWatch::default();
        for second in 0..10 {
            watch.activated(at(second * 30), &format!("A{second}"), 10);
        }
        assert_eq!(
            watch.at(at(300), 10),
            None,
            "10 in 10 minutes is not more than 10"
        );
        watch.activated(at(310), "A10", 10);
        let flood = watch.at(at(311), 10).expect("11 is a flood");
        assert_eq!(
            flood,
            AlarmFlood {
                since: at(0),
                first_out: "A0".into(),
                count: 11
            }
        );
        // At 10 min 30 s the first has left the window: 10, still more than half of 10.
        assert_eq!(watch.at(at(630), 10).map(|flood| flood.count), Some(10));
        // At 14 min 40 s only A10 is left: the flood is over, and a new one needs 11 again.
        assert_eq!(watch.at(at(880), 10), None);
        watch.activated(at(881), "B", 10);
        assert_eq!(watch.at(at(882), 10), None);
    }
}
