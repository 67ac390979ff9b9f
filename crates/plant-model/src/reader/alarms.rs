//! `[[alarms]]`: an alarm's tag and condition, the limit or setpoint the condition needs, its
//! priority, and the texts an operator reads when it is raised.

use super::{Fields, Reader, join, span_of};
use crate::TagExpression;
use crate::document::{Node, Value};
use crate::model::{AlarmSpec, Condition, MAX_ALARM_DELAY_S, MAX_ALARM_TEXT_CHARS, MAX_TIME_TO_RESPOND_S};

impl Reader<'_> {
    pub(super) fn alarm(&mut self, node: &Node, path: &str) -> Option<AlarmSpec> {
        let mut fields = self.table(node, path)?;
        let name = self.name(&mut fields, "name");
        let tag = self.name(&mut fields, "tag");
        let condition = self.required_string(&mut fields, "condition").and_then(|text| {
            self.one_of(
                &fields,
                "condition",
                "condition",
                &text,
                &Condition::NAMES,
                Condition::parse,
            )
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
        let signed = self.boolean(&mut fields, "signed").unwrap_or(false);
        let on_delay = self.delay(&mut fields, "on_delay");
        let off_delay = self.delay(&mut fields, "off_delay");
        let suppress_when = self.suppress_when(&mut fields);
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
                "signed",
                "on_delay",
                "off_delay",
                "suppress_when",
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
            signed,
            on_delay: on_delay?,
            off_delay: off_delay?,
            suppress_when: suppress_when?,
        })
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

    /// An alarm's `on_delay` or `off_delay`: whole seconds from 0 to [`MAX_ALARM_DELAY_S`], 0
    /// when absent.
    fn delay(&mut self, fields: &mut Fields<'_>, key: &str) -> Option<u32> {
        let Some(node) = fields.get(key) else {
            return Some(0);
        };
        let problem = match &node.value {
            Value::Integer(seconds) => match u32::try_from(*seconds) {
                Ok(seconds) if seconds <= MAX_ALARM_DELAY_S => return Some(seconds),
                _ => format!("{seconds} is out of range: from 0 to {MAX_ALARM_DELAY_S} seconds (an hour)"),
            },
            other => format!("expected a whole number of seconds, found {}", other.kind()),
        };
        self.error(node.span.clone(), fields.field(key), problem);
        None
    }

    /// An alarm's `suppress_when`: an expression over tags (which tags exist and what they
    /// compare with is checked once every tag is known), `None` when absent. An error in it is
    /// placed at its character when the file writes the string without escapes.
    fn suppress_when(&mut self, fields: &mut Fields<'_>) -> Option<Option<TagExpression>> {
        let Some(span) = span_of(fields, "suppress_when") else {
            return Some(None);
        };
        let text = self.string(fields, "suppress_when")?;
        match TagExpression::parse(&text) {
            Ok(expression) => Some(Some(expression)),
            Err(error) => {
                let written = self.text.get(span.start + 1..span.end.saturating_sub(1));
                let place = match written {
                    Some(written) if written == text => {
                        let offset = text
                            .char_indices()
                            .nth(error.at - 1)
                            .map_or(text.len(), |(at, _)| at);
                        let start = span.start + 1 + offset;
                        start..start + 1
                    }
                    _ => span,
                };
                self.error(place, fields.field("suppress_when"), error.to_string());
                None
            }
        }
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
}
