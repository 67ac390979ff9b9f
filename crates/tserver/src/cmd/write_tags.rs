//! WriteTags: operators set writable tags. Each write is checked on its own (known, writable,
//! of the tag's type, inside its range); all of them, written or refused, are audited before
//! any is written, and an audit that cannot be recorded writes nothing.

use std::future::Future;
use std::time::SystemTime;

use tserver_proto::v1::{
    ErrorCode, TagWrite, TagWriteResult, WriteTagsReply, WriteTagsRequest, server_frame, tag_write,
};

use super::CallError;
use crate::Runtime;
use crate::context::ConnectionContext;
use crate::objects::{ObjectModel, Quality, TagKind, TagValue};
use crate::solution::{AuditAction, AuditEntry};

/// The most writes one call may carry (stated in `proto/tserver.proto`).
pub(crate) const MAX_WRITES: usize = 1000;

/// The longest text written to a text tag, in characters.
const MAX_TEXT_CHARS: usize = 4096;

/// A write that passed its checks.
struct Accepted {
    /// Its place in the reply.
    index: usize,
    /// The tag's dotted name.
    tag: String,
    value: TagValue,
    /// The MQTT source the write goes out through, for a tag fed by the field.
    source: Option<String>,
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
    let login = context
        .login
        .as_ref()
        .ok_or_else(|| CallError::new(ErrorCode::Unauthenticated, "log in with Hello first"))?;
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
        let new_value = write.value.as_ref().map(wire_json);
        let checked = if allowed {
            check(&write, &objects)
        } else {
            Err("permission denied".to_owned())
        };
        let outcome = match checked {
            Ok((tag, value, source)) => {
                accepted.push(Accepted {
                    index,
                    tag,
                    value,
                    source,
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
        results.push(TagWriteResult {
            name: write.name,
            error: outcome,
        });
    }
    let role = login.role;
    let runtime = runtime.clone();
    Ok(async move {
        if let Err(refusal) = super::record_audit(&runtime, audit, "nothing was written").await {
            return refusal;
        }
        if !role.can_operate() {
            return CallError::new(
                ErrorCode::PermissionDenied,
                format!(
                    "a {} may not write tags; an admin can make the user an operator",
                    role.as_str()
                ),
            )
            .into_body();
        }
        for write in accepted {
            // A tag fed by the field changes when the field reports the new value back.
            let outcome = match write.source {
                Some(source) => runtime.write_to_field(&source, &write.tag, write.value).await,
                // A reload between the check and now may have removed or retyped the tag.
                None => runtime
                    .plant()
                    .write(&write.tag, write.value, Quality::GOOD)
                    .map(drop)
                    .map_err(|error| error.to_string()),
            };
            if let Err(error) = outcome {
                results[write.index].error = error;
            }
        }
        server_frame::Body::WriteTags(WriteTagsReply { results })
    })
}

/// The tag, the value to write and the source it goes out through, or why not.
fn check(write: &TagWrite, objects: &ObjectModel) -> Result<(String, TagValue, Option<String>), String> {
    let tag = objects.tag(&write.name).ok_or("unknown tag")?;
    let definition = tag.definition();
    if !definition.writable {
        return Err("not writable".to_owned());
    }
    let value = write.value.as_ref().ok_or("no value given")?;
    let kind = definition.kind;
    let value = match (kind, value) {
        (TagKind::Number, tag_write::Value::Number(number)) if number.is_finite() => {
            TagValue::Number(*number)
        }
        #[expect(
            clippy::cast_precision_loss,
            reason = "an integer written to a number tag is a measurement"
        )]
        (TagKind::Number, tag_write::Value::Integer(integer)) => TagValue::Number(*integer as f64),
        (TagKind::Integer, tag_write::Value::Integer(integer)) => TagValue::Integer(*integer),
        (TagKind::Integer, tag_write::Value::Number(number))
            if number.fract() == 0.0 && number.abs() < 9.0e15 =>
        {
            #[expect(clippy::cast_possible_truncation, reason = "a whole number below 2^53")]
            TagValue::Integer(*number as i64)
        }
        (TagKind::Bool, tag_write::Value::Boolean(boolean)) => TagValue::Bool(*boolean),
        (TagKind::Text, tag_write::Value::Text(text)) if text.chars().count() <= MAX_TEXT_CHARS => {
            TagValue::Text(text.as_str().into())
        }
        (TagKind::Text, tag_write::Value::Text(_)) => {
            return Err(format!("text longer than {MAX_TEXT_CHARS} characters"));
        }
        (kind, given) => {
            return Err(format!(
                "{} tag cannot take {}",
                kind_name(kind),
                given_name(given)
            ));
        }
    };
    if let Some(number) = value
        .as_f64()
        .filter(|_| matches!(kind, TagKind::Number | TagKind::Integer))
        && (definition.range_low.is_some_and(|low| number < low)
            || definition.range_high.is_some_and(|high| number > high))
    {
        let end = |bound: Option<f64>| bound.map(|value| value.to_string()).unwrap_or_default();
        return Err(format!(
            "{number} is outside the range {}..{}",
            end(definition.range_low),
            end(definition.range_high)
        ));
    }
    Ok((definition.name.clone(), value, definition.source.clone()))
}

/// A kind of tag with its article.
fn kind_name(kind: TagKind) -> &'static str {
    match kind {
        TagKind::Number => "a number",
        TagKind::Integer => "an integer",
        TagKind::Bool => "a bool",
        TagKind::Text => "a text",
    }
}

fn given_name(value: &tag_write::Value) -> String {
    match value {
        tag_write::Value::Number(number) if !number.is_finite() => {
            "a value that is not a finite number".to_owned()
        }
        tag_write::Value::Number(number) => format!("the number {number}"),
        tag_write::Value::Integer(integer) => format!("the integer {integer}"),
        tag_write::Value::Boolean(boolean) => format!("the bool {boolean}"),
        tag_write::Value::Text(_) => "text".to_owned(),
    }
}

/// A wire value as JSON text, for the audit.
fn wire_json(value: &tag_write::Value) -> String {
    match value {
        tag_write::Value::Number(number) => serde_json::json!(number).to_string(),
        tag_write::Value::Integer(integer) => integer.to_string(),
        tag_write::Value::Boolean(boolean) => boolean.to_string(),
        tag_write::Value::Text(text) => serde_json::Value::String(text.clone()).to_string(),
    }
}
