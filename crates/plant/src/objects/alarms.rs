//! Alarms: definitions on tags, their live state machine, and the transitions they emit.
//!
//! The state machine is ISA-18.2's: `Normal` → `Active` (unacknowledged) when the condition
//! trips; an acknowledgement moves `Active` to `Acknowledged`; the condition clearing moves
//! `Active` to `NormalUnacked` (still listed until acknowledged) and `Acknowledged` back to
//! `Normal`. Beside that state an alarm may be shelved by an operator (until a time), out of
//! service by an admin, or suppressed by design while its `suppress_when` holds: it is still
//! evaluated and its transitions recorded, but it is not annunciated. Unshelved or back in service while its condition holds, it annunciates again,
//! unacknowledged. Every transition is an [`AlarmEvent`] for the alarm history.

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use plant_model::{AlarmEvent, AlarmEventKind, Condition, TagExpression};
use store::KeptHandling;

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
    /// How long its condition must hold before it activates.
    pub on_delay: Duration,
    /// How long its condition must stay clear before it clears.
    pub off_delay: Duration,
    /// While it holds, the alarm is suppressed by design.
    pub suppress_when: Option<TagExpression>,
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
    /// Whether `other` defines the same alarm, its guidance, signing and suppression aside:
    /// what decides whether a live alarm's state carries over a reload.
    pub fn same_apart_from_handling(&self, other: &Self) -> bool {
        let unguided = |definition: &Self| Self {
            guidance: AlarmGuidance::default(),
            signed: false,
            suppress_when: None,
            ..definition.clone()
        };
        unguided(self) == unguided(other)
    }

    /// How long a change of its condition (`into_alarm` or out of it) must hold to happen.
    fn delay(&self, into_alarm: bool) -> Duration {
        if into_alarm { self.on_delay } else { self.off_delay }
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

/// An operator's shelving of an alarm: who, why, and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shelving {
    /// Who shelved it.
    pub by: String,
    /// Why.
    pub reason: String,
    /// Since when.
    pub since: SystemTime,
    /// When it unshelves by itself.
    pub until: SystemTime,
}

/// A shelving's length in words: "2 h", "90 min", "1 h 30 min" (whole minutes, rounded up).
pub fn span_words(duration: Duration) -> String {
    let minutes = duration.as_secs().div_ceil(60);
    match (minutes / 60, minutes % 60) {
        (0, minutes) => format!("{minutes} min"),
        (hours, 0) => format!("{hours} h"),
        (hours, minutes) => format!("{hours} h {minutes} min"),
    }
}

/// An admin's taking an alarm out of service (an instrument being replaced): who, why, since
/// when. Only by hand does it come back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutOfService {
    /// Who took it out.
    pub by: String,
    /// Why.
    pub reason: String,
    /// Since when.
    pub since: SystemTime,
}

/// What keeps an evaluated alarm from being annunciated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AlarmHandling {
    /// Shelved by an operator, until a time.
    pub shelved: Option<Shelving>,
    /// Out of service, taken out by an admin.
    pub out_of_service: Option<OutOfService>,
    /// Suppressed by design since then: its `suppress_when` holds.
    pub suppressed: Option<SystemTime>,
    /// When its handling last changed (here or, read from the store, on another node): an
    /// older change another node recorded is not taken up over it.
    pub changed_at: Option<SystemTime>,
}

impl AlarmHandling {
    /// Whether the alarm is annunciated: neither shelved, out of service nor suppressed.
    pub fn annunciated(&self) -> bool {
        self.shelved.is_none() && self.out_of_service.is_none() && self.suppressed.is_none()
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
    /// Whether it is shelved or out of service.
    pub handling: AlarmHandling,
    /// A change of its condition waiting out the alarm's `on_delay` or `off_delay`.
    pub pending: Option<PendingChange>,
    /// Its last trips, whether it chatters and how often it has.
    pub chatter: Chatter,
}

/// Trips this many times within [`CHATTER_WINDOW`] and an alarm chatters (EEMUA 191).
pub const CHATTER_TRIPS: usize = 3;

/// The window [`CHATTER_TRIPS`] trips are counted in.
pub const CHATTER_WINDOW: Duration = Duration::from_secs(60);

/// An alarm's last [`CHATTER_TRIPS`] trips, and how many times it began to chatter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Chatter {
    /// The last trips, oldest first.
    last: [Option<SystemTime>; CHATTER_TRIPS],
    /// How many times it began to chatter (since the server started).
    pub episodes: u32,
}

impl Chatter {
    /// A trip at `time`: a new episode when it makes the last trips chatter and the ones
    /// before did not (an alarm report counts episodes over the history with it too).
    pub(crate) fn tripped(&mut self, time: SystemTime) {
        let chattered = self.chatters_by(time);
        self.last.rotate_left(1);
        self.last[CHATTER_TRIPS - 1] = Some(time);
        if !chattered && self.chatters_by(time) {
            self.episodes += 1;
        }
    }

    /// Whether it chatters at `now`: its last trips all fell within the window, the newest less
    /// than a window ago.
    pub fn chatters_by(&self, now: SystemTime) -> bool {
        match (self.last[0], self.last[CHATTER_TRIPS - 1]) {
            (Some(oldest), Some(newest)) => {
                newest
                    .duration_since(oldest)
                    .is_ok_and(|span| span <= CHATTER_WINDOW)
                    && now.duration_since(newest).unwrap_or_default() <= CHATTER_WINDOW
            }
            _ => false,
        }
    }
}

/// A change of an alarm's condition seen and waiting out its delay: it happens only if the
/// condition holds for the whole delay.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PendingChange {
    /// When the condition changed.
    pub since: SystemTime,
    /// The value that changed it.
    pub value: f64,
    /// Into alarm (an activation) or out of it (a clearing).
    pub into_alarm: bool,
}

impl AlarmStatus {
    const NORMAL: Self = Self {
        state: AlarmState::Normal,
        active_since: None,
        trip_value: None,
        cleared_at: None,
        acknowledged: None,
        handling: AlarmHandling {
            shelved: None,
            out_of_service: None,
            suppressed: None,
            changed_at: None,
        },
        pending: None,
        chatter: Chatter {
            last: [None; CHATTER_TRIPS],
            episodes: 0,
        },
    };

    /// The state as ISA-18.2 names it to an operator: `out-of-service`, `shelved`,
    /// `suppressed`, else the condition's and acknowledgement's ([`AlarmState::label`]).
    pub fn label(&self) -> &'static str {
        if self.handling.out_of_service.is_some() {
            "out-of-service"
        } else if self.handling.shelved.is_some() {
            "shelved"
        } else if self.handling.suppressed.is_some() {
            "suppressed"
        } else {
            self.state.label()
        }
    }

    /// Back to `Normal`, shelved or out of service as it was.
    fn return_to_normal(&mut self) {
        let handling = std::mem::take(&mut self.handling);
        *self = Self {
            handling,
            chatter: self.chatter,
            ..Self::NORMAL
        };
    }
}

/// Why an acknowledgement was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AcknowledgeError {
    /// No alarm of that name.
    #[error("unknown alarm {0:?}")]
    UnknownAlarm(String),
}

/// Why an alarm could not be shelved or taken out of service.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandlingError {
    /// No alarm of that name.
    #[error("unknown alarm {0:?}")]
    UnknownAlarm(String),
    /// It is out of service: there is nothing to shelve until it is back.
    #[error("{0} is out of service: put it back in service before shelving it")]
    OutOfService(String),
}

/// The condition tripped at `time` (on `value`): in alarm, unacknowledged.
fn trip(status: &mut AlarmStatus, time: SystemTime, value: Option<f64>) {
    let handling = std::mem::take(&mut status.handling);
    let mut chatter = status.chatter;
    chatter.tripped(time);
    *status = AlarmStatus {
        state: AlarmState::Active,
        active_since: Some(time),
        trip_value: value,
        cleared_at: None,
        acknowledged: None,
        handling,
        pending: None,
        chatter,
    };
}

/// The condition cleared at `time`: an acknowledged alarm is done with, an unacknowledged one
/// stays listed until it is acknowledged.
fn clear(status: &mut AlarmStatus, time: SystemTime) {
    if status.state == AlarmState::Acknowledged {
        status.return_to_normal();
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
            status.return_to_normal();
            true
        }
        AlarmState::Normal | AlarmState::Acknowledged => false,
    }
}

/// The alarm annunciates again at `time` (unshelved, back in service): still in alarm, it asks
/// for a new acknowledgement; cleared meanwhile, there is nothing left to acknowledge.
fn annunciate_again(status: &mut AlarmStatus, time: SystemTime) {
    if status.state.in_alarm() {
        status.state = AlarmState::Active;
        status.active_since = Some(time);
        status.acknowledged = None;
    } else {
        status.return_to_normal();
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
        let into_alarm = self.definition.in_alarm(value, was_in_alarm);
        if into_alarm == was_in_alarm {
            // Back before its delay ran out: the change never happened.
            status.pending = None;
            return None;
        }
        let delay = self.definition.delay(into_alarm);
        if !delay.is_zero() {
            match status.pending {
                Some(pending)
                    if pending.into_alarm == into_alarm
                        && time.duration_since(pending.since).unwrap_or_default() >= delay => {}
                Some(pending) if pending.into_alarm == into_alarm => return None,
                _ => {
                    status.pending = Some(PendingChange {
                        since: time,
                        value,
                        into_alarm,
                    });
                    return None;
                }
            }
        }
        Some(self.change(&mut status, into_alarm, time, value))
    }

    /// Carries out a change of condition whose delay ran out by `now` (the background work
    /// looks every second): the event, dated when the delay ran out.
    pub(super) fn settle_delay(&self, now: SystemTime) -> Option<AlarmEvent> {
        let mut status = self.lock();
        let pending = status.pending?;
        let due = pending.since + self.definition.delay(pending.into_alarm);
        if now < due {
            return None;
        }
        Some(self.change(&mut status, pending.into_alarm, due, pending.value))
    }

    /// The condition trips (`into_alarm`) or clears at `time` on `value`.
    fn change(&self, status: &mut AlarmStatus, into_alarm: bool, time: SystemTime, value: f64) -> AlarmEvent {
        status.pending = None;
        let kind = if into_alarm {
            trip(status, time, Some(value));
            AlarmEventKind::Active
        } else {
            clear(status, time);
            AlarmEventKind::Cleared
        };
        self.event(kind, time, Some(value), None)
    }

    /// Acknowledges the alarm; `None` when there was nothing to acknowledge.
    pub(super) fn acknowledge(&self, user: &str, time: SystemTime) -> Option<AlarmEvent> {
        acknowledge(&mut self.lock(), user, time)
            .then(|| self.event(AlarmEventKind::Acknowledged, time, None, Some(user.to_owned())))
    }

    /// Shelves the alarm as `shelving` says (again, when it is shelved already: the new time
    /// and reason replace the old). Out of service, it cannot be shelved.
    pub(super) fn shelve(&self, shelving: Shelving) -> Result<AlarmEvent, HandlingError> {
        let mut status = self.lock();
        if status.handling.out_of_service.is_some() {
            return Err(HandlingError::OutOfService(self.definition.name.clone()));
        }
        let event = AlarmEvent {
            reason: Some(shelving.reason.clone()),
            until: Some(shelving.until),
            ..self.handling_event(AlarmEventKind::Shelved, shelving.since, &shelving.by)
        };
        status.handling.changed_at = Some(shelving.since);
        status.handling.shelved = Some(shelving);
        Ok(event)
    }

    /// Unshelves the alarm at `time` for `user` (`None`: its shelving ran out); `None` when it
    /// was not shelved.
    pub(super) fn unshelve(&self, user: Option<&str>, time: SystemTime) -> Option<AlarmEvent> {
        let mut status = self.lock();
        let shelving = status.handling.shelved.take()?;
        status.handling.changed_at = Some(time);
        if status.handling.annunciated() {
            annunciate_again(&mut status, time);
        }
        let kind = match user {
            Some(_) => AlarmEventKind::Unshelved,
            None => AlarmEventKind::ShelvingExpired,
        };
        Some(self.handling_event(kind, time, user.unwrap_or(&shelving.by)))
    }

    /// Since when the alarm has waited, annunciated and unacknowledged, for an acknowledgement,
    /// and the value that tripped it; `None` when it waits for none (looked at under its lock,
    /// nothing copied: the notifications ask every second).
    pub fn waiting_since(&self) -> Option<(SystemTime, Option<f64>)> {
        let status = self.lock();
        if status.state != AlarmState::Active || !status.handling.annunciated() {
            return None;
        }
        status.active_since.map(|since| (since, status.trip_value))
    }

    /// Who shelved the alarm, when its shelving ran out by `now` (looked at under its lock,
    /// nothing copied: the leader asks every alarm every second).
    pub fn shelving_ran_out(&self, now: SystemTime) -> Option<String> {
        self.lock()
            .handling
            .shelved
            .as_ref()
            .filter(|shelving| shelving.until <= now)
            .map(|shelving| shelving.by.clone())
    }

    /// Unshelves the alarm if its shelving ran out by `now`.
    pub(super) fn unshelve_if_due(&self, now: SystemTime) -> Option<AlarmEvent> {
        let due = self
            .lock()
            .handling
            .shelved
            .as_ref()
            .is_some_and(|shelving| shelving.until <= now);
        if due { self.unshelve(None, now) } else { None }
    }

    /// Takes the alarm out of service as `out` says (a shelving ends with it); `None` when it
    /// was out of service already.
    pub(super) fn remove_from_service(&self, out: OutOfService) -> Option<AlarmEvent> {
        let mut status = self.lock();
        if status.handling.out_of_service.is_some() {
            return None;
        }
        let event = AlarmEvent {
            reason: Some(out.reason.clone()),
            ..self.handling_event(AlarmEventKind::OutOfService, out.since, &out.by)
        };
        status.handling.changed_at = Some(out.since);
        status.handling.shelved = None;
        status.handling.out_of_service = Some(out);
        Some(event)
    }

    /// Puts the alarm back in service at `time` for `user`; `None` when it was in service.
    pub(super) fn return_to_service(&self, user: &str, time: SystemTime) -> Option<AlarmEvent> {
        let mut status = self.lock();
        status.handling.out_of_service.take()?;
        status.handling.changed_at = Some(time);
        if status.handling.annunciated() {
            annunciate_again(&mut status, time);
        }
        Some(self.handling_event(AlarmEventKind::InService, time, user))
    }

    /// Suppresses the alarm by design at `time` when its `suppress_when` `holds`, or ends its
    /// suppression: the event, when that changes anything. Ending it while nothing else keeps
    /// the alarm from annunciating, it annunciates again, as after a shelving.
    pub(super) fn suppress(&self, holds: bool, time: SystemTime) -> Option<AlarmEvent> {
        let expression = self.definition.suppress_when.as_ref()?;
        let mut status = self.lock();
        if status.handling.suppressed.is_some() == holds {
            return None;
        }
        let kind = if holds {
            status.handling.suppressed = Some(time);
            AlarmEventKind::Suppressed
        } else {
            status.handling.suppressed = None;
            if status.handling.annunciated() {
                annunciate_again(&mut status, time);
            }
            AlarmEventKind::Unsuppressed
        };
        Some(AlarmEvent {
            reason: Some(expression.to_string()),
            ..self.event(kind, time, None, None)
        })
    }

    fn handling_event(&self, kind: AlarmEventKind, time: SystemTime, user: &str) -> AlarmEvent {
        self.event(kind, time, None, Some(user.to_owned()))
    }

    /// Takes up a change of handling another node made and recorded (`recorded`, a handling
    /// event), unless the alarm's handling changed here since: whether it changed anything.
    /// Nothing is recorded again.
    pub(super) fn handled_elsewhere(&self, recorded: &AlarmEvent) -> bool {
        if self
            .lock()
            .handling
            .changed_at
            .is_some_and(|changed| changed >= recorded.time)
        {
            return false;
        }
        let by = recorded.user.clone().unwrap_or_default();
        let reason = recorded.reason.clone().unwrap_or_default();
        match recorded.kind {
            AlarmEventKind::Shelved => match recorded.until {
                Some(until) => self
                    .shelve(Shelving {
                        by,
                        reason,
                        since: recorded.time,
                        until,
                    })
                    .is_ok(),
                None => false,
            },
            AlarmEventKind::Unshelved | AlarmEventKind::ShelvingExpired => {
                self.unshelve(Some(&by), recorded.time).is_some()
            }
            AlarmEventKind::OutOfService => self
                .remove_from_service(OutOfService {
                    by,
                    reason,
                    since: recorded.time,
                })
                .is_some(),
            AlarmEventKind::InService => self.return_to_service(&by, recorded.time).is_some(),
            AlarmEventKind::Active
            | AlarmEventKind::Cleared
            | AlarmEventKind::Acknowledged
            | AlarmEventKind::Suppressed
            | AlarmEventKind::Unsuppressed => false,
        }
    }

    /// Takes up how the store keeps the alarm handled (shelved, out of service), when a
    /// server starts.
    pub(super) fn restore_handling(&self, kept: &KeptHandling) {
        let (by, reason, since) = (kept.by.clone(), kept.reason.clone(), kept.since);
        let mut status = self.lock();
        status.handling.changed_at = Some(since);
        match (kept.kind, kept.until) {
            (AlarmEventKind::Shelved, Some(until)) => {
                status.handling.shelved = Some(Shelving {
                    by,
                    reason,
                    since,
                    until,
                });
            }
            (AlarmEventKind::OutOfService, _) => {
                status.handling.out_of_service = Some(OutOfService { by, reason, since });
            }
            _ => {}
        }
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
            // Suppression follows the plant's values: known again once they are evaluated, it
            // is taken up so that a restart records no suppression that did not change.
            AlarmEventKind::Suppressed => status.handling.suppressed = Some(recorded.time),
            AlarmEventKind::Unsuppressed => status.handling.suppressed = None,
            // How an alarm is handled by people is not part of its condition's story since its
            // trip.
            AlarmEventKind::Shelved
            | AlarmEventKind::Unshelved
            | AlarmEventKind::ShelvingExpired
            | AlarmEventKind::OutOfService
            | AlarmEventKind::InService => {}
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
            reason: None,
            until: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            on_delay: Duration::ZERO,
            off_delay: Duration::ZERO,
            suppress_when: None,
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

    /// What happens to an alarm, in the order of the state table's columns.
    #[derive(Debug, Clone, Copy)]
    enum Step {
        Trip,
        Clear,
        Acknowledge,
        Shelve,
        Unshelve,
        Expire,
        Remove,
        Restore,
        Suppress,
        Unsuppress,
    }

    const STEPS: [Step; 10] = [
        Step::Trip,
        Step::Clear,
        Step::Acknowledge,
        Step::Shelve,
        Step::Unshelve,
        Step::Expire,
        Step::Remove,
        Step::Restore,
        Step::Suppress,
        Step::Unsuppress,
    ];

    fn apply(alarm: &Alarm, step: Step, time: SystemTime) {
        let shelving = Shelving {
            by: "ops".into(),
            reason: "transmitter replaced".into(),
            since: time,
            until: time + Duration::from_secs(3600),
        };
        let out = OutOfService {
            by: "admin".into(),
            reason: "instrument removed".into(),
            since: time,
        };
        match step {
            Step::Trip => drop(alarm.evaluate(90.0, time)),
            Step::Clear => drop(alarm.evaluate(10.0, time)),
            Step::Acknowledge => drop(alarm.acknowledge("ops", time)),
            Step::Shelve => drop(alarm.shelve(shelving)),
            Step::Unshelve => drop(alarm.unshelve(Some("ops"), time)),
            Step::Expire => drop(alarm.unshelve_if_due(time + Duration::from_secs(7200))),
            Step::Remove => drop(alarm.remove_from_service(out)),
            Step::Restore => drop(alarm.return_to_service("admin", time)),
            Step::Suppress => drop(alarm.suppress(true, time)),
            Step::Unsuppress => drop(alarm.suppress(false, time)),
        }
    }

    /// From each state (reached by the steps on the left), the state after each step, in the
    /// order of [`STEPS`]: trip, clear, acknowledge, shelve, unshelve, expire, remove from
    /// service, restore to service, its `suppress_when` beginning and ending to hold. N normal,
    /// A active (unacknowledged), K acknowledged, U normal-unacked, S shelved, O out of service,
    /// Z suppressed by design.
    #[rustfmt::skip]
    const STATE_TABLE: [(&[Step], &str); 14] = [
        (&[],                                              "A N N S N N O N Z N"),
        (&[Step::Trip],                                    "A U K S A A O A Z A"),
        (&[Step::Trip, Step::Acknowledge],                 "K N K S K K O K Z K"),
        (&[Step::Trip, Step::Clear],                       "A U N S U U O U Z U"),
        (&[Step::Shelve],                                  "S S S S N N O S S S"),
        (&[Step::Trip, Step::Shelve],                      "S S S S A A O S S S"),
        (&[Step::Trip, Step::Shelve, Step::Clear],         "S S S S N N O S S S"),
        (&[Step::Remove],                                  "O O O O O O O N O O"),
        (&[Step::Trip, Step::Remove],                      "O O O O O O O A O O"),
        (&[Step::Trip, Step::Acknowledge, Step::Remove],   "O O O O O O O A O O"),
        (&[Step::Suppress],                                "Z Z Z S Z Z O Z Z N"),
        (&[Step::Trip, Step::Suppress],                    "Z Z Z S Z Z O Z Z A"),
        (&[Step::Trip, Step::Suppress, Step::Clear],       "Z Z Z S Z Z O Z Z N"),
        (&[Step::Trip, Step::Suppress, Step::Shelve],      "S S S S Z Z O S S S"),
    ];

    #[test]
    fn every_state_answers_every_step_as_isa_18_2_says() {
        // A shelved or out-of-service alarm is still evaluated; unshelved or back in service
        // while in alarm, it asks again for an acknowledgement.
        let state = |code| match code {
            "N" => "normal",
            "A" => "active",
            "K" => "acknowledged",
            "U" => "normal-unacked",
            "S" => "shelved",
            "O" => "out-of-service",
            "Z" => "suppressed",
            other => panic!("no state {other:?} in the table's legend"),
        };
        for (from, expected) in STATE_TABLE {
            let expected: Vec<&str> = expected.split(' ').map(state).collect();
            assert_eq!(expected.len(), STEPS.len(), "a column per step");
            for (step, want) in STEPS.into_iter().zip(expected) {
                let alarm = Alarm::new(AlarmDefinition {
                    suppress_when: TagExpression::parse("Pump.Running == false").ok(),
                    ..alarm(Condition::Hi, 80.0, None).definition().clone()
                });
                for (index, earlier) in from.iter().enumerate() {
                    apply(&alarm, *earlier, at(u64::try_from(index).expect("small")));
                }
                apply(&alarm, step, at(10));
                assert_eq!(alarm.status().label(), want, "from {from:?} then {step:?}");
            }
        }
    }

    #[test]
    fn a_condition_activates_or_clears_only_when_it_holds_for_its_delay() {
        let alarm = Alarm::new(AlarmDefinition {
            on_delay: Duration::from_secs(5),
            off_delay: Duration::from_secs(3),
            ..alarm(Condition::Hi, 80.0, None).definition().clone()
        });
        // A blip shorter than the on-delay never activates.
        assert_eq!(alarm.evaluate(90.0, at(0)), None);
        assert_eq!(alarm.evaluate(70.0, at(2)), None, "back before its delay");
        assert_eq!(alarm.settle_delay(at(10)), None, "nothing pending");
        // Held for the delay, it activates when the delay runs out, with the value that began it.
        assert_eq!(alarm.evaluate(91.0, at(20)), None);
        assert_eq!(alarm.evaluate(92.0, at(22)), None, "still waiting");
        assert_eq!(alarm.settle_delay(at(24)), None, "not yet");
        let active = alarm.settle_delay(at(26)).expect("its delay ran out");
        assert_eq!(
            (active.kind, active.time, active.value),
            (AlarmEventKind::Active, at(25), Some(91.0))
        );
        // A write after the delay carries it out too.
        assert_eq!(alarm.evaluate(10.0, at(30)), None, "clearing waits its off-delay");
        let cleared = alarm.evaluate(10.0, at(33)).expect("held clear for 3 s");
        assert_eq!((cleared.kind, cleared.time), (AlarmEventKind::Cleared, at(33)));
        assert_eq!(alarm.status().state, AlarmState::NormalUnacked);
    }

    #[test]
    fn three_trips_within_a_minute_make_an_alarm_chatter_once_until_it_calms() {
        let alarm = alarm(Condition::Hi, 80.0, None);
        let bounce = |start: u64| {
            for second in [start, start + 20, start + 40] {
                alarm.evaluate(90.0, at(second));
                alarm.evaluate(10.0, at(second + 5));
            }
        };
        bounce(0);
        let chatter = alarm.status().chatter;
        assert!(chatter.chatters_by(at(50)), "three trips in 40 s");
        assert_eq!(chatter.episodes, 1);
        assert!(
            !chatter.chatters_by(at(101)),
            "a minute after its last trip it is calm"
        );
        // A fourth trip right away is the same episode; after calm, a new one.
        alarm.evaluate(90.0, at(55));
        alarm.evaluate(10.0, at(56));
        assert_eq!(alarm.status().chatter.episodes, 1);
        bounce(500);
        assert_eq!(alarm.status().chatter.episodes, 2);
        // Two trips a minute apart and more are no chatter.
        let calm = alarm_named("T.B");
        for second in [0, 61, 122] {
            calm.evaluate(90.0, at(second));
            calm.evaluate(10.0, at(second + 1));
        }
        assert_eq!(calm.status().chatter.episodes, 0);
    }

    fn alarm_named(name: &str) -> Alarm {
        Alarm::new(AlarmDefinition {
            name: name.into(),
            ..alarm(Condition::Hi, 80.0, None).definition().clone()
        })
    }

    #[test]
    fn a_shelved_alarm_is_still_evaluated_and_its_transitions_recorded() {
        let alarm = alarm(Condition::Hi, 80.0, None);
        apply(&alarm, Step::Shelve, at(0));
        let tripped = alarm.evaluate(90.0, at(1)).expect("evaluated while shelved");
        assert_eq!(tripped.kind, AlarmEventKind::Active);
        assert!(!alarm.status().handling.annunciated());
        let expired = alarm.unshelve_if_due(at(7200)).expect("its hour is up");
        assert_eq!(
            (expired.kind, expired.user.as_deref()),
            (AlarmEventKind::ShelvingExpired, Some("ops"))
        );
        let status = alarm.status();
        assert_eq!(
            (status.state, status.active_since),
            (AlarmState::Active, Some(at(7200)))
        );
        assert!(alarm.unshelve_if_due(at(7201)).is_none(), "once");
    }

    #[test]
    fn an_alarm_out_of_service_cannot_be_shelved() {
        let alarm = alarm(Condition::Hi, 80.0, None);
        apply(&alarm, Step::Remove, at(0));
        let shelving = Shelving {
            by: "ops".into(),
            reason: "r".into(),
            since: at(1),
            until: at(100),
        };
        assert_eq!(
            alarm.shelve(shelving),
            Err(HandlingError::OutOfService("T.A".into()))
        );
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
        let status = alarm.status();
        assert_eq!(
            status,
            AlarmStatus {
                chatter: status.chatter,
                ..AlarmStatus::NORMAL
            },
            "normal, its trip remembered to tell chattering"
        );
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
