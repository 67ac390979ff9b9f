//! What a call that acts on the plant puts in the audit: its rows, bounded per call and per
//! connection, recorded before the action (an action is never taken unaudited).

use tserver_proto::v1::{ErrorCode, server_frame};

use super::audit_bounds::{
    Allowed, REFUSED_ROWS_PER_CALL, REFUSED_ROWS_PER_MINUTE, SHARED_REFUSED_ROWS_PER_MINUTE, cut,
};
use super::context::ConnectionContext;
use super::to_proto::CallError;
use store::{AuditEntry, Role};

/// The rows a call puts in the audit: every accepted request (outcome `ok`), and its refused
/// ones bounded: text cut, [`REFUSED_ROWS_PER_CALL`] rows then one with the count, and the
/// connection's allowance of refusal rows a minute (past it they are counted, and a row says so).
pub(crate) fn bounded_audit(context: &ConnectionContext, entries: Vec<AuditEntry>) -> Vec<AuditEntry> {
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
    let user = context.login.as_ref().map_or("", |login| &login.name);
    let (allowed, scope) = context.shared_audit_allowances.take(
        &context.audit_allowance,
        user,
        context.peer.ip(),
        (listed, refused),
        std::time::Instant::now(),
    );
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
                "{counted} refused requests were counted, not recorded (past an allowance of audit rows of refusals a minute: {REFUSED_ROWS_PER_MINUTE} a connection, {SHARED_REFUSED_ROWS_PER_MINUTE} a user or a client address)"
            ),
        )),
        Allowed::RecordLast => rows.push(note(
            "allowance".to_owned(),
            format!(
                "{} reached its {} audit rows of refusals a minute: its further refusals this minute are counted, not recorded",
                scope.words(),
                scope.limit()
            ),
        )),
        _ => {}
    }
    rows
}

/// Records the audit of an action, then checks that `role` may take it: an action is never
/// taken unaudited, and a refused one is audited too. The error reply when the audit cannot be
/// recorded (starting with `refused`, what did not happen), or when `role` may not `act`.
pub(crate) async fn audit_then_authorize(
    runtime: &plant::Runtime,
    entries: Vec<AuditEntry>,
    refused: &str,
    role: Role,
    act: &str,
) -> Result<(), server_frame::Body> {
    record_audit(runtime, entries, refused).await?;
    if !role.can_operate() {
        return Err(CallError::new(
            ErrorCode::PermissionDenied,
            format!(
                "a {} may not {act}; an admin can make the user an operator",
                role.as_str()
            ),
        )
        .into_body());
    }
    Ok(())
}

/// Records audit entries (committed together with other calls' on the audit writer's thread).
/// When they cannot be recorded, the error reply, starting with `refused` (what did not
/// happen).
async fn record_audit(
    runtime: &plant::Runtime,
    entries: Vec<AuditEntry>,
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
