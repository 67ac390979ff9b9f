//! Proposals as a person reads them at a terminal: what would be done, why, by whom, and
//! where it stands; the `proposals` subcommands, and the approve-or-decline prompt after a chat
//! turn that made some.

use std::io::{BufRead, Write};

use anyhow::{Context, bail};
use service_client::{
    DecideProposalReply, Decision, FailoverClient, Proposal, ProposalState, ProposedAction, ProposedValue,
    WriteOutcome,
};

use crate::signing::{Signer, sign_if_asked};

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
        Some(ProposedAction::ShelveAlarm(shelving)) => format!(
            "shelve alarm {} for {}",
            shelving.alarm,
            humantime::format_duration(std::time::Duration::from_secs(u64::from(shelving.minutes) * 60))
        ),
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

/// The comment a proposal declined at a terminal prompt carries (told to its proposer).
pub const DECLINED_AT_THE_TERMINAL: &str = "declined at the terminal";

/// `proposals list`: one line per pending proposal, or a line saying none wait.
pub async fn list(client: &FailoverClient, output: &mut dyn Write) -> anyhow::Result<()> {
    let pending = client.list_proposals().await?;
    if pending.proposals.is_empty() {
        writeln!(output, "no proposals wait for a decision")?;
    }
    for proposal in &pending.proposals {
        writeln!(output, "{}", describe(proposal))?;
    }
    if pending.left_out > 0 {
        writeln!(
            output,
            "and {} more, newer, left out to fit a frame: decide some, then list again",
            pending.left_out
        )?;
    }
    Ok(())
}

/// `proposals approve|decline ID`: decides, prints the proposal as it now stands and, for an
/// approved write, where it went. A write that was not carried out for certain fails the
/// command, after printing; so does a refusal from the server (its message says why).
pub async fn decide(
    client: &FailoverClient,
    id: &str,
    decision: Decision,
    comment: &str,
    output: &mut dyn Write,
) -> anyhow::Result<()> {
    let reply = client.decide_proposal(id, decision, comment).await?;
    match write_decision(&reply, output)? {
        Some(trouble) => bail!("{trouble}"),
        None => Ok(()),
    }
}

/// `proposals approve ID`: approves, signing at the terminal when the approval takes a
/// signature (`signer`: the logged-in user, and whether standard input is a terminal).
pub async fn approve(
    client: &FailoverClient,
    id: &str,
    comment: &str,
    signer: Signer<'_>,
    input: &mut dyn BufRead,
    output: &mut dyn Write,
) -> anyhow::Result<()> {
    let meaning = service_client::SignatureMeaning::Approved;
    let reply = sign_if_asked(signer, meaning, input, output, |signatures| {
        client.decide_proposal_signed(id, Decision::Approve, comment, signatures)
    })
    .await?;
    match write_decision(&reply, output)? {
        Some(trouble) => bail!("{trouble}"),
        None => Ok(()),
    }
}

/// Prints a decided proposal as it now stands and, for an approved write, where it went.
/// Returns what to report when the write was not carried out for certain.
fn write_decision(reply: &DecideProposalReply, output: &mut dyn Write) -> anyhow::Result<Option<String>> {
    let proposal = reply
        .proposal
        .as_deref()
        .context("the server answered the decision without the proposal")?;
    writeln!(output, "{}", describe(proposal))?;
    let Some(ProposedAction::Write(write)) = &proposal.action else {
        return Ok(None);
    };
    let tag = &write.tag;
    let trouble = match reply.write_outcome() {
        WriteOutcome::Written => {
            writeln!(output, "{tag}: written")?;
            None
        }
        WriteOutcome::SentToField => {
            writeln!(
                output,
                "{tag}: sent to the field (the tag shows the value when the field reports it back)"
            )?;
            None
        }
        WriteOutcome::Refused => {
            writeln!(output, "{tag}: not written")?;
            Some(format!("{}: {tag} was not written", proposal.id))
        }
        WriteOutcome::NotConfirmed => {
            writeln!(
                output,
                "{tag}: not confirmed (it may or may not have reached the field)"
            )?;
            Some(format!("{}: the write to {tag} was not confirmed", proposal.id))
        }
        // A decline writes nothing, so there is nowhere it went.
        WriteOutcome::Unspecified => None,
    };
    Ok(trouble)
}

/// After a chat turn that made `proposals`: with a person at the terminal (`interactive`),
/// asks `approve ID ? [y/N] ` for each on `output` and reads the answer from `input`, approving
/// on `y` or `yes` and declining on anything else (the end of input too); otherwise prints
/// them with how to decide them from elsewhere. A decision the server refuses (decided or
/// withdrawn meanwhile) is printed and the next proposal asked about.
pub async fn decide_at_the_terminal(
    client: &FailoverClient,
    proposals: &[Proposal],
    input: &mut dyn BufRead,
    output: &mut dyn Write,
    interactive: bool,
) -> anyhow::Result<()> {
    for proposal in proposals {
        writeln!(output, "  [proposal] {}", describe(proposal))?;
        if !interactive {
            continue;
        }
        write!(output, "approve {} ? [y/N] ", proposal.id)?;
        output.flush()?;
        let mut answer = String::new();
        input.read_line(&mut answer)?;
        let (decision, comment) = match answer.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => (Decision::Approve, ""),
            _ => (Decision::Decline, DECLINED_AT_THE_TERMINAL),
        };
        match client.decide_proposal(&proposal.id, decision, comment).await {
            Ok(reply) => {
                // Printed already; the person carries on with the next proposal or turn.
                write_decision(&reply, output)?;
            }
            Err(refused) => writeln!(output, "{}: {refused}", proposal.id)?,
        }
    }
    if !interactive && !proposals.is_empty() {
        writeln!(
            output,
            "  decide with `tclient proposals approve ID` (or `decline ID`) from another terminal \
             while this tclient runs: its proposals are withdrawn when it exits"
        )?;
    }
    output.flush()?;
    Ok(())
}
