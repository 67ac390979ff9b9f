//! TagValuesAt: what many tags were at a past instant, from the historian, for a panel's
//! "what did the plant read when it tripped" and reports: each tag's last recorded sample at
//! or before it, read in one snapshot.

use std::future::Future;
use std::sync::Arc;
use std::time::SystemTime;

use tserver_proto::v1::{ErrorCode, TagValueAt, TagValuesAtReply, TagValuesAtRequest, server_frame};

use super::historian;
use super::tag_history::within_budget;
use super::to_proto::{CallError, from_epoch_ms, history_sample, short};
use plant::Runtime;
use plant_model::TagType;

/// The most tags one call names (stated in `proto/tserver.proto`).
pub(crate) const MAX_TAGS: usize = 1000;

/// Checks the call now; the returned future queries the historian.
pub(crate) fn apply(
    request: &TagValuesAtRequest,
    runtime: &Runtime,
) -> Result<impl Future<Output = server_frame::Body> + Send + 'static, CallError> {
    let invalid = |message: String| CallError::new(ErrorCode::InvalidArgument, message);
    if request.names.is_empty() || request.names.len() > MAX_TAGS {
        return Err(invalid(format!(
            "tag values at: {} names given; give 1 to {MAX_TAGS}",
            request.names.len()
        )));
    }
    let instant = match request.at_ms {
        0 => SystemTime::now(),
        at => from_epoch_ms(at).ok_or_else(|| {
            invalid(format!(
                "tag values at: at_ms {at} is before 1970 or out of range"
            ))
        })?,
    };
    let plant = runtime.plant().reader();
    let objects = plant.objects();
    let mut tags: Vec<(String, TagType)> = Vec::with_capacity(request.names.len());
    for (index, name) in request.names.iter().enumerate() {
        let tag = objects.tag(name).ok_or_else(|| {
            invalid(format!(
                "tag values at: names[{index}]: no tag named {:?}",
                short(name)
            ))
        })?;
        tags.push((tag.definition().name.clone(), tag.definition().kind));
    }
    let history = Arc::clone(plant.historian());
    Ok(async move {
        let asked: Vec<(String, TagType)> = tags.clone();
        let samples = historian::query("tag values at", move || {
            let named: Vec<(&str, TagType)> =
                asked.iter().map(|(name, kind)| (name.as_str(), *kind)).collect();
            history.values_at(&named, instant)
        })
        .await;
        let samples = match samples {
            Ok(samples) => samples,
            Err(reply) => return reply,
        };
        let (values, truncated) =
            within_budget(
                tags.into_iter()
                    .zip(samples)
                    .map(|((name, _), sample)| TagValueAt {
                        name,
                        sample: sample.as_ref().map(history_sample),
                    }),
            );
        server_frame::Body::TagValuesAt(TagValuesAtReply { values, truncated })
    })
}
