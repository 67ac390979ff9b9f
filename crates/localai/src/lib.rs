//! Local AI: calling an OpenAI-compatible model from inside a TServer solution.
//!
//! Two independent execution paths share a few explicit anchors:
//! - the **cached chat path** ([`LocalAi::execute_chat`]): per-connection transcript, tools, hooks;
//! - the **atomic path** (`TK.AIExecute` for server scripts): one stateless POST.
//!
//! The anchors are the settings accessors ([`settings`]), the master gates ([`gates`]), the
//! secret resolver ([`secrets`]), the tag expression resolver ([`expressions`]), the
//! Authorization decoder ([`auth`]), the reader of what model servers send (`dialect`: replies,
//! tool calls, usage, errors) and the reply envelope ([`ai_envelope`]). This crate never
//! sees a socket, a protobuf message or a database: the host implements [`Solution`] to give it
//! settings, secrets and tag values.

/// Boxes a public `async fn`'s future, so its body, and every future it awaits, compiles once,
/// here, rather than again in each crate that awaits it: rustc builds an `async fn`'s body where
/// its future is polled, so unboxed, a leaf crate compiled the whole async tree beneath it
/// (docs/DECISIONS.md, "Futures boxed at crate boundaries").
pub(crate) use async_recursion::async_recursion as compiled_once;

pub mod expressions;
pub mod gates;
pub mod secrets;
pub mod settings;
pub mod telemetry;
pub mod tools;

mod atomic;
mod chat;
mod dialect;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod hooks;
pub mod progress;

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};

pub use ai_envelope::{Envelope, LAST_RFC3339_MILLIS, Status, ToolStatus, ToolTraceEntry, iso8601_millis};
pub use chat::TurnControls;
pub use chat::transcript::TranscriptBudget;
pub use dialect::Usage;
use futures::FutureExt;
pub use progress::{ChatProgress, ProgressFeed, ProgressTap, progress_feed};
pub use settings::{ModelOptions, ModelSettings, SettingsRow};
/// The Authorization and Headers decoder both paths send their headers through.
pub use solution_settings::headers as auth;
pub use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// A failure of the host while reading the solution.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct SolutionError(pub String);

/// A read of the solution's store: a store that answers at once (a local file) returns a
/// ready future, one across the network (a database server) a future to await. Owned, so a
/// call may carry it past the borrow it was started from.
pub type StoreRead<T> = Pin<Box<dyn Future<Output = Result<T, SolutionError>> + Send + 'static>>;

/// A store read already answered.
pub fn store_read_ready<T: Send + 'static>(result: Result<T, SolutionError>) -> StoreRead<T> {
    Box::pin(std::future::ready(result))
}

/// What Local AI needs from the solution it runs in. `tserver` implements it over its
/// database; tests implement it in memory.
pub trait Solution: Send + Sync + 'static {
    /// The `SolutionSettings` row as it is now: every change committed before the call is in
    /// it. Called at the start of every call.
    fn settings(&self) -> StoreRead<SettingsRow>;

    /// The decrypted value of a secret, `None` when no secret has that name.
    fn secret(&self, name: &str) -> StoreRead<Option<secrets::SecretValue>>;

    /// A tag's current value as text (for `{Tag.X}`), `None` for an unknown tag.
    fn tag_text(&self, name: &str) -> Option<String>;

    /// Every tool the solution has; each chat turn offers the ones its `ModelOptions` bits
    /// allow ([`tools::ToolCatalog::offered`]).
    fn tools(&self) -> &tools::ToolCatalog;
}

/// Who is chatting: the connection identity the server made, and the logged-in user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatCaller {
    /// The server-made GUID of the client connection (`ClientInfo.Guid`); the transcript key.
    pub client_guid: Uuid,
    /// The user logged in on that connection when the turn arrived.
    pub user_name: Arc<str>,
    /// The turn's number on that connection, from 1 (what a proposal names it by).
    pub turn: u64,
}

/// A chat turn as [`LocalAi::execute_chat`] starts it.
pub enum ChatTurn {
    /// Answered at once (a closed gate, unreadable settings, a malformed query): the envelope
    /// JSON. Nothing was asked of the model.
    Answered(String),
    /// Admitted: the turn runs when this future is polled.
    Running(Pin<Box<dyn Future<Output = ChatOutcome> + Send + 'static>>),
}

/// What an admitted chat turn returns: the envelope JSON, and what the turn cost, carried
/// beside the envelope (whose five fields the schema fixes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatOutcome {
    /// The reply envelope JSON.
    pub envelope: String,
    /// The tokens the turn's POSTs cost, summed, as the model server reported them.
    pub usage: Usage,
    /// How many POSTs the turn made to the model server.
    pub model_requests: u32,
    /// The ids of the proposals the turn's tools made (ModelOptions 0x40), in order.
    pub proposals: Vec<crate::tools::ProposalId>,
}

impl ChatOutcome {
    /// The outcome of a turn answered without asking the model.
    fn answered(envelope: String) -> Self {
        Self {
            envelope,
            usage: Usage::default(),
            model_requests: 0,
            proposals: Vec::new(),
        }
    }
}

impl ChatTurn {
    /// The envelope JSON, running the turn if it was admitted.
    #[crate::compiled_once]
    pub async fn reply(self) -> String {
        match self {
            Self::Answered(json) => json,
            Self::Running(turn) => turn.await.envelope,
        }
    }
}

impl std::fmt::Debug for ChatTurn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Answered(json) => f.debug_tuple("Answered").field(json).finish(),
            Self::Running(_) => f.write_str("Running(..)"),
        }
    }
}

/// The Local AI service of one solution: the entry points of both paths.
#[derive(Debug, Clone)]
pub struct LocalAi {
    chat: Arc<chat::ChatPath>,
    atomic: Arc<atomic::AtomicPath>,
    /// The largest envelope JSON returned; larger ones are fitted ([`Envelope::fit`]). No cap
    /// until the host sets one ([`LocalAi::limit_envelope_bytes`]): what an envelope travels
    /// in, and what that costs in bytes, is the host's to know.
    max_envelope_bytes: Arc<AtomicUsize>,
}

impl LocalAi {
    /// The service for `solution`.
    pub fn new(solution: Arc<dyn Solution>) -> Self {
        Self {
            chat: Arc::new(chat::ChatPath::new(Arc::clone(&solution))),
            atomic: Arc::new(atomic::AtomicPath::new(solution)),
            max_envelope_bytes: Arc::new(AtomicUsize::new(usize::MAX)),
        }
    }

    /// Caps the envelope JSON both paths return at `bytes` (at least
    /// [`ai_envelope::MIN_ENVELOPE_BYTES`]); a host that sends envelopes in frames passes its
    /// frame limit less the frame's own bytes. Only ever lowers the cap, so a runtime served
    /// by two servers keeps the smaller frame's.
    pub fn limit_envelope_bytes(&self, bytes: usize) {
        self.max_envelope_bytes
            .fetch_min(bytes.max(ai_envelope::MIN_ENVELOPE_BYTES), Ordering::Relaxed);
    }

    /// The envelope's JSON, fitted to the cap: a reply never breaks the frame it travels in.
    fn reply_json(max_envelope_bytes: &AtomicUsize, envelope: &Envelope) -> String {
        let max = max_envelope_bytes.load(Ordering::Relaxed);
        let json = envelope.to_json();
        if json.len() <= max {
            return json;
        }
        envelope.clone().fit(max).to_json()
    }

    /// One operator chat turn (the spec's `ExecuteChatAsync`). Never fails: a panic anywhere
    /// inside becomes an `error` envelope.
    ///
    /// When the store answers at once (a file), the settings are read, the gates checked and
    /// the query parsed now, on the caller's thread: a refused turn comes back
    /// [`ChatTurn::Answered`] with nothing to run (the gate path costs one settings read and no
    /// task). When the store answers later (a database), the turn comes back
    /// [`ChatTurn::Running`] and reads the settings when it runs, refusals included. Either
    /// way the turn takes its place in the connection's queue now, not when its future first
    /// runs, so a host that calls this in arrival order gets the turns of one connection
    /// answered in that order, however its tasks are scheduled.
    pub fn execute_chat(&self, caller: &ChatCaller, query_json: &str) -> ChatTurn {
        self.execute_chat_with(caller, query_json, TurnControls::default())
    }

    /// [`execute_chat`](Self::execute_chat) for a turn the client steers: when
    /// `controls.cancel` is cancelled, the POST or tool dispatch in flight is dropped and the
    /// turn ends `truncated` with a warning saying so (and the answer text received so far),
    /// keeping in the transcript what a turn cut short keeps; with `controls.progress`, the turn
    /// reports answer text as the model writes it and each tool dispatch as it starts and
    /// ends. The envelope is the same whether the turn is watched or not.
    pub fn execute_chat_with(
        &self,
        caller: &ChatCaller,
        query_json: &str,
        controls: TurnControls,
    ) -> ChatTurn {
        let arrival = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let mut read = self.chat.read_settings();
            // A store that answers at once (a file) is read here, on the caller's thread: a
            // refused turn then costs no task. One across the network keeps the turn's place
            // in its connection's queue now and is read when the turn runs.
            match read.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
                Poll::Ready(row) => Ok(self.chat.admit(row, caller, query_json, controls, None)),
                Poll::Pending => Err((read, self.chat.arrival_ticket(caller), controls)),
            }
        }));
        match arrival {
            Ok(Ok(Ok(admitted))) => ChatTurn::Running(Box::pin(self.run_admitted(admitted))),
            Ok(Ok(Err(refused))) => {
                telemetry::chat_turn(refused.status.as_str());
                ChatTurn::Answered(refused.to_json())
            }
            Ok(Err((read, ticket, controls))) => {
                let service = self.clone();
                let caller = caller.clone();
                let query_json = query_json.to_owned();
                ChatTurn::Running(Box::pin(async move {
                    let row = read.await;
                    let admitted = std::panic::catch_unwind(AssertUnwindSafe(|| {
                        service
                            .chat
                            .admit(row, &caller, &query_json, controls, Some(ticket))
                    }));
                    match admitted {
                        Ok(Ok(admitted)) => service.run_admitted(admitted).await,
                        Ok(Err(refused)) => {
                            telemetry::chat_turn(refused.status.as_str());
                            ChatOutcome::answered(refused.to_json())
                        }
                        Err(_) => Self::turn_panicked(),
                    }
                }))
            }
            Err(_) => ChatTurn::Answered(Self::turn_panicked().envelope),
        }
    }

    /// Runs an admitted turn to its outcome; a panic inside becomes an `error` envelope.
    fn run_admitted(&self, admitted: chat::Admitted) -> impl Future<Output = ChatOutcome> + Send + 'static {
        let chat = Arc::clone(&self.chat);
        let max = Arc::clone(&self.max_envelope_bytes);
        async move {
            match AssertUnwindSafe(chat.execute(admitted)).catch_unwind().await {
                Ok(end) => {
                    telemetry::chat_turn(end.envelope.status.as_str());
                    ChatOutcome {
                        envelope: Self::reply_json(&max, &end.envelope),
                        usage: end.usage,
                        model_requests: end.posts,
                        proposals: end.proposals,
                    }
                }
                Err(_) => Self::turn_panicked(),
            }
        }
    }

    /// What a chat turn that panicked answers (counted as an `error` turn).
    fn turn_panicked() -> ChatOutcome {
        telemetry::chat_turn(Status::Error.as_str());
        ChatOutcome::answered(
            Envelope::precondition_error("internal error: the chat turn panicked").to_json(),
        )
    }

    /// One atomic call (the spec's `ExecuteAtomicAsync`, `TK.AIExecuteAsync` for scripts).
    /// `query` is plain text or `{"system", "user", "context", "metadata"}`. Returns the
    /// envelope JSON and never fails: a panic anywhere inside becomes an `error` envelope.
    #[crate::compiled_once]
    pub async fn execute_atomic(&self, query: &str) -> String {
        let call = AssertUnwindSafe(self.atomic.execute(query)).catch_unwind();
        match call.await {
            Ok(envelope) => Self::reply_json(&self.max_envelope_bytes, &envelope),
            Err(_) => Envelope::precondition_error("internal error: the atomic call panicked").to_json(),
        }
    }

    /// [`execute_atomic`](Self::execute_atomic) for synchronous callers (`TK.AIExecute`).
    ///
    /// Works from a plain thread, from `spawn_blocking`, and from inside an async runtime's
    /// worker (of any flavour): the call runs on a small runtime of its own and this thread
    /// only waits for the answer, so it can neither nest runtimes nor deadlock on the caller's
    /// runtime. Waiting blocks the calling thread, as a synchronous call must.
    pub fn execute_atomic_blocking(&self, query: &str) -> String {
        let runtime = match script_runtime() {
            Ok(runtime) => runtime,
            Err(reason) => return Envelope::precondition_error(reason.clone()).to_json(),
        };
        let (reply, answer) = std::sync::mpsc::sync_channel(1);
        let service = self.clone();
        let query = query.to_owned();
        runtime.spawn(async move {
            let _ = reply.send(service.execute_atomic(&query).await);
        });
        answer.recv().unwrap_or_else(|_| {
            Envelope::precondition_error("internal error: the atomic call was lost").to_json()
        })
    }

    /// Keeps `note` for the next chat turn of connection `client_guid`, told to the model
    /// before the operator's next question (what became of a proposal the turn made: approved,
    /// declined, expired), so the conversation stays truthful. Dropped when the connection has
    /// no transcript (it never chatted, or chat history is off).
    pub fn tell_next_turn(&self, client_guid: Uuid, note: &str) {
        self.chat.tell_next_turn(client_guid, note);
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

    /// Sets the byte budgets of the chat transcripts (per connection and for all together),
    /// from the next turn on.
    pub fn set_transcript_budget(&self, budget: TranscriptBudget) {
        self.chat.set_transcript_budget(budget);
    }

    /// The history bytes all chat transcripts hold now.
    pub fn transcript_bytes(&self) -> usize {
        self.chat.transcript_bytes()
    }

    /// How many chat sessions (connection transcripts) are held.
    pub fn chat_sessions(&self) -> usize {
        self.chat.sessions()
    }

    /// Empties a client connection's chat transcript (the platform's ChatClear): its next
    /// turn starts a fresh conversation. Turns of the connection already running or queued end
    /// first, and what they add is emptied too. Returns whether the transcript held anything.
    #[crate::compiled_once]
    pub async fn clear_transcript(&self, client_guid: Uuid) -> bool {
        self.chat.clear(client_guid).await
    }

    /// Forgets everything held for a client connection that has closed.
    pub fn connection_closed(&self, client_guid: Uuid) {
        self.chat.forget(client_guid);
    }
}

/// The runtime synchronous atomic calls run on, started on first use.
fn script_runtime() -> Result<&'static tokio::runtime::Runtime, &'static String> {
    static RUNTIME: std::sync::OnceLock<Result<tokio::runtime::Runtime, String>> = std::sync::OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("localai-sync")
                .enable_all()
                .build()
                .map_err(|error| format!("the runtime for synchronous calls could not start: {error}"))
        })
        .as_ref()
}

impl std::fmt::Debug for dyn Solution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Solution")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A solution whose every read panics, standing for any bug inside a call.
    struct Exploding;

    impl Solution for Exploding {
        fn settings(&self) -> StoreRead<SettingsRow> {
            panic!("settings store exploded")
        }
        fn secret(&self, _name: &str) -> StoreRead<Option<secrets::SecretValue>> {
            panic!("secret store exploded")
        }
        fn tag_text(&self, _name: &str) -> Option<String> {
            panic!("object model exploded")
        }
        fn tools(&self) -> &tools::ToolCatalog {
            panic!("tool catalog exploded")
        }
    }

    /// A store across the network: its first settings read takes a while, later ones answer
    /// on their second poll; history is on and the model is `url`.
    struct LaterStore {
        url: String,
        reads: std::sync::atomic::AtomicUsize,
        tools: tools::ToolCatalog,
    }

    impl Solution for LaterStore {
        fn settings(&self) -> StoreRead<SettingsRow> {
            let first = self.reads.fetch_add(1, Ordering::Relaxed) == 0;
            let row = SettingsRow {
                model_enabled: true,
                model_settings: Some(serde_json::json!({ "URL": self.url }).to_string()),
                model_options: i64::from(ModelOptions::ENABLE_RUNTIME_MCP | ModelOptions::CHAT_HISTORY),
            };
            Box::pin(async move {
                if first {
                    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
                } else {
                    tokio::task::yield_now().await;
                }
                Ok(row)
            })
        }
        fn secret(&self, _name: &str) -> StoreRead<Option<secrets::SecretValue>> {
            store_read_ready(Ok(None))
        }
        fn tag_text(&self, _name: &str) -> Option<String> {
            None
        }
        fn tools(&self) -> &tools::ToolCatalog {
            &self.tools
        }
    }

    #[tokio::test]
    async fn with_a_store_that_answers_later_a_connections_turns_keep_their_arrival_order() {
        let llm = scripted_llm::ScriptedLlm::start(vec![
            scripted_llm::Reply::text("first answer"),
            scripted_llm::Reply::text("second answer"),
        ])
        .await
        .expect("llm");
        let service = LocalAi::new(Arc::new(LaterStore {
            url: llm.url(),
            reads: std::sync::atomic::AtomicUsize::new(0),
            tools: tools::ToolCatalog::default(),
        }));
        let caller = ChatCaller {
            client_guid: Uuid::new_v4(),
            user_name: Arc::from("operator"),
            turn: 1,
        };
        let one = service.execute_chat(&caller, "one");
        let two = service.execute_chat(&caller, "two");
        assert!(matches!(one, ChatTurn::Running(_)), "{one:?}");
        // The second turn is polled first and its settings come sooner: it still waits.
        let (two, one) = tokio::join!(two.reply(), one.reply());
        let text = |json: &str| Envelope::from_json(json).expect("an envelope").text;
        assert_eq!(
            (text(&one), text(&two)),
            ("first answer".to_owned(), "second answer".to_owned())
        );
        let second_post = llm.requests()[1].json().expect("a JSON body");
        let users: Vec<&str> = second_post["messages"]
            .as_array()
            .expect("messages")
            .iter()
            .filter(|message| message["role"] == "user")
            .filter_map(|message| message["content"].as_str())
            .collect();
        assert_eq!(
            users,
            ["one", "two"],
            "the second turn saw the first in its history"
        );
        llm.stop().await;
    }

    #[tokio::test]
    async fn a_panic_inside_either_path_becomes_an_error_envelope() {
        let service = LocalAi::new(Arc::new(Exploding));
        let caller = ChatCaller {
            client_guid: Uuid::new_v4(),
            user_name: Arc::from("operator"),
            turn: 1,
        };
        for json in [
            service.execute_atomic("hello").await,
            service.execute_chat(&caller, "hello").reply().await,
            service.execute_atomic_blocking("hello"),
        ] {
            let envelope = Envelope::from_json(&json).expect("a valid envelope");
            assert_eq!(envelope.status, Status::Error);
            assert!(
                envelope.warnings[0].contains("panicked"),
                "{:?}",
                envelope.warnings
            );
        }
    }
}
