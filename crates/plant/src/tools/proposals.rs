//! Proposal tools (ModelOptions 0x40): the assistant (or an MCP client, or a script) proposes
//! a tag write, an alarm acknowledgement or an alarm's shelving for an operator to decide. A proposal is checked at
//! once as the operator's own action would be, then kept pending on the [`ProposalBoard`]; the
//! tools hold a plant reader and the board only, so nothing they do can write. A proposer
//! follows its proposal to the decision with `runtime_get_proposal`.

use std::sync::Arc;
use std::time::SystemTime;

use localai::tools::{ProposalId, ToolCaller, ToolDefinition, ToolError};
use serde_json::{Value, json};

use super::{find_tag, short_text};
use crate::objects::AlarmState;
use crate::plant::PlantReader;
use crate::proposals::{Proposal, ProposalBoard, ProposalState, ProposedAction, action_words, state_words};
use crate::tag_writes::{GivenValue, Writer, check_write};

/// The longest reason kept, in characters.
const MAX_REASON_CHARS: usize = 500;

/// What every successful proposal tells its proposer.
const WAITING: &str = "proposed, waiting for the operator";

pub(super) fn tools(plant: &PlantReader, board: &Arc<ProposalBoard>) -> Vec<ToolDefinition> {
    let reason = json!({"type": "string", "minLength": 1, "maxLength": MAX_REASON_CHARS,
        "description": "Why, in one or two sentences the operator will read before deciding."});
    vec![
        proposal_tool(
            plant,
            board,
            "runtime_propose_write",
            "Propose writing a value to a tag (a setpoint, a command). Nothing is written: the operator sees the \
             proposal with your reason and approves or declines it; you are told the outcome at the next turn. \
             Only tags the plant lets you propose are accepted; the value must suit the tag's type and range.",
            json!({"type": "object", "additionalProperties": false, "required": ["tag", "value", "reason"],
            "properties": {
                "tag": {"type": "string", "minLength": 1, "maxLength": 512,
                        "description": "Dotted tag name (e.g. Tank1.FillValve) or UNS path."},
                "value": {"description": "The value to write: a number, true/false, or text; for a tag \
                           with allowedValues (as runtime_get_value shows), one of them, spelled as listed."},
                "reason": reason.clone()
            }}),
            propose_write,
        ),
        proposal_tool(
            plant,
            board,
            "runtime_propose_alarm_ack",
            "Propose acknowledging an alarm that is active or back to normal but unacknowledged. Nothing is \
             acknowledged: the operator decides; you are told the outcome at the next turn.",
            json!({"type": "object", "additionalProperties": false, "required": ["alarm", "reason"],
            "properties": {
                "alarm": {"type": "string", "minLength": 1, "maxLength": 512,
                          "description": "The alarm's name, as runtime_get_active_alarms lists it."},
                "reason": reason.clone()
            }}),
            propose_alarm_ack,
        ),
        proposal_tool(
            plant,
            board,
            "runtime_propose_alarm_shelve",
            "Propose shelving an alarm for a while, active or not (a nuisance alarm, an instrument being \
             replaced): while shelved it is still recorded but not shown to operators, and it comes back by \
             itself when the time is up. Nothing is shelved: the operator decides; you are told the outcome at \
             the next turn. Say why: the reason is kept with the shelving.",
            json!({"type": "object", "additionalProperties": false, "required": ["alarm", "minutes", "reason"],
            "properties": {
                "alarm": {"type": "string", "minLength": 1, "maxLength": 512,
                          "description": "The alarm's name, as runtime_get_active_alarms or runtime_get_alarm_report lists it."},
                "minutes": {"type": "integer", "minimum": 1, "maximum": MAX_SHELVE_MINUTES,
                            "description": "For how long, in minutes (the site's ShelvingMaxHours bounds it, 24 h unless set)."},
                "reason": reason
            }}),
            propose_alarm_shelve,
        ),
        follow_tool(board),
    ]
}

/// The tool that tells where a proposal stands.
const FOLLOW: &str = "runtime_get_proposal";

fn follow_tool(board: &Arc<ProposalBoard>) -> ToolDefinition {
    let board = Arc::clone(board);
    ToolDefinition::new(
        FOLLOW,
        localai::ModelOptions::PROPOSALS,
        "Tell where a proposal stands: pending, approved (by whom, and what carrying it out did), declined \
         (by whom, with the comment) or expired. Use it to wait for the operator's decision honestly: until it \
         says approved, nothing was done.",
        json!({"type": "object", "additionalProperties": false, "required": ["proposal"],
        "properties": {
            "proposal": {"type": "string", "minLength": 1, "maxLength": 64,
                         "description": "The proposal's id, as the proposing tool gave it (p- and 12 hex digits)."}
        }}),
        move |arguments| {
            let id = arguments.get("proposal").and_then(Value::as_str).unwrap_or_default();
            let outcome = board.get(id).map(|proposal| proposal_standing(&proposal)).ok_or_else(|| {
                ToolError::not_found(format!(
                    "no proposal {:?} is known: a proposal is kept while pending, then among the latest settled ones",
                    short_text(id, 64)
                ))
            });
            std::future::ready(outcome)
        },
    )
    .read_only()
}

/// Where a proposal stands, for whoever follows it.
pub fn proposal_standing(proposal: &Proposal) -> Value {
    let (state, settled) = match &proposal.state {
        ProposalState::Pending => ("pending", false),
        ProposalState::Deciding => ("deciding", false),
        ProposalState::Approved { .. } => ("approved", true),
        ProposalState::Declined { .. } => ("declined", true),
        ProposalState::Expired => ("expired", true),
        ProposalState::Withdrawn => ("withdrawn", true),
    };
    let mut standing = json!({
        "proposal": proposal.id,
        "action": action_words(&proposal.action),
        "reason": proposal.reason,
        "madeAt": localai::iso8601_millis(proposal.made_at),
        "expiresAt": localai::iso8601_millis(proposal.expires_at),
        "state": state,
        "settled": settled,
        "words": state_words(&proposal.state),
    });
    match &proposal.state {
        ProposalState::Approved { by, outcome } => {
            standing["decidedBy"] = by.as_str().into();
            standing["outcome"] = outcome.as_str().into();
        }
        ProposalState::Declined { by, comment } => {
            standing["decidedBy"] = by.as_str().into();
            standing["comment"] = comment.as_str().into();
        }
        ProposalState::Pending | ProposalState::Deciding => {
            standing["note"] =
                "Nothing is done until an operator decides: ask again later, and never say it was done."
                    .into();
        }
        ProposalState::Expired | ProposalState::Withdrawn => {}
    }
    standing
}

/// The longest shelving a proposal may ask for: `ShelvingMaxHours` at its largest, 30 days
/// (the site's own bound is checked when the proposal is decided).
const MAX_SHELVE_MINUTES: u64 = 720 * 60;

fn propose_alarm_shelve(plant: &PlantReader, arguments: &Value) -> Result<ProposedAction, ToolError> {
    let name = arguments.get("alarm").and_then(Value::as_str).unwrap_or_default();
    let minutes = arguments.get("minutes").and_then(Value::as_u64).unwrap_or(0);
    if !(1..=MAX_SHELVE_MINUTES).contains(&minutes) {
        return Err(ToolError::invalid_arguments(format!(
            "'minutes' must be a whole number from 1 to {MAX_SHELVE_MINUTES}"
        )));
    }
    let objects = plant.objects();
    let alarm = objects.alarm(name).ok_or_else(|| {
        ToolError::not_found(format!(
            "no alarm named {:?}; runtime_get_active_alarms lists the alarms needing attention",
            short_text(name, 80)
        ))
    })?;
    let handling = alarm.status().handling;
    if handling.out_of_service.is_some() {
        return Err(ToolError::new(
            "refused",
            format!("alarm {name} is out of service: there is nothing to shelve"),
        ));
    }
    Ok(ProposedAction::ShelveAlarm {
        alarm: alarm.definition().name.clone(),
        duration: std::time::Duration::from_secs(minutes * 60),
    })
}

fn proposal_tool(
    plant: &PlantReader,
    board: &Arc<ProposalBoard>,
    name: &str,
    description: &str,
    parameters: Value,
    check: fn(&PlantReader, &Value) -> Result<ProposedAction, ToolError>,
) -> ToolDefinition {
    let (plant, board) = (plant.clone(), Arc::clone(board));
    ToolDefinition::proposing(name, description, parameters, move |arguments, caller| {
        let outcome = check(&plant, &arguments).and_then(|action| submit(&board, caller, action, &arguments));
        std::future::ready(outcome)
    })
}

fn propose_write(plant: &PlantReader, arguments: &Value) -> Result<ProposedAction, ToolError> {
    let name = arguments.get("tag").and_then(Value::as_str).unwrap_or_default();
    let value = arguments.get("value").unwrap_or(&Value::Null);
    let given = GivenValue::from_json(value).map_err(ToolError::invalid_arguments)?;
    let tag = find_tag(plant, name)?;
    let objects = plant.objects();
    let checked = check_write(&objects, Writer::Proposal, name, Ok(&given))
        .map_err(|reason| ToolError::new("refused", format!("cannot propose writing {name}: {reason}")))?;
    let current = tag.current().value.clone();
    // An operator asked to approve "Manual to Manual" would approve nothing.
    if current == checked.value {
        return Err(ToolError::new(
            "refused",
            format!(
                "{} is {} already: a write would change nothing",
                checked.tag,
                current.to_json()
            ),
        ));
    }
    Ok(ProposedAction::Write {
        tag: checked.tag,
        current,
        proposed: checked.value,
    })
}

fn propose_alarm_ack(plant: &PlantReader, arguments: &Value) -> Result<ProposedAction, ToolError> {
    let name = arguments.get("alarm").and_then(Value::as_str).unwrap_or_default();
    let objects = plant.objects();
    let alarm = objects
        .alarms()
        .iter()
        .find(|alarm| alarm.definition().name == name)
        .ok_or_else(|| {
            ToolError::not_found(format!(
                "no alarm named {:?}; runtime_get_active_alarms lists the alarms needing attention",
                short_text(name, 80)
            ))
        })?;
    match alarm.status().state {
        AlarmState::Active | AlarmState::NormalUnacked => Ok(ProposedAction::AcknowledgeAlarm {
            alarm: alarm.definition().name.clone(),
        }),
        state => Err(ToolError::new(
            "refused",
            format!(
                "alarm {name} is {}: there is nothing to acknowledge",
                state.label()
            ),
        )),
    }
}

/// Puts a checked `action` on the board for `caller`: the result the proposer is given.
fn submit(
    board: &ProposalBoard,
    caller: ToolCaller,
    action: ProposedAction,
    arguments: &Value,
) -> Result<(Value, ProposalId), ToolError> {
    let reason = arguments
        .get("reason")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let reason = short_text(reason.trim(), MAX_REASON_CHARS);
    let proposal = board
        .submit(caller, action, &reason, SystemTime::now())
        .map_err(|refusal| ToolError::new("refused", refusal.to_string()))?;
    Ok((proposal_result(&proposal), ProposalId::new(&proposal.id)))
}

/// A proposal as its proposer is told it.
fn proposal_result(proposal: &Proposal) -> Value {
    let expires_in_s = proposal
        .expires_at
        .duration_since(proposal.made_at)
        .map_or(0, |lifetime| lifetime.as_secs());
    let mut result = json!({
        "proposal": proposal.id,
        "status": WAITING,
        "expires_in_s": expires_in_s,
        "note": "Nothing was done yet: an operator decides. Tell the operator what you proposed and why; \
                 never say it was done.",
        "followWith": FOLLOW,
    });
    match &proposal.action {
        ProposedAction::Write {
            tag,
            current,
            proposed,
        } => {
            result["tag"] = tag.as_str().into();
            result["current"] = current.to_json();
            result["proposed"] = proposed.to_json();
        }
        ProposedAction::AcknowledgeAlarm { alarm } => result["alarm"] = alarm.as_str().into(),
        ProposedAction::ShelveAlarm { alarm, duration } => {
            result["alarm"] = alarm.as_str().into();
            result["minutes"] = (duration.as_secs() / 60).into();
        }
    }
    result
}
