//! What every act on alarms shares: each alarm is known now; the act is one audit row per alarm
//! (a refusal for the role too), recorded before it is carried out; when any of them is an
//! alarm the plant file marks `signed`, one signature of the actor's signs every row, for the
//! acts that are signed.

use std::time::SystemTime;

use super::signatures::{GivenSignature, Needed, sign_and_record};
use super::{ActError, ActWork, Actor, AuditBound, AuditRow, Audited, Permitted};
use crate::Runtime;
use store::AuditAction;

/// The acts on alarms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AlarmActKind {
    Acknowledge,
    Shelve,
    Unshelve,
    RemoveFromService,
    ReturnToService,
}

impl AlarmActKind {
    /// The act as the audit names it, who may do it, in a refusal's words, what did not
    /// happen when its audit could not be recorded, and whether it takes the actor's
    /// signature on an alarm marked `signed` (what brings an alarm back takes none).
    fn rules(self) -> (AuditAction, Permitted, &'static str, &'static str, bool) {
        match self {
            Self::Acknowledge => (
                AuditAction::Acknowledge,
                Permitted::Operators,
                "acknowledge alarms",
                "not acknowledged",
                true,
            ),
            Self::Shelve => (
                AuditAction::Shelve,
                Permitted::Operators,
                "shelve alarms",
                "not shelved",
                true,
            ),
            Self::Unshelve => (
                AuditAction::Unshelve,
                Permitted::Operators,
                "unshelve alarms",
                "not unshelved",
                false,
            ),
            Self::RemoveFromService => (
                AuditAction::RemoveFromService,
                Permitted::Admins,
                "take alarms out of service",
                "not taken out of service",
                true,
            ),
            Self::ReturnToService => (
                AuditAction::ReturnToService,
                Permitted::Admins,
                "put alarms back in service",
                "not put back in service",
                false,
            ),
        }
    }

    /// The act as a signature's request names it.
    fn doing(self) -> &'static str {
        match self {
            Self::Acknowledge => "acknowledging",
            Self::Shelve => "shelving",
            Self::Unshelve => "unshelving",
            Self::RemoveFromService => "taking out of service",
            Self::ReturnToService => "putting back in service",
        }
    }
}

/// An act on alarms, before it is checked.
pub(super) struct AlarmAct {
    /// Which.
    pub(super) kind: AlarmActKind,
    /// The alarms' names (one, or those below a folder).
    pub(super) alarms: Vec<String>,
    /// What the signature and a refusal name: the alarm, or the folder.
    pub(super) naming: String,
    /// What the act sets, as the audit row's new value (a shelving's time and reason).
    pub(super) detail: Option<String>,
    /// The signatures given.
    pub(super) signatures: Vec<GivenSignature>,
}

/// Checks `act` by `actor` now; the work that records its audit rows (bounded by `bound`) and
/// then carries it out with `carry_out` (given the acting name and the receipt), whose error
/// is an alarm gone meanwhile or what an alarm's state refuses.
pub(super) fn check<T: Send + 'static>(
    act: AlarmAct,
    runtime: &Runtime,
    actor: Actor,
    bound: &dyn AuditBound,
    carry_out: impl FnOnce(&Runtime, &str, &Audited) -> Result<T, String> + Send + 'static,
) -> Result<ActWork<T>, ActError> {
    let AlarmAct {
        kind,
        alarms,
        naming,
        detail,
        signatures,
    } = act;
    let (action, permitted, words, not_done, signed_when_marked) = kind.rules();
    let objects = runtime.objects();
    let mut signed = false;
    for alarm in &alarms {
        let Some(known) = objects.alarm(alarm) else {
            return Err(ActError::Invalid(format!(
                "no alarm named {:?}",
                alarm.chars().take(200).collect::<String>()
            )));
        };
        signed |= known.definition().signed;
    }
    let acts = actor.may(permitted);
    let now = SystemTime::now();
    let rows: Vec<AuditRow> = alarms
        .iter()
        .map(|alarm| {
            let mut entry = actor.audit_entry(action, alarm, now);
            entry.new_value.clone_from(&detail);
            if !acts {
                "permission denied".clone_into(&mut entry.outcome);
            }
            AuditRow { entry, acts }
        })
        .collect();
    // A refusal for the role is about the role, not a missing signature.
    let needed = Needed {
        actor: acts && signed && signed_when_marked,
        witness: false,
    };
    let signing = needed.pending(
        || format!("{} {naming}", kind.doing()),
        &actor.acting_name(),
        signatures,
        (&rows, bound),
    )?;
    let rows = bound.bound(rows);
    let runtime = runtime.clone();
    Ok(Box::pin(async move {
        let audited = sign_and_record(&runtime, signing, rows, not_done).await?;
        actor.refusal_unless(permitted, words)?;
        carry_out(&runtime, &actor.acting_name(), &audited).map_err(ActError::Invalid)
    }))
}
