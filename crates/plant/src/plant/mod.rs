//! The live plant: the object model and the historian together, so that every write, from the
//! simulator, a script or a client, updates the value, evaluates alarms and is recorded the
//! same way. The object model can be replaced whole (a new plant file was imported): readers
//! hold the snapshot they took, writers go to the current one.
//!
//! Writing is a capability: every method that changes a value, an alarm or the history takes a
//! [`WriteCapability`], which only this module can make (`write_capability.rs`) and only
//! [`Plant`] holds. The assistant's tools get a [`PlantReader`], which has none: they cannot
//! write, by type, not by convention.

mod flood;
mod library;
pub(crate) mod write_capability;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use arc_swap::ArcSwap;
use tokio::sync::watch;

pub use self::flood::AlarmFlood;
pub use self::library::{Instance, PlantLibrary};
use self::write_capability::WRITE;
pub use self::write_capability::WriteCapability;
use crate::actions::Audited;
use crate::historian::{Historian, Recording};
use crate::objects::{
    AcknowledgeError, HandlingError, ObjectModel, OutOfService, Shelving, TagSample, WriteError,
};
use plant_model::{AlarmEvent, Equipment, PlantDocument, PromptSpec, Quality, TagValue};

/// More alarms than this within 10 minutes is a flood until the settings are read (EEMUA 191).
const DEFAULT_FLOOD_COUNT: usize = 10;

/// Documents of at most this many bytes in all are indexed at once when a plant loads (a few
/// milliseconds); more are indexed on a thread of their own.
const INDEX_AT_ONCE_BYTES: usize = 1024 * 1024;

/// The object model with its historian. Cheap to clone; clones share everything.
#[derive(Debug, Clone)]
pub struct Plant {
    objects: Arc<ArcSwap<ObjectModel>>,
    /// The documents attached to the plant, searchable.
    library: Arc<ArcSwap<PlantLibrary>>,
    historian: Arc<Historian>,
    /// Counts every change (a write, an acknowledgement, a reload); subscribers wait on it.
    changes: Arc<watch::Sender<u64>>,
    /// Whether tags were loaded whose values the historian may not have taken yet
    /// ([`record_loaded_values`](Self::record_loaded_values)).
    loaded: Arc<AtomicBool>,
    /// The annunciated activations of the last 10 minutes, and the flood they make.
    floods: Arc<Floods>,
}

/// The flood watch and the count past which activations are a flood (`AlarmFloodCount`).
#[derive(Debug)]
struct Floods {
    watch: std::sync::Mutex<flood::FloodWatch>,
    count: std::sync::atomic::AtomicUsize,
}

impl Floods {
    fn watch(&self) -> std::sync::MutexGuard<'_, flood::FloodWatch> {
        self.watch
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes the activations among `events` of alarms annunciated in `objects`.
    fn take(&self, objects: &ObjectModel, events: &[AlarmEvent]) {
        let threshold = self.count.load(Ordering::Relaxed);
        let mut watch = None;
        for event in events {
            if event.kind == plant_model::AlarmEventKind::Active && objects.alarm_is_annunciated(&event.alarm)
            {
                watch
                    .get_or_insert_with(|| self.watch())
                    .activated(event.time, &event.alarm, threshold);
            }
        }
    }

    /// The flood going on at `now`, if any.
    fn at(&self, now: SystemTime) -> Option<AlarmFlood> {
        let threshold = self.count.load(Ordering::Relaxed);
        self.watch().at(now, threshold)
    }
}

/// The plant as the assistant's tools see it: tags, alarms and history to read, nothing to
/// write with. Cheap to clone.
#[derive(Debug, Clone)]
pub struct PlantReader {
    objects: Arc<ArcSwap<ObjectModel>>,
    library: Arc<ArcSwap<PlantLibrary>>,
    historian: Arc<Historian>,
    changes: Arc<watch::Sender<u64>>,
    floods: Arc<Floods>,
}

impl PlantReader {
    /// The alarm flood going on now, if any: more annunciated activations within 10 minutes
    /// than `AlarmFloodCount`.
    pub fn alarm_flood(&self) -> Option<AlarmFlood> {
        self.floods.at(SystemTime::now())
    }

    /// How the alarm system performed from `from` to `until`, read from the alarm history
    /// (flushed first) with floods judged on `AlarmFloodCount`: from a thread that may block.
    pub fn alarm_report(
        &self,
        from: SystemTime,
        until: SystemTime,
    ) -> Result<crate::alarm_report::AlarmReport, store::SolutionError> {
        let record = self
            .historian()
            .alarm_record(from, until, crate::alarm_report::MAX_REPORT_EVENTS)?;
        let flood_count = u32::try_from(self.floods.count.load(Ordering::Relaxed)).unwrap_or(u32::MAX);
        Ok(crate::alarm_report::AlarmReport::of(
            &record,
            (from, until),
            flood_count,
        ))
    }

    /// The live tags and alarms, as they are now.
    pub fn objects(&self) -> Arc<ObjectModel> {
        self.objects.load_full()
    }

    /// The documents attached to the plant, as they are now.
    pub fn library(&self) -> Arc<PlantLibrary> {
        self.library.load_full()
    }

    /// The history store, for its queries (its recording methods need a capability).
    pub fn historian(&self) -> &Arc<Historian> {
        &self.historian
    }

    /// A receiver that is told whenever the plant changes (a write, an acknowledgement, a
    /// reload); what changed is for the receiver to look up.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }
}

/// The tags of `objects` that keep their history for a time of their own, with it in hours.
fn own_retention(objects: &ObjectModel) -> Vec<(Arc<str>, u64)> {
    objects
        .tags()
        .filter_map(|tag| {
            let definition = tag.definition();
            let hours = definition.history.as_ref()?.retention_hours?;
            Some((Arc::from(definition.name.as_str()), hours))
        })
        .collect()
}

impl Plant {
    /// Joins a loaded object model to its historian, and raises the alarms its tags' values
    /// are already past (recorded like any other transition).
    pub fn new(objects: Arc<ObjectModel>, historian: Arc<Historian>) -> Self {
        let events = objects.evaluate_alarms(SystemTime::now(), &WRITE);
        historian.record_events(events, &WRITE);
        historian.set_own_retention(own_retention(&objects));
        Self {
            objects: Arc::new(ArcSwap::new(objects)),
            library: Arc::default(),
            historian,
            changes: Arc::new(watch::Sender::new(0)),
            loaded: Arc::new(AtomicBool::new(true)),
            floods: Arc::new(Floods {
                watch: std::sync::Mutex::default(),
                count: std::sync::atomic::AtomicUsize::new(DEFAULT_FLOOD_COUNT),
            }),
        }
    }

    /// More alarms than `count` within 10 minutes is a flood (`AlarmFloodCount`, followed live).
    pub fn set_alarm_flood_count(&self, count: u32) {
        let count = usize::try_from(count).unwrap_or(usize::MAX);
        self.floods.count.store(count, Ordering::Relaxed);
    }

    /// Records, once after each load of the plant, the value of every tag that keeps history
    /// and that the historian has taken nothing of since it started: a tag nobody writes still
    /// shows its value in its history. Called before a flush rather than at load, so history
    /// replayed into the past right after a load (the demo's) is recorded first, in order.
    pub fn record_loaded_values(&self) {
        if !self.loaded.swap(false, Ordering::Relaxed) {
            return;
        }
        let objects = self.objects.load();
        let mut recording = self.historian.recording(&WRITE);
        for tag in objects.tags() {
            let definition = tag.definition();
            if let Some(history) = &definition.history {
                recording.record_if_unseen(&definition.name, &tag.current(), history);
            }
        }
    }

    fn changed(&self) {
        self.changes.send_modify(|count| *count = count.wrapping_add(1));
    }

    /// The live tags and alarms, as they are now (a snapshot: a reload does not change it).
    pub fn objects(&self) -> Arc<ObjectModel> {
        self.objects.load_full()
    }

    /// Replaces the object model (a new plant definition), after it took over the live values
    /// and alarm states of the tags and alarms it shares with the current one; then every alarm
    /// is evaluated against the value its tag has now, so a new alarm, an alarm defined anew
    /// or a new tag's initial value raises what it is past at once.
    pub fn replace_objects(&self, next: ObjectModel) {
        next.adopt_live_state(&self.objects.load());
        let events = next.evaluate_alarms(SystemTime::now(), &WRITE);
        self.historian.record_events(events, &WRITE);
        self.historian.set_own_retention(own_retention(&next));
        self.objects.store(Arc::new(next));
        self.loaded.store(true, Ordering::Relaxed);
        self.changed();
    }

    /// Replaces the documents (an import changed them, or the plant was loaded).
    pub fn replace_library(&self, next: PlantLibrary) {
        self.library.store(Arc::new(next));
    }

    /// Indexes the documents of a plant being loaded: a small library at once, a larger one
    /// on a thread of its own while the library says it is indexing, so a starting server
    /// answers at once. A library stored meanwhile (an import) is newer and is kept.
    pub fn index_library(
        &self,
        documents: Vec<PlantDocument>,
        equipment: Vec<Equipment>,
        prompts: Vec<PromptSpec>,
    ) {
        let bytes: usize = documents.iter().map(|document| document.text.len()).sum();
        if bytes <= INDEX_AT_ONCE_BYTES {
            self.replace_library(PlantLibrary::new(documents, &equipment, &prompts));
            return;
        }
        let placeholder = Arc::new(PlantLibrary::indexing(&equipment, &prompts));
        self.library.store(Arc::clone(&placeholder));
        let library = Arc::clone(&self.library);
        let indexing = std::thread::Builder::new()
            .name("document-index".to_owned())
            .spawn(move || {
                let built = Arc::new(PlantLibrary::new(documents, &equipment, &prompts));
                library.compare_and_swap(&placeholder, built);
                tracing::info!(bytes, "the plant's documents are indexed");
            });
        if let Err(error) = indexing {
            tracing::error!(%error, "cannot start the thread that indexes the plant's documents; they stay unsearchable until the next import");
        }
    }

    /// The history store.
    pub fn historian(&self) -> &Arc<Historian> {
        &self.historian
    }

    /// How many are watching the plant's changes now (one per live subscription).
    pub fn change_watchers(&self) -> usize {
        self.changes.receiver_count()
    }

    /// A read-only view of this plant, for the assistant's tools.
    pub fn reader(&self) -> PlantReader {
        PlantReader {
            objects: Arc::clone(&self.objects),
            library: Arc::clone(&self.library),
            historian: Arc::clone(&self.historian),
            changes: Arc::clone(&self.changes),
            floods: Arc::clone(&self.floods),
        }
    }

    /// Writes a tag now; see [`write_at`](Self::write_at).
    pub fn write(&self, tag: &str, value: TagValue, quality: Quality) -> Result<Vec<AlarmEvent>, WriteError> {
        self.write_at(tag, value, quality, SystemTime::now())
    }

    /// Writes a tag as of `time`, evaluates its alarms, and queues the sample and the alarm
    /// transitions for the historian. Returns the transitions.
    pub fn write_at(
        &self,
        tag: &str,
        value: TagValue,
        quality: Quality,
        time: SystemTime,
    ) -> Result<Vec<AlarmEvent>, WriteError> {
        let objects = self.objects.load();
        let mut recording = self.historian.recording(&WRITE);
        let events = write_one(
            &objects,
            &mut recording,
            TagWrite {
                tag,
                value,
                quality,
                time,
            },
        )?;
        self.floods.take(&objects, &events);
        recording.record_events(events.clone());
        drop(recording);
        self.changed();
        Ok(events)
    }

    /// Writes every tag of `writes` as [`write_at`](Self::write_at) does, in order, as one
    /// change: the object model is loaded once, the historian's queue locked at most once, and
    /// the plant's watchers told once. Returns how many were written and why the others were
    /// refused.
    pub fn write_batch<'a>(&self, writes: impl IntoIterator<Item = TagWrite<'a>>) -> BatchWritten {
        let objects = self.objects.load();
        let mut recording = self.historian.recording(&WRITE);
        let mut written = BatchWritten::default();
        for write in writes {
            match write_one(&objects, &mut recording, write) {
                Ok(events) => {
                    self.floods.take(&objects, &events);
                    recording.record_events(events);
                    written.written += 1;
                }
                Err(error) => written.refused.push(error),
            }
        }
        drop(recording);
        if written.written > 0 {
            self.changed();
        }
        written
    }

    /// Applies an acknowledgement another node made (read from the shared history, where that
    /// node recorded it): the live alarm becomes acknowledged here too, and nothing is recorded
    /// again. Returns whether it had anything to acknowledge.
    pub(crate) fn acknowledged_elsewhere(&self, alarm: &str, user: &str, at: SystemTime) -> bool {
        let applied = matches!(
            self.objects.load().acknowledge(alarm, user, at, &WRITE),
            Ok(Some(_))
        );
        if applied {
            self.changed();
        }
        applied
    }

    /// Takes up a change of an alarm's handling another node made and recorded (shelving,
    /// service): the live alarm follows, and nothing is recorded again. Returns whether it
    /// changed anything.
    pub(crate) fn handled_elsewhere(&self, recorded: &AlarmEvent) -> bool {
        let applied = self.objects.load().handled_elsewhere(recorded, &WRITE);
        if applied {
            self.changed();
        }
        applied
    }

    /// Acknowledges an alarm for `user` now, an act whose audit is recorded; `Ok(false)` when
    /// it had nothing to acknowledge.
    pub fn acknowledge(&self, alarm: &str, user: &str, _: &Audited) -> Result<bool, AcknowledgeError> {
        self.acknowledge_now(alarm, user)
    }

    /// Acknowledges, for `user`, an alarm a replay of the simulated past left listed (a new
    /// demo solution's history): part of that replayed history, not an act on the plant.
    pub(crate) fn acknowledge_replayed(&self, alarm: &str, user: &str) {
        // Just listed by the caller, so it is known: nothing to report.
        let _ = self.acknowledge_now(alarm, user);
    }

    /// Shelves an alarm as `shelving` says, an act whose audit is recorded.
    pub fn shelve(&self, alarm: &str, shelving: Shelving, _: &Audited) -> Result<(), HandlingError> {
        let event = self.objects.load().shelve(alarm, shelving, &WRITE)?;
        self.handled(Some(event));
        Ok(())
    }

    /// Unshelves an alarm for `user` now, an act whose audit is recorded; `Ok(false)` when it
    /// was not shelved.
    pub fn unshelve(&self, alarm: &str, user: &str, _: &Audited) -> Result<bool, HandlingError> {
        let event = self
            .objects
            .load()
            .unshelve(alarm, user, SystemTime::now(), &WRITE)?;
        Ok(self.handled(event))
    }

    /// Takes an alarm out of service as `out` says, an act whose audit is recorded;
    /// `Ok(false)` when it was out of service already.
    pub fn remove_from_service(
        &self,
        alarm: &str,
        out: OutOfService,
        _: &Audited,
    ) -> Result<bool, HandlingError> {
        let event = self.objects.load().remove_from_service(alarm, out, &WRITE)?;
        Ok(self.handled(event))
    }

    /// Puts an alarm back in service for `user` now, an act whose audit is recorded;
    /// `Ok(false)` when it was in service.
    pub fn return_to_service(&self, alarm: &str, user: &str, _: &Audited) -> Result<bool, HandlingError> {
        let event = self
            .objects
            .load()
            .return_to_service(alarm, user, SystemTime::now(), &WRITE)?;
        Ok(self.handled(event))
    }

    /// Carries out every change of an alarm's condition whose `on_delay` or `off_delay` ran out
    /// by `now`, recorded as any transition.
    pub(crate) fn settle_alarm_delays(&self, now: SystemTime) {
        let objects = self.objects.load();
        let events = objects.settle_alarm_delays(now, &WRITE);
        self.floods.take(&objects, &events);
        if !events.is_empty() {
            self.historian.record_events(events, &WRITE);
            self.changed();
        }
    }

    /// Unshelves every alarm whose shelving ran out by `now`, their audit recorded.
    pub(crate) fn unshelve_due(&self, now: SystemTime, _: &Audited) {
        for event in self.objects.load().unshelve_due(now, &WRITE) {
            self.handled(Some(event));
        }
    }

    /// Records a change of an alarm's handling and tells the watchers; whether there was one.
    fn handled(&self, event: Option<AlarmEvent>) -> bool {
        let changed = event.is_some();
        self.historian.record_events(event, &WRITE);
        if changed {
            self.changed();
        }
        changed
    }

    fn acknowledge_now(&self, alarm: &str, user: &str) -> Result<bool, AcknowledgeError> {
        let event = self
            .objects
            .load()
            .acknowledge(alarm, user, SystemTime::now(), &WRITE)?;
        let acknowledged = event.is_some();
        self.historian.record_events(event, &WRITE);
        if acknowledged {
            self.changed();
        }
        Ok(acknowledged)
    }
}

/// One write of [`Plant::write_batch`].
#[derive(Debug, Clone, PartialEq)]
pub struct TagWrite<'a> {
    /// The tag's dotted name or UNS path.
    pub tag: &'a str,
    /// The new value.
    pub value: TagValue,
    /// Its quality.
    pub quality: Quality,
    /// When the value was taken.
    pub time: SystemTime,
}

/// What [`Plant::write_batch`] did.
#[derive(Debug, Default, PartialEq)]
pub struct BatchWritten {
    /// Writes applied.
    pub written: u64,
    /// Why each of the others was refused, in order.
    pub refused: Vec<WriteError>,
}

/// Writes one tag into `objects` and queues its sample in `recording` when the tag keeps
/// history; returns the alarm transitions for the caller to record.
fn write_one(
    objects: &ObjectModel,
    recording: &mut Recording<'_>,
    write: TagWrite<'_>,
) -> Result<Vec<AlarmEvent>, WriteError> {
    let tag = objects
        .tag(write.tag)
        .ok_or_else(|| WriteError::UnknownTag(write.tag.to_owned()))?;
    let sample = TagSample {
        value: write.value,
        quality: write.quality,
        timestamp: write.time,
    };
    let (sample, events) = objects.write_tag(tag, sample, &WRITE)?;
    let definition = tag.definition();
    if let Some(history) = &definition.history {
        recording.record(&definition.name, &sample, history);
    }
    Ok(events)
}
