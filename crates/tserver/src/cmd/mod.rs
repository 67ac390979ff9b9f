//! One module per call. Each turns a typed request into the body of its reply; adding a call
//! is one module here and one match arm in the handler.

pub(crate) mod cancel;
pub(crate) mod chat;
pub(crate) mod hello;
pub(crate) mod logout;
pub(crate) mod ping;
pub(crate) mod read_tags;

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
