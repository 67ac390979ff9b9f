//! ReadTags: current values of tags for a display panel, served from the live object model.

use tserver_proto::v1::{ErrorCode, ReadTagsReply, ReadTagsRequest, TagReading, server_frame};

use super::to_proto::{CallError, sample_reading, unknown_reading};
use plant::objects::ObjectModel;

/// The most names one call may ask for (stated in `proto/tserver.proto`).
pub(crate) const MAX_NAMES: usize = 1000;

pub(crate) fn apply(
    request: &ReadTagsRequest,
    objects: &ObjectModel,
) -> Result<server_frame::Body, CallError> {
    if request.names.is_empty() {
        return Err(CallError::new(
            ErrorCode::InvalidArgument,
            "no tag names: ask for 1 to 1000 names",
        ));
    }
    if request.names.len() > MAX_NAMES {
        return Err(CallError::new(
            ErrorCode::InvalidArgument,
            format!(
                "{} names requested; at most {MAX_NAMES} per call",
                request.names.len()
            ),
        ));
    }
    let readings = request.names.iter().map(|name| reading(name, objects)).collect();
    Ok(server_frame::Body::ReadTags(ReadTagsReply { readings }))
}

fn reading(name: &str, objects: &ObjectModel) -> TagReading {
    match objects.tag(name) {
        Some(tag) => sample_reading(name, tag, &tag.current()),
        None => unknown_reading(name),
    }
}
