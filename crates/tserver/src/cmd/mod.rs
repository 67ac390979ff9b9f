//! One module per call. Each turns a typed request into the body of its reply; adding a call
//! is one module here and one match arm in the handler.

pub(crate) mod acknowledge_alarm;
pub(crate) mod call_tool;
pub(crate) mod cancel;
pub(crate) mod chat;
pub(crate) mod hello;
pub(crate) mod list_tools;
pub(crate) mod logout;
pub(crate) mod ping;
pub(crate) mod read_tags;
pub(crate) mod write_tags;

use tserver_proto::v1::{Error, ErrorCode, ServerFrame, server_frame};

/// A protocol-level failure of one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CallError {
    pub(crate) code: ErrorCode,
    pub(crate) message: String,
}

impl CallError {
    pub(crate) fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn into_body(self) -> server_frame::Body {
        server_frame::Body::Error(Error {
            code: self.code as i32,
            message: self.message,
        })
    }
}

/// Records audit entries (committed together with other calls' on the audit writer's thread).
/// When they cannot be recorded, the error reply, starting with `refused` (what did not
/// happen): an action is never taken unaudited.
pub(crate) async fn record_audit(
    runtime: &crate::Runtime,
    entries: Vec<crate::solution::AuditEntry>,
    refused: &str,
) -> Result<(), server_frame::Body> {
    runtime.audit_log().record(entries).await.map_err(|error| {
        tracing::error!(%error, "{refused}: the audit could not be recorded");
        CallError::new(
            ErrorCode::Internal,
            format!("{refused}: the audit could not be recorded ({error})"),
        )
        .into_body()
    })
}

/// Client text quoted in an error, cut to a sane length.
pub(crate) fn short(text: &str) -> String {
    text.chars().take(200).collect()
}

/// A frame answering `call_id` with `body`.
pub(crate) fn reply(call_id: u64, body: server_frame::Body) -> ServerFrame {
    ServerFrame {
        call_id,
        body: Some(body),
    }
}

/// A frame answering `call_id` (0: the connection) with an error.
pub(crate) fn error_frame(call_id: u64, code: ErrorCode, message: impl Into<String>) -> ServerFrame {
    reply(call_id, CallError::new(code, message).into_body())
}
