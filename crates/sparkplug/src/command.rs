//! What a host application publishes to edge nodes: the rebirth request (an NCMD setting
//! `Node Control/Rebirth`) and writes (an NCMD or DCMD carrying the metric's new value).

use prost::Message as _;

use crate::decoder::Target;
use crate::proto::payload::Metric;
use crate::proto::payload::metric::Value;
use crate::proto::{DataType, Payload};
use crate::topic::{MessageKind, Topic};
use crate::value::MetricValue;

/// The metric an NCMD sets to ask a node for its births again.
pub const REBIRTH_METRIC: &str = "Node Control/Rebirth";

/// The topic and payload asking `group`/`node` to publish its NBIRTH and DBIRTHs again.
pub fn rebirth_request(group: &str, node: &str, now_ms: u64) -> (String, Vec<u8>) {
    let topic = Topic {
        group: group.to_owned(),
        kind: MessageKind::NCmd,
        node: node.to_owned(),
        device: None,
    };
    let payload = Payload {
        timestamp: Some(now_ms),
        metrics: vec![Metric {
            name: Some(REBIRTH_METRIC.to_owned()),
            timestamp: Some(now_ms),
            datatype: Some(DataType::Boolean as u32),
            value: Some(Value::BooleanValue(true)),
            ..Metric::default()
        }],
        ..Payload::default()
    };
    (topic.to_string(), payload.encode_to_vec())
}

/// The topic and payload setting metric `name` of `target` to `value`: an NCMD for a node's
/// metric, a DCMD for a device's. `datatype` is the type its birth declared (the value is sent
/// as that type when it fits); without one the value's own type is used. `None` when the value
/// does not fit the declared type.
pub fn write_command(
    target: &Target,
    name: &str,
    value: &MetricValue,
    datatype: Option<i32>,
    now_ms: u64,
) -> Option<(String, Vec<u8>)> {
    let (datatype, wire) = encode(value, datatype)?;
    let topic = Topic {
        group: target.group.clone(),
        kind: if target.device.is_some() {
            MessageKind::DCmd
        } else {
            MessageKind::NCmd
        },
        node: target.node.clone(),
        device: target.device.clone(),
    };
    let payload = Payload {
        timestamp: Some(now_ms),
        metrics: vec![Metric {
            name: Some(name.to_owned()),
            timestamp: Some(now_ms),
            datatype: Some(datatype as u32),
            value: Some(wire),
            ..Metric::default()
        }],
        ..Payload::default()
    };
    Some((topic.to_string(), payload.encode_to_vec()))
}

/// The wire value of `value` as data type `datatype` (or its own).
#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "signed integers travel two's-complement; ranges are checked first"
)]
fn encode(value: &MetricValue, datatype: Option<i32>) -> Option<(DataType, Value)> {
    let own = match value {
        MetricValue::Integer(_) => DataType::Int64,
        MetricValue::Unsigned(_) => DataType::UInt64,
        MetricValue::Float(_) => DataType::Double,
        MetricValue::Bool(_) => DataType::Boolean,
        MetricValue::Text(_) | MetricValue::Null => DataType::String,
    };
    let kind = datatype
        .and_then(|datatype| DataType::try_from(datatype).ok())
        .unwrap_or(own);
    let integer = match value {
        MetricValue::Integer(integer) => Some(*integer),
        MetricValue::Unsigned(integer) => i64::try_from(*integer).ok(),
        _ => None,
    };
    let in_range = |low: i64, high: i64| integer.filter(|value| (low..=high).contains(value));
    let wire = match (kind, value) {
        (DataType::Int8, _) => Value::IntValue(in_range(-128, 127)? as i32 as u32),
        (DataType::Int16, _) => Value::IntValue(in_range(-32_768, 32_767)? as i32 as u32),
        (DataType::Int32, _) => {
            Value::IntValue(in_range(i64::from(i32::MIN), i64::from(i32::MAX))? as i32 as u32)
        }
        (DataType::UInt8, _) => Value::IntValue(in_range(0, 255)? as u32),
        (DataType::UInt16, _) => Value::IntValue(in_range(0, 65_535)? as u32),
        (DataType::UInt32, _) => Value::IntValue(in_range(0, i64::from(u32::MAX))? as u32),
        (DataType::Int64 | DataType::DateTime, MetricValue::Integer(integer)) => {
            Value::LongValue(*integer as u64)
        }
        (DataType::UInt64, MetricValue::Unsigned(integer)) => Value::LongValue(*integer),
        (DataType::UInt64, MetricValue::Integer(integer)) => Value::LongValue(u64::try_from(*integer).ok()?),
        (DataType::Float, MetricValue::Float(number)) => Value::FloatValue(*number as f32),
        (DataType::Double, MetricValue::Float(number)) => Value::DoubleValue(*number),
        (DataType::Float, MetricValue::Integer(integer)) => Value::FloatValue(*integer as f32),
        (DataType::Double, MetricValue::Integer(integer)) => Value::DoubleValue(*integer as f64),
        (DataType::Boolean, MetricValue::Bool(flag)) => Value::BooleanValue(*flag),
        (DataType::String | DataType::Text, MetricValue::Text(text)) => Value::StringValue(text.clone()),
        _ => return None,
    };
    Some((kind, wire))
}
