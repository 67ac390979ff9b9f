//! Reads a plant file's tree into a [`PlantModel`], checking everything and collecting every
//! problem with its place: the file's shape (unknown keys with a suggestion, wrong kinds of
//! values, missing fields), each value (types, ranges, limits, priorities), and how the parts
//! fit (duplicate names and paths, alarms on unknown or unsuitable tags, instances of unknown
//! types). Nothing is accepted unless everything is.
//!
//! This file holds the [`Reader`], the file's root table, and what every section is read with
//! (tables, strings, numbers, names, paths, lists, a name from a fixed list). Each section of
//! the plant file is read in a file of its own: `[plant]`, `[[folders]]`, `[[tags]]` (with
//! their history and display), `[[alarms]]`, `[[sources]]` (with a tag's `source`), `[[types]]` and
//! `[[equipment]]`, `[[documents]]`, `[[notifications]]`, `[[prompts]]`. The checks across
//! sections run on the model read, with the [`Places`] its parts were written at.

mod alarms;
mod checks;
mod display;
mod documents;
mod equipment;
mod folders;
mod notifications;
mod places;
mod plant;
mod prompts;
mod sources;
mod tags;
mod traced;

use std::collections::HashMap;
use std::ops::Range;

use crate::PlantError;
use crate::document::{Key, Node, Value};
use crate::model::PlantModel;
use crate::names::{self, Quote, did_you_mean};

pub(crate) use checks::{check_model, within_bounds};
pub use documents::document_path_problem;
pub(crate) use places::Places;

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

    /// The whole file: its root table, each of whose sections is read by its own file here.
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
        let notifications = self.list(&mut fields, "notifications", Self::notification);
        let prompts = self.list(&mut fields, "prompts", Self::prompt_spec);
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
                "notifications",
                "prompts",
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
            notifications,
            prompts,
        })
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
            let hint = did_you_mean(&key.name, known.iter().copied(), Quote::Backticks);
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

    /// `name`, written at `key`, as one of the fixed list `known` (a tag type, an alarm
    /// condition, a compression) by `parse`; a name none of them is reported as an unknown
    /// `what` with the nearest as a hint and the whole list.
    fn one_of<T>(
        &mut self,
        fields: &Fields<'_>,
        key: &str,
        what: &str,
        name: &str,
        known: &[&str],
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Option<T> {
        let parsed = parse(name);
        if parsed.is_none() {
            let hint = did_you_mean(name, known.iter().copied(), Quote::DoubleQuotes);
            self.error(
                span_of(fields, key).unwrap_or_else(|| fields.span.clone()),
                fields.field(key),
                format!("unknown {what} {name:?}{hint}; one of: {}", known.join(", ")),
            );
        }
        parsed
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

/// The value of `key` in a table node, if it is a table and has one.
pub(crate) fn lookup<'n>(node: &'n Node, key: &str) -> Option<&'n Node> {
    match &node.value {
        Value::Table(entries) => entries
            .iter()
            .find(|(entry, _)| entry.name == key)
            .map(|(_, node)| node),
        _ => None,
    }
}

/// The entry `index` of an array node, if it is an array and has one.
pub(crate) fn item(node: &Node, index: usize) -> Option<&Node> {
    match &node.value {
        Value::Array(items) => items.get(index),
        _ => None,
    }
}
