//! Writes to tags, checked and carried out the same way whoever writes (an operator's
//! WriteTags, a script's `write_tag`): the tag is known, the value of its type and inside its
//! range; a tag fed by the field gets the write through its source and changes only when the
//! field reports the new value back (carried out by [`Runtime::act`](crate::Runtime::act)). A
//! tag's `writable` flag is for operators: scripts are the integrator's code and may write any
//! tag (a calculated value, a note); a proposal may only name a tag that is also `proposable`.

use serde_json::Value;

use crate::objects::ObjectModel;
use plant_model::{TagType, TagValue};

/// The longest text written to a text tag, in characters.
const MAX_TEXT_CHARS: usize = 4096;

/// A value as the writer gave it, before it is fitted to the tag's type.
#[derive(Debug, Clone, PartialEq)]
pub enum GivenValue {
    /// A number with a fraction (or too large for an integer).
    Number(f64),
    /// A whole number.
    Integer(i64),
    /// True or false.
    Bool(bool),
    /// Text.
    Text(String),
}

impl GivenValue {
    /// A JSON value as given (a script's value), or what kind of value cannot be written.
    pub fn from_json(value: &Value) -> Result<Self, String> {
        match value {
            Value::Number(number) => Ok(number.as_i64().map_or_else(
                || Self::Number(number.as_f64().unwrap_or(f64::NAN)),
                Self::Integer,
            )),
            Value::Bool(boolean) => Ok(Self::Bool(*boolean)),
            Value::String(text) => Ok(Self::Text(text.clone())),
            Value::Null => Err("no value given (unit)".to_owned()),
            Value::Array(_) => Err("an array cannot be written to a tag".to_owned()),
            Value::Object(_) => Err("a map cannot be written to a tag".to_owned()),
        }
    }

    /// A tag value, given again (an approved proposal's).
    pub fn of(value: &TagValue) -> Self {
        match value {
            TagValue::Number(number) => Self::Number(*number),
            TagValue::Integer(integer) => Self::Integer(*integer),
            TagValue::Bool(boolean) => Self::Bool(*boolean),
            TagValue::Text(text) => Self::Text(text.to_string()),
        }
    }

    /// The value as JSON text, for the audit.
    pub fn json(&self) -> String {
        match self {
            Self::Number(number) => serde_json::json!(number).to_string(),
            Self::Integer(integer) => integer.to_string(),
            Self::Bool(boolean) => boolean.to_string(),
            Self::Text(text) => Value::String(text.clone()).to_string(),
        }
    }

    /// What was given, with its article, for a refusal.
    fn described(&self) -> String {
        match self {
            Self::Number(number) if !number.is_finite() => "a value that is not a finite number".to_owned(),
            Self::Number(number) => format!("the number {number}"),
            Self::Integer(integer) => format!("the integer {integer}"),
            Self::Bool(boolean) => format!("the bool {boolean}"),
            Self::Text(_) => "text".to_owned(),
        }
    }
}

/// Who writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    /// An operator (WriteTags): only tags marked `writable`.
    Operator,
    /// A solution script: any tag.
    Script,
    /// A proposal (the assistant's, an MCP client's, a script's) for an operator to approve:
    /// only tags marked both `writable` and `proposable`.
    Proposal,
}

/// A write that passed its checks.
#[derive(Debug, Clone)]
pub struct CheckedWrite {
    /// The tag's dotted name, as defined.
    pub tag: String,
    /// The value, fitted to the tag's type.
    pub value: TagValue,
    /// The MQTT source the write goes out through, for a tag fed by the field.
    pub source: Option<String>,
    /// The electronic signatures an operator's write of the tag takes.
    pub signing: plant_model::Signing,
}

/// Checks a write of `given` (or why what was given is no value) to the tag `name`: the write
/// to carry out, or why not.
pub fn check_write(
    objects: &ObjectModel,
    writer: Writer,
    name: &str,
    given: Result<&GivenValue, &str>,
) -> Result<CheckedWrite, String> {
    let tag = objects.tag(name).ok_or("unknown tag")?;
    let definition = tag.definition();
    match writer {
        Writer::Operator | Writer::Proposal if !definition.writable => return Err("not writable".to_owned()),
        Writer::Proposal if !definition.proposable => {
            return Err(
                "not proposable: the plant file does not let actions on this tag be proposed".to_owned(),
            );
        }
        _ => {}
    }
    let given = given?;
    let kind = definition.kind;
    let value = match (kind, given) {
        (TagType::Number, &GivenValue::Number(number)) if number.is_finite() => TagValue::Number(number),
        #[expect(
            clippy::cast_precision_loss,
            reason = "an integer written to a number tag is a measurement"
        )]
        (TagType::Number, &GivenValue::Integer(integer)) => TagValue::Number(integer as f64),
        (TagType::Integer, &GivenValue::Integer(integer)) => TagValue::Integer(integer),
        (TagType::Integer, &GivenValue::Number(number)) if number.fract() == 0.0 && number.abs() < 9.0e15 =>
        {
            #[expect(clippy::cast_possible_truncation, reason = "a whole number below 2^53")]
            TagValue::Integer(number as i64)
        }
        (TagType::Bool, &GivenValue::Bool(boolean)) => TagValue::Bool(boolean),
        (TagType::String, GivenValue::Text(text)) if text.chars().count() <= MAX_TEXT_CHARS => {
            if let Some(problem) = plant_model::text_value_problem(text)
                .or_else(|| plant_model::outside_values(&definition.allowed_values, text))
            {
                return Err(problem);
            }
            TagValue::Text(text.as_str().into())
        }
        (TagType::String, GivenValue::Text(_)) => {
            return Err(format!("text longer than {MAX_TEXT_CHARS} characters"));
        }
        (TagType::Integer, &GivenValue::Number(number)) if number.fract() == 0.0 => {
            return Err(format!(
                "an integer tag takes whole numbers within ±9e15 as written: {number} is outside them (write it as an integer)"
            ));
        }
        (TagType::Integer, &GivenValue::Number(number)) if number.is_finite() => {
            return Err(format!("an integer tag takes whole numbers: {number} is not one"));
        }
        (kind, given) => {
            return Err(format!(
                "{} tag cannot take {}",
                kind_name(kind),
                given.described()
            ));
        }
    };
    if let Some(number) = value
        .as_f64()
        .filter(|_| matches!(kind, TagType::Number | TagType::Integer))
        && (definition.range_low.is_some_and(|low| number < low)
            || definition.range_high.is_some_and(|high| number > high))
    {
        let end = |bound: Option<f64>| bound.map(|value| value.to_string()).unwrap_or_default();
        return Err(format!(
            "{number} is outside the range {}..{}",
            end(definition.range_low),
            end(definition.range_high)
        ));
    }
    Ok(CheckedWrite {
        tag: definition.name.clone(),
        value,
        source: definition.source.clone(),
        signing: definition.signing,
    })
}

/// A kind of tag with its article.
fn kind_name(kind: TagType) -> &'static str {
    match kind {
        TagType::Number => "a number",
        TagType::Integer => "an integer",
        TagType::Bool => "a bool",
        TagType::String => "a text",
    }
}
