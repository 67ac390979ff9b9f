//! Local AI: calling an OpenAI-compatible model from inside a TServer solution.
//!
//! Two independent execution paths share a few explicit anchors:
//! - the **cached chat path** ([`LocalAi::execute_chat`]): per-connection transcript, tools, hooks;
//! - the **atomic path** (`TK.AIExecute` for server scripts): one stateless POST.
//!
//! The anchors are the settings accessors ([`settings`]), the master gate ([`gates`]) and the
//! reply envelope ([`ai_envelope`]). This crate never sees a socket, a protobuf message or a
//! database: the host implements [`Solution`] to give it settings (and, later, secrets and
//! tag values).

pub mod gates;
pub mod settings;

mod chat;
mod hooks;

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

pub use ai_envelope::{Envelope, Status, ToolStatus, ToolTraceEntry};
use futures::FutureExt;
pub use settings::{ModelOptions, ModelSettings, SettingsRow};
use uuid::Uuid;

/// A failure of the host while reading the solution.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct SolutionError(pub String);

/// What Local AI needs from the solution it runs in. `tserver` implements it over its
/// database; tests implement it in memory.
pub trait Solution: Send + Sync + 'static {
    /// Reads the `SolutionSettings` row afresh. Called at the start of every call.
    fn settings(&self) -> Result<SettingsRow, SolutionError>;
}

/// Who is chatting: the connection identity the server made, and the logged-in user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatCaller {
    /// The server-made GUID of the client connection (`ClientInfo.Guid`); the transcript key.
    pub client_guid: Uuid,
    /// The user logged in on that connection when the turn arrived.
    pub user_name: Arc<str>,
}

/// The Local AI service of one solution: the entry points of both paths.
#[derive(Debug, Clone)]
pub struct LocalAi {
    chat: Arc<chat::ChatPath>,
}

impl LocalAi {
    /// The service for `solution`.
    pub fn new(solution: Arc<dyn Solution>) -> Self {
        Self {
            chat: Arc::new(chat::ChatPath::new(solution)),
        }
    }

    /// One operator chat turn (the spec's `ExecuteChatAsync`). Returns the envelope JSON and
    /// never fails: a panic anywhere inside becomes an `error` envelope.
    pub async fn execute_chat(&self, caller: &ChatCaller, query_json: &str) -> String {
        let turn = AssertUnwindSafe(self.chat.execute(caller, query_json)).catch_unwind();
        match turn.await {
            Ok(envelope) => envelope.to_json(),
            Err(_) => Envelope::precondition_error("internal error: the chat turn panicked").to_json(),
        }
    }

    /// Attaches an `OnBeforeChat` handler: it receives the operator's text before the model
    /// does and returns the text to use. Handlers run in registration order.
    pub fn on_before_chat<F, Fut>(&self, name: &str, handler: F)
    where
        F: Fn(String) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<String, String>> + Send + 'static,
    {
        self.chat.before_chat.attach(name, handler);
    }

    /// Attaches an `OnAfterChatReply` handler: it receives the model's answer and returns the
    /// answer to send. Handlers run in registration order.
    pub fn on_after_chat_reply<F, Fut>(&self, name: &str, handler: F)
    where
        F: Fn(String) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<String, String>> + Send + 'static,
    {
        self.chat.after_reply.attach(name, handler);
    }

    /// Forgets everything held for a client connection that has closed.
    pub fn connection_closed(&self, client_guid: Uuid) {
        self.chat.forget(client_guid);
    }
}

impl std::fmt::Debug for dyn Solution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Solution")
    }
}
