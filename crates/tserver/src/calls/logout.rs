//! Logout: the connection returns to the not-logged-in state; the reply carries nothing.
//! (The session then gives the connection the limits of one not logged in.)

use tserver_proto::v1::{LogoutReply, server_frame};

use super::context::ConnectionContext;
use super::hello::LoginLog;

/// Forgets the login; Logout cannot fail.
pub(crate) fn apply(context: &mut ConnectionContext, log: &mut LoginLog) -> server_frame::Body {
    if log.may_log() {
        tracing::info!("logged out");
    }
    log.span = tracing::Span::none();
    context.login = None;
    context.by_browser = false;
    server_frame::Body::Logout(LogoutReply {})
}
