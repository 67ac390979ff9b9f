//! The runtime tools: the assistant's read-only view of the live plant, with the names of the
//! platform's runtime MCP server, dispatched in process (no HTTP loopback).
//!
//! - UNS (0x04): `uns.rs` — `runtime_get_value`, `runtime_browse_object_model`,
//!   `runtime_search_uns`, `runtime_describe_object`, `runtime_list_instances`; `documents.rs`
//!   — `runtime_search_documents` (passages of the plant's documents, to cite);
//! - Alarms (0x08): `alarms.rs` — `runtime_get_active_alarms`, `runtime_query_alarm_history`;
//! - Historian (0x10): `history.rs` — `runtime_get_tag_history`, `runtime_find_excursions`,
//!   `runtime_get_values_at`;
//! - Alarms (0x08) also: `runtime_get_alarm_report` (the alarm system's KPIs and bad actors);
//! - Proposals (0x40): `proposals.rs` — `runtime_propose_write`, `runtime_propose_alarm_ack`,
//!   `runtime_propose_alarm_shelve` (they only propose: an operator decides) and
//!   `runtime_get_proposal` (where a proposal stands).
//!
//! Each tool's title and the JSON schema of its result (what MCP clients list and check) are in
//! `results.json`, one table beside the code that builds the results.
//!
//! Every list has a `max_*` argument with a default and a hard ceiling (a larger request is
//! clamped, not refused) and reports `truncated`; every result is also cut to
//! [`MAX_RESULT_BYTES`] of JSON so one call cannot flood a small model's context.

mod alarms;
mod documents;
mod history;
mod proposals;
mod uns;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use localai::tools::{ToolCatalog, ToolDefinition, ToolError};
use serde_json::{Value, json};

use crate::objects::{AlarmDefinition, AlarmGuidance, AlarmHandling, Tag};
use crate::plant::PlantReader;
use crate::proposals::ProposalBoard;
use plant_model::Quality;
pub use proposals::proposal_standing;

/// The most JSON one tool result may hold (about 4,000 tokens).
pub const MAX_RESULT_BYTES: usize = 16 * 1024;

/// Tool names starting with this are the runtime's own; custom tools may not use it.
pub const RESERVED_PREFIX: &str = "runtime_";

/// A catalog holding every runtime tool of `plant`, the proposal tools putting their
/// proposals on `board`.
pub fn runtime_catalog(plant: &PlantReader, board: &Arc<ProposalBoard>) -> ToolCatalog {
    let catalog = ToolCatalog::default();
    let presentation = presentation();
    for tool in uns::tools(plant)
        .into_iter()
        .chain(documents::tools(plant))
        .chain(alarms::tools(plant))
        .chain(history::tools(plant))
        .chain(proposals::tools(plant, board))
    {
        let tool = match presentation.get(tool.name()) {
            Some(shown) => tool
                .titled(shown["title"].as_str().unwrap_or_default())
                .with_result_schema(shown["result"].clone()),
            None => tool,
        };
        // The runtime's own names are fixed and distinct (a unit test registers them all);
        // a failure here is a programming error worth a log line, not a server that won't start.
        if let Err(error) = catalog.register(tool) {
            tracing::error!(%error, "runtime tool not registered");
        }
    }
    catalog
}

/// Each runtime tool's title and result schema, by name (`results.json`).
fn presentation() -> serde_json::Map<String, Value> {
    // Built into the binary and read by a unit test: it cannot fail to parse in a build.
    match serde_json::from_str(include_str!("results.json")) {
        Ok(Value::Object(table)) => table,
        _ => serde_json::Map::new(),
    }
}

/// A `max_*` argument: its name, default and ceiling.
#[derive(Debug, Clone, Copy)]
struct Cap {
    name: &'static str,
    default: usize,
    ceiling: usize,
}

impl Cap {
    /// The argument's JSON schema.
    fn schema(self, what: &str) -> Value {
        json!({
            "type": "integer",
            "minimum": 1,
            "description": format!(
                "Most {what} to return (default {}, at most {}).", self.default, self.ceiling
            ),
        })
    }

    /// The effective cap: the argument clamped to the ceiling, or the default.
    fn read(self, arguments: &Value) -> usize {
        arguments
            .get(self.name)
            .and_then(Value::as_u64)
            .map_or(self.default, |asked| {
                usize::try_from(asked)
                    .unwrap_or(usize::MAX)
                    .clamp(1, self.ceiling)
            })
    }
}

/// Builds a list result with `shape(items, truncated)`, dropping items from the end until it
/// fits in [`MAX_RESULT_BYTES`]. `truncated` is true when the list was cut by the cap
/// (`more_exist`) or by size.
fn bounded_list(items: Vec<Value>, more_exist: bool, shape: impl Fn(&[Value], bool) -> Value) -> Value {
    let whole = shape(&items, more_exist);
    if json_len(&whole) <= MAX_RESULT_BYTES {
        return whole;
    }
    // The longest prefix that fits, by binary search over its length.
    let (mut fits, mut too_long) = (0, items.len());
    while too_long - fits > 1 {
        let middle = fits + (too_long - fits) / 2;
        if json_len(&shape(&items[..middle], true)) <= MAX_RESULT_BYTES {
            fits = middle;
        } else {
            too_long = middle;
        }
    }
    shape(&items[..fits], true)
}

fn json_len(value: &Value) -> usize {
    serde_json::to_vec(value).map_or(usize::MAX, |bytes| bytes.len())
}

/// Cuts a solution-authored text (a description, a message) to a length that keeps results
/// small, marking the cut.
fn short_text(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// The longest an alarm's cause, consequence or response is in a result, in characters.
const GUIDANCE_CHARS: usize = 500;

/// Adds what to know and do about an alarm to its entry in a result: `cause`, `consequence`
/// and `response` cut like a message, and `time_to_respond_s`; what the plant file does not
/// say is left out rather than sent empty.
fn add_guidance(entry: &mut Value, guidance: &AlarmGuidance) {
    for (key, text) in [
        ("cause", &guidance.cause),
        ("consequence", &guidance.consequence),
        ("response", &guidance.response),
    ] {
        if !text.is_empty() {
            entry[key] = Value::from(short_text(text, GUIDANCE_CHARS));
        }
    }
    if let Some(seconds) = guidance.time_to_respond {
        entry["time_to_respond_s"] = Value::from(seconds);
    }
}

/// How an alarm is handled, added to its entry: `shelved` (by, reason, until),
/// `outOfService` (by, reason, since) or `suppressed` (since, and the `suppress_when` that
/// holds); nothing when it is annunciated.
fn add_handling(entry: &mut Value, definition: &AlarmDefinition, handling: &AlarmHandling) {
    if let (Some(since), Some(expression)) = (handling.suppressed, &definition.suppress_when) {
        entry["suppressed"] = serde_json::json!({
            "since": localai::iso8601_millis(since),
            "when": short_text(&expression.to_string(), GUIDANCE_CHARS),
        });
    }
    if let Some(shelved) = &handling.shelved {
        entry["shelved"] = serde_json::json!({
            "by": short_text(&shelved.by, 64),
            "reason": short_text(&shelved.reason, GUIDANCE_CHARS),
            "until": localai::iso8601_millis(shelved.until),
        });
    }
    if let Some(out) = &handling.out_of_service {
        entry["outOfService"] = serde_json::json!({
            "by": short_text(&out.by, 64),
            "reason": short_text(&out.reason, GUIDANCE_CHARS),
            "since": localai::iso8601_millis(out.since),
        });
    }
}

/// A tag as results show it: name, path, current value, quality, time and units.
fn tag_reading(tag: &Tag) -> Value {
    let definition = tag.definition();
    let sample = tag.current();
    // Built with its room at once: a `json!` object grows (and rehashes) as keys go in, and
    // this is every tool-calling turn's result.
    let mut reading = serde_json::Map::with_capacity(7);
    reading.insert("tag".to_owned(), Value::from(definition.name.as_str()));
    reading.insert("path".to_owned(), Value::from(definition.path.as_str()));
    reading.insert("value".to_owned(), sample.value.to_json());
    reading.insert("quality".to_owned(), Value::from(sample.quality.label()));
    reading.insert(
        "timestamp".to_owned(),
        Value::from(localai::iso8601_millis(sample.timestamp)),
    );
    if !definition.units.is_empty() {
        reading.insert("units".to_owned(), Value::from(definition.units.as_str()));
    }
    // What a write or a proposal may give it, so a model proposes one of them.
    if !definition.allowed_values.is_empty() {
        reading.insert("allowedValues".to_owned(), json!(definition.allowed_values));
    }
    // A value that is not current must never read as current.
    let note = if sample.quality == Quality::BAD {
        Some(
            "not a current reading: its source is unreachable or has no value; this is the last value known, taken at the timestamp",
        )
    } else if sample.quality == Quality::UNCERTAIN {
        Some(
            "possibly stale: not updated within its source's time limit; this is the last value received, taken at the timestamp",
        )
    } else {
        None
    };
    if let Some(note) = note {
        reading.insert("note".to_owned(), Value::from(note));
    }
    Value::Object(reading)
}

/// A required string argument (the schema has checked it is present and a string).
fn text_argument<'a>(arguments: &'a Value, name: &str) -> Result<&'a str, ToolError> {
    arguments
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::invalid_arguments(format!("'{name}' must be a string")))
}

/// The tag an argument names, or a `not_found` error suggesting close names.
fn find_tag(plant: &PlantReader, name: &str) -> Result<std::sync::Arc<Tag>, ToolError> {
    let objects = plant.objects();
    objects.tag(name).cloned().ok_or_else(|| {
        let wanted = name.trim().to_ascii_lowercase();
        let last_word = wanted.rsplit(['.', '/']).next().unwrap_or(&wanted).to_owned();
        let suggestions: Vec<&str> = objects
            .tags()
            .map(|tag| tag.definition().name.as_str())
            .filter(|known| !last_word.is_empty() && known.to_ascii_lowercase().contains(&last_word))
            .take(5)
            .collect();
        ToolError::not_found(format!(
            "no tag named {name:?}; use runtime_search_uns or runtime_browse_object_model to find tags"
        ))
        .with_details(json!({"tag": short_text(name, 200), "suggestions": suggestions}))
    })
}

/// A time window: `start`/`end` (RFC 3339) when given, else the last `minutes` up to now.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Window {
    from: SystemTime,
    to: SystemTime,
}

/// The longest window a query may cover: a year.
const MAX_WINDOW_MINUTES: u64 = 525_600;

fn window_schema(properties: &mut serde_json::Map<String, Value>, default_minutes: u64) {
    properties.insert(
        "minutes".into(),
        json!({"type": "integer", "minimum": 1, "maximum": MAX_WINDOW_MINUTES,
               "description": format!("How many minutes back from now (or from 'end') to look (default {default_minutes}).")}),
    );
    properties.insert(
        "start".into(),
        json!({"type": "string", "maxLength": 40,
               "description": "Window start, RFC 3339 UTC such as 2026-11-21T08:00:00Z (overrides 'minutes')."}),
    );
    properties.insert(
        "end".into(),
        json!({"type": "string", "maxLength": 40,
               "description": "Window end, RFC 3339 UTC (default now)."}),
    );
}

fn read_window(arguments: &Value, default_minutes: u64, now: SystemTime) -> Result<Window, ToolError> {
    let time = |name: &str| -> Result<Option<SystemTime>, ToolError> {
        match arguments.get(name).and_then(Value::as_str) {
            None => Ok(None),
            Some(text) => humantime::parse_rfc3339_weak(text.trim()).map(Some).map_err(|_| {
                ToolError::invalid_arguments(format!(
                    "'{name}' is not an RFC 3339 time such as 2026-11-21T08:00:00Z"
                ))
                .with_details(json!({"argument": name, "value": short_text(text, 40)}))
            }),
        }
    };
    let to = time("end")?.unwrap_or(now);
    let minutes = arguments
        .get("minutes")
        .and_then(Value::as_u64)
        .unwrap_or(default_minutes)
        .min(MAX_WINDOW_MINUTES);
    let from = match time("start")? {
        Some(start) => start,
        None => to
            .checked_sub(Duration::from_secs(minutes * 60))
            .unwrap_or(SystemTime::UNIX_EPOCH),
    };
    if from > to {
        return Err(ToolError::invalid_arguments("'start' is after 'end'"));
    }
    Ok(Window { from, to })
}

/// Runs a blocking database query off the async workers, turning failures into tool errors.
async fn blocking<T: Send + 'static>(
    query: impl FnOnce() -> Result<T, store::SolutionError> + Send + 'static,
) -> Result<T, ToolError> {
    match tokio::task::spawn_blocking(query).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => {
            tracing::warn!(%error, "history query failed");
            Err(ToolError::new("unavailable", "the history store could not be read; try again").retryable())
        }
        Err(_) => Err(ToolError::new("internal", "the history query failed")),
    }
}

/// A `ToolDefinition` whose handler gets a clone of the plant.
fn plant_tool<F, Fut>(
    plant: &PlantReader,
    name: &str,
    category: u32,
    description: &str,
    parameters: Value,
    handler: F,
) -> ToolDefinition
where
    F: Fn(PlantReader, Value) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    let plant = plant.clone();
    // A runtime tool holds a plant reader only: it cannot write.
    ToolDefinition::new(name, category, description, parameters, move |arguments| {
        handler(plant.clone(), arguments)
    })
    .read_only()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_default_clamp_and_floor() {
        let cap = Cap {
            name: "max_results",
            default: 20,
            ceiling: 100,
        };
        assert_eq!(cap.read(&json!({})), 20);
        assert_eq!(cap.read(&json!({"max_results": 5})), 5);
        assert_eq!(cap.read(&json!({"max_results": 100_000})), 100);
        assert_eq!(cap.read(&json!({"max_results": 0})), 1);
    }

    #[test]
    fn bounded_lists_are_cut_to_the_byte_limit() {
        let items: Vec<Value> = (0..1000)
            .map(|i| json!({"n": i, "pad": "x".repeat(100)}))
            .collect();
        let result = bounded_list(
            items,
            false,
            |items, truncated| json!({"items": items, "truncated": truncated}),
        );
        assert!(json_len(&result) <= MAX_RESULT_BYTES);
        assert_eq!(result["truncated"], true);
        let kept = result["items"].as_array().map_or(0, Vec::len);
        assert!(kept > 100 && kept < 1000, "{kept}");
        let small = bounded_list(
            vec![json!(1)],
            false,
            |items, truncated| json!({"items": items, "truncated": truncated}),
        );
        assert_eq!(small, json!({"items": [1], "truncated": false}));
    }

    #[test]
    fn windows_read_minutes_or_times() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let window = read_window(&json!({}), 60, now).expect("default");
        assert_eq!(window.to, now);
        assert_eq!(
            now.duration_since(window.from).ok(),
            Some(Duration::from_secs(3600))
        );
        let window = read_window(
            &json!({"start": "2026-11-21T08:00:00Z", "end": "2026-11-21T09:00:00Z"}),
            60,
            now,
        )
        .expect("explicit");
        assert_eq!(
            window.to.duration_since(window.from).ok(),
            Some(Duration::from_secs(3600))
        );
        let error = read_window(&json!({"start": "yesterday"}), 60, now).expect_err("bad time");
        assert_eq!(error.kind, "invalid_arguments");
        let error = read_window(
            &json!({"start": "2026-11-21T10:00:00Z", "end": "2026-11-21T09:00:00Z"}),
            60,
            now,
        )
        .expect_err("reversed");
        assert!(error.message.contains("after"));
    }

    #[test]
    fn every_presented_tool_has_a_title_and_an_object_result_schema() {
        let table = presentation();
        assert_eq!(table.len(), 16, "{:?}", table.keys().collect::<Vec<_>>());
        for (name, shown) in &table {
            assert!(name.starts_with(RESERVED_PREFIX), "{name}");
            assert!(
                shown["title"].as_str().is_some_and(|title| !title.is_empty()),
                "{name}"
            );
            let schema = &shown["result"];
            assert_eq!(schema["type"], "object", "{name}");
            let properties = schema["properties"].as_object().expect("properties");
            for required in schema["required"].as_array().expect("required keys") {
                let key = required.as_str().expect("a key");
                assert!(
                    properties.contains_key(key),
                    "{name}: {key} is required but not described"
                );
            }
        }
    }

    #[test]
    fn short_text_cuts_on_character_boundaries() {
        assert_eq!(short_text("ééé", 2), "éé…");
        assert_eq!(short_text("abc", 3), "abc");
    }
}
