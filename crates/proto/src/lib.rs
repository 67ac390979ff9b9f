//! Wire types and the frame codec shared by `tserver` and `service-client`.
//!
//! The contract is `proto/tserver.proto`; this crate only generates its Rust types and
//! implements its framing (a 4-byte big-endian length, then one protobuf message), so the
//! server and the client library never depend on each other.

mod codec;
mod tls;
mod transport;

pub use codec::{Decoded, FrameCodec, FrameError};
pub use tls::{accept, connect, is_tls_record_start};
pub use transport::Transport;

/// tokio-rustls as this crate uses it, so both sides name the same version.
pub use tokio_rustls;

/// The protocol version this crate speaks (see the header of `proto/tserver.proto`).
pub const PROTOCOL_VERSION: u32 = 1;

/// The default largest protobuf body one frame may carry: 1 MiB.
pub const DEFAULT_MAX_FRAME: usize = 1024 * 1024;

/// The default TCP port display clients connect to.
pub const DEFAULT_PORT: u16 = 3101;

/// Generated protobuf types of package `tserver.v1`.
#[expect(
    missing_docs,
    reason = "prost generates items (oneof enums, nested modules) without doc comments"
)]
pub mod v1 {
    include!(concat!(env!("OUT_DIR"), "/tserver.v1.rs"));
}
