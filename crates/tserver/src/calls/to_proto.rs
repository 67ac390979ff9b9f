//! What the calls send, as the wire carries it: errors, reply frames, tag readings, plant
//! nodes, history samples, alarm states and details, chat progress, token usage and proposals.
//! A leaf: it knows the protobuf types and the plant's and assistant's values, and nothing of
//! connections or calls.

use std::time::{SystemTime, UNIX_EPOCH};

use localai::ToolStatus;
use prost::Message;
use tserver_proto::v1::{
    AlarmDetail, AlarmHistoryEvent, AlarmLimit, AlarmState, ChatEvent, ChatProgress, Error, ErrorCode,
    HistorySample, PlantNode, PlantNodeKind, ProposalState, ProposedShelving, ProposedWrite, ServerFrame,
    TagReading, TokenUsage, ToolFinished, ToolStarted, chat_event, history_sample, proposal, server_frame,
    tag_reading, value,
};

use plant::objects::{Alarm, AlarmDefinition, AlarmStatus, Tag, TagSample};
use plant_model::{AlarmEventKind, Condition, TagType, TagValue};

/// The most bytes a `ServerFrame` adds around the envelope of a chat reply: the call id
/// (a tag and up to 10 varint bytes), the `chat` field's tag and length (up to 5 bytes),
/// `reply_json`'s tag and length (up to 5 bytes), and the token usage (a tag and length, and
/// five counts of up to 11 bytes each): at most 79, rounded up. The envelope limit is the frame
/// limit less this, so every chat reply fits its frame.
pub(crate) const REPLY_FRAME_OVERHEAD: usize = 128;

/// A protocol-level failure of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CallError {
    pub(crate) code: ErrorCode,
    pub(crate) message: String,
}

impl CallError {
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn into_body(self) -> server_frame::Body {
        server_frame::Body::Error(Error {
            code: self.code as i32,
            message: self.message,
        })
    }
}

/// Client text quoted in an error, cut to a sane length.
pub(crate) fn short(text: &str) -> String {
    text.chars().take(200).collect()
}

/// A frame answering `call_id` with `body`.
pub(crate) fn reply(call_id: u64, body: server_frame::Body) -> ServerFrame {
    ServerFrame {
        call_id,
        body: Some(body),
    }
}

/// A frame answering `call_id` (0: the connection) with an error.
pub(crate) fn error_frame(call_id: u64, code: ErrorCode, message: impl Into<String>) -> ServerFrame {
    reply(call_id, CallError::new(code, message).into_body())
}

/// The reading of a name no tag has.
pub(crate) fn unknown_reading(name: &str) -> TagReading {
    TagReading {
        name: name.to_owned(),
        error: "unknown tag".to_owned(),
        ..TagReading::default()
    }
}

/// Milliseconds since the Unix epoch, as the wire carries times (0 for a time before it).
pub(crate) fn epoch_ms(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |since| i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
}

/// The time `ms` milliseconds after the Unix epoch, as the wire carries times; `None` for a
/// negative time or one past what the system's clock can hold.
pub(crate) fn from_epoch_ms(ms: i64) -> Option<SystemTime> {
    UNIX_EPOCH.checked_add(std::time::Duration::from_millis(u64::try_from(ms).ok()?))
}

/// A tag's sample as a display reads it, under the name it was asked by.
pub(crate) fn sample_reading(name: &str, tag: &Tag, sample: &TagSample) -> TagReading {
    let value = match &sample.value {
        TagValue::Number(value) => tag_reading::Value::Number(*value),
        TagValue::Integer(value) => tag_reading::Value::Integer(*value),
        TagValue::Bool(value) => tag_reading::Value::Boolean(*value),
        TagValue::Text(value) => tag_reading::Value::Text(value.to_string()),
    };
    let timestamp_ms = epoch_ms(sample.timestamp);
    // Read after the sample: a Good sample's own time is its last good time, whatever a writer
    // did since.
    let last_good_ms = if sample.quality == plant_model::Quality::GOOD {
        timestamp_ms
    } else {
        tag.last_good().map_or(0, epoch_ms)
    };
    TagReading {
        name: name.to_owned(),
        value: Some(value),
        quality: u32::from(sample.quality.0),
        timestamp_ms,
        units: tag.definition().units.clone(),
        error: String::new(),
        last_good_ms,
    }
}

/// A tag's data type as panels name it.
fn data_type(kind: TagType) -> &'static str {
    match kind {
        TagType::Number => "number",
        TagType::Integer => "integer",
        TagType::Bool => "boolean",
        TagType::String => "text",
    }
}

/// A tag as a node of the plant tree: what a display needs to show it (its alarms' limits
/// too) and to check a write before sending it.
pub(crate) fn tag_node(tag: &Tag, alarms: &[std::sync::Arc<Alarm>]) -> PlantNode {
    let definition = tag.definition();
    let alarm_limits = alarms
        .iter()
        .map(|alarm| {
            let alarm = alarm.definition();
            AlarmLimit {
                alarm: alarm.name.clone(),
                condition: alarm.condition.name().to_owned(),
                limit: (alarm.condition != Condition::Digital).then_some(alarm.limit),
                setpoint: alarm.setpoint,
                priority: alarm.priority,
            }
        })
        .collect();
    PlantNode {
        path: definition.path.clone(),
        name: definition
            .path
            .rsplit('/')
            .next()
            .unwrap_or(&definition.path)
            .to_owned(),
        description: definition.description.clone(),
        kind: PlantNodeKind::Tag as i32,
        has_children: false,
        tag: definition.name.clone(),
        units: definition.units.clone(),
        data_type: data_type(definition.kind).to_owned(),
        writable: definition.writable,
        min: definition.range_low,
        max: definition.range_high,
        allowed_values: definition.allowed_values.clone(),
        alarm_limits,
    }
}

/// One recorded sample of a tag's history.
pub(crate) fn history_sample(sample: &store::HistorySample) -> HistorySample {
    let value = match &sample.value {
        TagValue::Number(value) => history_sample::Value::Number(*value),
        TagValue::Integer(value) => history_sample::Value::Integer(*value),
        TagValue::Bool(value) => history_sample::Value::Boolean(*value),
        TagValue::Text(value) => history_sample::Value::Text(value.to_string()),
    };
    HistorySample {
        timestamp_ms: epoch_ms(sample.time),
        value: Some(value),
        quality: u32::from(sample.quality.0),
    }
}

/// An alarm that is not normal, as an alarm list shows it; `tag` is the tag it watches, when
/// the model still has it.
pub(crate) fn alarm_detail(alarm: &Alarm, status: &AlarmStatus, tag: Option<&Tag>) -> AlarmDetail {
    let definition = alarm.definition();
    let (acknowledged_ms, acknowledged_by) = status
        .acknowledged
        .as_ref()
        .map_or((0, String::new()), |(at, by)| (epoch_ms(*at), by.clone()));
    AlarmDetail {
        name: definition.name.clone(),
        tag: definition.tag.clone(),
        state: status.state.label().to_owned(),
        priority: definition.priority,
        message: definition.message.clone(),
        condition: definition.condition.name().to_owned(),
        // A digital alarm watches a state, not a limit.
        limit: (definition.condition != Condition::Digital).then_some(definition.limit),
        value: tag.map(|tag| sample_reading(&definition.tag, tag, &tag.current())),
        since_ms: status.active_since.map_or(0, epoch_ms),
        acknowledged_by,
        acknowledged_ms,
        cleared_ms: status.cleared_at.map_or(0, epoch_ms),
        trip_value: status.trip_value,
        setpoint: definition.setpoint,
        cause: definition.guidance.cause.clone(),
        consequence: definition.guidance.consequence.clone(),
        response: definition.guidance.response.clone(),
        time_to_respond_s: definition.guidance.time_to_respond,
        chattering: status.chatter.chatters_by(SystemTime::now()),
        chatter_episodes: status.chatter.episodes,
        ..handling_of(definition, status)
    }
}

/// How an alarm is handled, as the handling fields of an [`AlarmDetail`] say it: a
/// suppression by design gives its expression as the reason, and nobody as who.
fn handling_of(definition: &AlarmDefinition, status: &AlarmStatus) -> AlarmDetail {
    let handling = &status.handling;
    if let (None, None, Some(since)) = (&handling.out_of_service, &handling.shelved, handling.suppressed) {
        return AlarmDetail {
            handling: "suppressed".to_owned(),
            handling_reason: definition
                .suppress_when
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
            handled_ms: epoch_ms(since),
            ..AlarmDetail::default()
        };
    }
    match (&handling.out_of_service, &handling.shelved) {
        (Some(out), _) => AlarmDetail {
            handling: "out-of-service".to_owned(),
            handled_by: out.by.clone(),
            handling_reason: out.reason.clone(),
            handled_ms: epoch_ms(out.since),
            ..AlarmDetail::default()
        },
        (None, Some(shelved)) => AlarmDetail {
            handling: "shelved".to_owned(),
            handled_by: shelved.by.clone(),
            handling_reason: shelved.reason.clone(),
            handled_ms: epoch_ms(shelved.since),
            shelved_until_ms: epoch_ms(shelved.until),
            ..AlarmDetail::default()
        },
        (None, None) => AlarmDetail::default(),
    }
}

/// One transition of the alarm history.
pub(crate) fn alarm_history_event(event: &plant_model::AlarmEvent) -> AlarmHistoryEvent {
    AlarmHistoryEvent {
        timestamp_ms: epoch_ms(event.time),
        name: event.alarm.clone(),
        tag: event.tag.clone(),
        kind: match event.kind {
            AlarmEventKind::Active => "active",
            AlarmEventKind::Cleared => "clear",
            AlarmEventKind::Acknowledged => "acknowledged",
            AlarmEventKind::Shelved => "shelved",
            AlarmEventKind::Unshelved => "unshelved",
            AlarmEventKind::ShelvingExpired => "shelving-expired",
            AlarmEventKind::OutOfService => "out-of-service",
            AlarmEventKind::InService => "in-service",
            AlarmEventKind::Suppressed => "suppressed",
            AlarmEventKind::Unsuppressed => "unsuppressed",
        }
        .to_owned(),
        value: event.value,
        user: event.user.clone().unwrap_or_default(),
        condition: event.condition.name().to_owned(),
        priority: event.priority,
        message: event.message.clone(),
    }
}

/// An alarm's state as a subscribed display reads it.
pub(crate) fn alarm_state(alarm: &Alarm, status: &AlarmStatus) -> AlarmState {
    let definition = alarm.definition();
    AlarmState {
        name: definition.name.clone(),
        tag: definition.tag.clone(),
        state: status.label().to_owned(),
        priority: definition.priority,
        message: definition.message.clone(),
    }
}

/// The body of a progress frame: the events as the wire carries them. A proposal (known by
/// its id on `proposals`) is fitted to `room` bytes; one no longer known is left out.
pub(crate) fn progress_body(
    events: Vec<localai::ChatProgress>,
    proposals: &plant::proposals::ProposalBoard,
    room: usize,
) -> server_frame::Body {
    let events = events
        .into_iter()
        .filter_map(|event| {
            Some(ChatEvent {
                event: Some(match event {
                    localai::ChatProgress::ProposalMade { id } => {
                        chat_event::Event::ProposalMade(proposal_within(&proposals.made(&[id]).pop()?, room))
                    }
                    localai::ChatProgress::Text(text) => chat_event::Event::Text(text),
                    localai::ChatProgress::ToolStarted { name, arguments } => {
                        chat_event::Event::ToolStarted(ToolStarted {
                            name,
                            arguments_json: arguments,
                        })
                    }
                    localai::ChatProgress::ToolFinished {
                        name,
                        status,
                        elapsed,
                    } => chat_event::Event::ToolFinished(ToolFinished {
                        name,
                        ok: status == ToolStatus::Ok,
                        elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
                    }),
                }),
            })
        })
        .collect();
    server_frame::Body::ChatProgress(ChatProgress { events })
}

/// A tag value as the wire carries it.
pub(crate) fn value(value: &TagValue) -> tserver_proto::v1::Value {
    let kind = match value {
        TagValue::Number(number) => value::Kind::Number(*number),
        TagValue::Integer(integer) => value::Kind::Integer(*integer),
        TagValue::Bool(boolean) => value::Kind::Boolean(*boolean),
        TagValue::Text(text) => value::Kind::Text(text.to_string()),
    };
    tserver_proto::v1::Value { kind: Some(kind) }
}

/// A write's outcome as the wire says it, and the reason of one not written.
pub(crate) fn write_outcome(done: plant::actions::WriteDone) -> (tserver_proto::v1::WriteOutcome, String) {
    use plant::actions::WriteDone;
    use tserver_proto::v1::WriteOutcome;
    match done {
        WriteDone::Written => (WriteOutcome::Written, String::new()),
        WriteDone::SentToField => (WriteOutcome::SentToField, String::new()),
        WriteDone::Refused(reason) => (WriteOutcome::Refused, reason),
        WriteDone::NotConfirmed(reason) => (WriteOutcome::NotConfirmed, reason),
    }
}

/// A proposal as the wire carries it.
pub(crate) fn proposal(proposal: &plant::proposals::Proposal) -> tserver_proto::v1::Proposal {
    use plant::proposals::{ProposalState as State, ProposedAction};
    let action = match &proposal.action {
        ProposedAction::Write {
            tag,
            current,
            proposed,
        } => proposal::Action::Write(ProposedWrite {
            tag: tag.clone(),
            current: Some(value(current)),
            proposed: Some(value(proposed)),
        }),
        ProposedAction::AcknowledgeAlarm { alarm } => proposal::Action::AcknowledgeAlarm(alarm.clone()),
        ProposedAction::ShelveAlarm { alarm, duration } => proposal::Action::ShelveAlarm(ProposedShelving {
            alarm: alarm.clone(),
            minutes: u32::try_from(duration.as_secs() / 60).unwrap_or(u32::MAX),
        }),
    };
    let (state, outcome) = match &proposal.state {
        State::Pending => (ProposalState::Pending, String::new()),
        State::Deciding => (ProposalState::Deciding, String::new()),
        State::Approved { .. } => (
            ProposalState::Approved,
            plant::proposals::state_words(&proposal.state),
        ),
        State::Declined { .. } => (
            ProposalState::Declined,
            plant::proposals::state_words(&proposal.state),
        ),
        State::Expired => (
            ProposalState::Expired,
            plant::proposals::state_words(&proposal.state),
        ),
        State::Withdrawn => (
            ProposalState::Withdrawn,
            plant::proposals::state_words(&proposal.state),
        ),
    };
    tserver_proto::v1::Proposal {
        id: proposal.id.clone(),
        action: Some(action),
        reason: proposal.reason.clone(),
        proposer: proposal.proposer.describe(),
        turn: match &proposal.proposer {
            localai::tools::ToolCaller::ChatTurn { turn, .. } => *turn,
            _ => 0,
        },
        made_ms: epoch_ms(proposal.made_at),
        expires_ms: epoch_ms(proposal.expires_at),
        state: state.into(),
        outcome,
    }
}

/// [`proposal`] in at most `room` bytes where it can be: what only informs (the reason, the
/// outcome, the value the tag had) is cut first; the tag and the value to write never are.
pub(crate) fn proposal_within(
    proposed: &plant::proposals::Proposal,
    room: usize,
) -> tserver_proto::v1::Proposal {
    let mut message = proposal(proposed);
    if message.encoded_len() <= room {
        return message;
    }
    if let Some(proposal::Action::Write(write)) = &mut message.action
        && let Some(value::Kind::Text(text)) =
            write.current.as_mut().and_then(|current| current.kind.as_mut())
    {
        *text = short(text);
    }
    message.outcome = short(&message.outcome);
    let over = message.encoded_len().saturating_sub(room);
    let keep = message.reason.len().saturating_sub(over + 4);
    let mut cut = keep;
    while !message.reason.is_char_boundary(cut) {
        cut -= 1;
    }
    if cut < message.reason.len() {
        message.reason.truncate(cut);
        message.reason.push('…');
    }
    message
}

/// As many of `proposals` as fit in `room` bytes of a repeated field, in order, each fitted by
/// [`proposal_within`], and how many were left out.
pub(crate) fn proposals_within(
    proposals: &[plant::proposals::Proposal],
    room: usize,
) -> (Vec<tserver_proto::v1::Proposal>, usize) {
    let mut fitted = Vec::with_capacity(proposals.len());
    let mut left = room;
    for (index, proposed) in proposals.iter().enumerate() {
        let proposal = proposal_within(proposed, left.saturating_sub(8));
        let size = proposal.encoded_len();
        // A repeated message field: its tag, its length, its bytes.
        let cost = 1 + prost::encoding::encoded_len_varint(size as u64) + size;
        if cost > left {
            return (fitted, proposals.len() - index);
        }
        left -= cost;
        fitted.push(proposal);
    }
    (fitted, 0)
}

/// The token usage of a chat turn; `None` for a turn that never reached the model (its
/// endpoint did not resolve, it was cancelled while queued), as the proto says.
pub(crate) fn usage(outcome: &localai::ChatOutcome) -> Option<TokenUsage> {
    (outcome.model_requests > 0).then_some(TokenUsage {
        prompt_tokens: outcome.usage.prompt_tokens,
        completion_tokens: outcome.usage.completion_tokens,
        cached_tokens: outcome.usage.cached_tokens,
        reasoning_tokens: outcome.usage.reasoning_tokens,
        model_requests: outcome.model_requests,
    })
}

#[cfg(test)]
mod tests {
    use prost::Message;
    use tserver_proto::v1::ChatReply;

    use super::*;

    #[test]
    fn an_envelope_at_the_limit_fits_its_frame_whatever_the_call_id() {
        for max_frame in [4096, 1024 * 1024, 16 * 1024 * 1024] {
            let reply_json = "x".repeat(max_frame - REPLY_FRAME_OVERHEAD);
            let frame = ServerFrame {
                call_id: u64::MAX,
                body: Some(server_frame::Body::Chat(Box::new(ChatReply {
                    reply_json,
                    usage: Some(TokenUsage {
                        prompt_tokens: u64::MAX,
                        completion_tokens: u64::MAX,
                        cached_tokens: u64::MAX,
                        reasoning_tokens: u64::MAX,
                        model_requests: u32::MAX,
                    }),
                    proposals: Vec::new(),
                    answer_html: String::new(),
                }))),
            };
            assert!(
                frame.encoded_len() <= max_frame,
                "{} > {max_frame}",
                frame.encoded_len()
            );
        }
    }
}
