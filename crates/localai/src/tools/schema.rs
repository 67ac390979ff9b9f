//! Argument validation against the JSON-schema subset tool definitions use: `type`,
//! `properties`, `required`, `additionalProperties: false`, `enum`, `minimum`, `maximum`,
//! `minLength`, `maxLength` and `items`. Errors name the argument path, so a model can fix
//! its call.

use serde_json::Value;

use super::ToolError;

/// Checks `arguments` against `schema`.
pub fn validate_arguments(schema: &Value, arguments: &Value) -> Result<(), ToolError> {
    check(schema, arguments, "arguments")
}

fn check(schema: &Value, value: &Value, path: &str) -> Result<(), ToolError> {
    let fail = |message: String| Err(ToolError::invalid_arguments(message));
    if let Some(expected) = schema.get("type").and_then(Value::as_str) {
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
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        return fail(format!("{path} must be one of {}", Value::Array(allowed.clone())));
    }
    if let Some(number) = value.as_f64() {
        if let Some(minimum) = schema.get("minimum").and_then(Value::as_f64)
            && number < minimum
        {
            return fail(format!("{path} must be at least {minimum}"));
        }
        if let Some(maximum) = schema.get("maximum").and_then(Value::as_f64)
            && number > maximum
        {
            return fail(format!("{path} must be at most {maximum}"));
        }
    }
    if let Some(text) = value.as_str() {
        let length = text.chars().count() as u64;
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
            && length < min
        {
            return fail(format!("{path} must have at least {min} characters"));
        }
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
            && length > max
        {
            return fail(format!("{path} must have at most {max} characters"));
        }
    }
    if let (Some(items), Some(elements)) = (schema.get("items"), value.as_array()) {
        for (index, element) in elements.iter().enumerate() {
            check(items, element, &format!("{path}[{index}]"))?;
        }
    }
    if let Some(object) = value.as_object() {
        let properties = schema.get("properties").and_then(Value::as_object);
        if let Some(required) = schema.get("required").and_then(Value::as_array) {
            for name in required.iter().filter_map(Value::as_str) {
                if !object.contains_key(name) {
                    return fail(format!("{path}.{name} is required"));
                }
            }
        }
        for (name, element) in object {
            match properties.and_then(|properties| properties.get(name)) {
                Some(property) => check(property, element, &format!("{path}.{name}"))?,
                None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    return fail(format!("{path}.{name} is not a known argument"));
                }
                None => {}
            }
        }
    }
    Ok(())
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
                "arguments.colour is not a known argument",
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
    }
}
