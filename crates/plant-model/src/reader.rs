//! Reads a plant file's tree into a [`PlantModel`], checking everything and collecting every
//! problem with its place: the file's shape (unknown keys with a suggestion, wrong kinds of
//! values, missing fields), each value (types, ranges, limits, priorities), and how the parts
//! fit (duplicate names and paths, alarms on unknown or unsuitable tags, instances of unknown
//! types). Nothing is accepted unless everything is.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Range;

use crate::PlantError;
use crate::document::{Key, Node, Value};
use crate::model::{
    AlarmSpec, Compression, Condition, DocumentSpec, Equipment, EquipmentType, ExpandedPlant, FolderSpec,
    History, HistoryOptions, InitialValue, MAX_ALARM_TEXT_CHARS, MAX_RETENTION_HOURS, MAX_TAG_VALUE_CHARS,
    MAX_TAG_VALUES, MAX_TIME_TO_RESPOND_S, Motion, PlantInfo, PlantModel, SourceBinding, SourceKind,
    SourceSpec, TagSpec, TagType,
};
use crate::names::{self, nearest};

/// The keys of `[[sources]]` only an MQTT source takes.
const MQTT_SOURCE_KEYS: &[&str] = &[
    "client_id",
    "ca_file",
    "keep_alive",
    "root",
    // A polled device's value is as old as the last poll: Bad when a poll fails is the rule.
    "stale_after",
];

/// The keys of `[[sources]]` only a Modbus source takes.
const MODBUS_SOURCE_KEYS: &[&str] = &["unit", "poll_interval", "timeout", "max_gap"];

/// The keys of `[[sources]]` only an OPC UA source takes.
const OPCUA_SOURCE_KEYS: &[&str] = &[
    "security",
    "mode",
    "sampling_interval",
    "publishing_interval",
    "deadband",
];

/// The keys of `[[sources]]` an MQTT and an OPC UA source take (a Modbus device has no login).
const CREDENTIAL_KEYS: &[&str] = &["username", "password"];

/// Every key of `[[sources]]`.
const SOURCE_KEYS: &[&str] = &[
    "name",
    "url",
    "stale_after",
    "client_id",
    "username",
    "password",
    "ca_file",
    "keep_alive",
    "root",
    "unit",
    "poll_interval",
    "timeout",
    "max_gap",
    "security",
    "mode",
    "sampling_interval",
    "publishing_interval",
    "deadband",
];

/// OPC UA security policies a source may ask for.
const SECURITY_POLICIES: [&str; 2] = ["None", "Basic256Sha256"];

/// OPC UA message security modes a secured source may ask for.
const SECURITY_MODES: [&str; 2] = ["Sign", "SignAndEncrypt"];

/// The longest name or path accepted.
const MAX_NAME: usize = 256;

/// The most errors reported for one file (past that, the first ones are enough to go on).
pub(crate) const MAX_ERRORS: usize = 100;

/// Collects the problems of one file.
pub(crate) struct Reader<'t> {
    text: &'t str,
    pub(crate) errors: Vec<PlantError>,
    /// For each list read (`tags`, `types[0].alarms`, ...), the file index of each entry kept
    /// in the model: entries with a broken name, path or kind are left out, and the checks
    /// across parts still name the others where they are written.
    kept: HashMap<String, Vec<usize>>,
    /// For each list, the names of the entries left out (`None`: no readable name), so a
    /// reference to one of them is not reported as a reference to nothing.
    dropped: HashMap<String, Vec<Option<String>>>,
}

/// The entries of one table being read: which were used, so the rest can be reported.
struct Fields<'n> {
    entries: &'n [(Key, Node)],
    used: Vec<bool>,
    /// The table's own place and field path.
    span: Range<usize>,
    path: String,
}

impl<'n> Fields<'n> {
    fn get(&mut self, key: &str) -> Option<&'n Node> {
        let index = self.entries.iter().position(|(entry, _)| entry.name == key)?;
        self.used[index] = true;
        Some(&self.entries[index].1)
    }

    fn field(&self, key: &str) -> String {
        join(&self.path, key)
    }
}

/// `path.key`, or `key` at the top.
fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

impl<'t> Reader<'t> {
    pub(crate) fn new(text: &'t str) -> Self {
        Self {
            text,
            errors: Vec::new(),
            kept: HashMap::new(),
            dropped: HashMap::new(),
        }
    }

    fn error(&mut self, span: Range<usize>, field: impl Into<String>, message: impl Into<String>) {
        if self.errors.len() < MAX_ERRORS {
            self.errors
                .push(PlantError::at(self.text, span, field.into(), message.into()));
        }
    }

    /// The entries of a table, or an error naming what is there instead.
    fn table<'n>(&mut self, node: &'n Node, path: &str) -> Option<Fields<'n>> {
        match &node.value {
            Value::Table(entries) => {
                // JSON objects may repeat a key (TOML refuses that itself).
                for (index, (key, _)) in entries.iter().enumerate() {
                    if entries[..index]
                        .iter()
                        .any(|(earlier, _)| earlier.name == key.name)
                    {
                        self.error(key.span.clone(), join(path, &key.name), "appears twice");
                    }
                }
                Some(Fields {
                    entries,
                    used: vec![false; entries.len()],
                    span: node.span.clone(),
                    path: path.to_owned(),
                })
            }
            other => {
                self.error(
                    node.span.clone(),
                    path,
                    format!("expected a table, found {}", other.kind()),
                );
                None
            }
        }
    }

    /// Reports the keys of a table nothing read, with the nearest known key as a hint.
    fn done(&mut self, fields: Fields<'_>, known: &[&str]) {
        for (index, ((key, _), used)) in fields.entries.iter().zip(&fields.used).enumerate() {
            // A repeated key was reported as such.
            if *used
                || fields.entries[..index]
                    .iter()
                    .any(|(earlier, _)| earlier.name == key.name)
            {
                continue;
            }
            let hint = nearest(&key.name, known.iter().copied())
                .map(|near| format!(" (did you mean `{near}`?)"))
                .unwrap_or_default();
            self.error(
                key.span.clone(),
                fields.field(&key.name),
                format!("unknown key{hint}; known keys: {}", known.join(", ")),
            );
        }
    }

    fn missing(&mut self, fields: &Fields<'_>, key: &str) {
        self.error(fields.span.clone(), fields.field(key), "is required");
    }

    fn string(&mut self, fields: &mut Fields<'_>, key: &str) -> Option<String> {
        let node = fields.get(key)?;
        match &node.value {
            Value::String(text) => Some(text.clone()),
            other => {
                self.error(
                    node.span.clone(),
                    fields.field(key),
                    format!("expected a string, found {}", other.kind()),
                );
                None
            }
        }
    }

    fn required_string(&mut self, fields: &mut Fields<'_>, key: &str) -> Option<String> {
        if fields.entries.iter().all(|(entry, _)| entry.name != key) {
            self.missing(fields, key);
            return None;
        }
        self.string(fields, key)
    }

    fn number(&mut self, fields: &mut Fields<'_>, key: &str) -> Option<f64> {
        let node = fields.get(key)?;
        self.number_in(node, &fields.field(key))
    }

    fn number_in(&mut self, node: &Node, field: &str) -> Option<f64> {
        let value = match &node.value {
            #[expect(clippy::cast_precision_loss, reason = "a limit or range is far below 2^53")]
            Value::Integer(value) => *value as f64,
            Value::Float(value) => *value,
            other => {
                self.error(
                    node.span.clone(),
                    field,
                    format!("expected a number, found {}", other.kind()),
                );
                return None;
            }
        };
        if !value.is_finite() {
            self.error(node.span.clone(), field, "must be a finite number");
            return None;
        }
        Some(value)
    }

    fn boolean(&mut self, fields: &mut Fields<'_>, key: &str) -> Option<bool> {
        let node = fields.get(key)?;
        match &node.value {
            Value::Bool(value) => Some(*value),
            other => {
                self.error(
                    node.span.clone(),
                    fields.field(key),
                    format!("expected true or false, found {}", other.kind()),
                );
                None
            }
        }
    }

    /// An array of tables (`[[tags]]`), each read by `read`.
    fn list<T>(
        &mut self,
        fields: &mut Fields<'_>,
        key: &str,
        mut read: impl FnMut(&mut Self, &Node, &str) -> Option<T>,
    ) -> Vec<T> {
        let Some(node) = fields.get(key) else {
            return Vec::new();
        };
        let field = fields.field(key);
        match &node.value {
            Value::Array(items) => {
                let mut read_items = Vec::with_capacity(items.len());
                let mut kept = Vec::with_capacity(items.len());
                let mut dropped = Vec::new();
                for (index, item) in items.iter().enumerate() {
                    match read(self, item, &format!("{field}[{index}]")) {
                        Some(value) => {
                            read_items.push(value);
                            kept.push(index);
                        }
                        None => dropped.push(match lookup(item, "name").map(|name| &name.value) {
                            Some(Value::String(name)) => Some(name.clone()),
                            _ => None,
                        }),
                    }
                }
                self.kept.insert(field.clone(), kept);
                self.dropped.insert(field, dropped);
                read_items
            }
            other => {
                self.error(
                    node.span.clone(),
                    field,
                    format!("expected an array of tables, found {}", other.kind()),
                );
                Vec::new()
            }
        }
    }

    /// A name: not empty, no white space or control characters, at most [`MAX_NAME`] bytes.
    fn name(&mut self, fields: &mut Fields<'_>, key: &str) -> Option<String> {
        let span = fields
            .entries
            .iter()
            .find(|(entry, _)| entry.name == key)
            .map(|(_, node)| node.span.clone());
        let name = names::normalize(&self.required_string(fields, key)?);
        let span = span.unwrap_or_else(|| fields.span.clone());
        if name.is_empty() || name.len() > MAX_NAME {
            self.error(
                span,
                fields.field(key),
                format!(
                    "{name:?} is not a usable name: 1 to {MAX_NAME} bytes, no spaces or control characters"
                ),
            );
            return None;
        }
        if let Some(problem) = names::problem(&name, false) {
            self.error(
                span,
                fields.field(key),
                format!("{name:?} is not a usable name: {problem}"),
            );
            return None;
        }
        // `A.B.` beside `A.B`, or `..`, would be names people read as the same or as none.
        if name.split('.').any(str::is_empty) {
            self.error(
                span,
                fields.field(key),
                format!(
                    "{name:?} is not a usable name: no part between dots may be empty (no leading, \
                     trailing or doubled '.')"
                ),
            );
            return None;
        }
        Some(name)
    }

    /// A UNS path: segments joined by `/`, none empty, no leading or trailing `/`.
    fn path(&mut self, fields: &mut Fields<'_>, key: &str) -> Option<String> {
        let span = fields
            .entries
            .iter()
            .find(|(entry, _)| entry.name == key)
            .map(|(_, node)| node.span.clone());
        let path = names::normalize(&self.required_string(fields, key)?);
        let span = span.unwrap_or_else(|| fields.span.clone());
        if let Some(problem) = names::problem(&path, true) {
            self.error(
                span,
                fields.field(key),
                format!("{path:?} is not a usable UNS path: {problem}"),
            );
            return None;
        }
        if path.is_empty()
            || path.len() > MAX_NAME
            || path
                .split('/')
                .any(|segment| segment.trim().is_empty() || segment != segment.trim())
            || path.chars().any(char::is_control)
        {
            self.error(
                span,
                fields.field(key),
                format!("{path:?} is not a UNS path: segments joined by '/', none empty or padded, e.g. \"Plant/Area1/Pump1\""),
            );
            return None;
        }
        Some(path)
    }

    pub(crate) fn model(&mut self, root: &Node) -> Option<PlantModel> {
        let mut fields = self.table(root, "")?;
        let plant = match fields.get("plant") {
            Some(node) => self.plant_info(node),
            None => None,
        };
        let folders = self.list(&mut fields, "folders", Self::folder);
        let types = self.list(&mut fields, "types", Self::equipment_type);
        let equipment = self.list(&mut fields, "equipment", Self::equipment);
        let tags = self.list(&mut fields, "tags", |reader, node, path| {
            reader.tag(node, path, false)
        });
        let alarms = self.list(&mut fields, "alarms", Self::alarm);
        let sources = self.list(&mut fields, "sources", Self::source_spec);
        let documents = self.list(&mut fields, "documents", Self::document_spec);
        self.done(
            fields,
            &[
                "plant",
                "folders",
                "types",
                "equipment",
                "tags",
                "alarms",
                "sources",
                "documents",
            ],
        );
        Some(PlantModel {
            plant,
            folders,
            types,
            equipment,
            tags,
            alarms,
            sources,
            documents,
        })
    }

    fn plant_info(&mut self, node: &Node) -> Option<PlantInfo> {
        let mut fields = self.table(node, "plant")?;
        let name = self.string(&mut fields, "name").unwrap_or_default();
        let description = self.string(&mut fields, "description").unwrap_or_default();
        self.done(fields, &["name", "description"]);
        Some(PlantInfo { name, description })
    }

    fn folder(&mut self, node: &Node, path: &str) -> Option<FolderSpec> {
        let mut fields = self.table(node, path)?;
        let folder = self.path(&mut fields, "path");
        let description = self.string(&mut fields, "description").unwrap_or_default();
        self.done(fields, &["path", "description"]);
        Some(FolderSpec {
            path: folder?,
            description,
        })
    }

    /// A tag; a `member` of a type has a relative name and no path.
    fn tag(&mut self, node: &Node, path: &str, member: bool) -> Option<TagSpec> {
        let mut fields = self.table(node, path)?;
        let name = self.name(&mut fields, "name");
        let tag_path = if member {
            if let Some(node) = fields.get("path") {
                self.error(
                    node.span.clone(),
                    fields.field("path"),
                    "a type's tag takes its path from each instance: remove it",
                );
            }
            Some(String::new())
        } else {
            self.path(&mut fields, "path")
        };
        let kind = self.tag_type(&mut fields);
        let unit = self.string(&mut fields, "unit").unwrap_or_default();
        let description = self.string(&mut fields, "description").unwrap_or_default();
        let initial = fields
            .get("initial")
            .and_then(|node| self.initial_value(node, &fields.field("initial"), kind));
        let min = self.number(&mut fields, "min");
        let max = self.number(&mut fields, "max");
        let history = self.history(&mut fields, path);
        let writable = self.boolean(&mut fields, "writable").unwrap_or(false);
        let proposable = self.boolean(&mut fields, "proposable").unwrap_or(false);
        let values = self.tag_values(&mut fields);
        let source = fields
            .get("source")
            .and_then(|node| self.source(node, &fields.field("source")));
        let simulate = fields
            .get("simulate")
            .and_then(|node| self.motion(node, &fields.field("simulate")));
        // Each problem at the value it is about (the table's own span is its header, or nothing).
        let at = |key: &str| span_of(&fields, key).unwrap_or_else(|| fields.span.clone());
        let field = |key: &str| join(path, key);
        if let Some(kind) = kind {
            if !kind.is_numeric() {
                for (key, set) in [
                    ("min", min.is_some()),
                    ("max", max.is_some()),
                    (
                        if span_of(&fields, "history_deadband").is_some() {
                            "history_deadband"
                        } else {
                            "history"
                        },
                        matches!(history, History::On(options)
                            if options.deadband.is_some() || options.compression != Compression::default()),
                    ),
                    ("simulate", simulate.is_some()),
                ] {
                    if set {
                        self.error(
                            at(key),
                            field(key),
                            format!(
                                "only number and integer tags have one; this is a {} tag",
                                kind.name()
                            ),
                        );
                    }
                }
            }
            if let (Some(low), Some(high)) = (min, max)
                && low > high
            {
                self.error(at("max"), field("max"), format!("{high} is below min {low}"));
            }
            if let Some(value) = initial.as_ref().and_then(InitialValue::as_f64)
                && (min.is_some_and(|low| value < low) || max.is_some_and(|high| value > high))
            {
                self.error(
                    at("initial"),
                    field("initial"),
                    format!("{value} is outside the range {}..{}", show(min), show(max)),
                );
            }
        }
        if !values.is_empty() {
            match kind {
                Some(TagType::String) | None => {}
                Some(kind) => self.error(
                    at("values"),
                    field("values"),
                    format!(
                        "only text tags have a set of values; this is a {} tag",
                        kind.name()
                    ),
                ),
            }
            if let Some(InitialValue::String(text)) = &initial
                && let Some(problem) = names::outside_values(&values, text)
            {
                self.error(at("initial"), field("initial"), problem);
            }
        }
        if proposable && !writable {
            self.error(
                at("proposable"),
                field("proposable"),
                "an approved proposal is an operator's write: set writable = true too",
            );
        }
        self.done(
            fields,
            &[
                "name",
                "path",
                "type",
                "unit",
                "description",
                "initial",
                "min",
                "max",
                "history",
                "history_deadband",
                "writable",
                "proposable",
                "values",
                "source",
                "simulate",
            ],
        );
        Some(TagSpec {
            name: name?,
            path: tag_path?,
            kind: kind?,
            unit,
            description,
            initial,
            min,
            max,
            history,
            writable,
            proposable,
            values,
            source: source.map(Box::new),
            simulate,
        })
    }

    fn tag_type(&mut self, fields: &mut Fields<'_>) -> Option<TagType> {
        let span = fields
            .entries
            .iter()
            .find(|(entry, _)| entry.name == "type")
            .map(|(_, node)| node.span.clone());
        let name = self.required_string(fields, "type")?;
        let kind = TagType::parse(&name);
        if kind.is_none() {
            let hint = did_you_mean(&name, TagType::NAMES);
            self.error(
                span.unwrap_or_else(|| fields.span.clone()),
                fields.field("type"),
                format!(
                    "unknown type {name:?}{hint}; one of: {}",
                    TagType::NAMES.join(", ")
                ),
            );
        }
        kind
    }

    /// A value for a tag of `kind` (when the kind is known, it must fit).
    fn initial_value(&mut self, node: &Node, field: &str, kind: Option<TagType>) -> Option<InitialValue> {
        let value = match &node.value {
            Value::Bool(value) => InitialValue::Bool(*value),
            Value::Integer(value) => InitialValue::Integer(*value),
            Value::Float(value) if value.is_finite() => InitialValue::Number(*value),
            Value::String(text) => InitialValue::String(text.clone()),
            other => {
                self.error(
                    node.span.clone(),
                    field,
                    format!("expected a value, found {}", other.kind()),
                );
                return None;
            }
        };
        if let Some(kind) = kind
            && !value.fits(kind)
        {
            self.error(
                node.span.clone(),
                field,
                format!("a {} tag cannot start at {}", kind.name(), node.value.kind()),
            );
            return None;
        }
        Some(value)
    }

    fn source(&mut self, node: &Node, path: &str) -> Option<SourceBinding> {
        let mut fields = self.table(node, path)?;
        // In the order written, so the second one written is the one reported.
        let mut named: Vec<(usize, &str)> = ["broker", "device", "server"]
            .into_iter()
            .filter_map(|key| Some((span_of(&fields, key)?.start, key)))
            .collect();
        named.sort_unstable();
        if let Some(&(_, second)) = named.get(1) {
            self.error(
                span_of(&fields, second).unwrap_or_else(|| fields.span.clone()),
                fields.field(second),
                "a tag has one source: broker (an MQTT source), device (a Modbus source) or server \
                 (an OPC UA source)",
            );
        }
        if span_of(&fields, "device").is_some() {
            return self.modbus_binding(fields);
        }
        if span_of(&fields, "server").is_some() {
            return self.opcua_binding(fields);
        }
        let broker = self.name(&mut fields, "broker");
        let topic = self.mqtt_name(&mut fields, "topic");
        let command_topic = self.mqtt_name(&mut fields, "command_topic");
        let sparkplug = self.mqtt_name(&mut fields, "sparkplug");
        let metric = self.string(&mut fields, "metric");
        if let Some(ids) = &sparkplug {
            let levels = ids.split('/').count();
            if !(2..=3).contains(&levels) || ids.split('/').any(str::is_empty) {
                self.error(
                    span_of(&fields, "sparkplug").unwrap_or_else(|| fields.span.clone()),
                    fields.field("sparkplug"),
                    format!("{ids:?} is not an edge node or device: Group/Node or Group/Node/Device"),
                );
            }
            if metric.is_none() {
                self.missing(&fields, "metric");
            }
            for key in ["topic", "command_topic"] {
                if let Some(span) = span_of(&fields, key) {
                    self.error(
                        span,
                        fields.field(key),
                        "a Sparkplug metric has no topic of its own (values come in DATA messages, writes go out as NCMD/DCMD)",
                    );
                }
            }
        } else if let Some(span) = span_of(&fields, "metric") {
            self.error(
                span,
                fields.field("metric"),
                "metric names a Sparkplug B metric: give sparkplug = \"Group/Node[/Device]\" too",
            );
        }
        self.done(
            fields,
            &["broker", "topic", "command_topic", "sparkplug", "metric"],
        );
        Some(SourceBinding {
            broker: broker?,
            topic,
            command_topic,
            sparkplug,
            metric,
            ..SourceBinding::default()
        })
    }

    /// `source = { device = ..., <table> = ADDRESS, format, word_order, scale, offset }`.
    fn modbus_binding(&mut self, mut fields: Fields<'_>) -> Option<SourceBinding> {
        const TABLES: [&str; 4] = ["coil", "discrete_input", "input_register", "holding_register"];
        let device = self.name(&mut fields, "device");
        let mut addresses = [None; 4];
        for (slot, key) in addresses.iter_mut().zip(TABLES) {
            *slot = self
                .whole(&mut fields, key, 0..=65_535, "an address")
                .flatten()
                .and_then(|address| u16::try_from(address).ok());
        }
        // In the order written, so the second one written is the one reported.
        let mut given: Vec<(usize, &str)> = TABLES
            .iter()
            .filter_map(|key| Some((span_of(&fields, key)?.start, *key)))
            .collect();
        given.sort_unstable();
        let given: Vec<&str> = given.into_iter().map(|(_, key)| key).collect();
        match given.as_slice() {
            [] => self.error(
                fields.span.clone(),
                fields.path.clone(),
                format!(
                    "a Modbus binding gives its address as one of {}",
                    TABLES.join(", ")
                ),
            ),
            [_] => {}
            [first, second, ..] => self.error(
                span_of(&fields, second).unwrap_or_else(|| fields.span.clone()),
                fields.field(second),
                format!("a tag is at one address: {first} is given already"),
            ),
        }
        let format = self.string(&mut fields, "format");
        let word_order = self.string(&mut fields, "word_order");
        let scale = self.number(&mut fields, "scale");
        let offset = self.number(&mut fields, "offset");
        let binding = SourceBinding {
            device: device?,
            coil: addresses[0],
            discrete_input: addresses[1],
            input_register: addresses[2],
            holding_register: addresses[3],
            format,
            word_order,
            scale,
            offset,
            ..SourceBinding::default()
        };
        if let Some(Err(problem)) = binding.modbus_point() {
            self.error(
                span_of(&fields, problem.key).unwrap_or_else(|| fields.span.clone()),
                fields.field(problem.key),
                problem.message,
            );
        }
        self.done(
            fields,
            &[
                "device",
                "coil",
                "discrete_input",
                "input_register",
                "holding_register",
                "format",
                "word_order",
                "scale",
                "offset",
            ],
        );
        Some(binding)
    }

    /// `source = { server = ..., node = NODE_ID, sampling_interval, deadband }`.
    fn opcua_binding(&mut self, mut fields: Fields<'_>) -> Option<SourceBinding> {
        let server = self.name(&mut fields, "server");
        let node = self.required_string(&mut fields, "node");
        let sampling_interval = self
            .whole(&mut fields, "sampling_interval", 0..=3_600_000, "milliseconds")
            .map(|interval| interval.and_then(|interval| u64::try_from(interval).ok()));
        let deadband = self.deadband(&mut fields);
        let binding = SourceBinding {
            server: server?,
            node,
            sampling_interval: sampling_interval?,
            deadband: deadband?,
            ..SourceBinding::default()
        };
        if let Some(Err(problem)) = binding.opcua_node() {
            self.error(
                span_of(&fields, problem.key).unwrap_or_else(|| fields.span.clone()),
                fields.field(problem.key),
                problem.message,
            );
        }
        self.done(fields, &["server", "node", "sampling_interval", "deadband"]);
        binding.node.is_some().then_some(binding)
    }

    /// An absolute deadband: `Some(None)` when absent, `None` when not a number from 0 up.
    fn deadband(&mut self, fields: &mut Fields<'_>) -> Option<Option<f64>> {
        let span = span_of(fields, "deadband");
        let Some(deadband) = self.number(fields, "deadband") else {
            return if span.is_some() { None } else { Some(None) };
        };
        if deadband.is_finite() && deadband >= 0.0 {
            return Some(Some(deadband));
        }
        self.error(
            span.unwrap_or_else(|| fields.span.clone()),
            fields.field("deadband"),
            format!("must be a finite number from 0 up, not {deadband}"),
        );
        None
    }

    /// OPC UA's security policy and mode: the mode goes with `Basic256Sha256` only.
    fn security(&mut self, fields: &mut Fields<'_>) -> (String, String) {
        let security_span = span_of(fields, "security");
        let security = self
            .string(fields, "security")
            .unwrap_or_else(|| "None".to_owned());
        let mode_span = span_of(fields, "mode");
        let mode = self.string(fields, "mode").unwrap_or_default();
        if !SECURITY_POLICIES.contains(&security.as_str()) {
            self.error(
                security_span.unwrap_or_else(|| fields.span.clone()),
                fields.field("security"),
                format!("{security:?} is none of {}", SECURITY_POLICIES.join(", ")),
            );
        } else if security == "None" {
            if let Some(span) = mode_span {
                self.error(
                    span,
                    fields.field("mode"),
                    "security \"None\" signs and encrypts nothing: drop mode, or ask for \
                     security = \"Basic256Sha256\"",
                );
            }
        } else if mode_span.is_none() {
            self.error(
                security_span.unwrap_or_else(|| fields.span.clone()),
                fields.field("mode"),
                format!(
                    "security {security:?} needs a mode: one of {}",
                    SECURITY_MODES.join(", ")
                ),
            );
        } else if !mode.is_empty() && !SECURITY_MODES.contains(&mode.as_str()) {
            self.error(
                mode_span.unwrap_or_else(|| fields.span.clone()),
                fields.field("mode"),
                format!("{mode:?} is none of {}", SECURITY_MODES.join(", ")),
            );
        }
        (security, mode)
    }

    /// A topic or topic level: not empty, no wildcards (`+`, `#`), no NUL.
    fn mqtt_name(&mut self, fields: &mut Fields<'_>, key: &str) -> Option<String> {
        let span = span_of(fields, key);
        let text = self.string(fields, key)?;
        if text.is_empty() || text.contains(['+', '#', '\0']) {
            self.error(
                span.unwrap_or_else(|| fields.span.clone()),
                fields.field(key),
                format!("{text:?} is not a topic: not empty, and no + or # wildcards"),
            );
            return None;
        }
        Some(text)
    }

    fn source_spec(&mut self, node: &Node, path: &str) -> Option<SourceSpec> {
        let mut fields = self.table(node, path)?;
        let name = self.name(&mut fields, "name");
        let url_span = span_of(&fields, "url");
        let url = self.required_string(&mut fields, "url");
        let kind = url.as_deref().and_then(SourceKind::of_url);
        if let Some(url) = &url {
            let rest = url.split_once("://").map_or("", |(_, rest)| rest);
            // Only an OPC UA server's address has a path (its endpoint's).
            let host = match kind {
                Some(SourceKind::OpcUa) => rest.split('/').next().unwrap_or_default(),
                _ => rest.trim_end_matches('/'),
            };
            if kind.is_none() || host.is_empty() || host.contains('/') || host.contains('@') {
                self.error(
                    url_span.unwrap_or_else(|| fields.span.clone()),
                    fields.field("url"),
                    format!(
                        "{url:?} is not a source address: mqtt://host[:port] or mqtts://host[:port] for \
                         an MQTT broker, modbus://host[:port] for a Modbus TCP device, \
                         opc.tcp://host[:port][/path] for an OPC UA server; credentials in username \
                         and password"
                    ),
                );
            }
        }
        let client_id = self.string(&mut fields, "client_id").unwrap_or_default();
        let username_span = span_of(&fields, "username");
        let username = self.string(&mut fields, "username").unwrap_or_default();
        let password_span = span_of(&fields, "password");
        let password = self.string(&mut fields, "password").unwrap_or_default();
        if !password.is_empty() && !password.starts_with("/secret:") {
            self.error(
                password_span.unwrap_or_else(|| fields.span.clone()),
                fields.field("password"),
                "give a /secret:<Name> token (tserver secrets PATH set <Name>), never the password itself",
            );
        }
        let ca_file = self.string(&mut fields, "ca_file").unwrap_or_default();
        let keep_alive = self.seconds(&mut fields, "keep_alive", 5..=3600, 30);
        let root_span = span_of(&fields, "root");
        let root = self.string(&mut fields, "root").unwrap_or_default();
        if root.contains(['+', '#', '\0']) {
            self.error(
                root_span.unwrap_or_else(|| fields.span.clone()),
                fields.field("root"),
                format!("{root:?} is not a topic prefix: no + or # wildcards"),
            );
        }
        let stale_after = self.seconds(&mut fields, "stale_after", 0..=86_400, 0);
        let unit = self
            .whole(&mut fields, "unit", 0..=255, "a unit id")
            .map(|unit| unit.unwrap_or(1));
        let poll_interval = self
            .whole(&mut fields, "poll_interval", 10..=3_600_000, "milliseconds")
            .map(|interval| interval.unwrap_or(1000));
        let timeout = self
            .whole(&mut fields, "timeout", 10..=60_000, "milliseconds")
            .map(|timeout| timeout.unwrap_or(1000));
        let max_gap = self
            .whole(&mut fields, "max_gap", 0..=120, "addresses")
            .map(|gap| gap.unwrap_or(0));
        let (security, mode) = self.security(&mut fields);
        if kind == Some(SourceKind::OpcUa) && security == "None" && !username.is_empty() {
            self.error(
                username_span.unwrap_or_else(|| fields.span.clone()),
                fields.field("username"),
                "a user name and password over security \"None\" travel on a channel that \
                 neither signs nor encrypts, where anyone on the network can read the password: \
                 ask for security = \"Basic256Sha256\" with mode = \"SignAndEncrypt\" (or \
                 \"Sign\"), or leave username and password out for an anonymous session",
            );
        }
        let sampling_interval = self
            .whole(&mut fields, "sampling_interval", 0..=3_600_000, "milliseconds")
            .map(|interval| interval.unwrap_or(500));
        let publishing_interval = self
            .whole(&mut fields, "publishing_interval", 10..=3_600_000, "milliseconds")
            .map(|interval| interval.unwrap_or(500));
        let deadband = self.deadband(&mut fields);
        self.refuse_other_kinds_fields(&fields, kind);
        self.done(fields, SOURCE_KEYS);
        Some(SourceSpec {
            name: name?,
            url: url?,
            client_id,
            username,
            password,
            ca_file,
            keep_alive: keep_alive?,
            root,
            stale_after: stale_after?,
            unit: u8::try_from(unit?).ok()?,
            poll_interval: u64::try_from(poll_interval?).ok()?,
            timeout: u64::try_from(timeout?).ok()?,
            max_gap: u16::try_from(max_gap?).ok()?,
            security,
            mode,
            sampling_interval: u64::try_from(sampling_interval?).ok()?,
            publishing_interval: u64::try_from(publishing_interval?).ok()?,
            deadband: deadband?.unwrap_or(0.0),
        })
    }

    /// Reports the fields only sources of other kinds take (a `unit` on a broker, a `root` on
    /// a Modbus device, a `password` on a Modbus device).
    fn refuse_other_kinds_fields(&mut self, fields: &Fields<'_>, kind: Option<SourceKind>) {
        let Some(kind) = kind else { return };
        let owners: [(&[&str], &[SourceKind], &str); 4] = [
            (
                MQTT_SOURCE_KEYS,
                &[SourceKind::Mqtt],
                "an MQTT source's (mqtt://, mqtts://)",
            ),
            (
                MODBUS_SOURCE_KEYS,
                &[SourceKind::Modbus],
                "a Modbus source's (modbus://)",
            ),
            (
                OPCUA_SOURCE_KEYS,
                &[SourceKind::OpcUa],
                "an OPC UA source's (opc.tcp://)",
            ),
            (
                CREDENTIAL_KEYS,
                &[SourceKind::Mqtt, SourceKind::OpcUa],
                "an MQTT or OPC UA source's",
            ),
        ];
        for (keys, takers, theirs) in owners {
            if takers.contains(&kind) {
                continue;
            }
            for key in keys {
                if let Some(span) = span_of(fields, key) {
                    self.error(span, fields.field(key), format!("is {theirs}, not this source's"));
                }
            }
        }
    }

    /// A whole number of seconds within `range`, `default` when absent.
    fn seconds(
        &mut self,
        fields: &mut Fields<'_>,
        key: &str,
        range: std::ops::RangeInclusive<i64>,
        default: u64,
    ) -> Option<u64> {
        self.whole(fields, key, range, "seconds").map(|seconds| {
            seconds
                .and_then(|seconds| u64::try_from(seconds).ok())
                .unwrap_or(default)
        })
    }

    /// A whole number (of `what`) within `range`: `Some(None)` when absent, `None` when wrong.
    fn whole(
        &mut self,
        fields: &mut Fields<'_>,
        key: &str,
        range: std::ops::RangeInclusive<i64>,
        what: &str,
    ) -> Option<Option<i64>> {
        let Some(node) = fields.get(key) else {
            return Some(None);
        };
        match node.value {
            Value::Integer(number) if range.contains(&number) => Some(Some(number)),
            _ => {
                let unit = if what.starts_with("a ") || what.starts_with("an ") {
                    format!("must be {what}, a whole number")
                } else {
                    format!("must be a whole number of {what}")
                };
                self.error(
                    node.span.clone(),
                    fields.field(key),
                    format!("{unit} from {} to {}", range.start(), range.end()),
                );
                None
            }
        }
    }

    /// `history`: `true` or absent (the defaults), `false`, or `{ deadband, compression,
    /// max_interval, retention_hours }`; `history_deadband = X` is the same as `history = { deadband = X }`.
    fn history(&mut self, fields: &mut Fields<'_>, path: &str) -> History {
        let shorthand = self.number(fields, "history_deadband");
        let mut history = match fields.get("history") {
            None => History::default(),
            Some(node) => match &node.value {
                Value::Bool(true) => History::default(),
                Value::Bool(false) => History::Off,
                Value::Table(_) => History::On(self.history_options(node, &join(path, "history"))),
                _ => {
                    self.error(
                        node.span.clone(),
                        fields.field("history"),
                        "must be true, false or a table { deadband, compression, max_interval, retention_hours }",
                    );
                    History::default()
                }
            },
        };
        if let Some(deadband) = shorthand {
            let at = span_of(fields, "history_deadband").unwrap_or_else(|| fields.span.clone());
            match &mut history {
                History::On(options) if options.deadband.is_none() => {
                    if deadband < 0.0 {
                        self.error(at, fields.field("history_deadband"), "cannot be negative");
                    }
                    options.deadband = Some(deadband);
                }
                _ => self.error(
                    at,
                    fields.field("history_deadband"),
                    "history says how this tag is recorded already: give the deadband there",
                ),
            }
        }
        history
    }

    fn history_options(&mut self, node: &Node, path: &str) -> HistoryOptions {
        let Some(mut fields) = self.table(node, path) else {
            return HistoryOptions::default();
        };
        let deadband = self.number(&mut fields, "deadband");
        let at = |key: &str, fields: &Fields<'_>| span_of(fields, key).unwrap_or_else(|| fields.span.clone());
        if deadband.is_some_and(|deadband| deadband < 0.0 || !deadband.is_finite()) {
            self.error(
                at("deadband", &fields),
                join(path, "deadband"),
                "must be 0 or more",
            );
        }
        let named = self.string(&mut fields, "compression");
        let compression = match named.as_deref().map(|name| (name, Compression::parse(name))) {
            None => Compression::default(),
            Some((_, Some(compression))) => compression,
            Some((name, None)) => {
                let hint = did_you_mean(name, Compression::NAMES);
                self.error(
                    at("compression", &fields),
                    join(path, "compression"),
                    format!(
                        "unknown compression {name:?}{hint}; one of: {}",
                        Compression::NAMES.join(", ")
                    ),
                );
                Compression::default()
            }
        };
        let max_interval = self
            .whole(&mut fields, "max_interval", 1..=86_400, "seconds")
            .flatten()
            .and_then(|seconds| u64::try_from(seconds).ok());
        let max_hours = i64::try_from(MAX_RETENTION_HOURS).unwrap_or(i64::MAX);
        let retention_hours = self
            .whole(&mut fields, "retention_hours", 1..=max_hours, "hours")
            .flatten()
            .and_then(|hours| u64::try_from(hours).ok());
        self.done(
            fields,
            &["deadband", "compression", "max_interval", "retention_hours"],
        );
        HistoryOptions {
            deadband,
            compression,
            max_interval,
            retention_hours,
        }
    }

    fn motion(&mut self, node: &Node, path: &str) -> Option<Motion> {
        let mut fields = self.table(node, path)?;
        let amplitude = self.number(&mut fields, "amplitude").unwrap_or(0.0);
        let period = self.number(&mut fields, "period");
        if period.is_none() && fields.entries.iter().all(|(key, _)| key.name != "period") {
            self.missing(&fields, "period");
        }
        let phase = self.number(&mut fields, "phase").unwrap_or(0.0);
        let noise = self.number(&mut fields, "noise").unwrap_or(0.0);
        let at = |key: &str| span_of(&fields, key).unwrap_or_else(|| fields.span.clone());
        if period
            .is_some_and(|period| period <= 0.0 || std::time::Duration::try_from_secs_f64(period).is_err())
        {
            self.error(
                at("period"),
                join(path, "period"),
                "must be above 0 seconds (and a span of time a clock can hold)",
            );
        }
        if noise < 0.0 {
            self.error(at("noise"), join(path, "noise"), "cannot be negative");
        }
        self.done(fields, &["amplitude", "period", "phase", "noise"]);
        Some(Motion {
            amplitude,
            period: period?,
            phase,
            noise,
        })
    }

    fn alarm(&mut self, node: &Node, path: &str) -> Option<AlarmSpec> {
        let mut fields = self.table(node, path)?;
        let name = self.name(&mut fields, "name");
        let tag = self.name(&mut fields, "tag");
        let condition_span = fields
            .entries
            .iter()
            .find(|(key, _)| key.name == "condition")
            .map(|(_, node)| node.span.clone());
        let condition = self.required_string(&mut fields, "condition").and_then(|text| {
            let condition = Condition::parse(&text);
            if condition.is_none() {
                let hint = did_you_mean(&text, Condition::NAMES);
                self.error(
                    condition_span.unwrap_or_else(|| fields.span.clone()),
                    fields.field("condition"),
                    format!(
                        "unknown condition {text:?}{hint}; one of: {}",
                        Condition::NAMES.join(", ")
                    ),
                );
            }
            condition
        });
        let limit = self.number(&mut fields, "limit");
        let setpoint = self.number(&mut fields, "setpoint");
        let active_when = self.boolean(&mut fields, "active_when");
        let deadband = self.number(&mut fields, "deadband").unwrap_or(0.0);
        let priority_node = fields.get("priority");
        let priority = match priority_node {
            None => Some(500),
            Some(node) => match node.value {
                Value::Integer(value) if (1..=1000).contains(&value) => u32::try_from(value).ok(),
                _ => {
                    self.error(
                        node.span.clone(),
                        fields.field("priority"),
                        "must be a whole number from 1 to 1000",
                    );
                    None
                }
            },
        };
        let message = self.string(&mut fields, "message").unwrap_or_default();
        let cause = self.alarm_text(&mut fields, "cause");
        let consequence = self.alarm_text(&mut fields, "consequence");
        let response = self.alarm_text(&mut fields, "response");
        let time_to_respond = self.time_to_respond(&mut fields);
        let at = |key: &str| span_of(&fields, key).unwrap_or_else(|| fields.span.clone());
        if let Some(condition) = condition {
            match condition {
                Condition::Digital => {
                    for (key, set) in [("limit", limit.is_some()), ("setpoint", setpoint.is_some())] {
                        if set {
                            self.error(
                                at(key),
                                join(path, key),
                                "a Digital alarm has none (it watches a bool tag)",
                            );
                        }
                    }
                }
                _ => {
                    if limit.is_none() && fields.entries.iter().all(|(key, _)| key.name != "limit") {
                        self.missing(&fields, "limit");
                    }
                    if active_when.is_some() {
                        self.error(
                            at("active_when"),
                            join(path, "active_when"),
                            "only a Digital alarm has one",
                        );
                    }
                }
            }
            if condition == Condition::Deviation
                && setpoint.is_none()
                && fields.entries.iter().all(|(key, _)| key.name != "setpoint")
            {
                self.missing(&fields, "setpoint");
            }
            if condition != Condition::Deviation && setpoint.is_some() && condition != Condition::Digital {
                self.error(
                    at("setpoint"),
                    join(path, "setpoint"),
                    "only a Deviation alarm has one",
                );
            }
        }
        if deadband < 0.0 {
            self.error(at("deadband"), join(path, "deadband"), "cannot be negative");
        }
        self.done(
            fields,
            &[
                "name",
                "tag",
                "condition",
                "limit",
                "setpoint",
                "active_when",
                "deadband",
                "priority",
                "message",
                "cause",
                "consequence",
                "response",
                "time_to_respond",
            ],
        );
        Some(AlarmSpec {
            name: name?,
            tag: tag?,
            condition: condition?,
            limit,
            setpoint,
            active_when,
            deadband,
            priority: priority?,
            message,
            cause: cause?,
            consequence: consequence?,
            response: response?,
            time_to_respond: time_to_respond?,
        })
    }

    /// `[[documents]]`: a relative path that stays below the plant file's folder, and the
    /// names of what it is about (checked against the plant in `check_documents`).
    fn document_spec(&mut self, node: &Node, path: &str) -> Option<DocumentSpec> {
        let mut fields = self.table(node, path)?;
        let span = span_of(&fields, "path").unwrap_or_else(|| fields.span.clone());
        let file = self.required_string(&mut fields, "path");
        let file = file.and_then(|file| match document_path_problem(&file) {
            Some(problem) => {
                self.error(span, fields.field("path"), format!("{file:?} {problem}"));
                None
            }
            None => Some(file),
        });
        let title = self.string(&mut fields, "title").unwrap_or_default();
        let types = self.strings(&mut fields, "types");
        let equipment = self.strings(&mut fields, "equipment");
        let folders = self.strings(&mut fields, "folders");
        self.done(fields, &["path", "title", "types", "equipment", "folders"]);
        Some(DocumentSpec {
            path: file?,
            title,
            types,
            equipment,
            folders,
        })
    }

    /// An array of strings (absent: none); an entry of another kind is reported and left out.
    fn strings(&mut self, fields: &mut Fields<'_>, key: &str) -> Vec<String> {
        let Some(node) = fields.get(key) else {
            return Vec::new();
        };
        let field = fields.field(key);
        let Value::Array(items) = &node.value else {
            self.error(
                node.span.clone(),
                field,
                format!("expected an array of strings, found {}", node.value.kind()),
            );
            return Vec::new();
        };
        let mut read = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            match &item.value {
                Value::String(text) => read.push(names::normalize(text)),
                other => self.error(
                    item.span.clone(),
                    format!("{field}[{index}]"),
                    format!("expected a string, found {}", other.kind()),
                ),
            }
        }
        read
    }

    /// A text tag's `values`: at least one, at most [`MAX_TAG_VALUES`], each distinct (ignoring
    /// case), not empty, at most [`MAX_TAG_VALUE_CHARS`] characters and plain text. A bad entry
    /// is reported and left out.
    fn tag_values(&mut self, fields: &mut Fields<'_>) -> Vec<String> {
        let Some(span) = span_of(fields, "values") else {
            return Vec::new();
        };
        let field = fields.field("values");
        let listed = self.strings(fields, "values");
        if listed.is_empty() {
            self.error(
                span.clone(),
                field.clone(),
                "an empty set allows no value: list the values, or remove the key",
            );
        }
        if listed.len() > MAX_TAG_VALUES {
            self.error(
                span.clone(),
                field.clone(),
                format!("{} values is too many; at most {MAX_TAG_VALUES}", listed.len()),
            );
        }
        let mut kept: Vec<String> = Vec::with_capacity(listed.len());
        for (index, value) in listed.into_iter().enumerate() {
            let problem = if value.trim().is_empty() {
                Some("an empty value cannot be told apart: give it a name".to_owned())
            } else if value.chars().count() > MAX_TAG_VALUE_CHARS {
                Some(format!("too long; at most {MAX_TAG_VALUE_CHARS} characters"))
            } else if let Some(problem) = names::text_value_problem(&value) {
                Some(problem)
            } else {
                kept.iter()
                    .find(|seen| names::fold(seen) == names::fold(&value))
                    .map(|seen| format!("{value:?} is listed already (as {seen:?})"))
            };
            match problem {
                Some(problem) => self.error(span.clone(), format!("{field}[{index}]"), problem),
                None => kept.push(value),
            }
        }
        kept
    }

    /// An alarm's `cause`, `consequence` or `response`: a string of at most
    /// [`MAX_ALARM_TEXT_CHARS`] characters, empty when absent.
    fn alarm_text(&mut self, fields: &mut Fields<'_>, key: &str) -> Option<String> {
        let Some(span) = span_of(fields, key) else {
            return Some(String::new());
        };
        let text = self.string(fields, key)?;
        let chars = text.chars().count();
        if chars > MAX_ALARM_TEXT_CHARS {
            self.error(
                span,
                fields.field(key),
                format!("{chars} characters is too long; at most {MAX_ALARM_TEXT_CHARS}"),
            );
            return None;
        }
        Some(text)
    }

    /// An alarm's `time_to_respond`: whole seconds from 1 to [`MAX_TIME_TO_RESPOND_S`].
    fn time_to_respond(&mut self, fields: &mut Fields<'_>) -> Option<Option<u32>> {
        let Some(node) = fields.get("time_to_respond") else {
            return Some(None);
        };
        let problem = match &node.value {
            Value::Integer(seconds) => match u32::try_from(*seconds) {
                Ok(seconds) if (1..=MAX_TIME_TO_RESPOND_S).contains(&seconds) => return Some(Some(seconds)),
                _ => format!("{seconds} is out of range: from 1 second to {MAX_TIME_TO_RESPOND_S} (7 days)"),
            },
            other => format!("expected a whole number of seconds, found {}", other.kind()),
        };
        self.error(node.span.clone(), fields.field("time_to_respond"), problem);
        None
    }

    fn equipment_type(&mut self, node: &Node, path: &str) -> Option<EquipmentType> {
        let mut fields = self.table(node, path)?;
        let name = self.name(&mut fields, "name");
        let description = self.string(&mut fields, "description").unwrap_or_default();
        let tags = self.list(&mut fields, "tags", |reader, node, path| {
            reader.tag(node, path, true)
        });
        let alarms = self.list(&mut fields, "alarms", Self::alarm);
        self.done(fields, &["name", "description", "tags", "alarms"]);
        Some(EquipmentType {
            name: name?,
            description,
            tags,
            alarms,
        })
    }

    fn equipment(&mut self, node: &Node, path: &str) -> Option<Equipment> {
        let mut fields = self.table(node, path)?;
        let name = self.name(&mut fields, "name");
        let kind = self.name(&mut fields, "type");
        let folder = self.path(&mut fields, "path");
        let label = self.string(&mut fields, "label").unwrap_or_default();
        let mut initial = BTreeMap::new();
        if let Some(node) = fields.get("initial") {
            let field = fields.field("initial");
            if let Some(values) = self.table(node, &field) {
                for (key, value) in values.entries {
                    if let Some(value) = self.initial_value(value, &join(&field, &key.name), None) {
                        initial.insert(names::normalize(&key.name), value);
                    }
                }
            }
        }
        let mut limits = BTreeMap::new();
        if let Some(node) = fields.get("limits") {
            let field = fields.field("limits");
            if let Some(values) = self.table(node, &field) {
                for (key, value) in values.entries {
                    if let Some(limit) = self.number_in(value, &join(&field, &key.name)) {
                        limits.insert(names::normalize(&key.name), limit);
                    }
                }
            }
        }
        self.done(fields, &["name", "type", "path", "label", "initial", "limits"]);
        Some(Equipment {
            name: name?,
            kind: kind?,
            path: folder?,
            label,
            initial,
            limits,
        })
    }
}

/// What makes `path` unusable as a document's place beside the plant file (it is read there,
/// and export writes it back there), if anything.
pub fn document_path_problem(path: &str) -> Option<&'static str> {
    if path.is_empty() || path.len() > crate::MAX_DOCUMENT_PATH {
        return Some("is not a usable document path: 1 to 1024 bytes");
    }
    if path.starts_with('/') || path.contains('\\') || path.contains(':') {
        return Some(
            "is not a relative path: write it relative to the plant file, with '/' between folders \
             (no leading '/', no '\\', no drive)",
        );
    }
    if path.chars().any(char::is_control) {
        return Some("is not a usable document path: no control characters");
    }
    let segments: Vec<&str> = path.split('/').collect();
    if segments.contains(&"..") {
        return Some("leaves the plant file's folder: no `..` (export writes the file back there)");
    }
    if segments
        .iter()
        .any(|segment| segment.is_empty() || *segment == ".")
    {
        return Some("is not a usable document path: no empty or `.` segments");
    }
    None
}

/// Where the value of `key` was written, if it was.
fn span_of(fields: &Fields<'_>, key: &str) -> Option<Range<usize>> {
    fields
        .entries
        .iter()
        .find(|(entry, _)| entry.name == key)
        .map(|(_, node)| node.span.clone())
}

/// `x`, or nothing for an open end.
fn show(value: Option<f64>) -> String {
    value.map(|value| value.to_string()).unwrap_or_default()
}

/// Where each part of a model was written, found again by field path for the checks that
/// look across parts (the reader keeps no spans in the model itself). Indices are the
/// model's; each is turned back into the index of the entry in the file.
pub(crate) struct Places<'n> {
    root: &'n Node,
    kept: HashMap<String, Vec<usize>>,
    dropped: HashMap<String, Vec<Option<String>>>,
}

impl<'n> Places<'n> {
    /// The places of `root`, with what `reader` kept and left out of each list.
    pub(crate) fn new(root: &'n Node, reader: &mut Reader<'_>) -> Self {
        Self {
            root,
            kept: std::mem::take(&mut reader.kept),
            dropped: std::mem::take(&mut reader.dropped),
        }
    }

    /// The file index of the model's entry `index` of the list `list` (`tags`,
    /// `types[0].alarms`).
    fn file_index(&self, list: &str, index: usize) -> usize {
        self.kept
            .get(list)
            .and_then(|kept| kept.get(index))
            .copied()
            .unwrap_or(index)
    }

    /// `section[index]` as the file has it.
    pub(crate) fn field(&self, section: &str, index: usize) -> String {
        format!("{section}[{}]", self.file_index(section, index))
    }

    /// `types[type_index].section[index]` as the file has it.
    pub(crate) fn member_field(&self, type_index: usize, section: &str, index: usize) -> String {
        let kind = self.file_index("types", type_index);
        let list = format!("types[{kind}].{section}");
        format!("{list}[{}]", self.file_index(&list, index))
    }

    /// Whether the list `list` had entries left out.
    pub(crate) fn dropped_any(&self, list: &str) -> bool {
        self.dropped.get(list).is_some_and(|dropped| !dropped.is_empty())
    }

    /// Whether an entry left out of `list` may have been named `name` (it was, ignoring case,
    /// or its name could not be read).
    pub(crate) fn dropped_named(&self, list: &str, name: &str) -> bool {
        self.dropped.get(list).is_some_and(|dropped| {
            dropped.iter().any(|left| {
                left.as_ref()
                    .is_none_or(|left| names::fold(left) == names::fold(name))
            })
        })
    }

    /// The node at `section[index].key` (`key` empty: the entry itself), or the file start.
    pub(crate) fn span(&self, section: &str, index: usize, key: &str) -> Range<usize> {
        self.span_at(section, index, &[key])
    }

    /// The node at `section[index]` and then the keys of `path` (`["initial", "Temp"]`),
    /// falling back to the deepest of them that is there.
    pub(crate) fn span_at(&self, section: &str, index: usize, path: &[&str]) -> Range<usize> {
        let Some(mut node) =
            lookup(self.root, section).and_then(|list| item(list, self.file_index(section, index)))
        else {
            return 0..0;
        };
        for key in path.iter().filter(|key| !key.is_empty()) {
            match lookup(node, key) {
                Some(inner) => node = inner,
                None => break,
            }
        }
        node.span.clone()
    }

    /// The node at `section[index].key[position]` (an entry of a list of strings), or the
    /// deepest of them that is there.
    pub(crate) fn span_at_item(
        &self,
        section: &str,
        index: usize,
        key: &str,
        position: usize,
    ) -> Range<usize> {
        let Some(entry) =
            lookup(self.root, section).and_then(|list| item(list, self.file_index(section, index)))
        else {
            return 0..0;
        };
        match lookup(entry, key) {
            Some(list) => item(list, position).unwrap_or(list).span.clone(),
            None => entry.span.clone(),
        }
    }

    /// The same inside a type: `types[type_index].section[index].key`.
    pub(crate) fn member_span(
        &self,
        type_index: usize,
        section: &str,
        index: usize,
        key: &str,
    ) -> Range<usize> {
        let file_type = self.file_index("types", type_index);
        let Some(kind) = lookup(self.root, "types").and_then(|types| item(types, file_type)) else {
            return 0..0;
        };
        let Some(list) = lookup(kind, section) else {
            return kind.span.clone();
        };
        let index = self.file_index(&format!("types[{file_type}].{section}"), index);
        item(list, index)
            .and_then(|entry| {
                if key.is_empty() {
                    Some(entry)
                } else {
                    lookup(entry, key)
                }
            })
            .map_or(0..0, |node| node.span.clone())
    }
}

pub(crate) fn lookup<'n>(node: &'n Node, key: &str) -> Option<&'n Node> {
    match &node.value {
        Value::Table(entries) => entries
            .iter()
            .find(|(entry, _)| entry.name == key)
            .map(|(_, node)| node),
        _ => None,
    }
}

pub(crate) fn item(node: &Node, index: usize) -> Option<&Node> {
    match &node.value {
        Value::Array(items) => items.get(index),
        _ => None,
    }
}

/// The checks across parts: unique names and paths (ignoring case, as lookups do), a tag path
/// that is not also a folder of other tags, alarms on tags that exist and suit them,
/// instances of types that exist, overrides of members that exist and fit them as the type's
/// own values must. They run on what could be read, so every problem of a file is reported
/// at once; a reference to an entry that could not be read is not reported as a reference to
/// nothing (its own error says what is wrong with it).
pub(crate) fn check_model(reader: &mut Reader<'_>, model: &PlantModel, places: &Places<'_>) {
    for (type_index, kind) in model.types.iter().enumerate() {
        check_type_members(reader, places, type_index, kind);
    }
    check_unique_names(
        reader,
        places,
        "types",
        model.types.iter().map(|kind| kind.name.as_str()),
    );
    check_instances(reader, model, places);
    let plant = TracedPlant::new(model, places);
    check_tag_names_and_paths(reader, &plant);
    check_paths_not_folders(reader, &plant);
    check_expanded_alarms(reader, &plant);
    check_simulated_initials(reader, &plant);
    check_unique_names(
        reader,
        places,
        "sources",
        model.sources.iter().map(|source| source.name.as_str()),
    );
    check_tag_sources(reader, &plant);
    check_folders(reader, &plant);
    check_documents(reader, &plant);
}

/// Within one equipment type: member names unique and free of '/', alarm names unique, and
/// each alarm on a member tag that exists and suits its condition.
fn check_type_members(reader: &mut Reader<'_>, places: &Places<'_>, type_index: usize, kind: &EquipmentType) {
    let mut members: HashMap<String, usize> = HashMap::new();
    let tags_list = format!("types[{}].tags", places.file_index("types", type_index));
    for (index, tag) in kind.tags.iter().enumerate() {
        if tag.name.contains('/') {
            reader.error(
                places.member_span(type_index, "tags", index, "name"),
                format!("{}.name", places.member_field(type_index, "tags", index)),
                "a member's name becomes a path segment: no '/'",
            );
        }
        if members.insert(names::fold(&tag.name), index).is_some() {
            reader.error(
                places.member_span(type_index, "tags", index, "name"),
                format!("{}.name", places.member_field(type_index, "tags", index)),
                format!("type {:?} has two tags named {:?}", kind.name, tag.name),
            );
        }
    }
    let mut alarm_names: HashMap<String, usize> = HashMap::new();
    for (index, alarm) in kind.alarms.iter().enumerate() {
        let field = places.member_field(type_index, "alarms", index);
        if alarm_names.insert(names::fold(&alarm.name), index).is_some() {
            reader.error(
                places.member_span(type_index, "alarms", index, "name"),
                format!("{field}.name"),
                format!("type {:?} has two alarms named {:?}", kind.name, alarm.name),
            );
        }
        match kind.tags.iter().find(|tag| tag.name == alarm.tag) {
            None if places.dropped_named(&tags_list, &alarm.tag) => {}
            None => reader.error(
                places.member_span(type_index, "alarms", index, "tag"),
                format!("{field}.tag"),
                format!("type {:?} has no tag {:?}", kind.name, alarm.tag),
            ),
            Some(tag) => {
                if let Some(problem) = unsuitable(alarm.condition, tag.kind) {
                    reader.error(
                        places.member_span(type_index, "alarms", index, "condition"),
                        format!("{field}.condition"),
                        problem,
                    );
                }
            }
        }
    }
}

/// The `name`s of the entries of `section` (`types`, `sources`) unique, ignoring case.
fn check_unique_names<'m>(
    reader: &mut Reader<'_>,
    places: &Places<'_>,
    section: &str,
    entry_names: impl Iterator<Item = &'m str>,
) {
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (index, name) in entry_names.enumerate() {
        if seen.insert(names::fold(name), index).is_some() {
            reader.error(
                places.span(section, index, "name"),
                format!("{}.name", places.field(section, index)),
                format!("two {section} named {name:?}"),
            );
        }
    }
}

/// Each equipment instance: its name unique, its type one that exists, and the members its
/// overrides name, each value checked as the type's own would be.
fn check_instances(reader: &mut Reader<'_>, model: &PlantModel, places: &Places<'_>) {
    let mut instance_names: HashMap<String, usize> = HashMap::new();
    for (index, instance) in model.equipment.iter().enumerate() {
        if instance_names
            .insert(names::fold(&instance.name), index)
            .is_some()
        {
            reader.error(
                places.span("equipment", index, "name"),
                format!("{}.name", places.field("equipment", index)),
                format!("two instances named {:?}", instance.name),
            );
        }
        let Some((type_index, kind)) = model
            .types
            .iter()
            .enumerate()
            .find(|(_, kind)| kind.name == instance.kind)
        else {
            if !places.dropped_named("types", &instance.kind) {
                let known = model.types.iter().map(|kind| kind.name.as_str());
                reader.error(
                    places.span("equipment", index, "type"),
                    format!("{}.type", places.field("equipment", index)),
                    format!(
                        "no type named {:?}{}",
                        instance.kind,
                        did_you_mean(&instance.kind, known)
                    ),
                );
            }
            continue;
        };
        let overridden = Overridden {
            index,
            instance,
            kind,
            members_list: format!("types[{}]", places.file_index("types", type_index)),
        };
        check_initial_overrides(reader, places, &overridden);
        check_limit_overrides(reader, places, &overridden);
    }
}

/// An equipment instance whose overrides are checked against its type.
struct Overridden<'m> {
    /// The instance's index in the model.
    index: usize,
    instance: &'m Equipment,
    kind: &'m EquipmentType,
    /// `types[i]` of the instance's type as the file has it, for the lists of its members.
    members_list: String,
}

/// An instance's `initial` values: each on a member tag of its type, of the tag's kind, within
/// the tag's range.
fn check_initial_overrides(reader: &mut Reader<'_>, places: &Places<'_>, overridden: &Overridden<'_>) {
    let Overridden {
        index,
        instance,
        kind,
        members_list,
    } = overridden;
    let field = places.field("equipment", *index);
    for (member, value) in &instance.initial {
        let span = places.span_at("equipment", *index, &["initial", member]);
        let member_field = format!("{field}.initial.{member}");
        match kind.tags.iter().find(|tag| &tag.name == member) {
            None if places.dropped_named(&format!("{members_list}.tags"), member) => {}
            None => reader.error(
                span,
                member_field,
                format!("type {:?} has no tag {member:?}", kind.name),
            ),
            Some(tag) if !value.fits(tag.kind) => {
                let kind_name = tag.kind.name();
                let article = if kind_name.starts_with(['a', 'e', 'i', 'o', 'u']) {
                    "an"
                } else {
                    "a"
                };
                reader.error(
                    span,
                    member_field,
                    format!(
                        "{member} is {article} {kind_name} tag (type {:?}): it cannot start at {}",
                        kind.name,
                        value.to_text()
                    ),
                );
            }
            Some(tag) => {
                if let InitialValue::String(text) = value
                    && let Some(problem) = names::outside_values(&tag.values, text)
                {
                    reader.error(
                        span.clone(),
                        member_field.clone(),
                        format!("{problem} (type {:?})", kind.name),
                    );
                }
                if let Some(number) = value.as_f64()
                    && (tag.min.is_some_and(|low| number < low) || tag.max.is_some_and(|high| number > high))
                {
                    reader.error(
                        span,
                        member_field,
                        format!(
                            "{number} is outside {member}'s range {}..{} (type {:?})",
                            show(tag.min),
                            show(tag.max),
                            kind.name
                        ),
                    );
                }
            }
        }
    }
}

/// An instance's `limits`: each on an alarm of its type that has a limit (not a Digital one).
fn check_limit_overrides(reader: &mut Reader<'_>, places: &Places<'_>, overridden: &Overridden<'_>) {
    let Overridden {
        index,
        instance,
        kind,
        members_list,
    } = overridden;
    let field = places.field("equipment", *index);
    for member in instance.limits.keys() {
        let span = places.span_at("equipment", *index, &["limits", member]);
        let member_field = format!("{field}.limits.{member}");
        match kind.alarms.iter().find(|alarm| &alarm.name == member) {
            None if places.dropped_named(&format!("{members_list}.alarms"), member) => {}
            None => reader.error(
                span,
                member_field,
                format!("type {:?} has no alarm {member:?}", kind.name),
            ),
            Some(alarm) if alarm.condition == Condition::Digital => {
                reader.error(span, member_field, "a Digital alarm has no limit");
            }
            Some(_) => {}
        }
    }
}

/// The expanded plant with the model and the places it came from, so each expanded tag or
/// alarm is reported where it was written.
struct TracedPlant<'a> {
    model: &'a PlantModel,
    places: &'a Places<'a>,
    expanded: ExpandedPlant,
}

impl<'a> TracedPlant<'a> {
    fn new(model: &'a PlantModel, places: &'a Places<'a>) -> Self {
        Self {
            model,
            places,
            expanded: model.expand(),
        }
    }

    /// The instance (`Ok`) whose type made the expanded tag at `position`, or else the index
    /// of the plain tag (`Err`).
    fn tag_entry(&self, position: usize) -> Result<usize, usize> {
        entry_of(self.model, position, |kind| kind.tags.len())
    }

    /// Where the expanded tag at `position` was written: its instance, or its own name.
    fn tag_origin(&self, position: usize) -> (Range<usize>, String) {
        origin(
            self.model,
            self.places,
            position,
            |kind| kind.tags.len(),
            ("tags", "name"),
            |index| format!("{}.name", self.places.field("tags", index)),
        )
    }

    /// Where the expanded alarm at `position` was written: its instance, or its own entry.
    fn alarm_origin(&self, position: usize) -> (Range<usize>, String) {
        origin(
            self.model,
            self.places,
            position,
            |kind| kind.alarms.len(),
            ("alarms", "tag"),
            |index| self.places.field("alarms", index),
        )
    }

    /// Whether a missing tag may be one that could not be read: left out of the plain tags, or
    /// of a type's members, or an instance (or its type) left out.
    fn tag_may_be_unread(&self, name: &str) -> bool {
        let places = self.places;
        places.dropped_named("tags", name)
            || places.dropped_any("equipment")
            || places.dropped_any("types")
            || (0..self.model.types.len()).any(|index| {
                places.dropped_any(&format!("types[{}].tags", places.file_index("types", index)))
            })
    }
}

/// Names seen so far, by the two keys two names are one by: the case-folded name (full Unicode
/// folding: `Σ.V` and `σ.V`, `НАСОС` and `насос`), and the look-alike key (`TOP` in Cyrillic
/// and in Latin). Both are needed: a confusable skeleton maps a capital and its small letter
/// of another script to different Latin letters (`Σ` and `σ`), so it alone misses case.
#[derive(Debug, Default)]
struct SeenNames {
    by_fold: HashMap<String, usize>,
    by_look: HashMap<String, usize>,
}

impl SeenNames {
    /// Records `name` at `position`; the position of the first name it is one with, if any.
    fn first_like(&mut self, name: &str, position: usize) -> Option<usize> {
        let folded = self.by_fold.insert(names::fold(name), position);
        let looked = self.by_look.insert(names::look_alike(name), position);
        folded.or(looked)
    }
}

/// The expanded tags' names and paths unique by how they look: ignoring case, and with
/// look-alike characters of other scripts taken as the ones they look like.
fn check_tag_names_and_paths(reader: &mut Reader<'_>, plant: &TracedPlant<'_>) {
    let tags = &plant.expanded.tags;
    let mut look_alike_names = SeenNames::default();
    let mut look_alike_paths = SeenNames::default();
    for (position, tag) in tags.iter().enumerate() {
        if let Some(first) = look_alike_names.first_like(&tag.name, position) {
            let (span, field) = plant.tag_origin(position);
            let other = &tags[first].name;
            reader.error(span, field, taken("tag name", &tag.name, other, other));
        }
        if let Some(first) = look_alike_paths.first_like(&tag.path, position) {
            let (span, field) = plant.tag_origin(position);
            let other = &tags[first];
            reader.error(span, field, taken("path", &tag.path, &other.path, &other.name));
        }
    }
}

/// A tag's path not also the folder of another tag: every folder above a tag, with one tag
/// below it (one pass, however many tags).
fn check_paths_not_folders(reader: &mut Reader<'_>, plant: &TracedPlant<'_>) {
    let tags = &plant.expanded.tags;
    let mut folders_above: HashMap<String, usize> = HashMap::new();
    for (position, tag) in tags.iter().enumerate() {
        let folded = names::fold(&tag.path);
        for (cut, _) in folded.match_indices('/') {
            folders_above.entry(folded[..cut].to_owned()).or_insert(position);
        }
    }
    for (position, tag) in tags.iter().enumerate() {
        if let Some(&below) = folders_above.get(&names::fold(&tag.path)) {
            let (span, field) = plant.tag_origin(position);
            reader.error(
                span,
                field,
                format!(
                    "path {:?} is a tag, so it cannot also be the folder of {:?}",
                    tag.path, tags[below].path
                ),
            );
        }
    }
}

/// The expanded alarms: names unique by how they look, each on a tag that exists (the first
/// of its name, as the error for a taken name says) and suits its condition.
fn check_expanded_alarms(reader: &mut Reader<'_>, plant: &TracedPlant<'_>) {
    let expanded = &plant.expanded;
    let mut tags_by_name: HashMap<&str, &TagSpec> = HashMap::new();
    for tag in &expanded.tags {
        tags_by_name.entry(tag.name.as_str()).or_insert(tag);
    }
    let mut alarm_names = SeenNames::default();
    for (position, alarm) in expanded.alarms.iter().enumerate() {
        if let Some(first) = alarm_names.first_like(&alarm.name, position) {
            let (span, field) = plant.alarm_origin(position);
            let other = &expanded.alarms[first].name;
            reader.error(
                span,
                format!("{field}.name"),
                taken("alarm name", &alarm.name, other, other),
            );
        }
        match tags_by_name.get(alarm.tag.as_str()) {
            None if plant.tag_may_be_unread(&alarm.tag) => {}
            None => {
                let (span, field) = plant.alarm_origin(position);
                let known = expanded.tags.iter().map(|tag| tag.name.as_str());
                reader.error(
                    span,
                    format!("{field}.tag"),
                    format!("no tag named {:?}{}", alarm.tag, did_you_mean(&alarm.tag, known)),
                );
            }
            Some(tag) => {
                if let Some(problem) = unsuitable(alarm.condition, tag.kind) {
                    let (span, field) = plant.alarm_origin(position);
                    reader.error(span, format!("{field}.condition"), problem);
                }
            }
        }
    }
}

/// A motion moves around the tag's initial value: each simulated expanded tag has one, from
/// its own entry, its type or its instance.
fn check_simulated_initials(reader: &mut Reader<'_>, plant: &TracedPlant<'_>) {
    let places = plant.places;
    for (position, tag) in plant.expanded.tags.iter().enumerate() {
        if tag.simulate.is_none() || tag.initial.as_ref().and_then(InitialValue::as_f64).is_some() {
            continue;
        }
        let (span, field, whose) = match plant.tag_entry(position) {
            Ok(instance) => (
                places.span("equipment", instance, "name"),
                format!("{}.initial", places.field("equipment", instance)),
                format!("here or in type {:?}", plant.model.equipment[instance].kind),
            ),
            Err(index) => (
                places.span_at("tags", index, &["simulate"]),
                format!("{}.initial", places.field("tags", index)),
                "to the tag".to_owned(),
            ),
        };
        reader.error(
            span,
            field,
            format!(
                "tag {:?} is simulated around its initial value and has none: give it one {whose}",
                tag.name
            ),
        );
    }
}

/// Each expanded tag bound to a source: a path it can be published at, a source that exists,
/// and no simulation beside it.
fn check_tag_sources(reader: &mut Reader<'_>, plant: &TracedPlant<'_>) {
    let model = plant.model;
    for (position, tag) in plant.expanded.tags.iter().enumerate() {
        let Some(binding) = &tag.source else { continue };
        let wanted = binding.kind();
        if wanted == SourceKind::Mqtt {
            check_topic_path(reader, plant, position, tag, binding);
        }
        let name = binding.source_name();
        let source = model.sources.iter().find(|source| source.name == name);
        let known_source = source.is_some() || plant.places.dropped_named("sources", name);
        let kind_problem = source.filter(|source| source.kind() != wanted).map(|source| {
            format!(
                "tag {:?} names {name:?} as its {}, and that source is {}: name it with {}",
                tag.name,
                wanted.binding_key(),
                source.url,
                source.kind().binding_key()
            )
        });
        let type_problem = binding
            .modbus_point()
            .and_then(Result::ok)
            .and_then(|point| modbus_type_problem(tag, &point));
        if known_source && tag.simulate.is_none() && kind_problem.is_none() && type_problem.is_none() {
            continue;
        }
        let (span, field) = plant.tag_origin(position);
        for problem in kind_problem.into_iter().chain(type_problem) {
            reader.error(span.clone(), field.clone(), problem);
        }
        if !known_source {
            let known = model.sources.iter().map(|source| source.name.as_str());
            reader.error(
                span.clone(),
                field.clone(),
                format!(
                    "tag {:?} names source {:?}, which no [[sources]] entry defines{}",
                    tag.name,
                    name,
                    did_you_mean(name, known)
                ),
            );
        }
        if tag.simulate.is_some() {
            reader.error(
                span,
                field,
                format!(
                    "tag {:?} has a source and a simulation: its values come from one or the other",
                    tag.name
                ),
            );
        }
    }
}

/// Whether a tag of its type can hold what its Modbus point reads: a bool tag a bit, an
/// integer tag a whole register value without scale or offset, a number tag any register;
/// a text tag none.
fn modbus_type_problem(tag: &TagSpec, point: &modbus::Point) -> Option<String> {
    if tag.writable && !point.table().writable() {
        return Some(format!(
            "tag {:?} is writable and its Modbus {} is read-only: bind it to a coil or holding \
             register, or drop writable",
            tag.name,
            point.table()
        ));
    }
    let format = point.format();
    let whole = matches!(
        format,
        modbus::Format::U16 | modbus::Format::I16 | modbus::Format::U32 | modbus::Format::I32
    );
    let unscaled = tag.source.as_ref().is_none_or(|binding| {
        binding.scale.is_none_or(|scale| scale == 1.0) && binding.offset.is_none_or(|offset| offset == 0.0)
    });
    let fits = match tag.kind {
        TagType::Bool => format == modbus::Format::Bool,
        TagType::Integer => whole && unscaled,
        TagType::Number => format != modbus::Format::Bool,
        TagType::String => false,
    };
    (!fits).then(|| {
        format!(
            "tag {:?} is {} and its Modbus {} reads as {format}{}: a bool tag takes a coil or \
             discrete input, an integer tag a whole register format without scale or offset, a \
             number tag any register format",
            tag.name,
            tag.kind.name(),
            point.table(),
            if unscaled { "" } else { " with a scale or offset" }
        )
    })
}

/// A plain UNS binding without a topic of its own is on `<root>/<path>`: a path with a
/// wildcard would subscribe to other tags' topics and cannot be published to. Reported at the
/// path the wildcard is in: the instance's, or the tag's own.
fn check_topic_path(
    reader: &mut Reader<'_>,
    plant: &TracedPlant<'_>,
    position: usize,
    tag: &TagSpec,
    binding: &SourceBinding,
) {
    if binding.sparkplug.is_some() || binding.topic.is_some() {
        return;
    }
    let Some(wildcard) = tag.path.chars().find(|c| matches!(c, '+' | '#')) else {
        return;
    };
    let places = plant.places;
    let (span, field) = match plant.tag_entry(position) {
        Ok(instance) => (
            places.span("equipment", instance, "path"),
            format!("{}.path", places.field("equipment", instance)),
        ),
        Err(index) => (
            places.span("tags", index, "path"),
            format!("{}.path", places.field("tags", index)),
        ),
    };
    reader.error(
        span,
        field,
        format!(
            "path {:?} of tag {:?} has the MQTT wildcard '{wildcard}', and the tag's topic on source {:?} \
             is its path: give the tag source.topic, or a path without '+' and '#'",
            tag.path, tag.name, binding.broker
        ),
    );
}

/// Each described folder: described once, and not the path of a tag.
fn check_folders(reader: &mut Reader<'_>, plant: &TracedPlant<'_>) {
    let places = plant.places;
    let tags = &plant.expanded.tags;
    let mut paths: HashMap<String, usize> = HashMap::new();
    for (position, tag) in tags.iter().enumerate() {
        paths.entry(names::fold(&tag.path)).or_insert(position);
    }
    let mut folder_paths: HashMap<String, usize> = HashMap::new();
    for (index, folder) in plant.model.folders.iter().enumerate() {
        let field = format!("{}.path", places.field("folders", index));
        if folder_paths.insert(names::fold(&folder.path), index).is_some() {
            reader.error(
                places.span("folders", index, "path"),
                field.clone(),
                format!("folder {:?} is described twice", folder.path),
            );
        }
        if let Some(tag) = paths
            .get(&names::fold(&folder.path))
            .map(|&position| &tags[position])
        {
            reader.error(
                places.span("folders", index, "path"),
                field,
                format!(
                    "{:?} is the path of tag {:?}, not a folder",
                    folder.path, tag.name
                ),
            );
        }
    }
}

/// Each document: at most [`MAX_DOCUMENTS`](crate::MAX_DOCUMENTS), each file attached once
/// (ignoring case, as file systems may), and each type, instance and folder it names one the
/// plant has (a folder: described, or on the way to an instance or a tag).
fn check_documents(reader: &mut Reader<'_>, plant: &TracedPlant<'_>) {
    let places = plant.places;
    let model = plant.model;
    if model.documents.len() > crate::MAX_DOCUMENTS {
        let index = crate::MAX_DOCUMENTS;
        reader.error(
            places.span("documents", index, ""),
            places.field("documents", index),
            format!(
                "the plant attaches {} documents; at most {} may be attached",
                model.documents.len(),
                crate::MAX_DOCUMENTS
            ),
        );
    }
    let mut folders: BTreeSet<&str> = model.folders.iter().map(|folder| folder.path.as_str()).collect();
    let placed = model
        .equipment
        .iter()
        .map(|instance| instance.path.as_str())
        .chain(plant.expanded.tags.iter().map(|tag| tag.path.as_str()));
    for path in placed {
        folders.extend(path.match_indices('/').map(|(end, _)| &path[..end]));
    }
    folders.extend(model.equipment.iter().map(|instance| instance.path.as_str()));
    // A folder on the way to an entry left out may be missing from those found.
    let folders_unsure = ["folders", "tags", "equipment"]
        .iter()
        .any(|list| places.dropped_any(list));
    let mut files: HashMap<String, usize> = HashMap::new();
    for (index, document) in model.documents.iter().enumerate() {
        if files.insert(names::fold(&document.path), index).is_some() {
            reader.error(
                places.span("documents", index, "path"),
                format!("{}.path", places.field("documents", index)),
                format!("{:?} is attached twice", document.path),
            );
        }
        let references: [(&str, &[String], &str, Vec<&str>); 3] = [
            (
                "types",
                &document.types,
                "type",
                model.types.iter().map(|kind| kind.name.as_str()).collect(),
            ),
            (
                "equipment",
                &document.equipment,
                "equipment instance",
                model
                    .equipment
                    .iter()
                    .map(|instance| instance.name.as_str())
                    .collect(),
            ),
            (
                "folders",
                &document.folders,
                "folder",
                folders.iter().copied().collect(),
            ),
        ];
        for (key, named, what, known) in references {
            for (position, name) in named.iter().enumerate() {
                let found = known.contains(&name.as_str())
                    || match key {
                        "folders" => folders_unsure,
                        _ => places.dropped_named(key, name),
                    };
                if !found {
                    reader.error(
                        places.span_at_item("documents", index, key, position),
                        format!("{}.{key}[{position}]", places.field("documents", index)),
                        format!(
                            "no {what} named {name:?}{}",
                            did_you_mean(name, known.iter().copied())
                        ),
                    );
                }
            }
        }
    }
}

/// ` (did you mean "near"?)` for the known name nearest `name`, or nothing when none is near.
fn did_you_mean<'k>(name: &str, known: impl IntoIterator<Item = &'k str>) -> String {
    nearest(name, known)
        .map(|near| format!(" (did you mean {near:?}?)"))
        .unwrap_or_default()
}

/// Whether what the model expands to (instances times their type's members, plus the plain
/// tags and alarms) stays within [`MAX_TAGS`](crate::MAX_TAGS) and
/// [`MAX_ALARMS`](crate::MAX_ALARMS), counted without expanding it; past a bound, one error
/// at the entry where the count passes it, saying what the whole would be.
pub(crate) fn within_bounds(reader: &mut Reader<'_>, model: &PlantModel, places: &Places<'_>) -> bool {
    let mut members: HashMap<&str, (usize, usize)> = HashMap::new();
    for kind in &model.types {
        members
            .entry(kind.name.as_str())
            .or_insert((kind.tags.len(), kind.alarms.len()));
    }
    let per_instance: Vec<(usize, usize)> = model
        .equipment
        .iter()
        .map(|instance| members.get(instance.kind.as_str()).copied().unwrap_or_default())
        .collect();
    let mut within = true;
    for (what, bound, member_count, plain, section, key) in [
        ("tags", crate::MAX_TAGS, 0, model.tags.len(), "tags", "name"),
        (
            "alarms",
            crate::MAX_ALARMS,
            1,
            model.alarms.len(),
            "alarms",
            "name",
        ),
    ] {
        let count = |pair: &(usize, usize)| if member_count == 0 { pair.0 } else { pair.1 };
        let of_instances = per_instance
            .iter()
            .map(count)
            .fold(0_usize, usize::saturating_add);
        let total = of_instances.saturating_add(plain);
        if total <= bound {
            continue;
        }
        within = false;
        let message = format!(
            "the plant would have {total} {what} ({of_instances} of equipment instances, {plain} of its own); \
             a plant may have at most {bound}: this is where it passes the bound"
        );
        let mut running = 0_usize;
        let crossing = per_instance.iter().position(|pair| {
            running = running.saturating_add(count(pair));
            running > bound
        });
        match crossing {
            Some(index) => reader.error(
                places.span("equipment", index, "type"),
                format!("{}.type", places.field("equipment", index)),
                message,
            ),
            None => {
                let index = bound - of_instances;
                reader.error(
                    places.span(section, index, key),
                    places.field(section, index),
                    message,
                );
            }
        }
    }
    within
}

/// Why `what` `name` is refused beside `other` (the first with its key, of `owner`): the
/// same ignoring case, or only looking the same.
fn taken(what: &str, name: &str, other: &str, owner: &str) -> String {
    if names::fold(name) == names::fold(other) {
        format!("{what} {name:?} is taken (by {owner:?})")
    } else {
        format!(
            "{what} {name:?} looks the same as {other:?} (of {owner:?}): a character of another script, \
             or one that looks like another, makes a name people cannot tell apart"
        )
    }
}

/// Where the expanded tag or alarm at `position` was written: the equipment instance whose
/// type made it (types give `members` each), or else its own entry in `section` (the plain
/// items follow the instances' in the expanded plant).
fn origin(
    model: &PlantModel,
    places: &Places<'_>,
    position: usize,
    members: impl Fn(&EquipmentType) -> usize,
    (section, key): (&str, &str),
    field: impl Fn(usize) -> String,
) -> (Range<usize>, String) {
    match entry_of(model, position, members) {
        Ok(instance) => (
            places.span("equipment", instance, "name"),
            places.field("equipment", instance),
        ),
        Err(index) => (places.span(section, index, key), field(index)),
    }
}

/// The equipment instance (`Ok`) whose type made the expanded item at `position` (types give
/// `members` each), or else the index of the plain item (`Err`).
fn entry_of(
    model: &PlantModel,
    position: usize,
    members: impl Fn(&EquipmentType) -> usize,
) -> Result<usize, usize> {
    let mut seen = 0;
    for (index, instance) in model.equipment.iter().enumerate() {
        let count = model
            .types
            .iter()
            .find(|kind| kind.name == instance.kind)
            .map_or(0, &members);
        if position < seen + count {
            return Ok(index);
        }
        seen += count;
    }
    Err(position - seen)
}

/// Why a condition cannot watch a tag of `kind`, if it cannot.
fn unsuitable(condition: Condition, kind: TagType) -> Option<String> {
    match (condition, kind) {
        (Condition::Digital, TagType::Bool) => None,
        (Condition::Digital, other) => Some(format!(
            "a Digital alarm watches a bool tag, not a {} tag",
            other.name()
        )),
        (_, kind) if kind.is_numeric() => None,
        (condition, other) => Some(format!(
            "a {} alarm watches a number or integer tag, not a {} tag",
            condition.name(),
            other.name()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_get_the_nearest_known_word() {
        assert_eq!(nearest("limt", ["limit", "tag"]), Some("limit"));
        assert_eq!(nearest("HIHI", Condition::NAMES), Some("HiHi"));
        assert_eq!(nearest("colour", ["limit", "tag"]), None);
    }
}
