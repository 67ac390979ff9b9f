//! The HTTP surface's connections, one task each, served with hyper's HTTP/1 under a cap.
//!
//! At most `max_connections` hold a seat. A seat answering a request is kept until the
//! response's last byte is written (an MCP event stream keeps it for its whole life); a seat
//! doing nothing (a new connection that has not sent its request yet, a slowloris, a kept-alive
//! connection between requests) goes to a newcomer when every seat is taken, the oldest first,
//! so silent connections never shut anyone out for long. When every seat answers a request, a
//! few more connections ([`OVERFLOW_CONNECTIONS`]) are served the health checks and a quick 503
//! with `Retry-After` for anything else; past those, a connection is closed at once (after the
//! same 503 on plain HTTP). Together with the open-file check at start (`cli/serve.rs`), this keeps
//! file descriptors for the framed port and the health checks whatever the HTTP port receives.
//!
//! A request's head must arrive within the header timeout; hyper's timer runs from the
//! connection's start and again from the end of each response, so the same limit closes a
//! kept-alive connection left idle. Bodies have their own total deadline (`body.rs`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;
use tserver_proto::Transport;
use tserver_tls::rustls;

use crate::session::waiting::{Seat, WaitingRoom};
use plant::log_text::LogBudget;

/// Connections served past the cap while every seat answers a request: health checks are
/// answered, anything else gets 503.
pub const OVERFLOW_CONNECTIONS: usize = 16;

/// Seconds a refused client is told to wait.
const RETRY_AFTER_SECONDS: &str = "1";

/// The longest pause after repeated accept errors.
const MAX_ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

/// How long a connection may take to finish the response in progress at shutdown.
const SHUTDOWN_LIMIT: Duration = Duration::from_secs(5);

/// What a connection past every allowance is told (plain HTTP only) before it is closed.
const CLOSED_AT_ONCE: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n\
Connection: close\r\nContent-Type: text/plain\r\nContent-Length: 32\r\n\r\ntoo many connections; try again\n";

/// How the connections are bounded.
#[derive(Debug, Clone, Copy)]
pub(super) struct ConnectionLimits {
    /// Connections holding a seat at once.
    pub(super) max_connections: usize,
    /// A request's head must arrive within this time (also the longest idle keep-alive, and
    /// the TLS handshake's limit).
    pub(super) header_timeout: Duration,
}

/// What every connection task shares.
#[derive(Debug)]
struct Surface {
    app: Router,
    /// Served to overflow connections: the health checks and 503 for anything else.
    overflow: Router,
    tls: Option<Arc<rustls::ServerConfig>>,
    limits: ConnectionLimits,
    shutdown: CancellationToken,
}

/// How a connection was let in.
#[derive(Debug)]
enum Admission {
    Seat(Arc<Seat>),
    Overflow(#[expect(dead_code, reason = "held for the connection's life")] OwnedSemaphorePermit),
}

/// Serves `app` on `listener` until `shutdown`; overflow connections get `overflow`.
pub(super) async fn serve(
    listener: TcpListener,
    app: Router,
    overflow: Router,
    tls: Option<Arc<rustls::ServerConfig>>,
    limits: ConnectionLimits,
    shutdown: CancellationToken,
) {
    let seats = WaitingRoom::new(limits.max_connections);
    let overflow_permits = Arc::new(Semaphore::new(OVERFLOW_CONNECTIONS));
    let tracker = TaskTracker::new();
    let surface = Arc::new(Surface {
        app,
        overflow,
        tls,
        limits,
        shutdown,
    });
    // A connection flood must not fill the disk.
    let mut refusals_logged = LogBudget::new("refused HTTP connections");
    let mut backoff = Duration::from_millis(5);
    loop {
        let accepted = tokio::select! {
            () = surface.shutdown.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (socket, peer) = match accepted {
            Ok(accepted) => {
                backoff = Duration::from_millis(5);
                accepted
            }
            Err(error) => {
                // EMFILE, ECONNABORTED...: transient; pause and go on.
                tracing::warn!(%error, ?backoff, "HTTP accept failed");
                tokio::select! {
                    () = surface.shutdown.cancelled() => break,
                    () = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(MAX_ACCEPT_BACKOFF);
                continue;
            }
        };
        // Small JSON-RPC answers must not wait for Nagle's algorithm.
        if let Err(error) = socket.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
        if let Some(seat) = seats.enter() {
            let admission = Admission::Seat(Arc::new(seat));
            tracker.spawn(serve_connection(Arc::clone(&surface), socket, peer, admission));
            continue;
        }
        metrics::counter!(crate::telemetry::CONNECTIONS_REFUSED, "reason" => "http_connection_cap")
            .increment(1);
        if refusals_logged.allow() {
            tracing::warn!(
                %peer,
                limit = limits.max_connections,
                "HTTP connection past the cap (--http-max-connections): every connection is answering a request"
            );
        }
        match Arc::clone(&overflow_permits).try_acquire_owned() {
            Ok(permit) => {
                let admission = Admission::Overflow(permit);
                tracker.spawn(serve_connection(Arc::clone(&surface), socket, peer, admission));
            }
            Err(_) => {
                if surface.tls.is_none() {
                    // Whatever fits in the socket's buffer now; the close follows at once.
                    let _ = socket.try_write(CLOSED_AT_ONCE);
                }
                drop(socket);
            }
        }
    }
    drop(listener);
    tracker.close();
    // Each connection finishes its response within SHUTDOWN_LIMIT, then closes.
    let _ = tokio::time::timeout(SHUTDOWN_LIMIT + Duration::from_secs(1), tracker.wait()).await;
}

/// One connection, from its TLS handshake (if any) to its close.
async fn serve_connection(surface: Arc<Surface>, socket: TcpStream, peer: SocketAddr, admission: Admission) {
    let seat = match &admission {
        Admission::Seat(seat) => Some(Arc::clone(seat)),
        Admission::Overflow(_) => None,
    };
    let watched = seat.clone();
    let evicted = async move {
        match watched {
            Some(seat) => seat.evicted().await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(evicted);
    let header_timeout = surface.limits.header_timeout;
    let transport = match &surface.tls {
        None => Transport::Plain(socket),
        Some(config) => {
            let handshake = tokio::time::timeout(header_timeout, tserver_proto::accept(config, socket));
            tokio::select! {
                () = &mut evicted => return,
                () = surface.shutdown.cancelled() => return,
                done = handshake => match done {
                    Ok(Ok(transport)) => transport,
                    Ok(Err(error)) => {
                        tracing::debug!(%error, %peer, "HTTPS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "HTTPS handshake not finished in time");
                        return;
                    }
                },
            }
        }
    };
    let overflow = seat.is_none();
    let app = if overflow {
        surface.overflow.clone()
    } else {
        surface.app.clone()
    };
    let max_connections = surface.limits.max_connections;
    let service = hyper::service::service_fn(move |mut request: http::Request<Incoming>| {
        let app = app.clone();
        let seat = seat.clone();
        request.extensions_mut().insert(ConnectInfo(peer));
        async move {
            let occupied = match &seat {
                Some(seat) => match seat.occupy() {
                    Some(occupied) => Some(occupied),
                    // A newcomer took the seat as this request arrived.
                    None => return Ok::<_, Infallible>(at_the_cap(max_connections)),
                },
                None => None,
            };
            let response = app.oneshot(request).await?;
            // The seat stays taken until the response's last frame is written.
            Ok(response.map(|body| {
                Body::new(body.map_frame(move |frame| {
                    let _in_progress = &occupied;
                    frame
                }))
            }))
        }
    });
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(!overflow);
    // Upgrades on: `/ws` hands the connection over to a WebSocket session (which then holds a
    // slot of the display server, and this connection's seat is free again).
    let connection = http
        .serve_connection(TokioIo::new(transport), service)
        .with_upgrades();
    tokio::pin!(connection);
    tokio::select! {
        done = connection.as_mut() => {
            if let Err(error) = done {
                tracing::debug!(%error, %peer, "HTTP connection ended");
            }
        }
        () = &mut evicted => tracing::debug!(%peer, "HTTP connection closed: a newcomer took its idle seat"),
        () = surface.shutdown.cancelled() => {
            connection.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(SHUTDOWN_LIMIT, connection).await;
        }
    }
    drop(admission);
}

/// 503 for a request past the cap; the connection closes after it.
pub(super) fn at_the_cap(max_connections: usize) -> Response {
    let mut response = (
        StatusCode::SERVICE_UNAVAILABLE,
        format!(
            "too many HTTP connections (limit {max_connections}, --http-max-connections); try again shortly"
        ),
    )
        .into_response();
    let headers = response.headers_mut();
    headers.insert(header::RETRY_AFTER, HeaderValue::from_static(RETRY_AFTER_SECONDS));
    headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}
