//! The framed port: the listener and its accept loop, the waiting room of connections not
//! logged in, the state every connection shares, and each connection's session, the state
//! machine that reads frames, hands them to `calls` and writes the replies, whether they come
//! over TCP or over a WebSocket of the HTTP surface (`websocket.rs`).

mod bind;
mod connection;
mod listener;
mod machine;
mod shared;
pub(crate) mod waiting;
mod websocket;
mod websocket_link;
mod websocket_quota;

pub use bind::{LISTEN_BACKLOG, listen};
pub use listener::{Accepting, Server, ServerError};
pub use websocket::{WebSocketAdmission, WebSocketRefusal, WebSocketSessions};
pub use websocket_quota::{WebSocketLimits, WebSocketQuotaRefusal};
