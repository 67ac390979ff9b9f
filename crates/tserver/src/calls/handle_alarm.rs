//! HandleAlarm: an operator shelves or unshelves an alarm, an admin takes it out of or back
//! into service, through the acting path (audited before it takes effect).

use std::future::Future;
use std::time::Duration;

use tserver_proto::v1::{AlarmHandlingChange, ErrorCode, HandleAlarmReply, HandleAlarmRequest, server_frame};

use super::audit::{act_error, signatures};
use super::context::ConnectionContext;
use super::to_proto::{CallError, epoch_ms};
use plant::Runtime;
use plant::actions::{ActWork, RemoveFromService, ReturnToService, ShelveAlarm, UnshelveAlarm};

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
    } = request;
    let given = signatures(given)?;
    let change = AlarmHandlingChange::try_from(change).unwrap_or(AlarmHandlingChange::Unspecified);
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
                })
            });
            Ok(shelved)
        }
        AlarmHandlingChange::Unshelve => changed(runtime.act(actor, UnshelveAlarm { alarm }, context)),
        AlarmHandlingChange::RemoveFromService => {
            let act = RemoveFromService {
                alarm,
                reason,
                signatures: given,
            };
            changed(runtime.act(actor, act, context))
        }
        AlarmHandlingChange::ReturnToService => {
            changed(runtime.act(actor, ReturnToService { alarm }, context))
        }
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

/// The reply of a change that says whether it changed anything, or the call's refusal now.
fn changed(
    checked: Result<ActWork<bool>, plant::actions::ActError>,
) -> Result<ActWork<HandleAlarmReply>, CallError> {
    let work = checked.map_err(act_error)?;
    Ok(Box::pin(async move {
        Ok(HandleAlarmReply {
            changed: work.await?,
            shelved_until_ms: 0,
        })
    }))
}
