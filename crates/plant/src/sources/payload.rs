//! What a plain UNS message says: a bare value (`12.4`, `true`, `Running`) or a small JSON
//! object `{"value": .., "timestamp": .., "quality": ..}`, read as the tag's type.
//!
//! Timestamps: RFC 3339 text (`2026-11-23T08:00:00.250Z`) or a number of milliseconds since
//! the Unix epoch. Quality: `"good"`, `"uncertain"`, `"bad"` (any case) or an OPC number
//! (192 Good, 64 Uncertain, 0 Bad). Missing parts: the time of arrival, and Good.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use plant_model::{Quality, TagType, TagValue};

use crate::objects::type_name;

/// The largest payload read; larger ones are refused unread.
pub(crate) const MAX_PAYLOAD_BYTES: usize = 64 * 1024;

/// A message read as a value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reading {
    pub(crate) value: TagValue,
    pub(crate) quality: Quality,
    /// When the publisher says the value was taken, if it says.
    pub(crate) timestamp: Option<SystemTime>,
}

/// Why a message could not be read; its kind is what the source counts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PayloadError {
    /// Over [`MAX_PAYLOAD_BYTES`].
    #[error("the payload is {0} bytes; at most {MAX_PAYLOAD_BYTES} are read")]
    TooLarge(usize),
    /// Not UTF-8 text.
    #[error("the payload is not UTF-8 text")]
    NotText,
    /// A JSON object without a usable `value`, or with a bad `timestamp` or `quality`.
    #[error("the JSON payload {0}")]
    BadJson(String),
    /// A value that is not of the tag's type.
    #[error("{0:?} is not a value for a {1} tag")]
    WrongType(String, &'static str),
}

impl PayloadError {
    /// The kind, as counted per source.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Self::TooLarge(_) => "too_large",
            Self::NotText => "not_text",
            Self::BadJson(_) => "bad_json",
            Self::WrongType(..) => "wrong_type",
        }
    }
}

/// Reads `payload` as a value of a tag of `kind`.
pub(crate) fn read(payload: &[u8], kind: TagType) -> Result<Reading, PayloadError> {
    if payload.len() > MAX_PAYLOAD_BYTES {
        return Err(PayloadError::TooLarge(payload.len()));
    }
    let text = std::str::from_utf8(payload).map_err(|_| PayloadError::NotText)?;
    let trimmed = text.trim();
    if trimmed.starts_with('{')
        && let Ok(Value::Object(object)) = serde_json::from_str::<Value>(trimmed)
    {
        let value = object
            .get("value")
            .ok_or_else(|| PayloadError::BadJson("has no \"value\"".to_owned()))?;
        let value = json_value(value, kind)?;
        let timestamp = object.get("timestamp").map(timestamp).transpose()?;
        let quality = object
            .get("quality")
            .map(quality)
            .transpose()?
            .unwrap_or(Quality::GOOD);
        return Ok(Reading {
            value,
            quality,
            timestamp,
        });
    }
    let value = match kind {
        // Text tags take the payload as it is; the others their trimmed literal.
        TagType::String => TagValue::Text(text.into()),
        _ => TagValue::parse(kind, trimmed)
            .ok_or_else(|| PayloadError::WrongType(excerpt(trimmed), type_name(kind)))?,
    };
    Ok(Reading {
        value,
        quality: Quality::GOOD,
        timestamp: None,
    })
}

fn excerpt(text: &str) -> String {
    text.chars().take(64).collect()
}

fn json_value(value: &Value, kind: TagType) -> Result<TagValue, PayloadError> {
    let wrong = || PayloadError::WrongType(excerpt(&value.to_string()), type_name(kind));
    match (kind, value) {
        (TagType::Number, Value::Number(number)) => number
            .as_f64()
            .filter(|number| number.is_finite())
            .map(TagValue::Number)
            .ok_or_else(wrong),
        (TagType::Integer, Value::Number(number)) => number
            .as_i64()
            .or_else(|| {
                number
                    .as_f64()
                    .filter(|number| number.fract() == 0.0 && number.abs() < 9.0e15)
                    .map(|number| {
                        #[expect(clippy::cast_possible_truncation, reason = "a whole number below 2^53")]
                        let whole = number as i64;
                        whole
                    })
            })
            .map(TagValue::Integer)
            .ok_or_else(wrong),
        (TagType::Bool, Value::Bool(flag)) => Ok(TagValue::Bool(*flag)),
        (TagType::String, Value::String(text)) => Ok(TagValue::Text(text.as_str().into())),
        // A number sent as text is still the number (some publishers quote everything).
        (_, Value::String(text)) => TagValue::parse(kind, text).ok_or_else(wrong),
        _ => Err(wrong()),
    }
}

fn timestamp(value: &Value) -> Result<SystemTime, PayloadError> {
    match value {
        Value::String(text) => humantime::parse_rfc3339_weak(text).map_err(|_| {
            PayloadError::BadJson(format!(
                "has a \"timestamp\" that is not RFC 3339: {:?}",
                excerpt(text)
            ))
        }),
        Value::Number(number) => match number.as_u64() {
            // Past the last year a timestamp can be written with: most likely micro- or
            // nanoseconds, which would put the reading millennia ahead.
            Some(millis) if millis > localai::LAST_RFC3339_MILLIS => Err(PayloadError::BadJson(format!(
                "has a \"timestamp\" of {millis} Unix milliseconds, after the year 9999 (sent in micro- or nanoseconds?)"
            ))),
            Some(millis) => Ok(UNIX_EPOCH + Duration::from_millis(millis)),
            None => Err(PayloadError::BadJson(
                "has a \"timestamp\" that is not whole Unix milliseconds".to_owned(),
            )),
        },
        _ => Err(PayloadError::BadJson(
            "has a \"timestamp\" that is neither RFC 3339 text nor Unix milliseconds".to_owned(),
        )),
    }
}

fn quality(value: &Value) -> Result<Quality, PayloadError> {
    match value {
        Value::String(text) => match text.to_ascii_lowercase().as_str() {
            "good" => Ok(Quality::GOOD),
            "uncertain" => Ok(Quality::UNCERTAIN),
            "bad" => Ok(Quality::BAD),
            _ => Err(PayloadError::BadJson(format!(
                "has a \"quality\" of {:?}: good, uncertain, bad or an OPC number",
                excerpt(text)
            ))),
        },
        Value::Number(number) => number
            .as_u64()
            .and_then(|code| u8::try_from(code).ok())
            .map(Quality)
            .ok_or_else(|| PayloadError::BadJson("has a \"quality\" number outside 0..255".to_owned())),
        _ => Err(PayloadError::BadJson(
            "has a \"quality\" that is neither text nor a number".to_owned(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_values_are_read_as_the_tags_type() {
        let number = read(b" 12.4\n", TagType::Number).expect("a number");
        assert_eq!(
            (number.value, number.quality, number.timestamp),
            (TagValue::Number(12.4), Quality::GOOD, None)
        );
        assert_eq!(
            read(b"true", TagType::Bool).expect("bool").value,
            TagValue::Bool(true)
        );
        assert_eq!(
            read(b"1284", TagType::Integer).expect("integer").value,
            TagValue::Integer(1284)
        );
        assert_eq!(
            read(b"Auto", TagType::String).expect("text").value,
            TagValue::Text("Auto".into())
        );
        assert_eq!(
            read(b"twelve", TagType::Number),
            Err(PayloadError::WrongType("twelve".into(), "number"))
        );
    }

    #[test]
    fn json_objects_carry_time_and_quality() {
        let reading = read(
            br#"{"value": 62.5, "timestamp": "2026-11-23T08:00:00.250Z", "quality": "uncertain"}"#,
            TagType::Number,
        )
        .expect("reads");
        assert_eq!(reading.value, TagValue::Number(62.5));
        assert_eq!(reading.quality, Quality::UNCERTAIN);
        assert_eq!(
            reading.timestamp,
            Some(UNIX_EPOCH + Duration::from_millis(1_795_420_800_250))
        );
        let millis = read(
            br#"{"value": "7", "timestamp": 1795420800250, "quality": 0}"#,
            TagType::Integer,
        )
        .expect("reads");
        assert_eq!(
            (millis.value, millis.quality),
            (TagValue::Integer(7), Quality::BAD)
        );
        for (bad, kind) in [
            (&br#"{"val": 1}"#[..], "bad_json"),
            (br#"{"value": 1, "timestamp": "yesterday"}"#, "bad_json"),
            (br#"{"value": 1, "timestamp": 1795420800250000}"#, "bad_json"),
            (br#"{"value": 1, "quality": "fine"}"#, "bad_json"),
            (br#"{"value": true}"#, "wrong_type"),
            (b"\xff\xfe", "not_text"),
        ] {
            let error = read(bad, TagType::Number).expect_err("refused");
            assert_eq!(error.kind(), kind, "{error}");
        }
        let micros = read(br#"{"value": 1, "timestamp": 1795420800250000}"#, TagType::Number)
            .expect_err("a timestamp in microseconds is refused");
        assert!(micros.to_string().contains("after the year 9999"), "{micros}");
        let last = read(br#"{"value": 1, "timestamp": 253402300799999}"#, TagType::Number)
            .expect("the last millisecond of 9999 is a time");
        assert_eq!(
            last.timestamp.map(localai::iso8601_millis).as_deref(),
            Some("9999-12-31T23:59:59.999Z")
        );
        let huge = vec![b'1'; MAX_PAYLOAD_BYTES + 1];
        assert_eq!(
            read(&huge, TagType::Number).map_err(|error| error.kind()),
            Err("too_large")
        );
    }
}
