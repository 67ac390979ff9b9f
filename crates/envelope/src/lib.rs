//! The Local AI reply envelope: the five-field JSON object every Local AI call returns.
//!
//! Both execution paths build it and display clients parse it, so it lives in its own small
//! crate that knows nothing of HTTP, sockets or the solution. The constructors enforce the
//! schema's rules (for example `text` is empty on every non-`ok` status except a `truncated`
//! turn with a partial answer), and serializing cannot fail.

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The outcome of a Local AI call. Exactly these four values exist on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The model produced a terminal answer.
    Ok,
    /// Validation, HTTP, parsing or an internal step failed.
    Error,
    /// A master gate is off; no work was done.
    Disabled,
    /// A budget or cap tripped mid-turn; `text` may hold a partial answer.
    Truncated,
}

impl Status {
    /// The wire spelling of this status.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Error => "error",
            Status::Disabled => "disabled",
            Status::Truncated => "truncated",
        }
    }
}

/// Whether one tool dispatch succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolStatus {
    /// The tool returned a result.
    Ok,
    /// The tool failed, timed out, panicked, or was unknown.
    Error,
}

/// One tool dispatch of a chat turn, in the order it ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolTraceEntry {
    /// The tool the model invoked, e.g. `runtime_get_value`.
    pub name: String,
    /// The arguments as parsed JSON, or the raw string when they did not parse.
    pub args: Value,
    /// The tool's result as parsed JSON, or a raw string.
    pub result: Value,
    /// Whether the dispatch succeeded.
    pub status: ToolStatus,
    /// When the dispatch started: ISO 8601 UTC with milliseconds, e.g. `2026-04-26T14:32:15.123Z`.
    pub timestamp: String,
    /// How long the dispatch took.
    #[serde(rename = "elapsedMs")]
    pub elapsed_ms: u64,
}

impl ToolTraceEntry {
    /// An entry for a dispatch that started at `started` and took `elapsed`.
    pub fn new(
        name: impl Into<String>,
        args: Value,
        result: Value,
        status: ToolStatus,
        started: SystemTime,
        elapsed: Duration,
    ) -> Self {
        Self {
            name: name.into(),
            args,
            result,
            status,
            timestamp: iso8601_millis(started),
            elapsed_ms: millis(elapsed),
        }
    }
}

/// The reply envelope. All five fields are present on every envelope.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// The model's answer; `""` on every non-`ok` status except a partial `truncated` answer.
    pub text: String,
    /// The outcome.
    pub status: Status,
    /// The tool dispatches of the turn; always empty on the atomic path.
    #[serde(rename = "toolTrace")]
    pub tool_trace: Vec<ToolTraceEntry>,
    /// Wall-clock milliseconds from entry to envelope; 0 for gate and pre-condition exits.
    #[serde(rename = "latencyMs")]
    pub latency_ms: u64,
    /// Things the caller should know that did not (or did) change the status.
    pub warnings: Vec<String>,
}

impl Envelope {
    /// A successful answer.
    pub fn ok(text: impl Into<String>, elapsed: Duration) -> Self {
        Self {
            text: text.into(),
            status: Status::Ok,
            tool_trace: Vec::new(),
            latency_ms: millis(elapsed),
            warnings: Vec::new(),
        }
    }

    /// A failure after work began (`latencyMs` is the real elapsed time).
    pub fn error(warning: impl Into<String>, elapsed: Duration) -> Self {
        Self {
            text: String::new(),
            status: Status::Error,
            tool_trace: Vec::new(),
            latency_ms: millis(elapsed),
            warnings: vec![warning.into()],
        }
    }

    /// A failure caught before any work (a pre-condition): `latencyMs` is 0.
    pub fn precondition_error(warning: impl Into<String>) -> Self {
        Self::error(warning, Duration::ZERO)
    }

    /// A closed master gate: `latencyMs` is 0 and the warning names the gate.
    pub fn disabled(gate_warning: impl Into<String>) -> Self {
        Self {
            text: String::new(),
            status: Status::Disabled,
            tool_trace: Vec::new(),
            latency_ms: 0,
            warnings: vec![gate_warning.into()],
        }
    }

    /// A budget or cap tripped; `partial` is whatever answer text existed (possibly empty).
    pub fn truncated(partial: impl Into<String>, warning: impl Into<String>, elapsed: Duration) -> Self {
        Self {
            text: partial.into(),
            status: Status::Truncated,
            tool_trace: Vec::new(),
            latency_ms: millis(elapsed),
            warnings: vec![warning.into()],
        }
    }

    /// Attaches the tool trace of the turn.
    pub fn with_tool_trace(mut self, trace: Vec<ToolTraceEntry>) -> Self {
        self.tool_trace = trace;
        self
    }

    /// Adds warnings after the ones already present.
    pub fn with_warnings(mut self, warnings: impl IntoIterator<Item = String>) -> Self {
        self.warnings.extend(warnings);
        self
    }

    /// Serializes to one line of JSON. Cannot fail: every field is a string, number or
    /// string-keyed JSON value, which `serde_json` always serializes.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| {
            String::from(
                r#"{"text":"","status":"error","toolTrace":[],"latencyMs":0,"warnings":["envelope serialization failed"]}"#,
            )
        })
    }

    /// Parses an envelope, requiring all five fields with their schema types.
    pub fn from_json(json: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(json)
    }
}

/// Whole milliseconds of a duration, saturating.
pub fn millis(elapsed: Duration) -> u64 {
    u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
}

/// Formats a time as ISO 8601 UTC with milliseconds, e.g. `2026-04-26T14:32:15.123Z`.
pub fn iso8601_millis(time: SystemTime) -> String {
    humantime::format_rfc3339_millis(time).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_constructor_serializes_all_five_fields() {
        let envelopes = [
            Envelope::ok("hi", Duration::from_millis(5)),
            Envelope::error("boom", Duration::from_millis(7)),
            Envelope::precondition_error("bad query"),
            Envelope::disabled("gate"),
            Envelope::truncated("part", "budget", Duration::from_secs(60)),
        ];
        for envelope in envelopes {
            let value: Value = serde_json::from_str(&envelope.to_json()).expect("valid JSON");
            let object = value.as_object().expect("an object");
            let mut keys: Vec<_> = object.keys().map(String::as_str).collect();
            keys.sort_unstable();
            assert_eq!(keys, ["latencyMs", "status", "text", "toolTrace", "warnings"]);
            assert!(object["text"].is_string());
            assert!(object["toolTrace"].is_array());
            assert!(object["latencyMs"].is_u64());
            assert!(object["warnings"].is_array());
        }
    }

    #[test]
    fn disabled_and_errors_have_empty_text_and_the_schema_latency() {
        let disabled = Envelope::disabled("Local AI master kill-switch (ModelEnabled) is off.");
        assert_eq!(disabled.text, "");
        assert_eq!(disabled.latency_ms, 0);
        assert_eq!(disabled.status, Status::Disabled);
        let error = Envelope::error("refused", Duration::from_millis(1043));
        assert_eq!(error.text, "");
        assert_eq!(error.latency_ms, 1043);
    }

    #[test]
    fn parses_the_schema_example_and_rejects_missing_fields_or_unknown_status() {
        let example = json!({
            "text": "Pump1.MotorCurrent is currently 12.4 A.",
            "status": "ok",
            "toolTrace": [{
                "name": "runtime_get_value",
                "args": {"tag": "Pump1.MotorCurrent"},
                "result": {"value": 12.4, "quality": "Good"},
                "status": "ok",
                "timestamp": "2026-04-26T14:32:15.123Z",
                "elapsedMs": 3
            }],
            "latencyMs": 1247,
            "warnings": []
        });
        let parsed = Envelope::from_json(&example.to_string()).expect("schema example parses");
        assert_eq!(parsed.tool_trace[0].elapsed_ms, 3);
        assert_eq!(serde_json::to_value(&parsed).expect("serializes"), example);

        assert!(Envelope::from_json(r#"{"text":"","status":"ok","toolTrace":[],"latencyMs":0}"#).is_err());
        assert!(
            Envelope::from_json(r#"{"text":"","status":"maybe","toolTrace":[],"latencyMs":0,"warnings":[]}"#)
                .is_err()
        );
    }

    #[test]
    fn timestamps_are_utc_with_milliseconds() {
        let time = SystemTime::UNIX_EPOCH + Duration::from_millis(1_777_213_935_123);
        assert_eq!(iso8601_millis(time), "2026-04-26T14:32:15.123Z");
    }
}
