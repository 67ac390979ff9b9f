//! The runtime object model: the live tags and alarms a display panel reads and the
//! assistant's tools see.
//!
//! Definitions come from the solution's `Tags` and `AlarmDefinitions` tables at startup;
//! current values and alarm states live in memory. A tag read is a hash-map lookup plus an
//! atomic load (`ArcSwap`), so readers never wait for a writer and never touch the database.

mod alarms;
mod uns;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;

pub use alarms::{
    AcknowledgeError, Alarm, AlarmDefinition, AlarmGuidance, AlarmHandling, AlarmState, AlarmStatus,
    CHATTER_TRIPS, CHATTER_WINDOW, Chatter, HandlingError, OutOfService, PendingChange, Shelving, span_words,
};
pub use uns::{Folder, is_below, join_path, mask_matches, normalize_path};

use plant_model::{AlarmEvent, ExpandedPlant, Quality, TagType, TagValue};
use store::SolutionError;

use crate::key_index::KeyIndex;
use crate::plant::write_capability::WriteCapability;

/// The keys a tag is found by, for the model's indexes.
fn name_of(tag: &Arc<Tag>) -> Cow<'_, str> {
    Cow::Borrowed(&tag.definition.name)
}

fn path_of(tag: &Arc<Tag>) -> Cow<'_, str> {
    Cow::Borrowed(&tag.definition.path)
}

fn folded_name_of(tag: &Arc<Tag>) -> Cow<'_, str> {
    Cow::Owned(plant_model::fold(&tag.definition.name))
}

fn folded_path_of(tag: &Arc<Tag>) -> Cow<'_, str> {
    Cow::Owned(plant_model::fold(&tag.definition.path))
}

/// A tag type as the runtime names it in refusals (`Text` for a string tag).
pub(crate) fn type_label(kind: TagType) -> &'static str {
    match kind {
        TagType::Number => "Number",
        TagType::Integer => "Integer",
        TagType::Bool => "Bool",
        TagType::String => "Text",
    }
}

/// A tag type as the runtime names it in tool answers and payload refusals: [`type_label`] in
/// lower case.
pub(crate) fn type_name(kind: TagType) -> &'static str {
    match kind {
        TagType::Number => "number",
        TagType::Integer => "integer",
        TagType::Bool => "bool",
        TagType::String => "text",
    }
}

/// A value with its quality and the time it was taken.
#[derive(Debug, Clone, PartialEq)]
pub struct TagSample {
    /// The value.
    pub value: TagValue,
    /// Its quality.
    pub quality: Quality,
    /// When it was taken.
    pub timestamp: SystemTime,
}

/// How a tag is defined in the solution.
#[derive(Debug, Clone, PartialEq)]
pub struct TagDefinition {
    /// The dotted name operators type, e.g. `Pump1.MotorCurrent`.
    pub name: String,
    /// The UNS path, e.g. `Plant/Area1/Pump1/MotorCurrent`.
    pub path: String,
    /// The data type.
    pub kind: TagType,
    /// Engineering units, possibly empty.
    pub units: String,
    /// What the tag measures.
    pub description: String,
    /// The lower end of the normal range, if defined.
    pub range_low: Option<f64>,
    /// The upper end of the normal range, if defined.
    pub range_high: Option<f64>,
    /// Whether operators may write it.
    pub writable: bool,
    /// Whether a write of it may be proposed for an operator to approve.
    pub proposable: bool,
    /// The electronic signatures a write of it takes.
    pub signing: plant_model::Signing,
    /// Text tags: the only values writes and proposals may give it (the plant file's
    /// `values`); empty for any text.
    pub allowed_values: Vec<String>,
    /// How its values are recorded, when they are.
    pub history: Option<plant_model::HistoryRule>,
    /// The MQTT source feeding it, if any: writes go out to the field through it.
    pub source: Option<String>,
    /// How the overview displays show it, when the plant file says.
    pub display: Option<plant_model::DisplayMark>,
}

/// One live tag.
#[derive(Debug)]
pub struct Tag {
    definition: TagDefinition,
    current: ArcSwap<TagSample>,
    /// Writes so far: a subscriber that saw version `v` and now sees `w` missed `w - v - 1`.
    version: AtomicU64,
    /// When it last had a Good value, milliseconds since the Unix epoch; 0 for never.
    last_good_ms: AtomicU64,
}

impl Tag {
    /// The definition.
    pub fn definition(&self) -> &TagDefinition {
        &self.definition
    }

    /// The current sample, without blocking any writer.
    pub fn current(&self) -> Arc<TagSample> {
        self.current.load_full()
    }

    /// How many times it was written (0 for its initial value). Read after
    /// [`current`](Self::current), a version never claims a sample older than the one read.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// When it last had a Good value: the time a display shows beside a Bad or Uncertain one.
    /// `None` when it has had none (since the model started, or was taken over on a reload).
    pub fn last_good(&self) -> Option<SystemTime> {
        match self.last_good_ms.load(Ordering::Acquire) {
            0 => None,
            ms => Some(UNIX_EPOCH + Duration::from_millis(ms)),
        }
    }

    /// Notes `sample` as the tag's latest: its time becomes the last good one if it is Good.
    fn note_good(&self, sample: &TagSample) {
        if sample.quality == Quality::GOOD {
            let ms = sample
                .timestamp
                .duration_since(UNIX_EPOCH)
                .map_or(0, |since| u64::try_from(since.as_millis()).unwrap_or(u64::MAX));
            self.last_good_ms.store(ms.max(1), Ordering::Release);
        }
    }
}

/// Why a write was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WriteError {
    /// No such tag.
    #[error("unknown tag {0:?}")]
    UnknownTag(String),
    /// The value's type does not match the tag's.
    #[error("tag {name:?} holds {} values", type_label(*expected))]
    WrongType {
        /// The tag.
        name: String,
        /// Its kind.
        expected: TagType,
    },
}

/// One equipment: a folder holding tags (whatever its depth), called by its last segment.
#[derive(Debug, Clone, Copy)]
pub struct Equipment<'m> {
    /// Its name: the last segment of its path, e.g. `Pump1`.
    pub name: &'m str,
    /// Its UNS path, e.g. `Plant/Area1/Pump1`.
    pub path: &'m str,
    /// Its folder, with the tags inside.
    pub folder: &'m Folder,
}

/// Every live tag and alarm of a solution. Tags are addressable by dotted name or UNS path,
/// exactly or ignoring case (Unicode NFC and case folding, as the plant file's names are unique).
#[derive(Debug, Default)]
pub struct ObjectModel {
    /// Every tag, in the order added; the indexes below hold positions in it.
    tags: Vec<Arc<Tag>>,
    by_name: KeyIndex,
    by_path: KeyIndex,
    by_folded_name: KeyIndex,
    by_folded_path: KeyIndex,
    folders: uns::FolderTree,
    alarms: Vec<Arc<Alarm>>,
    alarms_by_name: HashMap<String, Arc<Alarm>>,
    alarms_by_tag: HashMap<String, Vec<Arc<Alarm>>>,
    /// The alarms whose `suppress_when` reads a tag, by the tag's name: what a write of it
    /// evaluates besides the tag's own alarms.
    suppressions_by_tag: HashMap<String, Vec<Arc<Alarm>>>,
    /// The descriptions the plant file gives folders, by folded path.
    folder_descriptions: HashMap<String, String>,
}

impl ObjectModel {
    /// The model of a plant's definitions: each tag starts at its initial value (Good) or,
    /// without one, at zero with Bad quality; each alarm starts normal.
    pub fn from_definitions(plant: &ExpandedPlant) -> Result<Self, SolutionError> {
        let now = SystemTime::now();
        let mut model = Self::with_capacity(plant.tags.len());
        for tag in &plant.tags {
            let kind = tag.kind;
            let sample = match &tag.initial {
                Some(initial) => TagSample {
                    value: TagValue::parse(kind, &initial.to_text()).ok_or_else(|| {
                        SolutionError::InvalidTag {
                            name: tag.name.clone(),
                            reason: format!("initial value is not a {}", type_label(kind)),
                        }
                    })?,
                    quality: Quality::GOOD,
                    timestamp: now,
                },
                None => TagSample {
                    value: TagValue::zero(kind),
                    quality: Quality::BAD,
                    timestamp: now,
                },
            };
            model.insert(
                TagDefinition {
                    name: tag.name.clone(),
                    path: tag.path.clone(),
                    kind,
                    units: tag.unit.clone(),
                    description: tag.description.clone(),
                    range_low: tag.min,
                    range_high: tag.max,
                    writable: tag.writable,
                    proposable: tag.proposable,
                    signing: tag.signing(),
                    allowed_values: tag.values.clone(),
                    history: tag.history.recording(kind, tag.min, tag.max),
                    source: tag
                        .source
                        .as_ref()
                        .map(|binding| binding.source_name().to_owned()),
                    display: tag.display.clone(),
                },
                sample,
            );
        }
        for folder in &plant.folders {
            model.describe_folder(&folder.path, &folder.description);
        }
        for alarm in &plant.alarms {
            let definition = AlarmDefinition {
                name: alarm.name.clone(),
                tag: alarm.tag.clone(),
                condition: alarm.condition,
                limit: alarm.limit.unwrap_or(0.0),
                setpoint: alarm.setpoint,
                active_when: alarm.active_when.unwrap_or(true),
                deadband: alarm.deadband,
                priority: alarm.priority,
                message: alarm.message.clone(),
                guidance: AlarmGuidance {
                    cause: alarm.cause.clone(),
                    consequence: alarm.consequence.clone(),
                    response: alarm.response.clone(),
                    time_to_respond: alarm.time_to_respond,
                },
                signed: alarm.signed,
                on_delay: std::time::Duration::from_secs(u64::from(alarm.on_delay)),
                off_delay: std::time::Duration::from_secs(u64::from(alarm.off_delay)),
                suppress_when: alarm.suppress_when.clone(),
            };
            model
                .add_alarm(definition)
                .map_err(|reason| SolutionError::InvalidTag {
                    name: alarm.tag.clone(),
                    reason,
                })?;
        }
        Ok(model)
    }

    /// Takes over what `previous` knows live: the current sample of each tag with the same
    /// name and type, and the state of each alarm defined the same (its guidance may differ:
    /// rewording what to do about an alarm does not make it a new one). Called on a model not yet
    /// in use, just before it replaces `previous`.
    pub fn adopt_live_state(&self, previous: &ObjectModel) {
        for tag in self.by_name.positions().map(|position| &self.tags[position]) {
            if let Some(old) = previous.tag_named(&tag.definition.name)
                && old.definition.kind == tag.definition.kind
            {
                tag.current.store(old.current());
                tag.version.store(old.version(), Ordering::Release);
                tag.last_good_ms
                    .store(old.last_good_ms.load(Ordering::Acquire), Ordering::Release);
            }
        }
        for (name, alarm) in &self.alarms_by_name {
            if let Some(old) = previous.alarms_by_name.get(name)
                && old.definition().same_apart_from_handling(alarm.definition())
            {
                alarm.adopt_status(old);
            }
        }
    }

    /// Takes up what the alarm history recorded of each alarm since its last trip (oldest
    /// first): whether it is still in alarm, since when, and whether it was acknowledged. Called
    /// on a model not yet in use, when a server starts, so a restart neither forgets an
    /// unacknowledged alarm nor asks again for an acknowledgement already given. Events of
    /// alarms no longer defined are skipped.
    pub fn restore_alarm_states(&self, recorded: &[AlarmEvent]) {
        for event in recorded {
            if let Some(alarm) = self.alarms_by_name.get(&event.alarm) {
                alarm.replay(event);
            }
        }
    }

    /// Takes up how the store keeps each alarm handled (shelved, out of service), when a
    /// server starts; a shelving that ran out meanwhile is unshelved, audited, by the
    /// background work's next look. Alarms no longer defined are skipped.
    pub fn restore_alarm_handling(&self, kept: &[store::KeptHandling]) {
        for event in kept {
            if let Some(alarm) = self.alarms_by_name.get(&event.alarm) {
                alarm.restore_handling(event);
            }
        }
    }

    /// Evaluates every alarm against its tag's current value (not one of Bad quality), as a
    /// write would: how an alarm whose tag is already past its limit is raised when the model
    /// starts, when a reload brings a new or changed alarm, or a new tag with its initial value.
    /// Returns the transitions, for the alarm history.
    /// Suppressions by design are evaluated first, so an alarm suppressed at start is never
    /// annunciated.
    pub fn evaluate_alarms(&self, time: SystemTime, _: &WriteCapability) -> Vec<AlarmEvent> {
        let suppressions = self
            .alarms
            .iter()
            .filter_map(|alarm| self.evaluate_suppression(alarm, time));
        let trips = self.alarms.iter().filter_map(|alarm| {
            let sample = self.tag_named(&alarm.definition().tag)?.current();
            let number = sample.value.as_f64().filter(|_| sample.quality != Quality::BAD)?;
            alarm.evaluate(number, time)
        });
        suppressions
            .collect::<Vec<_>>()
            .into_iter()
            .chain(trips)
            .collect()
    }

    /// Whether the alarm's `suppress_when` holds now (a tag of Bad quality is not known, and
    /// suppresses nothing unless the rest decides it), applied at `time`: the event if it
    /// changed.
    fn evaluate_suppression(&self, alarm: &Alarm, time: SystemTime) -> Option<AlarmEvent> {
        let expression = alarm.definition().suppress_when.as_ref()?;
        let holds = expression.evaluate(&|name| {
            let sample = self.tag_named(name)?.current();
            (sample.quality != Quality::BAD).then(|| sample.value.operand())
        });
        alarm.suppress(holds == Some(true), time)
    }

    /// An empty model with room for `tags` tags.
    fn with_capacity(tags: usize) -> Self {
        Self {
            tags: Vec::with_capacity(tags),
            by_name: KeyIndex::with_capacity(tags),
            by_path: KeyIndex::with_capacity(tags),
            by_folded_name: KeyIndex::with_capacity(tags),
            by_folded_path: KeyIndex::with_capacity(tags),
            ..Self::default()
        }
    }

    /// Adds a tag (used by `load` and by tests that build a plant in memory); one of the same
    /// name, path or folded name or path is no longer found by it.
    pub fn insert(&mut self, definition: TagDefinition, sample: TagSample) {
        let tag = Arc::new(Tag {
            definition,
            version: AtomicU64::new(0),
            last_good_ms: AtomicU64::new(0),
            current: ArcSwap::from_pointee(sample.clone()),
        });
        tag.note_good(&sample);
        self.folders.add_tag(&tag.definition.path);
        let position = self.tags.len();
        self.tags.push(tag);
        self.by_name.insert(&self.tags, position, name_of);
        self.by_path.insert(&self.tags, position, path_of);
        self.by_folded_name.insert(&self.tags, position, folded_name_of);
        self.by_folded_path.insert(&self.tags, position, folded_path_of);
    }

    /// The tag of exactly that dotted name.
    fn tag_named(&self, name: &str) -> Option<&Arc<Tag>> {
        self.by_name
            .get(&self.tags, name, name_of)
            .map(|position| &self.tags[position])
    }

    /// Adds an alarm on a tag already in the model (a numeric one: alarms compare numbers).
    pub fn add_alarm(&mut self, definition: AlarmDefinition) -> Result<(), String> {
        let tag = self
            .tag_named(&definition.tag)
            .ok_or_else(|| format!("alarm on unknown tag {:?}", definition.tag))?;
        if tag.definition.kind == TagType::String {
            return Err(format!("alarm on text tag {:?}", definition.tag));
        }
        if self.alarms_by_name.contains_key(&definition.name) {
            return Err(format!("two alarms named {:?}", definition.name));
        }
        let alarm = Arc::new(Alarm::new(definition));
        let definition = alarm.definition();
        if let Some(expression) = &definition.suppress_when {
            for tag in expression.tags() {
                self.suppressions_by_tag
                    .entry(tag.to_owned())
                    .or_default()
                    .push(Arc::clone(&alarm));
            }
        }
        self.alarms_by_tag
            .entry(definition.tag.clone())
            .or_default()
            .push(Arc::clone(&alarm));
        self.alarms_by_name
            .insert(definition.name.clone(), Arc::clone(&alarm));
        self.alarms.push(alarm);
        Ok(())
    }

    /// The tag with that dotted name or UNS path, matched exactly first and then ignoring
    /// case and Unicode composition (operators and models do not always type the case right,
    /// and keyboards differ in how they write an accent).
    pub fn tag(&self, name_or_path: &str) -> Option<&Arc<Tag>> {
        let name_or_path = name_or_path.trim();
        let path = uns::normalize_path(name_or_path);
        let position = self
            .by_name
            .get(&self.tags, name_or_path, name_of)
            .or_else(|| self.by_path.get(&self.tags, path, path_of))
            .or_else(|| {
                let folded = plant_model::fold(path);
                self.by_folded_name
                    .get(&self.tags, &folded, folded_name_of)
                    .or_else(|| self.by_folded_path.get(&self.tags, &folded, folded_path_of))
            })?;
        Some(&self.tags[position])
    }

    /// Every tag, grouped by folder, folders in path order.
    pub fn tags(&self) -> impl Iterator<Item = &Arc<Tag>> {
        self.folders
            .iter()
            .flat_map(|(_, folder)| folder.tags.iter())
            .filter_map(|path| self.by_path.get(&self.tags, path, path_of))
            .map(|position| &self.tags[position])
    }

    /// The folder at a UNS path (the root is `""`), matched exactly or ignoring case;
    /// returns the folder's canonical path with it.
    pub fn folder(&self, path: &str) -> Option<(&str, &Folder)> {
        let path = uns::normalize_path(path);
        if let Some((found, folder)) = self.folders.get(path) {
            return Some((found, folder));
        }
        let folded = plant_model::fold(path);
        self.folders
            .iter()
            .find(|(known, _)| plant_model::fold(known) == folded)
            .map(|(found, folder)| (found.as_str(), folder))
    }

    /// Gives the folder at `path` a description (used by `from_definitions` and by tests).
    pub fn describe_folder(&mut self, path: &str, description: &str) {
        self.folder_descriptions.insert(
            plant_model::fold(uns::normalize_path(path)),
            description.to_owned(),
        );
    }

    /// The description the plant gives the folder at `path`; empty when it gives none.
    pub fn folder_description(&self, path: &str) -> &str {
        self.folder_descriptions
            .get(&plant_model::fold(uns::normalize_path(path)))
            .map_or("", String::as_str)
    }

    /// Every folder with its path, sorted by path (the root first).
    pub fn folders(&self) -> impl Iterator<Item = (&str, &Folder)> {
        self.folders.iter().map(|(path, folder)| (path.as_str(), folder))
    }

    /// Every equipment (a folder holding tags), in path order.
    pub fn equipment(&self) -> impl Iterator<Item = Equipment<'_>> {
        self.folders()
            .filter(|(path, folder)| !path.is_empty() && !folder.tags.is_empty())
            .map(|(path, folder)| Equipment {
                name: path.rsplit('/').next().unwrap_or(path),
                path,
                folder,
            })
    }

    /// Every alarm, in definition order.
    pub fn alarms(&self) -> &[Arc<Alarm>] {
        &self.alarms
    }

    /// Whether the alarm named `name` is annunciated: neither shelved nor out of service (false
    /// for no such alarm).
    pub fn alarm_is_annunciated(&self, name: &str) -> bool {
        self.alarms_by_name
            .get(name)
            .is_some_and(|alarm| alarm.status().handling.annunciated())
    }

    /// Whether acknowledging the alarm named `name` takes a signature (false for no such alarm).
    pub fn alarm_is_signed(&self, name: &str) -> bool {
        self.alarms_by_name
            .get(name)
            .is_some_and(|alarm| alarm.definition().signed)
    }

    /// The alarm of exactly that name.
    pub fn alarm(&self, name: &str) -> Option<&Arc<Alarm>> {
        self.alarms_by_name.get(name)
    }

    /// The folder at `path` (matched as [`folder`](Self::folder) matches it, its canonical
    /// path given) and the alarms on the tags below it, in definition order; `None` when there
    /// is no such folder.
    pub fn alarms_below(&self, path: &str) -> Option<(&str, Vec<&Arc<Alarm>>)> {
        let (folder, _) = self.folder(path)?;
        let below = |tag_path: &str| {
            folder.is_empty()
                || tag_path
                    .strip_prefix(folder)
                    .is_some_and(|rest| rest.starts_with('/'))
        };
        let alarms = self
            .alarms
            .iter()
            .filter(|alarm| {
                self.tag_named(&alarm.definition().tag)
                    .is_some_and(|tag| below(&tag.definition.path))
            })
            .collect();
        Some((folder, alarms))
    }

    /// The alarms on a tag (by dotted name).
    pub fn alarms_of(&self, tag_name: &str) -> &[Arc<Alarm>] {
        self.alarms_by_tag.get(tag_name).map_or(&[], Vec::as_slice)
    }

    /// The number of tags.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// Whether the model has no tags.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Sets a tag's value as of `time` and evaluates the tag's alarms (values of Bad quality
    /// are not evaluated: a broken sensor is not a process alarm). Readers see either the old
    /// or the new sample, never a mix. Returns the alarm transitions the value caused.
    /// Only a holder of the plant's [`WriteCapability`] can call it (see `crate::plant`).
    pub fn write_at(
        &self,
        name_or_path: &str,
        value: TagValue,
        quality: Quality,
        time: SystemTime,
        capability: &WriteCapability,
    ) -> Result<Vec<AlarmEvent>, WriteError> {
        let tag = self
            .tag(name_or_path)
            .ok_or_else(|| WriteError::UnknownTag(name_or_path.to_owned()))?;
        let sample = TagSample {
            value,
            quality,
            timestamp: time,
        };
        self.write_tag(tag, sample, capability).map(|(_, events)| events)
    }

    /// [`write_at`](Self::write_at) of a tag already found: returns the sample as stored (for
    /// the historian) with the alarm transitions.
    pub(crate) fn write_tag(
        &self,
        tag: &Tag,
        sample: TagSample,
        _: &WriteCapability,
    ) -> Result<(Arc<TagSample>, Vec<AlarmEvent>), WriteError> {
        if !sample.value.is(tag.definition.kind) {
            return Err(WriteError::WrongType {
                name: tag.definition.name.clone(),
                expected: tag.definition.kind,
            });
        }
        let number = sample.value.as_f64().filter(|_| sample.quality != Quality::BAD);
        let time = sample.timestamp;
        let sample = Arc::new(sample);
        tag.note_good(&sample);
        tag.current.store(Arc::clone(&sample));
        tag.version.fetch_add(1, Ordering::Release);
        // Suppressions first: a value that both suppresses an alarm and trips it is not
        // annunciated. A value of Bad quality may end a suppression (it is no longer known).
        let mut events: Vec<AlarmEvent> = match self.suppressions_by_tag.get(&tag.definition.name) {
            Some(alarms) => alarms
                .iter()
                .filter_map(|alarm| self.evaluate_suppression(alarm, time))
                .collect(),
            None => Vec::new(),
        };
        if let Some(number) = number {
            events.extend(
                self.alarms_of(&tag.definition.name)
                    .iter()
                    .filter_map(|alarm| alarm.evaluate(number, time)),
            );
        }
        Ok((sample, events))
    }

    /// Shelves the alarm named `alarm` as `shelving` says.
    pub fn shelve(
        &self,
        alarm: &str,
        shelving: Shelving,
        _: &WriteCapability,
    ) -> Result<AlarmEvent, HandlingError> {
        self.alarm_named(alarm)?.shelve(shelving)
    }

    /// Unshelves the alarm named `alarm` for `user` at `time`; `Ok(None)` when it was not
    /// shelved.
    pub fn unshelve(
        &self,
        alarm: &str,
        user: &str,
        time: SystemTime,
        _: &WriteCapability,
    ) -> Result<Option<AlarmEvent>, HandlingError> {
        Ok(self.alarm_named(alarm)?.unshelve(Some(user), time))
    }

    /// Carries out every change of condition whose delay ran out by `now`: their events.
    pub fn settle_alarm_delays(&self, now: SystemTime, _: &WriteCapability) -> Vec<AlarmEvent> {
        self.alarms
            .iter()
            .filter_map(|alarm| alarm.settle_delay(now))
            .collect()
    }

    /// Unshelves every alarm whose shelving ran out by `now`: their events.
    pub fn unshelve_due(&self, now: SystemTime, _: &WriteCapability) -> Vec<AlarmEvent> {
        self.alarms
            .iter()
            .filter_map(|alarm| alarm.unshelve_if_due(now))
            .collect()
    }

    /// Takes the alarm named `alarm` out of service as `out` says; `Ok(None)` when it was out
    /// already.
    pub fn remove_from_service(
        &self,
        alarm: &str,
        out: OutOfService,
        _: &WriteCapability,
    ) -> Result<Option<AlarmEvent>, HandlingError> {
        Ok(self.alarm_named(alarm)?.remove_from_service(out))
    }

    /// Puts the alarm named `alarm` back in service for `user` at `time`; `Ok(None)` when it
    /// was in service.
    pub fn return_to_service(
        &self,
        alarm: &str,
        user: &str,
        time: SystemTime,
        _: &WriteCapability,
    ) -> Result<Option<AlarmEvent>, HandlingError> {
        Ok(self.alarm_named(alarm)?.return_to_service(user, time))
    }

    /// Takes up a change of an alarm's handling another node recorded (a handling event),
    /// unless changed here since: whether it changed anything. Unknown alarms are skipped.
    pub fn handled_elsewhere(&self, recorded: &AlarmEvent, _: &WriteCapability) -> bool {
        self.alarms_by_name
            .get(&recorded.alarm)
            .is_some_and(|alarm| alarm.handled_elsewhere(recorded))
    }

    fn alarm_named(&self, alarm: &str) -> Result<&Arc<Alarm>, HandlingError> {
        self.alarms_by_name
            .get(alarm)
            .ok_or_else(|| HandlingError::UnknownAlarm(alarm.to_owned()))
    }

    /// Acknowledges an alarm by name; `Ok(None)` when it had nothing to acknowledge.
    pub fn acknowledge(
        &self,
        alarm: &str,
        user: &str,
        time: SystemTime,
        _: &WriteCapability,
    ) -> Result<Option<AlarmEvent>, AcknowledgeError> {
        self.alarms_by_name
            .get(alarm)
            .ok_or_else(|| AcknowledgeError::UnknownAlarm(alarm.to_owned()))
            .map(|found| found.acknowledge(user, time))
    }
}
