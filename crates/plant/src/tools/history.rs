//! Historian tool (ModelOptions 0x10): a tag's samples over a time window, with statistics.

use std::time::SystemTime;

use localai::ModelOptions;
use localai::tools::{ToolDefinition, ToolError};
use serde_json::{Value, json};

use super::{Cap, blocking, bounded_list, find_tag, plant_tool, read_window, text_argument, window_schema};
use crate::plant::PlantReader;

const SAMPLES_CAP: Cap = Cap {
    name: "max_samples",
    default: 100,
    ceiling: 1000,
};

/// The window when the model gives none: the last hour.
const DEFAULT_MINUTES: u64 = 60;

pub(super) fn tools(plant: &PlantReader) -> Vec<ToolDefinition> {
    let mut properties = serde_json::Map::new();
    properties.insert(
        "tag".into(),
        json!({"type": "string", "minLength": 1, "maxLength": 512,
               "description": "Dotted tag name or UNS path."}),
    );
    window_schema(&mut properties, DEFAULT_MINUTES);
    properties.insert("max_samples".into(), SAMPLES_CAP.schema("samples"));
    vec![plant_tool(
        plant,
        "runtime_get_tag_history",
        ModelOptions::HISTORIAN_TOOLS,
        "Read a tag's recorded history over a time window (default the last 60 minutes): samples oldest first \
         (when there are more than max_samples, the window's buckets each give their first, lowest, highest \
         and last sample, so no spike is lost) and min, max and mean over the whole window.",
        json!({"type": "object", "additionalProperties": false, "required": ["tag"], "properties": properties}),
        |plant, arguments| async move { tag_history(&plant, &arguments).await },
    )]
}

async fn tag_history(plant: &PlantReader, arguments: &Value) -> Result<Value, ToolError> {
    let tag = find_tag(plant, text_argument(arguments, "tag")?)?;
    let definition = tag.definition().clone();
    let window = read_window(arguments, DEFAULT_MINUTES, SystemTime::now())?;
    let cap = SAMPLES_CAP.read(arguments);
    let historian = std::sync::Arc::clone(plant.historian());
    let page = {
        let name = definition.name.clone();
        blocking(move || historian.tag_history(&name, definition.kind, window.from, window.to, cap)).await?
    };
    let samples: Vec<Value> = page
        .samples
        .iter()
        .map(|sample| {
            json!({
                "time": localai::iso8601_millis(sample.time),
                "value": sample.value.to_json(),
                "quality": sample.quality.label(),
            })
        })
        .collect();
    let stats = page
        .stats
        .map(|stats| json!({"min": stats.min, "max": stats.max, "mean": stats.mean}));
    Ok(bounded_list(samples, page.total > cap, |samples, truncated| {
        let mut result = json!({
            "tag": definition.name,
            "from": localai::iso8601_millis(window.from),
            "to": localai::iso8601_millis(window.to),
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
