//! TServer: the runtime server display clients connect to.
//!
//! - [`Server`] accepts framed protobuf connections (see `proto/tserver.proto`), gives each a
//!   server-made GUID, logs users in and dispatches their calls.
//! - [`Runtime`] is one loaded solution: its database, its live object model and its Local AI
//!   service. Scripts running in the process use it directly.
//! - The solution itself (a SQLite file or a PostgreSQL database) is the `store` crate's
//!   `Store`; [`cli`] is the `tserver` command line.
//!
//! The caller binds the listener, so tests serve on `127.0.0.1:0`.

pub mod certificates;
pub mod cli;
pub mod config;
pub mod historian;
pub mod http_surface;
pub mod objects;
pub mod proxy;
pub mod scripts;
pub mod simulator;
pub mod telemetry;
pub mod tools;

mod auth;
mod calls;
mod log_text;
mod own_runtime;
mod plant;
mod runtime;
mod session;
mod sources;
mod tag_writes;
mod throttle;

pub use config::ServerConfig;
pub use plant::Plant;
pub use runtime::{ModelStandIn, Runtime, Toolkit, ToolsClosed};
pub use session::{Accepting, Server, ServerError};
pub use sources::SourceStatus;

/// The product version reported in `HelloReply.server_version`.
pub const SERVER_VERSION: &str = env!("CARGO_PKG_VERSION");
