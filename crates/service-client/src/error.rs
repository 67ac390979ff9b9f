//! The client's typed errors.

use std::time::Duration;

use tserver_proto::v1::ErrorCode;

/// Why the connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloseReason {
    /// The server said why (a connection-level error frame) before closing.
    Server {
        /// The error code.
        code: ErrorCode,
        /// The server's message.
        message: String,
    },
    /// The server closed the connection without saying why.
    ServerClosed,
    /// Every handle of the client was dropped.
    ClientClosed,
    /// Reading or writing the socket failed.
    Transport(String),
    /// The server sent bytes this client could not understand.
    Protocol(String),
}

impl std::fmt::Display for CloseReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Server { code, message } => {
                write!(f, "server closed it: {} ({message})", code.as_str_name())
            }
            Self::ServerClosed => f.write_str("the server closed it"),
            Self::ClientClosed => f.write_str("the client closed it"),
            Self::Transport(error) => write!(f, "transport error: {error}"),
            Self::Protocol(error) => write!(f, "protocol error: {error}"),
        }
    }
}

/// A failed client operation.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The TCP connection could not be made.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// The address tried.
        addr: String,
        /// The socket error.
        source: std::io::Error,
    },
    /// The TCP connection was not made in time.
    #[error("cannot connect to {addr}: no answer within {after:?}")]
    ConnectTimeout {
        /// The address tried.
        addr: String,
        /// The connect timeout.
        after: Duration,
    },
    /// The TLS handshake failed (untrusted or mismatched certificate, a server not speaking
    /// TLS, a bad server name).
    #[error("TLS with {addr} failed: {reason}")]
    Tls {
        /// The address tried.
        addr: String,
        /// What went wrong.
        reason: String,
    },
    /// The server refused the login (unknown user or wrong password; it does not say which).
    #[error("login refused: {message}")]
    LoginRefused {
        /// The server's message.
        message: String,
    },
    /// The server answered the call with a protocol-level error.
    #[error("server error {}: {message}", code.as_str_name())]
    Server {
        /// The error code.
        code: ErrorCode,
        /// The server's message.
        message: String,
    },
    /// No reply within the call's timeout. The call may still complete on the server.
    #[error("no reply within {after:?}")]
    Timeout {
        /// The call timeout.
        after: Duration,
    },
    /// The connection ended before the reply came.
    #[error("connection lost: {reason}")]
    ConnectionLost {
        /// Why it ended.
        reason: CloseReason,
    },
    /// The server answered with a reply of another kind than the call expects.
    #[error("unexpected reply: expected {expected}")]
    UnexpectedReply {
        /// The reply kind expected.
        expected: &'static str,
    },
    /// A [`FailoverClient`](crate::FailoverClient) was given no address.
    #[error("no server address given")]
    NoAddress,
    /// No server address answered (each with why), or none in time after a failover.
    #[error("no server reachable: {tried}")]
    Unreachable {
        /// The addresses tried, with why each failed.
        tried: String,
    },
    /// A chat reply was not a valid Local AI envelope.
    #[error("the chat reply is not a valid envelope: {0}")]
    InvalidEnvelope(#[from] serde_json::Error),
}

impl ClientError {
    /// The server's error code, when the server said why.
    pub fn server_code(&self) -> Option<ErrorCode> {
        match self {
            Self::Server { code, .. }
            | Self::ConnectionLost {
                reason: CloseReason::Server { code, .. },
            } => Some(*code),
            Self::LoginRefused { .. } => Some(ErrorCode::LoginFailed),
            _ => None,
        }
    }
}
