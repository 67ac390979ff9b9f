//! What RuntimeMCP publishes as resources from the live plant: the plant model (folders,
//! equipment, tags with their units, ranges and alarms) and the pending proposals, as JSON of
//! bounded size that says what it left out. The active alarms are the alarm tool's result and
//! the documents their own text, so each is said one way.

use std::time::SystemTime;

use serde_json::{Value, json};

use crate::objects::type_name;
use crate::plant::PlantReader;
use crate::proposals::ProposalBoard;
use crate::tools::proposal_standing;

/// The most JSON the plant model holds: about 25,000 tags of a plant file's usual detail.
pub const MAX_MODEL_BYTES: usize = 4 * 1024 * 1024;

/// The plant model at and below `folder` (`""` for the whole plant) as JSON text, at most
/// `max_bytes` of it (tags are left out past that, counted in `tagsLeft`); `None` for a folder
/// the plant does not have.
pub fn plant_model(plant: &PlantReader, folder: &str, max_bytes: usize) -> Option<String> {
    let objects = plant.objects();
    let folder = folder.trim_matches('/');
    if !folder.is_empty() && objects.folder(folder).is_none() {
        return None;
    }
    let below = |path: &str| {
        folder.is_empty()
            || path == folder
            || path
                .strip_prefix(folder)
                .is_some_and(|rest| rest.starts_with('/'))
    };
    let folders: Vec<Value> = objects
        .folders()
        .filter(|(path, _)| !path.is_empty() && below(path))
        .map(|(path, _)| {
            let mut entry = json!({"path": path});
            let description = objects.folder_description(path);
            if !description.is_empty() {
                entry["description"] = description.into();
            }
            entry
        })
        .collect();
    let library = plant.library();
    let equipment: Vec<Value> = objects
        .equipment()
        .filter(|equipment| below(equipment.path))
        .map(|equipment| {
            let mut entry = json!({"name": equipment.name, "path": equipment.path});
            if let Some(kind) = library.type_at(equipment.path) {
                entry["type"] = kind.into();
            }
            entry
        })
        .collect();
    let mut model = json!({
        "folder": folder,
        "folders": folders,
        "equipment": equipment,
        "tags": [],
        "tagCount": 0,
        "tagsLeft": 0,
        "truncated": false,
    });
    let mut room = max_bytes.saturating_sub(json_len(&model));
    let (mut tags, mut left) = (Vec::new(), 0usize);
    for tag in objects.tags().filter(|tag| below(&tag.definition().path)) {
        if left > 0 {
            left += 1;
            continue;
        }
        let entry = tag_entry(&objects, tag);
        // The entry and the comma before it.
        let size = json_len(&entry) + 1;
        if size > room {
            left = 1;
            continue;
        }
        room -= size;
        tags.push(entry);
    }
    model["tagCount"] = (tags.len() + left).into();
    model["tagsLeft"] = left.into();
    model["truncated"] = (left > 0).into();
    model["tags"] = tags.into();
    serde_json::to_string(&model).ok()
}

/// A tag as the plant model lists it: what it is, with what the plant file does not say left out.
fn tag_entry(objects: &crate::objects::ObjectModel, tag: &crate::objects::Tag) -> Value {
    let definition = tag.definition();
    let mut entry = json!({
        "name": definition.name,
        "path": definition.path,
        "type": type_name(definition.kind),
    });
    if !definition.units.is_empty() {
        entry["units"] = definition.units.as_str().into();
    }
    if !definition.description.is_empty() {
        entry["description"] = definition.description.as_str().into();
    }
    if definition.range_low.is_some() || definition.range_high.is_some() {
        entry["range"] = json!({"low": definition.range_low, "high": definition.range_high});
    }
    if definition.writable {
        entry["writable"] = true.into();
    }
    if !definition.allowed_values.is_empty() {
        entry["allowedValues"] = definition.allowed_values.clone().into();
    }
    let alarms: Vec<&str> = objects
        .alarms_of(&definition.name)
        .iter()
        .map(|alarm| alarm.definition().name.as_str())
        .collect();
    if !alarms.is_empty() {
        entry["alarms"] = alarms.into();
    }
    entry
}

/// The proposals waiting for a decision, as their followers read each.
pub fn pending_proposals(board: &ProposalBoard, now: SystemTime) -> Value {
    let pending: Vec<Value> = board.pending(now).iter().map(proposal_standing).collect();
    json!({"count": pending.len(), "proposals": pending})
}

fn json_len(value: &Value) -> usize {
    serde_json::to_vec(value).map_or(usize::MAX, |bytes| bytes.len())
}
