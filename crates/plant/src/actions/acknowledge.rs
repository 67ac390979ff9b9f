//! An alarm acknowledgement as an act: audited before it happens, a viewer's refusal too.

use std::time::SystemTime;

use super::{AcknowledgeAlarm, Act, ActError, ActWork, Actor, AuditBound, AuditRow, Audited, record};
use crate::Runtime;
use store::AuditAction;

impl Act for AcknowledgeAlarm {
    type Done = bool;

    fn check(
        self,
        runtime: &Runtime,
        actor: Actor,
        bound: &dyn AuditBound,
    ) -> Result<ActWork<bool>, ActError> {
        check(self.alarm, runtime, actor, bound)
    }
}

fn check(
    alarm: String,
    runtime: &Runtime,
    actor: Actor,
    bound: &dyn AuditBound,
) -> Result<ActWork<bool>, ActError> {
    let known = runtime
        .objects()
        .alarms()
        .iter()
        .any(|known| known.definition().name == alarm);
    if !known {
        return Err(ActError::Invalid(format!(
            "no alarm named {:?}",
            alarm.chars().take(200).collect::<String>()
        )));
    }
    let mut entry = actor.audit_entry(AuditAction::Acknowledge, &alarm, SystemTime::now());
    let acts = actor.may_operate();
    if !acts {
        "permission denied".clone_into(&mut entry.outcome);
    }
    let entries = bound.bound(vec![AuditRow { entry, acts }]);
    let runtime = runtime.clone();
    Ok(Box::pin(async move {
        let audited = record(&runtime, entries, "not acknowledged").await?;
        actor.refusal("acknowledge alarms")?;
        // A reload may have removed it meanwhile.
        carry_out(&runtime, &alarm, &actor.acting_name(), &audited).map_err(ActError::Invalid)
    }))
}

/// Acknowledges `alarm` for `user`, its audit recorded: whether it had anything to
/// acknowledge, or why it cannot be.
pub(super) fn carry_out(
    runtime: &Runtime,
    alarm: &str,
    user: &str,
    audited: &Audited,
) -> Result<bool, String> {
    runtime
        .plant()
        .acknowledge(alarm, user, audited)
        .map_err(|error| error.to_string())
}
