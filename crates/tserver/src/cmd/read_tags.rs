//! ReadTags: current values of tags for a display panel, served from the live object model.

use std::time::UNIX_EPOCH;

use tserver_proto::v1::{ErrorCode, ReadTagsReply, ReadTagsRequest, TagReading, server_frame, tag_reading};

use super::CallError;
use crate::objects::{ObjectModel, Tag, TagSample};
use plant_model::TagValue;

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

/// The reading of a name no tag has.
pub(crate) fn unknown_reading(name: &str) -> TagReading {
    TagReading {
        name: name.to_owned(),
        error: "unknown tag".to_owned(),
        ..TagReading::default()
    }
}

/// A tag's sample as a display reads it, under the name it was asked by.
pub(crate) fn sample_reading(name: &str, tag: &Tag, sample: &TagSample) -> TagReading {
    let value = match &sample.value {
        TagValue::Number(value) => tag_reading::Value::Number(*value),
        TagValue::Integer(value) => tag_reading::Value::Integer(*value),
        TagValue::Bool(value) => tag_reading::Value::Boolean(*value),
        TagValue::Text(value) => tag_reading::Value::Text(value.to_string()),
    };
    let timestamp_ms = sample
        .timestamp
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| i64::try_from(since.as_millis()).unwrap_or(i64::MAX));
    TagReading {
        name: name.to_owned(),
        value: Some(value),
        quality: u32::from(sample.quality.0),
        timestamp_ms,
        units: tag.definition().units.clone(),
        error: String::new(),
    }
}
