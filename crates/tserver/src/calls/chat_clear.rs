//! ChatClear: empties this connection's chat transcript (the platform's ChatClear action), so
//! the next turn starts a fresh conversation. The transcript is the assistant's, keyed by the
//! connection's server-made GUID; other connections are untouched.

use std::future::Future;

use tserver_proto::v1::{ChatClearReply, server_frame};

use super::context::ConnectionContext;
use plant::Runtime;

/// The clear, run beside the connection: it waits for the turns this connection sent before
/// it to end, as the next turn would.
pub(crate) fn apply(
    context: &ConnectionContext,
    runtime: &Runtime,
) -> impl Future<Output = server_frame::Body> + Send + 'static {
    let guid = context.guid;
    let runtime = runtime.clone();
    async move {
        let cleared = runtime.local_ai().clear_transcript(guid).await;
        server_frame::Body::ChatClear(ChatClearReply { cleared })
    }
}
