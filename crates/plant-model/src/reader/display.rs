//! A tag's `display = { key, order, hide, normal_range, normal_state, states }`: how the
//! overview displays show it, each part checked against the tag's type, range and values.

use super::{Reader, join, span_of};
use crate::document::{Node, Value};
use crate::model::{DisplayMark, InitialValue, TagType};
use crate::names;

impl Reader<'_> {
    /// The display mark of a tag of `kind` (when known) with `values` and `range` (min, max).
    pub(super) fn display(
        &mut self,
        node: &Node,
        path: &str,
        kind: Option<TagType>,
        values: &[String],
        range: (Option<f64>, Option<f64>),
    ) -> Option<DisplayMark> {
        let mut fields = self.table(node, path)?;
        let key = self.boolean(&mut fields, "key").unwrap_or(false);
        let order = self
            .whole(&mut fields, "order", 1..=1_000_000, "a place")
            .flatten()
            .and_then(|order| u32::try_from(order).ok());
        let hide = self.boolean(&mut fields, "hide").unwrap_or(false);
        let normal_range = fields
            .get("normal_range")
            .and_then(|node| self.normal_range(node, &join(path, "normal_range"), range));
        let normal_state = fields
            .get("normal_state")
            .and_then(|node| self.initial_value(node, &join(path, "normal_state"), kind));
        let states = fields
            .get("states")
            .and_then(|node| self.state_words(node, &join(path, "states")));
        let at = |key: &str| span_of(&fields, key).unwrap_or_else(|| fields.span.clone());
        if key && hide {
            self.error(
                at("hide"),
                join(path, "hide"),
                "a key value is shown first: it cannot be hidden too",
            );
        }
        if let Some(kind) = kind {
            let state = kind == TagType::Bool || (kind == TagType::String && !values.is_empty());
            if normal_range.is_some() && !kind.is_numeric() {
                self.error(
                    at("normal_range"),
                    join(path, "normal_range"),
                    format!(
                        "only number and integer tags have a range; this is a {} tag",
                        kind.name()
                    ),
                );
            }
            if span_of(&fields, "normal_state").is_some() && !state {
                self.error(
                    at("normal_state"),
                    join(path, "normal_state"),
                    "only a state has a normal state: a bool tag, or a text tag with values",
                );
            }
            if let Some(InitialValue::String(text)) = &normal_state
                && let Some(problem) = names::outside_values(values, text)
            {
                self.error(at("normal_state"), join(path, "normal_state"), problem);
            }
            if states.is_some() && kind != TagType::Bool {
                self.error(
                    at("states"),
                    join(path, "states"),
                    format!(
                        "only bool tags are shown with a word for false and true; this is a {} tag",
                        kind.name()
                    ),
                );
            }
        }
        self.done(
            fields,
            &["key", "order", "hide", "normal_range", "normal_state", "states"],
        );
        Some(DisplayMark {
            key,
            order,
            hide,
            normal_range,
            normal_state,
            states,
        })
    }

    /// `[low, high]`: two numbers, low below high, within the tag's range where it has one.
    fn normal_range(
        &mut self,
        node: &Node,
        field: &str,
        (min, max): (Option<f64>, Option<f64>),
    ) -> Option<[f64; 2]> {
        let Value::Array(items) = &node.value else {
            self.error(
                node.span.clone(),
                field,
                format!("expected [low, high], found {}", node.value.kind()),
            );
            return None;
        };
        if items.len() != 2 {
            self.error(
                node.span.clone(),
                field,
                format!("expected [low, high], found {} numbers", items.len()),
            );
            return None;
        }
        let low = self.number_in(&items[0], &format!("{field}[0]"));
        let high = self.number_in(&items[1], &format!("{field}[1]"));
        let (low, high) = (low?, high?);
        if low >= high {
            self.error(
                node.span.clone(),
                field,
                format!("the low end {low} must be below the high end {high}"),
            );
            return None;
        }
        if min.is_some_and(|min| low < min) || max.is_some_and(|max| high > max) {
            let show = |end: Option<f64>| end.map(|end| end.to_string()).unwrap_or_default();
            self.error(
                node.span.clone(),
                field,
                format!(
                    "{low}..{high} reaches outside the tag's range {}..{}",
                    show(min),
                    show(max)
                ),
            );
            return None;
        }
        Some([low, high])
    }

    /// `["Stopped", "Running"]`: the words for false and true, distinct, short, plain text.
    fn state_words(&mut self, node: &Node, field: &str) -> Option<[String; 2]> {
        let words: Option<Vec<String>> = match &node.value {
            Value::Array(items) if items.len() == 2 => items
                .iter()
                .map(|item| match &item.value {
                    Value::String(text) => Some(names::normalize(text)),
                    _ => None,
                })
                .collect(),
            _ => None,
        };
        let Some([off, on]) = words.and_then(|words| <[String; 2]>::try_from(words).ok()) else {
            self.error(
                node.span.clone(),
                field,
                "expected two words, for false and true: [\"Stopped\", \"Running\"]",
            );
            return None;
        };
        let problem = [&off, &on].into_iter().find_map(|word| {
            if word.trim().is_empty() {
                Some("a state needs a word".to_owned())
            } else if word.chars().count() > DisplayMark::MAX_WORD_CHARS {
                Some(format!(
                    "{word:?} is too long; at most {} characters",
                    DisplayMark::MAX_WORD_CHARS
                ))
            } else {
                names::text_value_problem(word)
            }
        });
        let problem = problem.or_else(|| {
            (names::fold(&off) == names::fold(&on)).then(|| "false and true need different words".to_owned())
        });
        if let Some(problem) = problem {
            self.error(node.span.clone(), field, problem);
            return None;
        }
        Some([off, on])
    }
}
