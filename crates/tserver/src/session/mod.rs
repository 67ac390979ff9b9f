//! The framed port: the listener and its accept loop, the waiting room of connections not
//! logged in, the state every connection shares, and each connection's session, the state
//! machine that reads frames, hands them to `calls` and writes the replies.

mod connection;
mod listener;
mod machine;
mod shared;
pub(crate) mod waiting;

pub use listener::{Accepting, Server, ServerError};
