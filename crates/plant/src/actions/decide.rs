//! A decision on a proposal as an act. Approval carries the proposal out as the decider's own
//! write, acknowledgement or shelving would be, checked again now, under the decider's name; either way
//! one audit row says who decided what was proposed, by whom, before anything is done.
//! Claiming the proposal first makes a second decision at the same moment fail; a claim
//! dropped unsettled (the audit failed) puts the proposal back, pending.

use std::time::{Duration, SystemTime};

use super::signatures::{Needed, PendingSignatures};
use super::{
    Act, ActError, ActWork, Actor, AuditBound, AuditRow, DecideProposal, Decided, WriteDone, acknowledge,
    record, write,
};
use crate::Runtime;
use crate::objects::{Shelving, span_words};
use crate::proposals::{ProposalState, ProposedAction};
use crate::tag_writes::{CheckedWrite, GivenValue, Writer, check_write};
use store::AuditAction;

/// The longest comment on a decision, in characters (stated in `proto/tserver.proto`).
pub const MAX_COMMENT_CHARS: usize = 500;

/// What an approval carries out, checked now.
enum Approved {
    Write(Result<CheckedWrite, String>),
    Acknowledge(String),
    /// The alarm and how long, or why it cannot be shelved now.
    Shelve(Result<(String, Duration), String>),
}

impl Act for DecideProposal {
    type Done = Decided;

    fn check(
        self,
        runtime: &Runtime,
        actor: Actor,
        bound: &dyn AuditBound,
    ) -> Result<ActWork<Decided>, ActError> {
        check(runtime, actor, self, bound)
    }
}

fn check(
    runtime: &Runtime,
    actor: Actor,
    DecideProposal {
        id,
        approve,
        comment,
        signatures,
    }: DecideProposal,
    bound: &dyn AuditBound,
) -> Result<ActWork<Decided>, ActError> {
    let id = id.as_str();
    if comment.chars().count() > MAX_COMMENT_CHARS {
        return Err(ActError::Invalid(format!(
            "comment: at most {MAX_COMMENT_CHARS} characters"
        )));
    }
    let mut entry = actor.audit_entry(AuditAction::Write, id, SystemTime::now());
    entry.outcome = format!("permission denied (deciding proposal {id})");
    let runtime = runtime.clone();
    if !actor.may_operate() {
        // Refused without claiming it: the proposal stays pending for someone who may decide.
        // Audited as the act it would have decided (an acknowledgement's as one), on its target.
        if let Some(proposal) = runtime.proposals().get(id) {
            match &proposal.action {
                ProposedAction::Write { tag, .. } => entry.target.clone_from(tag),
                ProposedAction::AcknowledgeAlarm { alarm } => {
                    entry.action = AuditAction::Acknowledge;
                    entry.target.clone_from(alarm);
                }
                ProposedAction::ShelveAlarm { alarm, .. } => {
                    entry.action = AuditAction::Shelve;
                    entry.target.clone_from(alarm);
                }
            }
        }
        let entries = bound.bound(vec![AuditRow { entry, acts: false }]);
        return Ok(Box::pin(async move {
            record(&runtime, entries, "nothing was decided").await?;
            actor.refusal("decide proposals")?;
            Err(ActError::Invalid("a refused decision was let through".to_owned()))
        }));
    }
    let claim = runtime
        .proposals()
        .claim(id, SystemTime::now())
        .map_err(|not_pending| ActError::Invalid(not_pending.to_string()))?;
    let proposed = claim.proposal().clone();
    let source = format!("{}, proposed by {}", proposed.id, proposed.proposer.describe());
    let objects = runtime.objects();
    let approved = match &proposed.action {
        ProposedAction::Write {
            tag, proposed: value, ..
        } => {
            entry.target.clone_from(tag);
            entry.old_value = objects
                .tag(tag)
                .map(|tag| tag.current().value.to_json().to_string());
            let given = GivenValue::of(value);
            entry.new_value = Some(given.json());
            Approved::Write(check_write(&objects, Writer::Proposal, tag, Ok(&given)))
        }
        ProposedAction::AcknowledgeAlarm { alarm } => {
            entry.action = AuditAction::Acknowledge;
            entry.target.clone_from(alarm);
            Approved::Acknowledge(alarm.clone())
        }
        ProposedAction::ShelveAlarm { alarm, duration } => {
            entry.action = AuditAction::Shelve;
            entry.target.clone_from(alarm);
            entry.new_value = Some(format!("for {}: {}", span_words(*duration), proposed.reason));
            // `ShelvingMaxHours` as it is now, not when proposed.
            let longest = runtime.shelving_max();
            Approved::Shelve(if *duration > longest {
                Err(format!(
                    "a shelving lasts at most {} (ShelvingMaxHours)",
                    span_words(longest)
                ))
            } else {
                Ok((alarm.clone(), *duration))
            })
        }
    };
    entry.outcome = match (&approved, approve) {
        (Approved::Write(Err(reason)) | Approved::Shelve(Err(reason)), true) => {
            format!("refused: {reason} (approving {source})")
        }
        (_, true) => format!("approved {source}: {:?}", proposed.reason),
        (_, false) => format!("declined {source}: {comment:?}"),
    };
    let acts = approve && !matches!(approved, Approved::Write(Err(_)) | Approved::Shelve(Err(_)));
    let what = format!("approving {}", proposed.id);
    let row = AuditRow { entry, acts };
    // What is signed, and the row a refused signature leaves, when signatures are given.
    let signing = (!signatures.is_empty())
        .then(|| PendingSignatures::new(signatures, std::slice::from_ref(&row), bound));
    let rows = bound.bound(vec![row]);
    let signs = match &approved {
        Approved::Write(Ok(write)) => Needed::of(write.signing),
        Approved::Acknowledge(alarm) | Approved::Shelve(Ok((alarm, _))) => Needed {
            actor: runtime.objects().alarm_is_signed(alarm),
            witness: false,
        },
        Approved::Write(Err(_)) | Approved::Shelve(Err(_)) => Needed::default(),
    };
    Ok(Box::pin(async move {
        // Dropping the claim on a refusal puts the proposal back, pending.
        let rows = if approve && acts {
            // `SignedApprovals` is read now, so a change applies from the next decision.
            let settings = runtime
                .store()
                .runtime_settings()
                .await
                .map_err(|error| ActError::Invalid(format!("cannot read the settings: {error}")))?;
            let needed = signs.and(Needed {
                actor: settings.signed_approvals,
                witness: false,
            });
            let given = signing.as_ref().map_or(&[][..], PendingSignatures::given);
            needed.check_given(&what, &actor.acting_name(), given)?;
            match signing.filter(|_| needed.any()) {
                None => rows,
                Some(signing) => signing.sign(&runtime, rows, "nothing was decided").await?,
            }
        } else if signing.is_none() {
            rows
        } else {
            return Err(ActError::Invalid(format!(
                "{} takes no signature; send none",
                if approve { "this approval" } else { "declining" }
            )));
        };
        let audited = record(&runtime, rows, "nothing was decided").await?;
        let user = actor.acting_name();
        let (state, write) = if approve {
            let (outcome, write) = match approved {
                Approved::Write(Err(reason)) => (
                    format!("not carried out: {reason}"),
                    Some(WriteDone::Refused(reason)),
                ),
                Approved::Write(Ok(checked)) => {
                    let done = write::carry_out(&runtime, checked, &audited).await;
                    let outcome = match &done {
                        WriteDone::Written => "written".to_owned(),
                        WriteDone::SentToField => "sent to the field".to_owned(),
                        WriteDone::Refused(reason) => format!("not written: {reason}"),
                        WriteDone::NotConfirmed(reason) => format!("not confirmed: {reason}"),
                    };
                    (outcome, Some(done))
                }
                Approved::Shelve(Err(reason)) => (format!("not carried out: {reason}"), None),
                Approved::Shelve(Ok((alarm, duration))) => {
                    let since = SystemTime::now();
                    let shelving = Shelving {
                        by: user.clone(),
                        reason: proposed.reason.clone(),
                        since,
                        until: since + duration,
                    };
                    let outcome = match runtime.plant().shelve(&alarm, shelving, &audited) {
                        Ok(_) => format!("shelved for {}", span_words(duration)),
                        Err(error) => format!("not shelved: {error}"),
                    };
                    (outcome, None)
                }
                Approved::Acknowledge(alarm) => (
                    match acknowledge::carry_out(&runtime, &alarm, &user, &audited) {
                        Ok(true) => "acknowledged".to_owned(),
                        Ok(false) => {
                            "nothing to acknowledge: the alarm was normal or acknowledged already".to_owned()
                        }
                        Err(error) => format!("not acknowledged: {error}"),
                    },
                    None,
                ),
            };
            (ProposalState::Approved { by: user, outcome }, write)
        } else {
            (ProposalState::Declined { by: user, comment }, None)
        };
        let settled = claim.settle(state);
        runtime.proposal_settled(&settled);
        Ok(Decided {
            proposal: settled,
            write,
        })
    }))
}
