//! Alarm tools (ModelOptions 0x08): the alarms that are active now, and the alarm history.

use std::time::SystemTime;

use localai::ModelOptions;
use localai::tools::{ToolDefinition, ToolError};
use serde_json::{Value, json};

use super::{
    Cap, add_guidance, add_handling, blocking, bounded_list, find_tag, plant_tool, read_window, short_text,
    window_schema,
};
use crate::alarm_report::MAX_REPORT_WINDOW;
use crate::objects::{AlarmState, is_below, normalize_path};
use crate::plant::PlantReader;
use plant_model::AlarmEvent;

const ACTIVE_CAP: Cap = Cap {
    name: "max_results",
    default: 50,
    ceiling: 200,
};
const HISTORY_CAP: Cap = Cap {
    name: "max_results",
    default: 50,
    ceiling: 500,
};

/// The alarm history window when the model gives none: the last day.
const HISTORY_DEFAULT_MINUTES: u64 = 1440;
/// An alarm report's window when the model gives none: the last 7 days.
const REPORT_DEFAULT_MINUTES: u64 = 7 * 1440;
/// How many chattering and stale alarms a report's result lists (most frequent: 10 too).
const REPORT_LISTED: usize = 10;

pub(super) fn tools(plant: &PlantReader) -> Vec<ToolDefinition> {
    let alarms = ModelOptions::ALARM_TOOLS;
    let mut history_properties = serde_json::Map::new();
    history_properties.insert(
        "tag".into(),
        json!({"type": "string", "minLength": 1, "maxLength": 512,
               "description": "Only this tag's alarms (dotted name or UNS path); omit for all."}),
    );
    window_schema(&mut history_properties, HISTORY_DEFAULT_MINUTES);
    history_properties.insert("max_results".into(), HISTORY_CAP.schema("events"));
    let mut report_properties = serde_json::Map::new();
    window_schema(&mut report_properties, REPORT_DEFAULT_MINUTES);
    vec![
        plant_tool(
            plant,
            "runtime_get_active_alarms",
            alarms,
            "List the alarms that need attention now: in alarm (active or acknowledged) or back to normal but not yet \
             acknowledged. Each has its tag, condition (HiHi, Hi, Lo, LoLo, Deviation), limit, priority (1-1000, \
             higher is more urgent), message, the tag's current value and when it became active, and where the plant \
             says so its usual cause, the consequence if nobody acts, the response (what the operator should do) and \
             time_to_respond_s (seconds to act). Most urgent first.",
            json!({"type": "object", "additionalProperties": false, "properties": {
                "path": {"type": "string", "maxLength": 512,
                         "description": "Only alarms of tags below this UNS folder, or of this tag; omit for all."},
                "min_priority": {"type": "integer", "minimum": 1, "maximum": 1000,
                                 "description": "Only alarms of at least this priority."},
                "max_results": ACTIVE_CAP.schema("alarms")
            }}),
            |plant, arguments| async move { active_alarms(&plant, &arguments) },
        ),
        plant_tool(
            plant,
            "runtime_query_alarm_history",
            alarms,
            "List alarm events (Active, Acknowledged, Cleared) in a time window, newest first, optionally for one tag. \
             Default window: the last 24 hours.",
            json!({"type": "object", "additionalProperties": false, "properties": history_properties}),
            |plant, arguments| async move { alarm_history(&plant, &arguments).await },
        ),
        plant_tool(
            plant,
            "runtime_get_alarm_report",
            alarms,
            "How the alarm system performed over a window (default: the last 7 days), against EEMUA 191: annunciated \
             alarms per 10 minutes (average, target about 1; peak, target at most 10), time in flood (target under \
             1 %), the priority mix (target 80 % low, 15 % high, 5 % urgent), time to acknowledge, and how many \
             alarms were shelved, suppressed by design or out of service. Lists the bad actors: the most frequent \
             alarms, the chattering ones (3 trips within 60 s) and the stale ones (in alarm over 24 h), each with \
             its definition (condition, limit, deadband, on/off delays) so a remedy can be proposed.",
            json!({"type": "object", "additionalProperties": false, "properties": report_properties}),
            |plant, arguments| async move { alarm_report(&plant, &arguments).await },
        ),
    ]
}

async fn alarm_report(plant: &PlantReader, arguments: &Value) -> Result<Value, ToolError> {
    let window = read_window(arguments, REPORT_DEFAULT_MINUTES, SystemTime::now())?;
    if window.to.duration_since(window.from).unwrap_or_default() > MAX_REPORT_WINDOW {
        return Err(ToolError::invalid_arguments("the window is longer than a year"));
    }
    let report = {
        let plant = plant.clone();
        blocking(move || plant.alarm_report(window.from, window.to)).await?
    };
    let mut result = report.to_json();
    let objects = plant.objects();
    // Each bad actor with what defines it: what a remedy (a deadband, a delay, a limit) changes.
    for list in ["mostFrequent", "chattering", "stale"] {
        if let Some(Value::Array(entries)) = result.get_mut(list) {
            let total = entries.len();
            entries.truncate(REPORT_LISTED);
            for entry in entries.iter_mut() {
                let name = entry["alarm"].as_str().unwrap_or_default().to_owned();
                entry["message"] = json!(short_text(entry["message"].as_str().unwrap_or_default(), 200));
                if let Some(alarm) = objects.alarm(&name) {
                    let definition = alarm.definition();
                    entry["definition"] = json!({
                        "tag": definition.tag,
                        "condition": definition.condition.name(),
                        "limit": definition.limit,
                        "deadband": definition.deadband,
                        "priority": definition.priority,
                        "onDelayS": definition.on_delay.as_secs(),
                        "offDelayS": definition.off_delay.as_secs(),
                        "state": alarm.status().label(),
                    });
                }
            }
            if total > REPORT_LISTED {
                result[format!("{list}Total")] = json!(total);
            }
        }
    }
    Ok(result)
}

fn active_alarms(plant: &PlantReader, arguments: &Value) -> Result<Value, ToolError> {
    let objects = plant.objects();
    let scope = arguments.get("path").and_then(Value::as_str).map(normalize_path);
    // A scope is a folder (alarms of tags below it) or one tag.
    let scope_tag = scope
        .and_then(|scope| objects.tag(scope))
        .map(|tag| tag.definition().name.clone());
    let scope_folder = match (scope, &scope_tag) {
        (Some(scope), None) if !scope.is_empty() => Some(
            objects
                .folder(scope)
                .map(|(path, _)| path.to_owned())
                .ok_or_else(|| {
                    ToolError::not_found(format!("no tag or folder at {scope:?}"))
                        .with_details(json!({"path": short_text(scope, 200)}))
                })?,
        ),
        _ => None,
    };
    let min_priority = arguments.get("min_priority").and_then(Value::as_u64).unwrap_or(1);
    let mut active: Vec<_> = objects
        .alarms()
        .iter()
        .map(|alarm| (alarm, alarm.status()))
        .filter(|(_, status)| status.state != AlarmState::Normal)
        .filter(|(alarm, _)| u64::from(alarm.definition().priority) >= min_priority)
        .filter(|(alarm, _)| {
            let tag = &alarm.definition().tag;
            match (&scope_tag, &scope_folder) {
                (Some(only), _) => tag == only,
                (None, Some(folder)) => objects
                    .tag(tag)
                    .is_some_and(|tag| is_below(folder, &tag.definition().path)),
                (None, None) => true,
            }
        })
        .collect();
    active.sort_by(|(a, a_status), (b, b_status)| {
        b.definition()
            .priority
            .cmp(&a.definition().priority)
            .then_with(|| b_status.active_since.cmp(&a_status.active_since))
    });
    let cap = ACTIVE_CAP.read(arguments);
    let total = active.len();
    let listed: Vec<Value> = active
        .into_iter()
        .take(cap)
        .map(|(alarm, status)| {
            let definition = alarm.definition();
            let mut entry = json!({
                "name": definition.name,
                "tag": definition.tag,
                "condition": definition.condition.name(),
                "limit": definition.limit,
                "priority": definition.priority,
                "message": short_text(&definition.message, 200),
                "state": status.state.label(),
                "activeSince": status.active_since.map(localai::iso8601_millis),
                "tripValue": status.trip_value,
            });
            if let Some(setpoint) = definition.setpoint {
                entry["setpoint"] = json!(setpoint);
            }
            add_guidance(&mut entry, &definition.guidance);
            add_handling(&mut entry, definition, &status.handling);
            if status.chatter.chatters_by(std::time::SystemTime::now()) {
                entry["chattering"] = json!(true);
            }
            if let Some(tag) = objects.tag(&definition.tag) {
                entry["currentValue"] = tag.current().value.to_json();
            }
            if let Some(cleared) = status.cleared_at {
                entry["clearedAt"] = json!(localai::iso8601_millis(cleared));
            }
            if let Some((at, by)) = &status.acknowledged {
                entry["acknowledgedAt"] = json!(localai::iso8601_millis(*at));
                entry["acknowledgedBy"] = json!(short_text(by, 64));
            }
            entry
        })
        .collect();
    Ok(bounded_list(
        listed,
        total > cap,
        |alarms, truncated| json!({"alarms": alarms, "total": total, "truncated": truncated}),
    ))
}

async fn alarm_history(plant: &PlantReader, arguments: &Value) -> Result<Value, ToolError> {
    let tag = match arguments.get("tag").and_then(Value::as_str) {
        Some(asked) => Some(find_tag(plant, asked)?.definition().name.clone()),
        None => None,
    };
    let window = read_window(arguments, HISTORY_DEFAULT_MINUTES, SystemTime::now())?;
    let cap = HISTORY_CAP.read(arguments);
    let historian = std::sync::Arc::clone(plant.historian());
    let page = {
        let tag = tag.clone();
        blocking(move || historian.alarm_history(tag.as_deref(), window.from, window.to, cap)).await?
    };
    let events: Vec<Value> = page.events.iter().map(event_json).collect();
    Ok(bounded_list(events, page.total > cap, |events, truncated| {
        json!({
            "tag": tag,
            "from": localai::iso8601_millis(window.from),
            "to": localai::iso8601_millis(window.to),
            "events": events,
            "total": page.total,
            "truncated": truncated,
        })
    }))
}

fn event_json(event: &AlarmEvent) -> Value {
    let mut entry = json!({
        "time": localai::iso8601_millis(event.time),
        "alarm": event.alarm,
        "tag": event.tag,
        "event": event.kind.as_str(),
        "condition": event.condition.name(),
        "priority": event.priority,
        "message": short_text(&event.message, 200),
    });
    if let Some(value) = event.value {
        entry["value"] = json!(value);
    }
    if let Some(user) = &event.user {
        entry["user"] = json!(short_text(user, 64));
    }
    entry
}
