//! `Shared`: what every connection of one server shares (the runtime, the limits, the login
//! verifier, the waiting room).

use std::sync::Arc;

use tserver_proto::Transport;

use super::connection::Connection;
use super::waiting::WaitingRoom;
use crate::ServerConfig;
use crate::auth::Authenticator;
use plant::Runtime;
use plant::log_text::LogBudget;

/// What every connection of one server shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) runtime: Runtime,
    pub(crate) config: ServerConfig,
    pub(crate) auth: Authenticator,
    /// One permit per connection slot (TCP or WebSocket); a connection holds its permit until
    /// it closes.
    pub(crate) connections: Arc<tokio::sync::Semaphore>,
    /// The connections not yet logged in, so such connections never take every slot.
    pub(crate) waiting: Arc<WaitingRoom>,
    /// The audit rows of refusals each user and each client address may still add.
    pub(crate) audit_allowances: Arc<crate::calls::audit_bounds::SharedAllowances>,
    /// The slots WebSockets may hold, so they never take those TCP display clients need.
    pub(crate) websockets: Arc<super::websocket_quota::WebSocketQuota>,
    /// The log lines about PROXY headers refused (a trusted proxy without one, a header from
    /// an untrusted address), all together: a flood of them must not fill the disk.
    pub(super) proxy_refusals_logged: std::sync::Mutex<LogBudget>,
}

impl Shared {
    /// Whether a line about a refused PROXY header may be logged now.
    pub(crate) fn proxy_refusal_may_log(&self) -> bool {
        self.proxy_refusals_logged
            .lock()
            .map_or(true, |mut budget| budget.allow())
    }

    /// A new connection over `transport`, reading only frames a client that has not logged
    /// in may send.
    pub(super) fn connection(&self, transport: Transport) -> Connection {
        let mut connection = Connection::new(transport, self.config.max_frame, self.config.write_timeout);
        connection.set_max_frame(self.config.login_frame_limit());
        connection
    }
}
