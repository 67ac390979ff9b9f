//! The transcript cache: one chat session per client connection, keyed by the connection's
//! server-made GUID, and the truncation that keeps a history valid for every server.
//!
//! A session's turns run one at a time in arrival order: a turn takes a numbered [`Ticket`]
//! the moment it arrives (before any task runs it) and waits for its number; different
//! sessions never share anything. A session is removed, and its turn in flight cancelled, when
//! its connection closes.
//!
//! Memory is bounded by bytes, not only by message count: each session keeps at most
//! [`TranscriptBudget::session_bytes`] of history JSON, and all sessions together at most
//! [`TranscriptBudget::cache_bytes`]; past either, whole oldest turns are dropped (the least
//! recently used sessions first for the cache).

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use dashmap::DashMap;
#[cfg(test)]
use serde_json::Value;
use tokio::sync::{Mutex, Notify};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::dialect::ToolCall;

/// What a session remembers between turns.
#[derive(Debug, Default)]
pub(crate) struct Transcript {
    /// The user the transcript belongs to; a turn by another user on the same connection
    /// clears it first (the lazy login reset).
    pub(crate) user: Option<Arc<str>>,
    /// The messages after the system prompt (which is added fresh to every POST).
    pub(crate) messages: Vec<HistoryMessage>,
}

/// A message of the history as the JSON it is sent as: serialized once, when its turn ends,
/// and written into every later POST as it is (re-encoding the same forty messages for each of
/// a turn's two POSTs would cost a fifth of the server's time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HistoryMessage {
    json: Box<str>,
    /// A `user` message: where a turn starts, and so where truncation may cut.
    starts_turn: bool,
}

impl Transcript {
    /// The bytes of history JSON held.
    pub(crate) fn bytes(&self) -> usize {
        self.messages.iter().map(|message| message.json.len()).sum()
    }
}

/// The messages a turn adds, as the chat-completions API spells them: written once into their
/// JSON text from borrowed parts, never built as a `serde_json::Value` first.
mod wire {
    use serde::Serialize;

    #[derive(Serialize)]
    pub(super) struct Text<'a> {
        pub(super) role: &'static str,
        pub(super) content: &'a str,
    }

    #[derive(Serialize)]
    pub(super) struct ToolCalls<'a> {
        pub(super) role: &'static str,
        /// `null` when the model wrote nothing beside its calls, as the API has it.
        pub(super) content: Option<&'a str>,
        pub(super) tool_calls: Vec<Call<'a>>,
    }

    #[derive(Serialize)]
    pub(super) struct Call<'a> {
        pub(super) id: &'a str,
        #[serde(rename = "type")]
        pub(super) kind: &'static str,
        pub(super) function: Function<'a>,
    }

    #[derive(Serialize)]
    pub(super) struct Function<'a> {
        pub(super) name: &'a str,
        /// A JSON object's text, as the API carries arguments.
        pub(super) arguments: &'a str,
    }

    #[derive(Serialize)]
    pub(super) struct ToolResult<'a> {
        pub(super) role: &'static str,
        pub(super) tool_call_id: &'a str,
        pub(super) content: &'a str,
    }
}

/// A message's JSON text. `serde_json` writing a struct of strings into memory has no way to
/// fail (no I/O, no map keys that are not strings), so the `{}` arm is never taken.
fn encode(message: &impl serde::Serialize) -> Box<str> {
    serde_json::to_string(message).map_or_else(|_| Box::from("{}"), String::into_boxed_str)
}

/// A `serde_json` formatter that writes JSON as the contents of a JSON string, already
/// escaped (`{"a":"b"}` as `{\"a\":\"b\"}`): the API carries a tool's result as text in a
/// string, and this writes it in one pass. Only strings change: their quotes and the escapes
/// inside them get one more backslash; the text between escapes holds no quote or backslash.
struct EscapedJson;

impl serde_json::ser::Formatter for EscapedJson {
    fn begin_string<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        writer.write_all(br#"\""#)
    }

    fn end_string<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        writer.write_all(br#"\""#)
    }

    fn write_char_escape<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        escape: serde_json::ser::CharEscape,
    ) -> std::io::Result<()> {
        use serde_json::ser::CharEscape;
        let escaped: &[u8] = match escape {
            CharEscape::Quote => br#"\\\""#,
            CharEscape::ReverseSolidus => br"\\\\",
            CharEscape::Solidus => br"\\/",
            CharEscape::Backspace => br"\\b",
            CharEscape::FormFeed => br"\\f",
            CharEscape::LineFeed => br"\\n",
            CharEscape::CarriageReturn => br"\\r",
            CharEscape::Tab => br"\\t",
            CharEscape::AsciiControl(byte) => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                let (high, low) = (HEX[usize::from(byte >> 4)], HEX[usize::from(byte & 0xF)]);
                return writer.write_all(&[b'\\', b'\\', b'u', b'0', b'0', high, low]);
            }
        };
        writer.write_all(escaped)
    }
}

impl HistoryMessage {
    /// The operator's question: where a turn starts.
    pub(crate) fn user(content: &str) -> Self {
        Self {
            json: encode(&wire::Text {
                role: "user",
                content,
            }),
            starts_turn: true,
        }
    }

    /// The model's answer in plain text.
    pub(crate) fn answer(content: &str) -> Self {
        Self {
            json: encode(&wire::Text {
                role: "assistant",
                content,
            }),
            starts_turn: false,
        }
    }

    /// The model's request for tools: each call under its id with arguments that are always a
    /// JSON object, and a name the turn offered (`known`) or `unknown_tool`, so nothing the
    /// model made up is echoed back into the history.
    pub(crate) fn tool_calls(
        content: Option<&str>,
        calls: &[ToolCall],
        known: impl Fn(&str) -> bool,
    ) -> Self {
        let arguments: Vec<String> = calls.iter().map(ToolCall::history_arguments).collect();
        let tool_calls = calls
            .iter()
            .zip(&arguments)
            .map(|(call, arguments)| wire::Call {
                id: &call.id,
                kind: "function",
                function: wire::Function {
                    name: if known(&call.name) {
                        &call.name
                    } else {
                        "unknown_tool"
                    },
                    arguments,
                },
            })
            .collect();
        Self {
            json: encode(&wire::ToolCalls {
                role: "assistant",
                content,
                tool_calls,
            }),
            starts_turn: false,
        }
    }

    /// What a tool call gave, as the model reads it: `content` (the canonical success or
    /// failure object) as JSON text in the message's `content` string. Written escaped as it is
    /// serialized ([`EscapedJson`]), not written as text and then escaped again as a string.
    pub(crate) fn tool_result(tool_call_id: &str, content: &impl serde::Serialize) -> Self {
        let mut json = Vec::with_capacity(256);
        json.extend_from_slice(br#"{"role":"tool","tool_call_id":"#);
        let written = serde_json::to_writer(&mut json, tool_call_id).and_then(|()| {
            json.extend_from_slice(br#","content":""#);
            content.serialize(&mut serde_json::Serializer::with_formatter(
                &mut json,
                EscapedJson,
            ))
        });
        json.extend_from_slice(br#""}"#);
        // Writing into memory fails only for a map whose keys are not strings, which no
        // content has; were it to, the message says the result could not be written.
        let json = match (written, String::from_utf8(json)) {
            (Ok(()), Ok(json)) => json.into_boxed_str(),
            _ => encode(&wire::ToolResult {
                role: "tool",
                tool_call_id,
                content: r#"{"ok":false,"error":{"type":"internal","message":"the result could not be written"}}"#,
            }),
        };
        Self {
            json,
            starts_turn: false,
        }
    }

    /// Any message, from its JSON value (the tests' way to write a history).
    #[cfg(test)]
    pub(crate) fn new(message: &Value) -> Self {
        Self {
            json: message.to_string().into_boxed_str(),
            starts_turn: message["role"] == "user",
        }
    }

    /// The message's JSON text.
    pub(crate) fn json(&self) -> &str {
        &self.json
    }
}

/// One connection's chat session.
#[derive(Debug, Default)]
pub(crate) struct Session {
    /// Only the turn whose ticket is being served locks it, so the lock never waits; it is
    /// there to make the exclusive access visible to the compiler.
    pub(crate) transcript: Mutex<Transcript>,
    /// Cancelled when the connection closes: the turn in flight stops spending LLM time.
    pub(crate) closed: CancellationToken,
    queue: std::sync::Mutex<Queue>,
    advanced: Notify,
    /// The history bytes this session is counted for in the cache's total.
    bytes: AtomicUsize,
    /// When a turn of this session last ended (nanoseconds since the cache's epoch), for
    /// choosing whose turns the cache budget drops first.
    last_used: AtomicU64,
    /// What the next turn tells the model first (what became of its proposals), oldest first.
    notes: std::sync::Mutex<VecDeque<String>>,
}

/// The ticket numbers of a session's turns.
#[derive(Debug, Default)]
struct Queue {
    next: u64,
    serving: u64,
    /// Tickets dropped before their turn came: skipped when it does.
    abandoned: BTreeSet<u64>,
}

impl Session {
    /// Takes the notes kept for the next turn.
    pub(crate) fn take_notes(&self) -> Vec<String> {
        std::mem::take(
            &mut *self
                .notes
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
        .into()
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        // Plain counters changed in single steps: a poisoned lock is still consistent.
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A turn's place in its session's queue. Dropping it, served or not, lets the next turn go.
#[derive(Debug)]
pub(crate) struct Ticket {
    session: Arc<Session>,
    number: u64,
}

impl Ticket {
    /// The session this ticket queues for.
    pub(crate) fn session(&self) -> &Arc<Session> {
        &self.session
    }

    /// Waits until every earlier turn of the session has finished or been dropped.
    pub(crate) async fn wait_turn(&self) {
        loop {
            let advanced = self.session.advanced.notified();
            tokio::pin!(advanced);
            // Registered before the check, so an advance between the two is not missed.
            advanced.as_mut().enable();
            if self.session.queue().serving == self.number {
                return;
            }
            advanced.await;
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut queue = self.session.queue();
        if queue.serving == self.number {
            let mut serving = self.number + 1;
            while queue.abandoned.remove(&serving) {
                serving += 1;
            }
            queue.serving = serving;
            drop(queue);
            self.session.advanced.notify_waiters();
        } else {
            queue.abandoned.insert(self.number);
        }
    }
}

/// The most notes one session keeps for its next turn.
pub(crate) const MAX_NOTES: usize = 16;
/// The longest note, in characters.
pub(crate) const MAX_NOTE_CHARS: usize = 600;

/// The operator's `question` with the `notes` kept for this turn before it, in one user
/// message: several chat templates refuse a second system message, or two user messages in a
/// row, so the notes travel inside the question and stay in the transcript with it.
pub(crate) fn with_notes(notes: &[String], question: &str) -> String {
    let mut text = String::from("[Since your last answer:");
    for note in notes {
        text.push_str("\n- ");
        text.push_str(note);
    }
    text.push_str("]\n\n");
    text.push_str(question);
    text
}

/// The byte budgets of the transcripts; see `docs/LIMITS.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TranscriptBudget {
    /// History JSON one connection's transcript keeps. A turn larger than this alone is
    /// answered but not remembered.
    pub session_bytes: usize,
    /// History JSON all transcripts keep together.
    pub cache_bytes: usize,
}

impl Default for TranscriptBudget {
    fn default() -> Self {
        Self {
            session_bytes: 512 * 1024,
            cache_bytes: 64 * 1024 * 1024,
        }
    }
}

/// Every live session of a solution.
#[derive(Debug)]
pub(crate) struct TranscriptCache {
    sessions: DashMap<Uuid, Arc<Session>, foldhash::fast::RandomState>,
    /// History bytes held by every session together, as each last settled them.
    total_bytes: AtomicUsize,
    session_budget: AtomicUsize,
    cache_budget: AtomicUsize,
    epoch: Instant,
}

impl Default for TranscriptCache {
    fn default() -> Self {
        let budget = TranscriptBudget::default();
        Self {
            sessions: DashMap::default(),
            total_bytes: AtomicUsize::new(0),
            session_budget: AtomicUsize::new(budget.session_bytes),
            cache_budget: AtomicUsize::new(budget.cache_bytes),
            epoch: Instant::now(),
        }
    }
}

impl TranscriptCache {
    /// A place in the queue of a connection's session (created on its first turn).
    pub(crate) fn ticket(&self, client_guid: Uuid) -> Ticket {
        let session = Arc::clone(&self.sessions.entry(client_guid).or_default());
        let number = {
            let mut queue = session.queue();
            queue.next += 1;
            queue.next - 1
        };
        Ticket { session, number }
    }

    /// Keeps `note` for the next turn of connection `client_guid` (a connection without a
    /// session never chatted: nothing to tell). At most [`MAX_NOTES`] wait, each cut to
    /// [`MAX_NOTE_CHARS`] characters; the oldest go first.
    pub(crate) fn tell(&self, client_guid: Uuid, note: &str) {
        let Some(session) = self
            .sessions
            .get(&client_guid)
            .map(|session| Arc::clone(&session))
        else {
            return;
        };
        let note = match note.char_indices().nth(MAX_NOTE_CHARS) {
            Some((cut, _)) => format!("{}…", &note[..cut]),
            None => note.to_owned(),
        };
        let mut notes = session
            .notes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if notes.len() == MAX_NOTES {
            notes.pop_front();
        }
        notes.push_back(note);
    }

    /// Removes a connection's session and cancels its turn in flight.
    pub(crate) fn remove(&self, client_guid: Uuid) {
        if let Some((_, session)) = self.sessions.remove(&client_guid) {
            session.closed.cancel();
            self.settle(&session, 0);
        }
    }

    /// Sets the byte budgets, from the next turn on.
    pub(crate) fn set_budget(&self, budget: TranscriptBudget) {
        self.session_budget.store(budget.session_bytes, Ordering::Relaxed);
        self.cache_budget.store(budget.cache_bytes, Ordering::Relaxed);
    }

    /// The history bytes one session may keep.
    pub(crate) fn session_budget(&self) -> usize {
        self.session_budget.load(Ordering::Relaxed)
    }

    /// The history bytes all sessions hold, as last settled.
    pub(crate) fn total_bytes(&self) -> usize {
        self.total_bytes.load(Ordering::Relaxed)
    }

    /// Records that `session`'s transcript now holds `bytes`. A removed session counts for
    /// nothing, whoever settles it last: the check comes after the swap, so of a removal and
    /// a settle racing each other, one sees the other's work.
    pub(crate) fn settle(&self, session: &Session, bytes: usize) {
        self.account(session, bytes);
        if session.closed.is_cancelled() {
            self.account(session, 0);
        }
    }

    /// Marks `session` as used now (a turn of it just ended), for the cache's eviction order.
    pub(crate) fn touch(&self, session: &Session) {
        let now = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
        session.last_used.store(now, Ordering::Relaxed);
    }

    fn account(&self, session: &Session, bytes: usize) {
        let before = session.bytes.swap(bytes, Ordering::SeqCst);
        if bytes >= before {
            self.total_bytes.fetch_add(bytes - before, Ordering::SeqCst);
        } else {
            self.total_bytes.fetch_sub(before - bytes, Ordering::SeqCst);
        }
    }

    /// Past the cache budget, drops whole oldest turns of the least recently used sessions
    /// until the total fits. A session running a turn holds its lock and is skipped (it is
    /// held to its own budget when its turn ends), so nothing here ever waits.
    pub(crate) fn enforce_cache_budget(&self) {
        let budget = self.cache_budget.load(Ordering::Relaxed);
        if self.total_bytes() <= budget {
            return;
        }
        let mut sessions: Vec<(u64, Arc<Session>)> = self
            .sessions
            .iter()
            .map(|entry| (entry.last_used.load(Ordering::Relaxed), Arc::clone(entry.value())))
            .collect();
        sessions.sort_unstable_by_key(|(last_used, _)| *last_used);
        for (_, session) in sessions {
            let total = self.total_bytes();
            if total <= budget {
                break;
            }
            let Ok(mut transcript) = session.transcript.try_lock() else {
                continue;
            };
            let held = session.bytes.load(Ordering::Relaxed);
            truncate(
                &mut transcript.messages,
                usize::MAX,
                held.saturating_sub(total - budget),
            );
            let bytes = transcript.bytes();
            self.settle(&session, bytes);
        }
    }

    /// How many sessions exist.
    pub(crate) fn len(&self) -> usize {
        self.sessions.len()
    }
}

/// Drops the oldest whole turns until at most `max` messages and `max_bytes` of JSON remain.
/// A turn starts at a `user` message, so the kept history starts with one, and every
/// assistant message with `tool_calls` keeps the `tool` messages answering it (servers answer
/// 400 to a history that breaks either rule). The newest turn is kept whole even when it
/// alone has more than `max` messages, but not when it alone has more than `max_bytes`: then
/// it alone is dropped, and this returns `true` (memory is bounded by bytes whatever a turn
/// holds).
pub(crate) fn truncate(messages: &mut Vec<HistoryMessage>, max: usize, max_bytes: usize) -> bool {
    let is_turn_start = |messages: &[HistoryMessage], index: &usize| messages[*index].starts_turn;
    // A newest turn too large to keep goes alone: the earlier turns that fit stay.
    let newest = (0..messages.len())
        .rev()
        .find(|index| is_turn_start(messages, index))
        .unwrap_or(0);
    let newest_bytes: usize = messages[newest..].iter().map(|message| message.json.len()).sum();
    let newest_dropped = newest_bytes > max_bytes;
    if newest_dropped {
        messages.truncate(newest);
    }
    let mut cut = 0;
    if messages.len() > max {
        let earliest = messages.len() - max;
        cut = (earliest..messages.len())
            .find(|index| is_turn_start(messages, index))
            .or_else(|| (0..earliest).rev().find(|index| is_turn_start(messages, index)))
            .unwrap_or(0);
    }
    let mut bytes: usize = messages[cut..].iter().map(|message| message.json.len()).sum();
    while bytes > max_bytes && cut < messages.len() {
        let next = (cut + 1..messages.len())
            .find(|index| is_turn_start(messages, index))
            .unwrap_or(messages.len());
        bytes -= messages[cut..next]
            .iter()
            .map(|message| message.json.len())
            .sum::<usize>();
        cut = next;
    }
    messages.drain(..cut);
    newest_dropped
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn a_turns_messages_are_written_as_the_api_spells_them() {
        let parse =
            |message: &HistoryMessage| serde_json::from_str::<Value>(message.json()).expect("valid JSON");
        let question = HistoryMessage::user("How is \"Pump 1\"?\n");
        assert_eq!(
            parse(&question),
            json!({"role": "user", "content": "How is \"Pump 1\"?\n"})
        );
        assert!(question.starts_turn);
        let answer = HistoryMessage::answer("fine ✓");
        assert_eq!(parse(&answer), json!({"role": "assistant", "content": "fine ✓"}));
        assert!(!answer.starts_turn);
        let calls = [
            ToolCall {
                id: "call_1".into(),
                name: "runtime_get_value".into(),
                arguments: crate::dialect::Arguments::Object(json!({"tag": "Pump1.Speed"})),
            },
            ToolCall {
                id: "call_2".into(),
                name: "made_up".into(),
                arguments: crate::dialect::Arguments::Unparsable("{not json".into()),
            },
        ];
        let asked = HistoryMessage::tool_calls(None, &calls, |name| name == "runtime_get_value");
        assert_eq!(
            parse(&asked),
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "runtime_get_value", "arguments": "{\"tag\":\"Pump1.Speed\"}"}},
                {"id": "call_2", "type": "function", "function": {"name": "unknown_tool", "arguments": "{}"}},
            ]}),
            "an unknown name and malformed arguments are never echoed back"
        );
        assert_eq!(
            parse(&HistoryMessage::tool_calls(Some("checking"), &calls[..1], |_| {
                true
            }))["content"],
            "checking"
        );
        let result = HistoryMessage::tool_result("call_1", &json!({"ok": true, "result": 1}));
        assert_eq!(
            parse(&result),
            json!({"role": "tool", "tool_call_id": "call_1", "content": "{\"ok\":true,\"result\":1}"})
        );
    }

    /// A turn: the user message, `rounds` tool rounds of `calls` calls each, and an answer.
    fn turn(index: usize, rounds: &[usize]) -> Vec<Value> {
        let mut messages = vec![json!({"role": "user", "content": format!("question {index}")})];
        for (round, &calls) in rounds.iter().enumerate() {
            let ids: Vec<String> = (0..calls)
                .map(|call| format!("t{index}r{round}c{call}"))
                .collect();
            messages.push(
                json!({"role": "assistant", "content": null, "tool_calls": ids.iter().map(|id| json!({
                "id": id, "type": "function", "function": {"name": "runtime_get_value", "arguments": "{}"}
            })).collect::<Vec<_>>()}),
            );
            for id in ids {
                messages.push(json!({"role": "tool", "tool_call_id": id, "content": "{}"}));
            }
        }
        messages.push(json!({"role": "assistant", "content": format!("answer {index}")}));
        messages
    }

    /// The history of these turns (rounds of calls each, as [`turn`] takes them), and its
    /// newest turn as values.
    fn history(turns: &[Vec<usize>]) -> (Vec<HistoryMessage>, Vec<Value>) {
        let messages = turns
            .iter()
            .enumerate()
            .flat_map(|(i, rounds)| turn(i, rounds))
            .map(|message| HistoryMessage::new(&message))
            .collect();
        (messages, turn(turns.len() - 1, &turns[turns.len() - 1]))
    }

    /// The rules servers enforce: starts with a user message; every tool message answers a
    /// call of the assistant message before it; every call is answered.
    fn assert_valid(messages: &[Value]) -> Result<(), TestCaseError> {
        if let Some(first) = messages.first() {
            prop_assert_eq!(&first["role"], "user");
        }
        let mut pending: Vec<String> = Vec::new();
        for message in messages {
            match message["role"].as_str() {
                Some("tool") => {
                    let id = message["tool_call_id"].as_str().unwrap_or_default().to_owned();
                    prop_assert!(pending.contains(&id), "tool message {} answers nothing", id);
                    pending.retain(|pending| pending != &id);
                }
                role => {
                    prop_assert!(
                        pending.is_empty(),
                        "calls {:?} unanswered before {:?}",
                        pending,
                        role
                    );
                    if let Some(calls) = message["tool_calls"].as_array() {
                        pending = calls
                            .iter()
                            .filter_map(|call| call["id"].as_str().map(str::to_owned))
                            .collect();
                    }
                }
            }
        }
        prop_assert!(pending.is_empty());
        Ok(())
    }

    /// The tool message as the API spells it: the content's JSON text, escaped as a string.
    fn tool_message_written_twice(id: &str, content: &Value) -> String {
        json!({"role": "tool", "tool_call_id": id, "content": content.to_string()}).to_string()
    }

    #[test]
    fn a_tool_result_is_its_json_text_in_a_string_whatever_its_strings_hold() {
        let every_escape: String = (0_u8..0x20)
            .map(char::from)
            .chain("\"\\/\u{7f}é😀".chars())
            .collect();
        for content in [
            json!({"ok": true, "result": {"value": 42.5, "unit": "A", "quality": "Good"}}),
            json!({"ok": true, "result": every_escape}),
            json!({"ok": false, "error": {"type": "x\"y", "message": "a\\b\nc", "details": null, "retryable": false}}),
            json!({"ok": true, "result": [1, -2, 3.5e300, true, null, {"k\"ey": ["\t"]}]}),
        ] {
            let message = HistoryMessage::tool_result("call_\"1", &content);
            assert_eq!(&*message.json, tool_message_written_twice("call_\"1", &content));
            let parsed: Value = serde_json::from_str(message.json()).expect("JSON");
            let inner: Value =
                serde_json::from_str(parsed["content"].as_str().expect("a string")).expect("JSON text");
            assert_eq!(inner, content);
        }
    }

    proptest! {
        #[test]
        fn a_tool_result_of_any_text_reads_back_as_it_was(key in "\\PC*", text in any::<String>()) {
            let content = json!({"ok": true, "result": {key: text}});
            let message = HistoryMessage::tool_result("call_1", &content);
            prop_assert_eq!(&*message.json, tool_message_written_twice("call_1", &content));
        }
    }

    proptest! {
        #[test]
        fn truncated_histories_stay_valid_and_bounded(
            turns in proptest::collection::vec(proptest::collection::vec(1_usize..4, 0..4), 1..12),
            max in 2_usize..60,
        ) {
            let (mut kept, last_turn) = history(&turns);
            let before = kept.len();
            truncate(&mut kept, max, usize::MAX);
            let messages: Vec<Value> = kept
                .iter()
                .map(|message| serde_json::from_str(message.json()).expect("the JSON it was made from"))
                .collect();
            assert_valid(&messages)?;
            prop_assert!(messages.len() <= max.max(last_turn.len()));
            prop_assert!(messages.ends_with(&last_turn), "the newest turn is kept whole");
            if before <= max {
                prop_assert_eq!(messages.len(), before, "nothing dropped when it fits");
            }
        }
    }

    proptest! {
        #[test]
        fn byte_truncation_keeps_whole_turns_within_the_budget(
            turns in proptest::collection::vec(proptest::collection::vec(1_usize..4, 0..4), 1..12),
            max_bytes in 0_usize..4000,
        ) {
            let (mut kept, last_turn) = history(&turns);
            let last_bytes: usize = last_turn.iter().map(|m| m.to_string().len()).sum();
            let before: Vec<HistoryMessage> = kept.clone();
            let dropped_newest = truncate(&mut kept, usize::MAX, max_bytes);
            let bytes: usize = kept.iter().map(|message| message.json().len()).sum();
            prop_assert!(bytes <= max_bytes);
            prop_assert_eq!(dropped_newest, last_bytes > max_bytes);
            let messages: Vec<Value> = kept
                .iter()
                .map(|message| serde_json::from_str(message.json()).expect("the JSON it was made from"))
                .collect();
            assert_valid(&messages)?;
            if dropped_newest {
                // What is kept is the end of the history before the newest turn.
                let earlier = &before[..before.len() - last_turn.len()];
                prop_assert!(earlier.ends_with(&kept));
            } else {
                prop_assert!(messages.ends_with(&last_turn));
            }
        }
    }

    #[test]
    fn the_cache_budget_drops_the_least_recently_used_sessions_turns_first() {
        let cache = TranscriptCache::default();
        let message = |text: &str| HistoryMessage::new(&serde_json::json!({"role": "user", "content": text}));
        let big = "x".repeat(1000);
        let (old, new) = (Uuid::new_v4(), Uuid::new_v4());
        let mut sessions = Vec::new();
        for guid in [old, new] {
            let ticket = cache.ticket(guid);
            let session = Arc::clone(ticket.session());
            sessions.push(Arc::clone(&session));
            let mut transcript = session.transcript.try_lock().expect("free");
            transcript.messages = (0..4).map(|_| message(&big)).collect();
            let bytes = transcript.bytes();
            cache.settle(&session, bytes);
            cache.touch(&session);
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let per_session = cache.total_bytes() / 2;
        cache.set_budget(TranscriptBudget {
            session_bytes: usize::MAX,
            cache_bytes: per_session + per_session / 2,
        });
        cache.enforce_cache_budget();
        assert!(cache.total_bytes() <= per_session + per_session / 2);
        let held = |guid| {
            cache
                .sessions
                .get(&guid)
                .map(|session| session.bytes.load(Ordering::Relaxed))
        };
        assert_eq!(held(new), Some(per_session), "the recent session is whole");
        assert!(held(old) < Some(per_session), "the older session paid");
        cache.remove(old);
        // A turn of the removed session ending late must not put its bytes back.
        cache.settle(&sessions[0], 4000);
        assert_eq!(cache.total_bytes(), per_session);
        cache.remove(new);
        assert_eq!(cache.total_bytes(), 0, "removal gives the bytes back");
    }

    #[test]
    fn sessions_are_per_connection_and_removal_cancels() {
        let cache = TranscriptCache::default();
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let first = cache.ticket(a);
        assert!(Arc::ptr_eq(first.session(), cache.ticket(a).session()));
        assert!(!Arc::ptr_eq(first.session(), cache.ticket(b).session()));
        cache.remove(a);
        assert!(first.session().closed.is_cancelled());
        assert_eq!(cache.len(), 1);
    }

    #[tokio::test]
    async fn turns_are_served_in_ticket_order_and_dropped_tickets_are_skipped() {
        let cache = Arc::new(TranscriptCache::default());
        let guid = Uuid::new_v4();
        let first = cache.ticket(guid);
        let second = cache.ticket(guid);
        let abandoned = cache.ticket(guid);
        let fourth = cache.ticket(guid);
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        // Spawned newest first: the tickets, not the scheduling, decide the order.
        let mut tasks = Vec::new();
        for (name, ticket) in [("fourth", fourth), ("second", second)] {
            let order = Arc::clone(&order);
            tasks.push(tokio::spawn(async move {
                ticket.wait_turn().await;
                order.lock().map(|mut order| order.push(name)).ok();
                tokio::task::yield_now().await;
            }));
        }
        tokio::task::yield_now().await;
        drop(abandoned);
        first.wait_turn().await;
        order.lock().map(|mut order| order.push("first")).ok();
        drop(first);
        for task in tasks {
            task.await.expect("task");
        }
        let order = order.lock().map(|order| order.clone()).unwrap_or_default();
        assert_eq!(order, ["first", "second", "fourth"]);
    }
}
