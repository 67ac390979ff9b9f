//! An alarm acknowledgement as an act: audited before it happens, a viewer's refusal too; an
//! alarm the plant file marks `signed` takes the acknowledger's signature.

use super::alarm_acts::{self, AlarmAct, AlarmActKind};
use super::{AcknowledgeAlarm, Act, ActError, ActWork, Actor, AuditBound, Audited};
use crate::Runtime;

impl Act for AcknowledgeAlarm {
    type Done = bool;

    fn check(
        self,
        runtime: &Runtime,
        actor: Actor,
        bound: &dyn AuditBound,
    ) -> Result<ActWork<bool>, ActError> {
        let act = AlarmAct {
            kind: AlarmActKind::Acknowledge,
            alarms: vec![self.alarm.clone()],
            naming: self.alarm.clone(),
            detail: None,
            signatures: self.signatures,
        };
        let alarm = self.alarm;
        alarm_acts::check(act, runtime, actor, bound, move |runtime, user, audited| {
            // A reload may have removed it meanwhile.
            carry_out(runtime, &alarm, user, audited)
        })
    }
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
