//! Ping: a liveness check that echoes its nonce.

use tserver_proto::v1::{Ping, Pong, server_frame};

pub(crate) fn apply(ping: Ping) -> server_frame::Body {
    server_frame::Body::Pong(Pong { nonce: ping.nonce })
}
