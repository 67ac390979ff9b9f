//! Chat: one operator turn on the Local AI cached path.

use std::future::Future;

use localai::{ChatCaller, LocalAi};
use tserver_proto::v1::{ChatReply, ChatRequest, server_frame};

/// The turn, queued now (so a connection's turns are answered in the order their frames
/// arrived) and run when the returned future is. Never fails at protocol level: model problems
/// are envelope statuses.
pub(crate) fn apply(
    request: &ChatRequest,
    caller: &ChatCaller,
    local_ai: &LocalAi,
) -> impl Future<Output = server_frame::Body> + Send + 'static {
    let turn = local_ai.execute_chat(caller, &request.query_json);
    async move {
        server_frame::Body::Chat(ChatReply {
            reply_json: turn.await,
        })
    }
}
