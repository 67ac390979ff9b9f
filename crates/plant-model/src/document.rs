//! A plant file as a tree of values that each know where they are in the text: read from TOML
//! (the `toml` crate's spanned document) or JSON (`jsonc-parser`'s syntax tree), so one reader
//! serves both formats and every error can name its line.

use std::ops::Range;

use crate::PlantError;

/// The formats a plant file may be written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// TOML (the documented format).
    Toml,
    /// JSON (comments and trailing commas allowed).
    Json,
}

impl Format {
    /// The format a file name says: `.json` is JSON, anything else TOML.
    pub fn of_file(name: &str) -> Self {
        if name.to_ascii_lowercase().ends_with(".json") {
            Self::Json
        } else {
            Self::Toml
        }
    }
}

/// A value and the bytes of the text it came from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub(crate) value: Value,
    pub(crate) span: Range<usize>,
}

/// A key of a table and where it was written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Key {
    pub(crate) name: String,
    pub(crate) span: Range<usize>,
}

/// What a node holds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    String(String),
    Integer(i64),
    Float(f64),
    Bool(bool),
    Array(Vec<Node>),
    Table(Vec<(Key, Node)>),
    /// JSON's `null`, TOML's dates: nothing a plant file uses.
    Other(&'static str),
}

impl Value {
    /// What a person calls this kind of value.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Self::String(_) => "a string",
            Self::Integer(_) => "an integer",
            Self::Float(_) => "a number",
            Self::Bool(_) => "a boolean",
            Self::Array(_) => "an array",
            Self::Table(_) => "a table",
            Self::Other(kind) => kind,
        }
    }
}

/// Parses `text` as `format`; a syntax error is one error at its place.
pub(crate) fn parse(text: &str, format: Format) -> Result<Node, PlantError> {
    match format {
        Format::Toml => parse_toml(text),
        Format::Json => parse_json(text),
    }
}

fn parse_toml(text: &str) -> Result<Node, PlantError> {
    let document = toml::de::DeTable::parse(text).map_err(|error| {
        let span = error.span().unwrap_or(0..0);
        // The crate's own message without its snippet: the caller prints the place.
        let message = error.message().trim().to_owned();
        PlantError::at(text, span, String::new(), format!("not valid TOML: {message}"))
    })?;
    let span = document.span();
    Ok(Node {
        value: toml_table(document.get_ref()),
        span,
    })
}

fn toml_table(table: &toml::de::DeTable<'_>) -> Value {
    Value::Table(
        table
            .iter()
            .map(|(key, value)| {
                (
                    Key {
                        name: key.get_ref().to_string(),
                        span: key.span(),
                    },
                    toml_node(value),
                )
            })
            .collect(),
    )
}

fn toml_node(node: &toml::Spanned<toml::de::DeValue<'_>>) -> Node {
    use toml::de::DeValue;
    let value = match node.get_ref() {
        DeValue::String(text) => Value::String(text.to_string()),
        DeValue::Integer(integer) => i64::from_str_radix(integer.as_str(), integer.radix())
            .map_or(Value::Other("an integer too large"), Value::Integer),
        DeValue::Float(float) => float
            .as_str()
            .parse::<f64>()
            .map_or(Value::Other("a number that cannot be read"), Value::Float),
        DeValue::Boolean(value) => Value::Bool(*value),
        DeValue::Datetime(_) => Value::Other("a date"),
        DeValue::Array(items) => Value::Array(items.iter().map(toml_node).collect()),
        DeValue::Table(table) => toml_table(table),
    };
    Node {
        value,
        span: node.span(),
    }
}

fn parse_json(text: &str) -> Result<Node, PlantError> {
    use jsonc_parser::{CollectOptions, ParseOptions, parse_to_ast};
    // JSON as people write configuration: comments and trailing commas, nothing looser.
    let options = ParseOptions {
        allow_comments: true,
        allow_trailing_commas: true,
        allow_loose_object_property_names: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
    };
    let parsed = parse_to_ast(text, &CollectOptions::default(), &options).map_err(|error| {
        let range = error.range();
        PlantError::at(
            text,
            range.start..range.end,
            String::new(),
            format!("not valid JSON: {}", error.kind()),
        )
    })?;
    match parsed.value {
        Some(value) => Ok(json_node(&value)),
        None => Err(PlantError::at(
            text,
            0..0,
            String::new(),
            "the file is empty".to_owned(),
        )),
    }
}

fn json_node(value: &jsonc_parser::ast::Value<'_>) -> Node {
    use jsonc_parser::ast::Value as Json;
    let (value, range) = match value {
        Json::StringLit(text) => (Value::String(text.value.to_string()), text.range),
        Json::NumberLit(number) => {
            let text = number.value;
            let value = if text.contains(['.', 'e', 'E']) {
                text.parse::<f64>().map(Value::Float)
            } else {
                text.parse::<i64>()
                    .map(Value::Integer)
                    .or_else(|_| text.parse::<f64>().map(Value::Float))
            };
            (
                value.unwrap_or(Value::Other("a number that cannot be read")),
                number.range,
            )
        }
        Json::BooleanLit(boolean) => (Value::Bool(boolean.value), boolean.range),
        Json::NullKeyword(null) => (Value::Other("null"), null.range),
        Json::Array(array) => (
            Value::Array(array.elements.iter().map(json_node).collect()),
            array.range,
        ),
        Json::Object(object) => (
            Value::Table(
                object
                    .properties
                    .iter()
                    .map(|property| {
                        let (name, span) = match &property.name {
                            jsonc_parser::ast::ObjectPropName::String(name) => {
                                (name.value.to_string(), name.range)
                            }
                            jsonc_parser::ast::ObjectPropName::Word(word) => {
                                (word.value.to_owned(), word.range)
                            }
                        };
                        (
                            Key {
                                name,
                                span: span.start..span.end,
                            },
                            json_node(&property.value),
                        )
                    })
                    .collect(),
            ),
            object.range,
        ),
    };
    Node {
        value,
        span: range.start..range.end,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(node: &Node) -> Vec<&str> {
        match &node.value {
            Value::Table(entries) => entries.iter().map(|(key, _)| key.name.as_str()).collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn both_formats_give_the_same_tree_with_places() {
        let toml = "b = 1\na = [2.5, \"x\", true]\n[c]\nd = 0x10\n";
        let json = "{\"b\": 1, // first\n \"a\": [2.5, \"x\", true], \"c\": {\"d\": 16},}";
        let (toml, json) = (
            parse(toml, Format::Toml).expect("toml"),
            parse(json, Format::Json).expect("json"),
        );
        assert_eq!(keys(&toml), ["b", "a", "c"], "file order is kept");
        assert_eq!(keys(&toml), keys(&json));
        let strip = |node: &Node| -> String {
            // Spans differ between formats; values must not.
            format!("{:?}", node.value).replace(char::is_numeric, "#")
        };
        let values = |node: &Node| match &node.value {
            Value::Table(entries) => entries.iter().map(|(_, value)| strip(value)).collect::<Vec<_>>(),
            _ => Vec::new(),
        };
        assert_eq!(values(&toml).len(), values(&json).len());
        match (&toml.value, &json.value) {
            (Value::Table(t), Value::Table(j)) => {
                assert_eq!(t[0].1.value, Value::Integer(1));
                assert_eq!(j[0].1.value, Value::Integer(1));
                let hex = match &t[2].1.value {
                    Value::Table(inner) => inner[0].1.value.clone(),
                    other => panic!("{other:?}"),
                };
                assert_eq!(hex, Value::Integer(16));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn syntax_errors_name_their_line() {
        let error = parse("a = 1\nb = = 2\n", Format::Toml).expect_err("bad toml");
        assert_eq!(error.line, 2, "{error}");
        assert!(error.message.starts_with("not valid TOML"), "{error}");
        let error = parse("{\n\"a\": 1,\n\"b\" 2}", Format::Json).expect_err("bad json");
        assert_eq!(error.line, 3, "{error}");
        assert!(error.message.starts_with("not valid JSON"), "{error}");
        assert_eq!(Format::of_file("plant.JSON"), Format::Json);
        assert_eq!(Format::of_file("plant.toml"), Format::Toml);
    }
}
