//! Chat: one operator turn on the Local AI cached path.

use std::future::Future;

use localai::{ChatCaller, ChatTurn, LocalAi};
use tserver_proto::v1::{ChatReply, ChatRequest, server_frame};

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
