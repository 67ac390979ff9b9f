//! `[[tags]]`: a tag's name, path and type, its initial value and range, a text tag's set of
//! values, how its history is recorded (`history`, `history_deadband`), and how the simulator
//! moves it (`simulate`); its `source` is read with the sources it names.

use super::{Fields, Reader, join, show, span_of};
use crate::document::{Node, Value};
use crate::model::{
    Compression, History, HistoryOptions, InitialValue, MAX_RETENTION_HOURS, MAX_TAG_VALUE_CHARS,
    MAX_TAG_VALUES, Motion, TagSpec, TagType,
};
use crate::names;

impl Reader<'_> {
    /// A tag; a `member` of a type has a relative name and no path.
    pub(super) fn tag(&mut self, node: &Node, path: &str, member: bool) -> Option<TagSpec> {
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
        let signed = self.boolean(&mut fields, "signed").unwrap_or(false);
        let witness = self.boolean(&mut fields, "witness").unwrap_or(false);
        let values = self.tag_values(&mut fields);
        let source = fields
            .get("source")
            .and_then(|node| self.source(node, &fields.field("source")));
        let simulate = fields
            .get("simulate")
            .and_then(|node| self.motion(node, &fields.field("simulate")));
        let display = fields
            .get("display")
            .and_then(|node| self.display(node, &fields.field("display"), kind, &values, (min, max)));
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
        for (key, set) in [("signed", signed), ("witness", witness)] {
            if set && !writable {
                self.error(
                    at(key),
                    field(key),
                    "only an operator's write is signed: set writable = true too",
                );
            }
        }
        if witness && !signed {
            self.error(
                at("witness"),
                field("witness"),
                "a witness signs after the writer: set signed = true too",
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
                "signed",
                "witness",
                "values",
                "source",
                "simulate",
                "display",
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
            signed,
            witness,
            values,
            source: source.map(Box::new),
            simulate,
            display,
        })
    }

    fn tag_type(&mut self, fields: &mut Fields<'_>) -> Option<TagType> {
        let name = self.required_string(fields, "type")?;
        self.one_of(fields, "type", "type", &name, &TagType::NAMES, TagType::parse)
    }

    /// A value for a tag of `kind` (when the kind is known, it must fit).
    pub(super) fn initial_value(
        &mut self,
        node: &Node,
        field: &str,
        kind: Option<TagType>,
    ) -> Option<InitialValue> {
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
        let compression = match self.string(&mut fields, "compression") {
            None => Compression::default(),
            Some(name) => self
                .one_of(
                    &fields,
                    "compression",
                    "compression",
                    &name,
                    &Compression::NAMES,
                    Compression::parse,
                )
                .unwrap_or_default(),
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
}
