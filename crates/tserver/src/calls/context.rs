//! The per-connection context every call receives: who is on the other end.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use uuid::Uuid;

use tserver_proto::v1::ErrorCode;

use super::to_proto::CallError;
use crate::auth::{BrowserToken, Login};

/// Who is on the other end of one connection.
#[derive(Debug, Clone)]
pub(crate) struct ConnectionContext {
    /// Made by the server when the connection is accepted (v4), never taken from the client:
    /// the spec's `ClientInfo.Guid`, and the key of the chat transcript.
    pub(crate) guid: Uuid,
    /// The client's address, for logs.
    pub(crate) peer: SocketAddr,
    /// The login now (the user, and the credentials it was checked against); `None` before
    /// Hello and after Logout.
    pub(crate) login: Option<Login>,
    /// The browser login a WebSocket's cookie carried, which its Hello without a user name
    /// logs in (checked again at that Hello); `None` on TCP.
    pub(crate) browser: Option<BrowserToken>,
    /// Whether the login now was made with `browser` (it ends when that browser login does).
    pub(crate) by_browser: bool,
    /// How many refusals it may still put in the audit this minute.
    pub(crate) audit_allowance: Arc<Mutex<super::audit_bounds::AuditAllowance>>,
    /// How many its user and its address may, over all their connections.
    pub(crate) shared_audit_allowances: Arc<super::audit_bounds::SharedAllowances>,
}

impl ConnectionContext {
    pub(crate) fn new(
        peer: SocketAddr,
        shared_audit_allowances: Arc<super::audit_bounds::SharedAllowances>,
    ) -> Self {
        Self {
            guid: Uuid::new_v4(),
            peer,
            login: None,
            browser: None,
            by_browser: false,
            audit_allowance: Arc::default(),
            shared_audit_allowances,
        }
    }

    /// The login, or the refusal a call that needs one answers.
    pub(crate) fn logged_in(&self) -> Result<&Login, CallError> {
        self.login
            .as_ref()
            .ok_or_else(|| CallError::new(ErrorCode::Unauthenticated, "log in with Hello first"))
    }
}
