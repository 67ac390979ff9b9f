//! What the calls send, as the wire carries it: errors, reply frames, tag readings and alarm
//! states, chat progress and token usage. A leaf: it knows the protobuf types and the plant's
//! and assistant's values, and nothing of connections or calls.

use std::time::UNIX_EPOCH;

use localai::ToolStatus;
use tserver_proto::v1::{
    AlarmState, ChatEvent, ChatProgress, Error, ErrorCode, ServerFrame, TagReading, TokenUsage, ToolFinished,
    ToolStarted, chat_event, server_frame, tag_reading,
};

use plant::objects::{Alarm, AlarmStatus, Tag, TagSample};
use plant_model::TagValue;

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

/// A tag's sample as a display reads it, under the name it was asked by.
pub(crate) fn sample_reading(name: &str, tag: &Tag, sample: &TagSample) -> TagReading {
    let value = match &sample.value {
        TagValue::Number(value) => tag_reading::Value::Number(*value),
        TagValue::Integer(value) => tag_reading::Value::Integer(*value),
        TagValue::Bool(value) => tag_reading::Value::Boolean(*value),
        TagValue::Text(value) => tag_reading::Value::Text(value.to_string()),
    };
    let timestamp_ms = sample
        .timestamp
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| i64::try_from(since.as_millis()).unwrap_or(i64::MAX));
    TagReading {
        name: name.to_owned(),
        value: Some(value),
        quality: u32::from(sample.quality.0),
        timestamp_ms,
        units: tag.definition().units.clone(),
        error: String::new(),
    }
}

/// An alarm's state as a subscribed display reads it.
pub(crate) fn alarm_state(alarm: &Alarm, status: &AlarmStatus) -> AlarmState {
    let definition = alarm.definition();
    AlarmState {
        name: definition.name.clone(),
        tag: definition.tag.clone(),
        state: status.state.label().to_owned(),
        priority: definition.priority,
        message: definition.message.clone(),
    }
}

/// The body of a progress frame: the events as the wire carries them.
pub(crate) fn progress_body(events: Vec<localai::ChatProgress>) -> server_frame::Body {
    let events = events
        .into_iter()
        .map(|event| ChatEvent {
            event: Some(match event {
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
        .collect();
    server_frame::Body::ChatProgress(ChatProgress { events })
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
                body: Some(server_frame::Body::Chat(ChatReply {
                    reply_json,
                    usage: Some(TokenUsage {
                        prompt_tokens: u64::MAX,
                        completion_tokens: u64::MAX,
                        cached_tokens: u64::MAX,
                        reasoning_tokens: u64::MAX,
                        model_requests: u32::MAX,
                    }),
                })),
            };
            assert!(
                frame.encoded_len() <= max_frame,
                "{} > {max_frame}",
                frame.encoded_len()
            );
        }
    }
}
