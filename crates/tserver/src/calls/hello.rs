//! Hello: protocol version check and login. A refused Hello closes the connection (the
//! session's rule), so a refused login gets exactly one reply. On a WebSocket opened with a
//! browser login's cookie, a Hello without user name and password logs that login in.

use tserver_proto::PROTOCOL_VERSION;
use tserver_proto::v1::{ErrorCode, Hello, HelloReply, server_frame};

use super::context::ConnectionContext;
use super::to_proto::CallError;
use crate::SERVER_VERSION;
use crate::auth::{Authenticator, BrowserToken, Login, LoginError};
use plant::log_text::{ClientText, LogBudget};

/// How a connection's logins show in the log.
#[derive(Debug)]
pub(crate) struct LoginLog {
    /// The connection's log span (GUID and peer), the parent of every login span.
    pub(crate) connection_span: tracing::Span,
    /// The span of the login now (the user), replaced at each Hello rather than recorded
    /// into, so a connection's log context stays one user however often it logs in.
    pub(crate) span: tracing::Span,
    /// The log lines this connection may still cause this minute.
    budget: LogBudget,
}

impl LoginLog {
    pub(crate) fn new() -> Self {
        Self {
            connection_span: tracing::Span::none(),
            span: tracing::Span::none(),
            budget: LogBudget::new("this connection"),
        }
    }

    /// Whether one more line about this connection's logins may be logged now.
    pub(crate) fn may_log(&mut self) -> bool {
        self.budget.allow()
    }
}

/// Checks the Hello and logs the connection in: its login, its log span, the reply body.
pub(crate) async fn apply(
    hello: &Hello,
    context: &mut ConnectionContext,
    log: &mut LoginLog,
    auth: &Authenticator,
) -> Result<server_frame::Body, CallError> {
    let by_browser = context.browser.is_some() && hello.user_name.is_empty() && hello.password.is_empty();
    let outcome = check(hello, auth, context.peer.ip(), context.browser.as_ref()).await;
    crate::telemetry::count_login(outcome.as_ref().err().map(|error| error.code));
    let (login, body) = outcome?;
    context.by_browser = by_browser;
    log.span = tracing::info_span!(parent: &log.connection_span, "login", user = %ClientText(&login.name));
    if log.may_log() {
        tracing::info!(parent: &log.span, client = %ClientText(&hello.client_name), "logged in");
    }
    context.login = Some(login);
    Ok(body)
}

/// Checks the Hello; on success returns the login and the reply body. A Hello without user
/// name and password on a connection that carries a browser login logs that login in.
async fn check(
    hello: &Hello,
    auth: &Authenticator,
    peer: std::net::IpAddr,
    browser: Option<&BrowserToken>,
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
    let verified = match browser {
        Some(token) if hello.user_name.is_empty() && hello.password.is_empty() => {
            auth.verify_browser(peer, token).await
        }
        _ => auth.verify(peer, &hello.user_name, &hello.password).await,
    };
    match verified {
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
