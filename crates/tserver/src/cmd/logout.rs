//! Logout: the connection returns to the not-logged-in state (the handler resets its login
//! deadline, frame limit and waiting-room seat); the reply carries nothing.

use tserver_proto::v1::{LogoutReply, server_frame};

/// The reply body; Logout cannot fail.
pub(crate) fn apply() -> server_frame::Body {
    server_frame::Body::Logout(LogoutReply {})
}
