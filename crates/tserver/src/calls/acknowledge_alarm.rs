//! AcknowledgeAlarm: an operator acknowledges an alarm; audited like a write, before it
//! happens.

use std::future::Future;
use std::time::SystemTime;

use tserver_proto::v1::{AcknowledgeAlarmReply, AcknowledgeAlarmRequest, ErrorCode, server_frame};

use super::audit::{audit_then_authorize, bounded_audit};
use super::context::ConnectionContext;
use super::to_proto::{CallError, short};
use plant::Runtime;
use store::{AuditAction, AuditEntry};

/// Checks the call now; the returned future audits, then acknowledges.
pub(crate) fn apply(
    request: AcknowledgeAlarmRequest,
    context: &ConnectionContext,
    runtime: &Runtime,
) -> Result<impl Future<Output = server_frame::Body> + Send + 'static, CallError> {
    let login = context.logged_in()?;
    let known = runtime
        .objects()
        .alarms()
        .iter()
        .any(|alarm| alarm.definition().name == request.alarm);
    if !known {
        return Err(CallError::new(
            ErrorCode::InvalidArgument,
            format!("no alarm named {:?}", short(&request.alarm)),
        ));
    }
    let role = login.role;
    let entry = AuditEntry {
        time: SystemTime::now(),
        user: login.name.to_string(),
        connection: context.guid.to_string(),
        peer: context.peer.to_string(),
        action: AuditAction::Acknowledge,
        target: request.alarm.clone(),
        old_value: None,
        new_value: None,
        outcome: if role.can_operate() {
            "ok"
        } else {
            "permission denied"
        }
        .to_owned(),
    };
    let entries = bounded_audit(context, vec![entry]);
    let user = login.name.to_string();
    let runtime = runtime.clone();
    Ok(async move {
        let audited = audit_then_authorize(&runtime, entries, "not acknowledged", role, "acknowledge alarms");
        if let Err(refusal) = audited.await {
            return refusal;
        }
        match runtime.plant().acknowledge(&request.alarm, &user) {
            Ok(acknowledged) => server_frame::Body::AcknowledgeAlarm(AcknowledgeAlarmReply { acknowledged }),
            // A reload removed it meanwhile.
            Err(error) => CallError::new(ErrorCode::InvalidArgument, error.to_string()).into_body(),
        }
    })
}
