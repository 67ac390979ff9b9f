//! The defensive accessors for the three `SolutionSettings` columns, shared by both paths.
//!
//! `ModelSettings` is re-parsed on every call (the spec forbids a cache with invalidation), and
//! the parse is total: NULL, empty, malformed JSON, a missing key, an empty value or a value of
//! the wrong type each fall back, key by key, to [`defaults`].

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Map, Value};

/// The public defaults a configuration editor seeds its fields with.
pub mod defaults {
    /// The local Ollama server's OpenAI-compatible chat-completions endpoint.
    pub const URL: &str = "http://localhost:11434/v1/chat/completions";
    /// The default model name.
    pub const NAME: &str = "qwen2.5:7b-instruct";
    /// No authorization header.
    pub const AUTHORIZATION: &str = "None";
    /// No extra headers.
    pub const HEADERS: &str = "";
    /// A description of the default model, for the editor.
    pub const INFO: &str = "Default local model. Apache 2.0, ~4.7 GB.";
    /// The wall-clock budget of one call, in seconds.
    pub const TIMEOUT_SECONDS: f64 = 60.0;
    /// The largest `TimeoutSeconds` honoured; larger values are clamped to it.
    pub const MAX_TIMEOUT_SECONDS: f64 = 3600.0;
    /// Tool dispatches per chat turn (the spec's `MaxToolDispatchesPerTurn`).
    pub const MAX_TOOL_DISPATCHES: usize = 5;
    /// The largest `MaxToolDispatchesPerTurn` honoured; larger values are clamped to it.
    pub const MAX_TOOL_DISPATCHES_CEILING: usize = 50;
    /// Messages kept in a connection's transcript (system prompt not counted): about ten
    /// tool-using turns, which fits an 8B-class model's 8k-token context.
    pub const MAX_HISTORY_MESSAGES: usize = 40;
    /// The range of `MaxHistoryMessages` honoured; larger values are clamped to its end,
    /// smaller ones fall back to the default.
    pub const MAX_HISTORY_MESSAGES_RANGE: std::ops::RangeInclusive<usize> = 2..=1000;
}

/// The `ModelSettings` JSON keys, spelled as the spec spells them.
pub mod keys {
    /// Endpoint URL (may hold `{Tag.X}` expressions and `/secret:<Name>` tokens).
    pub const URL: &str = "URL";
    /// Model name sent as `model`.
    pub const NAME: &str = "Name";
    /// Multi-line authorization (scheme on line 1).
    pub const AUTHORIZATION: &str = "Authorization";
    /// Extra headers, one `Name: value` per line.
    pub const HEADERS: &str = "Headers";
    /// Free text about the model.
    pub const INFO: &str = "Info";
    /// The wall-clock budget in seconds.
    pub const TIMEOUT_SECONDS: &str = "TimeoutSeconds";
    /// Tool dispatches per chat turn.
    pub const MAX_TOOL_DISPATCHES: &str = "MaxToolDispatchesPerTurn";
    /// Messages kept in a chat transcript.
    pub const MAX_HISTORY_MESSAGES: &str = "MaxHistoryMessages";
    /// Every key the product knows, in editor order.
    pub const ALL: [&str; 8] = [
        URL,
        NAME,
        AUTHORIZATION,
        HEADERS,
        INFO,
        TIMEOUT_SECONDS,
        MAX_TOOL_DISPATCHES,
        MAX_HISTORY_MESSAGES,
    ];
    /// The keys stored as JSON numbers when given a number.
    pub const NUMERIC: [&str; 3] = [TIMEOUT_SECONDS, MAX_TOOL_DISPATCHES, MAX_HISTORY_MESSAGES];
}

/// The raw `SolutionSettings` row as the host stores it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SettingsRow {
    /// `ModelEnabled`: the master kill-switch of both paths.
    pub model_enabled: bool,
    /// `ModelSettings`: the endpoint JSON, or NULL.
    pub model_settings: Option<String>,
    /// `ModelOptions`: the tool-surface bitmask.
    pub model_options: i64,
}

impl SettingsRow {
    /// The parsed `ModelOptions` bits.
    pub fn options(&self) -> ModelOptions {
        ModelOptions::from_column(self.model_options)
    }

    /// The parsed `ModelSettings`, with defaults for whatever is missing or invalid.
    pub fn model_settings(&self) -> ModelSettings {
        ModelSettings::parse(self.model_settings.as_deref())
    }
}

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

/// Everything wrong with a `ModelSettings` column that an editor can tell before any call:
/// the values [`ModelSettings::parse_checked`] would not use as given, a URL that is not
/// `http(s)` even with its `{Tag.X}` and `/secret:` tokens filled in, and an Authorization or
/// Headers value the decoder refuses. The admin command refuses a change that adds one.
pub fn editing_issues(raw: Option<&str>) -> Vec<SettingIssue> {
    let (settings, mut issues) = ModelSettings::parse_checked(raw);
    let has_issue = |key: &str| issues.iter().any(|issue| issue.key == key);
    if !has_issue(keys::URL) && !url_shape_is_valid(&settings.url) {
        issues.push(SettingIssue::new(
            keys::URL,
            "is not an http:// or https:// URL with a host; every call would fail",
        ));
    }
    // A secret may hold a whole line (`CustomAuth` + `/secret:HeaderLine`), so a line with a
    // token is judged as a plain header line; a scheme line with one cannot be judged at all.
    let scheme_has_token = settings
        .authorization
        .lines()
        .next()
        .is_some_and(|line| line.contains(crate::secrets::TOKEN_PREFIX));
    if !scheme_has_token
        && let Err(error) = crate::auth::decode_authorization(&fill_secret_lines(&settings.authorization))
    {
        issues.push(SettingIssue::new(
            keys::AUTHORIZATION,
            format!("cannot be used: {error}"),
        ));
    }
    if let Err(error) = crate::auth::decode_headers(&fill_secret_lines(&settings.headers)) {
        issues.push(SettingIssue::new(
            keys::HEADERS,
            format!("cannot be used: {error}"),
        ));
    }
    issues
}

/// `text` with every line that holds a `/secret:` token replaced by a valid header line.
fn fill_secret_lines(text: &str) -> String {
    text.lines()
        .map(|line| {
            if line.contains(crate::secrets::TOKEN_PREFIX) {
                "X-Secret: 0"
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether `url` is an `http(s)` URL with a host once each `{...}` expression and
/// `/secret:<Name>` token stands for a plain value.
fn url_shape_is_valid(url: &str) -> bool {
    let mut filled = String::with_capacity(url.len());
    let mut rest = url;
    loop {
        let expression = rest.find('{');
        let token = rest.find(crate::secrets::TOKEN_PREFIX);
        let (start, end) = match (expression, token) {
            (Some(open), token) if token.is_none_or(|token| open < token) => {
                let Some(close) = rest[open..].find('}') else {
                    break;
                };
                (open, open + close + 1)
            }
            (_, Some(token)) => {
                let name = &rest[token + crate::secrets::TOKEN_PREFIX.len()..];
                let name_len = name
                    .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
                    .unwrap_or(name.len());
                (token, token + crate::secrets::TOKEN_PREFIX.len() + name_len)
            }
            _ => break,
        };
        filled.push_str(&rest[..start]);
        filled.push('0');
        rest = &rest[end..];
    }
    filled.push_str(rest);
    reqwest::Url::parse(filled.trim())
        .is_ok_and(|url| matches!(url.scheme(), "http" | "https") && url.host().is_some())
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
    fn new(key: &'static str, problem: impl Into<String>) -> Self {
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

/// The `ModelOptions` bitmask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ModelOptions(u32);

impl ModelOptions {
    /// 0x02 EnableRuntimeMCP: the master tool-surface bit; the chat path needs it.
    pub const ENABLE_RUNTIME_MCP: u32 = 0x02;
    /// 0x04: tag value, browse, search, describe and list tools.
    pub const UNS_TOOLS: u32 = 0x04;
    /// 0x08: active alarm and alarm history tools.
    pub const ALARM_TOOLS: u32 = 0x08;
    /// 0x10: tag history tool.
    pub const HISTORIAN_TOOLS: u32 = 0x10;
    /// 0x20: tools the solution registers.
    pub const CUSTOM_TOOLS: u32 = 0x20;
    /// 0x40: proposal tools, off by default: the model may propose a write or an alarm
    /// acknowledgement for an operator to approve; a proposal acts on nothing.
    pub const PROPOSALS: u32 = 0x40;
    /// 0x80 EnableChatHistory: chat turns use the per-connection transcript cache.
    pub const CHAT_HISTORY: u32 = 0x80;

    /// Wraps raw bits.
    pub const fn new(bits: u32) -> Self {
        Self(bits)
    }

    /// Reads the integer column. Only the low 32 bits carry meaning; a negative or larger
    /// value keeps its low bits rather than failing.
    pub fn from_column(value: i64) -> Self {
        Self((value & 0xFFFF_FFFF) as u32)
    }

    /// The raw bits.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether every bit of `mask` is set.
    pub const fn contains(self, mask: u32) -> bool {
        self.0 & mask == mask
    }

    /// Whether a tool category is offered: the master bit AND the category bit.
    pub const fn offers(self, category: u32) -> bool {
        self.contains(Self::ENABLE_RUNTIME_MCP) && self.contains(category)
    }
}

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

fn json_kind(value: &Value) -> &'static str {
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

    #[test]
    fn editing_issues_catch_what_every_call_would_trip_on() {
        let issues = |raw: &str| -> Vec<&'static str> {
            editing_issues(Some(raw)).iter().map(|issue| issue.key).collect()
        };
        assert!(issues(r#"{"URL": "http://{Tag.Host}:8080/v1/chat/completions?key=/secret:K"}"#).is_empty());
        assert!(issues(r#"{"URL": "https://api.example.com/v1/chat/completions"}"#).is_empty());
        assert_eq!(issues(r#"{"URL": "ftp://x/y"}"#), ["URL"]);
        assert_eq!(issues(r#"{"URL": "localhost:11434"}"#), ["URL"]);
        assert_eq!(issues(r#"{"Authorization": "Bearer\nabc"}"#), ["Authorization"]);
        assert!(issues(r#"{"Authorization": "BearerToken\n/secret:Key"}"#).is_empty());
        assert_eq!(issues(r#"{"Headers": "no colon here"}"#), ["Headers"]);
        // A secret may be a whole header line; the lines around it are still judged.
        assert!(issues(r#"{"Authorization": "CustomAuth\n/secret:HeaderLine"}"#).is_empty());
        assert!(issues(r#"{"Headers": "/secret:Line\nX-A: 1"}"#).is_empty());
        assert_eq!(issues(r#"{"Headers": "/secret:Line\nbad"}"#), ["Headers"]);
        assert_eq!(
            issues(r#"{"Authorization": "Kerberos\n/secret:Ticket"}"#),
            ["Authorization"]
        );
    }

    #[test]
    fn options_gate_categories_on_the_master_bit() {
        let only_uns = ModelOptions::new(ModelOptions::UNS_TOOLS);
        assert!(!only_uns.offers(ModelOptions::UNS_TOOLS));
        let with_master = ModelOptions::new(ModelOptions::UNS_TOOLS | ModelOptions::ENABLE_RUNTIME_MCP);
        assert!(with_master.offers(ModelOptions::UNS_TOOLS));
        assert!(!with_master.offers(ModelOptions::ALARM_TOOLS));
        assert_eq!(ModelOptions::from_column(-1).bits(), u32::MAX);
    }

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
