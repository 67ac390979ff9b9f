//! The cap on open MCP sessions: a request that would open one (a POST without
//! `Mcp-Session-Id`) past the cap is answered 503 with `Retry-After`, before rmcp creates it.
//! Sessions close when their client deletes them or after their idle time (rmcp removes them
//! from its map then), which is what makes room again.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, Method, StatusCode, header};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

/// The header naming an existing session.
const SESSION_HEADER: &str = "mcp-session-id";

/// Seconds a refused client is told to wait.
const RETRY_AFTER_SECONDS: &str = "5";

/// Open sessions against their cap.
#[derive(Debug)]
pub(super) struct SessionCap {
    sessions: Arc<LocalSessionManager>,
    max: usize,
    /// Sessions being opened now (admitted, not yet in rmcp's map).
    opening: AtomicUsize,
    /// Makes "count, then reserve" one step for concurrent openers.
    admitting: tokio::sync::Mutex<()>,
}

impl SessionCap {
    pub(super) fn new(sessions: Arc<LocalSessionManager>, max: usize) -> Self {
        Self {
            sessions,
            max,
            opening: AtomicUsize::new(0),
            admitting: tokio::sync::Mutex::new(()),
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
}

/// Room for one session being opened; given back once the request is answered (by then the
/// session, if any, is in rmcp's map and counts there).
struct Reservation(Arc<SessionCap>);

impl Drop for Reservation {
    fn drop(&mut self) {
        self.0.opening.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Refuses a request that would open a session past the cap.
pub(super) async fn cap_sessions(
    State(cap): State<Arc<SessionCap>>,
    request: Request,
    next: Next,
) -> Response {
    let opens_session = request.method() == Method::POST && !request.headers().contains_key(SESSION_HEADER);
    if !opens_session {
        return next.run(request).await;
    }
    let Some(_reservation) = cap.reserve().await else {
        tracing::debug!(max = cap.max, "MCP session refused: the cap is reached");
        let mut response = (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "{} MCP sessions are open, the most this server keeps (--http-max-sessions); close \
                 one (DELETE /mcp) or wait for an idle one to end",
                cap.max
            ),
        )
            .into_response();
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static(RETRY_AFTER_SECONDS));
        return response;
    };
    next.run(request).await
}
