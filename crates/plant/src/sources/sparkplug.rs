//! Sparkplug B metric values as tag values, and back for writes: a number tag takes any
//! numeric metric, an integer tag a whole one, a bool tag a Boolean, a text tag a String.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sparkplug::MetricValue;

use plant_model::{TagType, TagValue};

/// The tag value `value` gives a tag of `kind`; `None` when it is not of the tag's type
/// (`Null` is handled by the caller: it is a quality, not a value).
pub(crate) fn tag_value(value: &MetricValue, kind: TagType) -> Option<TagValue> {
    #[expect(
        clippy::cast_precision_loss,
        reason = "a numeric metric read into a number tag is a measurement"
    )]
    let read = match (kind, value) {
        (TagType::Number, MetricValue::Float(number)) if number.is_finite() => TagValue::Number(*number),
        (TagType::Number, MetricValue::Integer(integer)) => TagValue::Number(*integer as f64),
        (TagType::Number, MetricValue::Unsigned(integer)) => TagValue::Number(*integer as f64),
        (TagType::Integer, MetricValue::Integer(integer)) => TagValue::Integer(*integer),
        (TagType::Integer, MetricValue::Unsigned(integer)) => {
            TagValue::Integer(i64::try_from(*integer).ok()?)
        }
        (TagType::Integer, MetricValue::Float(number)) if number.fract() == 0.0 && number.abs() < 9.0e15 =>
        {
            #[expect(clippy::cast_possible_truncation, reason = "a whole number below 2^53")]
            TagValue::Integer(*number as i64)
        }
        (TagType::Bool, MetricValue::Bool(flag)) => TagValue::Bool(*flag),
        (TagType::String, MetricValue::Text(text)) => TagValue::Text(text.as_str().into()),
        _ => return None,
    };
    Some(read)
}

/// The metric value a write of `value` sends.
pub(crate) fn metric_value(value: &TagValue) -> MetricValue {
    match value {
        TagValue::Number(number) => MetricValue::Float(*number),
        TagValue::Integer(integer) => MetricValue::Integer(*integer),
        TagValue::Bool(flag) => MetricValue::Bool(*flag),
        TagValue::Text(text) => MetricValue::Text(text.to_string()),
    }
}

/// A Sparkplug time (milliseconds since the Unix epoch).
pub(crate) fn time_of(milliseconds: u64) -> SystemTime {
    UNIX_EPOCH
        .checked_add(Duration::from_millis(milliseconds))
        .unwrap_or_else(SystemTime::now)
}

/// Now, as a Sparkplug time.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_read_into_tags_of_their_type_only() {
        assert_eq!(
            tag_value(&MetricValue::Integer(3), TagType::Number),
            Some(TagValue::Number(3.0))
        );
        assert_eq!(
            tag_value(&MetricValue::Float(4.0), TagType::Integer),
            Some(TagValue::Integer(4))
        );
        assert_eq!(tag_value(&MetricValue::Float(4.5), TagType::Integer), None);
        assert_eq!(
            tag_value(&MetricValue::Unsigned(u64::MAX), TagType::Integer),
            None
        );
        assert_eq!(tag_value(&MetricValue::Float(f64::NAN), TagType::Number), None);
        assert_eq!(tag_value(&MetricValue::Text("on".into()), TagType::Bool), None);
        assert_eq!(
            tag_value(&MetricValue::Bool(true), TagType::Bool),
            Some(TagValue::Bool(true))
        );
        assert_eq!(
            metric_value(&TagValue::Text("x".into())),
            MetricValue::Text("x".into())
        );
    }
}
