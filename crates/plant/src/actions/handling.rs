//! Shelving and service as acts (ISA-18.2). An operator shelves an alarm, active or not (ahead
//! of maintenance too), for at most `ShelvingMaxHours` with a reason, and unshelves it; an
//! admin takes an alarm out of service with a reason (an instrument being replaced) and puts it
//! back, or every alarm of an equipment at once. Each is audited before it takes effect; on an alarm the plant file marks `signed`,
//! shelving and taking out of service take the actor's signature, as acknowledging does.

use std::time::SystemTime;

use super::Audited;
use super::alarm_acts::{self, AlarmAct, AlarmActKind};
use super::{
    Act, ActError, ActWork, Actor, AuditBound, AuditRow, RemoveFromService, ReturnToService, ServiceScope,
    ShelveAlarm, UnshelveAlarm, record,
};
use crate::objects::{AlarmHandling, HandlingError, OutOfService, Shelving, span_words};
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
                span_words(longest)
            )));
        }
        let act = AlarmAct {
            kind: AlarmActKind::Shelve,
            alarms: vec![self.alarm.clone()],
            naming: self.alarm.clone(),
            detail: Some(format!("for {}: {reason}", span_words(self.duration))),
            signatures: self.signatures,
        };
        let (alarm, duration) = (self.alarm, self.duration);
        alarm_acts::check(act, runtime, actor, bound, move |runtime, user, audited| {
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
    /// How many alarms were in service.
    type Done = usize;

    fn check(
        self,
        runtime: &Runtime,
        actor: Actor,
        bound: &dyn AuditBound,
    ) -> Result<ActWork<usize>, ActError> {
        let reason = reason(&self.reason)?;
        let (alarms, naming) = in_scope(runtime, &self.alarms, |handling| {
            handling.out_of_service.is_none()
        })?;
        let act = AlarmAct {
            kind: AlarmActKind::RemoveFromService,
            alarms: alarms.clone(),
            naming,
            detail: Some(reason.clone()),
            signatures: self.signatures,
        };
        alarm_acts::check(act, runtime, actor, bound, move |runtime, user, audited| {
            let since = SystemTime::now();
            let mut taken_out = 0;
            for alarm in &alarms {
                let out = OutOfService {
                    by: user.to_owned(),
                    reason: reason.clone(),
                    since,
                };
                let changed = runtime
                    .plant()
                    .remove_from_service(alarm, out, audited)
                    .map_err(|error| error.to_string())?;
                taken_out += usize::from(changed);
            }
            Ok(taken_out)
        })
    }
}

impl Act for ReturnToService {
    /// How many alarms were out of service.
    type Done = usize;

    fn check(
        self,
        runtime: &Runtime,
        actor: Actor,
        bound: &dyn AuditBound,
    ) -> Result<ActWork<usize>, ActError> {
        let (alarms, naming) = in_scope(runtime, &self.alarms, |handling| {
            handling.out_of_service.is_some()
        })?;
        let act = AlarmAct {
            kind: AlarmActKind::ReturnToService,
            alarms: alarms.clone(),
            naming,
            detail: None,
            signatures: Vec::new(),
        };
        alarm_acts::check(act, runtime, actor, bound, move |runtime, user, audited| {
            let mut returned = 0;
            for alarm in &alarms {
                let changed = runtime
                    .plant()
                    .return_to_service(alarm, user, audited)
                    .map_err(|error| error.to_string())?;
                returned += usize::from(changed);
            }
            Ok(returned)
        })
    }
}

/// The alarms of `scope` and how an act names them: the one alarm as named (whether or not the
/// change applies to it: the act says whether it changed anything), or those below the folder
/// the change applies to (`applies`, on how each is handled now), refused when there are none.
fn in_scope(
    runtime: &Runtime,
    scope: &ServiceScope,
    applies: impl Fn(&AlarmHandling) -> bool,
) -> Result<(Vec<String>, String), ActError> {
    match scope {
        ServiceScope::Alarm(alarm) => Ok((vec![alarm.clone()], alarm.clone())),
        ServiceScope::Folder(path) => {
            let objects = runtime.objects();
            let (folder, below) = objects.alarms_below(path).ok_or_else(|| {
                ActError::Invalid(format!(
                    "no folder {:?}",
                    path.chars().take(200).collect::<String>()
                ))
            })?;
            let shown = folder.to_owned();
            if below.is_empty() {
                return Err(ActError::Invalid(format!("no alarms below {shown}")));
            }
            let alarms: Vec<String> = below
                .into_iter()
                .filter(|alarm| applies(&alarm.status().handling))
                .map(|alarm| alarm.definition().name.clone())
                .collect();
            if alarms.is_empty() {
                return Err(ActError::Invalid(format!(
                    "the alarms below {shown} are all as asked already"
                )));
            }
            let naming = format!("{} alarms below {shown}", alarms.len());
            Ok((alarms, naming))
        }
    }
}

/// An act that brings an alarm back from its shelving: nothing set, no signature; `carry_out` is the plant's, given the alarm, the acting name and the receipt.
fn bringing_back(
    kind: AlarmActKind,
    alarm: String,
    (runtime, actor, bound): (&Runtime, Actor, &dyn AuditBound),
    carry_out: fn(&Plant, &str, &str, &Audited) -> Result<bool, HandlingError>,
) -> Result<ActWork<bool>, ActError> {
    let act = AlarmAct {
        kind,
        alarms: vec![alarm.clone()],
        naming: alarm.clone(),
        detail: None,
        signatures: Vec::new(),
    };
    alarm_acts::check(act, runtime, actor, bound, move |runtime, user, audited| {
        carry_out(runtime.plant(), &alarm, user, audited).map_err(|error| error.to_string())
    })
}

impl Runtime {
    /// Unshelves every alarm whose shelving ran out by `now`, their audit rows recorded first
    /// (as the runtime's own act); when the audit cannot be recorded they stay shelved until
    /// the next try (the background work tries every second). Only the node that leads does:
    /// a shelving ends once, audited once, and the other nodes follow its record.
    #[crate::compiled_once]
    pub async fn expire_shelvings(&self, now: SystemTime) {
        if !self.leads() {
            return;
        }
        let objects = self.objects();
        let due: Vec<(String, String)> = objects
            .alarms()
            .iter()
            .filter_map(|alarm| Some((alarm.definition().name.clone(), alarm.shelving_ran_out(now)?)))
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
