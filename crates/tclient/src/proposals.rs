//! Proposals as a person reads them at a terminal: what would be done, why, by whom, and
//! where it stands.

use service_client::{Proposal, ProposalState, ProposedAction, ProposedValue};

/// One line: `p-3f2a9c01b7de: write 80 to Tank1.Setpoint (was 65) — "Level is high" — the
/// assistant (turn 3, asked by alice) — pending`.
pub fn describe(proposal: &Proposal) -> String {
    let action = match &proposal.action {
        Some(ProposedAction::Write(write)) => format!(
            "write {} to {} (was {})",
            value_text(write.proposed.as_ref()),
            write.tag,
            value_text(write.current.as_ref())
        ),
        Some(ProposedAction::AcknowledgeAlarm(alarm)) => format!("acknowledge alarm {alarm}"),
        None => "an action this client does not know".to_owned(),
    };
    let state = match ProposalState::try_from(proposal.state) {
        Ok(ProposalState::Pending) => "pending".to_owned(),
        Ok(ProposalState::Deciding) => "being decided".to_owned(),
        _ if !proposal.outcome.is_empty() => proposal.outcome.clone(),
        _ => "unknown state".to_owned(),
    };
    format!(
        "{}: {action} — {:?} — {} — {state}",
        proposal.id, proposal.reason, proposal.proposer
    )
}

/// A wire value as text: numbers and bools as written, text quoted.
fn value_text(value: Option<&service_client::ProposedValueMessage>) -> String {
    match value.and_then(|value| value.kind.as_ref()) {
        Some(ProposedValue::Number(number)) => number.to_string(),
        Some(ProposedValue::Integer(integer)) => integer.to_string(),
        Some(ProposedValue::Boolean(boolean)) => boolean.to_string(),
        Some(ProposedValue::Text(text)) => format!("{text:?}"),
        None => "nothing".to_owned(),
    }
}
