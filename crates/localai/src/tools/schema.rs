//! Argument validation against the JSON-schema subset tool definitions use: `type`,
//! `properties`, `required`, `additionalProperties: false`, `enum`, `minimum`, `maximum`,
//! `minLength`, `maxLength` and `items`. Errors name the argument path, so a model can fix
//! its call.

use std::fmt;

use serde_json::Value;

use super::ToolError;

/// Checks `arguments` against `schema`.
pub fn validate_arguments(schema: &Value, arguments: &Value) -> Result<(), ToolError> {
    ArgumentSchema::new(schema).check(arguments)
}

/// A tool's parameter schema, read once when the tool is defined: a call's check walks these
/// fields rather than looking every keyword up in the schema's JSON at every level (a hash of
/// the keyword each time). A keyword of the wrong JSON type is ignored, as it was when read.
#[derive(Debug, Clone, Default)]
pub(crate) struct ArgumentSchema {
    /// `type`: a type name (an unknown one accepts every value).
    kind: Option<Box<str>>,
    /// `enum`.
    allowed: Option<Vec<Value>>,
    minimum: Option<f64>,
    maximum: Option<f64>,
    min_length: Option<u64>,
    max_length: Option<u64>,
    /// `items`: the schema of an array's elements.
    items: Option<Box<ArgumentSchema>>,
    /// `properties`, in the schema's order.
    properties: Option<Vec<(Box<str>, ArgumentSchema)>>,
    /// `required`: the names that must be present.
    required: Vec<Box<str>>,
    /// `additionalProperties: false`.
    closed: bool,
}

impl ArgumentSchema {
    /// Reads `schema` (a value that is not an object accepts everything).
    pub(crate) fn new(schema: &Value) -> Self {
        let number = |key: &str| schema.get(key).and_then(Value::as_f64);
        let count = |key: &str| schema.get(key).and_then(Value::as_u64);
        Self {
            kind: schema.get("type").and_then(Value::as_str).map(Box::from),
            allowed: schema.get("enum").and_then(Value::as_array).cloned(),
            minimum: number("minimum"),
            maximum: number("maximum"),
            min_length: count("minLength"),
            max_length: count("maxLength"),
            items: schema.get("items").map(|items| Box::new(Self::new(items))),
            properties: schema
                .get("properties")
                .and_then(Value::as_object)
                .map(|properties| {
                    properties
                        .iter()
                        .map(|(name, property)| (Box::from(name.as_str()), Self::new(property)))
                        .collect()
                }),
            required: schema
                .get("required")
                .and_then(Value::as_array)
                .map(|names| names.iter().filter_map(Value::as_str).map(Box::from).collect())
                .unwrap_or_default(),
            closed: schema.get("additionalProperties") == Some(&Value::Bool(false)),
        }
    }

    /// Checks a call's `arguments`.
    pub(crate) fn check(&self, arguments: &Value) -> Result<(), ToolError> {
        self.check_at(arguments, &Path::Arguments)
    }

    fn check_at(&self, value: &Value, path: &Path<'_>) -> Result<(), ToolError> {
        let fail = |message: String| Err(ToolError::invalid_arguments(message));
        if let Some(expected) = self.kind.as_deref() {
            let matches = match expected {
                "object" => value.is_object(),
                "array" => value.is_array(),
                "string" => value.is_string(),
                "integer" => value.is_i64() || value.is_u64(),
                "number" => value.is_number(),
                "boolean" => value.is_boolean(),
                "null" => value.is_null(),
                _ => true,
            };
            if !matches {
                return fail(format!("{path} must be of type {expected}"));
            }
        }
        if let Some(allowed) = &self.allowed
            && !allowed.contains(value)
        {
            return fail(format!("{path} must be one of {}", Value::Array(allowed.clone())));
        }
        if let Some(number) = value.as_f64() {
            if let Some(minimum) = self.minimum
                && number < minimum
            {
                return fail(format!("{path} must be at least {minimum}"));
            }
            if let Some(maximum) = self.maximum
                && number > maximum
            {
                return fail(format!("{path} must be at most {maximum}"));
            }
        }
        if let Some(text) = value.as_str()
            && (self.min_length.is_some() || self.max_length.is_some())
        {
            let length = text.chars().count() as u64;
            if let Some(min) = self.min_length
                && length < min
            {
                return fail(format!("{path} must have at least {min} characters"));
            }
            if let Some(max) = self.max_length
                && length > max
            {
                return fail(format!("{path} must have at most {max} characters"));
            }
        }
        if let (Some(items), Some(elements)) = (&self.items, value.as_array()) {
            for (index, element) in elements.iter().enumerate() {
                items.check_at(element, &Path::Index(path, index))?;
            }
        }
        if let Some(object) = value.as_object() {
            let known: Vec<&str> = self
                .properties
                .iter()
                .flatten()
                .map(|(name, _)| &**name)
                .collect();
            let unknown: Vec<&str> = object
                .keys()
                .map(String::as_str)
                .filter(|name| !known.contains(name))
                .collect();
            // A misspelt key is why a required one seems missing: it is named first.
            if self.closed
                && let Some(name) = unknown.first()
            {
                let hint = nearest(name, &known)
                    .map(|near| format!("; did you mean `{near}`?"))
                    .unwrap_or_default();
                return fail(format!("{path}: unknown key `{name}`{hint}"));
            }
            for name in &self.required {
                if !object.contains_key(&**name) {
                    let hint = unknown
                        .iter()
                        .find(|candidate| nearest(candidate, &[&**name]).is_some())
                        .map(|near| format!(" (unknown key `{near}`; did you mean `{name}`?)"))
                        .unwrap_or_default();
                    return fail(format!("{path}.{name} is required{hint}"));
                }
            }
            for (name, element) in object {
                let property = self.properties.as_ref().and_then(|properties| {
                    properties
                        .iter()
                        .find(|(known, _)| **known == **name)
                        .map(|(_, property)| property)
                });
                if let Some(property) = property {
                    property.check_at(element, &Path::Field(path, name))?;
                }
            }
        }
        Ok(())
    }
}

/// The known key `word` is most likely a misspelling of: the closest by Jaro-Winkler
/// similarity, if close enough.
fn nearest<'k>(word: &str, known: &[&'k str]) -> Option<&'k str> {
    known
        .iter()
        .map(|candidate| {
            (
                strsim::jaro_winkler(&word.to_lowercase(), &candidate.to_lowercase()),
                *candidate,
            )
        })
        .filter(|(similarity, _)| *similarity >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, candidate)| candidate)
}

/// Where in the arguments a value is, written out only for an error message.
enum Path<'a> {
    Arguments,
    Field(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Arguments => f.write_str("arguments"),
            Self::Field(parent, name) => write!(f, "{parent}.{name}"),
            Self::Index(parent, index) => write!(f, "{parent}[{index}]"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn validates_the_subset_with_paths_in_the_messages() {
        let schema = json!({
            "type": "object",
            "properties": {
                "tag": {"type": "string", "minLength": 1},
                "max_results": {"type": "integer", "minimum": 1, "maximum": 500},
                "states": {"type": "array", "items": {"enum": ["active", "acknowledged"]}}
            },
            "required": ["tag"],
            "additionalProperties": false
        });
        assert!(validate_arguments(&schema, &json!({"tag": "Pump1.FlowRate", "max_results": 10})).is_ok());
        let cases = [
            (json!("Pump1"), "arguments must be of type object"),
            (json!({}), "arguments.tag is required"),
            (
                json!({"tag": ""}),
                "arguments.tag must have at least 1 characters",
            ),
            (
                json!({"tag": "x", "max_results": 0}),
                "arguments.max_results must be at least 1",
            ),
            (
                json!({"tag": "x", "max_results": 2.5}),
                "arguments.max_results must be of type integer",
            ),
            (
                json!({"tag": "x", "states": ["gone"]}),
                "arguments.states[0] must be one of",
            ),
            (
                json!({"tag": "x", "colour": "red"}),
                "arguments: unknown key `colour`",
            ),
            (
                json!({"tagg": "x"}),
                "arguments: unknown key `tagg`; did you mean `tag`?",
            ),
            (
                json!({"tag": "x", "max_result": 3}),
                "arguments: unknown key `max_result`; did you mean `max_results`?",
            ),
        ];
        for (arguments, expected) in cases {
            let error = validate_arguments(&schema, &arguments).expect_err("invalid");
            assert!(
                error.message.starts_with(expected),
                "{arguments}: {}",
                error.message
            );
            assert_eq!(error.kind, "invalid_arguments");
        }
        // A schema open to other keys still names the likely misspelling of a missing one.
        let open = json!({"type": "object", "properties": {"tag": {"type": "string"}}, "required": ["tag"]});
        let error = validate_arguments(&open, &json!({"tagg": "x"})).expect_err("invalid");
        assert_eq!(
            error.message,
            "arguments.tag is required (unknown key `tagg`; did you mean `tag`?)"
        );
    }
}
