//! A metric's value as its data type says to read it (section 6.4.16 of the specification):
//! signed integers travel two's-complement in the unsigned fields, text in `string_value`.

use crate::proto::DataType;
use crate::proto::payload::metric::Value;

/// One metric value, read.
#[derive(Debug, Clone, PartialEq)]
pub enum MetricValue {
    /// Int8..Int64, UInt8..UInt32, and DateTime (milliseconds since the Unix epoch).
    Integer(i64),
    /// UInt64 (which may not fit an `i64`).
    Unsigned(u64),
    /// Float and Double.
    Float(f64),
    /// Boolean.
    Bool(bool),
    /// String, Text and UUID.
    Text(String),
    /// `is_null`: the publisher has no value.
    Null,
}

/// Why a metric's value could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ValueProblem {
    /// A type this reader does not take (datasets, templates, arrays, files, bytes).
    Unsupported(i32),
    /// The value field does not match the data type, or is missing.
    Mismatch,
}

impl MetricValue {
    /// Reads `value` as data type `datatype` (a [`DataType`] number); `None` is a metric that
    /// carries no value, only its name or alias.
    pub(crate) fn read(datatype: i32, value: Option<&Value>, is_null: bool) -> Result<Self, ValueProblem> {
        if is_null {
            return Ok(Self::Null);
        }
        let kind = DataType::try_from(datatype).map_err(|_| ValueProblem::Unsupported(datatype))?;
        let value = value.ok_or(ValueProblem::Mismatch)?;
        #[expect(
            clippy::cast_possible_wrap,
            clippy::cast_possible_truncation,
            reason = "the specification carries signed integers two's-complement in unsigned fields"
        )]
        let read = match (kind, value) {
            (DataType::Int8, Value::IntValue(raw)) => Self::Integer(i64::from(*raw as u8 as i8)),
            (DataType::Int16, Value::IntValue(raw)) => Self::Integer(i64::from(*raw as u16 as i16)),
            (DataType::Int32, Value::IntValue(raw)) => Self::Integer(i64::from(*raw as i32)),
            (DataType::Int64 | DataType::DateTime, Value::LongValue(raw)) => Self::Integer(*raw as i64),
            (DataType::UInt8 | DataType::UInt16 | DataType::UInt32, Value::IntValue(raw)) => {
                Self::Integer(i64::from(*raw))
            }
            // Some publishers put small unsigned types in long_value.
            (DataType::UInt8 | DataType::UInt16 | DataType::UInt32, Value::LongValue(raw)) => {
                Self::Unsigned(*raw)
            }
            (DataType::UInt64, Value::LongValue(raw)) => Self::Unsigned(*raw),
            (DataType::Float, Value::FloatValue(raw)) => Self::Float(f32_as_decimal(*raw)),
            (DataType::Double, Value::DoubleValue(raw)) => Self::Float(*raw),
            (DataType::Boolean, Value::BooleanValue(raw)) => Self::Bool(*raw),
            (DataType::String | DataType::Text | DataType::Uuid, Value::StringValue(raw)) => {
                Self::Text(raw.clone())
            }
            (
                DataType::Unknown
                | DataType::Int8
                | DataType::Int16
                | DataType::Int32
                | DataType::Int64
                | DataType::UInt8
                | DataType::UInt16
                | DataType::UInt32
                | DataType::UInt64
                | DataType::Float
                | DataType::Double
                | DataType::Boolean
                | DataType::String
                | DataType::DateTime
                | DataType::Text
                | DataType::Uuid,
                _,
            ) => return Err(ValueProblem::Mismatch),
            _ => return Err(ValueProblem::Unsupported(datatype)),
        };
        Ok(read)
    }

    /// The data type a value field implies when the metric names none (DATA messages usually
    /// leave it to the BIRTH).
    pub(crate) fn implied_type(value: &Value) -> i32 {
        let kind = match value {
            Value::IntValue(_) => DataType::Int32,
            Value::LongValue(_) => DataType::Int64,
            Value::FloatValue(_) => DataType::Float,
            Value::DoubleValue(_) => DataType::Double,
            Value::BooleanValue(_) => DataType::Boolean,
            Value::StringValue(_) => DataType::String,
            Value::BytesValue(_) => DataType::Bytes,
            Value::DatasetValue(_) => DataType::DataSet,
            Value::TemplateValue(_) => DataType::Template,
            Value::ExtensionValue(_) => DataType::Unknown,
        };
        kind as i32
    }
}

/// The number a 32-bit float metric stands for: its shortest decimal, so `42.8f32` reads as
/// 42.8, not as the 42.79999923706055 widening gives (the Modbus codec's `f32_as_decimal`
/// decides the same for registers). Non-finite floats stay as they are.
fn f32_as_decimal(value: f32) -> f64 {
    if !value.is_finite() {
        return f64::from(value);
    }
    value.to_string().parse().unwrap_or(f64::from(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(kind: DataType, value: Value) -> Result<MetricValue, ValueProblem> {
        MetricValue::read(kind as i32, Some(&value), false)
    }

    #[test]
    fn a_float_metric_reads_as_the_decimal_it_holds() {
        assert_eq!(
            read(DataType::Float, Value::FloatValue(42.8)),
            Ok(MetricValue::Float(42.8))
        );
        assert_eq!(
            read(DataType::Double, Value::DoubleValue(42.800_000_000_000_004)),
            Ok(MetricValue::Float(42.800_000_000_000_004)),
            "a double is as sent"
        );
    }

    #[test]
    fn signed_integers_come_back_negative() {
        assert_eq!(
            read(DataType::Int8, Value::IntValue(0xFF)),
            Ok(MetricValue::Integer(-1))
        );
        assert_eq!(
            read(DataType::Int16, Value::IntValue(0xFFFE)),
            Ok(MetricValue::Integer(-2))
        );
        assert_eq!(
            read(DataType::Int32, Value::IntValue(u32::MAX - 2)),
            Ok(MetricValue::Integer(-3))
        );
        assert_eq!(
            read(DataType::Int64, Value::LongValue(u64::MAX)),
            Ok(MetricValue::Integer(-1))
        );
        assert_eq!(
            read(DataType::UInt32, Value::IntValue(u32::MAX)),
            Ok(MetricValue::Integer(4_294_967_295))
        );
    }

    #[test]
    fn floats_booleans_and_text_read_as_themselves() {
        assert_eq!(
            read(DataType::Float, Value::FloatValue(1.5)),
            Ok(MetricValue::Float(1.5))
        );
        assert_eq!(
            read(DataType::Double, Value::DoubleValue(-2.25)),
            Ok(MetricValue::Float(-2.25))
        );
        assert_eq!(
            read(DataType::Boolean, Value::BooleanValue(true)),
            Ok(MetricValue::Bool(true))
        );
        assert_eq!(
            read(DataType::Text, Value::StringValue("Running".into())),
            Ok(MetricValue::Text("Running".into()))
        );
        assert_eq!(
            MetricValue::read(DataType::Double as i32, None, true),
            Ok(MetricValue::Null)
        );
    }

    #[test]
    fn a_mismatched_field_or_an_unsupported_type_is_refused() {
        assert_eq!(
            read(DataType::Boolean, Value::IntValue(1)),
            Err(ValueProblem::Mismatch)
        );
        assert_eq!(
            read(DataType::Bytes, Value::BytesValue(vec![1])),
            Err(ValueProblem::Unsupported(DataType::Bytes as i32))
        );
        assert_eq!(
            MetricValue::read(999, Some(&Value::IntValue(1)), false),
            Err(ValueProblem::Unsupported(999))
        );
        assert_eq!(
            MetricValue::read(DataType::Double as i32, None, false),
            Err(ValueProblem::Mismatch)
        );
    }
}
