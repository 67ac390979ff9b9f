//! The chat path's own conversation with the model: endpoint resolution, the POST, and a
//! tolerant reading of what real OpenAI-compatible servers send back (see
//! `local-ai-facts.md`). This is deliberately a separate copy from the atomic path's: the spec
//! keeps the two paths' HTTP code apart so they can diverge without coupling.

use std::error::Error;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use http_body_util::Full;
use reqwest::header::{CONTENT_TYPE, HOST, HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};

use super::connections::{Exchange, ExchangeError, ModelConnections, Origin, location};
use super::transcript::HistoryMessage;

use crate::Solution;
use crate::auth::{decode_authorization, decode_headers};
use crate::expressions::resolve_tag_expressions;
use crate::secrets::{Redactions, resolve_secrets};
use crate::settings::ModelSettings;
use crate::tools::ToolDefinition;

/// The most response bytes read from one POST.
const MAX_RESPONSE_BYTES: usize = 8 * 1024 * 1024;

/// The longest excerpt of an error body quoted in a warning.
const MAX_QUOTED: usize = 300;

/// The chat path's two ways to a model server: its own pool for plain-HTTP servers reached
/// directly (see `connections.rs` for why), reqwest for HTTPS and for anything behind a proxy.
#[derive(Debug)]
pub(crate) struct Transport {
    pooled: ModelConnections,
    reqwest: reqwest::Client,
}

impl Transport {
    pub(crate) fn new(reqwest: reqwest::Client) -> Self {
        Self {
            pooled: ModelConnections::default(),
            reqwest,
        }
    }
}

/// Whether the environment names a proxy for plain-HTTP requests: reqwest honours it (and
/// `NO_PROXY`), the pool does not, so such endpoints go through reqwest.
fn http_proxy_configured() -> bool {
    static CONFIGURED: OnceLock<bool> = OnceLock::new();
    *CONFIGURED.get_or_init(|| {
        ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"]
            .iter()
            .any(|name| std::env::var_os(name).is_some_and(|value| !value.is_empty()))
    })
}

/// A pooled endpoint's request line and `Host` header, worked out once per turn.
#[derive(Debug)]
struct PooledTarget {
    origin: Origin,
    /// The path and query, as the request line carries them.
    path: hyper::Uri,
    host: HeaderValue,
}

impl PooledTarget {
    fn of(url: &reqwest::Url, shown: &str) -> Result<Option<Self>, String> {
        let Some(origin) = Origin::of(url)
            .filter(|_| url.username().is_empty() && url.password().is_none() && !http_proxy_configured())
        else {
            return Ok(None);
        };
        let mut path = url.path().to_owned();
        if let Some(query) = url.query() {
            path.push('?');
            path.push_str(query);
        }
        let path = path
            .parse()
            .map_err(|_| format!("invalid LLM endpoint URL ({shown}): the path cannot be sent"))?;
        let host = HeaderValue::from_str(&origin.host_header())
            .map_err(|_| format!("invalid LLM endpoint URL ({shown}): the host cannot be sent"))?;
        Ok(Some(Self { origin, path, host }))
    }
}

/// Where and how to POST, after secrets and `{Tag.X}` are resolved.
#[derive(Debug)]
pub(crate) struct Endpoint {
    url: reqwest::Url,
    /// Where the pool sends this endpoint's POSTs, when the pool serves it (plain HTTP, no
    /// proxy, no user info).
    pooled: Option<PooledTarget>,
    /// The URL as configured (tokens unresolved), the only form warnings show.
    pub(crate) shown_url: String,
    headers: HeaderMap,
    /// The secrets this endpoint was resolved with, scrubbed from what a server sends back
    /// before any of it is cut to an excerpt.
    redactions: Redactions,
}

/// The chat-completions request body: `model`, the system message (`system`, already JSON
/// text), the history then this turn's messages, `stream` false, and `tools` when offered.
/// Written straight from borrowed parts: the history messages and the tool specs are JSON text
/// encoded once and copied in as bytes, never built into a request value first.
pub(crate) fn request_body(
    model: &str,
    system: &str,
    history: &[HistoryMessage],
    messages: &[Value],
    tools: Option<&[ToolDefinition]>,
) -> Result<Vec<u8>, String> {
    let failed = |error: serde_json::Error| format!("the request could not be encoded: {error}");
    let mut body = Vec::with_capacity(1024);
    body.extend_from_slice(b"{\"model\":");
    serde_json::to_writer(&mut body, model).map_err(failed)?;
    body.extend_from_slice(b",\"messages\":[");
    body.extend_from_slice(system.as_bytes());
    for message in history {
        body.push(b',');
        body.extend_from_slice(message.json().as_bytes());
    }
    for message in messages {
        body.push(b',');
        serde_json::to_writer(&mut body, message).map_err(failed)?;
    }
    body.extend_from_slice(b"],\"stream\":false");
    if let Some(tools) = tools {
        body.extend_from_slice(b",\"tools\":[");
        for (index, tool) in tools.iter().enumerate() {
            if index > 0 {
                body.push(b',');
            }
            body.extend_from_slice(tool.openai_spec().as_bytes());
        }
        body.push(b']');
    }
    body.push(b'}');
    Ok(body)
}

impl Endpoint {
    /// Resolves the configured endpoint. Errors are warnings naming the configured URL.
    pub(crate) fn resolve(
        settings: &ModelSettings,
        solution: &Arc<dyn Solution>,
        redactions: &mut Redactions,
    ) -> Result<Self, String> {
        let solution = solution.as_ref();
        let shown_url = settings.url.clone();
        let resolved = resolve_secrets(&settings.url, solution, redactions)
            .map_err(|error| format!("URL: {error}"))
            .and_then(|url| {
                resolve_tag_expressions(&url, solution).map_err(|error| format!("URL: {error}"))
            })?;
        let url = reqwest::Url::parse(resolved.trim())
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https") && url.host().is_some())
            .ok_or_else(|| format!("invalid LLM endpoint URL ({shown_url}): expected an http(s) URL"))?;
        let mut headers = resolve_secrets(&settings.headers, solution, redactions)
            .map_err(|error| format!("Headers: {error}"))
            .and_then(|text| decode_headers(&text).map_err(|error| error.to_string()))?;
        let authorization = resolve_secrets(&settings.authorization, solution, redactions)
            .map_err(|error| format!("Authorization: {error}"))?;
        headers.extend(decode_authorization(&authorization).map_err(|error| error.to_string())?);
        redactions.remember_headers(&headers);
        redactions.remember_url_credentials(&url);
        let headers = header_map(&headers)?;
        let pooled = PooledTarget::of(&url, &shown_url)?;
        Ok(Self {
            url,
            pooled,
            shown_url,
            headers,
            redactions: redactions.clone(),
        })
    }

    /// POSTs `body` (JSON bytes) and returns the response JSON; a failure of any kind is a
    /// warning.
    pub(crate) async fn post(&self, transport: &Transport, body: Vec<u8>) -> Result<Value, String> {
        let shown = &self.shown_url;
        tracing::debug!(url = %shown, bytes = body.len(), pooled = self.pooled.is_some(), "chat POST");
        let Exchange {
            status,
            location,
            body: bytes,
        } = match &self.pooled {
            Some(target) => self.post_pooled(&transport.pooled, target, body).await?,
            None => self.post_reqwest(&transport.reqwest, body).await?,
        };
        if status.is_redirection() {
            return Err(crate::dialect::redirect_warning(
                status.as_u16(),
                status.canonical_reason().unwrap_or(""),
                location.as_deref(),
                shown,
                &self.redactions,
            ));
        }
        if !status.is_success() {
            return Err(format!(
                "LLM endpoint returned HTTP {} {}: {} ({shown})",
                status.as_u16(),
                status.canonical_reason().unwrap_or(""),
                quoted_error(&bytes, &self.redactions)
            ));
        }
        serde_json::from_slice(&bytes).map_err(|error| format!("LLM response is not JSON: {error}"))
    }

    /// The POST on the chat path's own pool.
    async fn post_pooled(
        &self,
        pool: &ModelConnections,
        target: &PooledTarget,
        body: Vec<u8>,
    ) -> Result<Exchange, String> {
        let shown = &self.shown_url;
        let mut request = hyper::Request::new(Full::new(Bytes::from(body)));
        *request.method_mut() = hyper::Method::POST;
        *request.uri_mut() = target.path.clone();
        let headers = request.headers_mut();
        headers.insert(HOST, target.host.clone());
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in &self.headers {
            headers.append(name, value.clone());
        }
        match pool.exchange(&target.origin, request, MAX_RESPONSE_BYTES).await {
            Ok(exchange) => Ok(exchange),
            Err(ExchangeError::TooLarge) => Err(format!(
                "LLM response exceeds {MAX_RESPONSE_BYTES} bytes ({shown})"
            )),
            Err(error) => {
                let stage = match error {
                    ExchangeError::Body(_) => "the response could not be read: ",
                    _ => "",
                };
                let cause =
                    plain_cause(&error).unwrap_or_else(|| "the request could not be completed".to_owned());
                Err(format!("LLM endpoint HTTP error: {stage}{cause} ({shown})"))
            }
        }
    }

    /// The POST through reqwest.
    async fn post_reqwest(&self, http: &reqwest::Client, body: Vec<u8>) -> Result<Exchange, String> {
        let shown = &self.shown_url;
        let mut response = http
            .post(self.url.clone())
            .header(CONTENT_TYPE, "application/json")
            .headers(self.headers.clone())
            .body(body)
            .send()
            .await
            .map_err(|error| format!("LLM endpoint HTTP error: {} ({shown})", transport_error(&error)))?;
        let status = response.status();
        let location = location(response.headers());
        let mut bytes = Vec::new();
        loop {
            let chunk = response.chunk().await.map_err(|error| {
                format!(
                    "LLM endpoint HTTP error: the response could not be read: {} ({shown})",
                    transport_error(&error)
                )
            })?;
            let Some(chunk) = chunk else { break };
            if bytes.len() + chunk.len() > MAX_RESPONSE_BYTES {
                return Err(format!(
                    "LLM response exceeds {MAX_RESPONSE_BYTES} bytes ({shown})"
                ));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(Exchange {
            status,
            location,
            body: bytes,
        })
    }
}

/// The configured headers (Headers, then Authorization) as a header map; the decoders already
/// refuse what HTTP cannot carry, so a failure here is a bug's safety net, not a user's error.
fn header_map(headers: &[(String, String)]) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("Headers: {name:?} is not a valid header name"))?;
        let value = HeaderValue::from_str(value)
            .map_err(|_| format!("Headers: the value of {name} cannot be sent"))?;
        map.append(name, value);
    }
    Ok(map)
}

/// The first cause in an error's chain that says something a reader can act on, in plain
/// words; `None` when no cause does.
fn plain_cause(error: &(dyn Error + 'static)) -> Option<String> {
    let mut cause = Some(error);
    while let Some(inner) = cause {
        if let Some(io) = inner.downcast_ref::<std::io::Error>() {
            return Some(match io.kind() {
                std::io::ErrorKind::ConnectionRefused => "Connection refused".to_owned(),
                std::io::ErrorKind::ConnectionReset => "Connection reset by the server".to_owned(),
                std::io::ErrorKind::UnexpectedEof => "the server closed the connection early".to_owned(),
                _ => io.to_string(),
            });
        }
        if inner
            .downcast_ref::<hyper::Error>()
            .is_some_and(hyper::Error::is_incomplete_message)
        {
            return Some("the server closed the connection early".to_owned());
        }
        if matches!(
            inner.downcast_ref::<ExchangeError>(),
            Some(ExchangeError::Resolve)
        ) {
            return Some("cannot resolve the host name".to_owned());
        }
        let text = inner.to_string();
        if text.contains("dns error") || text.contains("failed to lookup address") {
            return Some("cannot resolve the host name".to_owned());
        }
        cause = inner.source();
    }
    None
}

/// A reqwest failure in plain words, never quoting the (possibly secret-bearing) URL that the
/// error's own text carries: only its causes are read.
fn transport_error(error: &reqwest::Error) -> String {
    if let Some(cause) = error.source().and_then(plain_cause) {
        cause
    } else if error.is_connect() {
        "cannot connect".to_owned()
    } else if error.is_body() || error.is_decode() {
        "the connection closed before the whole response arrived".to_owned()
    } else {
        "the request could not be completed".to_owned()
    }
}

/// The message inside an error body of any known server shape, or a short excerpt.
/// The message is scrubbed of the call's secrets before it is cut, so none leaks as a prefix.
pub(crate) fn quoted_error(body: &[u8], redactions: &Redactions) -> String {
    if let Ok(value) = serde_json::from_slice::<Value>(body) {
        let message = match value.get("error") {
            Some(Value::String(message)) => Some(message.as_str()),
            Some(Value::Object(error)) => error.get("message").and_then(Value::as_str),
            _ => value.get("message").and_then(Value::as_str),
        };
        if let Some(message) = message {
            return redactions.scrub(message).chars().take(MAX_QUOTED).collect();
        }
    }
    let text = String::from_utf8_lossy(body);
    match text.trim() {
        "" => "(empty body)".to_owned(),
        html if html.starts_with('<') => format!("(an HTML page of {} bytes)", body.len()),
        other => redactions.scrub(other).chars().take(MAX_QUOTED).collect(),
    }
}

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
    /// The call as the history holds it: arguments always a valid JSON object string.
    pub(crate) fn history_entry(&self) -> Value {
        let arguments = match &self.arguments {
            Arguments::Object(object) => object.to_string(),
            Arguments::Unparsable(_) => "{}".to_owned(),
        };
        json!({"id": self.id, "type": "function", "function": {"name": self.name, "arguments": arguments}})
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
    /// Whether the model stopped at its token limit.
    pub(crate) cut_at_length: bool,
}

/// Reads `choices[0]` of a chat-completions response. Text-channel tool calls are looked for
/// only when tools were offered (`offered` holds their names); `new_id` names calls that came
/// without an id.
pub(crate) fn read_reply(
    response: &Value,
    offered: &[&str],
    new_id: &mut dyn FnMut() -> String,
) -> Result<AssistantReply, String> {
    let choice = response
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|choices| choices.first())
        .ok_or("LLM response has no choices")?;
    let message = choice
        .get("message")
        .ok_or("LLM response choice has no message")?;
    let cut_at_length = choice.get("finish_reason").and_then(Value::as_str) == Some("length");
    let content = message.get("content").and_then(Value::as_str).map(str::to_owned);
    let native: Vec<ToolCall> = message
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| {
            calls
                .iter()
                .filter_map(|call| native_call(call, new_id))
                .collect()
        })
        .unwrap_or_default();
    if !native.is_empty() {
        return Ok(AssistantReply {
            content: content.filter(|text| !text.trim().is_empty()),
            calls: native,
            channel: Channel::Native,
            cut_at_length,
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
            cut_at_length,
        });
    }
    Ok(AssistantReply {
        content,
        calls: Vec::new(),
        channel: Channel::Native,
        cut_at_length,
    })
}

fn native_call(call: &Value, new_id: &mut dyn FnMut() -> String) -> Option<ToolCall> {
    let function = call.get("function")?;
    let name = function.get("name").and_then(Value::as_str)?.to_owned();
    let id = call
        .get("id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .map_or_else(&mut *new_id, str::to_owned);
    Some(ToolCall {
        id,
        name,
        arguments: arguments(function.get("arguments")),
    })
}

/// Arguments sent as an object, a string holding an object, or nothing (an empty object).
fn arguments(raw: Option<&Value>) -> Arguments {
    match raw {
        None | Some(Value::Null) => Arguments::Object(json!({})),
        Some(object @ Value::Object(_)) => Arguments::Object(object.clone()),
        Some(Value::String(text)) if text.trim().is_empty() => Arguments::Object(json!({})),
        Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
            Ok(object @ Value::Object(_)) => Arguments::Object(object),
            _ => Arguments::Unparsable(text.clone()),
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
                    name: "unreadable_tool_call".to_owned(),
                    arguments: Arguments::Unparsable(inner.trim().to_owned()),
                }),
            }
            remaining = next;
        }
        rest.push_str(remaining);
        return Some((calls, rest.trim().to_owned()));
    }
    let value: Value = serde_json::from_str(strip_fence(text)).ok()?;
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
        arguments: arguments(value.get("arguments").or_else(|| value.get("parameters"))),
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
    use super::*;

    const OFFERED: &[&str] = &["runtime_get_value", "runtime_search_uns"];

    #[test]
    fn the_request_body_is_the_json_value_it_stands_for() {
        let system = json!({"role": "system", "content": "be \"brief\"\n"});
        let history = [
            json!({"role": "user", "content": "é ✓"}),
            json!({"role": "assistant", "content": "ok"}),
        ];
        let messages = [
            json!({"role": "user", "content": "again"}),
            json!({"role": "assistant", "content": null}),
        ];
        let parameters = json!({"type": "object", "properties": {}});
        let tools = [
            ToolDefinition::new("t", 0x04, "first", parameters.clone(), |_| async { Ok(json!(1)) }),
            ToolDefinition::new("u", 0x08, "second", parameters.clone(), |_| async {
                Ok(json!(2))
            }),
        ];
        let specs: Vec<Value> = ["t", "u"]
            .iter()
            .zip(["first", "second"])
            .map(|(name, description)| {
                json!({"type": "function",
                       "function": {"name": name, "description": description, "parameters": parameters}})
            })
            .collect();
        let kept: Vec<HistoryMessage> = history.iter().map(HistoryMessage::new).collect();
        let system_json = system.to_string();
        let with_tools = request_body("m:7b", &system_json, &kept, &messages, Some(&tools)).expect("encodes");
        assert_eq!(
            serde_json::from_slice::<Value>(&with_tools).expect("valid JSON"),
            json!({"model": "m:7b",
                   "messages": [system.clone(), history[0].clone(), history[1].clone(),
                                messages[0].clone(), messages[1].clone()],
                   "stream": false, "tools": specs})
        );
        let without = request_body("m", &system_json, &[], &[], None).expect("encodes");
        assert_eq!(
            serde_json::from_slice::<Value>(&without).expect("valid JSON"),
            json!({"model": "m", "messages": [system], "stream": false})
        );
    }

    fn read(response: Value, offered: &[&str]) -> AssistantReply {
        let mut n = 0;
        read_reply(&response, offered, &mut || {
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
            reply.calls[2].history_entry()["function"]["arguments"],
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
        assert!(reply.cut_at_length);
        let only_reasoning = read(
            message(json!({"role": "assistant", "reasoning_content": "thinking"})),
            OFFERED,
        );
        assert_eq!(only_reasoning.content, None);
        assert!(read_reply(&json!({"choices": []}), OFFERED, &mut String::new).is_err());
    }
}
