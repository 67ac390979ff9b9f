//! Cancel: stops a call of this connection that runs in a task (a chat turn). The handler
//! keeps the cancellation token of each such call while it runs; the call itself still sends
//! its one reply.

use std::collections::HashMap;

use tokio_util::sync::CancellationToken;
use tserver_proto::v1::{Cancel, CancelReply, server_frame};

/// Cancels the target call if it is in flight; the reply says whether it was.
pub(crate) fn apply(request: &Cancel, running: &HashMap<u64, CancellationToken>) -> server_frame::Body {
    let cancelled = match running.get(&request.target_call_id) {
        Some(token) if !token.is_cancelled() => {
            token.cancel();
            true
        }
        _ => false,
    };
    server_frame::Body::Cancel(CancelReply { cancelled })
}
