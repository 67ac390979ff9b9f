//! How the alarm system performs over a window of the alarm history (EEMUA 191, ISA-18.2's
//! monitoring and assessment): alarms per 10 minutes on average and at peak, the time in flood,
//! the most frequent alarms, chattering and stale ones, the priority mix against 80/15/5, how
//! soon alarms are acknowledged, and how many were shelved, suppressed or out of service. The
//! numbers follow from the recorded events alone; the report, the panel's page and the
//! assistant's tool all read them from here.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use plant_model::{AlarmEvent, AlarmEventKind};
use serde_json::{Value, json};
use store::AlarmRecord;

use crate::objects::Chatter;

/// The period alarm rates and floods are counted in.
pub const PERIOD: Duration = Duration::from_secs(600);
/// In alarm longer than this at the window's end, an alarm is stale.
pub const STALE_AFTER: Duration = Duration::from_secs(24 * 3600);
/// How many of the most frequent alarms a report lists.
pub const MOST_FREQUENT: usize = 10;
/// The most events a report reads: a window holding more is reported on its first ones, and
/// says so.
pub const MAX_REPORT_EVENTS: usize = 1_000_000;
/// The longest window a report covers: a year (a window of a year has 52,560 periods).
pub const MAX_REPORT_WINDOW: Duration = Duration::from_secs(366 * 24 * 3600);

/// A priority's band, as the panel colours it: what the 80/15/5 mix is judged on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PriorityBand {
    /// Below 600.
    Low,
    /// 600 to 799.
    High,
    /// 800 and above.
    Urgent,
}

impl PriorityBand {
    /// Every band, least urgent first.
    pub const ALL: [Self; 3] = [Self::Low, Self::High, Self::Urgent];

    /// The band of a priority (1 to 1000).
    pub fn of(priority: u32) -> Self {
        match priority {
            800.. => Self::Urgent,
            600..=799 => Self::High,
            _ => Self::Low,
        }
    }

    /// `low`, `high` or `urgent`.
    pub fn label(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::High => "high",
            Self::Urgent => "urgent",
        }
    }

    /// The share of annunciated alarms EEMUA 191 suggests for it, in percent.
    pub fn target_percent(self) -> f64 {
        match self {
            Self::Low => 80.0,
            Self::High => 15.0,
            Self::Urgent => 5.0,
        }
    }
}

/// One alarm and a count of it.
#[derive(Debug, Clone, PartialEq)]
pub struct AlarmCount {
    /// The alarm's name.
    pub alarm: String,
    /// What it says (its last recorded message).
    pub message: String,
    /// Activations (most frequent) or chattering episodes (chattering).
    pub count: u64,
}

/// An alarm in alarm at the window's end for longer than [`STALE_AFTER`].
#[derive(Debug, Clone, PartialEq)]
pub struct StaleAlarm {
    /// The alarm's name.
    pub alarm: String,
    /// What it says.
    pub message: String,
    /// Since when it has been in alarm.
    pub since: SystemTime,
}

/// How often a kind of handling happened: to how many alarms, how many times.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandlingCount {
    /// Alarms handled so at some time in the window (at its start too).
    pub alarms: usize,
    /// Times it began within the window.
    pub times: u64,
}

/// The report of a window.
#[derive(Debug, Clone, PartialEq)]
pub struct AlarmReport {
    /// The window's start.
    pub from: SystemTime,
    /// The window's end.
    pub until: SystemTime,
    /// The events the report read, and how many the window holds (more: the report covers
    /// the first ones read).
    pub events_read: usize,
    /// See `events_read`.
    pub events_total: usize,
    /// Every activation, annunciated or not.
    pub activations: u64,
    /// Activations presented to the operator: not shelved, suppressed or out of service.
    pub annunciated: u64,
    /// Annunciated activations in each [`PERIOD`] of the window, from its start (the last
    /// period may be shorter).
    pub per_period: Vec<u32>,
    /// The most annunciated activations within any [`PERIOD`], and when that span began.
    pub peak: u64,
    /// See `peak`.
    pub peak_at: Option<SystemTime>,
    /// More than this many annunciated activations in a period is a flood (`AlarmFloodCount`).
    pub flood_count: u32,
    /// The most frequent alarms, most first (ties by name), at most [`MOST_FREQUENT`].
    pub most_frequent: Vec<AlarmCount>,
    /// The alarms that chattered (3 trips within 60 s), with how many times they began to.
    pub chattering: Vec<AlarmCount>,
    /// The stale alarms, oldest first.
    pub stale: Vec<StaleAlarm>,
    /// Annunciated activations by priority band, in [`PriorityBand::ALL`]'s order.
    pub priorities: [u64; 3],
    /// How long each acknowledged annunciated activation waited for its acknowledgement.
    pub acknowledge_delays: Vec<Duration>,
    /// Annunciated activations never acknowledged before their alarm activated again or the
    /// window ended.
    pub unacknowledged: u64,
    /// Shelvings.
    pub shelved: HandlingCount,
    /// Suppressions by design.
    pub suppressed: HandlingCount,
    /// Removals from service.
    pub out_of_service: HandlingCount,
}

/// How one alarm stands while the events are replayed.
#[derive(Debug, Default)]
struct Track {
    in_alarm_since: Option<SystemTime>,
    shelved: bool,
    out_of_service: bool,
    suppressed: bool,
    /// The annunciated activation waiting for its acknowledgement.
    unacknowledged: Option<SystemTime>,
    chatter: Chatter,
    activations: u64,
    episodes: u64,
    message: String,
}

impl Track {
    fn annunciated(&self) -> bool {
        !(self.shelved || self.out_of_service || self.suppressed)
    }

    /// Takes up an event that changes how it stands (not an activation or acknowledgement,
    /// which only the window's events count): the kind of handling it began, if any.
    fn stand(&mut self, event: &AlarmEvent) -> Option<Handling> {
        match event.kind {
            AlarmEventKind::Active => self.in_alarm_since = Some(event.time),
            AlarmEventKind::Cleared => self.in_alarm_since = None,
            AlarmEventKind::Shelved => {
                self.shelved = true;
                return Some(Handling::Shelved);
            }
            AlarmEventKind::Unshelved | AlarmEventKind::ShelvingExpired => self.shelved = false,
            AlarmEventKind::OutOfService => {
                self.out_of_service = true;
                self.shelved = false;
                return Some(Handling::OutOfService);
            }
            AlarmEventKind::InService => self.out_of_service = false,
            AlarmEventKind::Suppressed => {
                self.suppressed = true;
                return Some(Handling::Suppressed);
            }
            AlarmEventKind::Unsuppressed => self.suppressed = false,
            AlarmEventKind::Acknowledged => {}
        }
        None
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Handling {
    Shelved,
    Suppressed,
    OutOfService,
}

impl AlarmReport {
    /// The report of the window `from`..`until` from `record` (as the store reads it), floods
    /// being more than `flood_count` annunciated activations in a period.
    pub fn of(record: &AlarmRecord, (from, until): (SystemTime, SystemTime), flood_count: u32) -> Self {
        let mut tracks: BTreeMap<&str, Track> = BTreeMap::new();
        let mut handled: BTreeMap<Handling, (BTreeSet<&str>, u64)> = BTreeMap::new();
        for event in &record.standing {
            let track = tracks.entry(&event.alarm).or_default();
            track.message.clone_from(&event.message);
            track.stand(event);
        }
        // Handled as the window begins (a removal from service may have ended a shelving).
        for (alarm, track) in &tracks {
            for (kind, holds) in [
                (Handling::Shelved, track.shelved),
                (Handling::Suppressed, track.suppressed),
                (Handling::OutOfService, track.out_of_service),
            ] {
                if holds {
                    handled.entry(kind).or_default().0.insert(alarm);
                }
            }
        }
        let window = until.duration_since(from).unwrap_or_default();
        let periods =
            usize::try_from(window.as_secs().div_ceil(PERIOD.as_secs()).max(1)).unwrap_or(usize::MAX);
        let mut report = Self {
            from,
            until,
            events_read: record.events.len(),
            events_total: record.total,
            activations: 0,
            annunciated: 0,
            per_period: vec![0; periods],
            peak: 0,
            peak_at: None,
            flood_count,
            most_frequent: Vec::new(),
            chattering: Vec::new(),
            stale: Vec::new(),
            priorities: [0; 3],
            acknowledge_delays: Vec::new(),
            unacknowledged: 0,
            shelved: HandlingCount::default(),
            suppressed: HandlingCount::default(),
            out_of_service: HandlingCount::default(),
        };
        let mut annunciated_at = Vec::new();
        for event in &record.events {
            let track = tracks.entry(&event.alarm).or_default();
            track.message.clone_from(&event.message);
            match event.kind {
                AlarmEventKind::Active => {
                    report.activations += 1;
                    track.activations += 1;
                    let chattered = track.chatter.episodes;
                    track.chatter.tripped(event.time);
                    track.episodes += u64::from(track.chatter.episodes - chattered);
                    if track.annunciated() {
                        report.unacknowledged += u64::from(track.unacknowledged.is_some());
                        track.unacknowledged = Some(event.time);
                        annunciated_at.push(event.time);
                        let band = PriorityBand::of(event.priority);
                        report.priorities[band as usize] += 1;
                    }
                }
                AlarmEventKind::Acknowledged => {
                    if let Some(since) = track.unacknowledged.take() {
                        report
                            .acknowledge_delays
                            .push(event.time.duration_since(since).unwrap_or_default());
                    }
                }
                _ => {}
            }
            if let Some(kind) = track.stand(event) {
                let (alarms, times) = handled.entry(kind).or_default();
                alarms.insert(&event.alarm);
                *times += 1;
            }
        }
        report.annunciated = annunciated_at.len() as u64;
        for time in &annunciated_at {
            let index = time.duration_since(from).unwrap_or_default().as_secs() / PERIOD.as_secs();
            // An activation at the window's very end counts in its last period.
            let index = usize::try_from(index).unwrap_or(usize::MAX).min(periods - 1);
            report.per_period[index] += 1;
        }
        (report.peak, report.peak_at) = peak(&annunciated_at);
        report.unacknowledged += tracks
            .values()
            .filter(|track| track.unacknowledged.is_some())
            .count() as u64;
        report.acknowledge_delays.sort_unstable();
        let counted = |pick: fn(&Track) -> u64| {
            let mut counts: Vec<AlarmCount> = tracks
                .iter()
                .filter(|(_, track)| pick(track) > 0)
                .map(|(alarm, track)| AlarmCount {
                    alarm: (*alarm).to_owned(),
                    message: track.message.clone(),
                    count: pick(track),
                })
                .collect();
            // Sorted by name already: a stable sort keeps ties so.
            counts.sort_by_key(|count| std::cmp::Reverse(count.count));
            counts
        };
        report.most_frequent = counted(|track| track.activations);
        report.most_frequent.truncate(MOST_FREQUENT);
        report.chattering = counted(|track| track.episodes);
        report.stale = tracks
            .iter()
            .filter_map(|(alarm, track)| {
                let since = track.in_alarm_since?;
                (until.duration_since(since).unwrap_or_default() > STALE_AFTER).then(|| StaleAlarm {
                    alarm: (*alarm).to_owned(),
                    message: track.message.clone(),
                    since,
                })
            })
            .collect();
        report.stale.sort_by_key(|stale| stale.since);
        for (kind, (alarms, times)) in handled {
            let count = HandlingCount {
                alarms: alarms.len(),
                times,
            };
            match kind {
                Handling::Shelved => report.shelved = count,
                Handling::Suppressed => report.suppressed = count,
                Handling::OutOfService => report.out_of_service = count,
            }
        }
        report
    }

    /// Annunciated activations per [`PERIOD`], on average over the window.
    pub fn average_per_period(&self) -> f64 {
        let window = self.until.duration_since(self.from).unwrap_or_default();
        if window.is_zero() {
            return 0.0;
        }
        self.annunciated as f64 * PERIOD.as_secs_f64() / window.as_secs_f64()
    }

    /// The periods with more than `flood_count` annunciated activations.
    pub fn flood_periods(&self) -> usize {
        self.per_period
            .iter()
            .filter(|count| **count > self.flood_count)
            .count()
    }

    /// The share of periods in flood, in percent.
    pub fn time_in_flood_percent(&self) -> f64 {
        percent(self.flood_periods() as u64, self.per_period.len() as u64)
    }

    /// A band's share of the annunciated activations, in percent.
    pub fn priority_percent(&self, band: PriorityBand) -> f64 {
        percent(self.priorities[band as usize], self.annunciated)
    }

    /// The acknowledgement delay `fraction` (0.5: the median) of the way through the sorted
    /// delays (nearest rank), if any was acknowledged.
    pub fn acknowledge_delay(&self, fraction: f64) -> Option<Duration> {
        let delays = &self.acknowledge_delays;
        let rank = (fraction * delays.len() as f64).ceil() as usize;
        delays.get(rank.clamp(1, delays.len().max(1)) - 1).copied()
    }

    /// The report as JSON: what `--format json`, the assistant's tool and tests read.
    pub fn to_json(&self) -> Value {
        let counts = |counts: &[AlarmCount], key: &str| -> Vec<Value> {
            counts
                .iter()
                .map(|count| json!({"alarm": count.alarm, "message": count.message, key: count.count}))
                .collect()
        };
        let handling = |count: HandlingCount| json!({"alarms": count.alarms, "times": count.times});
        let seconds = |delay: Option<Duration>| delay.map(|delay| delay.as_secs_f64());
        json!({
            "from": localai::iso8601_millis(self.from),
            "until": localai::iso8601_millis(self.until),
            "eventsRead": self.events_read,
            "eventsTotal": self.events_total,
            "activations": self.activations,
            "annunciated": self.annunciated,
            "averagePer10Min": round2(self.average_per_period()),
            "peakPer10Min": self.peak,
            "peakAt": self.peak_at.map(localai::iso8601_millis),
            "floodCount": self.flood_count,
            "periods": self.per_period.len(),
            "floodPeriods": self.flood_periods(),
            "timeInFloodPercent": round2(self.time_in_flood_percent()),
            "mostFrequent": counts(&self.most_frequent, "activations"),
            "chattering": counts(&self.chattering, "episodes"),
            "stale": self.stale.iter().map(|stale| json!({
                "alarm": stale.alarm,
                "message": stale.message,
                "since": localai::iso8601_millis(stale.since),
            })).collect::<Vec<_>>(),
            "priorities": PriorityBand::ALL.iter().map(|band| json!({
                "band": band.label(),
                "count": self.priorities[*band as usize],
                "percent": round2(self.priority_percent(*band)),
                "targetPercent": band.target_percent(),
            })).collect::<Vec<_>>(),
            "acknowledged": self.acknowledge_delays.len(),
            "unacknowledged": self.unacknowledged,
            "acknowledgeMedianS": seconds(self.acknowledge_delay(0.5)),
            "acknowledgeP90S": seconds(self.acknowledge_delay(0.9)),
            "shelved": handling(self.shelved),
            "suppressed": handling(self.suppressed),
            "outOfService": handling(self.out_of_service),
        })
    }
}

/// The most of `times` (sorted) within any [`PERIOD`] starting at one of them, and that start.
fn peak(times: &[SystemTime]) -> (u64, Option<SystemTime>) {
    let mut best = (0, None);
    let mut end = 0;
    for (start, at) in times.iter().enumerate() {
        while end < times.len() && times[end] < *at + PERIOD {
            end += 1;
        }
        let count = (end - start) as u64;
        if count > best.0 {
            best = (count, Some(*at));
        }
    }
    best
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

fn round2(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use plant_model::Condition;

    const START: u64 = 1_000_000;

    fn event(alarm: &str, kind: AlarmEventKind, second: u64) -> AlarmEvent {
        AlarmEvent {
            time: SystemTime::UNIX_EPOCH + Duration::from_secs(START + second),
            alarm: alarm.to_owned(),
            tag: "T".to_owned(),
            condition: Condition::Hi,
            kind,
            value: None,
            priority: 500,
            message: String::new(),
            user: None,
            reason: None,
            until: None,
        }
    }

    fn report(standing: Vec<AlarmEvent>, events: Vec<AlarmEvent>, seconds: u64) -> AlarmReport {
        let from = SystemTime::UNIX_EPOCH + Duration::from_secs(START);
        let total = events.len();
        let record = AlarmRecord {
            standing,
            events,
            total,
        };
        AlarmReport::of(&record, (from, from + Duration::from_secs(seconds)), 10)
    }

    fn trips(alarm: &str, count: u64, every: u64) -> Vec<AlarmEvent> {
        (0..count)
            .flat_map(|trip| {
                [
                    event(alarm, AlarmEventKind::Active, trip * every),
                    event(alarm, AlarmEventKind::Cleared, trip * every + 1),
                ]
            })
            .collect()
    }

    #[test]
    fn a_period_floods_past_the_count_not_at_it() {
        let at_count = report(Vec::new(), trips("A", 10, 30), 1200);
        assert_eq!((at_count.flood_periods(), at_count.peak), (0, 10));
        let past = report(Vec::new(), trips("A", 11, 30), 1200);
        assert_eq!((past.flood_periods(), past.peak), (1, 11));
        assert_eq!(past.per_period, [11, 0]);
        assert!((past.time_in_flood_percent() - 50.0).abs() < 1e-9);
        assert_eq!(past.chattering[0].count, 1, "every 30 s chatters, once");
    }

    #[test]
    fn what_stood_at_the_start_is_counted_and_decides_annunciation() {
        // Shelved, then taken out of service (which ends the shelving), before the window.
        let standing = vec![
            event("A", AlarmEventKind::Shelved, 0),
            event("A", AlarmEventKind::OutOfService, 0),
            event("B", AlarmEventKind::Suppressed, 0),
        ];
        let events = vec![
            event("A", AlarmEventKind::Active, 10),
            event("B", AlarmEventKind::Active, 20),
            event("A", AlarmEventKind::InService, 30),
            event("A", AlarmEventKind::Cleared, 40),
            event("A", AlarmEventKind::Active, 50),
            event("A", AlarmEventKind::Acknowledged, 80),
        ];
        let report = report(standing, events, 600);
        assert_eq!((report.activations, report.annunciated), (3, 1));
        assert_eq!(report.shelved, HandlingCount::default(), "its shelving had ended");
        assert_eq!(report.out_of_service, HandlingCount { alarms: 1, times: 0 });
        assert_eq!(report.suppressed, HandlingCount { alarms: 1, times: 0 });
        assert_eq!(report.acknowledge_delays, [Duration::from_secs(30)]);
        assert_eq!(
            report.unacknowledged, 0,
            "a suppressed activation asks for nothing"
        );
        assert_eq!(report.acknowledge_delay(0.5), Some(Duration::from_secs(30)));
    }
}
