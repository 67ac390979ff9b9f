//! Alarms: definitions on tags, their live state machine, and the transitions they emit.
//!
//! The state machine is the usual one of ISA-18.2, reduced to what operators and the
//! assistant need: `Normal` → `Active` (unacknowledged) when the condition trips; an
//! acknowledgement moves `Active` to `Acknowledged`; the condition clearing moves `Active` to
//! `NormalUnacked` (still listed until acknowledged) and `Acknowledged` back to `Normal`.
//! Every transition is an [`AlarmEvent`] for the alarm history.

use std::sync::Mutex;
use std::time::SystemTime;

use plant_model::{AlarmEvent, AlarmEventKind, Condition};

/// An alarm as defined in the solution.
#[derive(Debug, Clone, PartialEq)]
pub struct AlarmDefinition {
    /// Unique name, e.g. `Motor1.Temperature.Hi`.
    pub name: String,
    /// The dotted name of the tag it watches.
    pub tag: String,
    /// What it watches for.
    pub condition: Condition,
    /// The limit (for `Deviation`, the allowed distance from the setpoint; unused by
    /// `Digital`).
    pub limit: f64,
    /// The setpoint of a `Deviation` alarm.
    pub setpoint: Option<f64>,
    /// The abnormal state of a `Digital` alarm's signal.
    pub active_when: bool,
    /// How far back inside the limit the value must come before the alarm clears, so a value
    /// hovering at the limit does not flood the history.
    pub deadband: f64,
    /// 1 to 1000; higher is more urgent.
    pub priority: u32,
    /// What the operator reads.
    pub message: String,
    /// What to know and do about it (changing it alone leaves a standing alarm standing).
    pub guidance: AlarmGuidance,
    /// Whether acknowledging it takes the operator's electronic signature (changing it alone
    /// leaves a standing alarm standing too).
    pub signed: bool,
}

/// An alarm's rationalization, as ISA-18.2 keeps it: what usually causes it, what happens if
/// nobody acts, what the operator should do and how soon. Empty texts and no time when the
/// plant file gives none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AlarmGuidance {
    /// What usually trips it.
    pub cause: String,
    /// What happens if nobody acts.
    pub consequence: String,
    /// What the operator should do.
    pub response: String,
    /// Seconds the operator has before the consequence follows.
    pub time_to_respond: Option<u32>,
}

impl AlarmDefinition {
    /// Whether `other` defines the same alarm, its guidance and signing aside: what decides
    /// whether a live alarm's state carries over a reload.
    pub fn same_apart_from_handling(&self, other: &Self) -> bool {
        let unguided = |definition: &Self| Self {
            guidance: AlarmGuidance::default(),
            signed: false,
            ..definition.clone()
        };
        unguided(self) == unguided(other)
    }

    /// Whether `value` is in alarm, given whether the alarm is in alarm now (which applies the
    /// deadband on the way back).
    fn in_alarm(&self, value: f64, in_alarm_now: bool) -> bool {
        let band = if in_alarm_now { self.deadband } else { 0.0 };
        match self.condition {
            Condition::HiHi | Condition::Hi => value >= self.limit - band,
            Condition::Lo | Condition::LoLo => value <= self.limit + band,
            Condition::Deviation => {
                let setpoint = self.setpoint.unwrap_or(0.0);
                (value - setpoint).abs() >= self.limit - band
            }
            // A signal has no band: it is in its abnormal state or not.
            Condition::Digital => (value != 0.0) == self.active_when,
        }
    }
}

/// Where an alarm is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlarmState {
    /// Not in alarm, nothing to acknowledge.
    Normal,
    /// In alarm, not acknowledged.
    Active,
    /// In alarm, acknowledged.
    Acknowledged,
    /// Back to normal but not yet acknowledged.
    NormalUnacked,
}

impl AlarmState {
    /// `normal`, `active`, `acknowledged` or `normal-unacked`, as tools report it.
    pub fn label(self) -> &'static str {
        match self {
            Self::Normal => "normal",
            Self::Active => "active",
            Self::Acknowledged => "acknowledged",
            Self::NormalUnacked => "normal-unacked",
        }
    }

    fn in_alarm(self) -> bool {
        matches!(self, Self::Active | Self::Acknowledged)
    }
}

/// A snapshot of an alarm's live state.
#[derive(Debug, Clone, PartialEq)]
pub struct AlarmStatus {
    /// The state.
    pub state: AlarmState,
    /// When it last tripped, while it is listed (not `Normal`).
    pub active_since: Option<SystemTime>,
    /// The tag value that tripped it.
    pub trip_value: Option<f64>,
    /// When it cleared, if it did since tripping.
    pub cleared_at: Option<SystemTime>,
    /// When and by whom it was acknowledged since tripping.
    pub acknowledged: Option<(SystemTime, String)>,
}

impl AlarmStatus {
    const NORMAL: Self = Self {
        state: AlarmState::Normal,
        active_since: None,
        trip_value: None,
        cleared_at: None,
        acknowledged: None,
    };
}

/// Why an acknowledgement was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AcknowledgeError {
    /// No alarm of that name.
    #[error("unknown alarm {0:?}")]
    UnknownAlarm(String),
}

/// The condition tripped at `time` (on `value`): in alarm, unacknowledged.
fn trip(status: &mut AlarmStatus, time: SystemTime, value: Option<f64>) {
    *status = AlarmStatus {
        state: AlarmState::Active,
        active_since: Some(time),
        trip_value: value,
        cleared_at: None,
        acknowledged: None,
    };
}

/// The condition cleared at `time`: an acknowledged alarm is done with, an unacknowledged one
/// stays listed until it is acknowledged.
fn clear(status: &mut AlarmStatus, time: SystemTime) {
    if status.state == AlarmState::Acknowledged {
        *status = AlarmStatus::NORMAL;
    } else {
        status.state = AlarmState::NormalUnacked;
        status.cleared_at = Some(time);
    }
}

/// An acknowledgement by `user` at `time`; whether there was anything to acknowledge.
fn acknowledge(status: &mut AlarmStatus, user: &str, time: SystemTime) -> bool {
    match status.state {
        AlarmState::Active => {
            status.state = AlarmState::Acknowledged;
            status.acknowledged = Some((time, user.to_owned()));
            true
        }
        AlarmState::NormalUnacked => {
            *status = AlarmStatus::NORMAL;
            true
        }
        AlarmState::Normal | AlarmState::Acknowledged => false,
    }
}

/// One alarm: its definition and live state. The state sits behind its own short lock, so a
/// write to one tag never waits for another tag's alarms.
#[derive(Debug)]
pub struct Alarm {
    definition: AlarmDefinition,
    status: Mutex<AlarmStatus>,
}

impl Alarm {
    pub(super) fn new(definition: AlarmDefinition) -> Self {
        Self {
            definition,
            status: Mutex::new(AlarmStatus::NORMAL),
        }
    }

    /// The definition.
    pub fn definition(&self) -> &AlarmDefinition {
        &self.definition
    }

    /// The live state, copied out.
    pub fn status(&self) -> AlarmStatus {
        self.lock().clone()
    }

    /// Takes over the state of the same alarm in a model being replaced.
    pub(super) fn adopt_status(&self, previous: &Alarm) {
        *self.lock() = previous.status();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, AlarmStatus> {
        // The state is plain data updated in one step, so a panic elsewhere cannot leave it
        // half-written; a poisoned lock is still usable.
        self.status
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Evaluates a new value of the tag, returning the transition it caused, if any.
    pub(super) fn evaluate(&self, value: f64, time: SystemTime) -> Option<AlarmEvent> {
        let mut status = self.lock();
        let was_in_alarm = status.state.in_alarm();
        let in_alarm = self.definition.in_alarm(value, was_in_alarm);
        let kind = match (was_in_alarm, in_alarm) {
            (false, true) => {
                trip(&mut status, time, Some(value));
                AlarmEventKind::Active
            }
            (true, false) => {
                clear(&mut status, time);
                AlarmEventKind::Cleared
            }
            _ => return None,
        };
        Some(self.event(kind, time, Some(value), None))
    }

    /// Acknowledges the alarm; `None` when there was nothing to acknowledge.
    pub(super) fn acknowledge(&self, user: &str, time: SystemTime) -> Option<AlarmEvent> {
        acknowledge(&mut self.lock(), user, time)
            .then(|| self.event(AlarmEventKind::Acknowledged, time, None, Some(user.to_owned())))
    }

    /// Replays a transition the alarm history recorded for this alarm (in the order recorded),
    /// without judging it against the value: how a restarted server takes up the trips and
    /// acknowledgements of before. A transition of another condition (the alarm was defined
    /// differently when it was recorded) is skipped.
    pub(super) fn replay(&self, recorded: &AlarmEvent) {
        if recorded.condition != self.definition.condition {
            return;
        }
        let mut status = self.lock();
        match recorded.kind {
            AlarmEventKind::Active => trip(&mut status, recorded.time, recorded.value),
            AlarmEventKind::Cleared => {
                if status.state.in_alarm() {
                    clear(&mut status, recorded.time);
                }
            }
            AlarmEventKind::Acknowledged => {
                acknowledge(
                    &mut status,
                    recorded.user.as_deref().unwrap_or_default(),
                    recorded.time,
                );
            }
        }
    }

    fn event(
        &self,
        kind: AlarmEventKind,
        time: SystemTime,
        value: Option<f64>,
        user: Option<String>,
    ) -> AlarmEvent {
        AlarmEvent {
            time,
            alarm: self.definition.name.clone(),
            tag: self.definition.tag.clone(),
            condition: self.definition.condition,
            kind,
            value,
            priority: self.definition.priority,
            message: self.definition.message.clone(),
            user,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn alarm(condition: Condition, limit: f64, setpoint: Option<f64>) -> Alarm {
        Alarm::new(AlarmDefinition {
            name: "T.A".into(),
            tag: "T".into(),
            condition,
            limit,
            setpoint,
            active_when: true,
            deadband: 1.0,
            priority: 700,
            message: "test".into(),
            guidance: AlarmGuidance::default(),
            signed: false,
        })
    }

    #[test]
    fn only_guidance_and_signing_may_differ_for_an_alarm_to_stay_the_same() {
        let definition = alarm(Condition::Hi, 80.0, None).definition().clone();
        let reworded = AlarmDefinition {
            guidance: AlarmGuidance {
                response: "Close the inlet".into(),
                time_to_respond: Some(300),
                ..AlarmGuidance::default()
            },
            signed: true,
            ..definition.clone()
        };
        assert!(definition.same_apart_from_handling(&reworded));
        let moved = AlarmDefinition {
            limit: 85.0,
            ..reworded.clone()
        };
        assert!(!moved.same_apart_from_handling(&reworded));
        let renamed = AlarmDefinition {
            message: "other".into(),
            ..definition.clone()
        };
        assert!(!renamed.same_apart_from_handling(&definition));
    }

    #[test]
    fn a_digital_alarm_follows_its_signal_without_a_band() {
        let alarm = Alarm::new(AlarmDefinition {
            condition: Condition::Digital,
            active_when: false,
            ..alarm(Condition::Hi, 0.0, None).definition().clone()
        });
        assert!(alarm.evaluate(1.0, at(0)).is_none(), "running is normal");
        let tripped = alarm.evaluate(0.0, at(1)).expect("stopped trips it");
        assert_eq!(tripped.kind, AlarmEventKind::Active);
        let cleared = alarm.evaluate(1.0, at(2)).expect("running again clears it");
        assert_eq!(cleared.kind, AlarmEventKind::Cleared);
    }

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + seconds)
    }

    #[test]
    fn a_high_alarm_trips_holds_inside_the_deadband_and_clears_unacknowledged() {
        let alarm = alarm(Condition::Hi, 80.0, None);
        assert_eq!(alarm.evaluate(79.9, at(0)), None);
        let trip = alarm.evaluate(80.0, at(1)).expect("trips at the limit");
        assert_eq!((trip.kind, trip.value), (AlarmEventKind::Active, Some(80.0)));
        assert_eq!(alarm.evaluate(79.5, at(2)), None, "inside the deadband");
        let clear = alarm
            .evaluate(78.9, at(3))
            .expect("clears below limit - deadband");
        assert_eq!(clear.kind, AlarmEventKind::Cleared);
        let status = alarm.status();
        assert_eq!(status.state, AlarmState::NormalUnacked);
        assert_eq!(
            (status.active_since, status.cleared_at),
            (Some(at(1)), Some(at(3)))
        );
        let ack = alarm.acknowledge("ops", at(4)).expect("acknowledges");
        assert_eq!(
            (ack.kind, ack.user.as_deref()),
            (AlarmEventKind::Acknowledged, Some("ops"))
        );
        assert_eq!(alarm.status().state, AlarmState::Normal);
        assert_eq!(
            alarm.acknowledge("ops", at(5)),
            None,
            "nothing left to acknowledge"
        );
    }

    #[test]
    fn an_acknowledged_alarm_returns_to_normal_when_it_clears() {
        let alarm = alarm(Condition::LoLo, 10.0, None);
        assert_eq!(
            alarm.evaluate(9.0, at(0)).map(|e| e.kind),
            Some(AlarmEventKind::Active)
        );
        assert!(alarm.acknowledge("ops", at(1)).is_some());
        assert_eq!(alarm.status().state, AlarmState::Acknowledged);
        assert_eq!(
            alarm.evaluate(12.0, at(2)).map(|e| e.kind),
            Some(AlarmEventKind::Cleared)
        );
        assert_eq!(alarm.status(), AlarmStatus::NORMAL);
    }

    fn recorded(alarm: &Alarm, kind: AlarmEventKind, seconds: u64) -> AlarmEvent {
        let user = (kind == AlarmEventKind::Acknowledged).then(|| "ops".to_owned());
        alarm.event(kind, at(seconds), Some(90.0), user)
    }

    #[test]
    fn the_recorded_history_puts_an_alarm_back_where_it_was() {
        use AlarmEventKind::{Acknowledged, Active, Cleared};
        let replayed = |kinds: &[AlarmEventKind]| {
            let source = alarm(Condition::Hi, 80.0, None);
            let restored = alarm(Condition::Hi, 80.0, None);
            for (second, kind) in (0..).zip(kinds) {
                restored.replay(&recorded(&source, *kind, second));
            }
            restored.status()
        };
        let acknowledged = replayed(&[Active, Acknowledged]);
        assert_eq!(acknowledged.state, AlarmState::Acknowledged);
        assert_eq!(acknowledged.active_since, Some(at(0)));
        assert_eq!(acknowledged.acknowledged, Some((at(1), "ops".to_owned())));
        assert_eq!(replayed(&[Active, Cleared]).state, AlarmState::NormalUnacked);
        assert_eq!(
            replayed(&[Active, Cleared, Acknowledged]).state,
            AlarmState::Normal
        );
        assert_eq!(
            replayed(&[Active, Acknowledged, Cleared]).state,
            AlarmState::Normal
        );

        // Then judged against the value now: still in alarm and acknowledged, no new trip.
        let restored = alarm(Condition::Hi, 80.0, None);
        restored.replay(&recorded(&restored, Active, 0));
        restored.replay(&recorded(&restored, Acknowledged, 1));
        assert_eq!(restored.evaluate(95.0, at(2)), None);
        assert_eq!(restored.status().state, AlarmState::Acknowledged);

        // Recorded when the alarm watched for something else: not this alarm's past.
        let redefined = alarm(Condition::Lo, 20.0, None);
        redefined.replay(&recorded(&alarm(Condition::Hi, 80.0, None), Active, 0));
        assert_eq!(redefined.status(), AlarmStatus::NORMAL);
    }

    #[test]
    fn a_deviation_alarm_trips_on_either_side_of_its_setpoint() {
        let alarm = alarm(Condition::Deviation, 15.0, Some(85.0));
        assert_eq!(alarm.evaluate(99.0, at(0)), None);
        assert_eq!(
            alarm.evaluate(69.0, at(1)).map(|e| e.kind),
            Some(AlarmEventKind::Active)
        );
        assert_eq!(
            alarm.evaluate(85.0, at(2)).map(|e| e.kind),
            Some(AlarmEventKind::Cleared)
        );
        assert_eq!(
            alarm.evaluate(100.5, at(3)).map(|e| e.kind),
            Some(AlarmEventKind::Active)
        );
    }
}
