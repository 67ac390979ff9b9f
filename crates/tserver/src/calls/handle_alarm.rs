//! HandleAlarm: an operator shelves or unshelves an alarm, an admin takes it out of or back
//! into service, through the acting path (audited before it takes effect).

use std::future::Future;
use std::time::Duration;

use tserver_proto::v1::{AlarmHandlingChange, ErrorCode, HandleAlarmReply, HandleAlarmRequest, server_frame};

use super::audit::{act_error, signatures};
use super::context::ConnectionContext;
use super::to_proto::{CallError, epoch_ms};
use plant::Runtime;
use plant::actions::{ActWork, RemoveFromService, ReturnToService, ServiceScope, ShelveAlarm, UnshelveAlarm};

/// Checks the call now; the returned future audits, then changes how the alarm is handled.
pub(crate) fn apply(
    request: HandleAlarmRequest,
    context: &ConnectionContext,
    runtime: &Runtime,
) -> Result<impl Future<Output = server_frame::Body> + Send + 'static, CallError> {
    let actor = context.actor()?;
    let HandleAlarmRequest {
        alarm,
        change,
        shelve_minutes,
        reason,
        signatures: given,
        folder,
    } = request;
    let given = signatures(given)?;
    let change = AlarmHandlingChange::try_from(change).unwrap_or(AlarmHandlingChange::Unspecified);
    let scope = match (alarm.is_empty(), folder.is_empty()) {
        (false, true) => ServiceScope::Alarm(alarm.clone()),
        (true, false)
            if matches!(
                change,
                AlarmHandlingChange::RemoveFromService | AlarmHandlingChange::ReturnToService
            ) =>
        {
            ServiceScope::Folder(folder)
        }
        (true, false) => {
            return Err(CallError::new(
                ErrorCode::InvalidArgument,
                "folder: only a change of service takes a folder; name the alarm",
            ));
        }
        (false, false) => {
            return Err(CallError::new(
                ErrorCode::InvalidArgument,
                "alarm, folder: give one of them, not both",
            ));
        }
        (true, true) => {
            return Err(CallError::new(
                ErrorCode::InvalidArgument,
                "alarm: name the alarm",
            ));
        }
    };
    let work = match change {
        AlarmHandlingChange::Shelve => {
            let act = ShelveAlarm {
                alarm,
                duration: Duration::from_secs(u64::from(shelve_minutes) * 60),
                reason,
                signatures: given,
            };
            let shelving = runtime.act(actor, act, context).map_err(act_error)?;
            let shelved: ActWork<HandleAlarmReply> = Box::pin(async move {
                let until = shelving.await?;
                Ok(HandleAlarmReply {
                    changed: true,
                    shelved_until_ms: epoch_ms(until),
                    count: 1,
                })
            });
            Ok(shelved)
        }
        AlarmHandlingChange::Unshelve => {
            let work = runtime
                .act(actor, UnshelveAlarm { alarm }, context)
                .map_err(act_error)?;
            changed(Box::pin(async move { work.await.map(usize::from) }))
        }
        AlarmHandlingChange::RemoveFromService => {
            let act = RemoveFromService {
                alarms: scope,
                reason,
                signatures: given,
            };
            changed(runtime.act(actor, act, context).map_err(act_error)?)
        }
        AlarmHandlingChange::ReturnToService => changed(
            runtime
                .act(actor, ReturnToService { alarms: scope }, context)
                .map_err(act_error)?,
        ),
        AlarmHandlingChange::Unspecified => {
            return Err(CallError::new(
                ErrorCode::InvalidArgument,
                "change: give ALARM_HANDLING_CHANGE_SHELVE, _UNSHELVE, _REMOVE_FROM_SERVICE or _RETURN_TO_SERVICE",
            ));
        }
    }?;
    Ok(async move {
        match work.await {
            Ok(reply) => server_frame::Body::HandleAlarm(reply),
            Err(refusal) => act_error(refusal).into_body(),
        }
    })
}

/// The reply of a change that says how many alarms it changed.
fn changed(work: ActWork<usize>) -> Result<ActWork<HandleAlarmReply>, CallError> {
    Ok(Box::pin(async move {
        let count = work.await?;
        Ok(HandleAlarmReply {
            changed: count > 0,
            shelved_until_ms: 0,
            count: u32::try_from(count).unwrap_or(u32::MAX),
        })
    }))
}
