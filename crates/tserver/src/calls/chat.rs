//! Chat: one operator turn on the Local AI cached path, streamed or not.

use std::future::Future;
use std::sync::Arc;

use localai::{ChatCaller, ChatTurn, TurnControls};
use plant::Runtime;
use prost::Message;
use tokio_util::sync::CancellationToken;
use tserver_proto::v1::{ChatReply, ChatRequest, server_frame};

use super::chat_streams::ChatStreams;
use super::to_proto;
use crate::answer_html::answer_html;

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
    runtime: &Runtime,
    streams: &mut ChatStreams,
) -> ChatCall<impl Future<Output = server_frame::Body> + Send + 'static> {
    let cancel = CancellationToken::new();
    let controls = TurnControls {
        cancel: cancel.clone(),
        progress: request.stream.then(|| streams.open(call_id)),
    };
    let room = streams.frame_room();
    match runtime
        .local_ai()
        .execute_chat_with(&caller, &request.query_json, controls)
    {
        ChatTurn::Answered(reply_json) => {
            streams.close(call_id);
            ChatCall::Answered(server_frame::Body::Chat(Box::new(ChatReply {
                reply_json,
                usage: None,
                proposals: Vec::new(),
                answer_html: String::new(),
            })))
        }
        ChatTurn::Running(turn) => {
            let proposals = Arc::clone(runtime.proposals());
            ChatCall::Running {
                turn: async move {
                    let outcome = turn.await;
                    let mut reply = ChatReply {
                        usage: to_proto::usage(&outcome),
                        reply_json: outcome.envelope,
                        proposals: Vec::new(),
                        answer_html: String::new(),
                    };
                    // As they stand now, as many as the frame holds beside the envelope (a streamed
                    // turn sent each as it was made, and ListProposals lists them all).
                    let made = proposals.made(&outcome.proposals);
                    let left =
                        (room + to_proto::REPLY_FRAME_OVERHEAD).saturating_sub(reply.encoded_len() + 32);
                    reply.proposals = to_proto::proposals_within(&made, left).0;
                    let html = answer_text(&reply.reply_json)
                        .map(|text| answer_html(&text))
                        .unwrap_or_default();
                    let left =
                        (room + to_proto::REPLY_FRAME_OVERHEAD).saturating_sub(reply.encoded_len() + 32);
                    if html.len() <= left {
                        reply.answer_html = html;
                    }
                    server_frame::Body::Chat(Box::new(reply))
                },
                cancel,
            }
        }
    }
}

/// The text of a reply envelope, when it has one.
fn answer_text(envelope: &str) -> Option<String> {
    match serde_json::from_str::<serde_json::Value>(envelope)
        .ok()?
        .get_mut("text")?
        .take()
    {
        serde_json::Value::String(text) if !text.is_empty() => Some(text),
        _ => None,
    }
}
