//! TServer: the runtime server display clients connect to.
//!
//! - [`Server`] accepts framed protobuf connections (see `proto/tserver.proto`), gives each a
//!   server-made GUID, logs users in and dispatches their calls.
//! - [`Runtime`] (the `plant` crate's) is one loaded solution: its database, its live object
//!   model and its Local AI service; the server serves it.
//! - The solution itself (a SQLite file or a PostgreSQL database) is the `store` crate's
//!   `Store`; [`cli`] is the `tserver` command line.
//!
//! The caller binds the listener, so tests serve on `127.0.0.1:0`.

/// Boxes a public `async fn`'s future, so its body, and every future it awaits, compiles once,
/// here, rather than again in each crate that awaits it: rustc builds an `async fn`'s body where
/// its future is polled, so unboxed, a leaf crate compiled the whole async tree beneath it
/// (docs/DECISIONS.md, "Futures boxed at crate boundaries").
pub(crate) use async_recursion::async_recursion as compiled_once;

pub mod certificates;
pub mod cli;
pub mod config;
pub mod eval;
pub mod http_surface;
pub mod proxy;
pub mod telemetry;
pub mod user_files;

mod answer_html;
mod auth;
mod calls;
mod own_runtime;
mod session;
mod throttle;

pub use config::ServerConfig;
/// The solution a [`Server`] serves (the `plant` crate's), named here because the server's
/// entry points take it.
pub use plant::Runtime;
pub use session::{
    Accepting, LISTEN_BACKLOG, Server, ServerError, WebSocketAdmission, WebSocketLimits,
    WebSocketQuotaRefusal, WebSocketRefusal, WebSocketSessions, listen,
};

/// The product version reported in `HelloReply.server_version`.
pub const SERVER_VERSION: &str = env!("CARGO_PKG_VERSION");
