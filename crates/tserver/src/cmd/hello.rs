//! Hello: protocol version check and login.

use tserver_proto::PROTOCOL_VERSION;
use tserver_proto::v1::{ErrorCode, Hello, HelloReply, server_frame};

use super::CallError;
use crate::SERVER_VERSION;
use crate::auth::{Authenticator, Login, LoginError};

/// Checks the Hello; on success returns the login and the reply body. Any error
/// closes the connection (the handler's rule), so a refused login gets exactly one reply.
pub(crate) async fn apply(
    hello: &Hello,
    auth: &Authenticator,
    peer: std::net::IpAddr,
) -> Result<(Login, server_frame::Body), CallError> {
    if hello.protocol_version != PROTOCOL_VERSION {
        tracing::info!(%peer, version = hello.protocol_version, "login refused: unsupported protocol version");
        return Err(CallError::new(
            ErrorCode::UnsupportedProtocol,
            format!(
                "protocol version {} is not supported; this server speaks version {PROTOCOL_VERSION}",
                hello.protocol_version
            ),
        ));
    }
    match auth.verify(peer, &hello.user_name, &hello.password).await {
        Ok(login) => {
            let body = server_frame::Body::Hello(HelloReply {
                server_version: SERVER_VERSION.to_owned(),
                protocol_version: PROTOCOL_VERSION,
                user_name: login.name.to_string(),
            });
            Ok((login, body))
        }
        Err(LoginError::Refused) => Err(CallError::new(
            ErrorCode::LoginFailed,
            "unknown user or wrong password",
        )),
        Err(LoginError::NoUsers) => Err(CallError::new(ErrorCode::LoginFailed, crate::auth::NO_USERS)),
        Err(LoginError::Throttled(wait)) => Err(CallError::new(
            ErrorCode::LoginThrottled,
            format!(
                "too many failed logins from this address; try again in {} s",
                wait.as_secs_f64().ceil()
            ),
        )),
        Err(LoginError::Internal(reason)) => {
            tracing::error!(%reason, "login check failed");
            Err(CallError::new(
                ErrorCode::Internal,
                "the login could not be checked; see the server log",
            ))
        }
    }
}
