//! Chat: one operator turn on the Local AI cached path.

use std::future::Future;

use localai::{ChatCaller, ChatTurn, LocalAi, ToolStatus, TurnControls};
use tserver_proto::v1::{
    ChatEvent, ChatProgress, ChatReply, ChatRequest, TokenUsage, ToolFinished, ToolStarted, chat_event,
    server_frame,
};

/// The most bytes a `ServerFrame` adds around the envelope of a chat reply: the call id
/// (a tag and up to 10 varint bytes), the `chat` field's tag and length (up to 5 bytes),
/// `reply_json`'s tag and length (up to 5 bytes), and the token usage (a tag and length, and
/// five counts of up to 11 bytes each): at most 79, rounded up. The envelope limit is the frame
/// limit less this, so every chat reply fits its frame.
pub(crate) const REPLY_FRAME_OVERHEAD: usize = 128;

/// How a chat call goes on: answered now (a closed gate, a malformed query), or a turn to run
/// in a task of its own.
pub(crate) enum ChatCall<F> {
    /// The reply, to send inline.
    Answered(server_frame::Body),
    /// The turn; it already holds its place in the connection's queue.
    Running(F),
}

/// Starts the turn: the gates are checked and the turn queued now (so a connection's turns
/// are answered in the order their frames arrived). Never fails at protocol level: model
/// problems are envelope statuses.
/// `controls` cancel the turn when the client cancels it (its reply then says so) and, for a
/// streamed call, carry where its progress goes.
pub(crate) fn apply(
    request: &ChatRequest,
    caller: &ChatCaller,
    local_ai: &LocalAi,
    controls: TurnControls,
) -> ChatCall<impl Future<Output = server_frame::Body> + Send + 'static> {
    match local_ai.execute_chat_with(caller, &request.query_json, controls) {
        ChatTurn::Answered(reply_json) => ChatCall::Answered(server_frame::Body::Chat(ChatReply {
            reply_json,
            usage: None,
        })),
        ChatTurn::Running(turn) => ChatCall::Running(async move {
            let outcome = turn.await;
            // A turn that never reached the model (its endpoint did not resolve, it was
            // cancelled while queued) carries no usage, as the proto says.
            let reached_model = outcome.model_requests > 0;
            server_frame::Body::Chat(ChatReply {
                reply_json: outcome.envelope,
                usage: reached_model.then_some(TokenUsage {
                    prompt_tokens: outcome.usage.prompt_tokens,
                    completion_tokens: outcome.usage.completion_tokens,
                    cached_tokens: outcome.usage.cached_tokens,
                    reasoning_tokens: outcome.usage.reasoning_tokens,
                    model_requests: outcome.model_requests,
                }),
            })
        }),
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

#[cfg(test)]
mod tests {
    use prost::Message;
    use tserver_proto::v1::ServerFrame;

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
