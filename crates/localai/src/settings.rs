//! The defensive accessors for the three `SolutionSettings` columns, shared by both paths.
//!
//! What the settings are (the row, the `ModelSettings` document with its key-by-key fallback
//! to [`defaults`], the `ModelOptions` bits) is defined by `solution_settings`, which the store
//! that keeps them shares, and re-exported here. What is here is how the paths read them:
//! `ModelSettings` is re-parsed on every call (the spec forbids a cache with invalidation), and
//! `SettingsParser` spares parsing a text that has not changed.

use std::sync::{Arc, Mutex, PoisonError};

pub use solution_settings::{
    ModelOptions, ModelSettings, SettingIssue, SettingsDocument, SettingsEditError, SettingsRow, defaults,
    editing_issues, keys,
};

/// The `ModelSettings` column parsed once per text: the row is read from the store at every
/// call (the spec's rule, so an edit applies to the next call), and parsing the same text again
/// would only give the same settings. A changed text is parsed and remembered in its place.
#[derive(Debug, Default)]
pub(crate) struct SettingsParser {
    last: Mutex<Option<Arc<ParsedColumn>>>,
}

/// A column's text and the settings it parsed to.
#[derive(Debug)]
struct ParsedColumn {
    text: Option<String>,
    settings: Arc<ModelSettings>,
}

impl SettingsParser {
    /// The settings of `row`, as [`SettingsRow::model_settings`] parses them.
    pub(crate) fn settings(&self, row: &SettingsRow) -> Arc<ModelSettings> {
        let raw = row.model_settings.as_deref();
        let last = self.last.lock().unwrap_or_else(PoisonError::into_inner).clone();
        if let Some(last) = last
            && last.text.as_deref() == raw
        {
            return Arc::clone(&last.settings);
        }
        let settings = Arc::new(ModelSettings::parse(raw));
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(ParsedColumn {
            text: raw.map(str::to_owned),
            settings: Arc::clone(&settings),
        }));
        settings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_column_is_parsed_again_only_when_its_text_changed() {
        let row = |text: Option<&str>| SettingsRow {
            model_enabled: true,
            model_settings: text.map(str::to_owned),
            model_options: 0,
        };
        let parser = SettingsParser::default();
        let first = parser.settings(&row(Some(r#"{"URL": "http://a/v1", "Name": "m"}"#)));
        let again = parser.settings(&row(Some(r#"{"URL": "http://a/v1", "Name": "m"}"#)));
        assert!(Arc::ptr_eq(&first, &again), "the same text is not parsed again");
        assert_eq!(first.name, "m");
        let edited = parser.settings(&row(Some(r#"{"URL": "http://a/v1", "Name": "n"}"#)));
        assert_eq!(edited.name, "n", "an edit applies to the next call");
        assert_eq!(*parser.settings(&row(None)), ModelSettings::parse(None));
        assert_eq!(
            *parser.settings(&row(Some(r#"{"Name": "m"}"#))),
            ModelSettings::parse(Some(r#"{"Name": "m"}"#))
        );
    }
}
