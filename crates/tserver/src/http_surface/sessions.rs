//! MCP sessions in front of rmcp: the cap on open sessions (a request that would open one past
//! the cap is answered 503 with `Retry-After`, before rmcp creates it), each session's owner
//! (the token that opened it; any other token, or an id never handed out, gets the same 404 an
//! unknown session gets, so nobody learns that a session exists), and the JSON-RPC request ids
//! in flight in each session (a request reusing one is answered with an error at once: rmcp
//! routes answers by id, so a second request with the id left the first unanswered).
//! Sessions close when their client deletes them or after their idle time (rmcp removes them
//! from its map then), which is what makes room again.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use http::{HeaderValue, Method, StatusCode, header};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::{Value, json};

use plant::log_text::LogBudget;
use store::TokenUser;

/// The header naming an existing session.
pub(super) const SESSION_HEADER: &str = "mcp-session-id";

/// Seconds a refused client is told to wait.
const RETRY_AFTER_SECONDS: &str = "5";

/// What a request of a session this server does not know is told (in a JSON-RPC error, for
/// the clients that show it rather than start again by themselves).
const SESSION_NOT_FOUND: &str = "this MCP session is not known here: it was closed, it sat idle past its time, \
                                 or the server that held it went away; initialize a new session";

/// JSON-RPC's "invalid request" code, for a request id already in flight.
const INVALID_REQUEST: i64 = -32600;

/// One open session as tserver knows it.
#[derive(Debug)]
struct Owned {
    /// The id of the token that opened it.
    token_id: String,
    /// The JSON-RPC ids (as JSON text, so `1` and `"1"` differ) of its requests being answered.
    in_flight: HashSet<String>,
}

/// Open sessions: their cap, owners and requests in flight.
#[derive(Debug)]
pub(super) struct Sessions {
    sessions: Arc<LocalSessionManager>,
    max: usize,
    /// Sessions being opened now (admitted, not yet in rmcp's map).
    opening: AtomicUsize,
    /// Makes "count, then reserve" one step for concurrent openers.
    admitting: tokio::sync::Mutex<()>,
    /// Each session handed out, by id. Entries of sessions rmcp has ended (deleted, idle) are
    /// dropped when the next one opens, so there are never more than the cap and one; until
    /// then their owner's requests reach rmcp, which answers them as ended.
    owned: Mutex<HashMap<String, Owned>>,
    /// Warnings about MCP requests rmcp failed (its own log lines are off, see the log filter).
    warnings: Mutex<LogBudget>,
}

impl Sessions {
    pub(super) fn new(sessions: Arc<LocalSessionManager>, max: usize) -> Self {
        Self {
            sessions,
            max,
            opening: AtomicUsize::new(0),
            admitting: tokio::sync::Mutex::new(()),
            owned: Mutex::default(),
            warnings: Mutex::new(LogBudget::new("failed MCP requests")),
        }
    }

    /// Sessions open now.
    pub(super) async fn open(&self) -> usize {
        self.sessions.sessions.read().await.len()
    }

    /// Reserves room for one more session, or `None` at the cap.
    async fn reserve(self: &Arc<Self>) -> Option<Reservation> {
        let _admitting = self.admitting.lock().await;
        let open = self.open().await;
        if open.saturating_add(self.opening.load(Ordering::Acquire)) >= self.max {
            return None;
        }
        self.opening.fetch_add(1, Ordering::AcqRel);
        Some(Reservation(Arc::clone(self)))
    }

    fn owned(&self) -> std::sync::MutexGuard<'_, HashMap<String, Owned>> {
        self.owned.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records `session` as opened by `token_id`, forgetting sessions rmcp has ended.
    async fn opened(&self, session: &str, token_id: &str) {
        let live: HashSet<String> = self
            .sessions
            .sessions
            .read()
            .await
            .keys()
            .map(|id| id.to_string())
            .collect();
        let mut owned = self.owned();
        owned.retain(|id, _| live.contains(id));
        owned.insert(
            session.to_owned(),
            Owned {
                token_id: token_id.to_owned(),
                in_flight: HashSet::new(),
            },
        );
    }

    fn warn(&self, status: StatusCode) {
        let allowed = self
            .warnings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .allow();
        if allowed {
            tracing::warn!(%status, "an MCP request failed in the MCP server");
        }
    }
}

/// Room for one session being opened; given back once the request is answered (by then the
/// session, if any, is in rmcp's map and counts there).
struct Reservation(Arc<Sessions>);

impl Drop for Reservation {
    fn drop(&mut self) {
        self.0.opening.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A JSON-RPC request id in flight in a session, until the answer's last byte is sent (or the
/// client goes away).
struct InFlight {
    sessions: Arc<Sessions>,
    session: String,
    id: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(owned) = self.sessions.owned().get_mut(&self.session) {
            owned.in_flight.remove(&self.id);
        }
    }
}

/// Applies the session rules to an MCP request (after the token check and the body read).
pub(super) async fn guard_sessions(
    State(sessions): State<Arc<Sessions>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(token_id) = request
        .extensions()
        .get::<TokenUser>()
        .map(|user| user.token_id.clone())
    else {
        // The bearer check runs first and always leaves the user: no user, no MCP.
        return StatusCode::UNAUTHORIZED.into_response();
    };
    let session = request
        .headers()
        .get(SESSION_HEADER)
        .map(|session| session.to_str().map(str::to_owned));
    let response = match session {
        None if request.method() == Method::POST => open_session(&sessions, &token_id, request, next).await,
        None => next.run(request).await,
        Some(Ok(session)) => in_session(&sessions, &token_id, session, request, next).await,
        // A session id that is not text was never handed out.
        Some(Err(_)) => return session_not_found(None),
    };
    if response.status().is_server_error() && response.status() != StatusCode::SERVICE_UNAVAILABLE {
        sessions.warn(response.status());
    }
    response
}

/// A request that opens a session (initialize): within the cap, and the session is the token's.
async fn open_session(sessions: &Arc<Sessions>, token_id: &str, request: Request, next: Next) -> Response {
    let Some(_reservation) = sessions.reserve().await else {
        tracing::debug!(max = sessions.max, "MCP session refused: the cap is reached");
        let mut response = (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "{} MCP sessions are open, the most this server keeps (--http-max-sessions); close \
                 one (DELETE /mcp) or wait for an idle one to end",
                sessions.max
            ),
        )
            .into_response();
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static(RETRY_AFTER_SECONDS));
        return response;
    };
    let response = next.run(request).await;
    // Recorded before the client can read the id, so its next request finds it.
    if let Some(session) = response
        .headers()
        .get(SESSION_HEADER)
        .and_then(|value| value.to_str().ok())
    {
        sessions.opened(session, token_id).await;
    }
    response
}

/// A request in an existing session: only its owner's token gets past; a request id in flight
/// is not taken twice.
async fn in_session(
    sessions: &Arc<Sessions>,
    token_id: &str,
    session: String,
    request: Request,
    next: Next,
) -> Response {
    // A POST's body was read whole (and bounded) by the layer before this one; its id goes
    // into any error answered here.
    let (request, id) = if request.method() == Method::POST {
        let (parts, body) = request.into_parts();
        let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
            return StatusCode::BAD_REQUEST.into_response();
        };
        let id = request_id(&bytes);
        (Request::from_parts(parts, Body::from(bytes)), id)
    } else {
        (request, None)
    };
    let owner_matches = sessions
        .owned()
        .get(&session)
        .is_some_and(|owned| owned.token_id == token_id);
    if !owner_matches {
        tracing::debug!("MCP request refused: a session this token did not open, or none");
        return session_not_found(id);
    }
    let in_flight = match &id {
        Some(id) => {
            let key = id.to_string();
            let taken = sessions
                .owned()
                .get_mut(&session)
                .is_some_and(|owned| !owned.in_flight.insert(key.clone()));
            if taken {
                return id_in_use(id.clone());
            }
            Some(InFlight {
                sessions: Arc::clone(sessions),
                session: session.clone(),
                id: key,
            })
        }
        None => None,
    };
    let response = next.run(request).await;
    // A session rmcp has ended (closed, idle) reads as one never handed out.
    if response.status() == StatusCode::NOT_FOUND {
        return session_not_found(id);
    }
    match in_flight {
        // The id stays taken until the answer's stream ends.
        Some(in_flight) => {
            let (parts, body) = response.into_parts();
            let body = body.into_data_stream().map(move |chunk| {
                let _held = &in_flight;
                chunk
            });
            Response::from_parts(parts, Body::from_stream(body))
        }
        None => response,
    }
}

/// The id of a JSON-RPC request (a message with a method and an id; notifications, answers
/// and anything unreadable have none, and rmcp judges those).
fn request_id(body: &[u8]) -> Option<Value> {
    let Ok(Value::Object(mut message)) = serde_json::from_slice::<Value>(body) else {
        return None;
    };
    if !message.contains_key("method") {
        return None;
    }
    message.remove("id").filter(|id| !id.is_null())
}

/// The answer for a session this server does not know (never handed out, another token's,
/// ended, or held by a node that went away): 404, which tells an MCP client to initialize
/// again (rmcp's client does so by itself), with a JSON-RPC error saying why for the clients
/// that show it instead.
fn session_not_found(id: Option<Value>) -> Response {
    invalid_request(StatusCode::NOT_FOUND, id, SESSION_NOT_FOUND)
}

/// The JSON-RPC error for a request whose id is already in flight in its session.
fn id_in_use(id: Value) -> Response {
    let message = "the request id is already in use by a request of this session still being \
                   answered; use a new id for each request";
    invalid_request(StatusCode::OK, Some(id), message)
}

/// A JSON-RPC "invalid request" error answering request `id`, with HTTP `status`.
fn invalid_request(status: StatusCode, id: Option<Value>, message: &str) -> Response {
    let body = json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": INVALID_REQUEST, "message": message},
    });
    (
        status,
        [(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))],
        body.to_string(),
    )
        .into_response()
}
