//! DecideProposal: an operator approves or declines a proposal (the assistant's, an MCP
//! client's, a script's). Approval carries it out as the operator's own WriteTags or
//! AcknowledgeAlarm would, checked again now, under the deciding user's login; either way one
//! audit row says who decided what was proposed, by whom, in which turn, before anything is
//! done. Claiming the proposal first makes a second decision at the same moment fail.

use std::future::Future;
use std::time::SystemTime;

use tserver_proto::v1::{
    DecideProposalReply, DecideProposalRequest, Decision, ErrorCode, WriteOutcome, server_frame,
};

use super::audit::{audit_then_authorize, bounded_audit};
use super::audit_bounds::cut;
use super::context::ConnectionContext;
use super::to_proto::{CallError, proposal};
use plant::Runtime;
use plant::proposals::{Claim, ProposalState, ProposedAction};
use plant::tag_writes::{Carried, CheckedWrite, FieldWriteError, GivenValue, Writer, check_write};
use store::{AuditAction, AuditEntry};

/// The longest comment, in characters (stated in `proto/tserver.proto`).
pub(crate) const MAX_COMMENT_CHARS: usize = 500;

/// What an approval carries out, checked now.
enum Approved {
    Write(Result<CheckedWrite, String>),
    Acknowledge(String),
}

/// Checks the call and claims the proposal now; the returned future audits, then carries the
/// decision out and settles the proposal.
pub(crate) fn apply(
    request: DecideProposalRequest,
    context: &ConnectionContext,
    runtime: &Runtime,
) -> Result<impl Future<Output = server_frame::Body> + Send + 'static, CallError> {
    let login = context.logged_in()?;
    let approve = match Decision::try_from(request.decision) {
        Ok(Decision::Approve) => true,
        Ok(Decision::Decline) => false,
        _ => {
            return Err(CallError::new(
                ErrorCode::InvalidArgument,
                "decision: give DECISION_APPROVE or DECISION_DECLINE",
            ));
        }
    };
    if request.comment.chars().count() > MAX_COMMENT_CHARS {
        return Err(CallError::new(
            ErrorCode::InvalidArgument,
            format!("comment: at most {MAX_COMMENT_CHARS} characters"),
        ));
    }
    let role = login.role;
    let user = login.name.to_string();
    let mut entry = AuditEntry {
        time: SystemTime::now(),
        user: user.clone(),
        connection: context.guid.to_string(),
        peer: context.peer.to_string(),
        action: AuditAction::Write,
        target: request.id.clone(),
        old_value: None,
        new_value: None,
        outcome: format!("permission denied (deciding proposal {})", request.id),
    };
    let runtime = runtime.clone();
    if !role.can_operate() {
        // Refused without claiming it: the proposal stays pending for someone who may decide.
        // Audited as the act it would have decided (an acknowledgement's as one), on its target.
        if let Some(proposal) = runtime.proposals().get(&request.id) {
            match &proposal.action {
                ProposedAction::Write { tag, .. } => entry.target.clone_from(tag),
                ProposedAction::AcknowledgeAlarm { alarm } => {
                    entry.action = AuditAction::Acknowledge;
                    entry.target.clone_from(alarm);
                }
            }
        }
        let entries = bounded_audit(context, vec![entry]);
        return Ok(futures::future::Either::Left(async move {
            match audit_then_authorize(&runtime, entries, "nothing was decided", role, "decide proposals")
                .await
            {
                Err(refusal) => refusal,
                Ok(()) => {
                    CallError::new(ErrorCode::Internal, "a refused decision was authorized").into_body()
                }
            }
        }));
    }
    let claim = runtime
        .proposals()
        .claim(&request.id, SystemTime::now())
        .map_err(|not_pending| CallError::new(ErrorCode::InvalidArgument, not_pending.to_string()))?;
    let proposed = claim.proposal().clone();
    let source = format!("{}, proposed by {}", proposed.id, proposed.proposer.describe());
    let objects = runtime.objects();
    let approved = match &proposed.action {
        ProposedAction::Write {
            tag, proposed: value, ..
        } => {
            entry.target = tag.clone();
            entry.old_value = objects
                .tag(tag)
                .map(|tag| tag.current().value.to_json().to_string());
            let given = GivenValue::of(value);
            entry.new_value = Some(given.json());
            Approved::Write(check_write(&objects, Writer::Proposal, tag, Some(given)))
        }
        ProposedAction::AcknowledgeAlarm { alarm } => {
            entry.action = AuditAction::Acknowledge;
            entry.target = alarm.clone();
            Approved::Acknowledge(alarm.clone())
        }
    };
    entry.outcome = match (&approved, approve) {
        (Approved::Write(Err(reason)), true) => format!("refused: {reason} (approving {source})"),
        (_, true) => format!("approved {source}: {:?}", proposed.reason),
        (_, false) => format!("declined {source}: {:?}", request.comment),
    };
    let acts = approve && !matches!(approved, Approved::Write(Err(_)));
    // What acts is always recorded, cut but never counted away; what changes nothing is bounded
    // as every refusal is.
    let entries = if acts {
        vec![AuditEntry {
            target: cut(&entry.target),
            old_value: entry.old_value.as_deref().map(cut),
            new_value: entry.new_value.as_deref().map(cut),
            outcome: cut(&entry.outcome),
            ..entry
        }]
    } else {
        bounded_audit(context, vec![entry])
    };
    Ok(futures::future::Either::Right(async move {
        if let Err(refusal) =
            audit_then_authorize(&runtime, entries, "nothing was decided", role, "decide proposals").await
        {
            // Dropping the claim puts the proposal back, pending.
            return refusal;
        }
        let (state, write_outcome) = if approve {
            carry_out(&runtime, approved, &user).await
        } else {
            (
                ProposalState::Declined {
                    by: user,
                    comment: request.comment,
                },
                WriteOutcome::Unspecified,
            )
        };
        settle(&runtime, claim, state, write_outcome)
    }))
}

/// Carries an approval out: the state it settles the proposal in, and for a write where it went.
async fn carry_out(runtime: &Runtime, approved: Approved, user: &str) -> (ProposalState, WriteOutcome) {
    let (outcome, write_outcome) = match approved {
        Approved::Write(Err(reason)) => (format!("not carried out: {reason}"), WriteOutcome::Refused),
        Approved::Write(Ok(write)) => match runtime.carry_out(write).await {
            Ok(Carried::Written) => ("written".to_owned(), WriteOutcome::Written),
            Ok(Carried::SentToField) => ("sent to the field".to_owned(), WriteOutcome::SentToField),
            Err(FieldWriteError::Refused(reason)) => {
                (format!("not written: {reason}"), WriteOutcome::Refused)
            }
            Err(FieldWriteError::NotConfirmed(reason)) => {
                (format!("not confirmed: {reason}"), WriteOutcome::NotConfirmed)
            }
        },
        Approved::Acknowledge(alarm) => (
            match runtime.plant().acknowledge(&alarm, user) {
                Ok(true) => "acknowledged".to_owned(),
                Ok(false) => {
                    "nothing to acknowledge: the alarm was normal or acknowledged already".to_owned()
                }
                Err(error) => format!("not acknowledged: {error}"),
            },
            WriteOutcome::Unspecified,
        ),
    };
    (
        ProposalState::Approved {
            by: user.to_owned(),
            outcome,
        },
        write_outcome,
    )
}

/// Settles the claimed proposal, tells the proposer's next turn, and answers.
fn settle(
    runtime: &Runtime,
    claim: Claim,
    state: ProposalState,
    write_outcome: WriteOutcome,
) -> server_frame::Body {
    let settled = claim.settle(state);
    runtime.proposal_settled(&settled);
    server_frame::Body::DecideProposal(DecideProposalReply {
        proposal: Some(Box::new(proposal(&settled))),
        write_outcome: write_outcome.into(),
    })
}
