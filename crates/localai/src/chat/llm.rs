//! The chat path's own conversation with the model: endpoint resolution, the request body and
//! the POST, on its own pool or reqwest. The spec keeps the two paths' execution apart; what
//! the server answers is read through `crate::dialect`, as the atomic path reads it.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use bytes::{Buf, Bytes};
use http_body_util::Full;
use reqwest::header::{CONTENT_TYPE, HOST, HeaderMap, HeaderName, HeaderValue};

use super::connections::{ExchangeError, ModelConnections, Origin, PooledResponse, RequestBuf, location};
use super::transcript::HistoryMessage;

use crate::Solution;
use crate::auth::{decode_authorization, decode_headers};
use crate::dialect::{
    Completion, MAX_RESPONSE_BYTES, ResponseReader, plain_cause, refuses_streaming, reqwest_failure,
    status_warning, too_large, transport_warning, unreadable_warning,
};
use crate::expressions::resolve_tag_expressions;
use crate::secrets::{Redactions, resolve_secrets};
use crate::settings::ModelSettings;
use crate::tools::ToolDefinition;

/// The chat path's two ways to a model server: its own pool for plain-HTTP servers reached
/// directly (see `connections.rs` for why), reqwest for HTTPS and for anything behind a proxy.
#[derive(Debug)]
pub(crate) struct Transport {
    pooled: ModelConnections,
    reqwest: reqwest::Client,
    /// The endpoint URL parsed last: a turn's resolved URL nearly always equals the one before,
    /// and parsing it (with its pooled request line) was a twentieth of a turn's work.
    last_target: Mutex<Option<Arc<Target>>>,
}

impl Transport {
    pub(crate) fn new(reqwest: reqwest::Client) -> Self {
        Self {
            pooled: ModelConnections::default(),
            reqwest,
            last_target: Mutex::new(None),
        }
    }

    /// The endpoint at `resolved` (the URL with secrets and tags resolved), parsed once for as
    /// long as it stays the same. Errors name the configured URL (`shown`), never the resolved.
    fn target(&self, resolved: &str, shown: &str) -> Result<Arc<Target>, String> {
        let mut last = self.last_target.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(target) = last.as_ref().filter(|target| target.resolved == resolved) {
            return Ok(Arc::clone(target));
        }
        let url = reqwest::Url::parse(resolved.trim())
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https") && url.host().is_some())
            .ok_or_else(|| format!("invalid LLM endpoint URL ({shown}): expected an http(s) URL"))?;
        let pooled = PooledTarget::of(&url, shown)?;
        let target = Arc::new(Target {
            resolved: resolved.to_owned(),
            url,
            pooled,
        });
        *last = Some(Arc::clone(&target));
        Ok(target)
    }
}

/// An endpoint URL, parsed.
#[derive(Debug)]
struct Target {
    /// The text it was parsed from.
    resolved: String,
    url: reqwest::Url,
    /// Where the pool sends this endpoint's POSTs, when the pool serves it (plain HTTP, no
    /// proxy, no user info).
    pooled: Option<PooledTarget>,
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

/// Why a POST gave no response to read.
#[derive(Debug)]
pub(crate) enum PostFailure {
    /// The server refused a streamed request (older llama.cpp will not stream with tools): the
    /// same request without streaming may well work. Carries the warning.
    StreamRefused(String),
    /// Anything else: the warning.
    Failed(String),
}

impl PostFailure {
    /// The warning, whatever the failure.
    pub(crate) fn into_warning(self) -> String {
        match self {
            Self::StreamRefused(warning) | Self::Failed(warning) => warning,
        }
    }
}

impl From<String> for PostFailure {
    fn from(warning: String) -> Self {
        Self::Failed(warning)
    }
}

/// Where and how to POST, after secrets and `{Tag.X}` are resolved.
#[derive(Debug)]
pub(crate) struct Endpoint {
    target: Arc<Target>,
    /// The URL as configured (tokens unresolved), the only form warnings show.
    pub(crate) shown_url: String,
    headers: HeaderMap,
    /// The secrets this endpoint was resolved with, scrubbed from what a server sends back
    /// before any of it is cut to an excerpt.
    redactions: Redactions,
}

/// A request body's bytes besides its parts: keys, brackets, `stream`, the model's escapes.
const REQUEST_FRAME_BYTES: usize = 128;

/// A chat-completions request body in three parts: its start (`model`, the system message
/// and the history), written once per turn and shared by the turn's POSTs; what is written for
/// this POST (the turn's own messages and `stream`); and the `tools` member that ends it,
/// written once per offered catalog and shared by every POST that offers it. Sent as the
/// buffers they are (one `writev`), never copied into one: the history and the tools are most
/// of a body's bytes.
#[derive(Debug, Clone)]
pub(crate) struct RequestBody {
    start: Bytes,
    own: Bytes,
    /// The `tools` member and the closing brace, or nothing (`own` then closes the body).
    tail: Bytes,
}

impl RequestBody {
    /// The body's length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.start.len() + self.own.len() + self.tail.len()
    }

    /// The body as one buffer of its parts, as hyper writes it.
    pub(crate) fn into_buf(self) -> RequestBuf {
        self.start.chain(self.own).chain(self.tail)
    }

    /// The body in one piece.
    pub(crate) fn into_vec(self) -> Vec<u8> {
        let mut body = Vec::with_capacity(self.len());
        for part in [&self.start, &self.own, &self.tail] {
            body.extend_from_slice(part);
        }
        body
    }
}

/// The end of a request body that offers `tools`: `,"tools":[...]}`. The tool specs are JSON
/// text encoded when each tool was defined.
pub(crate) fn tools_tail(tools: &[ToolDefinition]) -> Bytes {
    let specs_len: usize = tools.iter().map(|tool| tool.openai_spec().len() + 1).sum();
    let mut tail = Vec::with_capacity(specs_len + 12);
    tail.extend_from_slice(b",\"tools\":[");
    for (index, tool) in tools.iter().enumerate() {
        if index > 0 {
            tail.push(b',');
        }
        tail.extend_from_slice(tool.openai_spec().as_bytes());
    }
    tail.extend_from_slice(b"]}");
    Bytes::from(tail)
}

/// The start of a turn's request bodies: `model`, then the system message (`system`, already
/// JSON text) and the history, in the `messages` array left open.
pub(crate) fn request_start(model: &str, system: &str, history: &[HistoryMessage]) -> Result<Bytes, String> {
    let mut start =
        Vec::with_capacity(REQUEST_FRAME_BYTES + model.len() + system.len() + messages_len(history));
    start.extend_from_slice(b"{\"model\":");
    serde_json::to_writer(&mut start, model)
        .map_err(|error| format!("the request could not be encoded: {error}"))?;
    start.extend_from_slice(b",\"messages\":[");
    start.extend_from_slice(system.as_bytes());
    push_messages(&mut start, history);
    Ok(Bytes::from(start))
}

/// The bytes [`push_messages`] writes for `messages`.
fn messages_len(messages: &[HistoryMessage]) -> usize {
    messages.iter().map(|message| message.json().len() + 1).sum()
}

/// Writes `messages` as they follow an earlier message in a body's `messages` array.
fn push_messages(body: &mut Vec<u8>, messages: &[HistoryMessage]) {
    for message in messages {
        body.push(b',');
        body.extend_from_slice(message.json().as_bytes());
    }
}

/// A chat-completions request body: the turn's `start` ([`request_start`]), this turn's
/// messages, `stream` (with `include_usage`, so a stream reports its tokens), and the tools
/// when offered (`tools`, from [`tools_tail`]). Written straight from borrowed parts: the
/// messages are JSON text encoded once and copied in as bytes, never built into a request
/// value first.
pub(crate) fn request_body(
    start: &Bytes,
    messages: &[HistoryMessage],
    tools: Option<&Bytes>,
    stream: bool,
) -> RequestBody {
    let mut own = Vec::with_capacity(REQUEST_FRAME_BYTES + messages_len(messages));
    push_messages(&mut own, messages);
    own.extend_from_slice(if stream {
        b"],\"stream\":true,\"stream_options\":{\"include_usage\":true}".as_slice()
    } else {
        b"],\"stream\":false".as_slice()
    });
    let tail = match tools {
        Some(tools) => tools.clone(),
        None => {
            own.push(b'}');
            Bytes::new()
        }
    };
    RequestBody {
        start: start.clone(),
        own: Bytes::from(own),
        tail,
    }
}

impl Endpoint {
    /// Resolves the configured endpoint. Errors are warnings naming the configured URL.
    pub(crate) async fn resolve(
        settings: &ModelSettings,
        solution: &Arc<dyn Solution>,
        transport: &Transport,
        redactions: &mut Redactions,
    ) -> Result<Self, String> {
        let solution = solution.as_ref();
        let shown_url = settings.url.clone();
        let resolved = resolve_secrets(&settings.url, solution, redactions)
            .await
            .map_err(|error| format!("URL: {error}"))
            .and_then(|url| {
                resolve_tag_expressions(&url, solution).map_err(|error| format!("URL: {error}"))
            })?;
        let target = transport.target(&resolved, &shown_url)?;
        let mut headers = resolve_secrets(&settings.headers, solution, redactions)
            .await
            .map_err(|error| format!("Headers: {error}"))
            .and_then(|text| decode_headers(&text).map_err(|error| error.to_string()))?;
        let authorization = resolve_secrets(&settings.authorization, solution, redactions)
            .await
            .map_err(|error| format!("Authorization: {error}"))?;
        headers.extend(decode_authorization(&authorization).map_err(|error| error.to_string())?);
        redactions.remember_headers(&headers);
        redactions.remember_url_credentials(&target.url);
        let headers = header_map(&headers)?;
        Ok(Self {
            target,
            shown_url,
            headers,
            redactions: redactions.clone(),
        })
    }

    /// POSTs `body` (JSON bytes; `streamed` when it asks for a stream) and returns the response
    /// as the JSON of a non-streamed one, whether the server streamed it or not. The answer
    /// text of a streamed response goes to `on_text` piece by piece as it arrives.
    pub(crate) async fn post(
        &self,
        transport: &Transport,
        body: RequestBody,
        streamed: bool,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<Completion, PostFailure> {
        let shown = &self.shown_url;
        tracing::debug!(url = %shown, bytes = body.len(), pooled = self.target.pooled.is_some(), streamed, "chat POST");
        let sent = std::time::Instant::now();
        let mut response = match &self.target.pooled {
            Some(target) => self.send_pooled(&transport.pooled, target, body).await?,
            None => self.send_reqwest(&transport.reqwest, body).await?,
        };
        let status = response.status();
        if status.is_redirection() {
            return Err(PostFailure::Failed(crate::dialect::redirect_warning(
                status.as_u16(),
                status.canonical_reason().unwrap_or(""),
                response.location().as_deref(),
                shown,
                &self.redactions,
            )));
        }
        if !status.is_success() {
            let mut bytes = Vec::new();
            while let Some(chunk) = response.chunk(shown).await? {
                if bytes.len() + chunk.len() > MAX_RESPONSE_BYTES {
                    return Err(too_large(shown).into());
                }
                bytes.extend_from_slice(&chunk);
            }
            let warning = status_warning(status, &bytes, shown, &self.redactions);
            return Err(
                if streamed && refuses_streaming(status, &bytes, &self.redactions) {
                    PostFailure::StreamRefused(warning)
                } else {
                    PostFailure::Failed(warning)
                },
            );
        }
        let mut reader = ResponseReader::default();
        let mut received = 0;
        while let Some(chunk) = response.chunk(shown).await? {
            if streamed && received == 0 {
                crate::telemetry::first_chunk(sent.elapsed());
            }
            received += chunk.len();
            if received > MAX_RESPONSE_BYTES {
                return Err(too_large(shown).into());
            }
            reader.push(&chunk, on_text)?;
        }
        Ok(reader.finish(on_text)?)
    }

    /// Sends the POST on the chat path's own pool.
    async fn send_pooled<'a>(
        &self,
        pool: &'a ModelConnections,
        target: &'a PooledTarget,
        body: RequestBody,
    ) -> Result<ModelResponse<'a>, String> {
        let mut request = hyper::Request::new(Full::new(body.into_buf()));
        *request.method_mut() = hyper::Method::POST;
        *request.uri_mut() = target.path.clone();
        let headers = request.headers_mut();
        headers.insert(HOST, target.host.clone());
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in &self.headers {
            headers.append(name, value.clone());
        }
        pool.send(&target.origin, request)
            .await
            .map(ModelResponse::Pooled)
            .map_err(|error| pooled_warning(&error, &self.shown_url))
    }

    /// Sends the POST through reqwest.
    async fn send_reqwest(
        &self,
        http: &reqwest::Client,
        body: RequestBody,
    ) -> Result<ModelResponse<'static>, String> {
        http.post(self.target.url.clone())
            .header(CONTENT_TYPE, "application/json")
            .headers(self.headers.clone())
            .body(body.into_vec())
            .send()
            .await
            .map(ModelResponse::Reqwest)
            .map_err(|error| transport_warning(&reqwest_failure(&error), &self.shown_url))
    }
}

/// A model server's response, its body read as it arrives, from either transport.
#[derive(Debug)]
enum ModelResponse<'a> {
    Pooled(PooledResponse<'a>),
    Reqwest(reqwest::Response),
}

impl ModelResponse<'_> {
    fn status(&self) -> hyper::StatusCode {
        match self {
            Self::Pooled(response) => response.status,
            Self::Reqwest(response) => response.status(),
        }
    }

    fn location(&self) -> Option<String> {
        match self {
            Self::Pooled(response) => response.location.clone(),
            Self::Reqwest(response) => location(response.headers()),
        }
    }

    /// The next bytes of the body, `None` at its end; a failure is the warning.
    async fn chunk(&mut self, shown: &str) -> Result<Option<Bytes>, String> {
        match self {
            Self::Pooled(response) => response
                .chunk()
                .await
                .map_err(|error| pooled_warning(&error, shown)),
            Self::Reqwest(response) => response
                .chunk()
                .await
                .map_err(|error| unreadable_warning(&reqwest_failure(&error), shown)),
        }
    }
}

/// The warning for a failure of the pool: a body cut short reads as unreadable, anything
/// earlier as a transport failure.
fn pooled_warning(error: &ExchangeError, shown: &str) -> String {
    let cause = plain_cause(error).unwrap_or_else(|| "the request could not be completed".to_owned());
    match error {
        ExchangeError::Body(_) => unreadable_warning(&cause, shown),
        _ => transport_warning(&cause, shown),
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

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    #[test]
    fn an_endpoint_url_is_parsed_once_while_it_stays_the_same() {
        let transport = Transport::new(reqwest::Client::new());
        let first = transport
            .target("http://127.0.0.1:8080/v1/chat/completions", "shown")
            .expect("parses");
        let again = transport
            .target("http://127.0.0.1:8080/v1/chat/completions", "shown")
            .expect("parses");
        assert!(Arc::ptr_eq(&first, &again), "the same text is not parsed again");
        assert_eq!(
            first.pooled.as_ref().map(|target| target.path.to_string()),
            Some("/v1/chat/completions".to_owned())
        );
        let other = transport
            .target("https://api.example.com/v1?x=1", "shown")
            .expect("parses");
        assert!(!Arc::ptr_eq(&first, &other));
        assert!(other.pooled.is_none(), "HTTPS goes through reqwest");
        let refused = transport
            .target("ftp://secret-host/", "{Tag.Url}")
            .expect_err("not http");
        assert_eq!(
            refused, "invalid LLM endpoint URL ({Tag.Url}): expected an http(s) URL",
            "the configured URL is named, never the resolved one"
        );
        let kept = transport
            .target("https://api.example.com/v1?x=1", "shown")
            .expect("parses");
        assert!(
            Arc::ptr_eq(&other, &kept),
            "a refused URL leaves the last good one"
        );
    }

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
        let this_turn: Vec<HistoryMessage> = messages.iter().map(HistoryMessage::new).collect();
        let system_json = system.to_string();
        let tail = tools_tail(&tools);
        let start = request_start("m:7b", &system_json, &kept).expect("encodes");
        let with_tools = request_body(&start, &this_turn, Some(&tail), true).into_vec();
        assert_eq!(
            serde_json::from_slice::<Value>(&with_tools).expect("valid JSON"),
            json!({"model": "m:7b",
                   "messages": [system.clone(), history[0].clone(), history[1].clone(),
                                messages[0].clone(), messages[1].clone()],
                   "stream": true, "stream_options": {"include_usage": true}, "tools": specs})
        );
        let start = request_start("m", &system_json, &[]).expect("encodes");
        let without = request_body(&start, &[], None, false).into_vec();
        assert_eq!(
            serde_json::from_slice::<Value>(&without).expect("valid JSON"),
            json!({"model": "m", "messages": [system], "stream": false})
        );
    }
}
