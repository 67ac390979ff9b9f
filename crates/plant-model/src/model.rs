//! The plant model as the file describes it (types and instances not yet expanded), and its
//! expansion into the tags and alarms the runtime holds.
//!
//! Serialized with serde it is the canonical form: what the solution stores and what export
//! writes back as TOML, so export then import gives the same model.

use std::collections::BTreeMap;

use crate::TagExpression;
use serde::{Deserialize, Serialize};

/// A whole plant file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlantModel {
    /// What the plant is called and what it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plant: Option<PlantInfo>,
    /// UNS folders with a description (folders also exist wherever a path passes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub folders: Vec<FolderSpec>,
    /// Equipment types: templates of member tags and alarms.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub types: Vec<EquipmentType>,
    /// Equipment instances: a type placed at a path.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub equipment: Vec<Equipment>,
    /// Tags outside any equipment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<TagSpec>,
    /// Alarms on any tag.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alarms: Vec<AlarmSpec>,
    /// Where live values come from: MQTT brokers, Modbus TCP devices and OPC UA servers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceSpec>,
    /// Documents (procedures, manuals) about parts of the plant, read from files beside it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub documents: Vec<DocumentSpec>,
    /// Where alarm events are sent as they are recorded: webhooks and MQTT topics.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notifications: Vec<NotificationSpec>,
    /// The site's own prompts, offered by RuntimeMCP beside the built-in ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prompts: Vec<PromptSpec>,
}

/// `[[prompts]]`: a prompt of the site's own that MCP clients offer their users, a template
/// whose `{argument}`s are filled in (a prompt named like a built-in one replaces it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptSpec {
    /// Its name, as clients call it: letters, digits, `_` and `-`, unique among the prompts.
    pub name: String,
    /// A short name for people.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub title: String,
    /// What it does.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// The message the model is given, each `{argument}` replaced by its value.
    pub template: String,
    /// Its arguments, each named in the template.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arguments: Vec<PromptArgumentSpec>,
}

/// `[[prompts.arguments]]`: one argument of a site prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptArgumentSpec {
    /// Its name, as the template writes it in braces.
    pub name: String,
    /// What to give, for the user.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// What it is when not given; an argument without one is required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// What its values are, completed from and checked against the plant.
    #[serde(default, skip_serializing_if = "ArgumentValues::is_text")]
    pub values: ArgumentValues,
}

/// What a prompt argument's values are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArgumentValues {
    /// Any text (at most [`MAX_PROMPT_VALUE`](crate::MAX_PROMPT_VALUE) characters).
    #[default]
    Text,
    /// An equipment's name: an instance, or a folder holding tags.
    Equipment,
    /// An alarm's name.
    Alarm,
    /// A tag's name.
    Tag,
    /// A UNS folder's path.
    Folder,
}

impl ArgumentValues {
    /// Every kind, as the file names them.
    pub const ALL: [Self; 5] = [Self::Text, Self::Equipment, Self::Alarm, Self::Tag, Self::Folder];

    /// The name the file writes.
    pub fn name(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Equipment => "equipment",
            Self::Alarm => "alarm",
            Self::Tag => "tag",
            Self::Folder => "folder",
        }
    }

    /// The kind a plant file names.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|values| values.name() == name)
    }

    fn is_text(&self) -> bool {
        *self == Self::Text
    }
}

/// `[[notifications]]`: the alarm events of some priority and folders, sent as they are
/// recorded to a webhook (a JSON POST) or published to an MQTT source's broker under its root.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotificationSpec {
    /// Its name, unique among the notifications.
    pub name: String,
    /// The URL events are POSTed to (`http://` or `https://`); or else `mqtt`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub webhook: String,
    /// The MQTT source whose broker the events are published to, under its root.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mqtt: String,
    /// A webhook's bearer token, as a `/secret:<Name>` token.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub token: String,
    /// Only alarms of at least this priority (1 to 1000).
    #[serde(default = "lowest_priority", skip_serializing_if = "is_lowest_priority")]
    pub min_priority: u32,
    /// Only alarms of tags below these UNS folders (none: the whole plant).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub folders: Vec<String>,
    /// Which events are sent.
    #[serde(
        default = "NotifiedEvent::defaults",
        skip_serializing_if = "NotifiedEvent::are_defaults"
    )]
    pub events: Vec<NotifiedEvent>,
}

fn lowest_priority() -> u32 {
    1
}

fn is_lowest_priority(priority: &u32) -> bool {
    *priority == 1
}

/// An alarm event a notification may send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NotifiedEvent {
    /// It tripped (annunciated or not).
    Active,
    /// It cleared.
    Cleared,
    /// Someone acknowledged it.
    Acknowledged,
    /// It stayed unacknowledged past its `time_to_respond`.
    Escalated,
    /// It was shelved.
    Shelved,
    /// Its shelving ended, by hand or when its time was up.
    Unshelved,
    /// It was taken out of service.
    OutOfService,
    /// It was put back in service.
    InService,
    /// Its `suppress_when` began to hold.
    Suppressed,
    /// Its `suppress_when` stopped holding.
    Unsuppressed,
}

impl NotifiedEvent {
    /// Every event, in the order of an alarm's life.
    pub const ALL: [Self; 10] = [
        Self::Active,
        Self::Cleared,
        Self::Acknowledged,
        Self::Escalated,
        Self::Shelved,
        Self::Unshelved,
        Self::OutOfService,
        Self::InService,
        Self::Suppressed,
        Self::Unsuppressed,
    ];

    /// How the file writes it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Cleared => "cleared",
            Self::Acknowledged => "acknowledged",
            Self::Escalated => "escalated",
            Self::Shelved => "shelved",
            Self::Unshelved => "unshelved",
            Self::OutOfService => "out-of-service",
            Self::InService => "in-service",
            Self::Suppressed => "suppressed",
            Self::Unsuppressed => "unsuppressed",
        }
    }

    /// The event of a name the file writes.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|event| event.name() == name)
    }

    /// The event an alarm history event is, for a notification.
    pub fn of(kind: crate::AlarmEventKind) -> Self {
        use crate::AlarmEventKind as Kind;
        match kind {
            Kind::Active => Self::Active,
            Kind::Cleared => Self::Cleared,
            Kind::Acknowledged => Self::Acknowledged,
            Kind::Shelved => Self::Shelved,
            Kind::Unshelved | Kind::ShelvingExpired => Self::Unshelved,
            Kind::OutOfService => Self::OutOfService,
            Kind::InService => Self::InService,
            Kind::Suppressed => Self::Suppressed,
            Kind::Unsuppressed => Self::Unsuppressed,
        }
    }

    /// What a notification sends unless told otherwise: trips, and escalations past the time
    /// to respond.
    pub fn defaults() -> Vec<Self> {
        vec![Self::Active, Self::Escalated]
    }

    fn are_defaults(events: &Vec<Self>) -> bool {
        *events == Self::defaults()
    }
}

/// The parts of a stored model read on their own; every other part (tags and types above all,
/// nearly all of a large plant) is skipped unread.
#[derive(Debug, Default, Deserialize)]
pub struct StoredParts {
    /// `[[sources]]`.
    #[serde(default)]
    pub sources: Vec<SourceSpec>,
    /// `[[equipment]]`.
    #[serde(default)]
    pub equipment: Vec<Equipment>,
    /// `[[notifications]]`.
    #[serde(default)]
    pub notifications: Vec<NotificationSpec>,
    /// `[[prompts]]`.
    #[serde(default)]
    pub prompts: Vec<PromptSpec>,
}

/// `[[documents]]`: a Markdown or plain-text file about the equipment of some types, some
/// instances or some folders (none named: the whole plant). The file's text is not part of
/// the model: the solution stores it beside, and export writes it back at `path`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DocumentSpec {
    /// Where the file is, relative to the plant file (`/`-separated, no `..`).
    pub path: String,
    /// Its title as written (empty: its first Markdown `# ` heading, else its file name).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub title: String,
    /// The equipment types it is about.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub types: Vec<String>,
    /// The equipment instances it is about.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub equipment: Vec<String>,
    /// The UNS folders it is about (and everything below them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub folders: Vec<String>,
}

impl DocumentSpec {
    /// The title it goes by: as written, else the first `# ` heading of `text` when it is
    /// Markdown (`.md`, `.markdown`), else its file name.
    pub fn title_in(&self, text: &str) -> String {
        if !self.title.trim().is_empty() {
            return self.title.trim().to_owned();
        }
        let lower = self.path.to_ascii_lowercase();
        let markdown = lower.ends_with(".md") || lower.ends_with(".markdown");
        text.lines()
            .filter(|_| markdown)
            .find_map(|line| {
                line.strip_prefix("# ")
                    .map(str::trim)
                    .filter(|title| !title.is_empty())
            })
            .map_or_else(
                || self.path.rsplit('/').next().unwrap_or(&self.path).to_owned(),
                str::to_owned,
            )
    }
}

fn default_keep_alive() -> u64 {
    30
}

fn is_default_keep_alive(seconds: &u64) -> bool {
    *seconds == default_keep_alive()
}

/// `[[sources]]`: an MQTT broker holding a Unified Namespace (`mqtt://`, `mqtts://`), a
/// Modbus TCP device (`modbus://`) or an OPC UA server (`opc.tcp://`). Fields of one kind are
/// refused on the others.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceSpec {
    /// The name tags' `source = { broker = ... }`, `source = { device = ... }` or
    /// `source = { server = ... }` use.
    pub name: String,
    /// `mqtt://host:port` or `mqtts://host:port` (default ports 1883 and 8883),
    /// `modbus://host:port` (default port 502) or `opc.tcp://host:port[/path]`.
    pub url: String,
    /// The MQTT client id (default: `tserver-<name>`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub client_id: String,
    /// The user name, if the broker or OPC UA server wants one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub username: String,
    /// The password, as a `/secret:<Name>` token (never in the clear).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub password: String,
    /// A PEM file of the CA that signed the broker's certificate (`mqtts://`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ca_file: String,
    /// Seconds between keep-alive pings.
    #[serde(default = "default_keep_alive", skip_serializing_if = "is_default_keep_alive")]
    pub keep_alive: u64,
    /// The topic prefix of the tags' UNS paths: a tag at `Plant/Area1/Pump1/Current` is on
    /// `<root>/Plant/Area1/Pump1/Current` unless it names its own topic.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub root: String,
    /// Seconds without an update after which a tag of this source is Uncertain (0: never).
    #[serde(default, skip_serializing_if = "is_zero_seconds")]
    pub stale_after: u64,
    /// Modbus: the unit id the device answers to.
    #[serde(default = "default_unit", skip_serializing_if = "is_default_unit")]
    pub unit: u8,
    /// Modbus: milliseconds between the starts of two polls of every bound register.
    #[serde(
        default = "default_poll_interval",
        skip_serializing_if = "is_default_poll_interval"
    )]
    pub poll_interval: u64,
    /// Modbus: milliseconds the device has to answer a request before the connection is taken
    /// as lost.
    #[serde(
        default = "default_request_timeout",
        skip_serializing_if = "is_default_request_timeout"
    )]
    pub timeout: u64,
    /// Modbus: the most unbound addresses one read may span to merge two neighbours (0: only
    /// adjacent ones; a device answers a read touching an address it lacks with an exception).
    #[serde(default, skip_serializing_if = "is_zero_gap")]
    pub max_gap: u16,
    /// OPC UA: the security policy, `None` (the default) or `Basic256Sha256`.
    #[serde(default = "default_security", skip_serializing_if = "is_default_security")]
    pub security: String,
    /// OPC UA: `Sign` or `SignAndEncrypt` with `Basic256Sha256` (none with `None`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mode: String,
    /// OPC UA: milliseconds between two samples of a monitored node, unless its tag says.
    #[serde(
        default = "default_sampling_interval",
        skip_serializing_if = "is_default_sampling_interval"
    )]
    pub sampling_interval: u64,
    /// OPC UA: milliseconds between two notifications the server sends.
    #[serde(
        default = "default_publishing_interval",
        skip_serializing_if = "is_default_publishing_interval"
    )]
    pub publishing_interval: u64,
    /// OPC UA: the absolute change a numeric value must make to be reported, unless its tag
    /// says (0: every change).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub deadband: f64,
}

fn default_security() -> String {
    "None".to_owned()
}

fn is_default_security(security: &str) -> bool {
    security == "None"
}

fn default_sampling_interval() -> u64 {
    500
}

fn is_default_sampling_interval(milliseconds: &u64) -> bool {
    *milliseconds == default_sampling_interval()
}

fn default_publishing_interval() -> u64 {
    500
}

fn is_default_publishing_interval(milliseconds: &u64) -> bool {
    *milliseconds == default_publishing_interval()
}

fn is_zero_seconds(seconds: &u64) -> bool {
    *seconds == 0
}

fn default_unit() -> u8 {
    1
}

fn is_default_unit(unit: &u8) -> bool {
    *unit == default_unit()
}

fn default_poll_interval() -> u64 {
    1000
}

fn is_default_poll_interval(milliseconds: &u64) -> bool {
    *milliseconds == default_poll_interval()
}

fn default_request_timeout() -> u64 {
    1000
}

fn is_default_request_timeout(milliseconds: &u64) -> bool {
    *milliseconds == default_request_timeout()
}

fn is_zero_gap(gap: &u16) -> bool {
    *gap == 0
}

/// What a source is, by its URL's scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// `mqtt://` or `mqtts://`.
    Mqtt,
    /// `modbus://`.
    Modbus,
    /// `opc.tcp://`.
    OpcUa,
}

impl SourceKind {
    /// The kind `url` names, if any this product reads.
    pub fn of_url(url: &str) -> Option<Self> {
        if url.starts_with("mqtt://") || url.starts_with("mqtts://") {
            Some(Self::Mqtt)
        } else if url.starts_with("modbus://") {
            Some(Self::Modbus)
        } else if url.starts_with("opc.tcp://") {
            Some(Self::OpcUa)
        } else {
            None
        }
    }

    /// The key a tag's binding names such a source with.
    pub fn binding_key(self) -> &'static str {
        match self {
            Self::Mqtt => "broker",
            Self::Modbus => "device",
            Self::OpcUa => "server",
        }
    }
}

impl SourceSpec {
    /// A source named `name` at `url` with every other field at its default.
    pub fn new(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            url: url.into(),
            client_id: String::new(),
            username: String::new(),
            password: String::new(),
            ca_file: String::new(),
            keep_alive: default_keep_alive(),
            root: String::new(),
            stale_after: 0,
            unit: default_unit(),
            poll_interval: default_poll_interval(),
            timeout: default_request_timeout(),
            max_gap: 0,
            security: default_security(),
            mode: String::new(),
            sampling_interval: default_sampling_interval(),
            publishing_interval: default_publishing_interval(),
            deadband: 0.0,
        }
    }

    /// Its kind (the reader accepts only URLs of a known kind; MQTT otherwise).
    pub fn kind(&self) -> SourceKind {
        SourceKind::of_url(&self.url).unwrap_or(SourceKind::Mqtt)
    }

    /// The client id, or its default.
    pub fn client_id(&self) -> String {
        if self.client_id.is_empty() {
            format!("tserver-{}", self.name)
        } else {
            self.client_id.clone()
        }
    }

    /// The topic a tag at `path` is on, unless it names its own.
    pub fn topic_of(&self, path: &str) -> String {
        let root = self.root.trim_matches('/');
        if root.is_empty() {
            path.to_owned()
        } else {
            format!("{root}/{path}")
        }
    }
}

/// `[plant]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlantInfo {
    /// The plant's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// What it is.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

/// `[[folders]]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FolderSpec {
    /// The UNS path, e.g. `Plant/Area1`.
    pub path: String,
    /// What is there.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

/// A tag's data type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TagType {
    /// A floating-point measurement.
    Number,
    /// A whole number (counters, states).
    Integer,
    /// A digital signal.
    Bool,
    /// Free text.
    String,
}

impl TagType {
    /// The names the file accepts.
    pub const NAMES: [&'static str; 4] = ["number", "integer", "bool", "string"];

    /// Reads a type name.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "number" => Some(Self::Number),
            "integer" => Some(Self::Integer),
            "bool" => Some(Self::Bool),
            "string" => Some(Self::String),
            _ => None,
        }
    }

    /// Whether values of this type are numbers (alarms, ranges, deadbands apply).
    pub fn is_numeric(self) -> bool {
        matches!(self, Self::Number | Self::Integer)
    }

    /// The name the file uses.
    pub fn name(self) -> &'static str {
        match self {
            Self::Number => "number",
            Self::Integer => "integer",
            Self::Bool => "bool",
            Self::String => "string",
        }
    }
}

/// A tag value as the file writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum InitialValue {
    /// `true` / `false`.
    Bool(bool),
    /// A whole number.
    Integer(i64),
    /// A number.
    Number(f64),
    /// Text.
    String(String),
}

impl InitialValue {
    /// Whether a tag of `kind` can hold this value (an integer is also a number).
    pub fn fits(&self, kind: TagType) -> bool {
        matches!(
            (self, kind),
            (Self::Bool(_), TagType::Bool)
                | (Self::Integer(_), TagType::Integer | TagType::Number)
                | (Self::Number(_), TagType::Number)
                | (Self::String(_), TagType::String)
        )
    }

    /// The value as a number, if it is one.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            // Initial values of plant integers are far below 2^53, where f64 is exact.
            #[expect(clippy::cast_precision_loss, reason = "plant integers are far below 2^53")]
            Self::Integer(value) => Some(*value as f64),
            Self::Number(value) => Some(*value),
            Self::Bool(_) | Self::String(_) => None,
        }
    }

    /// The value as text, as the runtime stores initial values.
    pub fn to_text(&self) -> String {
        match self {
            Self::Bool(value) => value.to_string(),
            Self::Integer(value) => value.to_string(),
            Self::Number(value) => value.to_string(),
            Self::String(value) => value.clone(),
        }
    }
}

fn is_false(value: &bool) -> bool {
    !*value
}

fn is_zero(value: &f64) -> bool {
    *value == 0.0
}

/// Every tag of a stored model: the plant's and its types' members.
fn stored_tags(stored: &mut serde_json::Value) -> impl Iterator<Item = &mut serde_json::Value> {
    let (tags, types) = match stored {
        serde_json::Value::Object(model) => {
            let mut tags = None;
            let mut types = None;
            for (key, value) in model.iter_mut() {
                match key.as_str() {
                    "tags" => tags = Some(value),
                    "types" => types = Some(value),
                    _ => {}
                }
            }
            (tags, types)
        }
        _ => (None, None),
    };
    let members = types
        .and_then(serde_json::Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(|kind| kind.get_mut("tags").and_then(serde_json::Value::as_array_mut))
        .flatten();
    tags.and_then(serde_json::Value::as_array_mut)
        .into_iter()
        .flatten()
        .chain(members)
}

/// A stored tag's `history_deadband` (as older builds stored it) moved into its `history`.
fn upgrade_history_deadband(tag: &mut serde_json::Value) {
    let Some(fields) = tag.as_object_mut() else {
        return;
    };
    let Some(deadband) = fields.remove("history_deadband") else {
        return;
    };
    if fields.get("history") == Some(&serde_json::Value::Bool(false)) {
        return;
    }
    fields.insert("history".to_owned(), serde_json::json!({ "deadband": deadband }));
}

/// `[[tags]]`, and the member tags of a type (whose name is relative and path derived).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TagSpec {
    /// The dotted name, e.g. `Tank1.Level` (a member's: `Level`).
    pub name: String,
    /// The UNS path, e.g. `Plant/Area1/Tank1/Level` (empty for a member).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    /// The data type.
    #[serde(rename = "type")]
    pub kind: TagType,
    /// Engineering unit.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub unit: String,
    /// What it measures.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// The value it starts with (without one it starts with Bad quality).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial: Option<InitialValue>,
    /// The lower end of the engineering range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    /// The upper end of the engineering range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// Whether and how its values are recorded.
    #[serde(default, skip_serializing_if = "History::is_default")]
    pub history: History,
    /// Whether operators may write it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub writable: bool,
    /// Whether the assistant, MCP clients and scripts may propose a write of it for an
    /// operator to approve (it must be writable: an approved proposal is an operator's write).
    #[serde(default, skip_serializing_if = "is_false")]
    pub proposable: bool,
    /// Whether a write of it is signed: the writer re-enters their password and states what
    /// the signature means (21 CFR Part 11-style), bound to the write's audit row.
    #[serde(default, skip_serializing_if = "is_false")]
    pub signed: bool,
    /// Whether a write of it is also signed by a witness: a second, different operator.
    #[serde(default, skip_serializing_if = "is_false")]
    pub witness: bool,
    /// Text tags: the only values it may take from a write or a proposal (a mode: Auto,
    /// Manual, Off), in the order offered; empty for any text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// Where its values come from (the MQTT sources), when not from the runtime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Box<SourceBinding>>,
    /// How the simulator moves it (numeric tags).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulate: Option<Motion>,
    /// How the overview displays show it, when not as they would by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display: Option<DisplayMark>,
}

/// `display = { key, order, hide, normal_range, normal_state, states }`: how the overview
/// displays generated from the plant show a tag. Without one a tag is shown as the defaults
/// say (docs/PANEL.md): every tag ranks after the marked ones, in path order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DisplayMark {
    /// A key value: shown on its area's tile of the plant overview, and first on its
    /// equipment's display.
    #[serde(default, skip_serializing_if = "is_false")]
    pub key: bool,
    /// Its place among its equipment's tags (1 first); unordered tags follow in path order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<u32>,
    /// Left off the overview displays (still in the plant tree and its folder's table).
    #[serde(default, skip_serializing_if = "is_false")]
    pub hide: bool,
    /// Number and integer tags: the normal operating range, shaded on its indicator (without
    /// one, the span between its innermost low and high alarm limits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub normal_range: Option<[f64; 2]>,
    /// Bool tags and text tags with `values`: the normal state; any other is shown off-normal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub normal_state: Option<InitialValue>,
    /// Bool tags: the words for false and true (without them: "Stopped" and "Running" for a
    /// tag named `Running`, else "Off" and "On").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub states: Option<[String; 2]>,
}

impl DisplayMark {
    /// The most characters of a state's word.
    pub const MAX_WORD_CHARS: usize = 32;
}

/// Which electronic signatures a write of a tag takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Signing {
    /// None: the login is enough.
    #[default]
    Unsigned,
    /// The writer's own.
    Writer,
    /// The writer's and a witness's: a second, different operator.
    WriterAndWitness,
}

impl TagSpec {
    /// The signatures a write of this tag takes.
    pub fn signing(&self) -> Signing {
        match (self.signed, self.witness) {
            (_, true) => Signing::WriterAndWitness,
            (true, false) => Signing::Writer,
            (false, false) => Signing::Unsigned,
        }
    }
}

/// `source = { broker = "...", topic = "..." }` for a plain UNS topic,
/// `source = { broker = "...", sparkplug = "Group/Node[/Device]", metric = "..." }` for a
/// Sparkplug B metric, or `source = { device = "...", holding_register = 100, format = "f32" }`
/// for a Modbus coil, discrete input, input register or holding register, or
/// `source = { server = "...", node = "ns=2;s=Line1.Temp" }` for an OPC UA variable.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceBinding {
    /// The name of the MQTT source (a broker) the value comes from.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub broker: String,
    /// The name of the Modbus source (a device) the value comes from.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub device: String,
    /// The name of the OPC UA source (a server) the value comes from.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub server: String,
    /// The topic, when not the tag's UNS path under the source's root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// Where writes go, when not `<topic>/set` (UNS tags).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_topic: Option<String>,
    /// The Sparkplug B edge node (`Group/Node`) or device (`Group/Node/Device`) publishing it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sparkplug: Option<String>,
    /// The Sparkplug B metric name, as its birth certificate declares it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    /// Modbus: the coil's address (0-based, as on the wire).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coil: Option<u16>,
    /// Modbus: the discrete input's address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discrete_input: Option<u16>,
    /// Modbus: the input register's (first) address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_register: Option<u16>,
    /// Modbus: the holding register's (first) address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holding_register: Option<u16>,
    /// Modbus: how the value sits in its registers (`u16`, `i16`, `u32`, `i32`, `f32`, `f64`;
    /// `bool` for coils and discrete inputs, their default; `u16` is the registers' default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// Modbus: `high_word_first` (the default) or `low_word_first`, for values of two or four
    /// registers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub word_order: Option<String>,
    /// Modbus: the value = raw x scale + offset (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<f64>,
    /// Modbus: see `scale` (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<f64>,
    /// OPC UA: the variable's node id (`ns=2;s=Line1.Temp`, `ns=2;i=1001`, `ns=2;g=<guid>`,
    /// `ns=2;b=<base64>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// OPC UA: milliseconds between two samples, when not the source's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling_interval: Option<u64>,
    /// OPC UA: the absolute deadband, when not the source's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadband: Option<f64>,
}

impl SourceBinding {
    /// The name of the source it binds to, whatever its kind.
    pub fn source_name(&self) -> &str {
        if !self.device.is_empty() {
            &self.device
        } else if !self.server.is_empty() {
            &self.server
        } else {
            &self.broker
        }
    }

    /// The kind of source it names: by the key it names it with.
    pub fn kind(&self) -> SourceKind {
        if !self.device.is_empty() {
            SourceKind::Modbus
        } else if !self.server.is_empty() {
            SourceKind::OpcUa
        } else {
            SourceKind::Mqtt
        }
    }

    /// Its OPC UA node id, when it binds an OPC UA server; `Err` says what is wrong with it.
    pub fn opcua_node(&self) -> Option<Result<opcua_types::NodeId, BindingProblem>> {
        let text = self.node.as_deref()?;
        Some(text.parse::<opcua_types::NodeId>().map_err(|_| BindingProblem {
            key: "node",
            message: format!(
                "{text:?} is not a node id: ns=<index>;i=<number>, ns=<index>;s=<text>, \
                         ns=<index>;g=<guid> or ns=<index>;b=<base64>"
            ),
        }))
    }

    /// Its Modbus table and address, when it binds a Modbus device.
    pub fn modbus_register(&self) -> Option<(modbus::Table, u16)> {
        [
            (modbus::Table::Coils, self.coil),
            (modbus::Table::DiscreteInputs, self.discrete_input),
            (modbus::Table::InputRegisters, self.input_register),
            (modbus::Table::HoldingRegisters, self.holding_register),
        ]
        .into_iter()
        .find_map(|(table, address)| Some((table, address?)))
    }

    /// Its Modbus point, when it binds a Modbus device; `Err` says what is wrong with it.
    pub fn modbus_point(&self) -> Option<Result<modbus::Point, BindingProblem>> {
        let (table, address) = self.modbus_register()?;
        Some(self.point_at(table, address))
    }

    fn point_at(&self, table: modbus::Table, address: u16) -> Result<modbus::Point, BindingProblem> {
        let format = match &self.format {
            None if table.holds_bits() => modbus::Format::Bool,
            None => modbus::Format::U16,
            Some(name) => modbus::Format::parse(name).ok_or_else(|| BindingProblem {
                key: "format",
                message: format!("{name:?} is none of {}", modbus::Format::NAMES.join(", ")),
            })?,
        };
        let word_order = match &self.word_order {
            None => modbus::WordOrder::default(),
            Some(name) => modbus::WordOrder::parse(name).ok_or_else(|| BindingProblem {
                key: "word_order",
                message: format!("{name:?} is none of {}", modbus::WordOrder::NAMES.join(", ")),
            })?,
        };
        let scaling = (self.scale.unwrap_or(1.0), self.offset.unwrap_or(0.0));
        modbus::Point::new(table, address, format, word_order, scaling).map_err(|error| {
            let key = match error {
                modbus::PointError::Scale(_) => "scale",
                modbus::PointError::Offset(_) => "offset",
                modbus::PointError::BitsAreBool(_) | modbus::PointError::RegistersAreNotBool(_) => "format",
                modbus::PointError::PastTheEnd(..) => table.name(),
            };
            BindingProblem {
                key,
                message: error.to_string(),
            }
        })
    }

    /// The Sparkplug B group, node and device, when the tag is a Sparkplug metric.
    pub fn sparkplug_target(&self) -> Option<(&str, &str, Option<&str>)> {
        let mut levels = self.sparkplug.as_deref()?.split('/');
        let group = levels.next()?;
        let node = levels.next()?;
        Some((group, node, levels.next()))
    }
}

/// What is wrong with a Modbus or OPC UA binding, and under which of its keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingProblem {
    /// The binding's key the problem is in.
    pub key: &'static str,
    /// What is wrong, in words.
    pub message: String,
}

/// How a tag's values are recorded (the plant file's `history`): `false` records nothing; a
/// table says how; absent (or `true`) takes the defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum History {
    /// Nothing is recorded.
    Off,
    /// Recorded as the options say.
    On(HistoryOptions),
}

impl Default for History {
    fn default() -> Self {
        Self::On(HistoryOptions::default())
    }
}

/// `history = { deadband, compression, max_interval, retention_hours }`, each optional.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistoryOptions {
    /// How far the stored line may depart from the values received (number and integer
    /// tags); none: 0.1% of a number tag's range (`max - min`), else 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadband: Option<f64>,
    /// Which samples are kept within the deadband.
    #[serde(default, skip_serializing_if = "Compression::is_default")]
    pub compression: Compression,
    /// Seconds a tag receiving values goes at most without one stored; none: 600.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_interval: Option<u64>,
    /// Hours its samples are kept; none: the solution's `HistoryRetentionHours`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_hours: Option<u64>,
}

/// Which of a numeric tag's samples the historian keeps within its deadband.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Compression {
    /// Those a line needs to pass within the deadband of every sample (PI's swinging door).
    #[default]
    SwingingDoor,
    /// Each that moved more than the deadband from the last kept (exception reporting).
    Deadband,
    /// Every change.
    None,
}

impl Compression {
    /// The names a plant file spells them with.
    pub const NAMES: [&str; 3] = ["swinging_door", "deadband", "none"];

    fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// The compression a plant file names.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "swinging_door" => Some(Self::SwingingDoor),
            "deadband" => Some(Self::Deadband),
            "none" => Some(Self::None),
            _ => None,
        }
    }

    /// Its plant-file name.
    pub fn name(self) -> &'static str {
        match self {
            Self::SwingingDoor => "swinging_door",
            Self::Deadband => "deadband",
            Self::None => "none",
        }
    }
}

/// How a tag is recorded, with its defaults filled in: what the historian applies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HistoryRule {
    /// The deviation.
    pub deadband: f64,
    /// Which samples are kept within it.
    pub compression: Compression,
    /// Seconds a tag receiving values goes at most without one stored.
    pub max_interval: u64,
    /// Hours its samples are kept, when not the solution's `HistoryRetentionHours`.
    pub retention_hours: Option<u64>,
}

/// The most hours a tag's own retention may say: a century.
pub const MAX_RETENTION_HOURS: u64 = 876_000;

/// The longest a tag receiving values goes without one stored, by default (seconds).
pub const DEFAULT_MAX_INTERVAL: u64 = 600;

/// A number tag's default deadband, as a share of its range (PI's exception default).
pub const DEFAULT_DEADBAND_OF_RANGE: f64 = 0.001;

impl History {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// How a tag of `kind` with the range `min`..`max` is recorded, none when it is not.
    pub fn recording(&self, kind: TagType, min: Option<f64>, max: Option<f64>) -> Option<HistoryRule> {
        let Self::On(options) = self else {
            return None;
        };
        let default = match (kind, min, max) {
            (TagType::Number, Some(low), Some(high)) if high > low => {
                (high - low) * DEFAULT_DEADBAND_OF_RANGE
            }
            _ => 0.0,
        };
        Some(HistoryRule {
            deadband: options.deadband.unwrap_or(default),
            compression: options.compression,
            max_interval: options.max_interval.unwrap_or(DEFAULT_MAX_INTERVAL),
            retention_hours: options.retention_hours,
        })
    }
}

impl Serialize for History {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Off => serializer.serialize_bool(false),
            Self::On(options) => options.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for History {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Stored {
            Flag(bool),
            Options(HistoryOptions),
        }
        Ok(match Stored::deserialize(deserializer)? {
            Stored::Flag(false) => Self::Off,
            Stored::Flag(true) => Self::default(),
            Stored::Options(options) => Self::On(options),
        })
    }
}

/// `simulate = { amplitude, period, phase, noise }`: the initial value plus a sine plus noise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Motion {
    /// Half the swing.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub amplitude: f64,
    /// Seconds per cycle.
    pub period: f64,
    /// Radians of shift.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub phase: f64,
    /// Bounded random noise.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub noise: f64,
}

/// An alarm condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Condition {
    /// Value at or above the limit (the more urgent high).
    HiHi,
    /// Value at or above the limit.
    Hi,
    /// Value at or below the limit.
    Lo,
    /// Value at or below the limit (the more urgent low).
    LoLo,
    /// Value at least the limit away from the setpoint.
    Deviation,
    /// A bool tag at its abnormal state.
    Digital,
}

impl Condition {
    /// The names the file accepts.
    pub const NAMES: [&'static str; 6] = ["HiHi", "Hi", "Lo", "LoLo", "Deviation", "Digital"];

    /// Reads a condition name.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "HiHi" => Some(Self::HiHi),
            "Hi" => Some(Self::Hi),
            "Lo" => Some(Self::Lo),
            "LoLo" => Some(Self::LoLo),
            "Deviation" => Some(Self::Deviation),
            "Digital" => Some(Self::Digital),
            _ => None,
        }
    }

    /// The name the file uses.
    pub fn name(self) -> &'static str {
        match self {
            Self::HiHi => "HiHi",
            Self::Hi => "Hi",
            Self::Lo => "Lo",
            Self::LoLo => "LoLo",
            Self::Deviation => "Deviation",
            Self::Digital => "Digital",
        }
    }
}

fn default_priority() -> u32 {
    500
}

fn is_default_priority(priority: &u32) -> bool {
    *priority == default_priority()
}

/// `[[alarms]]`, and the member alarms of a type (whose name and tag are relative).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlarmSpec {
    /// The alarm's name, e.g. `Tank1.Level.HiHi`.
    pub name: String,
    /// The tag it watches.
    pub tag: String,
    /// When it is active.
    pub condition: Condition,
    /// The limit (every condition but `Digital`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<f64>,
    /// The setpoint a `Deviation` is measured from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setpoint: Option<f64>,
    /// The abnormal state of a `Digital` alarm's tag (default `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_when: Option<bool>,
    /// How far back inside the limit the value must come to clear.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub deadband: f64,
    /// 1 to 1000, higher is more urgent.
    #[serde(default = "default_priority", skip_serializing_if = "is_default_priority")]
    pub priority: u32,
    /// What the operator reads.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// What usually trips it (ISA-18.2 rationalization).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cause: String,
    /// What happens if nobody acts.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub consequence: String,
    /// What the operator should do.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub response: String,
    /// Seconds the operator has to act before the consequence follows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_to_respond: Option<u32>,
    /// Whether acting on it (acknowledging it, approving a proposal to) takes the operator's
    /// electronic signature.
    #[serde(default, skip_serializing_if = "is_false")]
    pub signed: bool,
    /// Seconds its condition must hold before it activates (0: at once).
    #[serde(default, skip_serializing_if = "is_no_delay")]
    pub on_delay: u32,
    /// Seconds its condition must stay clear before it clears (0: at once).
    #[serde(default, skip_serializing_if = "is_no_delay")]
    pub off_delay: u32,
    /// While it holds, the alarm is suppressed by design: evaluated and recorded, not
    /// annunciated (`Pump1.Running == false`). A type's alarm names its type's tags as members.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suppress_when: Option<TagExpression>,
}

fn is_no_delay(seconds: &u32) -> bool {
    *seconds == 0
}

/// The longest `on_delay` or `off_delay` an alarm may have: an hour, in seconds.
pub const MAX_ALARM_DELAY_S: u32 = 3600;

/// The longest `cause`, `consequence` or `response` an alarm may have, in characters.
pub const MAX_ALARM_TEXT_CHARS: usize = 2000;
/// The most values a text tag's set may list.
pub const MAX_TAG_VALUES: usize = 64;
/// The longest value in a text tag's set, in characters.
pub const MAX_TAG_VALUE_CHARS: usize = 128;
/// The longest `time_to_respond` an alarm may have: seven days, in seconds.
pub const MAX_TIME_TO_RESPOND_S: u32 = 7 * 24 * 3600;

/// `[[types]]`: what every instance of a kind of equipment has.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EquipmentType {
    /// The type's name, e.g. `Pump`.
    pub name: String,
    /// What it is.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Member tags (relative names, no paths). `{label}` in a description becomes the
    /// instance's label.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<TagSpec>,
    /// Member alarms (relative names, on member tags); `{label}` in a message, cause,
    /// consequence or response likewise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alarms: Vec<AlarmSpec>,
}

/// `[[equipment]]`: one instance of a type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Equipment {
    /// The instance's name, the first part of its tags' names (`Pump1` -> `Pump1.MotorCurrent`).
    pub name: String,
    /// Its type.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its UNS folder; its tags are below it.
    pub path: String,
    /// How people call it (default: its name); replaces `{label}`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label: String,
    /// Initial values of member tags, by member name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub initial: BTreeMap<String, InitialValue>,
    /// Limits of member alarms, by member alarm name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, f64>,
}

impl Equipment {
    /// Its label, or its name without one.
    pub fn label(&self) -> &str {
        if self.label.is_empty() {
            &self.name
        } else {
            &self.label
        }
    }
}

/// The runtime's view of a model: every tag and alarm with full names and paths.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExpandedPlant {
    /// Folders with descriptions.
    pub folders: Vec<FolderSpec>,
    /// Every tag, equipment members included, in file order.
    pub tags: Vec<TagSpec>,
    /// Every alarm, equipment members included, in file order.
    pub alarms: Vec<AlarmSpec>,
    /// The MQTT sources.
    pub sources: Vec<SourceSpec>,
}

impl PlantModel {
    /// Every tag and alarm with full names and paths: each instance's members named
    /// `<instance>.<member>` at `<instance path>/<member>`, then the plain tags and alarms.
    /// Call on a model [`crate::read`] accepted (an instance of an unknown type adds nothing).
    pub fn expand(&self) -> ExpandedPlant {
        let mut expanded = ExpandedPlant {
            folders: self.folders.clone(),
            ..ExpandedPlant::default()
        };
        for instance in &self.equipment {
            let Some(kind) = self.types.iter().find(|kind| kind.name == instance.kind) else {
                continue;
            };
            let label = instance.label();
            for member in &kind.tags {
                let mut tag = member.clone();
                tag.name = format!("{}.{}", instance.name, member.name);
                tag.path = format!("{}/{}", instance.path, member.name);
                tag.description = member.description.replace("{label}", label);
                if let Some(initial) = instance.initial.get(&member.name) {
                    tag.initial = Some(initial.clone());
                }
                expanded.tags.push(tag);
            }
            for member in &kind.alarms {
                let mut alarm = member.clone();
                alarm.name = format!("{}.{}", instance.name, member.name);
                alarm.tag = format!("{}.{}", instance.name, member.tag);
                for (text, member_text) in [
                    (&mut alarm.message, &member.message),
                    (&mut alarm.cause, &member.cause),
                    (&mut alarm.consequence, &member.consequence),
                    (&mut alarm.response, &member.response),
                ] {
                    *text = member_text.replace("{label}", label);
                }
                alarm.suppress_when = member.suppress_when.as_ref().map(|expression| {
                    expression.renamed(&|tag| {
                        if kind.tags.iter().any(|member| member.name == tag) {
                            format!("{}.{tag}", instance.name)
                        } else {
                            tag.to_owned()
                        }
                    })
                });
                if let Some(limit) = instance.limits.get(&member.name) {
                    alarm.limit = Some(*limit);
                }
                expanded.alarms.push(alarm);
            }
        }
        expanded.tags.extend(self.tags.iter().cloned());
        expanded.alarms.extend(self.alarms.iter().cloned());
        expanded.sources = self.sources.clone();
        expanded
    }

    /// The model as TOML, in the documented layout (what `plant export` writes).
    pub fn to_toml(&self) -> Result<String, toml::ser::Error> {
        toml::to_string(self)
    }

    /// The model as compact JSON (what the solution stores).
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }

    /// A model the solution stored with [`to_json`](Self::to_json), or an older build did
    /// (whose tags spelled a deadband `history_deadband`).
    pub fn from_json(json: &str) -> Result<Self, serde_json::Error> {
        let mut stored: serde_json::Value = serde_json::from_str(json)?;
        for tag in stored_tags(&mut stored) {
            upgrade_history_deadband(tag);
        }
        serde_json::from_value(stored)
    }

    /// The sources of a model the solution stored with [`to_json`](Self::to_json), the rest
    /// skipped: what starting the sources needs of a plant of any size.
    pub fn sources_from_json(json: &str) -> Result<Vec<SourceSpec>, serde_json::Error> {
        Ok(serde_json::from_str::<StoredParts>(json)?.sources)
    }

    /// The notifications of a model the solution stored with [`to_json`](Self::to_json), with
    /// the sources they may publish through, the rest skipped.
    pub fn notifications_from_json(
        json: &str,
    ) -> Result<(Vec<NotificationSpec>, Vec<SourceSpec>), serde_json::Error> {
        let parts = serde_json::from_str::<StoredParts>(json)?;
        Ok((parts.notifications, parts.sources))
    }

    /// The sources, equipment, notifications and prompts of a model the solution stored with
    /// [`to_json`](Self::to_json), the rest skipped.
    pub fn parts_from_json(json: &str) -> Result<StoredParts, serde_json::Error> {
        serde_json::from_str(json)
    }

    /// The site prompts of a model the solution stored with [`to_json`](Self::to_json), the
    /// rest skipped.
    pub fn prompts_from_json(json: &str) -> Result<Vec<PromptSpec>, serde_json::Error> {
        Ok(serde_json::from_str::<StoredParts>(json)?.prompts)
    }

    /// The equipment instances of a model the solution stored with [`to_json`](Self::to_json),
    /// the rest skipped: what the documents' searches need of a plant of any size.
    pub fn equipment_from_json(json: &str) -> Result<Vec<Equipment>, serde_json::Error> {
        Ok(serde_json::from_str::<StoredParts>(json)?.equipment)
    }
}
