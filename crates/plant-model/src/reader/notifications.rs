//! `[[notifications]]`: where alarm events are sent (a webhook or an MQTT source), which
//! alarms (a priority, some folders) and which events.

use super::{Fields, Places, Reader, span_of};
use crate::document::Node;
use crate::model::{NotificationSpec, NotifiedEvent, PlantModel, SourceKind, TagSpec};
use crate::names::{Quote, did_you_mean};

impl Reader<'_> {
    pub(super) fn notification(&mut self, node: &Node, path: &str) -> Option<NotificationSpec> {
        let mut fields = self.table(node, path)?;
        let name = self.name(&mut fields, "name");
        let webhook_span = span_of(&fields, "webhook");
        let webhook = self.string(&mut fields, "webhook").unwrap_or_default();
        let mqtt = self.string(&mut fields, "mqtt").unwrap_or_default();
        let token_span = span_of(&fields, "token");
        let token = self.string(&mut fields, "token").unwrap_or_default();
        let min_priority = self
            .whole(&mut fields, "min_priority", 1..=1000, "a priority")
            .map(|priority| {
                priority
                    .and_then(|priority| u32::try_from(priority).ok())
                    .unwrap_or(1)
            });
        let folders = self.notified_folders(&mut fields);
        let events = self.notified_events(&mut fields);
        match (webhook.is_empty(), mqtt.is_empty()) {
            (true, true) => self.error(
                fields.span.clone(),
                fields.field("webhook"),
                "give a webhook URL or the name of an MQTT source (mqtt)",
            ),
            (false, false) => self.error(
                webhook_span.clone().unwrap_or_else(|| fields.span.clone()),
                fields.field("webhook"),
                "give a webhook or mqtt, not both",
            ),
            _ => {}
        }
        if !webhook.is_empty() && !web_address(&webhook) {
            self.error(
                webhook_span.unwrap_or_else(|| fields.span.clone()),
                fields.field("webhook"),
                format!("{webhook:?} is not a webhook address: http://host[:port]/path or https://..."),
            );
        }
        if !token.is_empty() {
            let problem = if !token.starts_with("/secret:") {
                Some("give a /secret:<Name> token (tserver secrets PATH set <Name>), never the token itself")
            } else if webhook.is_empty() {
                Some("only a webhook takes a token")
            } else {
                None
            };
            if let Some(problem) = problem {
                self.error(
                    token_span.unwrap_or_else(|| fields.span.clone()),
                    fields.field("token"),
                    problem,
                );
            }
        }
        self.done(
            fields,
            &[
                "name",
                "webhook",
                "mqtt",
                "token",
                "min_priority",
                "folders",
                "events",
            ],
        );
        Some(NotificationSpec {
            name: name?,
            webhook,
            mqtt,
            token,
            min_priority: min_priority?,
            folders: folders?,
            events: events?,
        })
    }

    /// `folders`: UNS paths (absent: the whole plant).
    fn notified_folders(&mut self, fields: &mut Fields<'_>) -> Option<Vec<String>> {
        let field = fields.field("folders");
        let span = span_of(fields, "folders");
        let folders = self.strings(fields, "folders");
        let mut fine = true;
        for (index, folder) in folders.iter().enumerate() {
            if let Some(problem) = crate::names::problem(folder, true).or_else(|| {
                (folder.is_empty() || folder.split('/').any(str::is_empty))
                    .then(|| format!("{folder:?} is not a UNS folder: segments joined by '/', none empty"))
            }) {
                self.error(span.clone().unwrap_or(0..0), format!("{field}[{index}]"), problem);
                fine = false;
            }
        }
        fine.then_some(folders)
    }

    /// `events`: names of [`NotifiedEvent`]s (absent: the defaults), at least one.
    fn notified_events(&mut self, fields: &mut Fields<'_>) -> Option<Vec<NotifiedEvent>> {
        if fields.entries.iter().all(|(key, _)| key.name != "events") {
            return Some(NotifiedEvent::defaults());
        }
        let field = fields.field("events");
        let span = span_of(fields, "events").unwrap_or_else(|| fields.span.clone());
        let names = self.strings(fields, "events");
        let known: Vec<&str> = NotifiedEvent::ALL.iter().map(|event| event.name()).collect();
        let mut events = Vec::with_capacity(names.len());
        for (index, name) in names.iter().enumerate() {
            match NotifiedEvent::parse(name) {
                Some(event) if !events.contains(&event) => events.push(event),
                Some(_) => {}
                None => {
                    let hint = did_you_mean(name, known.iter().copied(), Quote::DoubleQuotes);
                    self.error(
                        span.clone(),
                        format!("{field}[{index}]"),
                        format!("unknown event {name:?}{hint}; one of: {}", known.join(", ")),
                    );
                    return None;
                }
            }
        }
        if events.is_empty() {
            self.error(span, field, "name at least one event");
            return None;
        }
        Some(events)
    }
}

/// Whether `url` is an `http://` or `https://` address with a host.
fn web_address(url: &str) -> bool {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    rest.and_then(|rest| rest.split(['/', '?', '#']).next())
        .is_some_and(|host| !host.is_empty() && !host.contains('@') && !host.contains(char::is_whitespace))
}

/// Each notification's `mqtt` names an MQTT source of the plant, and each of its `folders` has
/// a tag below it.
pub(super) fn check_notifications(
    reader: &mut Reader<'_>,
    model: &PlantModel,
    places: &Places<'_>,
    tags: &[TagSpec],
) {
    for (index, notification) in model.notifications.iter().enumerate() {
        let field = places.field("notifications", index);
        if !notification.mqtt.is_empty() {
            let source = model
                .sources
                .iter()
                .find(|source| source.name == notification.mqtt);
            let problem = match source {
                Some(source) if source.kind() == SourceKind::Mqtt => None,
                Some(_) => Some(format!("source {:?} is not an MQTT broker", notification.mqtt)),
                None if places.dropped_named("sources", &notification.mqtt) => None,
                None => {
                    let known = model
                        .sources
                        .iter()
                        .filter(|source| source.kind() == SourceKind::Mqtt)
                        .map(|source| source.name.as_str());
                    Some(format!(
                        "no MQTT source named {:?}{}",
                        notification.mqtt,
                        did_you_mean(&notification.mqtt, known, Quote::DoubleQuotes)
                    ))
                }
            };
            if let Some(problem) = problem {
                reader.error(
                    places.span("notifications", index, "mqtt"),
                    format!("{field}.mqtt"),
                    problem,
                );
            }
        }
        for (place, folder) in notification.folders.iter().enumerate() {
            let folded = crate::names::fold(folder);
            let below = tags.iter().any(|tag| {
                let path = crate::names::fold(&tag.path);
                path.strip_prefix(&folded)
                    .is_some_and(|rest| rest.starts_with('/'))
            });
            if !below {
                reader.error(
                    places.span("notifications", index, "folders"),
                    format!("{field}.folders[{place}]"),
                    format!("no tag is below {folder:?}"),
                );
            }
        }
    }
}
