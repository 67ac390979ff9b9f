//! `WebSocketSessions`: the door through which the HTTP surface lets WebSockets into the same
//! sessions the TCP listener serves: a slot under the same connection cap, a seat in the same
//! waiting room, one server-made GUID each, the same drain at shutdown and the same hard stop.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::connection::Connection;
use super::machine::{Session, Slots};
use super::shared::Shared;
use super::websocket_link::BrowserSocket;
use super::websocket_quota::WebSocketQuotaRefusal;
use crate::auth::{Authenticator, BrowserToken};
use crate::calls::CallState;
use crate::calls::context::ConnectionContext;
use crate::telemetry::OpenConnection;

/// Lets WebSockets into a [`Server`](crate::Server)'s sessions. Cheap to clone.
#[derive(Debug, Clone)]
pub struct WebSocketSessions {
    pub(super) shared: Arc<Shared>,
    /// Every session task of the server (TCP and WebSocket), waited for at shutdown.
    pub(super) tracker: TaskTracker,
    /// Cancelled when the server stops accepting: sessions finish their calls and close.
    pub(super) draining: CancellationToken,
    /// Cancelled when the grace period ends.
    pub(super) hard_stop: CancellationToken,
}

/// Why a WebSocket is not let in (answered before the upgrade, with 503).
#[derive(Debug, thiserror::Error)]
pub enum WebSocketRefusal {
    /// The server is shutting down.
    #[error("the server is shutting down")]
    ShuttingDown,
    /// Every connection slot is taken.
    #[error("too many connections (limit {0}); try again later")]
    ConnectionCap(usize),
    /// Every seat for connections not logged in is taken by one saying Hello.
    #[error("too many connections waiting to log in (limit {0}); try again later")]
    LoginSlots(usize),
    /// WebSockets, or those of this address, hold their share of the slots.
    #[error(transparent)]
    Quota(#[from] WebSocketQuotaRefusal),
}

/// A WebSocket's slot and seat, reserved before its upgrade.
#[derive(Debug)]
pub struct WebSocketAdmission {
    sessions: WebSocketSessions,
    slots: Slots,
}

impl WebSocketSessions {
    pub(super) fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            tracker: TaskTracker::new(),
            draining: CancellationToken::new(),
            hard_stop: CancellationToken::new(),
        }
    }

    /// The largest message a WebSocket may carry: the server's frame limit.
    pub fn max_message(&self) -> usize {
        self.shared.config.max_frame
    }

    /// The login verifier the sessions use, for the browser login.
    pub(crate) fn auth(&self) -> &Authenticator {
        &self.shared.auth
    }

    /// Takes a place among the WebSockets (of `client`'s address), a connection slot and a
    /// waiting-room seat for one WebSocket, or says why not.
    pub fn admit(&self, client: std::net::IpAddr) -> Result<WebSocketAdmission, WebSocketRefusal> {
        if self.draining.is_cancelled() {
            return Err(WebSocketRefusal::ShuttingDown);
        }
        let websocket = self.shared.websockets.admit(client).inspect_err(|_| {
            metrics::counter!(crate::telemetry::CONNECTIONS_REFUSED, "reason" => "websocket_share")
                .increment(1);
        })?;
        let config = &self.shared.config;
        let Ok(connection) = Arc::clone(&self.shared.connections).try_acquire_owned() else {
            metrics::counter!(crate::telemetry::CONNECTIONS_REFUSED, "reason" => "connection_cap")
                .increment(1);
            return Err(WebSocketRefusal::ConnectionCap(config.max_connections));
        };
        let Some(seat) = self.shared.waiting.enter() else {
            metrics::counter!(crate::telemetry::CONNECTIONS_REFUSED, "reason" => "login_slots").increment(1);
            return Err(WebSocketRefusal::LoginSlots(config.max_unauthenticated));
        };
        Ok(WebSocketAdmission {
            sessions: self.clone(),
            slots: Slots {
                connection,
                seat,
                websocket: Some(websocket),
                open: OpenConnection::new(),
            },
        })
    }
}

impl WebSocketAdmission {
    /// Serves `socket` as one session of the client at `peer` until it closes; `browser` is
    /// the browser login its cookie carried, which a Hello without a user name logs in.
    pub(crate) fn serve(
        self,
        socket: BrowserSocket,
        peer: SocketAddr,
        browser: Option<BrowserToken>,
    ) -> impl Future<Output = ()> + Send + 'static {
        let Self { sessions, slots } = self;
        let WebSocketSessions {
            shared,
            tracker,
            draining,
            hard_stop,
        } = sessions;
        let mut context = ConnectionContext::new(peer, Arc::clone(&shared.audit_allowances));
        context.browser = browser;
        let span = tracing::info_span!("conn", guid = %context.guid, %peer, transport = "websocket");
        let config = &shared.config;
        let mut connection = Connection::websocket(socket, config.max_frame, config.write_timeout);
        connection.set_max_frame(config.login_frame_limit());
        let calls = CallState::new(context, config.max_frame, &shared.runtime);
        // The session's own future is the task: a block around it would keep what it captured
        // beside the session for the connection's life.
        let session = Session::new(shared, connection, calls, draining, &hard_stop, slots);
        tracker.track_future(session.run().instrument(span))
    }
}
