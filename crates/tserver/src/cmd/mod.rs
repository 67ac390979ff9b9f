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

use crate::audit_bounds::{Allowed, REFUSED_ROWS_PER_CALL, REFUSED_ROWS_PER_MINUTE, cut};
use store::AuditEntry;

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

/// The rows a call puts in the audit: every accepted request (outcome `ok`), and its refused
/// ones bounded: text cut, [`REFUSED_ROWS_PER_CALL`] rows then one with the count, and the
/// connection's allowance of refusal rows a minute (past it they are counted, and a row says so).
pub(crate) fn bounded_audit(
    context: &crate::context::ConnectionContext,
    entries: Vec<AuditEntry>,
) -> Vec<AuditEntry> {
    let Some(first) = entries.first().cloned() else {
        return entries;
    };
    let note = |target: String, outcome: String| AuditEntry {
        target,
        old_value: None,
        new_value: None,
        outcome,
        ..first.clone()
    };
    // In the call's order, each marked refused or not.
    let mut rows = Vec::with_capacity(entries.len().min(REFUSED_ROWS_PER_CALL + 2));
    let mut listed = 0;
    let mut refused: u64 = 0;
    for mut entry in entries {
        entry.target = cut(&entry.target);
        entry.old_value = entry.old_value.as_deref().map(cut);
        entry.new_value = entry.new_value.as_deref().map(cut);
        entry.outcome = cut(&entry.outcome);
        if entry.outcome == "ok" {
            rows.push((entry, false));
            continue;
        }
        refused += 1;
        if listed < REFUSED_ROWS_PER_CALL {
            listed += 1;
            rows.push((entry, true));
        }
    }
    if refused == 0 {
        return rows.into_iter().map(|(entry, _)| entry).collect();
    }
    let unlisted = refused - listed as u64;
    if unlisted > 0 {
        listed += 1;
        rows.push((
            note(
                format!("{unlisted} more"),
                format!("refused: {unlisted} more requests of this call, not listed one by one"),
            ),
            true,
        ));
    }
    let allowed = context
        .audit_allowance
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take(listed, refused, std::time::Instant::now());
    let mut rows: Vec<AuditEntry> = match allowed {
        Allowed::Count => rows
            .into_iter()
            .filter_map(|(entry, refused)| (!refused).then_some(entry))
            .collect(),
        _ => rows.into_iter().map(|(entry, _)| entry).collect(),
    };
    match allowed {
        Allowed::Record { counted } if counted > 0 => rows.push(note(
            format!("{counted} refused"),
            format!(
                "{counted} refused requests of this connection were counted, not recorded (past its {REFUSED_ROWS_PER_MINUTE} audit rows of refusals a minute)"
            ),
        )),
        Allowed::RecordLast => rows.push(note(
            "allowance".to_owned(),
            format!(
                "this connection reached its {REFUSED_ROWS_PER_MINUTE} audit rows of refusals a minute: its further refusals this minute are counted, not recorded"
            ),
        )),
        _ => {}
    }
    rows
}

/// Records audit entries (committed together with other calls' on the audit writer's thread).
/// When they cannot be recorded, the error reply, starting with `refused` (what did not
/// happen): an action is never taken unaudited.
pub(crate) async fn record_audit(
    runtime: &crate::Runtime,
    entries: Vec<store::AuditEntry>,
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
