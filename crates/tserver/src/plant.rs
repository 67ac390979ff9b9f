//! The live plant: the object model and the historian together, so that every write, from the
//! simulator, a script or a client, updates the value, evaluates alarms and is recorded the
//! same way.

use std::sync::Arc;
use std::time::SystemTime;

use crate::historian::Historian;
use crate::objects::{AcknowledgeError, AlarmEvent, ObjectModel, Quality, TagSample, TagValue, WriteError};

/// The object model with its historian. Cheap to clone; clones share everything.
#[derive(Debug, Clone)]
pub struct Plant {
    objects: Arc<ObjectModel>,
    historian: Arc<Historian>,
}

impl Plant {
    /// Joins a loaded object model to its historian.
    pub fn new(objects: Arc<ObjectModel>, historian: Arc<Historian>) -> Self {
        Self { objects, historian }
    }

    /// The live tags and alarms.
    pub fn objects(&self) -> &Arc<ObjectModel> {
        &self.objects
    }

    /// The history store.
    pub fn historian(&self) -> &Arc<Historian> {
        &self.historian
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
        let sample = TagSample {
            value: value.clone(),
            quality,
            timestamp: time,
        };
        let events = self.objects.write_at(tag, value, quality, time)?;
        if let Some(written) = self.objects.tag(tag) {
            self.historian.record(&written.definition().name, &sample);
        }
        self.historian.record_events(events.iter().cloned());
        Ok(events)
    }

    /// Acknowledges an alarm for `user` now; `Ok(false)` when it had nothing to acknowledge.
    pub fn acknowledge(&self, alarm: &str, user: &str) -> Result<bool, AcknowledgeError> {
        let event = self.objects.acknowledge(alarm, user, SystemTime::now())?;
        let acknowledged = event.is_some();
        self.historian.record_events(event);
        Ok(acknowledged)
    }
}
