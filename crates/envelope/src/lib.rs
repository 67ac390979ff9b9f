//! The Local AI reply envelope: the five-field JSON object every Local AI call returns.
//!
//! Both execution paths build it and display clients parse it, so it lives in its own small
//! crate that knows nothing of HTTP, sockets or the solution. The constructors enforce the
//! schema's rules (for example `text` is empty on every non-`ok` status except a `truncated`
//! turn with a partial answer), and serializing cannot fail.

use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::Value;

mod time;

pub use time::{LAST_RFC3339_MILLIS, iso8601_millis};

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
    pub const fn as_str(self) -> &'static str {
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

/// The smallest limit [`Envelope::fit`] honours: room for the five fields and the warning
/// that says what was cut.
pub const MIN_ENVELOPE_BYTES: usize = 1024;

/// Room kept for the warning that says what [`Envelope::fit`] cut.
const FIT_NOTE_ROOM: usize = 400;

/// The longest warning kept whole by [`Envelope::fit`] (warnings quote error bodies).
const MAX_FITTED_WARNING: usize = 2000;

/// The largest a tool trace value may stay when an envelope must be cut, before halving.
const FIRST_TRACE_VALUE_CAP: usize = 16 * 1024;

/// The smallest cap a trace value is cut to before entries are dropped instead.
const LAST_TRACE_VALUE_CAP: usize = 128;

impl Envelope {
    /// The envelope cut to at most `max_bytes` of JSON (at least [`MIN_ENVELOPE_BYTES`]), so
    /// that it always fits where it must go (a reply frame, say). An envelope that fits is
    /// returned as it is. Otherwise, in this order until it fits: warnings longer than 2,000
    /// bytes are cut to that; each tool trace value (arguments, result) is replaced by an
    /// excerpt of its JSON, with a cap halved from 16 KiB down to 128 bytes; trace entries are
    /// dropped from the end; warnings taking more than a quarter of the room are dropped from
    /// the end; last, the answer text is cut. A warning says what was cut, and an `ok` whose answer was cut
    /// becomes `truncated` (its text is then a partial answer, as the status says).
    pub fn fit(mut self, max_bytes: usize) -> Self {
        let max = max_bytes.max(MIN_ENVELOPE_BYTES);
        let original = self.json_len();
        if original <= max {
            return self;
        }
        let budget = max - FIT_NOTE_ROOM;
        let mut cut = Vec::new();
        if self
            .warnings
            .iter()
            .any(|warning| warning.len() > MAX_FITTED_WARNING)
        {
            for warning in &mut self.warnings {
                cut_to_chars(warning, MAX_FITTED_WARNING);
            }
            cut.push("long warnings".to_owned());
        }
        let mut cap = FIRST_TRACE_VALUE_CAP;
        let mut values_cut = false;
        while self.json_len() > budget && cap >= LAST_TRACE_VALUE_CAP && !self.tool_trace.is_empty() {
            for entry in &mut self.tool_trace {
                values_cut |= shorten_value(&mut entry.args, cap);
                values_cut |= shorten_value(&mut entry.result, cap);
            }
            cap /= 2;
        }
        if values_cut {
            cut.push("tool arguments and results".to_owned());
        }
        // The answer is what the operator needs: the whole trace goes before the text is cut.
        let entries = self.tool_trace.len();
        while self.json_len() > budget && !self.tool_trace.is_empty() {
            self.tool_trace.pop();
        }
        if self.tool_trace.len() < entries {
            cut.push(format!(
                "{} of {entries} tool trace entries",
                entries - self.tool_trace.len()
            ));
        }
        // Warnings matter less than the answer once they outgrow a quarter of the room.
        let warnings_len =
            |warnings: &[String]| warnings.iter().map(|w| json_string_len(w) + 1).sum::<usize>();
        while self.json_len() > budget && warnings_len(&self.warnings) > budget / 4 {
            self.warnings.pop();
            if !cut.iter().any(|part| part == "warnings") {
                cut.push("warnings".to_owned());
            }
        }
        let size = self.json_len();
        if size > budget {
            let text_bytes = self.text.len();
            let allowed = json_string_len(&self.text).saturating_sub(size - budget);
            let kept = json_prefix(&self.text, allowed.saturating_sub(2)).len();
            self.text.truncate(kept);
            cut.push(format!("the answer ({kept} of {text_bytes} bytes kept)"));
            if self.status == Status::Ok {
                self.status = Status::Truncated;
            }
        }
        while self.json_len() > budget && !self.warnings.is_empty() {
            self.warnings.pop();
            if !cut.iter().any(|part| part == "warnings") {
                cut.push("warnings".to_owned());
            }
        }
        self.warnings.push(format!(
            "The reply of {original} bytes was cut to fit the limit of {max} bytes: {}.",
            cut.join(", ")
        ));
        self
    }

    /// The length of [`to_json`](Self::to_json).
    fn json_len(&self) -> usize {
        let mut counter = ByteCounter(0);
        match serde_json::to_writer(&mut counter, self) {
            Ok(()) => counter.0,
            Err(_) => usize::MAX,
        }
    }
}

/// Counts bytes written, keeping none.
struct ByteCounter(usize);

impl std::io::Write for ByteCounter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Bytes a string takes as a JSON string, quotes included (serde_json's escaping).
fn json_string_len(text: &str) -> usize {
    2 + text.chars().map(escaped_len).sum::<usize>()
}

/// Bytes one character takes inside a JSON string.
fn escaped_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

/// The longest prefix of `text` (on a character boundary) whose JSON escaping takes at most
/// `max` bytes.
fn json_prefix(text: &str, max: usize) -> &str {
    let mut used = 0;
    for (index, c) in text.char_indices() {
        used += escaped_len(c);
        if used > max {
            return &text[..index];
        }
    }
    text
}

/// Cuts `text` to at most `max` bytes on a character boundary, marking the cut.
fn cut_to_chars(text: &mut String, max: usize) {
    if text.len() > max {
        let kept = json_prefix(text, max).len().min(max);
        let mut end = kept;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
}

/// Replaces `value` by an excerpt of its JSON when that is longer than `cap` bytes; returns
/// whether it did.
fn shorten_value(value: &mut Value, cap: usize) -> bool {
    let json = value.to_string();
    if json.len() <= cap {
        return false;
    }
    let excerpt = json_prefix(&json, cap.saturating_sub(80) / 2);
    *value = Value::String(format!(
        "{excerpt}… ({} bytes of JSON cut to fit the reply)",
        json.len()
    ));
    true
}

/// Whole milliseconds of a duration, saturating.
pub fn millis(elapsed: Duration) -> u64 {
    u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
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

    fn trace_entry(args: Value, result: Value) -> ToolTraceEntry {
        ToolTraceEntry::new(
            "runtime_get_value",
            args,
            result,
            ToolStatus::Ok,
            SystemTime::UNIX_EPOCH,
            Duration::ZERO,
        )
    }

    #[test]
    fn an_envelope_that_fits_is_left_alone() {
        let envelope = Envelope::ok("fine", Duration::from_millis(3));
        let size = envelope.to_json().len();
        assert_eq!(envelope.clone().fit(size), envelope, "exactly at the limit");
        assert_eq!(envelope.clone().fit(MIN_ENVELOPE_BYTES), envelope);
    }

    #[test]
    fn a_long_answer_is_cut_to_the_limit_and_becomes_truncated() {
        // Quotes and control characters escape to more bytes than they take.
        let text = "Pump \"1\"\u{1}é\n".repeat(200_000);
        for max in [4096, 64 * 1024, 1024 * 1024] {
            let fitted = Envelope::ok(text.clone(), Duration::ZERO).fit(max);
            let json = fitted.to_json();
            assert!(json.len() <= max, "{} > {max}", json.len());
            assert!(
                json.len() > max - 2 * FIT_NOTE_ROOM,
                "the room is used: {}",
                json.len()
            );
            assert_eq!(fitted.status, Status::Truncated);
            assert!(text.starts_with(&fitted.text));
            let note = fitted.warnings.last().expect("a note");
            assert!(
                note.contains("cut to fit the limit") && note.contains("the answer ("),
                "{note}"
            );
            assert_eq!(Envelope::from_json(&json).expect("valid"), fitted);
        }
    }

    #[test]
    fn an_answer_that_fits_alone_is_kept_whole_and_the_trace_goes() {
        let max = 64 * 1024;
        let text = "a".repeat(max - 1000);
        let fitted = Envelope::ok(text.clone(), Duration::ZERO)
            .with_tool_trace(
                (0..20)
                    .map(|_| trace_entry(json!({}), json!("r".repeat(500))))
                    .collect(),
            )
            .fit(max);
        assert!(fitted.to_json().len() <= max);
        assert_eq!((fitted.status, fitted.text.len()), (Status::Ok, text.len()));
        assert!(
            fitted.warnings[0].contains("tool trace entries"),
            "{:?}",
            fitted.warnings
        );
    }

    #[test]
    fn the_trace_is_cut_before_the_answer() {
        let huge_args = json!({"tag": "x".repeat(5_000_000)});
        let mut envelope = Envelope::ok("Pump 1 is fine.", Duration::ZERO)
            .with_tool_trace(vec![trace_entry(huge_args, json!({"value": 1}))]);
        envelope
            .tool_trace
            .extend((0..40).map(|i| trace_entry(json!({"i": i}), json!("y".repeat(50_000)))));
        let max = 1024 * 1024 - 64;
        let fitted = envelope.fit(max);
        assert!(fitted.to_json().len() <= max);
        assert_eq!(fitted.status, Status::Ok, "the answer is whole");
        assert_eq!(fitted.text, "Pump 1 is fine.");
        assert_eq!(fitted.tool_trace.len(), 41, "entries are kept, their values cut");
        assert!(
            fitted.tool_trace[0]
                .args
                .as_str()
                .is_some_and(|args| args.contains("bytes of JSON cut"))
        );
        assert!(
            fitted.warnings[0].contains("tool arguments and results"),
            "{:?}",
            fitted.warnings
        );
        // Far over a small limit: entries go too, the answer still leads.
        let tiny = Envelope::ok("ok", Duration::ZERO)
            .with_tool_trace(
                (0..50)
                    .map(|_| trace_entry(json!({}), json!("z".repeat(1000))))
                    .collect(),
            )
            .with_warnings(["w".repeat(100_000)])
            .fit(2048);
        assert!(tiny.to_json().len() <= 2048, "{}", tiny.to_json().len());
        assert_eq!(tiny.text, "ok");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        #[test]
        fn a_fitted_envelope_always_fits_and_stays_valid(
            text in ".{0,3000}",
            values in proptest::collection::vec(".{0,2000}", 0..20),
            warnings in proptest::collection::vec(".{0,3000}", 0..6),
            max in 0_usize..40_000,
        ) {
            let trace = values.iter().map(|value| trace_entry(json!({"v": value}), json!([value, value]))).collect();
            let envelope = Envelope::ok(text.clone(), Duration::ZERO).with_tool_trace(trace).with_warnings(warnings);
            let fitted = envelope.clone().fit(max);
            let json = fitted.to_json();
            proptest::prop_assert!(json.len() <= max.max(MIN_ENVELOPE_BYTES), "{} > {max}", json.len());
            proptest::prop_assert_eq!(Envelope::from_json(&json).ok(), Some(fitted.clone()));
            proptest::prop_assert!(text.starts_with(&fitted.text));
            if fitted != envelope {
                proptest::prop_assert!(fitted.warnings.last().is_some_and(|w| w.contains("cut to fit")));
            }
        }
    }

    #[test]
    fn timestamps_are_utc_with_milliseconds() {
        let time = SystemTime::UNIX_EPOCH + Duration::from_millis(1_777_213_935_123);
        assert_eq!(iso8601_millis(time), "2026-04-26T14:32:15.123Z");
    }
}
