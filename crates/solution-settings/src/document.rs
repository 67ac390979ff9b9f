//! `ModelSettings` as an editable JSON document: the read-modify-write of admin tools and
//! editors, which keeps the keys it does not know and their order.

use serde_json::{Map, Value};

use crate::keys;
use crate::model_settings::json_kind;

/// Why the stored `ModelSettings` cannot be edited key by key.
#[derive(Debug, thiserror::Error)]
pub enum SettingsEditError {
    /// The column holds text that is not a JSON object; editing a key would lose it.
    #[error("ModelSettings is not a JSON object ({0}); replace it whole with `set ModelSettings '{{...}}'`")]
    NotAnObject(String),
    /// A whole-document replacement was not a JSON object.
    #[error("a ModelSettings value must be a JSON object: {0}")]
    InvalidDocument(String),
}

/// `ModelSettings` as an editable JSON object that keeps unknown keys and key order, for the
/// read-modify-write done by admin tools and editors.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SettingsDocument {
    object: Map<String, Value>,
}

impl SettingsDocument {
    /// Opens the stored column for editing. NULL or blank is an empty document.
    pub fn from_column(raw: Option<&str>) -> Result<Self, SettingsEditError> {
        match raw.map(str::trim) {
            None | Some("") => Ok(Self::default()),
            Some(text) => match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(object)) => Ok(Self { object }),
                Ok(other) => Err(SettingsEditError::NotAnObject(format!(
                    "found {}",
                    json_kind(&other)
                ))),
                Err(error) => Err(SettingsEditError::NotAnObject(error.to_string())),
            },
        }
    }

    /// Parses a whole replacement document given by a user.
    pub fn from_user_json(text: &str) -> Result<Self, SettingsEditError> {
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(object)) => Ok(Self { object }),
            Ok(other) => Err(SettingsEditError::InvalidDocument(format!(
                "found {}",
                json_kind(&other)
            ))),
            Err(error) => Err(SettingsEditError::InvalidDocument(error.to_string())),
        }
    }

    /// The stored value of a key, if any.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.object.get(key)
    }

    /// Sets one key from user text. The numeric keys ([`keys::NUMERIC`]) are stored as numbers
    /// when the text is one; every other key is stored as a string, as the editor does.
    pub fn set_text(&mut self, key: &str, text: &str) {
        let value = if keys::NUMERIC.contains(&key) {
            serde_json::from_str::<serde_json::Number>(text.trim())
                .map(Value::Number)
                .unwrap_or_else(|_| Value::String(text.to_owned()))
        } else {
            Value::String(text.to_owned())
        };
        self.object.insert(key.to_owned(), value);
    }

    /// Removes a key, so the default applies again.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        self.object.shift_remove(key)
    }

    /// The document as the column stores it.
    pub fn to_json(&self) -> String {
        Value::Object(self.object.clone()).to_string()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::ModelSettings;

    #[test]
    fn editing_keeps_unknown_keys_and_order() {
        let stored = r#"{"Provider":"vllm","URL":"http://a/v1/chat/completions","Extra":{"x":[1,2]}}"#;
        let mut document = SettingsDocument::from_column(Some(stored)).expect("an object");
        document.set_text("Name", "llama3.1:8b");
        document.set_text("TimeoutSeconds", "30");
        document.set_text("URL", "http://b/v1/chat/completions");
        assert_eq!(
            document.to_json(),
            r#"{"Provider":"vllm","URL":"http://b/v1/chat/completions","Extra":{"x":[1,2]},"Name":"llama3.1:8b","TimeoutSeconds":30}"#
        );
        let reparsed = ModelSettings::parse(Some(&document.to_json()));
        assert_eq!(reparsed.name, "llama3.1:8b");
        assert_eq!(reparsed.timeout, Duration::from_secs(30));
    }

    #[test]
    fn editing_refuses_a_malformed_column_instead_of_losing_it() {
        assert!(matches!(
            SettingsDocument::from_column(Some("{oops")),
            Err(SettingsEditError::NotAnObject(_))
        ));
        assert!(SettingsDocument::from_column(None).expect("empty").to_json() == "{}");
        assert!(SettingsDocument::from_user_json("[]").is_err());
    }
}
