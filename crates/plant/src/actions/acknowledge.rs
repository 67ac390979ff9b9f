//! An alarm acknowledgement as an act: audited before it happens, a viewer's refusal too; an
//! alarm the plant file marks `signed` takes the acknowledger's signature.

use std::time::SystemTime;

use super::signatures::{Needed, PendingSignatures};
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
        check(self, runtime, actor, bound)
    }
}

fn check(
    AcknowledgeAlarm { alarm, signatures }: AcknowledgeAlarm,
    runtime: &Runtime,
    actor: Actor,
    bound: &dyn AuditBound,
) -> Result<ActWork<bool>, ActError> {
    let objects = runtime.objects();
    let Some(defined) = objects
        .alarms()
        .iter()
        .find(|known| known.definition().name == alarm)
    else {
        return Err(ActError::Invalid(format!(
            "no alarm named {:?}",
            alarm.chars().take(200).collect::<String>()
        )));
    };
    let mut entry = actor.audit_entry(AuditAction::Acknowledge, &alarm, SystemTime::now());
    let acts = actor.may_operate();
    if !acts {
        "permission denied".clone_into(&mut entry.outcome);
    }
    // A viewer's refusal is about the role, not a missing signature.
    let needed = Needed {
        actor: acts && defined.definition().signed,
        witness: false,
    };
    let row = AuditRow { entry, acts };
    let signing = if needed.any() || !signatures.is_empty() {
        needed.check_given(
            &format!("acknowledging {alarm}"),
            &actor.acting_name(),
            &signatures,
        )?;
        Some(PendingSignatures::new(
            signatures,
            std::slice::from_ref(&row),
            bound,
        ))
    } else {
        None
    };
    let rows = bound.bound(vec![row]);
    let runtime = runtime.clone();
    Ok(Box::pin(async move {
        let rows = match signing {
            None => rows,
            Some(signing) => signing.sign(&runtime, rows, "not acknowledged").await?,
        };
        let audited = record(&runtime, rows, "not acknowledged").await?;
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
