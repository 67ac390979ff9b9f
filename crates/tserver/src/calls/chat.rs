//! Chat: one operator turn on the Local AI cached path, streamed or not.

use std::future::Future;

use localai::{ChatCaller, ChatTurn, LocalAi, TurnControls};
use tokio_util::sync::CancellationToken;
use tserver_proto::v1::{ChatReply, ChatRequest, server_frame};

use super::chat_streams::ChatStreams;
use super::to_proto;

/// How a chat call goes on: answered now (a closed gate, a malformed query), or a turn to run
/// beside the connection.
pub(crate) enum ChatCall<F> {
    /// The reply, to send inline.
    Answered(server_frame::Body),
    /// The turn, which already holds its place in the connection's queue, and what cancels it.
    Running { turn: F, cancel: CancellationToken },
}

/// Starts the turn: the gates are checked and the turn queued now (so a connection's turns
/// are answered in the order their frames arrived). Never fails at protocol level: model
/// problems are envelope statuses. A streamed turn's progress goes to `streams` under
/// `call_id`; the turn stops when the returned token is cancelled (its reply then says so).
pub(crate) fn apply(
    call_id: u64,
    request: &ChatRequest,
    caller: ChatCaller,
    local_ai: &LocalAi,
    streams: &mut ChatStreams,
) -> ChatCall<impl Future<Output = server_frame::Body> + Send + 'static> {
    let cancel = CancellationToken::new();
    let controls = TurnControls {
        cancel: cancel.clone(),
        progress: request.stream.then(|| streams.open(call_id)),
    };
    match local_ai.execute_chat_with(&caller, &request.query_json, controls) {
        ChatTurn::Answered(reply_json) => {
            streams.close(call_id);
            ChatCall::Answered(server_frame::Body::Chat(ChatReply {
                reply_json,
                usage: None,
            }))
        }
        ChatTurn::Running(turn) => ChatCall::Running {
            turn: async move {
                let outcome = turn.await;
                server_frame::Body::Chat(ChatReply {
                    usage: to_proto::usage(&outcome),
                    reply_json: outcome.envelope,
                })
            },
            cancel,
        },
    }
}
