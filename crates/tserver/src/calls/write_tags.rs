//! WriteTags: operators set writable tags. Each write is checked on its own (known, writable,
//! of the tag's type, inside its range); all of them, written or refused, are audited before
//! any is written, and an audit that cannot be recorded writes nothing.

use std::future::Future;
use std::time::SystemTime;

use tserver_proto::v1::{
    ErrorCode, TagWriteResult, WriteOutcome, WriteTagsReply, WriteTagsRequest, server_frame, tag_write,
};

use super::audit::{audit_then_authorize, bounded_audit};
use super::context::ConnectionContext;
use super::to_proto::CallError;
use plant::Runtime;
use plant::tag_writes::{Carried, CheckedWrite, FieldWriteError, GivenValue, Writer, check_write};
use store::{AuditAction, AuditEntry};

/// The most writes one call may carry (stated in `proto/tserver.proto`).
pub(crate) const MAX_WRITES: usize = 1000;

/// A write that passed its checks, with its place in the reply.
struct Accepted {
    index: usize,
    write: CheckedWrite,
}

/// Checks the call now; the returned future audits and writes (the audit is a database write,
/// so it runs on the blocking pool, off the connection's task).
pub(crate) fn apply(
    request: WriteTagsRequest,
    context: &ConnectionContext,
    runtime: &Runtime,
) -> Result<impl Future<Output = server_frame::Body> + Send + 'static, CallError> {
    if request.writes.is_empty() || request.writes.len() > MAX_WRITES {
        return Err(CallError::new(
            ErrorCode::InvalidArgument,
            format!(
                "{} writes: write 1 to {MAX_WRITES} tags per call",
                request.writes.len()
            ),
        ));
    }
    let login = context.logged_in()?;
    let allowed = login.role.can_operate();
    let objects = runtime.objects();
    let now = SystemTime::now();
    let mut results = Vec::with_capacity(request.writes.len());
    let mut accepted = Vec::new();
    let mut audit = Vec::with_capacity(request.writes.len());
    for (index, write) in request.writes.into_iter().enumerate() {
        let old_value = objects
            .tag(&write.name)
            .map(|tag| tag.current().value.to_json().to_string());
        let given = write.value.as_ref().map(given_value);
        let new_value = given.as_ref().map(GivenValue::json);
        let checked = if allowed {
            check_write(&objects, Writer::Operator, &write.name, given)
        } else {
            Err("permission denied".to_owned())
        };
        let outcome = match checked {
            Ok(checked) => {
                accepted.push(Accepted {
                    index,
                    write: checked,
                });
                String::new()
            }
            Err(reason) => reason,
        };
        audit.push(AuditEntry {
            time: now,
            user: login.name.to_string(),
            connection: context.guid.to_string(),
            peer: context.peer.to_string(),
            action: AuditAction::Write,
            target: write.name.clone(),
            old_value,
            new_value,
            outcome: if outcome.is_empty() {
                "ok".to_owned()
            } else {
                outcome.clone()
            },
        });
        let state = if outcome.is_empty() {
            // Until it is carried out.
            WriteOutcome::Unspecified
        } else {
            WriteOutcome::Refused
        };
        results.push(TagWriteResult {
            name: write.name,
            error: outcome,
            outcome: state.into(),
        });
    }
    if !allowed && audit.len() > 1 {
        // A call refused whole is one row, with its count.
        let count = audit.len();
        audit.truncate(1);
        audit[0].target = format!(
            "{} and {} more",
            super::audit_bounds::cut(&audit[0].target),
            count - 1
        );
        audit[0].outcome = format!("permission denied ({count} writes)");
    }
    let audit = bounded_audit(context, audit);
    let role = login.role;
    let runtime = runtime.clone();
    Ok(async move {
        let audited = audit_then_authorize(&runtime, audit, "nothing was written", role, "write tags");
        if let Err(refusal) = audited.await {
            return refusal;
        }
        // Together: each write to the field waits for its broker's acknowledgement, and one
        // call's writes wait at most one acknowledgement timeout, not one each.
        let outcomes = futures::future::join_all(accepted.into_iter().map(|Accepted { index, write }| {
            let runtime = &runtime;
            async move { (index, runtime.carry_out(write).await) }
        }))
        .await;
        for (index, outcome) in outcomes {
            let result = &mut results[index];
            let state = match outcome {
                Ok(Carried::Written) => WriteOutcome::Written,
                Ok(Carried::SentToField) => WriteOutcome::SentToField,
                Err(FieldWriteError::Refused(reason)) => {
                    result.error = reason;
                    WriteOutcome::Refused
                }
                Err(FieldWriteError::NotConfirmed(reason)) => {
                    result.error = reason;
                    WriteOutcome::NotConfirmed
                }
            };
            result.outcome = state.into();
        }
        server_frame::Body::WriteTags(WriteTagsReply { results })
    })
}

/// A wire value as given.
fn given_value(value: &tag_write::Value) -> GivenValue<'_> {
    match value {
        tag_write::Value::Number(number) => GivenValue::Number(*number),
        tag_write::Value::Integer(integer) => GivenValue::Integer(*integer),
        tag_write::Value::Boolean(boolean) => GivenValue::Bool(*boolean),
        tag_write::Value::Text(text) => GivenValue::Text(text),
    }
}
