//! The plant model file: a user's own plant (UNS folders, equipment types and instances, tags
//! and alarms) described in TOML (or JSON), read with every problem reported at its line and
//! field, and written back in the same layout.
//!
//! ```
//! let text = r#"
//! [[tags]]
//! name = "Tank1.Level"
//! path = "Plant/Area1/Tank1/Level"
//! type = "number"
//! unit = "%"
//! min = 0
//! max = 100
//!
//! [[alarms]]
//! name = "Tank1.Level.Hi"
//! tag = "Tank1.Level"
//! condition = "Hi"
//! limit = 90
//! "#;
//! let model = plant_model::read(text, plant_model::Format::Toml, "plant.toml").expect("valid");
//! assert_eq!(model.expand().alarms[0].tag, "Tank1.Level");
//! let typo = text.replace("limit = 90", "limit = \"9O\"");
//! let errors = plant_model::read(&typo, plant_model::Format::Toml, "plant.toml").unwrap_err();
//! assert_eq!(errors.to_string(), "plant.toml:14:9: alarms[0].limit: expected a number, found a string");
//! ```
//!
//! It also holds the plant's value vocabulary (`TagValue`, `Quality`, `AlarmEvent`), which the
//! live plant, the store and the tools share.
//!
//! This crate reads and checks; it knows nothing of databases or servers. `docs/PLANT.md`
//! documents the format.

mod attachments;
mod document;
#[doc(hidden)]
pub mod fixtures;
mod model;
mod names;
mod prompt_template;
mod reader;
mod tag_expression;
mod values;

use std::fmt;
use std::ops::Range;

pub use attachments::{DocumentTextError, PlantDocument, document_text, read_documents};
pub use document::Format;
pub use model::{
    AlarmSpec, ArgumentValues, BindingProblem, Compression, Condition, DEFAULT_DEADBAND_OF_RANGE,
    DEFAULT_MAX_INTERVAL, DisplayMark, DocumentSpec, Equipment, EquipmentType, ExpandedPlant, FolderSpec,
    History, HistoryOptions, HistoryRule, InitialValue, MAX_ALARM_DELAY_S, MAX_ALARM_TEXT_CHARS,
    MAX_RETENTION_HOURS, MAX_TAG_VALUE_CHARS, MAX_TAG_VALUES, MAX_TIME_TO_RESPOND_S, Motion,
    NotificationSpec, NotifiedEvent, PlantInfo, PlantModel, PromptArgumentSpec, PromptSpec, Signing,
    SourceBinding, SourceKind, SourceSpec, StoredParts, TagSpec, TagType,
};
pub use names::{fold, nearest, normalize, outside_values, text_value_problem};
pub use prompt_template::{fill_template, placeholders};
pub use reader::document_path_problem;
pub use tag_expression::{Comparison, ExpressionError, MAX_EXPRESSION_CHARS, Operand, TagExpression};
pub use values::{AlarmEvent, AlarmEventKind, Quality, TagValue};

/// The largest plant file read (a plant of tens of thousands of tags fits).
pub const MAX_FILE_BYTES: usize = 16 * 1024 * 1024;

/// The most tags a plant may have, expanded (each instance's members and the plain tags): a
/// small file of types and instances can describe millions, which a server would then hold.
pub const MAX_TAGS: usize = 100_000;

/// The most alarms a plant may have, expanded.
pub const MAX_ALARMS: usize = 100_000;

/// The largest document a plant file may attach (a long manual in Markdown fits).
pub const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;

/// The most documents a plant file may attach.
pub const MAX_DOCUMENTS: usize = 500;

/// The most bytes the documents of a plant may have together (what a server holds and
/// indexes for them).
pub const MAX_DOCUMENTS_BYTES: usize = 32 * 1024 * 1024;

/// The longest path of a document accepted.
pub const MAX_DOCUMENT_PATH: usize = 1024;

/// The most prompts a plant file may give.
pub const MAX_PROMPTS: usize = 100;

/// The most arguments a prompt may have.
pub const MAX_PROMPT_ARGUMENTS: usize = 10;

/// The longest prompt template, in bytes.
pub const MAX_PROMPT_TEMPLATE: usize = 16 * 1024;

/// The longest value of a prompt argument, in characters.
pub const MAX_PROMPT_VALUE: usize = 1000;

/// One problem in a plant file, at its place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlantError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// The field, e.g. `alarms[2].limit` (empty for the file as a whole).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl PlantError {
    /// An error at a byte range of `text`.
    pub(crate) fn at(text: &str, span: Range<usize>, field: String, message: String) -> Self {
        let start = span.start.min(text.len());
        let before = text.get(..start).unwrap_or(text);
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |line| line.chars().count()) + 1;
        Self {
            line,
            column,
            field,
            message,
        }
    }
}

impl fmt::Display for PlantError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: ", self.line, self.column)?;
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        f.write_str(&self.message)
    }
}

/// Every problem of one file, in file order; nothing of the file is accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct PlantErrors {
    /// The file as the user named it.
    pub file: String,
    /// The problems (at most 100).
    pub errors: Vec<PlantError>,
}

impl fmt::Display for PlantErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, error) in self.errors.iter().enumerate() {
            if index > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{}:{error}", self.file)?;
        }
        if self.errors.len() >= reader::MAX_ERRORS {
            write!(
                f,
                "\n{}: (stopped after {} errors)",
                self.file,
                reader::MAX_ERRORS
            )?;
        }
        Ok(())
    }
}

/// Reads and checks a plant file. `file` names it in errors.
pub fn read(text: &str, format: Format, file: &str) -> Result<PlantModel, PlantErrors> {
    let fail = |errors: Vec<PlantError>| PlantErrors {
        file: file.to_owned(),
        errors,
    };
    if text.len() > MAX_FILE_BYTES {
        return Err(fail(vec![PlantError {
            line: 1,
            column: 1,
            field: String::new(),
            message: format!(
                "the file is {} bytes; a plant file may have at most {MAX_FILE_BYTES}",
                text.len()
            ),
        }]));
    }
    let root = document::parse(text, format).map_err(|error| fail(vec![error]))?;
    let mut reader = reader::Reader::new(text);
    let model = reader.model(&root);
    if let Some(model) = &model {
        // On what could be read, so the checks across parts are reported with the rest; the
        // plant's size first, counted without expanding it, as the checks across parts expand.
        let places = reader::Places::new(&root, &mut reader);
        if reader::within_bounds(&mut reader, model, &places) {
            reader::check_model(&mut reader, model, &places);
        }
    }
    match model {
        Some(model) if reader.errors.is_empty() => Ok(model),
        _ => {
            let mut errors = reader.errors;
            errors.sort_by_key(|error| (error.line, error.column));
            Err(fail(errors))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PUMPS: &str = r#"
[plant]
name = "Pump station"

[[folders]]
path = "Plant/Area1"
description = "Pump house"

[[types]]
name = "Pump"
description = "A centrifugal pump"

  [[types.tags]]
  name = "MotorCurrent"
  type = "number"
  unit = "A"
  description = "{label} motor current"
  min = 0
  max = 30
  history_deadband = 0.1

  [[types.tags]]
  name = "Running"
  type = "bool"
  writable = true

  [[types.alarms]]
  name = "MotorCurrent.Hi"
  tag = "MotorCurrent"
  condition = "Hi"
  limit = 20
  deadband = 0.5
  priority = 700
  message = "{label} motor current high"
  cause = "{label} impeller fouled or bearing worn"
  consequence = "{label} motor trips on overload"
  response = "Throttle {label} discharge; call maintenance"
  time_to_respond = 600
  signed = true
  on_delay = 5
  off_delay = 10
  suppress_when = "not Running or Tank1.Level < 5"

  [[types.alarms]]
  name = "Tripped"
  tag = "Running"
  condition = "Digital"
  active_when = false

[[equipment]]
name = "Pump1"
type = "Pump"
path = "Plant/Area1/Pump1"
label = "Pump 1"
initial = { MotorCurrent = 12.4, Running = true }
limits = { "MotorCurrent.Hi" = 22 }

[[equipment]]
name = "Pump2"
type = "Pump"
path = "Plant/Area1/Pump2"

[[tags]]
name = "Tank1.Level"
path = "Plant/Area1/Tank1/Level"
type = "number"
unit = "%"
initial = 62
min = 0
max = 100
source = { broker = "site", topic = "tank1/level" }

[[tags]]
name = "Tank1.Inflow"
path = "Plant/Area1/Tank1/Inflow"
type = "number"
initial = 40
simulate = { amplitude = 30, period = 1800, noise = 0.2 }

[[alarms]]
name = "Tank1.Level.HiHi"
tag = "Tank1.Level"
condition = "HiHi"
limit = 95
priority = 900
consequence = "Tank 1 overflows into the bund"
response = """
Close Tank1 inlet valve.
Start the transfer pump."""
time_to_respond = 300

[[sources]]
name = "site"
url = "mqtt://127.0.0.1:1883"
root = "Riverside"
password = "/secret:BrokerPassword"
username = "tserver"
"#;

    fn errors(text: &str, format: Format) -> Vec<String> {
        read(text, format, "f")
            .expect_err("refused")
            .errors
            .iter()
            .map(|error| format!("f:{error}"))
            .collect()
    }

    #[test]
    fn a_name_with_an_empty_part_between_dots_is_refused() {
        let text = "[[tags]]\nname = \"A.B\"\npath = \"P/A/B\"\ntype = \"number\"\n\
                    [[tags]]\nname = \"A.B.\"\npath = \"P/A/C\"\ntype = \"number\"\n\
                    [[tags]]\nname = \"..\"\npath = \"P/D\"\ntype = \"number\"\n\
                    [[tags]]\nname = \".A\"\npath = \"P/E\"\ntype = \"number\"\n";
        let errors = errors(text, Format::Toml);
        for name in ["A.B.", "..", ".A"] {
            let wanted = format!(
                "{name:?} is not a usable name: no part between dots may be empty (no leading, trailing or doubled '.')"
            );
            assert!(
                errors.iter().any(|error| error.contains(&wanted)),
                "{wanted}: {errors:?}"
            );
        }
        assert_eq!(errors.len(), 3, "{errors:?}");
    }

    #[test]
    fn types_expand_into_named_tags_and_alarms_at_their_paths() {
        let model = read(PUMPS, Format::Toml, "pumps.toml").expect("valid");
        let expanded = model.expand();
        let names: Vec<&str> = expanded.tags.iter().map(|tag| tag.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "Pump1.MotorCurrent",
                "Pump1.Running",
                "Pump2.MotorCurrent",
                "Pump2.Running",
                "Tank1.Level",
                "Tank1.Inflow"
            ]
        );
        let current = &expanded.tags[0];
        assert_eq!(current.path, "Plant/Area1/Pump1/MotorCurrent");
        assert_eq!(current.description, "Pump 1 motor current");
        assert_eq!(current.initial, Some(InitialValue::Number(12.4)));
        assert_eq!(
            expanded.tags[2].description, "Pump2 motor current",
            "the name without a label"
        );
        assert_eq!(expanded.tags[2].initial, None);
        assert!(expanded.tags[1].writable);
        let alarms: Vec<(&str, &str, Option<f64>)> = expanded
            .alarms
            .iter()
            .map(|alarm| (alarm.name.as_str(), alarm.tag.as_str(), alarm.limit))
            .collect();
        assert_eq!(
            alarms,
            [
                ("Pump1.MotorCurrent.Hi", "Pump1.MotorCurrent", Some(22.0)),
                ("Pump1.Tripped", "Pump1.Running", None),
                ("Pump2.MotorCurrent.Hi", "Pump2.MotorCurrent", Some(20.0)),
                ("Pump2.Tripped", "Pump2.Running", None),
                ("Tank1.Level.HiHi", "Tank1.Level", Some(95.0)),
            ]
        );
        assert_eq!(expanded.alarms[0].message, "Pump 1 motor current high");
        let pump1 = &expanded.alarms[0];
        assert_eq!(
            (
                pump1.cause.as_str(),
                pump1.consequence.as_str(),
                pump1.response.as_str()
            ),
            (
                "Pump 1 impeller fouled or bearing worn",
                "Pump 1 motor trips on overload",
                "Throttle Pump 1 discharge; call maintenance"
            )
        );
        assert_eq!(pump1.time_to_respond, Some(600));
        assert!(
            pump1.signed && expanded.alarms[2].signed,
            "each instance of a type's signed alarm is"
        );
        assert_eq!((pump1.on_delay, pump1.off_delay), (5, 10));
        assert_eq!(
            expanded.alarms[2]
                .suppress_when
                .as_ref()
                .map(ToString::to_string)
                .as_deref(),
            Some("not Pump2.Running or Tank1.Level < 5"),
            "a type's alarm suppresses on its instance's members and the plant's tags as named"
        );
        assert_eq!(
            expanded.alarms[2].response,
            "Throttle Pump2 discharge; call maintenance"
        );
        let tripped = &expanded.alarms[1];
        assert_eq!((tripped.response.as_str(), tripped.time_to_respond), ("", None));
        let tank = &expanded.alarms[4];
        assert_eq!(tank.cause, "", "each field is optional");
        assert_eq!(
            tank.response,
            "Close Tank1 inlet valve.\nStart the transfer pump."
        );
        assert_eq!(tank.time_to_respond, Some(300));
        assert!(!tank.signed, "an alarm is acknowledged unsigned unless marked");
        assert_eq!((tank.on_delay, tank.off_delay), (0, 0), "no delay unless given");
        assert_eq!(tank.suppress_when, None, "never suppressed unless told when");
    }

    #[test]
    fn notifications_are_read_with_their_defaults_and_checked_against_the_plant() {
        let text = format!(
            r#"{PUMPS}
[[notifications]]
name = "control-room"
webhook = "https://hooks.example.com/alarms"
token = "/secret:HookToken"
min_priority = 700
folders = ["Plant/Area1/Pump1"]
events = ["active", "cleared", "escalated"]

[[notifications]]
name = "uns"
mqtt = "site"
"#
        );
        let model = read(&text, Format::Toml, "f").expect("valid");
        let hook = &model.notifications[0];
        assert_eq!(
            (hook.min_priority, hook.folders.as_slice(), hook.events.as_slice()),
            (
                700,
                &["Plant/Area1/Pump1".to_owned()][..],
                &[
                    NotifiedEvent::Active,
                    NotifiedEvent::Cleared,
                    NotifiedEvent::Escalated
                ][..]
            )
        );
        let uns = &model.notifications[1];
        assert_eq!((uns.mqtt.as_str(), uns.min_priority), ("site", 1));
        assert_eq!(
            uns.events,
            [NotifiedEvent::Active, NotifiedEvent::Escalated],
            "the defaults"
        );
        let again = read(&model.to_toml().expect("exports"), Format::Toml, "again").expect("reads back");
        assert_eq!(again.notifications, model.notifications);

        let wrong = r#"
[[tags]]
name = "T"
path = "P/T"
type = "number"

[[notifications]]
name = "a"
webhook = "ftp://x"
token = "plain"
events = ["activ"]

[[notifications]]
name = "b"
mqtt = "nowhere"
min_priority = 0

[[notifications]]
name = "c"
"#;
        assert_eq!(
            errors(wrong, Format::Toml),
            [
                "f:9:11: notifications[0].webhook: \"ftp://x\" is not a webhook address: http://host[:port]/path or https://...",
                "f:10:9: notifications[0].token: give a /secret:<Name> token (tserver secrets PATH set <Name>), never the token itself",
                "f:11:10: notifications[0].events[0]: unknown event \"activ\" (did you mean \"active\"?); one of: active, cleared, acknowledged, escalated, shelved, unshelved, out-of-service, in-service, suppressed, unsuppressed",
                "f:16:16: notifications[1].min_priority: must be a priority, a whole number from 1 to 1000",
                "f:18:1: notifications[2].webhook: give a webhook URL or the name of an MQTT source (mqtt)",
            ]
        );
        let elsewhere = r#"
[[tags]]
name = "T"
path = "P/T"
type = "number"

[[notifications]]
name = "b"
mqtt = "nowhere"
folders = ["Q"]
"#;
        assert_eq!(
            errors(elsewhere, Format::Toml),
            [
                "f:9:8: notifications[0].mqtt: no MQTT source named \"nowhere\"",
                "f:10:11: notifications[0].folders[0]: no tag is below \"Q\"",
            ]
        );
    }

    #[test]
    fn site_prompts_are_read_checked_against_the_plant_and_exported_back() {
        let text = format!(
            r#"{PUMPS}
[[prompts]]
name = "check_pump"
title = "Check a pump"
description = "The pump's current against its curve."
template = "Check {{pump}} over the last {{hours}} hours against {{{{the curve}}}}."

  [[prompts.arguments]]
  name = "pump"
  values = "equipment"
  default = "Pump1"

  [[prompts.arguments]]
  name = "hours"
  description = "How far back."
  default = "4"
"#
        );
        let model = read(&text, Format::Toml, "f").expect("valid");
        let prompt = &model.prompts[0];
        assert_eq!(
            (prompt.name.as_str(), prompt.title.as_str()),
            ("check_pump", "Check a pump")
        );
        assert_eq!(
            prompt.arguments[0],
            PromptArgumentSpec {
                name: "pump".to_owned(),
                description: String::new(),
                default: Some("Pump1".to_owned()),
                values: ArgumentValues::Equipment,
            }
        );
        assert_eq!(
            prompt.arguments[1].values,
            ArgumentValues::Text,
            "text unless told"
        );
        let again = read(&model.to_toml().expect("exports"), Format::Toml, "again").expect("reads back");
        assert_eq!(again.prompts, model.prompts);
        let stored = PlantModel::prompts_from_json(&model.to_json().expect("stores")).expect("reads");
        assert_eq!(stored, model.prompts);

        let wrong = r#"
[[tags]]
name = "T"
path = "P/T"
type = "number"

[[prompts]]
name = "bad name"
template = "x"

[[prompts]]
name = "a"
template = "Look at {tag} and {tga} and {missing}"

  [[prompts.arguments]]
  name = "tag"
  values = "tags"

[[prompts]]
name = "b"
template = "Look at {tag}"

  [[prompts.arguments]]
  name = "tag"
  values = "tag"
  default = "U"

[[prompts]]
name = "c"
template = "Look at {x}"

  [[prompts.arguments]]
  name = "x"

  [[prompts.arguments]]
  name = "unused"

[[prompts]]
name = "B"
template = "Plain."

[[prompts]]
name = "d"
description = "no template"
"#;
        assert_eq!(
            errors(wrong, Format::Toml),
            [
                "f:8:8: prompts[0].name: \"bad name\" is not a usable name for a prompt: 1 to 64 ASCII letters, \
                 digits, '_', '-', beginning with a letter or '_'",
                "f:17:12: prompts[1].arguments[0].values: unknown kind of values \"tags\" (did you mean \"tag\"?); \
                 one of: text, equipment, alarm, tag, folder",
                "f:26:13: prompts[2].arguments[0].default: no tag named \"U\" (did you mean \"T\"?)",
                "f:36:10: prompts[3].arguments[1].name: the template never uses {unused}",
                "f:39:8: prompts[4].name: two prompts named \"B\"",
                "f:42:1: prompts[5].template: is required",
            ]
        );
        let unknown = r#"
[[prompts]]
name = "a"
template = "Look at {tag} and {tagg}, {{literally}}"

  [[prompts.arguments]]
  name = "tag"
"#;
        assert_eq!(
            errors(unknown, Format::Toml),
            [
                "f:4:12: prompts[0].template: {tagg} names no argument of this prompt (did you mean \"tag\"?); \
              declare it in [[prompts.arguments]] or write {{ and }} for braces themselves"
            ]
        );
    }

    #[test]
    fn display_marks_are_read_and_checked_against_their_tag() {
        let good = r#"
[[tags]]
name = "Level"
path = "P/Level"
type = "number"
min = 0
max = 100
display = { key = true, order = 2, normal_range = [20, 80] }

[[tags]]
name = "Running"
path = "P/Running"
type = "bool"
display = { states = ["Stopped", "Pumping"], normal_state = true }

[[tags]]
name = "Mode"
path = "P/Mode"
type = "string"
values = ["Auto", "Manual"]
display = { normal_state = "Auto", hide = false }
"#;
        let model = read(good, Format::Toml, "f").expect("valid");
        let marks: Vec<&DisplayMark> = model.tags.iter().filter_map(|tag| tag.display.as_ref()).collect();
        assert_eq!(
            marks,
            [
                &DisplayMark {
                    key: true,
                    order: Some(2),
                    normal_range: Some([20.0, 80.0]),
                    ..DisplayMark::default()
                },
                &DisplayMark {
                    states: Some(["Stopped".to_owned(), "Pumping".to_owned()]),
                    normal_state: Some(InitialValue::Bool(true)),
                    ..DisplayMark::default()
                },
                &DisplayMark {
                    normal_state: Some(InitialValue::String("Auto".to_owned())),
                    ..DisplayMark::default()
                },
            ]
        );
        let stored = PlantModel::from_json(&model.to_json().expect("serializes")).expect("reads back");
        assert_eq!(stored, model, "the marks survive the stored JSON");
        let bad = r#"
[[tags]]
name = "Level"
path = "P/Level"
type = "number"
max = 100
display = { key = true, hide = true, normal_range = [80, 20], order = 0, colour = "red" }

[[tags]]
name = "Flow"
path = "P/Flow"
type = "number"
max = 10
display = { normal_range = [1, 20], normal_state = 3, states = ["Off", "On"] }

[[tags]]
name = "Running"
path = "P/Running"
type = "bool"
display = { states = ["On", "on"], normal_state = "yes" }

[[tags]]
name = "Mode"
path = "P/Mode"
type = "string"
values = ["Auto", "Manual"]
display = { normal_state = "Automatic", normal_range = [0, 1] }
"#;
        assert_eq!(
            errors(bad, Format::Toml),
            [
                "f:7:32: tags[0].display.hide: a key value is shown first: it cannot be hidden too",
                "f:7:53: tags[0].display.normal_range: the low end 80 must be below the high end 20",
                "f:7:71: tags[0].display.order: must be a place, a whole number from 1 to 1000000",
                "f:7:74: tags[0].display.colour: unknown key; known keys: key, order, hide, normal_range, normal_state, states",
                "f:14:28: tags[1].display.normal_range: 1..20 reaches outside the tag's range ..10",
                "f:14:52: tags[1].display.normal_state: only a state has a normal state: a bool tag, or a text tag with values",
                "f:14:64: tags[1].display.states: only bool tags are shown with a word for false and true; this is a number tag",
                "f:20:22: tags[2].display.states: false and true need different words",
                "f:20:51: tags[2].display.normal_state: a bool tag cannot start at a string",
                "f:27:28: tags[3].display.normal_state: \"Automatic\" is not one of Auto, Manual",
                "f:27:56: tags[3].display.normal_range: only number and integer tags have a range; this is a string tag",
            ]
        );
    }

    #[test]
    fn a_suppression_is_read_and_checked_against_the_tags_it_names() {
        let text = r#"
[[tags]]
name = "Pump.Running"
path = "P/Running"
type = "bool"

[[tags]]
name = "Mode"
path = "P/Mode"
type = "string"
values = ["Auto", "Manual"]

[[tags]]
name = "Level"
path = "P/Level"
type = "number"

[[alarms]]
name = "A"
tag = "Level"
condition = "Hi"
limit = 1
suppress_when = "Pump.Running == false and (Mode == "

[[alarms]]
name = "B"
tag = "Level"
condition = "Hi"
limit = 2
suppress_when = "Pump.Runing == false or Level or Mode > \"Auto\" or Mode == \"Manul\" or Pump.Running == 1"
"#;
        assert_eq!(
            errors(text, Format::Toml),
            [
                "f:23:53: alarms[0].suppress_when: at character 36: expected a number, true, false or a text in double quotes, found the end",
                "f:30:17: alarms[1].suppress_when: no tag named \"Pump.Runing\" (did you mean \"Pump.Running\"?)",
                "f:30:17: alarms[1].suppress_when: Level is a number tag: compare it with a value (only a bool tag stands alone)",
                "f:30:17: alarms[1].suppress_when: Mode is a string tag: it is compared with == or != only, not >",
                "f:30:17: alarms[1].suppress_when: Mode: \"Manul\" is not one of Auto, Manual (did you mean \"Manual\"?)",
                "f:30:17: alarms[1].suppress_when: Pump.Running is a bool tag, compared with a number",
            ]
        );
    }

    #[test]
    fn alarm_response_fields_are_checked_at_their_place() {
        let long = "x".repeat(MAX_ALARM_TEXT_CHARS + 1);
        let text = format!(
            r#"
[[alarms]]
name = "A"
tag = "T"
condition = "Hi"
limit = 1
time_to_respond = "10 min"

[[alarms]]
name = "B"
tag = "T"
condition = "Hi"
limit = 1
cause = 3
consequence = ["spill"]
time_to_respond = 0

[[alarms]]
name = "C"
tag = "T"
condition = "Hi"
limit = 1
response = "{long}"
time_to_respond = 604801

[[alarms]]
name = "D"
tag = "T"
condition = "Hi"
limit = 1
time_to_respond = 90.5
signed = "yes"
on_delay = 3601
off_delay = -1

[[tags]]
name = "T"
path = "P/T"
type = "number"
"#
        );
        assert_eq!(
            errors(&text, Format::Toml),
            [
                "f:7:19: alarms[0].time_to_respond: expected a whole number of seconds, found a string",
                "f:14:9: alarms[1].cause: expected a string, found an integer",
                "f:15:15: alarms[1].consequence: expected a string, found an array",
                "f:16:19: alarms[1].time_to_respond: 0 is out of range: from 1 second to 604800 (7 days)",
                "f:23:12: alarms[2].response: 2001 characters is too long; at most 2000",
                "f:24:19: alarms[2].time_to_respond: 604801 is out of range: from 1 second to 604800 (7 days)",
                "f:31:19: alarms[3].time_to_respond: expected a whole number of seconds, found a number",
                "f:32:10: alarms[3].signed: expected true or false, found a string",
                "f:33:12: alarms[3].on_delay: 3601 is out of range: from 0 to 3600 seconds (an hour)",
                "f:34:13: alarms[3].off_delay: -1 is out of range: from 0 to 3600 seconds (an hour)",
            ]
        );
        let json = r#"{"tags": [{"name": "T", "path": "P/T", "type": "number"}],
            "alarms": [{"name": "A", "tag": "T", "condition": "Hi", "limit": 1, "time_to_respond": true}]}"#;
        assert_eq!(
            errors(json, Format::Json),
            ["f:2:100: alarms[0].time_to_respond: expected a whole number of seconds, found a boolean"]
        );
    }

    #[test]
    fn export_then_read_gives_the_same_model_and_the_same_text() {
        let model = read(PUMPS, Format::Toml, "pumps.toml").expect("valid");
        let exported = model.to_toml().expect("exports");
        let again = read(&exported, Format::Toml, "exported.toml").expect("its own export reads");
        assert_eq!(again, model);
        assert_eq!(again.to_toml().expect("exports"), exported);
        let stored = model.to_json().expect("stores");
        assert_eq!(PlantModel::from_json(&stored).expect("loads"), model);
        // The stored JSON is a plant file too.
        assert_eq!(read(&stored, Format::Json, "stored.json").expect("reads"), model);
    }

    #[test]
    fn every_mistake_is_reported_at_its_line_and_field_at_once() {
        let text = r#"
[[tags]]
name = "Tank1.Level"
path = "Plant/Tank1/Level"
type = "numbr"
colour = "blue"

[[tags]]
name = "Tank1.Temp"
path = "Plant//Tank1/Temp"
type = "number"
min = 50
max = 10
initial = "warm"

[[alarms]]
name = "A"
tag = "Tank1.Level"
condition = "HIHI"
limt = 95
priority = 5000
"#;
        assert_eq!(
            errors(text, Format::Toml),
            [
                "f:5:8: tags[0].type: unknown type \"numbr\" (did you mean \"number\"?); one of: number, integer, bool, string",
                "f:6:1: tags[0].colour: unknown key; known keys: name, path, type, unit, description, initial, min, max, history, history_deadband, writable, proposable, signed, witness, values, source, simulate, display",
                "f:10:8: tags[1].path: \"Plant//Tank1/Temp\" is not a UNS path: segments joined by '/', none empty or padded, e.g. \"Plant/Area1/Pump1\"",
                "f:13:7: tags[1].max: 10 is below min 50",
                "f:14:11: tags[1].initial: a number tag cannot start at a string",
                "f:19:13: alarms[0].condition: unknown condition \"HIHI\" (did you mean \"HiHi\"?); one of: HiHi, Hi, Lo, LoLo, Deviation, Digital",
                "f:20:1: alarms[0].limt: unknown key (did you mean `limit`?); known keys: name, tag, condition, limit, setpoint, active_when, deadband, priority, message, cause, consequence, response, time_to_respond, signed, on_delay, off_delay, suppress_when",
                "f:21:12: alarms[0].priority: must be a whole number from 1 to 1000",
            ]
        );
    }

    #[test]
    fn proposable_tags_read_export_and_must_be_writable() {
        let text = r#"
[[tags]]
name = "Tank1.InletValve"
path = "Plant/Area1/Tank1/InletValve"
type = "number"
writable = true
proposable = true

[[tags]]
name = "Tank1.Level"
path = "Plant/Area1/Tank1/Level"
type = "number"
"#;
        let model = read(text, Format::Toml, "f").expect("valid");
        let proposable: Vec<bool> = model.tags.iter().map(|tag| tag.proposable).collect();
        assert_eq!(proposable, [true, false]);
        let exported = model.to_toml().expect("toml");
        assert_eq!(exported.matches("proposable = true").count(), 1, "{exported}");
        assert_eq!(read(&exported, Format::Toml, "f").expect("valid"), model);
        let json = model.to_json().expect("json");
        assert_eq!(read(&json, Format::Json, "f").expect("valid"), model);

        let not_writable = text.replacen("writable = true\n", "", 1);
        assert_eq!(
            errors(&not_writable, Format::Toml),
            [
                "f:6:14: tags[0].proposable: an approved proposal is an operator's write: set writable = true too"
            ]
        );
    }

    #[test]
    fn signed_and_witnessed_tags_read_export_and_must_be_writable() {
        let text = r#"
[[tags]]
name = "Dosing.Setpoint"
path = "Plant/Dosing/Setpoint"
type = "number"
writable = true
signed = true
witness = true

[[tags]]
name = "Dosing.Note"
path = "Plant/Dosing/Note"
type = "string"
writable = true
signed = true
"#;
        let model = read(text, Format::Toml, "f").expect("valid");
        let rules: Vec<(bool, bool)> = model.tags.iter().map(|tag| (tag.signed, tag.witness)).collect();
        assert_eq!(rules, [(true, true), (true, false)]);
        let exported = model.to_toml().expect("toml");
        assert_eq!(read(&exported, Format::Toml, "f").expect("valid"), model);
        let unsigned_witness = text.replacen(
            "signed = true
witness",
            "witness",
            1,
        );
        assert_eq!(
            errors(&unsigned_witness, Format::Toml),
            ["f:7:11: tags[0].witness: a witness signs after the writer: set signed = true too"]
        );
        let not_writable = text.replacen(
            "writable = true
signed = true
witness = true
",
            "signed = true
",
            1,
        );
        assert_eq!(
            errors(&not_writable, Format::Toml),
            ["f:6:10: tags[0].signed: only an operator's write is signed: set writable = true too"]
        );
    }

    #[test]
    fn a_tag_says_how_it_is_recorded_and_the_defaults_follow_its_range() {
        let text = r#"
[[tags]]
name = "Tank1.Level"
path = "Plant/Tank1/Level"
type = "number"
min = 0
max = 250
history = { deadband = 0.2, compression = "deadband", max_interval = 60, retention_hours = 8760 }

[[tags]]
name = "Tank1.Temp"
path = "Plant/Tank1/Temp"
type = "number"
min = 0
max = 250
history_deadband = 0.5

[[tags]]
name = "Tank1.Flow"
path = "Plant/Tank1/Flow"
type = "number"
min = -50
max = 150

[[tags]]
name = "Tank1.Count"
path = "Plant/Tank1/Count"
type = "integer"

[[tags]]
name = "Tank1.Note"
path = "Plant/Tank1/Note"
type = "string"
history = false
"#;
        let model = read(text, Format::Toml, "f").expect("valid");
        let recordings: Vec<Option<HistoryRule>> = model
            .tags
            .iter()
            .map(|tag| tag.history.recording(tag.kind, tag.min, tag.max))
            .collect();
        let recording = |deadband: f64, compression: Compression, max_interval: u64| {
            Some(HistoryRule {
                deadband,
                compression,
                max_interval,
                retention_hours: None,
            })
        };
        assert_eq!(
            recordings,
            [
                Some(HistoryRule {
                    retention_hours: Some(8760),
                    ..recording(0.2, Compression::Deadband, 60).expect("recorded")
                }),
                recording(0.5, Compression::SwingingDoor, DEFAULT_MAX_INTERVAL),
                recording(
                    200.0 * DEFAULT_DEADBAND_OF_RANGE,
                    Compression::SwingingDoor,
                    DEFAULT_MAX_INTERVAL
                ),
                recording(0.0, Compression::SwingingDoor, DEFAULT_MAX_INTERVAL),
                None,
            ]
        );
        // Exported as given, in the table's spelling, and read back the same.
        let exported = model.to_toml().expect("toml");
        assert!(
            exported.contains("deadband = 0.5") && !exported.contains("history_deadband"),
            "{exported}"
        );
        assert_eq!(read(&exported, Format::Toml, "f").expect("valid"), model);
        let json = model.to_json().expect("json");
        assert_eq!(PlantModel::from_json(&json).expect("reads"), model);
        // A model an older build stored, with the deadband beside the flag.
        let older = json.replacen(r#""history":{"deadband":0.5}"#, r#""history_deadband":0.5"#, 1);
        assert_ne!(older, json);
        assert_eq!(PlantModel::from_json(&older).expect("reads"), model);

        let mistakes = text
            .replacen(
                r#"compression = "deadband""#,
                r#"compression = "swinging_dor""#,
                1,
            )
            .replacen("max_interval = 60", "max_interval = 0", 1)
            .replacen("retention_hours = 8760", "retention_hours = 0", 1)
            .replacen(
                "history_deadband = 0.5",
                "history_deadband = 0.5\nhistory = { deadband = 1 }",
                1,
            )
            .replacen("history = false", "history = { deadband = 1 }", 1);
        assert_eq!(
            errors(&mistakes, Format::Toml),
            [
                "f:8:43: tags[0].history.compression: unknown compression \"swinging_dor\" (did you mean \"swinging_door\"?); one of: swinging_door, deadband, none",
                "f:8:74: tags[0].history.max_interval: must be a whole number of seconds from 1 to 86400",
                "f:8:95: tags[0].history.retention_hours: must be a whole number of hours from 1 to 876000",
                "f:16:20: tags[1].history_deadband: history says how this tag is recorded already: give the deadband there",
                "f:35:11: tags[4].history: only number and integer tags have one; this is a string tag",
            ]
        );
    }

    #[test]
    fn a_text_tag_may_list_its_values_and_starts_at_one_of_them() {
        let text = r#"
[[tags]]
name = "Pump1.Mode"
path = "Plant/Area1/Pump1/Mode"
type = "string"
initial = "Auto"
values = ["Auto", "Manual", "Off"]
writable = true
"#;
        let model = read(text, Format::Toml, "f").expect("valid");
        assert_eq!(model.tags[0].values, ["Auto", "Manual", "Off"]);
        let exported = model.to_toml().expect("toml");
        assert!(
            exported.contains(r#"values = ["Auto", "Manual", "Off"]"#),
            "{exported}"
        );
        assert_eq!(read(&exported, Format::Toml, "f").expect("valid"), model);
        let json = model.to_json().expect("json");
        assert_eq!(read(&json, Format::Json, "f").expect("valid"), model);

        let wrong = text
            .replacen(r#"initial = "Auto""#, r#"initial = "manual""#, 1)
            .replacen(r#""Off"]"#, "\"Off\", \"OFF\", \"\", \"A\\u202eB\"]", 1);
        assert_eq!(
            errors(&wrong, Format::Toml),
            [
                "f:6:11: tags[0].initial: \"manual\" is not one of Auto, Manual, Off (did you mean \"Manual\"?)",
                "f:7:10: tags[0].values[3]: \"OFF\" is listed already (as \"Off\")",
                "f:7:10: tags[0].values[4]: an empty value cannot be told apart: give it a name",
                "f:7:10: tags[0].values[5]: character 2 is U+202E (RIGHT-TO-LEFT OVERRIDE), which hides or reorders what the value shows: text values hold no control, bidirectional or invisible characters",
            ]
        );
        let number = text
            .replacen(r#"type = "string""#, r#"type = "number""#, 1)
            .replacen(r#"initial = "Auto""#, "initial = 1", 1);
        assert_eq!(
            errors(&number, Format::Toml),
            ["f:7:10: tags[0].values: only text tags have a set of values; this is a number tag"]
        );
        let empty =
            text.replacen(r#"["Auto", "Manual", "Off"]"#, "[]", 1)
                .replacen(r#"initial = "Auto""#, "", 1);
        assert_eq!(
            errors(&empty, Format::Toml),
            ["f:7:10: tags[0].values: an empty set allows no value: list the values, or remove the key"]
        );
    }

    #[test]
    fn parts_that_do_not_fit_together_are_reported_where_they_are_written() {
        let text = r#"
[[types]]
name = "Valve"
  [[types.tags]]
  name = "Open"
  type = "bool"

[[equipment]]
name = "V1"
type = "Valv"
path = "Plant/V1"

[[equipment]]
name = "V2"
type = "Valve"
path = "Plant/V2"
initial = { Open = 3, Closed = true }

[[tags]]
name = "V2.Open"
path = "Plant/Other"
type = "number"

[[alarms]]
name = "Hot"
tag = "Tank.Temp"
condition = "Hi"
limit = 1

[[alarms]]
name = "V2.Stuck"
tag = "V2.Open"
condition = "Hi"
limit = 1
"#;
        let found = errors(text, Format::Toml);
        assert_eq!(
            found,
            [
                "f:10:8: equipment[0].type: no type named \"Valv\" (did you mean \"Valve\"?)",
                "f:17:20: equipment[1].initial.Open: Open is a bool tag (type \"Valve\"): it cannot start at 3",
                "f:17:32: equipment[1].initial.Closed: type \"Valve\" has no tag \"Closed\"",
                "f:20:8: tags[0].name: tag name \"V2.Open\" is taken (by \"V2.Open\")",
                "f:26:7: alarms[0].tag: no tag named \"Tank.Temp\"",
                // V2.Open is first the member (a bool), so the second alarm's tag is that one.
                "f:32:7: alarms[1].condition: a Hi alarm watches a number or integer tag, not a bool tag",
            ],
        );
    }

    #[test]
    fn an_instance_override_is_checked_as_the_types_own_value_is() {
        let text = r#"
[[types]]
name = "Compressor"
  [[types.tags]]
  name = "DischargeTemp"
  type = "number"
  max = 130
  [[types.tags]]
  name = "Starts"
  type = "integer"
  min = 0
  [[types.alarms]]
  name = "Tripped"
  tag = "Starts"
  condition = "Hi"
  limit = 10

[[equipment]]
name = "C1"
type = "Compressor"
path = "Plant/C1"
initial = { DischargeTemp = 190.0, Starts = 85.5 }

[[equipment]]
name = "C2"
type = "Compressor"
path = "Plant/C2"
initial = { DischargeTemp = 120, Starts = -1 }

[[tags]]
name = "Tank.Level"
path = "Plant/Tank/Level"
type = "number"
min = 0
max = 100
initial = 140
"#;
        assert_eq!(
            errors(text, Format::Toml),
            [
                "f:22:29: equipment[0].initial.DischargeTemp: 190 is outside DischargeTemp's range ..130 (type \"Compressor\")",
                "f:22:45: equipment[0].initial.Starts: Starts is an integer tag (type \"Compressor\"): it cannot start at 85.5",
                "f:28:43: equipment[1].initial.Starts: -1 is outside Starts's range 0.. (type \"Compressor\")",
                "f:36:11: tags[0].initial: 140 is outside the range 0..100",
            ]
        );
    }

    #[test]
    fn problems_of_shape_and_of_fit_are_reported_together_without_a_cascade() {
        let text = r#"
[[tags]]
name = "Tank1.Level"
path = "Plant/Tank1/Level"
type = "numbr"

[[tags]]
name = "Tank1.Temp"
path = "Plant/Tank1/Temp"
type = "number"
unit = 5

[[alarms]]
name = "Tank1.Level.Hi"
tag = "Tank1.Level"
condition = "Hi"
limit = 90

[[alarms]]
name = "Tank1.Temp.Hi"
tag = "Tank1.Tmp"
condition = "Hi"
limit = 90
"#;
        assert_eq!(
            errors(text, Format::Toml),
            [
                "f:5:8: tags[0].type: unknown type \"numbr\" (did you mean \"number\"?); one of: number, integer, bool, string",
                "f:11:8: tags[1].unit: expected a string, found an integer",
                // Not "no tag named Tank1.Level": that tag is there, with its own error.
                "f:21:7: alarms[1].tag: no tag named \"Tank1.Tmp\" (did you mean \"Tank1.Temp\"?)",
            ]
        );
    }

    #[test]
    fn a_plant_expanding_past_the_bound_is_refused_before_it_is_expanded() {
        // 1,000 members times 1,000 instances: a million tags from a small file.
        let text = crate::fixtures::cells(1000, 1000);
        let found = errors(&text, Format::Toml);
        // The 101st instance takes the plant past 100,000 tags.
        let line = text
            .lines()
            .position(|line| line == "name = \"C100\"")
            .map(|index| index + 2)
            .expect("in the file");
        assert_eq!(
            found,
            [format!(
                "f:{line}:8: equipment[100].type: the plant would have 1000000 tags (1000000 of equipment instances, 0 of its own); \
                 a plant may have at most 100000: this is where it passes the bound"
            )]
        );
        // At the bound itself, it reads.
        let at_bound: String = text
            .split("[[equipment]]\nname = \"C100\"")
            .next()
            .expect("a part")
            .to_owned();
        assert_eq!(
            read(&at_bound, Format::Toml, "f")
                .expect("valid")
                .expand()
                .tags
                .len(),
            MAX_TAGS
        );
    }

    #[test]
    fn names_that_look_the_same_are_one_name_and_hidden_characters_are_named() {
        // TOML's own escapes (`\u00e9`), so what each name holds is plain to see.
        let text = r#"
[[tags]]
name = "Caf\u00e9.Temp"
path = "Plant/Cafe/Temp"
type = "number"

[[tags]]
name = "CAFE\u0301.TEMP"
path = "Plant/Cafe/Temp2"
type = "number"

[[tags]]
name = "Kiln.Temp"
path = "Plant/Kiln/Temp"
type = "number"

[[tags]]
name = "\u212Ailn.Temp"
path = "Plant/Kiln/Temp3"
type = "number"

[[tags]]
name = "TOP.Level"
path = "Plant/Top/Level"
type = "number"

[[tags]]
name = "\u0422\u041e\u0420.Level"
path = "Plant/Top2/Level"
type = "number"

[[tags]]
name = "Pump1.Level"
path = "Plant/Pump1/Level"
type = "number"

[[tags]]
name = "P\u0443mp2.Level"
path = "Plant/Pump2/Level"
type = "number"

[[tags]]
name = "Tank\u202E1.Level"
path = "Plant/Tank1/Level"
type = "number"

[[tags]]
name = "Tank2.Level"
path = "Plant/Tank\u200B2/Level"
type = "number"
"#;
        assert_eq!(
            errors(text, Format::Toml),
            [
                "f:8:8: tags[1].name: tag name \"CAF\u{c9}.TEMP\" is taken (by \"Caf\u{e9}.Temp\")"
                    .to_owned(),
                "f:18:8: tags[3].name: tag name \"Kiln.Temp\" is taken (by \"Kiln.Temp\")".to_owned(),
                format!(
                    "f:28:8: tags[5].name: tag name {:?} looks the same as \"TOP.Level\" (of \"TOP.Level\"): \
                     a character of another script, or one that looks like another, makes a name people cannot tell apart",
                    "\u{422}\u{41e}\u{420}.Level"
                ),
                format!(
                    "f:38:8: tags[7].name: {:?} is not a usable name: {:?} mixes scripts (Latin, Cyrillic), \
                     so it can look like another name: write each part in one script",
                    "P\u{443}mp2.Level", "P\u{443}mp2"
                ),
                format!(
                    "f:43:8: tags[8].name: {:?} is not a usable name: character 5 is U+202E (RIGHT-TO-LEFT OVERRIDE), \
                     which hides or reorders what a name shows",
                    "Tank\u{202E}1.Level"
                ),
                format!(
                    "f:49:8: tags[9].path: {:?} is not a usable UNS path: character 11 is U+200B (ZERO WIDTH SPACE), \
                     which hides or reorders what a name shows",
                    "Plant/Tank\u{200B}2/Level"
                ),
            ]
        );
        // Stored as written in NFC.
        let model = read(
            "[[tags]]\nname = \"Cafe\\u0301.Temp\"\npath = \"Plant/Cafe\\u0301\"\ntype = \"number\"\n",
            Format::Toml,
            "f",
        )
        .expect("valid");
        assert_eq!(model.tags[0].name, "Caf\u{e9}.Temp");
        assert_eq!(model.tags[0].path, "Plant/Caf\u{e9}");
    }

    #[test]
    fn a_tag_path_with_an_mqtt_wildcard_is_refused_on_a_plain_mqtt_source() {
        let text = r#"
[[sources]]
name = "site"
url = "mqtt://127.0.0.1"
root = "Site/#"

[[types]]
name = "Cell"
  [[types.tags]]
  name = "Volts"
  type = "number"
  source = { broker = "site" }

[[equipment]]
name = "C1"
type = "Cell"
path = "Plant/+/C1"

[[tags]]
name = "Tank1.Level"
path = "Plant/Tank#1/Level"
type = "number"
source = { broker = "site" }

[[tags]]
name = "Tank2.Level"
path = "Plant/Tank#2/Level"
type = "number"
source = { broker = "site", topic = "Plant/Tank2/Level" }
"#;
        assert_eq!(
            errors(text, Format::Toml),
            [
                "f:5:8: sources[0].root: \"Site/#\" is not a topic prefix: no + or # wildcards",
                "f:17:8: equipment[0].path: path \"Plant/+/C1/Volts\" of tag \"C1.Volts\" has the MQTT wildcard '+', \
                 and the tag's topic on source \"site\" is its path: give the tag source.topic, or a path without '+' and '#'",
                "f:21:8: tags[0].path: path \"Plant/Tank#1/Level\" of tag \"Tank1.Level\" has the MQTT wildcard '#', \
                 and the tag's topic on source \"site\" is its path: give the tag source.topic, or a path without '+' and '#'",
            ]
        );
    }

    #[test]
    fn a_simulated_tag_needs_an_initial_value_from_its_entry_its_type_or_its_instance() {
        let text = r#"
[[types]]
name = "Cell"
  [[types.tags]]
  name = "Volts"
  type = "number"
  simulate = { amplitude = 1, period = 60 }

[[equipment]]
name = "C1"
type = "Cell"
path = "Plant/C1"
initial = { Volts = 3.6 }

[[equipment]]
name = "C2"
type = "Cell"
path = "Plant/C2"

[[tags]]
name = "Tank.Level"
path = "Plant/Tank/Level"
type = "number"
simulate = { amplitude = 1, period = 1e300 }
"#;
        assert_eq!(
            errors(text, Format::Toml),
            [
                "f:16:8: equipment[1].initial: tag \"C2.Volts\" is simulated around its initial value and has none: \
                 give it one here or in type \"Cell\"",
                "f:24:12: tags[0].initial: tag \"Tank.Level\" is simulated around its initial value and has none: \
                 give it one to the tag",
                "f:24:38: tags[0].simulate.period: must be above 0 seconds (and a span of time a clock can hold)",
            ]
        );
    }

    #[test]
    fn json_reads_as_toml_does_and_its_errors_have_lines_too() {
        let json = r#"{
  "tags": [
    {"name": "Tank1.Level", "path": "Plant/Tank1/Level", "type": "number", "min": 0, "max": 100},
  ],
  // JSON files may carry comments.
  "alarms": [
    {"name": "Tank1.Level.Hi", "tag": "Tank1.Level", "condition": "Hi", "limit": 90}
  ]
}"#;
        let model = read(json, Format::Json, "plant.json").expect("valid JSON");
        assert_eq!(model.tags[0].max, Some(100.0));
        let broken = json.replace("\"limit\": 90", "\"limit\": 90, \"limit\": 91");
        assert_eq!(
            errors(&broken, Format::Json),
            ["f:7:86: alarms[0].limit: appears twice"]
        );
        let wrong = json.replace("\"max\": 100", "\"max\": true");
        assert_eq!(
            errors(&wrong, Format::Json),
            ["f:3:93: tags[0].max: expected a number, found a boolean"]
        );
    }

    #[test]
    fn sources_are_checked_and_tags_name_only_sources_that_exist() {
        let model = read(PUMPS, Format::Toml, "pumps.toml").expect("valid");
        let site = &model.sources[0];
        assert_eq!(site.client_id(), "tserver-site");
        assert_eq!(site.keep_alive, 30);
        assert_eq!(
            site.topic_of("Plant/Area1/Tank1/Level"),
            "Riverside/Plant/Area1/Tank1/Level"
        );
        let bad = PUMPS
            .replace("url = \"mqtt://127.0.0.1:1883\"", "url = \"http://broker\"")
            .replace("password = \"/secret:BrokerPassword\"", "password = \"hunter2\"");
        let found = errors(&bad, Format::Toml);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(
            found[0].contains("sources[0].url: \"http://broker\" is not a source address"),
            "{found:?}"
        );
        assert!(
            found[1].contains("sources[0].password: give a /secret:<Name> token"),
            "{found:?}"
        );
        assert!(!found[1].contains("hunter2"), "a password is never repeated");
        let unknown = PUMPS.replace("broker = \"site\"", "broker = \"sit\"");
        let found = errors(&unknown, Format::Toml);
        assert!(
            found[0].contains(
                "names source \"sit\", which no [[sources]] entry defines (did you mean \"site\"?)"
            ),
            "{found:?}"
        );
    }

    /// Each `(from, to, wanted)`: `base` with `from` replaced by `to` is refused with an error
    /// containing `wanted`.
    fn each_mistake_is_named(base: &str, cases: &[(&str, &str, &str)]) {
        for (from, to, wanted) in cases {
            assert!(base.contains(from), "{from}");
            let found = errors(&base.replacen(from, to, 1), Format::Toml);
            assert!(
                found.iter().any(|error| error.contains(wanted)),
                "{to}: {found:?}"
            );
        }
    }

    const MODBUS: &str = r#"
[[sources]]
name = "rack2"
url = "modbus://127.0.0.1:5020"
unit = 3
poll_interval = 500
max_gap = 4

[[sources]]
name = "site"
url = "mqtt://127.0.0.1"

[[tags]]
name = "Line1.Temp"
path = "Plant/Line1/Temp"
type = "number"
source = { device = "rack2", holding_register = 100, format = "f32", word_order = "low_word_first" }

[[tags]]
name = "Line1.Speed"
path = "Plant/Line1/Speed"
type = "number"
writable = true
source = { device = "rack2", holding_register = 110, format = "i16", scale = 0.1, offset = -40 }

[[tags]]
name = "Line1.Count"
path = "Plant/Line1/Count"
type = "integer"
source = { device = "rack2", input_register = 7, format = "u32" }

[[tags]]
name = "Line1.Running"
path = "Plant/Line1/Running"
type = "bool"
source = { device = "rack2", coil = 0 }
"#;

    #[test]
    fn modbus_sources_and_bindings_read_and_export_back() {
        let model = read(MODBUS, Format::Toml, "f").expect("valid");
        let rack = &model.sources[0];
        assert_eq!(rack.kind(), crate::SourceKind::Modbus);
        assert_eq!(
            (rack.unit, rack.poll_interval, rack.timeout, rack.max_gap),
            (3, 500, 1000, 4)
        );
        let point = |index: usize| {
            model.tags[index]
                .source
                .as_deref()
                .and_then(SourceBinding::modbus_point)
                .expect("a Modbus binding")
                .expect("a valid point")
        };
        assert_eq!(point(0).format(), modbus::Format::F32);
        assert_eq!(point(0).word_order(), modbus::WordOrder::LowWordFirst);
        assert_eq!(
            (point(1).table(), point(1).address()),
            (modbus::Table::HoldingRegisters, 110)
        );
        assert_eq!(
            point(3).format(),
            modbus::Format::Bool,
            "a coil's format is bool by default"
        );
        assert_eq!(
            model.tags[3].source.as_deref().map(SourceBinding::source_name),
            Some("rack2")
        );
        assert_eq!(
            read(&model.to_toml().expect("writes"), Format::Toml, "f").expect("reads back"),
            model
        );
    }

    #[test]
    fn modbus_mistakes_are_named_where_they_are_written() {
        let cases = [
            (
                "unit = 3",
                "unit = 300",
                "f:5:8: sources[0].unit: must be a unit id, a whole number from 0 to 255",
            ),
            (
                "max_gap = 4",
                "max_gap = 4\nroot = \"Site\"",
                "f:8:8: sources[0].root: is an MQTT source's (mqtt://, mqtts://), not this source's",
            ),
            (
                "max_gap = 4",
                "max_gap = 4\nstale_after = 5",
                "f:8:15: sources[0].stale_after: is an MQTT source's (mqtt://, mqtts://), not this source's",
            ),
            (
                "url = \"mqtt://127.0.0.1\"",
                "url = \"mqtt://127.0.0.1\"\nunit = 2",
                "f:12:8: sources[1].unit: is a Modbus source's (modbus://), not this source's",
            ),
            (
                "url = \"modbus://127.0.0.1:5020\"",
                "url = \"opc.udp://127.0.0.1\"",
                "sources[0].url: \"opc.udp://127.0.0.1\" is not a source address",
            ),
            (
                "holding_register = 100, format = \"f32\"",
                "holding_register = 100, input_register = 3, format = \"f32\"",
                "tags[0].source.input_register: a tag is at one address: holding_register is given already",
            ),
            (
                "holding_register = 100, format = \"f32\"",
                "format = \"f32\"",
                "tags[0].source: a Modbus binding gives its address as one of coil, discrete_input, input_register, holding_register",
            ),
            (
                "format = \"f32\", word_order",
                "format = \"float\", word_order",
                "tags[0].source.format: \"float\" is none of bool, u16, i16, u32, i32, f32, f64",
            ),
            (
                "word_order = \"low_word_first\"",
                "word_order = \"little\"",
                "tags[0].source.word_order: \"little\" is none of high_word_first, low_word_first",
            ),
            (
                "scale = 0.1",
                "scale = 0",
                "tags[1].source.scale: scale must be a finite number other than 0, not 0",
            ),
            (
                "coil = 0 }",
                "coil = 0, format = \"u16\" }",
                "tags[3].source.format: a coil holds single bits: its format is bool",
            ),
            (
                "input_register = 7, format = \"u32\"",
                "input_register = 65535, format = \"u32\"",
                "tags[2].source.input_register: a u32 at 65535 runs past the last address, 65535",
            ),
            (
                "type = \"integer\"\nsource",
                "type = \"integer\"\nwritable = true\nsource",
                "tags[2].name: tag \"Line1.Count\" is writable and its Modbus input_register is read-only",
            ),
            (
                "input_register = 7, format = \"u32\"",
                "input_register = 7, format = \"f32\"",
                "tags[2].name: tag \"Line1.Count\" is integer and its Modbus input_register reads as f32",
            ),
            (
                "source = { device = \"rack2\", coil = 0 }",
                "source = { broker = \"rack2\" }",
                "tags[3].name: tag \"Line1.Running\" names \"rack2\" as its broker, and that source is modbus://127.0.0.1:5020: name it with device",
            ),
            (
                "source = { device = \"rack2\", coil = 0 }",
                "source = { device = \"site\", coil = 0 }",
                "tags[3].name: tag \"Line1.Running\" names \"site\" as its device, and that source is mqtt://127.0.0.1: name it with broker",
            ),
            (
                "source = { device = \"rack2\", coil = 0 }",
                "source = { device = \"rack2\", broker = \"site\", coil = 0 }",
                "tags[3].source.broker: a tag has one source: broker (an MQTT source), device (a Modbus source) or server (an OPC UA source)",
            ),
        ];
        each_mistake_is_named(MODBUS, &cases);
    }

    const OPCUA: &str = r#"
[[sources]]
name = "plc1"
url = "opc.tcp://127.0.0.1:4840/line"
security = "Basic256Sha256"
mode = "SignAndEncrypt"
username = "operator"
password = "/secret:PlcPassword"
sampling_interval = 250
publishing_interval = 1000
deadband = 0.1

[[sources]]
name = "rack2"
url = "modbus://127.0.0.1:5020"

[[tags]]
name = "Line1.Temp"
path = "Plant/Line1/Temp"
type = "number"
source = { server = "plc1", node = "ns=2;s=Line1.Temp", sampling_interval = 100, deadband = 0.5 }

[[tags]]
name = "Line1.Count"
path = "Plant/Line1/Count"
type = "integer"
source = { server = "plc1", node = "ns=2;i=1001" }

[[tags]]
name = "Line1.Name"
path = "Plant/Line1/Name"
type = "string"
writable = true
source = { server = "plc1", node = "ns=2;g=72962B91-FA75-4AE6-8D28-B404DC7DAF63" }
"#;

    #[test]
    fn opcua_sources_and_bindings_read_and_export_back() {
        let model = read(OPCUA, Format::Toml, "f").expect("valid");
        let plc = &model.sources[0];
        assert_eq!(plc.kind(), crate::SourceKind::OpcUa);
        assert_eq!(
            (plc.security.as_str(), plc.mode.as_str(), plc.username.as_str()),
            ("Basic256Sha256", "SignAndEncrypt", "operator")
        );
        assert_eq!(
            (plc.sampling_interval, plc.publishing_interval, plc.deadband),
            (250, 1000, 0.1)
        );
        let binding = |index: usize| model.tags[index].source.as_ref().expect("bound");
        assert_eq!(binding(0).kind(), crate::SourceKind::OpcUa);
        assert_eq!(binding(0).source_name(), "plc1");
        assert_eq!(
            (binding(0).sampling_interval, binding(0).deadband),
            (Some(100), Some(0.5))
        );
        let node = |index: usize| {
            binding(index)
                .opcua_node()
                .expect("an OPC UA binding")
                .expect("a valid node id")
        };
        assert_eq!(node(0).to_string(), "ns=2;s=Line1.Temp");
        assert_eq!(node(1).to_string(), "ns=2;i=1001");
        assert_eq!(node(1).namespace, 2);
        assert_eq!(
            read(&model.to_toml().expect("writes"), Format::Toml, "f").expect("reads back"),
            model
        );
        let plain = read(
            &OPCUA.replacen(
                "security = \"Basic256Sha256\"\nmode = \"SignAndEncrypt\"\nusername = \"operator\"\npassword = \"/secret:PlcPassword\"\n",
                "",
                1,
            ),
            Format::Toml,
            "f",
        )
        .expect("valid without security, anonymous");
        assert_eq!(
            (plain.sources[0].security.as_str(), plain.sources[0].mode.as_str()),
            ("None", "")
        );
        // A password over a channel that neither signs nor encrypts: refused at the user name.
        let clear = read(
            &OPCUA.replacen(
                "security = \"Basic256Sha256\"\nmode = \"SignAndEncrypt\"\n",
                "",
                1,
            ),
            Format::Toml,
            "f",
        )
        .expect_err("a password in clear");
        assert!(
            clear.errors[0].to_string().starts_with(
                "5:12: sources[0].username: a user name and password over security \"None\" travel"
            ),
            "{clear}"
        );
    }

    #[test]
    fn opcua_mistakes_are_named_where_they_are_written() {
        let cases = [
            (
                "security = \"Basic256Sha256\"",
                "security = \"Basic128\"",
                "f:5:12: sources[0].security: \"Basic128\" is none of None, Basic256Sha256",
            ),
            (
                "mode = \"SignAndEncrypt\"",
                "mode = \"Encrypt\"",
                "f:6:8: sources[0].mode: \"Encrypt\" is none of Sign, SignAndEncrypt",
            ),
            (
                "mode = \"SignAndEncrypt\"\n",
                "",
                "f:5:12: sources[0].mode: security \"Basic256Sha256\" needs a mode: one of Sign, SignAndEncrypt",
            ),
            (
                "security = \"Basic256Sha256\"",
                "security = \"None\"",
                "f:6:8: sources[0].mode: security \"None\" signs and encrypts nothing",
            ),
            (
                "password = \"/secret:PlcPassword\"",
                "password = \"hunter2\"",
                "f:8:12: sources[0].password: give a /secret:<Name> token",
            ),
            (
                "deadband = 0.1",
                "deadband = -1.0",
                "f:11:12: sources[0].deadband: must be a finite number from 0 up, not -1",
            ),
            (
                "sampling_interval = 250",
                "sampling_interval = 250\nroot = \"Site\"",
                "f:10:8: sources[0].root: is an MQTT source's (mqtt://, mqtts://), not this source's",
            ),
            (
                "sampling_interval = 250",
                "sampling_interval = 250\nunit = 2",
                "f:10:8: sources[0].unit: is a Modbus source's (modbus://), not this source's",
            ),
            (
                "url = \"modbus://127.0.0.1:5020\"",
                "url = \"modbus://127.0.0.1:5020\"\ndeadband = 1.0",
                "f:16:12: sources[1].deadband: is an OPC UA source's (opc.tcp://), not this source's",
            ),
            (
                "url = \"modbus://127.0.0.1:5020\"",
                "url = \"modbus://127.0.0.1:5020\"\nusername = \"op\"",
                "f:16:12: sources[1].username: is an MQTT or OPC UA source's, not this source's",
            ),
            (
                "node = \"ns=2;s=Line1.Temp\"",
                "node = \"Line1.Temp\"",
                "tags[0].source.node: \"Line1.Temp\" is not a node id",
            ),
            (
                "node = \"ns=2;i=1001\"",
                "node = \"ns=2;i=x\"",
                "tags[1].source.node: \"ns=2;i=x\" is not a node id",
            ),
            (
                "source = { server = \"plc1\", node = \"ns=2;i=1001\" }",
                "source = { server = \"plc1\" }",
                "tags[1].source.node: is required",
            ),
            (
                "deadband = 0.5 }",
                "deadband = \"half\" }",
                "tags[0].source.deadband",
            ),
            (
                "sampling_interval = 100,",
                "sampling_interval = -1,",
                "tags[0].source.sampling_interval: must be a whole number of milliseconds from 0 to 3600000",
            ),
            (
                "source = { server = \"plc1\", node = \"ns=2;i=1001\" }",
                "source = { server = \"rack2\", node = \"ns=2;i=1001\" }",
                "tags[1].name: tag \"Line1.Count\" names \"rack2\" as its server, and that source is modbus://127.0.0.1:5020: name it with device",
            ),
            (
                "source = { server = \"plc1\", node = \"ns=2;i=1001\" }",
                "source = { server = \"plc1\", device = \"rack2\", node = \"ns=2;i=1001\" }",
                "tags[1].source.device: a tag has one source",
            ),
            (
                "url = \"opc.tcp://127.0.0.1:4840/line\"",
                "url = \"opc.tcp:///line\"",
                "sources[0].url: \"opc.tcp:///line\" is not a source address",
            ),
        ];
        each_mistake_is_named(OPCUA, &cases);
    }

    #[test]
    fn sparkplug_bindings_name_a_node_or_device_and_a_metric() {
        let sparkplug = PUMPS.replace(
            "source = { broker = \"site\", topic = \"tank1/level\" }",
            "source = { broker = \"site\", sparkplug = \"Riverside/Edge1/Tank1\", metric = \"Level\" }",
        );
        let model = read(&sparkplug, Format::Toml, "f").expect("valid");
        let binding = model.tags[0].source.as_ref().expect("bound");
        assert_eq!(
            binding.sparkplug_target(),
            Some(("Riverside", "Edge1", Some("Tank1")))
        );
        assert_eq!(
            read(&model.to_toml().expect("writes"), Format::Toml, "f").expect("reads back"),
            model
        );
        let cases = [
            (
                "sparkplug = \"Riverside\", metric = \"Level\"",
                "tags[0].source.sparkplug: \"Riverside\" is not an edge node or device",
            ),
            (
                "sparkplug = \"Riverside/Edge1\"",
                "tags[0].source.metric: is required",
            ),
            (
                "metric = \"Level\"",
                "tags[0].source.metric: metric names a Sparkplug B metric",
            ),
            (
                "sparkplug = \"A/B\", metric = \"Level\", topic = \"x\"",
                "tags[0].source.topic: a Sparkplug metric has no topic of its own",
            ),
            (
                "topic = \"Riverside/+/Level\"",
                "tags[0].source.topic: \"Riverside/+/Level\" is not a topic",
            ),
        ];
        for (fields, wanted) in cases {
            let text = PUMPS.replace(
                "source = { broker = \"site\", topic = \"tank1/level\" }",
                &format!("source = {{ broker = \"site\", {fields} }}"),
            );
            let found = errors(&text, Format::Toml);
            assert!(
                found.iter().any(|error| error.contains(wanted)),
                "{fields}: {found:?}"
            );
        }
    }

    #[test]
    fn a_tag_cannot_be_the_folder_of_another_and_a_folder_cannot_be_a_tag() {
        let text = r#"
[[folders]]
path = "plant/area1/tank1/level"

[[tags]]
name = "Tank1.Level"
path = "Plant/Area1/Tank1/Level"
type = "number"

[[tags]]
name = "Tank1.Level.Raw"
path = "Plant/Area1/Tank1/Level/Raw"
type = "number"

[[tags]]
name = "Tank1.LevelX"
path = "Plant/Area1/Tank1/LevelX"
type = "number"
"#;
        assert_eq!(
            errors(text, Format::Toml),
            [
                "f:3:8: folders[0].path: \"plant/area1/tank1/level\" is the path of tag \"Tank1.Level\", not a folder",
                "f:6:8: tags[0].name: path \"Plant/Area1/Tank1/Level\" is a tag, so it cannot also be the folder of \"Plant/Area1/Tank1/Level/Raw\"",
            ],
            "LevelX shares a prefix but not a folder"
        );
    }

    #[test]
    fn a_huge_file_is_refused_before_it_is_parsed() {
        let huge = "#".repeat(MAX_FILE_BYTES + 1);
        assert_eq!(errors(&huge, Format::Toml).len(), 1);
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_read_or_refused_never_a_panic(text in "\\PC{0,300}") {
            for format in [Format::Toml, Format::Json] {
                if let Err(errors) = read(&text, format, "f") {
                    proptest::prop_assert!(!errors.errors.is_empty());
                }
            }
        }

        #[test]
        fn edits_of_a_valid_file_are_read_or_refused_never_a_panic(
            at in 0_usize..2000, cut in 0_usize..40, insert in "[ =\\[\\]{}\"a-z0-9.,\n]{0,12}"
        ) {
            let mut text = PUMPS.to_owned();
            let at = at % text.len();
            let end = (at + cut).min(text.len());
            if text.is_char_boundary(at) && text.is_char_boundary(end) {
                text.replace_range(at..end, &insert);
                if let Ok(model) = read(&text, Format::Toml, "f") {
                    let exported = model.to_toml().expect("exports");
                    proptest::prop_assert_eq!(read(&exported, Format::Toml, "f").expect("reads"), model);
                }
            }
        }
    }
}
