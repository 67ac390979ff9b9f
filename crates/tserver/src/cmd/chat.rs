//! Chat: one operator turn on the Local AI cached path.

use localai::{ChatCaller, LocalAi};
use tserver_proto::v1::{ChatReply, ChatRequest, server_frame};

/// Runs the turn. Never fails at protocol level: model problems are envelope statuses.
pub(crate) async fn apply(request: ChatRequest, caller: ChatCaller, local_ai: LocalAi) -> server_frame::Body {
    let reply_json = local_ai.execute_chat(&caller, &request.query_json).await;
    server_frame::Body::Chat(ChatReply { reply_json })
}
