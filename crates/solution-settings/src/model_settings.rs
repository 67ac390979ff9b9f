//! `ModelSettings` parsed: the endpoint configuration with a default for every key the stored
//! JSON leaves out or gets wrong, and the issues that say which stored values are not used as
//! given.
//!
//! The parse is total: NULL, empty, malformed JSON, a missing key, an empty value or a value of
//! the wrong type each fall back, key by key, to [`defaults`](crate::defaults).

use std::time::Duration;

use serde_json::Value;

use crate::{defaults, keys};

/// The endpoint configuration after key-by-key fallback. Values are still unresolved: tokens
/// such as `/secret:<Name>` and `{Tag.X}` are resolved per call by the path that uses them.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSettings {
    /// `URL`.
    pub url: String,
    /// `Name`.
    pub name: String,
    /// `Authorization` (multi-line).
    pub authorization: String,
    /// `Headers` (multi-line).
    pub headers: String,
    /// `Info`.
    pub info: String,
    /// `TimeoutSeconds` as a duration.
    pub timeout: Duration,
    /// `MaxToolDispatchesPerTurn` (chat path only).
    pub max_tool_dispatches: usize,
    /// `MaxHistoryMessages` (chat path only).
    pub max_history_messages: usize,
}

impl Default for ModelSettings {
    fn default() -> Self {
        Self {
            url: defaults::URL.to_owned(),
            name: defaults::NAME.to_owned(),
            authorization: defaults::AUTHORIZATION.to_owned(),
            headers: defaults::HEADERS.to_owned(),
            info: defaults::INFO.to_owned(),
            timeout: Duration::from_secs_f64(defaults::TIMEOUT_SECONDS),
            max_tool_dispatches: defaults::MAX_TOOL_DISPATCHES,
            max_history_messages: defaults::MAX_HISTORY_MESSAGES,
        }
    }
}

impl ModelSettings {
    /// Parses the column. Never fails: see the module docs.
    pub fn parse(raw: Option<&str>) -> Self {
        Self::parse_checked(raw).0
    }

    /// Parses the column and says, key by key, which stored values are not used as they are
    /// (fallen back to the default, or clamped to a ceiling). The admin command refuses a
    /// value with an issue; `parse` applies the same rules silently, as the spec asks.
    pub fn parse_checked(raw: Option<&str>) -> (Self, Vec<SettingIssue>) {
        let mut settings = Self::default();
        let mut issues = Vec::new();
        let Some(object) = raw
            .and_then(|text| serde_json::from_str::<Value>(text).ok())
            .and_then(|value| match value {
                Value::Object(object) => Some(object),
                _ => None,
            })
        else {
            if raw.is_some_and(|text| !text.trim().is_empty()) {
                issues.push(SettingIssue::new(
                    "ModelSettings",
                    "is not a JSON object; every key uses its default",
                ));
            }
            return (settings, issues);
        };
        let mut text = |key: &'static str, slot: &mut String| match object.get(key) {
            None => {}
            Some(Value::String(value)) if !value.trim().is_empty() => *slot = value.clone(),
            Some(Value::String(_)) => {
                issues.push(SettingIssue::new(key, "is empty; the default is used"));
            }
            Some(other) => issues.push(SettingIssue::new(
                key,
                format!("is {}, not a string; the default is used", json_kind(other)),
            )),
        };
        text(keys::URL, &mut settings.url);
        text(keys::NAME, &mut settings.name);
        text(keys::AUTHORIZATION, &mut settings.authorization);
        text(keys::HEADERS, &mut settings.headers);
        text(keys::INFO, &mut settings.info);
        if let Some(value) = object.get(keys::TIMEOUT_SECONDS) {
            match timeout_seconds(value) {
                Ok(seconds) => {
                    settings.timeout = Duration::from_secs_f64(seconds);
                    if number(value).is_some_and(|given| given > defaults::MAX_TIMEOUT_SECONDS) {
                        let ceiling = defaults::MAX_TIMEOUT_SECONDS;
                        issues.push(SettingIssue::new(
                            keys::TIMEOUT_SECONDS,
                            format!("is above the ceiling of {ceiling} s; {ceiling} s is used"),
                        ));
                    }
                }
                Err(issue) => issues.push(SettingIssue::new(keys::TIMEOUT_SECONDS, issue)),
            }
        }
        let mut bounded = |key: &'static str, range: std::ops::RangeInclusive<usize>, slot: &mut usize| {
            let Some(value) = object.get(key) else {
                return;
            };
            match count(value) {
                Some(count) if count < *range.start() => issues.push(SettingIssue::new(
                    key,
                    format!(
                        "{count} is below the floor of {}; the default is used",
                        range.start()
                    ),
                )),
                Some(count) if count > *range.end() => {
                    *slot = *range.end();
                    issues.push(SettingIssue::new(
                        key,
                        format!(
                            "{count} is above the ceiling of {}; {} is used",
                            range.end(),
                            range.end()
                        ),
                    ));
                }
                Some(count) => *slot = count,
                None => issues.push(SettingIssue::new(
                    key,
                    format!(
                        "{value} is not a whole number from {} to {}; the default is used",
                        range.start(),
                        range.end()
                    ),
                )),
            }
        };
        bounded(
            keys::MAX_TOOL_DISPATCHES,
            1..=defaults::MAX_TOOL_DISPATCHES_CEILING,
            &mut settings.max_tool_dispatches,
        );
        bounded(
            keys::MAX_HISTORY_MESSAGES,
            defaults::MAX_HISTORY_MESSAGES_RANGE,
            &mut settings.max_history_messages,
        );
        (settings, issues)
    }

    /// The budget formatted for warnings, e.g. `60s` or `0.5s`.
    pub fn timeout_label(&self) -> String {
        format!("{}s", self.timeout.as_secs_f64())
    }
}

/// A stored `ModelSettings` value that is not used as it is: the key and what happens instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingIssue {
    /// The `ModelSettings` key (or `ModelSettings` for the whole column).
    pub key: &'static str,
    /// What is wrong and what is used instead.
    pub problem: String,
}

impl SettingIssue {
    pub(crate) fn new(key: &'static str, problem: impl Into<String>) -> Self {
        Self {
            key,
            problem: problem.into(),
        }
    }
}

impl std::fmt::Display for SettingIssue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.key, self.problem)
    }
}

/// A whole count, as a JSON integer (or an integral float such as `1e9`) or a numeric string.
/// Counts too large for `usize` saturate, so they are clamped like any count above a ceiling.
fn count(value: &Value) -> Option<usize> {
    let number = number(value)?;
    // A float-to-integer `as` saturates, so 1e30 becomes usize::MAX and is clamped.
    (number >= 0.0 && number.fract() == 0.0).then_some(number as usize)
}

/// A JSON number or a numeric string, as a finite float.
fn number(value: &Value) -> Option<f64> {
    let number = match value {
        Value::Number(number) => number.as_f64()?,
        Value::String(text) => text.trim().parse::<f64>().ok()?,
        _ => return None,
    };
    number.is_finite().then_some(number)
}

/// A positive number of seconds, as a JSON number or a numeric string; above the ceiling it
/// is clamped. `Err` says why the value falls back to the default.
fn timeout_seconds(value: &Value) -> Result<f64, String> {
    let fallback = defaults::TIMEOUT_SECONDS;
    match number(value) {
        Some(seconds) if seconds > 0.0 => Ok(seconds.min(defaults::MAX_TIMEOUT_SECONDS)),
        Some(seconds) => Err(format!(
            "{seconds} is not a positive number of seconds; {fallback} s is used"
        )),
        None => Err(format!(
            "{value} is not a number of seconds; {fallback} s is used"
        )),
    }
}

/// What kind of JSON value `value` is, for messages (`a number`, `an object`).
pub(crate) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Map;

    #[test]
    fn null_empty_and_malformed_give_every_default() {
        for raw in [
            None,
            Some(""),
            Some("   "),
            Some("{not json"),
            Some("[1,2]"),
            Some("null"),
            Some("42"),
        ] {
            assert_eq!(ModelSettings::parse(raw), ModelSettings::default(), "{raw:?}");
        }
    }

    #[test]
    fn falls_back_key_by_key() {
        let parsed = ModelSettings::parse(Some(
            r#"{"URL": "http://gpu-box:8000/v1/chat/completions", "Name": "", "Authorization": 7,
                "Headers": "X-A: 1", "TimeoutSeconds": "abc"}"#,
        ));
        assert_eq!(parsed.url, "http://gpu-box:8000/v1/chat/completions");
        assert_eq!(parsed.name, defaults::NAME, "empty value falls back");
        assert_eq!(
            parsed.authorization,
            defaults::AUTHORIZATION,
            "wrong type falls back"
        );
        assert_eq!(parsed.headers, "X-A: 1");
        assert_eq!(parsed.info, defaults::INFO, "missing key falls back");
        assert_eq!(
            parsed.timeout,
            Duration::from_secs(60),
            "non-numeric timeout falls back"
        );
    }

    #[test]
    fn timeout_seconds_accepts_numbers_and_numeric_strings_in_range() {
        let timeout = |raw: &str| ModelSettings::parse(Some(raw)).timeout;
        assert_eq!(timeout(r#"{"TimeoutSeconds": 30}"#), Duration::from_secs(30));
        assert_eq!(
            timeout(r#"{"TimeoutSeconds": "2.5"}"#),
            Duration::from_millis(2500)
        );
        assert_eq!(timeout(r#"{"TimeoutSeconds": 0}"#), Duration::from_secs(60));
        assert_eq!(timeout(r#"{"TimeoutSeconds": -3}"#), Duration::from_secs(60));
        assert_eq!(
            timeout(r#"{"TimeoutSeconds": 1e308}"#),
            Duration::from_secs(3600),
            "clamped to the ceiling"
        );
        assert_eq!(timeout(r#"{"TimeoutSeconds": "NaN"}"#), Duration::from_secs(60));
    }

    #[test]
    fn every_value_not_used_as_given_is_reported_and_limits_are_clamped() {
        let (settings, issues) = ModelSettings::parse_checked(Some(
            r#"{"URL": 5, "Name": " ", "TimeoutSeconds": -1, "MaxToolDispatchesPerTurn": 1e9,
                "MaxHistoryMessages": -5, "Provider": 7}"#,
        ));
        assert_eq!(settings.url, defaults::URL);
        assert_eq!(settings.timeout, Duration::from_secs(60));
        assert_eq!(
            settings.max_tool_dispatches,
            defaults::MAX_TOOL_DISPATCHES_CEILING
        );
        assert_eq!(settings.max_history_messages, defaults::MAX_HISTORY_MESSAGES);
        let keys: Vec<&str> = issues.iter().map(|issue| issue.key).collect();
        assert_eq!(
            keys,
            [
                "URL",
                "Name",
                "TimeoutSeconds",
                "MaxToolDispatchesPerTurn",
                "MaxHistoryMessages"
            ],
            "unknown keys are the user's own and never an issue"
        );
        assert!(
            issues[0].to_string().contains("a number, not a string"),
            "{}",
            issues[0]
        );
        assert!(issues[3].problem.contains("ceiling of 50"), "{}", issues[3]);
        let (clamped, issues) = ModelSettings::parse_checked(Some(r#"{"MaxHistoryMessages": "5000"}"#));
        assert_eq!(clamped.max_history_messages, 1000);
        assert_eq!(issues.len(), 1);
        let (_, none) =
            ModelSettings::parse_checked(Some(r#"{"TimeoutSeconds": "2.5", "MaxHistoryMessages": 2}"#));
        assert!(none.is_empty(), "{none:?}");
        let (_, column) = ModelSettings::parse_checked(Some("{oops"));
        assert_eq!(column[0].key, "ModelSettings");
    }

    proptest! {
        #[test]
        fn parse_is_total(raw in proptest::option::of(".*")) {
            let settings = ModelSettings::parse(raw.as_deref());
            prop_assert!(!settings.url.trim().is_empty());
            prop_assert!(!settings.name.trim().is_empty());
            prop_assert!(settings.timeout > Duration::ZERO);
        }

        #[test]
        fn parse_is_total_over_json_objects(
            entries in proptest::collection::vec(
                (proptest::sample::select(keys::ALL.to_vec()), any::<Option<String>>()), 0..8)
        ) {
            let object: Map<String, Value> = entries
                .into_iter()
                .map(|(key, value)| (key.to_owned(), value.map_or(Value::Null, Value::String)))
                .collect();
            let settings = ModelSettings::parse(Some(&Value::Object(object).to_string()));
            prop_assert!(!settings.url.trim().is_empty());
            prop_assert!(settings.timeout <= Duration::from_secs(3600));
        }
    }
}
