//! AcknowledgeAlarm: an operator acknowledges an alarm, through the acting path (audited
//! before it happens).

use std::future::Future;

use tserver_proto::v1::{AcknowledgeAlarmReply, AcknowledgeAlarmRequest, server_frame};

use super::audit::{act_error, signatures};
use super::context::ConnectionContext;
use super::to_proto::CallError;
use plant::Runtime;
use plant::actions::AcknowledgeAlarm;

/// Checks the call now; the returned future audits, then acknowledges.
pub(crate) fn apply(
    request: AcknowledgeAlarmRequest,
    context: &ConnectionContext,
    runtime: &Runtime,
) -> Result<impl Future<Output = server_frame::Body> + Send + 'static, CallError> {
    let act = AcknowledgeAlarm {
        alarm: request.alarm,
        signatures: signatures(request.signatures)?,
    };
    let work = runtime.act(context.actor()?, act, context).map_err(act_error)?;
    Ok(async move {
        match work.await {
            Ok(acknowledged) => server_frame::Body::AcknowledgeAlarm(AcknowledgeAlarmReply { acknowledged }),
            Err(refusal) => act_error(refusal).into_body(),
        }
    })
}
