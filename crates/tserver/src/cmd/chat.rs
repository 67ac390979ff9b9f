//! Chat: one operator turn on the Local AI cached path.

use std::future::Future;

use localai::{ChatCaller, ChatTurn, LocalAi};
use tserver_proto::v1::{ChatReply, ChatRequest, server_frame};

/// The most bytes a `ServerFrame` adds around the envelope of a chat reply: the call id
/// (a tag and up to 10 varint bytes), the `chat` field's tag and length (up to 5 bytes), and
/// `reply_json`'s tag and length (up to 5 bytes). The envelope limit is the frame limit less
/// this, so every chat reply fits its frame.
pub(crate) const REPLY_FRAME_OVERHEAD: usize = 32;

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
pub(crate) fn apply(
    request: &ChatRequest,
    caller: &ChatCaller,
    local_ai: &LocalAi,
) -> ChatCall<impl Future<Output = server_frame::Body> + Send + 'static> {
    let body = |reply_json| server_frame::Body::Chat(ChatReply { reply_json });
    match local_ai.execute_chat(caller, &request.query_json) {
        ChatTurn::Answered(json) => ChatCall::Answered(body(json)),
        ChatTurn::Running(turn) => ChatCall::Running(async move { body(turn.await) }),
    }
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
                body: Some(server_frame::Body::Chat(ChatReply { reply_json })),
            };
            assert!(
                frame.encoded_len() <= max_frame,
                "{} > {max_frame}",
                frame.encoded_len()
            );
        }
    }
}
