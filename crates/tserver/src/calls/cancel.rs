//! Cancel: stops a call of this connection that runs beside it (a chat turn). The
//! cancellation of each such call is kept here while it runs; the call itself still sends its
//! one reply.

use std::collections::HashMap;

use tokio_util::sync::CancellationToken;
use tserver_proto::v1::{Cancel, CancelReply, server_frame};

/// The cancellation of each call in flight that can be cancelled, by call id, until its reply
/// is written (at most the in-flight cap of them).
#[derive(Debug, Default)]
pub(crate) struct Cancellable(HashMap<u64, CancellationToken>);

impl Cancellable {
    /// Call `call_id` runs, and `cancel` stops it.
    pub(crate) fn insert(&mut self, call_id: u64, cancel: CancellationToken) {
        self.0.insert(call_id, cancel);
    }

    /// Call `call_id` has answered.
    pub(crate) fn remove(&mut self, call_id: u64) {
        self.0.remove(&call_id);
    }
}

/// Cancels the target call if it is in flight; the reply says whether it was.
pub(crate) fn apply(request: &Cancel, running: &Cancellable) -> server_frame::Body {
    let cancelled = match running.0.get(&request.target_call_id) {
        Some(token) if !token.is_cancelled() => {
            token.cancel();
            true
        }
        _ => false,
    };
    server_frame::Body::Cancel(CancelReply { cancelled })
}
