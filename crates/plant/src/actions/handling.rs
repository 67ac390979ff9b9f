//! Shelving and service as acts (ISA-18.2). An operator shelves an alarm, active or not (ahead
//! of maintenance too), for at most `ShelvingMaxHours` with a reason, and unshelves it; an
//! admin takes an alarm out of service with a reason (an instrument being replaced) and puts it
//! back. Each is audited before it takes effect; on an alarm the plant file marks `signed`,
//! shelving and taking out of service take the actor's signature, as acknowledging does.

use std::time::{Duration, SystemTime};

use super::Audited;
use super::one_alarm::{self, AlarmAct, AlarmActKind};
use super::{
    Act, ActError, ActWork, Actor, AuditBound, AuditRow, RemoveFromService, ReturnToService, ShelveAlarm,
    UnshelveAlarm, record,
};
use crate::objects::{HandlingError, OutOfService, Shelving};
use crate::{Plant, Runtime};
use store::{AuditAction, AuditEntry};

/// The longest reason a shelving or a removal from service keeps, in characters.
pub const MAX_REASON_CHARS: usize = 500;

/// The reason as given, trimmed; refused when empty or too long.
fn reason(given: &str) -> Result<String, ActError> {
    let reason = given.trim();
    if reason.is_empty() {
        return Err(ActError::Invalid(
            "reason: say why (the shift after you reads it)".to_owned(),
        ));
    }
    if reason.chars().count() > MAX_REASON_CHARS {
        return Err(ActError::Invalid(format!(
            "reason: at most {MAX_REASON_CHARS} characters"
        )));
    }
    Ok(reason.to_owned())
}

impl Act for ShelveAlarm {
    /// Until when it is shelved.
    type Done = SystemTime;

    fn check(
        self,
        runtime: &Runtime,
        actor: Actor,
        bound: &dyn AuditBound,
    ) -> Result<ActWork<SystemTime>, ActError> {
        let reason = reason(&self.reason)?;
        let longest = runtime.shelving_max();
        if self.duration.is_zero() || self.duration > longest {
            return Err(ActError::Invalid(format!(
                "duration: shelve for 1 minute to {} (ShelvingMaxHours)",
                hours(longest)
            )));
        }
        let act = AlarmAct {
            kind: AlarmActKind::Shelve,
            alarm: self.alarm.clone(),
            detail: Some(format!("for {}: {reason}", hours(self.duration))),
            signatures: self.signatures,
        };
        let (alarm, duration) = (self.alarm, self.duration);
        one_alarm::check(act, runtime, actor, bound, move |runtime, user, audited| {
            let since = SystemTime::now();
            let until = since + duration;
            let shelving = Shelving {
                by: user.to_owned(),
                reason,
                since,
                until,
            };
            runtime
                .plant()
                .shelve(&alarm, shelving, audited)
                .map_err(|error| error.to_string())?;
            Ok(until)
        })
    }
}

impl Act for UnshelveAlarm {
    /// Whether it was shelved.
    type Done = bool;

    fn check(
        self,
        runtime: &Runtime,
        actor: Actor,
        bound: &dyn AuditBound,
    ) -> Result<ActWork<bool>, ActError> {
        bringing_back(
            AlarmActKind::Unshelve,
            self.alarm,
            (runtime, actor, bound),
            Plant::unshelve,
        )
    }
}

impl Act for RemoveFromService {
    /// Whether it was in service.
    type Done = bool;

    fn check(
        self,
        runtime: &Runtime,
        actor: Actor,
        bound: &dyn AuditBound,
    ) -> Result<ActWork<bool>, ActError> {
        let reason = reason(&self.reason)?;
        let act = AlarmAct {
            kind: AlarmActKind::RemoveFromService,
            alarm: self.alarm.clone(),
            detail: Some(reason.clone()),
            signatures: self.signatures,
        };
        let alarm = self.alarm;
        one_alarm::check(act, runtime, actor, bound, move |runtime, user, audited| {
            let out = OutOfService {
                by: user.to_owned(),
                reason,
                since: SystemTime::now(),
            };
            runtime
                .plant()
                .remove_from_service(&alarm, out, audited)
                .map_err(|error| error.to_string())
        })
    }
}

impl Act for ReturnToService {
    /// Whether it was out of service.
    type Done = bool;

    fn check(
        self,
        runtime: &Runtime,
        actor: Actor,
        bound: &dyn AuditBound,
    ) -> Result<ActWork<bool>, ActError> {
        bringing_back(
            AlarmActKind::ReturnToService,
            self.alarm,
            (runtime, actor, bound),
            Plant::return_to_service,
        )
    }
}

/// An act that brings an alarm back (unshelving, returning to service): nothing set, no
/// signature; `carry_out` is the plant's, given the alarm, the acting name and the receipt.
fn bringing_back(
    kind: AlarmActKind,
    alarm: String,
    (runtime, actor, bound): (&Runtime, Actor, &dyn AuditBound),
    carry_out: fn(&Plant, &str, &str, &Audited) -> Result<bool, HandlingError>,
) -> Result<ActWork<bool>, ActError> {
    let act = AlarmAct {
        kind,
        alarm: alarm.clone(),
        detail: None,
        signatures: Vec::new(),
    };
    one_alarm::check(act, runtime, actor, bound, move |runtime, user, audited| {
        carry_out(runtime.plant(), &alarm, user, audited).map_err(|error| error.to_string())
    })
}

/// A duration as a shelving's words: "2 h", "90 min", "1 h 30 min".
fn hours(duration: Duration) -> String {
    let minutes = duration.as_secs().div_ceil(60);
    match (minutes / 60, minutes % 60) {
        (0, minutes) => format!("{minutes} min"),
        (hours, 0) => format!("{hours} h"),
        (hours, minutes) => format!("{hours} h {minutes} min"),
    }
}

impl Runtime {
    /// Unshelves every alarm whose shelving ran out by `now`, their audit rows recorded first
    /// (as the runtime's own act); when the audit cannot be recorded they stay shelved until
    /// the next try (the background work tries every second). Only the node that leads does:
    /// a shelving ends once, audited once, and the other nodes follow its record.
    pub async fn expire_shelvings(&self, now: SystemTime) {
        if !self.leads() {
            return;
        }
        let objects = self.objects();
        let due: Vec<(String, String)> = objects
            .alarms()
            .iter()
            .filter_map(|alarm| {
                let status = alarm.status();
                let shelving = status.handling.shelved.filter(|shelving| shelving.until <= now)?;
                Some((alarm.definition().name.clone(), shelving.by))
            })
            .collect();
        if due.is_empty() {
            return;
        }
        let rows = due
            .iter()
            .map(|(alarm, by)| AuditRow {
                entry: AuditEntry {
                    time: now,
                    user: RUNTIME_USER.to_owned(),
                    connection: RUNTIME_USER.to_owned(),
                    peer: "local".to_owned(),
                    action: AuditAction::Unshelve,
                    target: alarm.clone(),
                    old_value: None,
                    new_value: None,
                    outcome: format!("ok: the shelving by {by} ran out"),
                    signatures: None,
                },
                acts: true,
            })
            .collect();
        if let Ok(audited) = record(self, rows, "not unshelved").await {
            self.plant().unshelve_due(now, &audited);
        }
    }
}

/// The name the runtime's own acts are audited under.
const RUNTIME_USER: &str = "runtime";
