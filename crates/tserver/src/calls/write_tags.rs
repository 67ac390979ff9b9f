//! WriteTags: operators set writable tags, through the acting path (each write checked on its
//! own, all of them audited before any is written).

use std::future::Future;

use tserver_proto::v1::{TagWriteResult, WriteTagsReply, WriteTagsRequest, server_frame, tag_write};

use super::audit::{act_error, signatures};
use super::context::ConnectionContext;
use super::to_proto::{CallError, write_outcome};
use plant::Runtime;
use plant::actions::{RequestedWrite, WriteTags};
use plant::tag_writes::GivenValue;

/// Checks the call now; the returned future audits and writes.
pub(crate) fn apply(
    request: WriteTagsRequest,
    context: &ConnectionContext,
    runtime: &Runtime,
) -> Result<impl Future<Output = server_frame::Body> + Send + 'static, CallError> {
    let actor = context.actor()?;
    let names: Vec<String> = request.writes.iter().map(|write| write.name.clone()).collect();
    let writes = request
        .writes
        .into_iter()
        .map(|write| RequestedWrite {
            tag: write.name,
            value: write
                .value
                .map(given_value)
                .ok_or_else(|| "no value given".to_owned()),
        })
        .collect();
    let act = WriteTags {
        writes,
        signatures: signatures(request.signatures)?,
    };
    let work = runtime.act(actor, act, context).map_err(act_error)?;
    Ok(async move {
        match work.await {
            Ok(done) => server_frame::Body::WriteTags(WriteTagsReply {
                results: names
                    .into_iter()
                    .zip(done)
                    .map(|(name, done)| {
                        let (outcome, error) = write_outcome(done);
                        TagWriteResult {
                            name,
                            error,
                            outcome: outcome.into(),
                        }
                    })
                    .collect(),
            }),
            Err(refusal) => act_error(refusal).into_body(),
        }
    })
}

/// A wire value as given.
fn given_value(value: tag_write::Value) -> GivenValue {
    match value {
        tag_write::Value::Number(number) => GivenValue::Number(number),
        tag_write::Value::Integer(integer) => GivenValue::Integer(integer),
        tag_write::Value::Boolean(boolean) => GivenValue::Bool(boolean),
        tag_write::Value::Text(text) => GivenValue::Text(text),
    }
}
