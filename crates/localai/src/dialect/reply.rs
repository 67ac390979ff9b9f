//! Reading a chat-completions reply, tolerantly, for both paths: `choices[0]`, its answer
//! (never a reasoning field), its tool calls from whichever channel carried them (native
//! `tool_calls` with string or object arguments and missing ids; `<tool_call>` blocks or a bare
//! JSON object in the content, only when tools were offered), why the model stopped, and the
//! tokens it cost.

use serde_json::{Value, json};

use super::Usage;
use super::wire::{Choice, Completion, NativeCall};

/// How the model asked for tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Channel {
    /// The `tool_calls` field of the assistant message.
    Native,
    /// Written into `content`: `<tool_call>{...}</tool_call>` or a bare JSON object.
    Text,
}

/// A tool call's arguments as the model sent them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Arguments {
    /// A JSON object (sent as an object or as a string holding one).
    Object(Value),
    /// Anything else: answered to the model as an error, never echoed into the history.
    Unparsable(String),
}

impl Arguments {
    /// The arguments as JSON text: the object, or the unparsable text as a JSON string.
    pub(crate) fn as_json(&self) -> String {
        match self {
            Self::Object(object) => object.to_string(),
            Self::Unparsable(raw) => Value::String(raw.clone()).to_string(),
        }
    }
}

/// One tool call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolCall {
    /// The call id (generated when the server sent none).
    pub(crate) id: String,
    /// The tool asked for.
    pub(crate) name: String,
    /// Its arguments.
    pub(crate) arguments: Arguments,
}

impl ToolCall {
    /// The arguments as the history holds them: always a valid JSON object's text (malformed
    /// arguments are answered to the model as an error, never echoed back).
    pub(crate) fn history_arguments(&self) -> String {
        match &self.arguments {
            // serde_json into memory cannot fail (so `{}` is never taken), and costs a fraction
            // of what `Display` does.
            Arguments::Object(object) => serde_json::to_string(object).unwrap_or_else(|_| "{}".to_owned()),
            Arguments::Unparsable(_) => "{}".to_owned(),
        }
    }
}

/// The assistant's reply, read tolerantly.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AssistantReply {
    /// The answer text (never a reasoning field); `None` when absent or null.
    pub(crate) content: Option<String>,
    /// The tool calls, from whichever channel carried them.
    pub(crate) calls: Vec<ToolCall>,
    /// Which channel that was (meaningful when `calls` is not empty).
    pub(crate) channel: Channel,
    /// Why the model stopped.
    pub(crate) finish: Finish,
    /// The tokens the server says this reply cost.
    pub(crate) usage: Usage,
}

/// Why the model stopped writing, as far as a warning cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Finish {
    /// It finished (`stop`, `tool_calls`, an empty or missing reason, anything unknown).
    Complete,
    /// It hit its token limit (`length`): the answer may be cut short.
    Length,
    /// Its content filter cut the answer (`content_filter`).
    ContentFilter,
}

impl Finish {
    fn of(choice: &Choice) -> Self {
        match choice.finish_reason.get().map(String::as_str) {
            Some("length") => Self::Length,
            Some("content_filter") => Self::ContentFilter,
            _ => Self::Complete,
        }
    }

    /// The warning both paths give for it, if any.
    pub(crate) fn warning(self) -> Option<&'static str> {
        match self {
            Self::Complete => None,
            Self::Length => {
                Some("the model's answer was cut short by its token limit (finish_reason: length)")
            }
            Self::ContentFilter => {
                Some("the model's content filter cut its answer (finish_reason: content_filter)")
            }
        }
    }
}

/// Reads `choices[0]` of a chat-completions response. Text-channel tool calls are looked for
/// only when tools were offered (`offered` holds their names); `new_id` names calls that came
/// without an id.
pub(crate) fn read_reply(
    response: Completion,
    offered: &[&str],
    new_id: &mut dyn FnMut() -> String,
) -> Result<AssistantReply, String> {
    let usage = Usage::of(&response);
    // Taken apart rather than copied out of: the strings move into the reply.
    let (choice, message) = response.into_first_choice()?;
    let finish = Finish::of(&choice);
    let (content, calls) = match message {
        Some(message) => (message.content.into_option(), message.tool_calls.into_option()),
        None => (None, None),
    };
    let native: Vec<ToolCall> = calls
        .map(|calls| {
            calls
                .into_iter()
                .filter_map(|call| native_call(call.into_option()?, new_id))
                .collect()
        })
        .unwrap_or_default();
    if !native.is_empty() {
        return Ok(AssistantReply {
            content: content.filter(|text| !text.trim().is_empty()),
            calls: native,
            channel: Channel::Native,
            finish,
            usage,
        });
    }
    if !offered.is_empty()
        && let Some(text) = &content
        && let Some((calls, rest)) = text_calls(text, offered, new_id)
    {
        return Ok(AssistantReply {
            content: Some(rest).filter(|rest| !rest.trim().is_empty()),
            calls,
            channel: Channel::Text,
            finish,
            usage,
        });
    }
    Ok(AssistantReply {
        content,
        calls: Vec::new(),
        channel: Channel::Native,
        finish,
        usage,
    })
}

/// A native call; one without a name is a call the model meant but we cannot name, answered
/// to the model as an error under [`UNREADABLE_CALL`], as an unreadable text block is.
fn native_call(call: NativeCall, new_id: &mut dyn FnMut() -> String) -> Option<ToolCall> {
    let function = call.function.into_option()?;
    let id = call
        .id
        .into_option()
        .filter(|id| !id.is_empty())
        .unwrap_or_else(new_id);
    let arguments = arguments(function.arguments);
    let name = function
        .name
        .into_option()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty());
    Some(match name {
        Some(name) => ToolCall { id, name, arguments },
        None => ToolCall {
            id,
            name: UNREADABLE_CALL.to_owned(),
            arguments: Arguments::Unparsable(match arguments {
                Arguments::Object(object) => object.to_string(),
                Arguments::Unparsable(text) => text,
            }),
        },
    })
}

/// The placeholder name of a call the model meant but did not name readably.
const UNREADABLE_CALL: &str = "unreadable_tool_call";

/// Arguments sent as an object, a string holding an object, or nothing (an empty object).
fn arguments(raw: Option<Value>) -> Arguments {
    match raw {
        None | Some(Value::Null) => Arguments::Object(json!({})),
        Some(object @ Value::Object(_)) => Arguments::Object(object),
        Some(Value::String(text)) if text.trim().is_empty() => Arguments::Object(json!({})),
        Some(Value::String(text)) => match serde_json::from_str::<Value>(&text) {
            Ok(object @ Value::Object(_)) => Arguments::Object(object),
            _ => Arguments::Unparsable(text),
        },
        Some(other) => Arguments::Unparsable(other.to_string()),
    }
}

/// Tool calls written as text: `<tool_call>{"name", "arguments"}</tool_call>` blocks (any
/// name: the model clearly meant a call), or content that is only a JSON object (or array of
/// objects) naming offered tools. Returns the calls and the text outside them.
fn text_calls(
    text: &str,
    offered: &[&str],
    new_id: &mut dyn FnMut() -> String,
) -> Option<(Vec<ToolCall>, String)> {
    const OPEN: &str = "<tool_call>";
    const CLOSE: &str = "</tool_call>";
    if text.contains(OPEN) {
        let mut calls = Vec::new();
        let mut rest = String::new();
        let mut remaining = text;
        while let Some(start) = remaining.find(OPEN) {
            rest.push_str(&remaining[..start]);
            let after = &remaining[start + OPEN.len()..];
            // A model cut short may never write the closing tag.
            let (inner, next) = match after.find(CLOSE) {
                Some(end) => (&after[..end], &after[end + CLOSE.len()..]),
                None => (after, ""),
            };
            let call = serde_json::from_str::<Value>(strip_fence(inner))
                .ok()
                .and_then(|value| named_call(&value, new_id));
            match call {
                Some(call) => calls.push(call),
                // An unreadable block: a call the model meant but we cannot name. Answered
                // to the model as an error under a placeholder name, never echoed back.
                None => calls.push(ToolCall {
                    id: new_id(),
                    name: UNREADABLE_CALL.to_owned(),
                    arguments: Arguments::Unparsable(inner.trim().to_owned()),
                }),
            }
            remaining = next;
        }
        rest.push_str(remaining);
        return Some((calls, rest.trim().to_owned()));
    }
    // Only an object or an array can be calls: plain text (nearly every answer) is not parsed.
    let json = strip_fence(text);
    if !json.starts_with(['{', '[']) {
        return None;
    }
    let value: Value = serde_json::from_str(json).ok()?;
    let candidates = match &value {
        Value::Array(items) if !items.is_empty() => items.iter().collect(),
        Value::Object(_) => vec![&value],
        _ => return None,
    };
    let calls: Vec<ToolCall> = candidates
        .into_iter()
        .map(|candidate| named_call(candidate, new_id).filter(|call| offered.contains(&call.name.as_str())))
        .collect::<Option<_>>()?;
    Some((calls, String::new()))
}

/// `{"name": "...", "arguments" | "parameters": ...}`, optionally wrapped as
/// `{"function": {...}}`.
fn named_call(value: &Value, new_id: &mut dyn FnMut() -> String) -> Option<ToolCall> {
    let value = value.get("function").filter(|f| f.is_object()).unwrap_or(value);
    let name = value.get("name").and_then(Value::as_str)?.trim().to_owned();
    if name.is_empty() {
        return None;
    }
    Some(ToolCall {
        id: new_id(),
        name,
        arguments: arguments(
            value
                .get("arguments")
                .or_else(|| value.get("parameters"))
                .cloned(),
        ),
    })
}

/// The text inside a Markdown code fence, if it is one.
fn strip_fence(text: &str) -> &str {
    let trimmed = text.trim();
    let Some(inner) = trimmed.strip_prefix("```") else {
        return trimmed;
    };
    let inner = inner.strip_suffix("```").unwrap_or(inner);
    // Drop the language tag on the opening line (```json).
    match inner.split_once('\n') {
        Some((tag, body)) if !tag.trim().starts_with('{') && !tag.trim().starts_with('[') => body.trim(),
        _ => inner.trim(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const OFFERED: &[&str] = &["runtime_get_value", "runtime_search_uns"];

    fn read(response: Value, offered: &[&str]) -> AssistantReply {
        let mut n = 0;
        read_reply(Completion::from_value(response), offered, &mut || {
            n += 1;
            format!("gen_{n}")
        })
        .expect("reads")
    }

    fn message(message: Value) -> Value {
        json!({"choices": [{"message": message, "finish_reason": "stop"}]})
    }

    #[test]
    fn native_calls_with_string_or_object_arguments_and_missing_ids() {
        let reply = read(
            message(json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "runtime_get_value", "arguments": "{\"tag\":\"Pump1.FlowRate\"}"}},
                {"function": {"name": "runtime_get_value", "arguments": {"tag": "Tank1.Level"}}},
                {"function": {"name": "runtime_get_value", "arguments": "{not json"}},
            ]})),
            OFFERED,
        );
        assert_eq!(reply.channel, Channel::Native);
        assert_eq!(reply.content, None);
        let ids: Vec<&str> = reply.calls.iter().map(|call| call.id.as_str()).collect();
        assert_eq!(ids, ["call_1", "gen_1", "gen_2"]);
        assert_eq!(
            reply.calls[0].arguments,
            Arguments::Object(json!({"tag": "Pump1.FlowRate"}))
        );
        assert_eq!(
            reply.calls[1].arguments,
            Arguments::Object(json!({"tag": "Tank1.Level"}))
        );
        assert_eq!(
            reply.calls[2].arguments,
            Arguments::Unparsable("{not json".into())
        );
        assert_eq!(
            reply.calls[2].history_arguments(),
            "{}",
            "malformed arguments never reach the history"
        );
    }

    #[test]
    fn hermes_tool_call_blocks_in_content() {
        let reply = read(
            message(json!({"role": "assistant", "content":
                "Let me check.\n<tool_call>\n{\"name\": \"runtime_get_value\", \"arguments\": {\"tag\": \"Pump1.MotorCurrent\"}}\n</tool_call>"})),
            OFFERED,
        );
        assert_eq!(reply.channel, Channel::Text);
        assert_eq!(reply.calls.len(), 1);
        assert_eq!(reply.calls[0].name, "runtime_get_value");
        assert_eq!(reply.content.as_deref(), Some("Let me check."));
        let unclosed = read(
            message(
                json!({"role": "assistant", "content": "<tool_call>{\"name\": \"runtime_search_uns\", \"parameters\": {\"query\": \"pump\"}}"}),
            ),
            OFFERED,
        );
        assert_eq!(
            unclosed.calls[0].arguments,
            Arguments::Object(json!({"query": "pump"}))
        );
        let garbage = read(
            message(json!({"role": "assistant", "content": "<tool_call>not json</tool_call>"})),
            OFFERED,
        );
        assert_eq!(garbage.calls[0].name, "unreadable_tool_call");
    }

    #[test]
    fn a_native_call_without_a_name_is_answered_as_unreadable() {
        let reply = read(
            message(json!({"role": "assistant", "tool_calls": [
                {"id": "call_1", "function": {"name": "", "arguments": "{\"tag\": \"Tank1.Level\"}"}},
                {"function": {"name": "  ", "arguments": "{not json"}},
            ]})),
            OFFERED,
        );
        let read: Vec<(&str, &str, &Arguments)> = reply
            .calls
            .iter()
            .map(|call| (call.id.as_str(), call.name.as_str(), &call.arguments))
            .collect();
        assert_eq!(
            read,
            [
                (
                    "call_1",
                    UNREADABLE_CALL,
                    &Arguments::Unparsable(r#"{"tag":"Tank1.Level"}"#.to_owned())
                ),
                (
                    "gen_1",
                    UNREADABLE_CALL,
                    &Arguments::Unparsable("{not json".to_owned())
                ),
            ]
        );
    }

    #[test]
    fn bare_json_counts_only_when_it_names_an_offered_tool() {
        let fenced = read(
            message(
                json!({"role": "assistant", "content": "```json\n{\"name\": \"runtime_get_value\", \"arguments\": \"{\\\"tag\\\": \\\"Tank2.Level\\\"}\"}\n```"}),
            ),
            OFFERED,
        );
        assert_eq!(fenced.channel, Channel::Text);
        assert_eq!(
            fenced.calls[0].arguments,
            Arguments::Object(json!({"tag": "Tank2.Level"}))
        );
        let answer = read(
            message(json!({"role": "assistant", "content": "{\"name\": \"Pump 1\", \"status\": \"ok\"}"})),
            OFFERED,
        );
        assert!(
            answer.calls.is_empty(),
            "JSON that names no offered tool is an answer"
        );
        let no_tools = read(
            message(
                json!({"role": "assistant", "content": "<tool_call>{\"name\": \"runtime_get_value\"}</tool_call>"}),
            ),
            &[],
        );
        assert!(
            no_tools.calls.is_empty(),
            "no tools offered, no text-channel calls"
        );
    }

    #[test]
    fn reasoning_is_never_the_answer_and_length_is_noted() {
        let reply = read(
            json!({"choices": [{"message": {"role": "assistant", "content": "12.4 A",
                "reasoning": "hmm", "reasoning_content": "hmm"}, "finish_reason": "length"}]}),
            OFFERED,
        );
        assert_eq!(reply.content.as_deref(), Some("12.4 A"));
        assert_eq!(reply.finish, Finish::Length);
        let only_reasoning = read(
            message(json!({"role": "assistant", "reasoning_content": "thinking"})),
            OFFERED,
        );
        assert_eq!(only_reasoning.content, None);
        assert!(
            read_reply(
                Completion::from_value(json!({"choices": []})),
                OFFERED,
                &mut String::new
            )
            .is_err()
        );
    }

    #[test]
    fn both_finish_reasons_that_cut_an_answer_are_warned_about() {
        let finish = |reason: Value| {
            read(
                json!({"choices": [{"message": {"role": "assistant", "content": "x"}, "finish_reason": reason}]}),
                &[],
            )
            .finish
        };
        assert_eq!(finish(json!("length")), Finish::Length);
        assert_eq!(finish(json!("content_filter")), Finish::ContentFilter);
        for complete in [
            json!("stop"),
            json!(""),
            json!(null),
            json!("tool_calls"),
            json!("eos"),
        ] {
            assert_eq!(finish(complete.clone()), Finish::Complete, "{complete}");
        }
        assert!(
            Finish::ContentFilter
                .warning()
                .is_some_and(|w| w.contains("content_filter"))
        );
        assert_eq!(Finish::Complete.warning(), None);
    }
}
