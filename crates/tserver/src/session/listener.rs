//! `Server` and its accept loop (`Listener`): connection cap, per-connection tasks and
//! graceful shutdown.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;
use tserver_proto::Transport;
use tserver_proto::v1::ErrorCode;
use tserver_tls::rustls;

use super::machine::{Session, Slots};
use super::shared::Shared;
use super::waiting::WaitingRoom;
use super::websocket::WebSocketSessions;
use crate::ServerConfig;
use crate::auth::{Authenticator, LoginError};
use crate::calls::context::ConnectionContext;
use crate::calls::to_proto::{REPLY_FRAME_OVERHEAD, error_frame};
use crate::calls::{CALL_KINDS, CallState};
use crate::proxy;
use plant::Runtime;
use plant::log_text::LogBudget;

/// How long the refusal sent to a connection past the cap may take.
const REFUSAL_WRITE_LIMIT: Duration = Duration::from_secs(1);

/// Refusals being written at once; past it a refused connection is closed without one, so a
/// flood past the cap holds a bounded number of file descriptors (part of the reserve the
/// open-file check at start keeps).
pub(crate) const REFUSALS_AT_ONCE: usize = 64;

/// The longest pause after repeated accept errors (for example when out of file descriptors).
const MAX_ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The login verifier could not be prepared.
    #[error("could not prepare the login verifier: {0}")]
    Login(String),
}

/// The TCP front of a [`Runtime`]: serves display clients on a listener the caller bound.
#[derive(Debug)]
pub struct Server {
    shared: Arc<Shared>,
    accepting: Accepting,
    /// Set when clients must speak TLS.
    tls: Option<Arc<rustls::ServerConfig>>,
    /// What the listener and the WebSocket sessions share: the connection cap, the tasks to
    /// wait for at shutdown, the drain and the hard stop.
    sessions: WebSocketSessions,
}

/// Whether a [`Server`] accepts connections now: from the start of its accept loop until
/// shutdown begins (what `/readyz` reports). Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Accepting(Arc<AtomicBool>);

impl Accepting {
    /// Whether the listener accepts connections now.
    pub fn is_accepting(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    fn set(&self, accepting: bool) {
        self.0.store(accepting, Ordering::Release);
    }
}

impl Server {
    /// A server for `runtime` with `config`'s limits.
    pub fn new(runtime: Runtime, config: ServerConfig) -> Result<Self, ServerError> {
        if config.metrics {
            crate::telemetry::recorder();
            crate::telemetry::count_calls(&CALL_KINDS);
        }
        // A chat reply's envelope must fit the frame it is sent in, whatever the model said.
        runtime
            .local_ai()
            .limit_envelope_bytes(config.max_frame - REPLY_FRAME_OVERHEAD);
        runtime.local_ai().set_transcript_budget(config.transcripts);
        let auth = Authenticator::new(
            Arc::clone(runtime.store()),
            config.max_concurrent_logins,
            config.login_throttle,
        )
        .map_err(|error: LoginError| ServerError::Login(error.to_string()))?;
        let shared = Arc::new(Shared {
            runtime,
            waiting: WaitingRoom::new(config.max_unauthenticated),
            connections: Arc::new(Semaphore::new(config.max_connections)),
            websockets: super::websocket_quota::WebSocketQuota::new(config.websocket_limits()),
            audit_allowances: Arc::default(),
            config,
            auth,
            proxy_refusals_logged: std::sync::Mutex::new(LogBudget::new("refused PROXY headers")),
        });
        Ok(Self {
            sessions: WebSocketSessions::new(Arc::clone(&shared)),
            shared,
            accepting: Accepting::default(),
            tls: None,
        })
    }

    /// Whether this server accepts connections, as it changes.
    pub fn accepting(&self) -> Accepting {
        self.accepting.clone()
    }

    /// Serves TLS only (see [`tserver_tls::server_config`] to load a certificate and key).
    /// Each client's handshake must finish within the login deadline; a client that does not
    /// speak TLS is closed without a reply.
    #[must_use]
    pub fn with_tls(mut self, config: Arc<rustls::ServerConfig>) -> Self {
        self.tls = Some(config);
        self
    }

    /// The door through which the HTTP surface lets WebSockets into this server's sessions:
    /// same connection cap, waiting room, logins and shutdown as the TCP listener.
    pub fn websocket_sessions(&self) -> WebSocketSessions {
        self.sessions.clone()
    }

    /// Serves until `shutdown` is cancelled, then stops accepting, lets calls in flight finish
    /// within the grace period, closes every connection and returns.
    #[crate::compiled_once]
    pub async fn run(self, listener: TcpListener, shutdown: CancellationToken) {
        // A serving node answers the settings from a copy its writers revoke first, without a
        // query per call (PostgreSQL; a file's check needs none anyway).
        self.shared.runtime.store().hold_settings_lease();
        let listener = Listener {
            listener,
            refusals: Arc::new(Semaphore::new(REFUSALS_AT_ONCE)),
            shared: self.shared,
            tls: self.tls,
            tracker: self.sessions.tracker.clone(),
            shutdown,
            draining: self.sessions.draining.clone(),
            hard_stop: self.sessions.hard_stop.clone(),
            refusals_logged: std::sync::Mutex::new(LogBudget::new("refused connections")),
            accepting: self.accepting,
        };
        listener.run().await;
    }
}

/// The accept loop.
struct Listener {
    listener: TcpListener,
    shared: Arc<Shared>,
    tls: Option<Arc<rustls::ServerConfig>>,
    /// One permit per refusal being written.
    refusals: Arc<Semaphore>,
    /// Every connection task (and the calls they spawn), to wait for at shutdown.
    tracker: TaskTracker,
    shutdown: CancellationToken,
    /// Cancelled when the accept loop stops: every session (TCP or WebSocket) drains.
    draining: CancellationToken,
    /// Cancelled when the grace period ends.
    hard_stop: CancellationToken,
    /// The log lines refused connections may cause: a connection flood must not fill the disk.
    refusals_logged: std::sync::Mutex<LogBudget>,
    /// Set while the accept loop runs.
    accepting: Accepting,
}

impl Listener {
    async fn run(self) {
        if let Ok(address) = self.listener.local_addr() {
            tracing::info!(%address, "listening");
        }
        // Admin changes to users reach the sessions they hold (see `Authenticator::watch_users`).
        let watcher = {
            let shared = Arc::clone(&self.shared);
            let stop = self.hard_stop.clone();
            tokio::spawn(async move { shared.auth.watch_users(stop).await })
        };
        let mut backoff = Duration::from_millis(5);
        self.accepting.set(true);
        loop {
            let accepted = tokio::select! {
                () = self.shutdown.cancelled() => break,
                accepted = self.listener.accept() => accepted,
            };
            match accepted {
                Ok((socket, peer)) => {
                    backoff = Duration::from_millis(5);
                    self.admit(socket, peer);
                }
                Err(error) => {
                    // Accept errors (EMFILE, ECONNABORTED...) are transient: pause and go on.
                    tracing::warn!(%error, ?backoff, "accept failed");
                    tokio::select! {
                        () = self.shutdown.cancelled() => break,
                        () = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(MAX_ACCEPT_BACKOFF);
                }
            }
        }
        self.accepting.set(false);
        self.draining.cancel();
        drop(self.listener);
        tracing::info!(grace = ?self.shared.config.shutdown_grace, "shutting down: draining calls in flight");
        self.tracker.close();
        if tokio::time::timeout(self.shared.config.shutdown_grace, self.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!("grace period over: closing connections with calls still in flight");
            self.hard_stop.cancel();
            self.tracker.wait().await;
        }
        self.hard_stop.cancel();
        let _ = watcher.await;
        tracing::info!("shut down");
    }

    /// Whether a refusal may be logged now (see `refusals_logged`).
    fn refusal_may_log(&self) -> bool {
        self.refusals_logged
            .lock()
            .map_or(true, |mut budget| budget.allow())
    }

    /// Tells `socket` why it is refused and closes it; at once, without a reason, when
    /// [`REFUSALS_AT_ONCE`] are being written already.
    fn refuse(&self, socket: TcpStream, message: String) {
        if let Ok(permit) = Arc::clone(&self.refusals).try_acquire_owned() {
            let shared = Arc::clone(&self.shared);
            let tls = self.tls.clone();
            self.tracker.spawn(async move {
                refuse(shared, tls, socket, message).await;
                drop(permit);
            });
        }
    }

    fn admit(&self, socket: TcpStream, peer: std::net::SocketAddr) {
        let config = &self.shared.config;
        let Ok(permit) = Arc::clone(&self.shared.connections).try_acquire_owned() else {
            metrics::counter!(crate::telemetry::CONNECTIONS_REFUSED, "reason" => "connection_cap")
                .increment(1);
            if self.refusal_may_log() {
                tracing::warn!(%peer, limit = config.max_connections, "connection refused: at the connection cap");
            }
            let message = format!(
                "too many connections (limit {}); try again later",
                config.max_connections
            );
            self.refuse(socket, message);
            return;
        };
        let Some(seat) = self.shared.waiting.enter() else {
            metrics::counter!(crate::telemetry::CONNECTIONS_REFUSED, "reason" => "login_slots").increment(1);
            if self.refusal_may_log() {
                tracing::warn!(%peer, limit = config.max_unauthenticated, "connection refused: every connection waiting to log in is saying Hello");
            }
            let message = format!(
                "too many connections waiting to log in (limit {}); try again later",
                config.max_unauthenticated
            );
            self.refuse(socket, message);
            return;
        };
        let shared = Arc::clone(&self.shared);
        let tls = self.tls.clone();
        let shutdown = self.draining.clone();
        let hard_stop = self.hard_stop.clone();
        let slots = Slots {
            connection: permit,
            seat,
            websocket: None,
            open: crate::telemetry::OpenConnection::new(),
        };
        let tracker = self.tracker.clone();
        // Opening the connection (a proxy's header, the TLS handshake) is one task and the
        // session another: a task's future keeps the largest state it ever awaits and every
        // value it captured for the task's life, and the opening's would more than double what
        // each idle connection holds.
        let open_then_serve = async move {
            let login_timeout = shared.config.login_timeout;
            let mut socket = socket;
            // A trusted proxy names its client first; the header counts against the login
            // deadline, like a TLS handshake.
            let peer = if shared.config.trusted_proxies.contains(peer.ip()) {
                let header = tokio::time::timeout(login_timeout, proxy::read_header(&mut socket));
                let header = tokio::select! {
                    () = hard_stop.cancelled() => return,
                    header = header => header,
                };
                match header {
                    Ok(Ok(client)) => client.unwrap_or(peer),
                    Ok(Err(error)) => {
                        if shared.proxy_refusal_may_log() {
                            tracing::warn!(proxy = %peer, %error, "connection from a trusted proxy closed");
                        }
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(proxy = %peer, "no PROXY protocol header within the login deadline");
                        return;
                    }
                }
            } else {
                peer
            };
            let context = ConnectionContext::new(peer, Arc::clone(&shared.audit_allowances));
            let span = tracing::info_span!("conn", guid = %context.guid, %peer);
            let opened = async {
                tokio::select! {
                    () = hard_stop.cancelled() => None,
                    transport = open(tls.as_ref(), socket, login_timeout) => transport,
                }
            };
            let Some(transport) = opened.instrument(span.clone()).await else {
                return;
            };
            let connection = shared.connection(transport);
            let calls = CallState::new(context, shared.config.max_frame, &shared.runtime);
            let session = Session::new(shared, connection, calls, shutdown, &hard_stop, slots);
            tracker.spawn(session.run().instrument(span));
        };
        self.tracker.spawn(open_then_serve);
    }
}

/// The connection's stream: the socket as it is, or after a TLS handshake that must finish
/// within `limit`. `None` when the handshake failed (logged at debug: port scanners and
/// plain-text clients are routine, not news).
async fn open(
    tls: Option<&Arc<rustls::ServerConfig>>,
    socket: TcpStream,
    limit: Duration,
) -> Option<Transport> {
    let Some(tls) = tls else {
        return Some(Transport::Plain(socket));
    };
    match tokio::time::timeout(limit, tserver_proto::accept(tls, socket)).await {
        Ok(Ok(transport)) => Some(transport),
        Ok(Err(error)) => {
            tracing::debug!(%error, "TLS handshake failed");
            None
        }
        Err(_) => {
            tracing::debug!(?limit, "TLS handshake not finished in time");
            None
        }
    }
}

/// Tells a connection past a cap why it is closed, then closes it.
async fn refuse(
    shared: Arc<Shared>,
    tls: Option<Arc<rustls::ServerConfig>>,
    socket: TcpStream,
    message: String,
) {
    let Some(transport) = open(tls.as_ref(), socket, REFUSAL_WRITE_LIMIT).await else {
        return;
    };
    let mut connection = shared.connection(transport);
    connection
        .send_final(error_frame(0, ErrorCode::Busy, message), REFUSAL_WRITE_LIMIT)
        .await;
}
