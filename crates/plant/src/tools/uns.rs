//! UNS tools (ModelOptions 0x04): read a value, browse the namespace, search it, describe an
//! object, list equipment instances.

use localai::ModelOptions;
use localai::tools::{ToolDefinition, ToolError};
use serde_json::{Value, json};

use super::{
    Cap, add_guidance, add_handling, bounded_list, find_tag, plant_tool, short_text, tag_reading,
    text_argument,
};
use crate::objects::{Equipment, is_below, join_path, mask_matches, normalize_path};
use crate::plant::PlantReader;

const BROWSE_CAP: Cap = Cap {
    name: "max_results",
    default: 50,
    ceiling: 200,
};
const SEARCH_CAP: Cap = Cap {
    name: "max_results",
    default: 20,
    ceiling: 100,
};
const INSTANCES_CAP: Cap = Cap {
    name: "max_results",
    default: 50,
    ceiling: 500,
};

/// Descriptions longer than this are cut in lists (a full one is in `runtime_describe_object`).
const LIST_DESCRIPTION_CHARS: usize = 120;

/// Tag names listed per instance or described folder; the rest are counted (browse the folder
/// for all of them).
const LISTED_TAG_NAMES: usize = 50;

/// Active alarms named in a folder's description (all are counted).
const LISTED_ALARMS: usize = 10;

pub(super) fn tools(plant: &PlantReader) -> Vec<ToolDefinition> {
    let uns = ModelOptions::UNS_TOOLS;
    vec![
        plant_tool(
            plant,
            "runtime_get_value",
            uns,
            "Read the current value of one tag: value, quality (Good, Uncertain, Bad), timestamp and units. \
             Accepts the dotted tag name (e.g. Pump1.MotorCurrent) or its UNS path (e.g. Plant/Area1/Pump1/MotorCurrent).",
            json!({"type": "object", "additionalProperties": false, "required": ["tag"], "properties": {
                "tag": {"type": "string", "minLength": 1, "maxLength": 512,
                        "description": "Dotted tag name or UNS path."}
            }}),
            |plant, arguments| async move {
                let tag = find_tag(&plant, text_argument(&arguments, "tag")?)?;
                Ok(tag_reading(&tag))
            },
        ),
        plant_tool(
            plant,
            "runtime_browse_object_model",
            uns,
            "List the children of a folder of the plant's Unified Namespace (UNS): sub-folders (areas, equipment) \
             and tags with their current values. Start at the root (no path) and go down, e.g. Plant, then Plant/Area1.",
            json!({"type": "object", "additionalProperties": false, "properties": {
                "path": {"type": "string", "maxLength": 512,
                         "description": "Folder path such as Plant/Area1; empty or omitted for the root."},
                "max_results": BROWSE_CAP.schema("children")
            }}),
            |plant, arguments| async move { browse(&plant, &arguments) },
        ),
        plant_tool(
            plant,
            "runtime_search_uns",
            uns,
            "Search tags by words in their name, UNS path, description or units (case-insensitive; every word must \
             match). Returns matching tags with current values, best matches first.",
            json!({"type": "object", "additionalProperties": false, "required": ["query"], "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": 200,
                          "description": "Words to look for, e.g. 'pump current' or 'temperature'."},
                "max_results": SEARCH_CAP.schema("tags")
            }}),
            |plant, arguments| async move { search(&plant, &arguments) },
        ),
        plant_tool(
            plant,
            "runtime_describe_object",
            uns,
            "Describe one object in full: for a tag its definition (path, type, units, description, normal range), \
             current value and alarms; for a folder its contents and active alarms below it.",
            json!({"type": "object", "additionalProperties": false, "required": ["path"], "properties": {
                "path": {"type": "string", "maxLength": 512,
                         "description": "A dotted tag name, a tag's UNS path, or a folder path."}
            }}),
            |plant, arguments| async move { describe(&plant, text_argument(&arguments, "path")?) },
        ),
        plant_tool(
            plant,
            "runtime_list_instances",
            uns,
            "List equipment instances (UNS folders that hold tags, such as Pump1 or Tank2) whose names match a mask \
             ('*' any characters, '?' one character, case-insensitive), with their tags and, for an instance \
             of an equipment type the plant file declares, that type.",
            json!({"type": "object", "additionalProperties": false, "properties": {
                "name_mask": {"type": "string", "maxLength": 128,
                              "description": "Name mask such as 'Pump*' (default '*', all)."},
                "max_results": INSTANCES_CAP.schema("instances")
            }}),
            |plant, arguments| async move { list_instances(&plant, &arguments) },
        ),
    ]
}

fn browse(plant: &PlantReader, arguments: &Value) -> Result<Value, ToolError> {
    let asked = arguments.get("path").and_then(Value::as_str).unwrap_or("");
    let objects = plant.objects();
    let Some((path, folder)) = objects.folder(asked) else {
        if let Some(tag) = objects.tag(asked) {
            return Err(ToolError::invalid_arguments(format!(
                "{:?} is a tag, not a folder; read it with runtime_get_value or runtime_describe_object",
                tag.definition().name
            ))
            .with_details(json!({"path": short_text(asked, 200)})));
        }
        return Err(ToolError::not_found(format!(
            "no folder at {:?}; browse from the root (empty path) to see what exists",
            normalize_path(asked)
        ))
        .with_details(json!({"path": short_text(asked, 200)})));
    };
    let cap = BROWSE_CAP.read(arguments);
    let mut children: Vec<Value> = folder
        .folders
        .iter()
        .map(|name| {
            let child_path = join_path(path, name);
            let child = objects.folder(&child_path).map(|(_, child)| child);
            json!({
                "name": name,
                "kind": "folder",
                "path": child_path,
                "children": child.map_or(0, |child| child.folders.len() + child.tags.len()),
            })
        })
        .collect();
    children.extend(
        folder
            .tags
            .iter()
            .filter_map(|tag_path| objects.tag(tag_path))
            .map(|tag| {
                let mut entry = tag_reading(tag);
                entry["name"] = json!(tag_path_leaf(&tag.definition().path));
                entry["kind"] = json!("tag");
                entry
            }),
    );
    let total = children.len();
    children.truncate(cap);
    Ok(bounded_list(
        children,
        total > cap,
        |children, truncated| json!({"path": path, "children": children, "totalChildren": total, "truncated": truncated}),
    ))
}

fn search(plant: &PlantReader, arguments: &Value) -> Result<Value, ToolError> {
    let query = text_argument(arguments, "query")?;
    let words: Vec<String> = query
        .split(|c: char| c.is_whitespace() || matches!(c, '.' | '/' | ',' | '_'))
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
        .collect();
    if words.is_empty() {
        return Err(ToolError::invalid_arguments(
            "'query' holds no words to search for",
        ));
    }
    let cap = SEARCH_CAP.read(arguments);
    let objects = plant.objects();
    let mut matches: Vec<(u32, &std::sync::Arc<crate::objects::Tag>)> = objects
        .tags()
        .filter_map(|tag| {
            let definition = tag.definition();
            let name = definition.name.to_lowercase();
            let path = definition.path.to_lowercase();
            let text = format!("{} {}", definition.description, definition.units).to_lowercase();
            let mut score = 0;
            for word in &words {
                // Name hits rank above path hits, which rank above description hits.
                score += if name.contains(word.as_str()) {
                    4
                } else if path.contains(word.as_str()) {
                    2
                } else if text.contains(word.as_str()) {
                    1
                } else {
                    return None;
                };
            }
            Some((score, tag))
        })
        .collect();
    matches.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then_with(|| a.1.definition().path.cmp(&b.1.definition().path))
    });
    let total = matches.len();
    let results: Vec<Value> = matches
        .into_iter()
        .take(cap)
        .map(|(_, tag)| {
            let mut entry = tag_reading(tag);
            entry["description"] = json!(short_text(&tag.definition().description, LIST_DESCRIPTION_CHARS));
            entry
        })
        .collect();
    Ok(bounded_list(
        results,
        total > cap,
        |results, truncated| json!({"query": short_text(query, 200), "results": results, "totalMatches": total, "truncated": truncated}),
    ))
}

fn describe(plant: &PlantReader, asked: &str) -> Result<Value, ToolError> {
    let objects = plant.objects();
    if let Some(tag) = objects.tag(asked) {
        let definition = tag.definition();
        let mut result = tag_reading(tag);
        result["kind"] = json!("tag");
        result["type"] = json!(crate::objects::type_name(definition.kind));
        result["description"] = json!(short_text(&definition.description, 1000));
        if definition.range_low.is_some() || definition.range_high.is_some() {
            result["range"] = json!({"low": definition.range_low, "high": definition.range_high});
        }
        result["alarms"] = objects
            .alarms_of(&definition.name)
            .iter()
            .map(|alarm| {
                let alarm_definition = alarm.definition();
                let status = alarm.status();
                let mut entry = json!({
                    "name": alarm_definition.name,
                    "condition": alarm_definition.condition.name(),
                    "limit": alarm_definition.limit,
                    "priority": alarm_definition.priority,
                    "message": short_text(&alarm_definition.message, 200),
                    "state": status.state.label(),
                });
                if let Some(setpoint) = alarm_definition.setpoint {
                    entry["setpoint"] = json!(setpoint);
                }
                add_guidance(&mut entry, &alarm_definition.guidance);
                add_handling(&mut entry, alarm_definition, &status.handling);
                entry
            })
            .collect();
        return Ok(result);
    }
    let Some((path, folder)) = objects.folder(asked) else {
        return Err(ToolError::not_found(format!(
            "no tag or folder named {:?}; use runtime_search_uns to find it",
            normalize_path(asked)
        ))
        .with_details(json!({"path": short_text(asked, 200)})));
    };
    let tags_below = objects
        .tags()
        .filter(|tag| is_below(path, &tag.definition().path))
        .count();
    let active_alarms: Vec<Value> = objects
        .alarms()
        .iter()
        .map(|alarm| (alarm, alarm.status()))
        .filter(|(_, status)| status.state != crate::objects::AlarmState::Normal)
        .filter(|(alarm, _)| {
            objects
                .tag(&alarm.definition().tag)
                .is_some_and(|tag| is_below(path, &tag.definition().path))
        })
        // A shelved or out-of-service alarm says so: in alarm, but not the operator's to act on.
        .map(|(alarm, status)| json!({"name": alarm.definition().name, "state": status.label()}))
        .collect();
    // A count and the first few names; runtime_get_active_alarms with this path lists them all.
    let active_alarm_count = active_alarms.len();
    let active_alarms = &active_alarms[..active_alarm_count.min(LISTED_ALARMS)];
    let tags: Vec<Value> = folder
        .tags
        .iter()
        .take(LISTED_TAG_NAMES)
        .filter_map(|tag_path| objects.tag(tag_path))
        .map(|tag| json!(tag.definition().name))
        .collect();
    let folders: Vec<&String> = folder.folders.iter().take(LISTED_TAG_NAMES).collect();
    let more_exist = folder.tags.len() > LISTED_TAG_NAMES || folder.folders.len() > LISTED_TAG_NAMES;
    Ok(bounded_list(tags, more_exist, |tags, truncated| {
        json!({
            "kind": "folder",
            "path": path,
            "folders": folders,
            "folderCount": folder.folders.len(),
            "tags": tags,
            "tagCount": folder.tags.len(),
            "tagsBelow": tags_below,
            "activeAlarmsBelow": active_alarm_count,
            "activeAlarms": active_alarms,
            "truncated": truncated,
        })
    }))
}

fn list_instances(plant: &PlantReader, arguments: &Value) -> Result<Value, ToolError> {
    let mask = arguments
        .get("name_mask")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|mask| !mask.is_empty())
        .unwrap_or("*");
    let cap = INSTANCES_CAP.read(arguments);
    let objects = plant.objects();
    let instances: Vec<Equipment<'_>> = objects
        .equipment()
        .filter(|equipment| mask_matches(mask, equipment.name))
        .collect();
    let total = instances.len();
    let library = plant.library();
    let listed: Vec<Value> = instances
        .into_iter()
        .take(cap)
        .map(|Equipment { name, path, folder }| {
            let tags: Vec<&str> = folder
                .tags
                .iter()
                .take(LISTED_TAG_NAMES)
                .filter_map(|tag_path| objects.tag(tag_path))
                .map(|tag| tag.definition().name.as_str())
                .collect();
            let mut entry = json!({
                "name": name,
                "path": path,
                "tags": tags,
                "tagCount": folder.tags.len(),
            });
            if let Some(kind) = library.type_at(path) {
                entry["type"] = json!(kind);
            }
            entry
        })
        .collect();
    Ok(bounded_list(
        listed,
        total > cap,
        |instances, truncated| json!({"nameMask": short_text(mask, 128), "instances": instances, "total": total, "truncated": truncated}),
    ))
}

fn tag_path_leaf(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}
