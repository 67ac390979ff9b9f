//! Historian tools (ModelOptions 0x10): a tag's samples over a time window, with statistics,
//! the excursions of a tag past a limit (when, for how long, how far), and what many tags
//! read at a past instant.

use std::time::{Duration, SystemTime};

use localai::ModelOptions;
use localai::tools::{ToolDefinition, ToolError};
use plant_model::TagType;
use serde_json::{Value, json};

use super::{
    Cap, Window, blocking, bounded_list, find_tag, plant_tool, read_window, text_argument, window_schema,
};
use crate::objects::TagDefinition;
use crate::plant::PlantReader;

const SAMPLES_CAP: Cap = Cap {
    name: "max_samples",
    default: 100,
    ceiling: 1000,
};

/// The window when the model gives none: the last hour.
const DEFAULT_MINUTES: u64 = 60;

const EXCURSIONS_CAP: Cap = Cap {
    name: "max_results",
    default: 20,
    ceiling: 100,
};

/// The window the excursions tool looks in when the model gives none: the last day.
const EXCURSION_MINUTES: u64 = 24 * 60;

/// The most intervals one history read gives the model: a day of quarter hours, a week of
/// hours, a year of days.
const MAX_TOOL_INTERVALS: usize = 400;

/// The most tags one instant is read for.
const MAX_INSTANT_TAGS: usize = 50;

/// How far back from the instant a tag's last stored sample is looked for: a tag stores a
/// sample at least every 10 minutes while samples come, so a day finds any tag that was live.
const INSTANT_LOOKBACK: Duration = Duration::from_secs(24 * 3600);

/// The most samples an excursion search reads: a longer window is read as each of as many
/// buckets' first, lowest, highest and last sample, which keeps every excursion's peak.
const EXCURSION_SAMPLES: usize = 400_000;

pub(super) fn tools(plant: &PlantReader) -> Vec<ToolDefinition> {
    let mut properties = serde_json::Map::new();
    properties.insert(
        "tag".into(),
        json!({"type": "string", "minLength": 1, "maxLength": 512,
               "description": "Dotted tag name or UNS path."}),
    );
    window_schema(&mut properties, DEFAULT_MINUTES);
    properties.insert("max_samples".into(), SAMPLES_CAP.schema("samples"));
    properties.insert(
        "interval_minutes".into(),
        json!({"type": "integer", "minimum": 1, "maximum": 525_600,
               "description": format!("Instead of samples, aggregates per interval of this many minutes (at most \
               {MAX_TOOL_INTERVALS} intervals in the window): time-weighted average, min, max, first, last, count, \
               and for booleans and text the minutes in each value.")}),
    );
    let mut excursion = serde_json::Map::new();
    excursion.insert(
        "tag".into(),
        json!({"type": "string", "minLength": 1, "maxLength": 512,
               "description": "Dotted tag name or UNS path of a numeric tag."}),
    );
    excursion.insert(
        "above".into(),
        json!({"type": "number", "description": "Find when the value was above this (give above or below)."}),
    );
    excursion.insert(
        "below".into(),
        json!({"type": "number", "description": "Find when the value was below this (give above or below)."}),
    );
    window_schema(&mut excursion, EXCURSION_MINUTES);
    excursion.insert("max_results".into(), EXCURSIONS_CAP.schema("excursions"));
    vec![
        plant_tool(
            plant,
            "runtime_get_tag_history",
            ModelOptions::HISTORIAN_TOOLS,
            "Read a tag's recorded history over a time window (default the last 60 minutes): samples oldest first \
         (when there are more than max_samples, the window's buckets each give their first, lowest, highest \
         and last sample, so no spike is lost), valueBefore (the value it held when the window began: a tag \
         without samples in the window held it throughout), and min, max and mean over the whole window; or, with \
         interval_minutes, aggregates per interval (use it for 'hourly averages of Tank1.Level today' or \
         'how long did Pump1 run each shift').",
            json!({"type": "object", "additionalProperties": false, "required": ["tag"], "properties": properties}),
            |plant, arguments| async move { tag_history(&plant, &arguments).await },
        ),
        plant_tool(
            plant,
            "runtime_find_excursions",
            ModelOptions::HISTORIAN_TOOLS,
            "Find when a numeric tag was above (or below) a limit in a time window (default the last 24 hours): \
         each excursion's start, end (null while it lasts), duration and peak, newest first, from the \
         recorded history. Use it for 'when was Tank1.Level above 85 today, and for how long?'.",
            json!({"type": "object", "additionalProperties": false, "required": ["tag"], "properties": excursion}),
            |plant, arguments| async move { find_excursions(&plant, &arguments).await },
        ),
        plant_tool(
            plant,
            "runtime_get_values_at",
            ModelOptions::HISTORIAN_TOOLS,
            "Read what several tags were at a past instant (up to 50 tags): for each, the last recorded sample \
             at or before it (value, quality and when it was recorded), or that none was recorded in the day \
             before. Use it for 'what were Pump1's readings when it tripped at 08:14?'.",
            json!({"type": "object", "additionalProperties": false, "required": ["tags", "time"], "properties": {
                "tags": {"type": "array", "minItems": 1, "maxItems": MAX_INSTANT_TAGS,
                         "items": {"type": "string", "minLength": 1, "maxLength": 512},
                         "description": "Dotted tag names or UNS paths."},
                "time": {"type": "string", "maxLength": 40,
                         "description": "The instant, RFC 3339 UTC such as 2026-11-21T08:14:00Z."}
            }}),
            |plant, arguments| async move { values_at(&plant, &arguments).await },
        ),
    ]
}

async fn tag_history(plant: &PlantReader, arguments: &Value) -> Result<Value, ToolError> {
    let tag = find_tag(plant, text_argument(arguments, "tag")?)?;
    let definition = tag.definition().clone();
    let window = read_window(arguments, DEFAULT_MINUTES, SystemTime::now())?;
    if let Some(minutes) = arguments.get("interval_minutes").and_then(Value::as_u64) {
        return tag_intervals(plant, definition, window, minutes).await;
    }
    let cap = SAMPLES_CAP.read(arguments);
    let historian = std::sync::Arc::clone(plant.historian());
    let page = {
        let name = definition.name.clone();
        blocking(move || historian.tag_history(&name, definition.kind, window.from, window.to, cap)).await?
    };
    let as_json = |sample: &store::HistorySample| {
        json!({
            "time": localai::iso8601_millis(sample.time),
            "value": sample.value.to_json(),
            "quality": sample.quality.label(),
        })
    };
    let samples: Vec<Value> = page.samples.iter().map(as_json).collect();
    let opening = page.opening.as_ref().map(as_json);
    let stats = page
        .stats
        .map(|stats| json!({"min": stats.min, "max": stats.max, "mean": stats.mean}));
    Ok(bounded_list(samples, page.total > cap, |samples, truncated| {
        let mut result = json!({
            "tag": definition.name,
            "from": localai::iso8601_millis(window.from),
            "to": localai::iso8601_millis(window.to),
            "valueBefore": opening,
            "samples": samples,
            "totalSamples": page.total,
            "truncated": truncated,
            "stats": stats,
        });
        if !definition.units.is_empty() {
            result["units"] = json!(definition.units);
        }
        result
    }))
}

/// `runtime_get_tag_history` with `interval_minutes`: the aggregates per interval.
async fn tag_intervals(
    plant: &PlantReader,
    definition: TagDefinition,
    window: Window,
    minutes: u64,
) -> Result<Value, ToolError> {
    let interval = Duration::from_secs(minutes.max(1).saturating_mul(60));
    let millis = |time: SystemTime| {
        time.duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |since| i64::try_from(since.as_millis()).unwrap_or(i64::MAX))
    };
    let step = i64::try_from(interval.as_millis()).unwrap_or(i64::MAX);
    let count = store::interval_count((millis(window.from), millis(window.to)), step);
    if count > MAX_TOOL_INTERVALS {
        return Err(ToolError::invalid_arguments(format!(
            "interval_minutes {minutes} cuts the window into {count} intervals, more than {MAX_TOOL_INTERVALS}: \
             ask for a longer interval or a shorter window"
        ))
        .with_details(json!({"argument": "interval_minutes", "value": minutes})));
    }
    let historian = std::sync::Arc::clone(plant.historian());
    let intervals = {
        let name = definition.name.clone();
        let kind = definition.kind;
        blocking(move || historian.history_intervals(&name, kind, (window.from, window.to), interval)).await?
    };
    let sample = |sample: &Option<store::HistorySample>| {
        sample.as_ref().map(
            |sample| json!({"time": localai::iso8601_millis(sample.time), "value": sample.value.to_json()}),
        )
    };
    let minutes_of = |duration: Duration| (duration.as_secs_f64() / 60.0 * 1000.0).round() / 1000.0;
    let rows: Vec<Value> = intervals
        .iter()
        .map(|interval| {
            let mut row = json!({
                "start": localai::iso8601_millis(interval.start),
                "end": localai::iso8601_millis(interval.end),
                "count": interval.count,
                "average": interval.average,
                "min": sample(&interval.min),
                "max": sample(&interval.max),
                "first": sample(&interval.first),
                "last": sample(&interval.last),
                "goodMinutes": minutes_of(interval.good),
            });
            if matches!(definition.kind, TagType::Bool | TagType::String) {
                row["minutesInState"] = interval
                    .states
                    .iter()
                    .map(|(value, held)| json!({"value": value.to_json(), "minutes": minutes_of(*held)}))
                    .collect();
            }
            row
        })
        .collect();
    Ok(bounded_list(rows, false, |rows, truncated| {
        let mut result = json!({
            "tag": definition.name,
            "from": localai::iso8601_millis(window.from),
            "to": localai::iso8601_millis(window.to),
            "intervalMinutes": minutes,
            "intervals": rows,
            "truncated": truncated,
            "note": "average is time-weighted over good-quality time; a number moves along the line between samples, \
                     other values hold until the next sample",
        });
        if !definition.units.is_empty() {
            result["units"] = json!(definition.units);
        }
        result
    }))
}

/// One stretch of time a tag spent past a limit.
#[derive(Debug, Clone, PartialEq)]
struct Excursion {
    start: SystemTime,
    /// `None` while it lasts (the window ends past the limit).
    end: Option<SystemTime>,
    /// Whether it had begun before the window.
    started_before: bool,
    peak: f64,
}

/// The excursions past `limit` (`above`: greater than it, else less) of a line through
/// `samples` (time, value), oldest first; a crossing is placed where the line meets the limit.
fn excursions(samples: &[(SystemTime, f64)], limit: f64, above: bool) -> Vec<Excursion> {
    let past = |value: f64| if above { value > limit } else { value < limit };
    let further = |value: f64, peak: f64| if above { value > peak } else { value < peak };
    let crossing = |(t0, v0): (SystemTime, f64), (t1, v1): (SystemTime, f64)| {
        let span = t1.duration_since(t0).unwrap_or_default();
        let share = if (v1 - v0).abs() > f64::EPSILON {
            ((limit - v0) / (v1 - v0)).clamp(0.0, 1.0)
        } else {
            1.0
        };
        t0 + span.mul_f64(share)
    };
    let mut found: Vec<Excursion> = Vec::new();
    let mut open: Option<Excursion> = None;
    let mut previous: Option<(SystemTime, f64)> = None;
    for &(time, value) in samples {
        match (&mut open, past(value)) {
            (Some(excursion), true) => {
                if further(value, excursion.peak) {
                    excursion.peak = value;
                }
            }
            (Some(_), false) => {
                if let Some(mut done) = open.take() {
                    done.end = Some(previous.map_or(time, |before| crossing(before, (time, value))));
                    found.push(done);
                }
            }
            (None, true) => {
                open = Some(Excursion {
                    start: previous.map_or(time, |before| crossing(before, (time, value))),
                    end: None,
                    started_before: previous.is_none(),
                    peak: value,
                });
            }
            (None, false) => {}
        }
        previous = Some((time, value));
    }
    found.extend(open);
    found
}

async fn find_excursions(plant: &PlantReader, arguments: &Value) -> Result<Value, ToolError> {
    let tag = find_tag(plant, text_argument(arguments, "tag")?)?;
    let definition = tag.definition().clone();
    let (limit, above) = match (
        arguments.get("above").and_then(Value::as_f64),
        arguments.get("below").and_then(Value::as_f64),
    ) {
        (Some(limit), None) => (limit, true),
        (None, Some(limit)) => (limit, false),
        _ => {
            return Err(ToolError::invalid_arguments(
                "give one limit: 'above' or 'below' (a number)",
            ));
        }
    };
    if !matches!(
        definition.kind,
        plant_model::TagType::Number | plant_model::TagType::Integer
    ) {
        return Err(ToolError::invalid_arguments(format!(
            "{} is not a numeric tag: excursions are of numbers",
            definition.name
        )));
    }
    let window = read_window(arguments, EXCURSION_MINUTES, SystemTime::now())?;
    let cap = EXCURSIONS_CAP.read(arguments);
    let historian = std::sync::Arc::clone(plant.historian());
    let page = {
        let name = definition.name.clone();
        blocking(move || {
            historian.tag_history(&name, definition.kind, window.from, window.to, EXCURSION_SAMPLES)
        })
        .await?
    };
    // Only Good samples draw the line: a value the field did not vouch for is no excursion.
    let line: Vec<(SystemTime, f64)> = page
        .samples
        .iter()
        .filter(|sample| sample.quality == plant_model::Quality::GOOD)
        .filter_map(|sample| Some((sample.time, sample.value.as_f64()?)))
        .collect();
    let mut found = excursions(&line, limit, above);
    found.reverse();
    let total = found.len();
    let listed: Vec<Value> = found
        .into_iter()
        .take(cap)
        .map(|excursion| {
            let until = excursion.end.unwrap_or(window.to);
            json!({
                "start": localai::iso8601_millis(excursion.start),
                "startedBeforeWindow": excursion.started_before,
                "end": excursion.end.map(localai::iso8601_millis),
                "durationS": until.duration_since(excursion.start).unwrap_or_default().as_secs(),
                "peak": excursion.peak,
            })
        })
        .collect();
    let condition = format!("{} {limit}", if above { "above" } else { "below" });
    Ok(bounded_list(listed, total > cap, |listed, truncated| {
        let mut result = json!({
            "tag": definition.name,
            "condition": condition,
            "from": localai::iso8601_millis(window.from),
            "to": localai::iso8601_millis(window.to),
            "excursions": listed,
            "totalExcursions": total,
            "truncated": truncated,
        });
        if !definition.units.is_empty() {
            result["units"] = json!(definition.units);
        }
        result
    }))
}

async fn values_at(plant: &PlantReader, arguments: &Value) -> Result<Value, ToolError> {
    let names: Vec<&str> = arguments
        .get("tags")
        .and_then(Value::as_array)
        .map(|tags| tags.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if names.is_empty() || names.len() > MAX_INSTANT_TAGS {
        return Err(ToolError::invalid_arguments(format!(
            "'tags' lists 1 to {MAX_INSTANT_TAGS} tag names"
        )));
    }
    if arguments.get("time").and_then(Value::as_str).is_none() {
        return Err(ToolError::invalid_arguments(
            "'time' is required: the instant, RFC 3339 UTC",
        ));
    }
    let instant = read_window(&json!({"end": arguments["time"]}), 1, SystemTime::now())?.to;
    let definitions = names
        .iter()
        .map(|name| Ok(find_tag(plant, name)?.definition().clone()))
        .collect::<Result<Vec<_>, ToolError>>()?;
    let historian = std::sync::Arc::clone(plant.historian());
    let from = instant
        .checked_sub(INSTANT_LOOKBACK)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    let readings = blocking(move || {
        let tags: Vec<(&str, TagType)> = definitions
            .iter()
            .map(|definition| (definition.name.as_str(), definition.kind))
            .collect();
        let samples = historian.values_at(&tags, instant)?;
        Ok::<_, store::SolutionError>(
            definitions
                .iter()
                .zip(samples)
                .map(|(definition, sample)| {
                    let mut reading = json!({"tag": definition.name});
                    match sample.filter(|sample| sample.time >= from) {
                        Some(sample) => {
                            reading["value"] = sample.value.to_json();
                            reading["quality"] = json!(sample.quality.label());
                            reading["recorded"] = json!(localai::iso8601_millis(sample.time));
                        }
                        None => reading["note"] = json!("nothing recorded in the day before the instant"),
                    }
                    if !definition.units.is_empty() {
                        reading["units"] = json!(definition.units);
                    }
                    reading
                })
                .collect::<Vec<Value>>(),
        )
    })
    .await?;
    Ok(bounded_list(
        readings,
        false,
        |readings, truncated| json!({"time": localai::iso8601_millis(instant), "values": readings, "truncated": truncated}),
    ))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    fn at(second: u64, value: f64) -> (SystemTime, f64) {
        (UNIX_EPOCH + Duration::from_secs(second), value)
    }

    #[test]
    fn excursions_begin_and_end_where_the_line_crosses_the_limit() {
        let line = [
            at(0, 80.0),
            at(10, 90.0),
            at(20, 95.0),
            at(30, 80.0),
            at(40, 86.0),
        ];
        let found = excursions(&line, 85.0, true);
        assert_eq!(
            found,
            [
                Excursion {
                    start: UNIX_EPOCH + Duration::from_secs(5),
                    end: Some(
                        UNIX_EPOCH + Duration::from_secs(20) + Duration::from_secs(10).mul_f64(10.0 / 15.0)
                    ),
                    started_before: false,
                    peak: 95.0,
                },
                Excursion {
                    start: UNIX_EPOCH + Duration::from_secs(30) + Duration::from_secs(10).mul_f64(5.0 / 6.0),
                    end: None,
                    started_before: false,
                    peak: 86.0,
                },
            ]
        );
        let low = excursions(&[at(0, 5.0), at(10, 20.0)], 10.0, false);
        assert_eq!(low.len(), 1);
        assert!(low[0].started_before && low[0].start == UNIX_EPOCH);
        assert_eq!(low[0].peak, 5.0);
    }
}
