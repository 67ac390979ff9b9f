//! DecideProposal: an operator approves or declines a proposal (the assistant's, an MCP
//! client's, a script's), through the acting path: one audit row says who decided what, before
//! an approval is carried out as the operator's own write or acknowledgement would be.

use std::future::Future;

use tserver_proto::v1::{
    DecideProposalReply, DecideProposalRequest, Decision, ErrorCode, WriteOutcome, server_frame,
};

use super::audit::{act_error, signatures};
use super::context::ConnectionContext;
use super::to_proto::{CallError, proposal, write_outcome};
use plant::Runtime;
use plant::actions::DecideProposal;

/// Checks the call and claims the proposal now; the returned future audits, then carries the
/// decision out and settles the proposal.
pub(crate) fn apply(
    request: DecideProposalRequest,
    context: &ConnectionContext,
    runtime: &Runtime,
) -> Result<impl Future<Output = server_frame::Body> + Send + 'static, CallError> {
    let actor = context.actor()?;
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
    let act = DecideProposal {
        id: request.id,
        approve,
        comment: request.comment,
        signatures: signatures(request.signatures)?,
    };
    let work = runtime.act(actor, act, context).map_err(act_error)?;
    Ok(async move {
        match work.await {
            Ok(decided) => server_frame::Body::DecideProposal(DecideProposalReply {
                proposal: Some(Box::new(proposal(&decided.proposal))),
                write_outcome: decided
                    .write
                    .map_or(WriteOutcome::Unspecified, |done| write_outcome(done).0)
                    .into(),
            }),
            Err(refusal) => act_error(refusal).into_body(),
        }
    })
}
