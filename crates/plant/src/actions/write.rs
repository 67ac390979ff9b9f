//! Tag writes as an act: each requested write checked on its own (known, writable for the
//! writer, of the tag's type, inside its range); all of them, written or refused, audited
//! before any is written; those that passed carried out together.

use std::time::SystemTime;

use super::signatures::{Needed, sign_and_record};
use super::{Act, ActError, ActWork, Actor, AuditBound, AuditRow, Audited, WriteDone, WriteTags};
use crate::Runtime;
use crate::sources::FieldWriteError;
use crate::tag_writes::{CheckedWrite, GivenValue, Writer, check_write};
use plant_model::Quality;
use store::AuditAction;

/// The most writes one act may carry (stated in `proto/tserver.proto` for WriteTags).
pub const MAX_WRITES: usize = 1000;

impl Act for WriteTags {
    type Done = Vec<WriteDone>;

    fn check(
        self,
        runtime: &Runtime,
        actor: Actor,
        bound: &dyn AuditBound,
    ) -> Result<ActWork<Self::Done>, ActError> {
        check(self, runtime, actor, bound)
    }
}

fn check(
    WriteTags { writes, signatures }: WriteTags,
    runtime: &Runtime,
    actor: Actor,
    bound: &dyn AuditBound,
) -> Result<ActWork<Vec<WriteDone>>, ActError> {
    if writes.is_empty() || writes.len() > MAX_WRITES {
        return Err(ActError::Invalid(format!(
            "{} writes: write 1 to {MAX_WRITES} tags per call",
            writes.len()
        )));
    }
    let allowed = actor.may_operate();
    let writer = match actor {
        Actor::User { .. } => Writer::Operator,
        Actor::Script { .. } => Writer::Script,
    };
    let objects = runtime.objects();
    let now = SystemTime::now();
    let mut outcomes = Vec::with_capacity(writes.len());
    let mut accepted = Vec::new();
    let mut rows = Vec::with_capacity(writes.len());
    for (index, write) in writes.into_iter().enumerate() {
        let mut entry = actor.audit_entry(AuditAction::Write, &write.tag, now);
        entry.old_value = objects
            .tag(&write.tag)
            .map(|tag| tag.current().value.to_json().to_string());
        entry.new_value = write.value.as_ref().ok().map(GivenValue::json);
        let checked = if allowed {
            check_write(
                &objects,
                writer,
                &write.tag,
                write.value.as_ref().map_err(String::as_str),
            )
        } else {
            Err("permission denied".to_owned())
        };
        match checked {
            Ok(checked) => {
                accepted.push((index, checked));
                // Until it is carried out.
                outcomes.push(WriteDone::Written);
            }
            Err(reason) => {
                entry.outcome.clone_from(&reason);
                outcomes.push(WriteDone::Refused(reason));
            }
        }
        let acts = entry.outcome == "ok";
        rows.push(AuditRow { entry, acts });
    }
    if !allowed && rows.len() > 1 {
        // A request refused whole is one row, with its count.
        let count = rows.len();
        rows.truncate(1);
        let entry = &mut rows[0].entry;
        entry.target = format!("{} and {} more", store::cut_for_audit(&entry.target), count - 1);
        entry.outcome = format!("permission denied ({count} writes)");
    }
    // Scripts are the integrator's code and sign nothing; a user's writes of signed tags take
    // the signatures the strictest of them asks for.
    let needed = match actor {
        Actor::User { .. } => accepted.iter().fold(Needed::default(), |needed, (_, write)| {
            needed.and(Needed::of(write.signing))
        }),
        Actor::Script { .. } => Needed::default(),
    };
    let what = || match accepted.as_slice() {
        [(_, one)] => format!("writing {}", one.tag),
        _ => "this write".to_owned(),
    };
    let signing = needed.pending(what, &actor.acting_name(), signatures, (&rows, bound))?;
    let rows = bound.bound(rows);
    let runtime = runtime.clone();
    Ok(Box::pin(async move {
        let audited = sign_and_record(&runtime, signing, rows, "nothing was written").await?;
        actor.refusal("write tags")?;
        // Together: each write to the field waits for its acknowledgement, and one act's
        // writes wait at most one acknowledgement timeout, not one each.
        let done = futures::future::join_all(accepted.into_iter().map(|(index, write)| {
            let (runtime, audited) = (&runtime, &audited);
            async move { (index, carry_out(runtime, write, audited).await) }
        }))
        .await;
        for (index, outcome) in done {
            outcomes[index] = outcome;
        }
        Ok(outcomes)
    }))
}

/// Carries out a checked write whose audit is recorded: to the field for a source-fed tag
/// (its source reports the new value back), else into the object model.
pub(super) async fn carry_out(runtime: &Runtime, write: CheckedWrite, audited: &Audited) -> WriteDone {
    match write.source {
        Some(source) => match runtime
            .sources()
            .write(&source, &write.tag, write.value, audited)
            .await
        {
            Ok(()) => WriteDone::SentToField,
            Err(FieldWriteError::Refused(reason)) => WriteDone::Refused(reason),
            Err(FieldWriteError::NotConfirmed(reason)) => WriteDone::NotConfirmed(reason),
        },
        // A reload between the check and now may have removed or retyped the tag.
        None => match runtime.plant().write(&write.tag, write.value, Quality::GOOD) {
            Ok(_) => WriteDone::Written,
            Err(error) => WriteDone::Refused(error.to_string()),
        },
    }
}
