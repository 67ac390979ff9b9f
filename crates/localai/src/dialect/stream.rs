//! Reading a streamed chat completion: OpenAI-style server-sent events (OpenAI, vLLM,
//! llama.cpp, Ollama's `/v1`) and Ollama's native NDJSON lines, assembled into the response a
//! non-streamed request would have had, so one reader ([`super::read_reply`]) reads both.
//!
//! The assembler follows what real servers send: a tool-call fragment goes to the call with its
//! id, else to the latest call with its index, else to the call in progress; a call's name is
//! set once and never concatenated (some servers repeat it); argument fragments are appended
//! and parsed only at the end (by the reader); a whole call may come in one delta, with its
//! arguments as a string or an object. `finish_reason: ""`, `usage: {}`, a last chunk with
//! empty `choices` and only `usage`, unknown fields, and a stream that ends without `[DONE]`
//! are all accepted; a line that is not JSON, or an error event, is an error.

use serde_json::Value;

use super::not_json;
use super::wire::{Choice, Chunk, Completion, Delta, Fragment, Function, Loose, Message, NativeCall};

/// A response body as the JSON of a non-streamed response, whether the server streamed it
/// (server-sent events, or Ollama's NDJSON) or not: a server that ignores `stream: true` is
/// read as well as one that honours it. The whole body at once; [`ResponseReader`] reads the
/// same as it arrives.
pub(crate) fn read_response(body: &[u8]) -> Result<Completion, String> {
    let mut reader = ResponseReader::default();
    reader.push(body, &mut |_| {})?;
    reader.finish(&mut |_| {})
}

/// The fields a server-sent event line may start with.
const SSE_FIELDS: [&[u8]; 5] = [b"data:", b":", b"event:", b"id:", b"retry:"];

/// What a body turned out to be, once its first bytes told.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum BodyKind {
    /// Too little has arrived to tell.
    #[default]
    Undecided,
    /// Server-sent events: read a line at a time.
    Events,
    /// Ollama's native stream, one JSON chunk a line: read a line at a time.
    Lines,
    /// One JSON document (a server that did not stream), or something no stream starts with:
    /// kept whole and read at the end.
    Document,
}

/// Reads a response body as it arrives: a streamed one a line at a time, handing each piece of
/// answer text to the caller as it comes (so it can be shown before the model has finished),
/// and holding only the line in progress; anything else whole, read at the end. What it reads
/// is exactly what [`read_response`] reads from the whole body, however the body is cut.
#[derive(Debug, Default)]
pub(crate) struct ResponseReader {
    kind: BodyKind,
    /// The undecided start, the line in progress, or the whole document.
    buffer: Vec<u8>,
    assembler: StreamAssembler,
    /// `[DONE]` arrived: whatever follows is ignored.
    done: bool,
}

impl ResponseReader {
    /// Takes the next bytes of the body. `on_text` gets each piece of answer text a streamed
    /// body carries, in order. An error (a line that is not JSON, an error event) ends the read.
    pub(crate) fn push(&mut self, bytes: &[u8], on_text: &mut dyn FnMut(&str)) -> Result<(), String> {
        if self.done {
            return Ok(());
        }
        self.buffer.extend_from_slice(bytes);
        if self.kind == BodyKind::Undecided {
            self.kind = decide(&self.buffer);
            if matches!(self.kind, BodyKind::Events | BodyKind::Lines) {
                // Lines are read from the first field or brace on.
                let start = self.buffer.len() - body_start(&self.buffer).len();
                self.buffer.drain(..start);
            }
        }
        if !matches!(self.kind, BodyKind::Events | BodyKind::Lines) {
            return Ok(());
        }
        let mut taken = 0;
        while let Some(end) = memchr::memchr(b'\n', &self.buffer[taken..]) {
            let line = &self.buffer[taken..taken + end];
            taken += end + 1;
            if self.assembler.push_line(line, on_text)? {
                self.done = true;
                self.buffer.clear();
                return Ok(());
            }
        }
        self.buffer.drain(..taken);
        Ok(())
    }

    /// The response a non-streamed request would have had, once the body has ended.
    pub(crate) fn finish(mut self, on_text: &mut dyn FnMut(&str)) -> Result<Completion, String> {
        match self.kind {
            BodyKind::Events | BodyKind::Lines => {
                // A last line without its newline is read now, its text handed out as any.
                if !self.done {
                    let last = std::mem::take(&mut self.buffer);
                    self.assembler.push_line(&last, on_text)?;
                }
                if self.assembler.is_empty() {
                    return Err("LLM stream ended before its first chunk".to_owned());
                }
                Ok(self.assembler.into_completion())
            }
            BodyKind::Undecided | BodyKind::Document => read_whole(&self.buffer),
        }
    }
}

/// The body from its first meaningful byte: past a byte-order mark and leading white space.
fn body_start(body: &[u8]) -> &[u8] {
    body.strip_prefix("\u{feff}".as_bytes())
        .unwrap_or(body)
        .trim_ascii_start()
}

/// What a body is, from its start: undecided while an SSE field name or the first line of a
/// JSON object is still incomplete.
fn decide(body: &[u8]) -> BodyKind {
    let start = body_start(body);
    if start.is_empty() {
        return BodyKind::Undecided;
    }
    if SSE_FIELDS.iter().any(|field| start.starts_with(field)) {
        return BodyKind::Events;
    }
    if SSE_FIELDS.iter().any(|field| field.starts_with(start)) {
        return BodyKind::Undecided;
    }
    if !start.starts_with(b"{") {
        return BodyKind::Document;
    }
    let Some(end) = memchr::memchr(b'\n', start) else {
        return BodyKind::Undecided;
    };
    // A first line that is a stream chunk by itself makes a stream of lines; a pretty-printed
    // document's first line is not JSON, and a compact document's has no `delta`. Read as a
    // chunk's typed fields: a compact document is one line, read again whole when it ends.
    match std::str::from_utf8(&start[..end]).map(Chunk::from_json) {
        Ok(Ok(chunk)) if is_stream_chunk(&chunk) => BodyKind::Lines,
        _ => BodyKind::Document,
    }
}

/// Whether a line is one chunk of a stream: an OpenAI chunk (its first choice has a `delta`,
/// of any type) or an Ollama native line (a `message` object, no `choices`).
fn is_stream_chunk(chunk: &Chunk) -> bool {
    match &chunk.choices {
        Loose::Absent => chunk.message.get().is_some_and(Value::is_object),
        Loose::Other => false,
        Loose::Is(choices) => choices
            .first()
            .and_then(Loose::get)
            .is_some_and(|choice| choice.delta.is_present()),
    }
}

/// A whole body that did not start as a stream of lines.
fn read_whole(body: &[u8]) -> Result<Completion, String> {
    let start = body_start(body);
    let is_sse = SSE_FIELDS.iter().any(|field| start.starts_with(field));
    let mut json_error = None;
    if !is_sse {
        match Completion::from_json(body) {
            Ok(completion) if completion.choices.is_present() => return Ok(completion),
            Ok(completion) => {
                // Ollama's native shape (a one-line stream, or its non-streamed answer): read
                // as its stream is. Rare enough to read the body a second time, as a value.
                if let Ok(value) = serde_json::from_slice::<Value>(body)
                    && value.get("message").is_some_and(Value::is_object)
                {
                    let mut assembler = StreamAssembler::default();
                    let chunk = Loose::<Chunk>::from_value(value)
                        .into_option()
                        .unwrap_or_default();
                    assembler.push_chunk(&chunk, &mut |_| {})?;
                    return Ok(assembler.into_completion());
                }
                return Ok(completion);
            }
            // Not one JSON document, but maybe one a line: Ollama's native stream.
            Err(error) if !start.starts_with(b"{") || !body.trim_ascii_end().contains(&b'\n') => {
                return Err(not_json(&error));
            }
            Err(error) => json_error = Some(not_json(&error)),
        }
    }
    let mut assembler = StreamAssembler::default();
    match assembler.push_body(start) {
        Ok(()) if assembler.is_empty() => {
            Err(json_error.unwrap_or_else(|| "LLM stream ended before its first chunk".to_owned()))
        }
        Ok(()) => Ok(assembler.into_completion()),
        // Not a stream after all, but a JSON document that does not parse: say that.
        Err(error) => Err(match json_error {
            Some(json_error) if assembler.is_empty() => json_error,
            _ => error,
        }),
    }
}

/// One tool call being assembled.
#[derive(Debug, Default)]
struct PartialCall {
    id: Option<String>,
    index: Option<u64>,
    name: Option<String>,
    /// Argument fragments appended in order.
    arguments: String,
    /// Arguments sent whole as an object (Ollama), which replace any fragments.
    arguments_object: Option<Value>,
}

/// Assembles the chunks of one streamed response.
#[derive(Debug, Default)]
struct StreamAssembler {
    content: String,
    saw_content: bool,
    calls: Vec<PartialCall>,
    finish_reason: Option<String>,
    usage: Option<Value>,
    /// Ollama's native counters, from its `done` line.
    prompt_eval_count: Loose<u64>,
    eval_count: Loose<u64>,
    /// Chunks taken so far.
    chunks: usize,
}

impl StreamAssembler {
    /// Takes every line of a streamed body (SSE `data:` lines or NDJSON), in order, the last
    /// one even without its line end. Returns an error for a line that is not JSON, or for an
    /// error event.
    fn push_body(&mut self, body: &[u8]) -> Result<(), String> {
        for line in body.split(|byte| *byte == b'\n') {
            if self.push_line(line, &mut |_| {})? {
                break;
            }
        }
        Ok(())
    }

    /// Takes one line of a stream (without its `\n`); returns whether it was `[DONE]`.
    fn push_line(&mut self, line: &[u8], on_text: &mut dyn FnMut(&str)) -> Result<bool, String> {
        let line = String::from_utf8_lossy(line);
        let line = line.trim_end_matches('\r');
        let payload = match line.strip_prefix("data:") {
            Some(data) => data.trim_start(),
            // Blank separators, `event:`, `id:`, `retry:` and `:` comments carry nothing.
            None if line.trim().is_empty() || !line.trim_start().starts_with('{') => return Ok(false),
            // Ollama's native stream: one JSON object a line.
            None => line.trim(),
        };
        if payload == "[DONE]" {
            return Ok(true);
        }
        let chunk = Chunk::from_json(payload).map_err(|error| {
            format!(
                "LLM stream carried a line that is not JSON ({error}) after {} chunks",
                self.chunks
            )
        })?;
        self.push_chunk(&chunk, on_text)?;
        Ok(false)
    }

    /// Takes one chunk (an OpenAI `chat.completion.chunk` or an Ollama line).
    fn push_chunk(&mut self, chunk: &Chunk, on_text: &mut dyn FnMut(&str)) -> Result<(), String> {
        // vLLM's older error event: `{"object": "error", "message": ...}`.
        if chunk.object.get().is_some_and(|object| object == "error") {
            let message: String = chunk
                .message
                .get()
                .and_then(Value::as_str)
                .unwrap_or("(no message)")
                .chars()
                .take(300)
                .collect();
            return Err(format!("LLM stream error: {message}"));
        }
        if chunk.error.is_present() {
            let message = match chunk.error.get() {
                Some(Value::String(message)) => message.clone(),
                Some(other) => other
                    .get("message")
                    .and_then(Value::as_str)
                    .map_or_else(|| other.to_string(), str::to_owned),
                None => "null".to_owned(),
            };
            let message: String = message.chars().take(300).collect();
            return Err(format!("LLM stream error: {message}"));
        }
        self.chunks += 1;
        if let Some(usage) = chunk
            .usage
            .get()
            .filter(|usage| usage.as_object().is_some_and(|u| !u.is_empty()))
        {
            self.usage = Some(usage.clone());
        }
        if chunk.prompt_eval_count.is_present() {
            self.prompt_eval_count = chunk.prompt_eval_count.clone();
        }
        if chunk.eval_count.is_present() {
            self.eval_count = chunk.eval_count.clone();
        }
        if let Some(choice) = chunk.choices.get().and_then(|choices| choices.first()) {
            // A first choice that is not an object carries nothing, but is still the choice.
            let Some(choice) = choice.get() else {
                return Ok(());
            };
            if let Some(reason) = choice.finish_reason.get().filter(|r| !r.is_empty()) {
                self.finish_reason = Some(reason.clone());
            }
            if let Some(delta) = choice.delta.get() {
                self.push_delta(delta, false, on_text);
            }
        } else if let Some(message) = chunk.message.get().filter(|message| message.is_object()) {
            // Ollama's native line: a message piece (its tool calls each whole), and
            // `done_reason` on the last line.
            let delta = Loose::<Delta>::from_value(message.clone())
                .into_option()
                .unwrap_or_default();
            self.push_delta(&delta, true, on_text);
            if let Some(reason) = chunk.done_reason.get().filter(|r| !r.is_empty()) {
                self.finish_reason = Some(reason.clone());
            }
        }
        Ok(())
    }

    /// Takes a delta. With `whole_calls`, every tool call in it is a call of its own (Ollama's
    /// native stream sends each call whole, without id or index).
    fn push_delta(&mut self, delta: &Delta, whole_calls: bool, on_text: &mut dyn FnMut(&str)) {
        if let Some(piece) = delta.content.get() {
            self.content.push_str(piece);
            self.saw_content = true;
            if !piece.is_empty() {
                on_text(piece);
            }
        }
        let Some(fragments) = delta.tool_calls.get() else {
            return;
        };
        let nothing = Fragment::default();
        for fragment in fragments {
            // A fragment that is not an object still stands for a call (as an empty one).
            let fragment = fragment.get().unwrap_or(&nothing);
            let id = fragment.id.get().filter(|id| !id.is_empty());
            let index = fragment.index.get().copied();
            let function = fragment.function.get();
            // Arguments sent as an object are a whole call's, never a fragment of one.
            let whole = whole_calls
                || function.is_some_and(|function| function.arguments.get().is_some_and(Value::is_object));
            let slot = match (id, index) {
                (Some(id), _) => self.calls.iter().position(|call| call.id.as_ref() == Some(id)),
                (None, Some(index)) if !whole => {
                    self.calls.iter().rposition(|call| call.index == Some(index))
                }
                (None, None) if !whole => self.calls.len().checked_sub(1),
                (None, _) => None,
            };
            let slot = slot.unwrap_or_else(|| {
                self.calls.push(PartialCall {
                    id: id.cloned(),
                    index,
                    ..PartialCall::default()
                });
                self.calls.len() - 1
            });
            let call = &mut self.calls[slot];
            let Some(function) = function else {
                continue;
            };
            if call.name.is_none()
                && let Some(name) = function.name.get().filter(|name| !name.is_empty())
            {
                call.name = Some(name.clone());
            }
            match function.arguments.get() {
                Some(Value::String(piece)) => call.arguments.push_str(piece),
                Some(object @ Value::Object(_)) => call.arguments_object = Some(object.clone()),
                _ => {}
            }
        }
    }

    /// Whether any chunk arrived.
    fn is_empty(&self) -> bool {
        self.chunks == 0
    }

    /// The response a non-streamed request would have had.
    fn into_completion(self) -> Completion {
        let calls: Vec<Loose<NativeCall>> = self
            .calls
            .into_iter()
            .map(|call| {
                Loose::Is(NativeCall {
                    id: call.id.map_or(Loose::Absent, Loose::Is),
                    function: Loose::Is(Function {
                        name: call.name.map_or(Loose::Other, Loose::Is),
                        arguments: Some(call.arguments_object.unwrap_or(Value::String(call.arguments))),
                    }),
                })
            })
            .collect();
        let message = Message {
            content: if self.saw_content {
                Loose::Is(self.content)
            } else {
                Loose::Other
            },
            tool_calls: if calls.is_empty() {
                Loose::Absent
            } else {
                Loose::Is(calls)
            },
        };
        let choice = Choice {
            message: Loose::Is(message),
            finish_reason: self.finish_reason.map_or(Loose::Other, Loose::Is),
        };
        let mut completion = Completion {
            choices: Loose::Is(vec![Loose::Is(choice)]),
            ..Completion::default()
        };
        match self.usage {
            Some(usage) => completion.usage = Loose::from_value(usage),
            None => {
                completion.prompt_eval_count = self.prompt_eval_count;
                completion.eval_count = self.eval_count;
            }
        }
        completion
    }
}

#[cfg(test)]
mod tests {
    use super::super::reply::Finish;
    use super::super::{Arguments, AssistantReply, Usage, read_reply};
    use super::*;
    use serde_json::json;

    fn assemble(body: &str) -> Result<AssistantReply, String> {
        let mut assembler = StreamAssembler::default();
        assembler.push_body(body.as_bytes())?;
        let mut n = 0;
        read_reply(
            assembler.into_completion(),
            &["runtime_get_value", "runtime_search_uns"],
            &mut || {
                n += 1;
                format!("gen_{n}")
            },
        )
    }

    fn sse(chunks: &[Value]) -> String {
        let mut body: String = chunks.iter().map(|chunk| format!("data: {chunk}\n\n")).collect();
        body.push_str("data: [DONE]\n\n");
        body
    }

    fn delta(delta: Value) -> Value {
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
    }

    #[test]
    fn text_pieces_finish_reason_and_a_usage_only_last_chunk() {
        let body = sse(&[
            delta(json!({"role": "assistant", "content": ""})),
            delta(json!({"content": "Pump 1 "})),
            delta(json!({"content": "draws 12.4 A."})),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}),
            json!({"choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": 7}}),
        ]);
        let reply = assemble(&body).expect("reads");
        assert_eq!(reply.content.as_deref(), Some("Pump 1 draws 12.4 A."));
        assert_eq!(reply.finish, Finish::Length);
        assert_eq!(
            reply.usage,
            Usage {
                prompt_tokens: 40,
                completion_tokens: 7,
                ..Usage::default()
            }
        );
    }

    #[test]
    fn fragments_are_routed_by_id_then_index_then_the_call_in_progress() {
        let body = sse(&[
            // The first fragment names the call; later ones only append arguments.
            delta(
                json!({"tool_calls": [{"index": 0, "id": "a", "type": "function", "function": {"name": "runtime_get_value", "arguments": ""}}]}),
            ),
            delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"tag\":"}}]})),
            // A name repeated in a later fragment is never concatenated.
            delta(
                json!({"tool_calls": [{"index": 0, "function": {"name": "runtime_get_value", "arguments": "\"Pump1.FlowRate\"}"}}]}),
            ),
            // Ollama's /v1: a parallel call at index 0 again, with another id.
            delta(
                json!({"tool_calls": [{"index": 0, "id": "b", "function": {"name": "runtime_search_uns", "arguments": "{\"query\""}}]}),
            ),
            // No id, no index (Gemini): the call in progress.
            delta(json!({"tool_calls": [{"function": {"arguments": ": \"tank\"}"}}]})),
            // vLLM: a whole call in one delta, arguments as an object.
            delta(
                json!({"tool_calls": [{"index": 2, "id": "c", "function": {"name": "runtime_get_value", "arguments": {"tag": "Tank1.Level"}}}]}),
            ),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": ""}], "usage": {}}),
        ]);
        let reply = assemble(&body).expect("reads");
        let calls: Vec<(&str, &str, &Arguments)> = reply
            .calls
            .iter()
            .map(|call| (call.id.as_str(), call.name.as_str(), &call.arguments))
            .collect();
        assert_eq!(
            calls,
            [
                (
                    "a",
                    "runtime_get_value",
                    &Arguments::Object(json!({"tag": "Pump1.FlowRate"}))
                ),
                (
                    "b",
                    "runtime_search_uns",
                    &Arguments::Object(json!({"query": "tank"}))
                ),
                (
                    "c",
                    "runtime_get_value",
                    &Arguments::Object(json!({"tag": "Tank1.Level"}))
                ),
            ]
        );
        assert_eq!(
            reply.finish,
            Finish::Complete,
            "an empty finish_reason is no reason"
        );
        assert!(reply.usage.is_empty());
    }

    #[test]
    fn fragments_without_ids_get_one_and_bad_arguments_are_kept_unparsable() {
        let body = sse(&[
            delta(
                json!({"tool_calls": [{"index": 0, "function": {"name": "runtime_get_value", "arguments": "{\"tag\": "}}]}),
            ),
            delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "oops"}}]})),
        ]);
        let reply = assemble(&body).expect("reads");
        assert_eq!(reply.calls[0].id, "gen_1");
        assert_eq!(
            reply.calls[0].arguments,
            Arguments::Unparsable("{\"tag\": oops".to_owned())
        );
    }

    #[test]
    fn ollama_native_lines_and_a_stream_without_done() {
        let body = [
            json!({"model": "qwen2.5", "message": {"role": "assistant", "content": "Tank 1 "}, "done": false}),
            json!({"model": "qwen2.5", "message": {"role": "assistant", "content": "is full."}, "done": false}),
            json!({"model": "qwen2.5", "message": {"role": "assistant", "content": ""}, "done": true,
                   "done_reason": "stop", "prompt_eval_count": 26, "eval_count": 9}),
        ]
        .iter()
        .map(|line| format!("{line}\n"))
        .collect::<String>();
        let reply = assemble(&body).expect("reads");
        assert_eq!(reply.content.as_deref(), Some("Tank 1 is full."));
        assert_eq!(
            (reply.usage.prompt_tokens, reply.usage.completion_tokens),
            (26, 9)
        );
        let calls = json!({"message": {"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "runtime_get_value", "arguments": {"tag": "Pump1.Mode"}}},
            {"function": {"name": "runtime_search_uns", "arguments": {"query": "tank"}}}]}, "done": true});
        let reply = assemble(&format!("{calls}\n")).expect("reads");
        let names: Vec<&str> = reply.calls.iter().map(|call| call.name.as_str()).collect();
        assert_eq!(
            names,
            ["runtime_get_value", "runtime_search_uns"],
            "parallel whole calls stay apart"
        );
        assert_eq!(
            reply.calls[1].arguments,
            Arguments::Object(json!({"query": "tank"}))
        );
        assert_eq!(
            reply.calls[0].arguments,
            Arguments::Object(json!({"tag": "Pump1.Mode"}))
        );
        // An SSE stream cut cleanly before `[DONE]` still gives what arrived.
        let cut = format!("data: {}\n\n", delta(json!({"content": "partial"})));
        assert_eq!(assemble(&cut).expect("reads").content.as_deref(), Some("partial"));
    }

    #[test]
    fn comments_crlf_and_unknown_fields_are_ignored_garbage_and_error_events_are_errors() {
        let body = format!(
            ": keep-alive\r\nevent: message\r\ndata: {}\r\n\r\ndata: [DONE]\r\n",
            json!({"choices": [{"delta": {"content": "ok", "x_vendor": 1}, "logprobs": null}], "system_fingerprint": "fp"})
        );
        assert_eq!(assemble(&body).expect("reads").content.as_deref(), Some("ok"));
        let garbage = format!(
            "data: {}\n\ndata: {{not json\n\n",
            delta(json!({"content": "ok"}))
        );
        assert!(
            assemble(&garbage)
                .is_err_and(|error| error.contains("not JSON") && error.contains("after 1 chunks"))
        );
        let error = "data: {\"error\": {\"message\": \"model overloaded\", \"code\": 503}}\n\n";
        assert_eq!(
            assemble(error).expect_err("an error"),
            "LLM stream error: model overloaded"
        );
        for (event, said) in [
            (r#"{"error": "too long"}"#, "too long"),
            (r#"{"error": null}"#, "null"),
            (r#"{"error": 7}"#, "7"),
            (r#"{"object": "error"}"#, "(no message)"),
        ] {
            assert_eq!(
                assemble(&format!("data: {event}\n\n")).expect_err("an error"),
                format!("LLM stream error: {said}"),
                "{event}"
            );
        }
        // Chunks of odd shapes carry nothing, and break nothing: a repeated key keeps the last.
        let odd = "data: [1]\n\ndata: {\"choices\": [7]}\n\ndata: {\"choices\": [{\"delta\": {\"content\": \"a\", \"content\": \"b\"}}]}\n\n";
        assert_eq!(assemble(odd).expect("reads").content.as_deref(), Some("b"));
    }

    #[test]
    fn a_body_is_read_whether_it_was_streamed_or_not() {
        let plain = json!({"choices": [{"message": {"role": "assistant", "content": "plain"}}]});
        assert_eq!(
            read_response(plain.to_string().as_bytes()),
            Ok(Completion::from_value(plain))
        );
        let streamed = sse(&[delta(json!({"content": "streamed"}))]);
        let value = read_response(streamed.as_bytes()).expect("reads");
        assert_eq!(value.content().expect("an answer"), "streamed");
        let ndjson = format!(
            "{}\n{}\n",
            json!({"message": {"content": "a"}, "done": false}),
            json!({"message": {"content": "b"}, "done": true})
        );
        let value = read_response(ndjson.as_bytes()).expect("reads");
        assert_eq!(value.content().expect("an answer"), "ab");
        let native =
            json!({"message": {"role": "assistant", "content": "whole"}, "done": true, "eval_count": 3});
        let value = read_response(native.to_string().as_bytes()).expect("reads");
        assert_eq!(value.content().expect("an answer"), "whole");
        assert_eq!(value.eval_count, Loose::Is(3));
        assert!(read_response(b"{not json").is_err_and(|error| error.contains("not JSON")));
        // A JSON document spread over lines that does not parse is said to be bad JSON.
        assert!(
            read_response(b"{\n  \"choices\": [\n")
                .is_err_and(|error| error.starts_with("LLM response is not JSON"))
        );
        // Any SSE field may come first, and a byte-order mark before it.
        let with_id = format!("\u{feff}id: 1\n{streamed}");
        assert_eq!(
            read_response(with_id.as_bytes()).expect("reads").content(),
            Some("streamed")
        );
        // vLLM's older error event; a message that is text is no Ollama message.
        assert_eq!(
            read_response(b"data: {\"object\": \"error\", \"message\": \"too long\"}\n\n"),
            Err("LLM stream error: too long".to_owned())
        );
        let text_message = json!({"message": "hello"});
        assert_eq!(
            read_response(text_message.to_string().as_bytes()),
            Ok(Completion::from_value(text_message))
        );
        assert!(
            read_response(b"data: [DONE]\n\n").is_err_and(|error| error.contains("before its first chunk"))
        );
    }

    /// `text` cut into pieces at the given character positions.
    fn pieces(text: &str, cuts: &[usize]) -> Vec<String> {
        let chars: Vec<char> = text.chars().collect();
        let mut cuts: Vec<usize> = cuts.iter().map(|cut| cut % (chars.len() + 1)).collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut pieces = Vec::new();
        let mut from = 0;
        for cut in cuts.into_iter().chain([chars.len()]) {
            pieces.push(chars[from..cut].iter().collect());
            from = cut;
        }
        pieces
    }

    /// Reads `body` pushed in pieces cut at `cuts` (byte positions), and the text handed out.
    fn read_in_pieces(body: &[u8], cuts: &[usize]) -> (Result<Completion, String>, String) {
        let mut cuts: Vec<usize> = cuts.iter().map(|cut| cut % (body.len() + 1)).collect();
        cuts.sort_unstable();
        let mut reader = ResponseReader::default();
        let mut text = String::new();
        let mut from = 0;
        for cut in cuts.into_iter().chain([body.len()]) {
            if let Err(error) = reader.push(&body[from..cut], &mut |piece| text.push_str(piece)) {
                return (Err(error), text);
            }
            from = cut;
        }
        let read = reader.finish(&mut |piece| text.push_str(piece));
        (read, text)
    }

    #[test]
    fn the_text_of_a_last_line_without_its_newline_is_handed_out_too() {
        let body = b"{\"message\":{\"role\":\"assistant\",\"content\":\"Tank \"},\"done\":false}\n\
                     {\"message\":{\"role\":\"assistant\",\"content\":\"full\"},\"done\":true}\r";
        let (read, text) = read_in_pieces(body, &[]);
        assert_eq!(read.expect("reads").content(), Some("Tank full"));
        assert_eq!(text, "Tank full");
    }

    #[test]
    fn bodies_read_as_they_arrive_read_as_the_whole_body() {
        let answer = delta(json!({"content": "Pump 1 is fine."}));
        let bodies: Vec<Vec<u8>> = vec![
            sse(&[
                delta(json!({"content": "Pump 1 "})),
                delta(json!({"content": "is fine."})),
            ])
            .into_bytes(),
            format!("\u{feff}\r\n: keep-alive\r\n\r\ndata: {answer}\r\n\r\ndata: [DONE]\r\n\r\ngarbage")
                .into_bytes(),
            format!(
                "{}\n{}\n",
                json!({"message": {"content": "Pump 1 "}}),
                json!({"message": {"content": "is fine."}, "done": true, "done_reason": "stop"})
            )
            .into_bytes(),
            serde_json::to_vec_pretty(&json!({"choices": [{"message": {"content": "Pump 1 is fine."}}]}))
                .expect("json"),
            json!({"choices": [{"message": {"content": "Pump 1 is fine."}}]})
                .to_string()
                .into_bytes(),
            json!({"message": {"content": "Pump 1 is fine."}, "done": true})
                .to_string()
                .into_bytes(),
            format!(
                "{}\n{}\n",
                json!({"error": "model not found"}),
                json!({"error": "again"})
            )
            .into_bytes(),
            b"data: {\"choices\": [{\"delta\": {\"content\": \"a\"}}]}\n\ndata: {not json\n\n".to_vec(),
            b"{\"choices\": [\n".to_vec(),
            b"data: [DONE]\n\n".to_vec(),
            b"".to_vec(),
            b"   \n".to_vec(),
            b"<html>502 Bad Gateway</html>".to_vec(),
        ];
        for body in &bodies {
            let whole = read_response(body);
            for cuts in [vec![], vec![1], vec![3, 4, 5], (0..body.len()).collect()] {
                let (read, text) = read_in_pieces(body, &cuts);
                assert_eq!(read, whole, "{} cut at {cuts:?}", String::from_utf8_lossy(body));
                if let Ok(value) = &read
                    && !text.is_empty()
                {
                    assert_eq!(Some(text.as_str()), value.content());
                }
            }
        }
        // The text of a stream is handed out as it arrives, before the body ends.
        let mut reader = ResponseReader::default();
        let mut text = String::new();
        let first = format!("data: {}\n\n", delta(json!({"content": "Pump"})));
        reader
            .push(first.as_bytes(), &mut |piece| text.push_str(piece))
            .expect("reads");
        assert_eq!(text, "Pump");
    }

    proptest::proptest! {
        #[test]
        fn any_split_of_a_reply_reads_as_the_whole_reply(
            text in "[a-zA-Z .,é\"]{0,40}",
            cuts in proptest::collection::vec(0_usize..80, 0..6),
            tags in proptest::collection::vec("[A-Za-z0-9.\"]{1,12}", 1..4),
            with_index in proptest::bool::ANY,
            repeat_name in proptest::bool::ANY,
        ) {
            let calls: Vec<(String, String)> = tags
                .iter()
                .enumerate()
                .map(|(i, tag)| (format!("c{i}"), json!({"tag": tag}).to_string()))
                .collect();
            let whole = json!({"choices": [{"message": {"role": "assistant", "content": text,
                "tool_calls": calls.iter().map(|(id, arguments)| json!({"id": id, "type": "function",
                    "function": {"name": "runtime_get_value", "arguments": arguments}})).collect::<Vec<_>>()}}]});
            let mut chunks: Vec<Value> = pieces(&text, &cuts)
                .into_iter()
                .filter(|piece| !piece.is_empty())
                .map(|piece| delta(json!({"content": piece})))
                .collect();
            for (index, (id, arguments)) in calls.iter().enumerate() {
                for (n, piece) in pieces(arguments, &cuts).into_iter().enumerate() {
                    let mut fragment = json!({"function": {"arguments": piece}});
                    if n == 0 {
                        fragment["id"] = json!(id);
                        fragment["type"] = json!("function");
                    }
                    if n == 0 || repeat_name {
                        fragment["function"]["name"] = json!("runtime_get_value");
                    }
                    if with_index {
                        fragment["index"] = json!(index);
                    }
                    chunks.push(delta(json!({"tool_calls": [fragment]})));
                }
            }
            let mut n = 0;
            let mut new_id = || {
                n += 1;
                format!("gen_{n}")
            };
            let expected = read_reply(Completion::from_value(whole), &[], &mut new_id).expect("reads");
            let body = sse(&chunks);
            let streamed = assemble(&body).expect("reads");
            proptest::prop_assert_eq!(&streamed, &expected);
            // Arriving in any pieces, it reads the same, and its text comes out whole.
            let (read, shown) = read_in_pieces(body.as_bytes(), &cuts);
            let read = read_reply(read.expect("reads"), &[], &mut new_id).expect("reads");
            proptest::prop_assert_eq!(&read.content, &expected.content);
            proptest::prop_assert_eq!(shown, text);
        }
    }
}
