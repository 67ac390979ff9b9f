//! The cached chat path (`ExecuteChatAsync`): gates, the `OnBeforeChat` hooks, the
//! per-connection transcript, the tool-dispatch loop under a per-turn cap and a wall-clock
//! budget, and the `OnAfterChatReply` hooks.
//!
//! It shares no orchestration or HTTP code with the atomic path (its POST lives in `llm.rs`);
//! the shared anchors are the settings accessors, gates, secret resolver, auth decoder,
//! envelope, and the `dialect` that reads what the model server sends.

mod connections;
pub(crate) mod llm;
mod preview;
pub(crate) mod transcript;

use std::borrow::Cow;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant, SystemTime};

use ai_envelope::{Envelope, ToolStatus, ToolTraceEntry};
use bytes::Bytes;
use dashmap::DashMap;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::dialect::{Arguments, AssistantReply, Channel, ToolCall, Usage, read_reply};
use crate::hooks::HookChain;
use crate::progress::{ChatProgress, ProgressFeed};
use crate::secrets::Redactions;
use crate::settings::{ModelOptions, ModelSettings, SettingsParser, SettingsRow};
use crate::tools::{
    ProposalId, SuccessContent, TOOL_TIMEOUT, ToolCaller, ToolDefinition, ToolError, ToolOutput, unknown_tool,
};
use crate::{ChatCaller, Solution, gates};
use llm::{Endpoint, PostFailure, Transport};
use preview::AnswerPreview;
use transcript::{HistoryMessage, Ticket, Transcript, TranscriptCache, truncate};

/// How much sooner than the turn's budget a tool's own timeout fires.
const TOOL_DEADLINE_MARGIN: Duration = Duration::from_millis(10);

/// How long an endpoint that refused to stream is asked without streaming.
const NO_STREAMING_FOR: Duration = Duration::from_secs(600);

/// What the model is told about its job when tools are offered.
const SYSTEM_PROMPT_WITH_TOOLS: &str = "You are the plant assistant of an industrial automation \
runtime, answering operators at display panels. Use the tools to read live tag values, alarms and \
history; never guess or invent a value, a tag name or an alarm. Tag names look like \
Pump1.MotorCurrent; when unsure of a name, search or browse first. Answer briefly and plainly, \
with units, and say when a value's quality is not Good. When the plant's documents say what an \
alarm means or what to do, quote them and name the document. If the tools cannot answer, say so.";

/// Added when the proposal tools (0x40) are offered.
const SYSTEM_PROMPT_PROPOSALS: &str = "You cannot change anything in the plant yourself. When an \
action would help (a setpoint, a command, acknowledging an alarm), you may propose it with \
runtime_propose_write or runtime_propose_alarm_ack and a short reason; an operator approves or \
declines it. Say what you proposed, never that it was done.";

/// The same without tools (the master bit is on but no category is).
const SYSTEM_PROMPT_WITHOUT_TOOLS: &str = "You are the plant assistant of an industrial \
automation runtime, answering operators at display panels. You cannot read live plant data in \
this configuration: never invent values, and say so when a question needs them. Answer briefly \
and plainly.";

/// An operator's chat query: plain text, or `{"user": "...", "system": "..."}` where
/// `system` adds panel-specific instructions to the system prompt.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ChatQuery {
    pub(crate) user: String,
    system: Option<String>,
}

impl ChatQuery {
    pub(crate) fn parse(query: &str) -> Result<Self, String> {
        // Only an object is more than the question itself: other text is not parsed.
        let parsed = query
            .trim_start()
            .starts_with('{')
            .then(|| serde_json::from_str::<Value>(query));
        let object = match parsed {
            Some(Ok(Value::Object(object))) => object,
            _ if query.trim().is_empty() => return Err("the query is empty".to_owned()),
            _ => {
                return Ok(Self {
                    user: query.to_owned(),
                    system: None,
                });
            }
        };
        let text = |key: &str| -> Result<Option<String>, String> {
            match object.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(text)) if text.trim().is_empty() => Ok(None),
                Some(Value::String(text)) => Ok(Some(text.clone())),
                Some(_) => Err(format!("'{key}' must be a string")),
            }
        };
        Ok(Self {
            user: text("user")?.ok_or("the query object has no 'user' text")?,
            system: text("system")?,
        })
    }
}

/// The cached-path orchestrator of one solution.
#[derive(Debug)]
pub(crate) struct ChatPath {
    solution: Arc<dyn Solution>,
    /// `OnBeforeChat` handlers.
    pub(crate) before_chat: HookChain,
    /// `OnAfterChatReply` handlers.
    pub(crate) after_reply: HookChain,
    transcripts: TranscriptCache,
    settings: SettingsParser,
    /// The end of a request body for the catalog last offered: written once per catalog (the
    /// catalog a turn gets is shared until a tool is registered).
    last_tools_tail: Mutex<Option<(Arc<[ToolDefinition]>, Bytes)>>,
    http: Result<Transport, String>,
    /// Endpoints (as configured) that refused a streamed request, and when: asked without
    /// streaming until `NO_STREAMING_FOR` has passed (the server may be upgraded meanwhile).
    no_streaming: DashMap<String, Instant, foldhash::fast::RandomState>,
}

/// How the tool loop ended, when it did not fail.
enum LoopEnd {
    /// The model answered.
    Answer(String),
    /// The cap was reached and the model answered the tool-less last chance.
    CapThenAnswer(String),
    /// The cap was reached and the model gave no answer.
    CapWithoutAnswer,
}

/// A turn's working state, outside the loop's future so that it survives a budget timeout.
/// The history stays in the transcript, borrowed, never copied: a turn only adds to it.
struct Turn {
    /// This turn's messages: the question, then the exchanges that follow it.
    messages: Vec<HistoryMessage>,
    /// How many leading messages of `messages` extend the history validly (complete tool
    /// exchanges only).
    valid: usize,
    trace: Vec<ToolTraceEntry>,
    warnings: Vec<String>,
    dispatches: usize,
    /// The latest text the model produced this turn.
    partial: String,
    /// The text of the reply being received, as it streams in (empty between POSTs).
    receiving: String,
    /// The tokens the turn's POSTs cost, as the server reported them.
    usage: Usage,
    /// The POSTs the turn made.
    posts: u32,
    /// The ids of the proposals its tools made, in order.
    proposals: Vec<ProposalId>,
}

/// How a turn ended: its envelope, and what it cost (carried beside the envelope).
#[derive(Debug)]
pub(crate) struct TurnEnd {
    pub(crate) envelope: Envelope,
    /// The tokens its POSTs cost, as the server reported them.
    pub(crate) usage: Usage,
    /// The POSTs it made.
    pub(crate) posts: u32,
    /// The ids of the proposals its tools made, in order.
    pub(crate) proposals: Vec<ProposalId>,
}

impl Turn {
    /// A turn that starts with the operator's `question`, and the `warnings` it starts with.
    fn asking(question: &str, warnings: Vec<String>) -> Self {
        let messages = vec![HistoryMessage::user(question)];
        Self {
            valid: messages.len(),
            messages,
            trace: Vec::new(),
            warnings,
            dispatches: 0,
            partial: String::new(),
            receiving: String::new(),
            usage: Usage::default(),
            posts: 0,
            proposals: Vec::new(),
        }
    }

    /// The answer text of a turn cut short (cancelled, out of budget): the reply that was
    /// streaming in when it was cut, unless it may be a tool call written as text, else the
    /// latest whole reply's text.
    fn text_cut_short(&self) -> String {
        let receiving = self.receiving.trim_start();
        if receiving.is_empty() || receiving.starts_with(['{', '[']) || receiving.contains("<tool_call>") {
            self.partial.clone()
        } else {
            self.receiving.clone()
        }
    }
}

impl TurnEnd {
    /// A turn that ended before any POST.
    fn before_any_post(envelope: Envelope) -> Self {
        Self {
            envelope,
            usage: Usage::default(),
            posts: 0,
            proposals: Vec::new(),
        }
    }
}

/// A turn as it was asked: the query (after the `OnBeforeChat` hooks), the settings read when
/// it arrived, and when it started (its budget counts from there).
struct TurnRequest {
    caller: ChatCaller,
    query: ChatQuery,
    settings: Arc<ModelSettings>,
    options: ModelOptions,
    started: Instant,
    /// Where the turn reports its progress, when the client watches it.
    progress: Option<ProgressFeed>,
}

/// What the tool loop talks to, resolved once when the turn starts.
struct TurnContext<'a> {
    endpoint: &'a Endpoint,
    http: &'a Transport,
    settings: &'a ModelSettings,
    /// The system message as JSON text.
    system: Cow<'static, str>,
    tools: &'a [ToolDefinition],
    /// The end of a request body that offers `tools` ([`llm::tools_tail`]).
    tools_tail: Bytes,
    /// When the turn's budget runs out.
    deadline: Instant,
    /// Where the turn reports its progress, when the caller watches it.
    progress: Option<&'a ProgressFeed>,
    /// Whether answer text is previewed: not when `OnAfterChatReply` handlers may rewrite it.
    preview_text: bool,
    /// The secrets the endpoint was resolved with, scrubbed from whatever is shown.
    redactions: &'a Redactions,
    /// Who the turn's tool calls are made for.
    caller: ToolCaller,
}

/// A turn that passed the gates: who asked, the settings it runs with, the query, and its
/// place in the connection's queue (history on only).
#[derive(Debug)]
pub(crate) struct Admitted {
    caller: ChatCaller,
    row: SettingsRow,
    query: ChatQuery,
    ticket: Option<Ticket>,
    /// Cancelled when the client cancels this turn.
    cancel: CancellationToken,
    /// Where the turn reports its progress, when the client watches it.
    progress: Option<ProgressFeed>,
}

/// How the caller steers a chat turn: cancelling it, and watching its progress.
#[derive(Debug, Default)]
pub struct TurnControls {
    /// Cancelled when the client cancels the turn: the POST or tool dispatch in flight is
    /// dropped and the turn ends `truncated`, saying so.
    pub cancel: CancellationToken,
    /// Where the turn reports its progress ([`crate::progress_feed`]); `None`: not watched.
    pub progress: Option<ProgressFeed>,
}

impl ChatPath {
    pub(crate) fn new(solution: Arc<dyn Solution>) -> Self {
        let http = reqwest::Client::builder()
            .pool_idle_timeout(Duration::from_secs(90))
            // A redirect is reported, never followed (`dialect::redirect_warning`).
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map(Transport::new)
            .map_err(|error| format!("the HTTP client could not be built: {error}"));
        Self {
            solution,
            before_chat: HookChain::default(),
            after_reply: HookChain::default(),
            transcripts: TranscriptCache::default(),
            settings: SettingsParser::default(),
            last_tools_tail: Mutex::new(None),
            http,
            no_streaming: DashMap::default(),
        }
    }

    /// Starts reading the settings row for a turn.
    pub(crate) fn read_settings(&self) -> crate::StoreRead<SettingsRow> {
        self.solution.settings()
    }

    /// A place in the connection's queue taken when a turn arrives, before its settings are
    /// read (a store that answers later): the turn keeps its arrival order either way.
    pub(crate) fn arrival_ticket(&self, caller: &ChatCaller) -> Ticket {
        self.transcripts.ticket(caller.client_guid)
    }

    /// Admits a turn with the settings `row` read for it: checks the gates, parses the query
    /// and, with history on, takes the turn's place in its connection's queue (`ticket`, when
    /// taken at arrival, or now). A turn refused here is answered at once; an admitted turn
    /// holds its place in the queue from this moment.
    pub(crate) fn admit(
        &self,
        row: Result<SettingsRow, crate::SolutionError>,
        caller: &ChatCaller,
        query_json: &str,
        controls: TurnControls,
        ticket: Option<Ticket>,
    ) -> Result<Admitted, Envelope> {
        let row = row.map_err(|error| {
            Envelope::precondition_error(format!("could not read SolutionSettings: {error}"))
        })?;
        gates::model_enabled(&row).and_then(|()| gates::runtime_mcp(row.options()))?;
        let query = ChatQuery::parse(query_json)
            .map_err(|reason| Envelope::precondition_error(format!("malformed query: {reason}")))?;
        // History off: the arrival ticket (if any) is dropped, so no later turn waits for it.
        let ticket = row
            .options()
            .contains(ModelOptions::CHAT_HISTORY)
            .then(|| ticket.unwrap_or_else(|| self.transcripts.ticket(caller.client_guid)));
        Ok(Admitted {
            caller: caller.clone(),
            row,
            query,
            ticket,
            cancel: controls.cancel,
            progress: controls.progress,
        })
    }

    pub(crate) async fn execute(&self, admitted: Admitted) -> TurnEnd {
        let Admitted {
            caller,
            row,
            query,
            ticket,
            cancel,
            progress,
        } = admitted;
        let started = Instant::now();
        let options = row.options();
        let settings = self.settings.settings(&row);
        let mut warnings = Vec::new();
        let user_text = self
            .before_chat
            .run("OnBeforeChat", query.user.clone(), &mut warnings)
            .await;
        let request = TurnRequest {
            caller: caller.clone(),
            query: ChatQuery {
                user: user_text,
                ..query
            },
            settings,
            options,
            started,
            progress,
        };
        let Some(ticket) = ticket else {
            // History off: a fresh local session, the cache neither read nor written, and no
            // wait for the connection's other turns.
            let mut scratch = Transcript::default();
            let never = CancellationToken::new();
            return self.turn(&request, warnings, &mut scratch, &never, &cancel).await;
        };
        let session = Arc::clone(ticket.session());
        tokio::select! {
            () = ticket.wait_turn() => {}
            () = session.closed.cancelled() => return TurnEnd::before_any_post(disconnected(started, warnings)),
            () = cancel.cancelled() => return TurnEnd::before_any_post(cancelled(String::new(), started, warnings)),
        }
        let mut transcript = session.transcript.lock().await;
        let notes = session.take_notes();
        let mut request = request;
        if transcript.user.as_deref() != Some(&*caller.user_name) {
            // The lazy login reset: another user on this connection starts afresh (what became
            // of the last user's proposals is theirs, not told to the new conversation).
            transcript.messages.clear();
            transcript.user = Some(Arc::clone(&caller.user_name));
        } else if !notes.is_empty() {
            request.query.user = transcript::with_notes(&notes, &request.query.user);
        }
        let end = self
            .turn(&request, warnings, &mut transcript, &session.closed, &cancel)
            .await;
        self.transcripts.settle(&session, transcript.bytes());
        self.transcripts.touch(&session);
        drop(transcript);
        self.transcripts.enforce_cache_budget();
        end
    }

    /// One turn over `transcript`, which it updates only when the turn keeps something.
    /// `warnings` are those the turn starts with (from the `OnBeforeChat` hooks). `closed` ends
    /// it with the connection, `cancel` when the client cancels it.
    async fn turn(
        &self,
        request: &TurnRequest,
        warnings: Vec<String>,
        transcript: &mut Transcript,
        closed: &CancellationToken,
        cancel: &CancellationToken,
    ) -> TurnEnd {
        let TurnRequest { query, settings, .. } = request;
        let started = request.started;
        let mut redactions = Redactions::default();
        let (http, endpoint) = match self.reach_endpoint(settings, &mut redactions).await {
            Ok(reached) => reached,
            Err(warning) => {
                return TurnEnd::before_any_post(
                    Envelope::error(warning, started.elapsed()).with_warnings(warnings),
                );
            }
        };
        let tools = self.solution.tools().offered(request.options);
        let mut turn = Turn::asking(&query.user, warnings);
        let history = &transcript.messages;
        let history_len = history.len();
        let context = TurnContext {
            endpoint: &endpoint,
            http,
            settings,
            // Every POST of the turn starts with the same system message.
            system: system_message(Prompt::for_tools(&tools), query.system.as_deref()),
            tools: &tools,
            tools_tail: self.tools_tail(&tools),
            deadline: started + settings.timeout,
            progress: request.progress.as_ref(),
            preview_text: self.after_reply.is_empty(),
            redactions: &redactions,
            caller: ToolCaller::ChatTurn {
                connection: request.caller.client_guid,
                user: Arc::clone(&request.caller.user_name),
                turn: request.caller.turn,
            },
        };
        let outcome = tokio::select! {
            outcome = tokio::time::timeout_at(
                context.deadline.into(),
                self.tool_loop(&mut turn, history, &context),
            ) => Some(outcome),
            // Cancelled by the client: the POST or tool in flight is dropped, and the turn ends
            // as one cut short does.
            () = cancel.cancelled() => None,
            () = closed.cancelled() => {
                return TurnEnd {
                    envelope: disconnected(started, turn.warnings),
                    usage: turn.usage,
                    posts: turn.posts,
                    proposals: turn.proposals,
                };
            }
        };
        let envelope = self
            .envelope_for(outcome, &mut turn, transcript, request, &redactions)
            .await;
        self.bound_transcript(transcript, history_len, settings, &mut turn.warnings);
        report_end(envelope, turn, settings, started, &redactions)
    }

    /// The HTTP client and the model endpoint the turn posts to (the secrets it was resolved
    /// with added to `redactions`), or the warning saying why there is none.
    async fn reach_endpoint(
        &self,
        settings: &ModelSettings,
        redactions: &mut Redactions,
    ) -> Result<(&Transport, Endpoint), String> {
        let http = self.http.as_ref().map_err(Clone::clone)?;
        let endpoint = Endpoint::resolve(settings, &self.solution, http, redactions)
            .await
            .map_err(|warning| redactions.scrub(&warning))?;
        Ok((http, endpoint))
    }

    /// The envelope the tool loop's `outcome` ends the turn with (`None`: cancelled by the
    /// client), keeping in `transcript` what the turn keeps: the answer the operator saw, or
    /// the complete exchanges of a turn cut short; nothing of a turn that failed.
    async fn envelope_for(
        &self,
        outcome: Option<LoopOutcome>,
        turn: &mut Turn,
        transcript: &mut Transcript,
        request: &TurnRequest,
        redactions: &Redactions,
    ) -> Envelope {
        let TurnRequest {
            settings, started, ..
        } = request;
        if matches!(
            outcome,
            Some(Ok(Ok(LoopEnd::CapThenAnswer(_) | LoopEnd::CapWithoutAnswer)))
        ) {
            crate::telemetry::tool_cap_reached();
        }
        match outcome {
            None => {
                turn.partial = turn.text_cut_short();
                keep_valid_prefix(transcript, turn);
                cancelled(turn.partial.clone(), *started, Vec::new())
            }
            Some(Ok(Ok(LoopEnd::Answer(text) | LoopEnd::CapThenAnswer(text)))) => {
                let text = self
                    .after_reply
                    .run("OnAfterChatReply", text, &mut turn.warnings)
                    .await;
                // A model (or a proxy) repeating a secret: the operator never sees it, and the
                // transcript keeps what the operator saw.
                let text = redactions.scrub(&text);
                // The transcript keeps the answer the operator saw.
                if let Some(last) = turn.messages.last_mut() {
                    *last = HistoryMessage::answer(&text);
                }
                transcript.messages.append(&mut turn.messages);
                Envelope::ok(text, started.elapsed())
            }
            Some(Ok(Ok(LoopEnd::CapWithoutAnswer))) => {
                keep_valid_prefix(transcript, turn);
                Envelope::truncated(
                    turn.partial.clone(),
                    cap_warning(settings, false),
                    started.elapsed(),
                )
            }
            Some(Ok(Err(warning))) => {
                // An error leaves the transcript as it was before the turn.
                Envelope::error(warning, started.elapsed())
            }
            Some(Err(_)) => {
                crate::telemetry::budget_exhausted("chat");
                turn.partial = turn.text_cut_short();
                keep_valid_prefix(transcript, turn);
                Envelope::truncated(
                    turn.partial.clone(),
                    format!(
                        "Chat turn wall-clock budget ({}) exceeded (LLM POSTs and tool dispatches together).",
                        settings.timeout_label()
                    ),
                    started.elapsed().max(settings.timeout),
                )
            }
        }
    }

    /// Keeps `transcript` within the connection's bounds, warning when what this turn added
    /// (past the first `history_len` messages) could not be remembered.
    fn bound_transcript(
        &self,
        transcript: &mut Transcript,
        history_len: usize,
        settings: &ModelSettings,
        warnings: &mut Vec<String>,
    ) {
        let remembered = transcript.messages.len() > history_len;
        let session_budget = self.transcripts.session_budget();
        if truncate(
            &mut transcript.messages,
            settings.max_history_messages,
            session_budget,
        ) && remembered
        {
            warnings.push(format!(
                "This turn is larger than a connection's transcript budget ({session_budget} bytes) and is not remembered: the next question starts without it."
            ));
        }
    }

    /// POST, dispatch, repeat until the model answers in plain content or the cap ends it.
    async fn tool_loop(
        &self,
        turn: &mut Turn,
        history: &[HistoryMessage],
        context: &TurnContext<'_>,
    ) -> Result<LoopEnd, String> {
        let TurnContext {
            endpoint,
            http,
            settings,
            system,
            tools,
            tools_tail,
            deadline: _,
            progress,
            preview_text,
            redactions,
            caller: _,
        } = context;
        let names: Vec<&str> = tools.iter().map(ToolDefinition::name).collect();
        // The same for every POST of the turn: the history only grows when the turn ends.
        let start = llm::request_start(&settings.name, system, history)?;
        let mut last_chance = false;
        loop {
            let offered = (!tools.is_empty() && !last_chance).then_some(tools_tail);
            let stream = !self.refuses_streaming(&endpoint.shown_url);
            let body = llm::request_body(&start, &turn.messages, offered, stream);
            turn.posts += 1;
            let mut preview = progress
                .filter(|_| *preview_text)
                .map(|feed| AnswerPreview::new(feed, redactions, offered.is_some()));
            turn.receiving.clear();
            let receiving = &mut turn.receiving;
            let mut on_text = |piece: &str| {
                receiving.push_str(piece);
                if let Some(preview) = &mut preview {
                    preview.push(piece);
                }
            };
            let response = match endpoint.post(http, body, stream, &mut on_text).await {
                Ok(response) => response,
                Err(PostFailure::StreamRefused(warning)) => {
                    // The same request without streaming, now and for a while.
                    // The model server's own words (cut already), escaped: a newline in them
                    // must not start a log line.
                    tracing::info!(url = %endpoint.shown_url, warning = %warning.escape_debug(), "the model server refuses to stream; asking without streaming");
                    self.no_streaming
                        .insert(endpoint.shown_url.clone(), Instant::now());
                    let body = llm::request_body(&start, &turn.messages, offered, false);
                    turn.posts += 1;
                    endpoint
                        .post(http, body, false, &mut on_text)
                        .await
                        .map_err(PostFailure::into_warning)?
                }
                Err(PostFailure::Failed(warning)) => return Err(warning),
            };
            let offered: &[&str] = if last_chance { &[] } else { &names };
            let reply = read_reply(response, offered, &mut new_call_id)?;
            turn.receiving.clear();
            if let Some(preview) = preview {
                preview.finish(
                    reply
                        .calls
                        .is_empty()
                        .then_some(reply.content.as_deref().unwrap_or_default()),
                );
            }
            turn.usage += reply.usage;
            if let Some(warning) = reply.finish.warning() {
                turn.warnings.push(warning.to_owned());
            }
            if let Some(text) = reply.content.as_deref().filter(|text| !text.trim().is_empty()) {
                turn.partial = text.to_owned();
            }
            if reply.calls.is_empty() {
                let text = reply.content.unwrap_or_default();
                if text.trim().is_empty() {
                    if last_chance {
                        return Ok(LoopEnd::CapWithoutAnswer);
                    }
                    return Err("LLM response has no answer content".to_owned());
                }
                turn.messages.push(HistoryMessage::answer(&text));
                turn.valid = turn.messages.len();
                return Ok(if last_chance {
                    LoopEnd::CapThenAnswer(text)
                } else {
                    LoopEnd::Answer(text)
                });
            }
            if last_chance {
                // Asked for tools again with none offered: the cap has the last word.
                return Ok(LoopEnd::CapWithoutAnswer);
            }
            tracing::debug!(
                channel = match reply.channel {
                    Channel::Native => "native",
                    Channel::Text => "text",
                },
                calls = reply.calls.len(),
                "the model asked for tools"
            );
            let over_cap = self.dispatch_round(turn, reply, context).await;
            if over_cap {
                turn.warnings.push(cap_warning(settings, true));
                last_chance = true;
            }
        }
    }

    /// Appends the assistant's tool calls and one tool message per call id; returns whether
    /// calls past the cap were left unrun.
    async fn dispatch_round(
        &self,
        turn: &mut Turn,
        reply: AssistantReply,
        context: &TurnContext<'_>,
    ) -> bool {
        let TurnContext {
            tools,
            settings,
            deadline,
            progress,
            redactions,
            caller,
            ..
        } = context;
        let known = |name: &str| tools.iter().any(|tool| tool.name() == name);
        turn.messages.push(HistoryMessage::tool_calls(
            reply.content.as_deref(),
            &reply.calls,
            known,
        ));
        let mut over_cap = false;
        for call in reply.calls {
            let message = if turn.dispatches >= settings.max_tool_dispatches {
                over_cap = true;
                let content = ToolError::new(
                    "cap_reached",
                    format!(
                        "not run: this turn already used its {} tool calls; answer with what you have",
                        settings.max_tool_dispatches
                    ),
                )
                .to_content();
                HistoryMessage::tool_result(&call.id, &content)
            } else {
                turn.dispatches += 1;
                if let Some(feed) = progress {
                    feed.event(ChatProgress::ToolStarted {
                        name: redactions.scrub(&trace_name(&call.name)),
                        arguments: redactions.scrub(&call.arguments.as_json()),
                    });
                }
                let (entry, message, proposal) = dispatch(call, tools, caller, *deadline).await;
                if let Some(feed) = progress {
                    feed.event(ChatProgress::ToolFinished {
                        name: redactions.scrub(&entry.name),
                        status: entry.status,
                        elapsed: Duration::from_millis(entry.elapsed_ms),
                    });
                }
                if let Some(id) = proposal {
                    if let Some(feed) = progress {
                        feed.event(ChatProgress::ProposalMade { id: id.clone() });
                    }
                    turn.proposals.push(id);
                }
                turn.trace.push(entry);
                message
            };
            turn.messages.push(message);
        }
        turn.valid = turn.messages.len();
        over_cap
    }

    /// The end of a request body offering `tools`, written once for the catalog last offered.
    fn tools_tail(&self, tools: &Arc<[ToolDefinition]>) -> Bytes {
        let mut last = self
            .last_tools_tail
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((offered, tail)) = &*last
            && Arc::ptr_eq(offered, tools)
        {
            return tail.clone();
        }
        let tail = llm::tools_tail(tools);
        *last = Some((Arc::clone(tools), tail.clone()));
        tail
    }

    /// Whether the endpoint refused a streamed request lately (see `NO_STREAMING_FOR`).
    fn refuses_streaming(&self, shown_url: &str) -> bool {
        match self.no_streaming.get(shown_url).map(|since| since.elapsed()) {
            Some(elapsed) if elapsed < NO_STREAMING_FOR => true,
            Some(_) => {
                self.no_streaming.remove(shown_url);
                false
            }
            None => false,
        }
    }

    pub(crate) fn sessions(&self) -> usize {
        self.transcripts.len()
    }

    pub(crate) fn set_transcript_budget(&self, budget: transcript::TranscriptBudget) {
        self.transcripts.set_budget(budget);
    }

    pub(crate) fn transcript_bytes(&self) -> usize {
        self.transcripts.total_bytes()
    }

    /// Keeps `note` for the next turn of connection `client_guid`, if it has a transcript.
    pub(crate) fn tell_next_turn(&self, client_guid: Uuid, note: &str) {
        self.transcripts.tell(client_guid, note);
    }

    pub(crate) fn forget(&self, client_guid: Uuid) {
        self.transcripts.remove(client_guid);
    }

    /// Empties a connection's transcript once every turn it sent before has ended (taking its
    /// place in the session's queue as a turn does), so what those turns add is emptied too.
    /// Returns whether the transcript held anything; `false` at once when the connection
    /// closes meanwhile.
    pub(crate) async fn clear(&self, client_guid: Uuid) -> bool {
        let ticket = self.transcripts.ticket(client_guid);
        let session = Arc::clone(ticket.session());
        tokio::select! {
            () = ticket.wait_turn() => {}
            () = session.closed.cancelled() => return false,
        }
        let mut transcript = session.transcript.lock().await;
        let held = !transcript.messages.is_empty();
        transcript.messages.clear();
        self.transcripts.settle(&session, 0);
        held
    }
}

/// The system message's JSON text: the standard prompt (for a turn with tools or without),
/// then the query's own instructions if it brings some. The standard ones are encoded once
/// per process: every turn sends one.
fn system_message(prompt: Prompt, extra: Option<&str>) -> Cow<'static, str> {
    fn encode(content: &str) -> String {
        json!({"role": "system", "content": content}).to_string()
    }
    static WITH_TOOLS: LazyLock<String> = LazyLock::new(|| encode(SYSTEM_PROMPT_WITH_TOOLS));
    static WITH_PROPOSALS: LazyLock<String> =
        LazyLock::new(|| encode(&format!("{SYSTEM_PROMPT_WITH_TOOLS} {SYSTEM_PROMPT_PROPOSALS}")));
    static WITHOUT_TOOLS: LazyLock<String> = LazyLock::new(|| encode(SYSTEM_PROMPT_WITHOUT_TOOLS));
    let standard = match prompt {
        Prompt::WithoutTools => &WITHOUT_TOOLS,
        Prompt::WithTools => &WITH_TOOLS,
        Prompt::WithProposals => &WITH_PROPOSALS,
    };
    match extra {
        Some(extra) => {
            let prompt = match prompt {
                Prompt::WithoutTools => Cow::Borrowed(SYSTEM_PROMPT_WITHOUT_TOOLS),
                Prompt::WithTools => Cow::Borrowed(SYSTEM_PROMPT_WITH_TOOLS),
                Prompt::WithProposals => {
                    Cow::Owned(format!("{SYSTEM_PROMPT_WITH_TOOLS} {SYSTEM_PROMPT_PROPOSALS}"))
                }
            };
            Cow::Owned(encode(&format!("{prompt}\n\n{extra}")))
        }
        None => Cow::Borrowed(standard.as_str()),
    }
}

/// Which standard system prompt a turn starts with, by the tools it offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prompt {
    WithoutTools,
    WithTools,
    /// With tools, the proposal tools among them.
    WithProposals,
}

impl Prompt {
    fn for_tools(tools: &[ToolDefinition]) -> Self {
        if tools
            .iter()
            .any(|tool| tool.category() == ModelOptions::PROPOSALS)
        {
            Self::WithProposals
        } else if tools.is_empty() {
            Self::WithoutTools
        } else {
            Self::WithTools
        }
    }
}

/// Runs one tool call with its own timeout and panic isolation. Returns the trace entry and
/// the tool message for the model (the canonical content under the call's id).
async fn dispatch(
    call: ToolCall,
    tools: &[ToolDefinition],
    caller: &ToolCaller,
    deadline: Instant,
) -> (ToolTraceEntry, HistoryMessage, Option<ProposalId>) {
    let started_at = SystemTime::now();
    let started = Instant::now();
    let ToolCall { id, name, arguments } = call;
    let tool = tools.iter().find(|tool| tool.name() == name);
    // The trace keeps the arguments as the model sent them; the tool gets a copy.
    let (traced_args, outcome) = match (tool, arguments) {
        (Some(tool), Arguments::Object(arguments)) => {
            // The tool's own timeout fires just before the turn's, so a tool that runs the
            // budget out is in the trace as timed out rather than lost with the turn: with the
            // same instant for both, the turn's timer could win the race.
            let left = deadline
                .saturating_duration_since(Instant::now())
                .saturating_sub(TOOL_DEADLINE_MARGIN);
            let outcome = tool
                .call(arguments.clone(), caller.clone(), TOOL_TIMEOUT.min(left))
                .await;
            crate::telemetry::tool_ran(tool.name(), "chat", outcome.is_ok(), started.elapsed());
            (arguments, outcome)
        }
        (None, arguments) => (traced(arguments), Err(unknown_tool(tools))),
        (Some(_), unparsable @ Arguments::Unparsable(_)) => (
            traced(unparsable),
            Err(ToolError::invalid_arguments(
                "the arguments are not a JSON object; call the tool again with a JSON object that follows its schema",
            )),
        ),
    };
    let (result, status, message, proposal) = match outcome {
        Ok(ToolOutput { result, proposal }) => {
            let message = HistoryMessage::tool_result(&id, &SuccessContent(&result));
            (result, ToolStatus::Ok, message, proposal)
        }
        Err(error) => {
            let mut content = error.to_content();
            let message = HistoryMessage::tool_result(&id, &content);
            (content["error"].take(), ToolStatus::Error, message, None)
        }
    };
    let entry = ToolTraceEntry::new(
        trace_name(&name),
        traced_args,
        result,
        status,
        started_at,
        started.elapsed(),
    );
    (entry, message, proposal)
}

/// Arguments as the trace shows them: the object, or the unparsable text cut to 1000
/// characters (it is model output).
fn traced(arguments: Arguments) -> Value {
    match arguments {
        Arguments::Object(object) => object,
        Arguments::Unparsable(raw) => Value::String(raw.chars().take(1000).collect()),
    }
}

/// A tool's name as the trace and the progress show it: what the model asked for, cut to a sane
/// length (it is model output).
fn trace_name(name: &str) -> String {
    const MAX_CHARS: usize = 64;
    // A name of at most 64 bytes has at most 64 characters: nearly every name, kept as it is.
    if name.len() <= MAX_CHARS {
        return name.to_owned();
    }
    name.chars().take(MAX_CHARS).collect()
}

/// What the tool loop gives within the turn's budget: how it ended or why it failed, or the
/// budget ran out first.
type LoopOutcome = Result<Result<LoopEnd, String>, tokio::time::error::Elapsed>;

/// The end of a turn: its envelope with the tool trace and warnings, scrubbed of secrets,
/// counted and logged.
fn report_end(
    envelope: Envelope,
    turn: Turn,
    settings: &ModelSettings,
    started: Instant,
    redactions: &Redactions,
) -> TurnEnd {
    let envelope =
        redactions.scrub_envelope(envelope.with_tool_trace(turn.trace).with_warnings(turn.warnings));
    let usage = turn.usage;
    crate::telemetry::operation_ended(
        "chat",
        &settings.name,
        envelope.status.as_str(),
        started.elapsed(),
        (usage.prompt_tokens, usage.completion_tokens),
    );
    // Debug, not info: a client chatting in a loop must not fill the log (each turn is
    // bounded by the model's pace, not by the connection's log allowance).
    tracing::debug!(
        status = envelope.status.as_str(),
        latency_ms = envelope.latency_ms,
        posts = turn.posts,
        tools = envelope.tool_trace.len(),
        prompt_tokens = usage.prompt_tokens,
        completion_tokens = usage.completion_tokens,
        cached_tokens = usage.cached_tokens,
        reasoning_tokens = usage.reasoning_tokens,
        "chat turn"
    );
    TurnEnd {
        envelope,
        usage,
        posts: turn.posts,
        proposals: turn.proposals,
    }
}

/// A history keeps only complete tool exchanges. A truncated turn keeps the question, the
/// exchanges it completed and its partial answer, or nothing when it produced neither.
fn keep_valid_prefix(transcript: &mut Transcript, turn: &mut Turn) {
    turn.messages.truncate(turn.valid);
    // The question alone is not kept: it needs an exchange or an answer after it.
    let exchanges_done = turn.messages.len() > 1;
    if !turn.partial.is_empty() {
        turn.messages.push(HistoryMessage::answer(&turn.partial));
    } else if !exchanges_done {
        return;
    }
    transcript.messages.append(&mut turn.messages);
}

fn cap_warning(settings: &ModelSettings, answered_later: bool) -> String {
    let cap = settings.max_tool_dispatches;
    if answered_later {
        format!("Tool-dispatch cap ({cap} per turn) reached; calls past it were not run.")
    } else {
        format!("Tool-dispatch cap ({cap} per turn) reached and the model gave no final answer.")
    }
}

/// A turn the client cancelled: `truncated`, with whatever answer text there was.
fn cancelled(partial: String, started: Instant, warnings: Vec<String>) -> Envelope {
    Envelope::truncated(
        partial,
        "The turn was cancelled by the client.",
        started.elapsed(),
    )
    .with_warnings(warnings)
}

fn disconnected(started: Instant, warnings: Vec<String>) -> Envelope {
    Envelope::error(
        "the client disconnected; the turn was cancelled",
        started.elapsed(),
    )
    .with_warnings(warnings)
}

fn new_call_id() -> String {
    format!("call_{}", Uuid::new_v4().simple())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_queries_are_text_or_a_user_object() {
        assert_eq!(
            ChatQuery::parse("What is wrong with Pump 1?").map(|q| q.user),
            Ok("What is wrong with Pump 1?".to_owned())
        );
        let query =
            ChatQuery::parse(r#"{"user": "Tank levels?", "system": "Answer in German."}"#).expect("object");
        assert_eq!(query.system.as_deref(), Some("Answer in German."));
        for bad in ["", "  ", r#"{"system": "x"}"#, r#"{"user": 3}"#] {
            assert!(ChatQuery::parse(bad).is_err(), "{bad:?}");
        }
    }
}
