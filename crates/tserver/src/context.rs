//! The per-connection context every handler receives.

use std::net::SocketAddr;
use std::sync::Arc;

use uuid::Uuid;

/// Who is on the other end of one connection.
#[derive(Debug, Clone)]
pub(crate) struct ConnectionContext {
    /// Made by the server when the connection is accepted (v4), never taken from the client:
    /// the spec's `ClientInfo.Guid`, and the key of the chat transcript.
    pub(crate) guid: Uuid,
    /// The client's address, for logs.
    pub(crate) peer: SocketAddr,
    /// The user logged in now; `None` before Hello and after Logout.
    pub(crate) user: Option<Arc<str>>,
}

impl ConnectionContext {
    pub(crate) fn new(peer: SocketAddr) -> Self {
        Self {
            guid: Uuid::new_v4(),
            peer,
            user: None,
        }
    }
}
