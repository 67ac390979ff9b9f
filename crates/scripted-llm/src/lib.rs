//! An OpenAI-compatible chat-completions server for tests and benchmarks.
//!
//! It speaks real HTTP/1.1 on `127.0.0.1:0`, answers each POST from a script of [`Reply`]s (or
//! from any [`Responder`]), injects faults (delays, error statuses, malformed bodies, a
//! connection dropped mid-body, a slow trickle, no answer at all), and records every request,
//! so tests can assert on exactly what a client POSTed. The HTTP layer is hand-written over
//! tokio on purpose: faults like a truncated body need control below any HTTP library.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Largest request head accepted.
const MAX_HEAD: usize = 64 * 1024;
/// Largest request body accepted.
const MAX_BODY: usize = 16 * 1024 * 1024;

/// One scripted answer to one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A 200 chat completion whose answer is this text (`finish_reason: "stop"`).
    Content(String),
    /// A 200 chat completion asking for tool calls: `(id, name, arguments as a JSON string)`.
    ToolCalls(Vec<(String, String, String)>),
    /// Any status with a JSON body.
    Json {
        /// HTTP status code.
        status: u16,
        /// The body.
        body: Value,
    },
    /// Any status, content type and body bytes.
    Raw {
        /// HTTP status code.
        status: u16,
        /// The `content-type` header.
        content_type: String,
        /// The body.
        body: Vec<u8>,
    },
    /// Any status, any headers (written as given, in order) and any body; the server adds
    /// only `content-length`.
    Custom {
        /// HTTP status code.
        status: u16,
        /// Header lines as `(name, value)`.
        headers: Vec<(String, String)>,
        /// The body.
        body: Vec<u8>,
    },
    /// Waits, then sends the inner reply.
    Delayed(Duration, Box<Reply>),
    /// Announces `declared` body bytes, sends `body` (fewer), then closes the connection.
    DropMidBody {
        /// The content length announced.
        declared: usize,
        /// The bytes actually sent.
        body: Vec<u8>,
    },
    /// A 200 whose body bytes arrive `chunk` at a time, one chunk every `every`.
    Trickle {
        /// The whole body.
        body: Vec<u8>,
        /// Bytes per chunk.
        chunk: usize,
        /// Pause between chunks.
        every: Duration,
    },
    /// A 200 streamed in chunked transfer encoding, one line (an SSE event or an NDJSON line,
    /// its line ends included) per chunk, one every `every`, then `end`.
    Stream {
        /// The `content-type` header (`text/event-stream`, `application/x-ndjson`).
        content_type: String,
        /// The lines, in order.
        lines: Vec<String>,
        /// The pause before each line.
        every: Duration,
        /// How the stream ends.
        end: StreamEnd,
    },
    /// Closes the connection without answering.
    Close,
    /// Never answers and never closes (until the server stops).
    Hang,
    /// Resets the connection (TCP RST) without answering.
    Reset,
}

/// How a [`Reply::Stream`] ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEnd {
    /// The terminating chunk: the response is complete.
    Complete,
    /// The connection closes without the terminating chunk: a stream cut mid-way.
    Cut,
    /// The last line is sent again and again until the client goes away.
    Endless,
}

/// In a line of a [`Reply::Stream`], replaced by the Unix time in microseconds at the moment
/// the line is written: a client can time a chunk from when the stand-in sent it.
pub const NOW_MICROS: &str = "{now_micros}";

impl Reply {
    /// OpenAI-style server-sent events: each chunk as a `data:` event, then `data: [DONE]`.
    pub fn sse(chunks: &[Value]) -> Self {
        let mut lines: Vec<String> = chunks.iter().map(|chunk| format!("data: {chunk}\n\n")).collect();
        lines.push("data: [DONE]\n\n".to_owned());
        Self::Stream {
            content_type: "text/event-stream".to_owned(),
            lines,
            every: Duration::ZERO,
            end: StreamEnd::Complete,
        }
    }

    /// Ollama's native stream: one JSON object a line.
    pub fn ndjson(lines: &[Value]) -> Self {
        Self::Stream {
            content_type: "application/x-ndjson".to_owned(),
            lines: lines.iter().map(|line| format!("{line}\n")).collect(),
            every: Duration::ZERO,
            end: StreamEnd::Complete,
        }
    }

    /// A stream with its lines one every `every` (other replies are returned as they are).
    #[must_use]
    pub fn paced(self, every: Duration) -> Self {
        match self {
            Self::Stream {
                content_type,
                lines,
                end,
                ..
            } => Self::Stream {
                content_type,
                lines,
                every,
                end,
            },
            other => other,
        }
    }

    /// A normal answer.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Content(text.into())
    }

    /// One tool call with a generated id.
    pub fn tool_call(name: &str, arguments: Value) -> Self {
        Self::ToolCalls(vec![(
            "call_1".to_owned(),
            name.to_owned(),
            arguments.to_string(),
        )])
    }

    /// An error status with a JSON body.
    pub fn status(status: u16, body: Value) -> Self {
        Self::Json { status, body }
    }

    /// This reply after a delay.
    pub fn after(self, delay: Duration) -> Self {
        Self::Delayed(delay, Box::new(self))
    }
}

/// A chat completion body answering with `text`.
pub fn completion(text: &str) -> Value {
    json!({
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": "scripted",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    })
}

/// A chat completion body asking for tool calls `(id, name, arguments string)`.
pub fn tool_calls_completion(calls: &[(String, String, String)]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, arguments)| {
            json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
        })
        .collect();
    json!({
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": 0,
        "model": "scripted",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "tool_calls": calls},
                     "finish_reason": "tool_calls"}]
    })
}

/// One request as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    /// `POST`, `GET`...
    pub method: String,
    /// The request target, e.g. `/v1/chat/completions?x=1`.
    pub path: String,
    /// Headers in arrival order, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body bytes.
    pub body: Vec<u8>,
}

impl RecordedRequest {
    /// The first header of that (case-insensitive) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.as_str())
    }

    /// The body as JSON, if it is JSON.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }
}

/// Chooses the reply to a request.
pub trait Responder: Send + Sync + 'static {
    /// The reply to `request`.
    fn respond(&self, request: &RecordedRequest) -> Reply;
}

impl<F> Responder for F
where
    F: Fn(&RecordedRequest) -> Reply + Send + Sync + 'static,
{
    fn respond(&self, request: &RecordedRequest) -> Reply {
        self(request)
    }
}

/// Replies in script order; once the script is used up, every request gets a 500 saying so.
#[derive(Debug, Default)]
struct Script {
    replies: Mutex<VecDeque<Reply>>,
}

impl Responder for Script {
    fn respond(&self, _request: &RecordedRequest) -> Reply {
        self.replies
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .pop_front()
            .unwrap_or_else(|| {
                Reply::status(500, json!({"error": {"message": "scripted-llm: the script is used up", "type": "server_error"}}))
            })
    }
}

/// The path the server answers itself with its [`Stats`] as JSON (never passed to a responder).
pub const STATS_PATH: &str = "/__scripted/stats";

/// Counters for benchmarks: how much the server did and how long it took.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Requests answered (the stats path excluded).
    pub requests: u64,
    /// TCP connections accepted.
    pub connections: u64,
    /// Total time from a request's last byte read to its reply's last byte written, scripted
    /// delays excluded: the server's own work.
    pub service_nanos: u64,
    /// The longest such time.
    pub max_service_nanos: u64,
    /// Body bytes of the requests answered: what a client sent, for a bench that sends the same.
    pub request_body_bytes: u64,
}

impl Stats {
    /// The stats as JSON.
    pub fn to_json(self) -> Value {
        json!({
            "requests": self.requests,
            "connections": self.connections,
            "serviceNanos": self.service_nanos,
            "maxServiceNanos": self.max_service_nanos,
            "requestBodyBytes": self.request_body_bytes,
        })
    }

    /// Reads stats from their JSON.
    pub fn from_json(value: &Value) -> Option<Self> {
        Some(Self {
            requests: value["requests"].as_u64()?,
            connections: value["connections"].as_u64()?,
            service_nanos: value["serviceNanos"].as_u64()?,
            max_service_nanos: value["maxServiceNanos"].as_u64()?,
            request_body_bytes: value["requestBodyBytes"].as_u64()?,
        })
    }
}

#[derive(Default)]
struct Recorder {
    /// Whether request bodies are kept (tests) or only counted (benchmarks, long runs).
    keep_requests: bool,
    requests: Mutex<Vec<RecordedRequest>>,
    connections: AtomicUsize,
    answered: AtomicU64,
    service_nanos: AtomicU64,
    max_service_nanos: AtomicU64,
    request_body_bytes: AtomicU64,
}

impl Recorder {
    fn stats(&self) -> Stats {
        Stats {
            requests: self.answered.load(Ordering::Relaxed),
            connections: self.connections.load(Ordering::Relaxed) as u64,
            service_nanos: self.service_nanos.load(Ordering::Relaxed),
            max_service_nanos: self.max_service_nanos.load(Ordering::Relaxed),
            request_body_bytes: self.request_body_bytes.load(Ordering::Relaxed),
        }
    }
}

/// A running scripted server. Dropping it stops it.
pub struct ScriptedLlm {
    addr: SocketAddr,
    recorder: Arc<Recorder>,
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for ScriptedLlm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedLlm")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl ScriptedLlm {
    /// Starts a server answering from `script`, in order.
    pub async fn start(script: impl IntoIterator<Item = Reply>) -> std::io::Result<Self> {
        let script = Script {
            replies: Mutex::new(script.into_iter().collect()),
        };
        Self::start_with(script).await
    }

    /// Starts a server answering with `responder`.
    pub async fn start_with(responder: impl Responder) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        Self::serve_on(listener, responder, true)
    }

    /// Serves `responder` on a listener the caller bound. With `keep_requests` false, requests
    /// are only counted (see [`ScriptedLlm::stats`]), so memory stays flat over long runs.
    pub fn serve_on(
        listener: TcpListener,
        responder: impl Responder,
        keep_requests: bool,
    ) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        let recorder = Arc::new(Recorder {
            keep_requests,
            ..Recorder::default()
        });
        let stop = CancellationToken::new();
        let task = tokio::spawn(serve(
            listener,
            Arc::new(responder),
            Arc::clone(&recorder),
            stop.clone(),
        ));
        Ok(Self {
            addr,
            recorder,
            stop,
            task: Some(task),
        })
    }

    /// The socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The chat-completions URL, `http://127.0.0.1:PORT/v1/chat/completions`.
    pub fn url(&self) -> String {
        format!("http://{}/v1/chat/completions", self.addr)
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.recorder
            .requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// TCP connections accepted so far.
    pub fn connections(&self) -> usize {
        self.recorder.connections.load(Ordering::Relaxed)
    }

    /// Requests, connections and service time so far.
    pub fn stats(&self) -> Stats {
        self.recorder.stats()
    }

    /// Stops the server and waits for it.
    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for ScriptedLlm {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn serve(
    listener: TcpListener,
    responder: Arc<dyn Responder>,
    recorder: Arc<Recorder>,
    stop: CancellationToken,
) {
    let connections = tokio_util::task::TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let Ok((socket, _)) = accepted else { continue };
        recorder.connections.fetch_add(1, Ordering::Relaxed);
        let (responder, recorder, stop) = (Arc::clone(&responder), Arc::clone(&recorder), stop.clone());
        connections.spawn(async move {
            tokio::select! {
                () = stop.cancelled() => {}
                _ = connection(socket, responder, recorder) => {}
            }
        });
    }
    connections.close();
    connections.wait().await;
}

/// Serves requests on one keep-alive connection until the client closes or a reply closes it.
async fn connection(
    mut socket: TcpStream,
    responder: Arc<dyn Responder>,
    recorder: Arc<Recorder>,
) -> std::io::Result<()> {
    let _ = socket.set_nodelay(true);
    let mut buffer = Vec::with_capacity(4096);
    loop {
        let Some(request) = read_request(&mut socket, &mut buffer).await? else {
            return Ok(());
        };
        let read_at = Instant::now();
        let close_after = request
            .header("connection")
            .is_some_and(|value| value.eq_ignore_ascii_case("close"));
        if request.method == "GET" && request.path == STATS_PATH {
            write_json(&mut socket, 200, &recorder.stats().to_json()).await?;
            if close_after {
                return Ok(());
            }
            continue;
        }
        let reply = responder.respond(&request);
        recorder
            .request_body_bytes
            .fetch_add(request.body.len() as u64, Ordering::Relaxed);
        if recorder.keep_requests {
            recorder
                .requests
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(request);
        }
        let (keep_open, delayed) = write_reply(&mut socket, reply).await?;
        let nanos = u64::try_from(read_at.elapsed().saturating_sub(delayed).as_nanos()).unwrap_or(u64::MAX);
        recorder.answered.fetch_add(1, Ordering::Relaxed);
        recorder.service_nanos.fetch_add(nanos, Ordering::Relaxed);
        recorder.max_service_nanos.fetch_max(nanos, Ordering::Relaxed);
        if !keep_open || close_after {
            return Ok(());
        }
    }
}

/// Reads one request; `None` when the client closed cleanly between requests.
async fn read_request(
    socket: &mut TcpStream,
    buffer: &mut Vec<u8>,
) -> std::io::Result<Option<RecordedRequest>> {
    let invalid = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut parsed = httparse::Request::new(&mut headers);
        match parsed.parse(buffer) {
            Ok(httparse::Status::Complete(head_len)) => {
                let method = parsed.method.unwrap_or("").to_owned();
                let path = parsed.path.unwrap_or("").to_owned();
                let headers: Vec<(String, String)> = parsed
                    .headers
                    .iter()
                    .map(|h| {
                        (
                            h.name.to_ascii_lowercase(),
                            String::from_utf8_lossy(h.value).into_owned(),
                        )
                    })
                    .collect();
                let body_len = headers
                    .iter()
                    .find(|(name, _)| name == "content-length")
                    .and_then(|(_, value)| value.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                if body_len > MAX_BODY {
                    return Err(invalid("request body too large"));
                }
                buffer.drain(..head_len);
                while buffer.len() < body_len {
                    if read_more(socket, buffer).await? == 0 {
                        return Err(invalid("client closed mid-body"));
                    }
                }
                let body = buffer.drain(..body_len).collect();
                return Ok(Some(RecordedRequest {
                    method,
                    path,
                    headers,
                    body,
                }));
            }
            Ok(httparse::Status::Partial) => {
                if buffer.len() > MAX_HEAD {
                    return Err(invalid("request head too large"));
                }
                if read_more(socket, buffer).await? == 0 {
                    return if buffer.is_empty() {
                        Ok(None)
                    } else {
                        Err(invalid("client closed mid-head"))
                    };
                }
            }
            Err(_) => return Err(invalid("malformed request")),
        }
    }
}

async fn read_more(socket: &mut TcpStream, buffer: &mut Vec<u8>) -> std::io::Result<usize> {
    buffer.reserve(8192);
    socket.read_buf(buffer).await
}

/// Writes a reply; returns whether the connection stays open for another request, and how long
/// scripted delays and trickle pauses took.
async fn write_reply(socket: &mut TcpStream, reply: Reply) -> std::io::Result<(bool, Duration)> {
    let mut reply = reply;
    let mut delayed = Duration::ZERO;
    loop {
        match reply {
            Reply::Delayed(delay, inner) => {
                tokio::time::sleep(delay).await;
                delayed += delay;
                reply = *inner;
            }
            Reply::Content(text) => {
                return write_json(socket, 200, &completion(&text))
                    .await
                    .map(|()| (true, delayed));
            }
            Reply::ToolCalls(calls) => {
                return write_json(socket, 200, &tool_calls_completion(&calls))
                    .await
                    .map(|()| (true, delayed));
            }
            Reply::Json { status, body } => {
                return write_json(socket, status, &body).await.map(|()| (true, delayed));
            }
            Reply::Raw {
                status,
                content_type,
                body,
            } => {
                write_response(socket, status, &content_type, &body).await?;
                return Ok((true, delayed));
            }
            Reply::Custom {
                status,
                headers,
                body,
            } => {
                let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
                for (name, value) in &headers {
                    head.push_str(&format!("{name}: {value}\r\n"));
                }
                head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
                socket.write_all(head.as_bytes()).await?;
                socket.write_all(&body).await?;
                return Ok((true, delayed));
            }
            Reply::DropMidBody { declared, body } => {
                write_head(socket, 200, "application/json", declared).await?;
                socket.write_all(&body).await?;
                socket.shutdown().await?;
                return Ok((false, delayed));
            }
            Reply::Trickle { body, chunk, every } => {
                write_head(socket, 200, "application/json", body.len()).await?;
                for piece in body.chunks(chunk.max(1)) {
                    socket.write_all(piece).await?;
                    tokio::time::sleep(every).await;
                    delayed += every;
                }
                return Ok((true, delayed));
            }
            Reply::Stream {
                content_type,
                lines,
                every,
                end,
            } => {
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ntransfer-encoding: chunked\r\n\r\n"
                );
                socket.write_all(head.as_bytes()).await?;
                let chunk = |line: &str| format!("{:x}\r\n{line}\r\n", line.len());
                for line in &lines {
                    // A zero-duration sleep still waits for the timer's next tick (a
                    // millisecond): skipped, so an unpaced stream goes at full speed.
                    if !every.is_zero() {
                        tokio::time::sleep(every).await;
                        delayed += every;
                    }
                    let line = if line.contains(NOW_MICROS) {
                        let now = std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .unwrap_or_default();
                        Cow::Owned(line.replace(NOW_MICROS, &now.as_micros().to_string()))
                    } else {
                        Cow::Borrowed(line.as_str())
                    };
                    socket.write_all(chunk(&line).as_bytes()).await?;
                }
                match end {
                    StreamEnd::Complete => {
                        socket.write_all(b"0\r\n\r\n").await?;
                        return Ok((true, delayed));
                    }
                    StreamEnd::Cut => {
                        socket.shutdown().await?;
                        return Ok((false, delayed));
                    }
                    StreamEnd::Endless => {
                        let last = lines
                            .last()
                            .cloned()
                            .unwrap_or_else(|| ": keep-alive\n\n".to_owned());
                        let pause = every.max(Duration::from_millis(10));
                        loop {
                            tokio::time::sleep(pause).await;
                            socket.write_all(chunk(&last).as_bytes()).await?;
                        }
                    }
                }
            }
            Reply::Close => return Ok((false, delayed)),
            Reply::Reset => {
                // SO_LINGER of zero makes the close an RST rather than a FIN. With a zero
                // linger the close never blocks, which is what the deprecation warns about.
                #[expect(
                    deprecated,
                    reason = "a zero linger never blocks the close, the case the deprecation warns of"
                )]
                socket.set_linger(Some(Duration::ZERO))?;
                return Ok((false, delayed));
            }
            Reply::Hang => {
                std::future::pending::<()>().await;
                return Ok((false, delayed));
            }
        }
    }
}

async fn write_json(socket: &mut TcpStream, status: u16, body: &Value) -> std::io::Result<()> {
    write_response(socket, status, "application/json", body.to_string().as_bytes()).await
}

/// Writes head and body in one write: one segment on loopback, so the client reads the whole
/// reply at once instead of waking for the head and again for the body.
async fn write_response(
    socket: &mut TcpStream,
    status: u16,
    content_type: &str,
    body: &[u8],
) -> std::io::Result<()> {
    let mut message = head(status, content_type, body.len()).into_bytes();
    message.extend_from_slice(body);
    socket.write_all(&message).await
}

async fn write_head(
    socket: &mut TcpStream,
    status: u16,
    content_type: &str,
    len: usize,
) -> std::io::Result<()> {
    socket.write_all(head(status, content_type, len).as_bytes()).await
}

/// A reply's status line and headers, up to and including the blank line before the body.
fn head(status: u16, content_type: &str, len: usize) -> String {
    format!(
        "HTTP/1.1 {status} {}\r\ncontent-type: {content_type}\r\ncontent-length: {len}\r\n\r\n",
        reason(status)
    )
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}
