//! The historian: tag samples and alarm transitions kept in the solution database for a
//! retention period, and the queries the history tools run on them. Which samples are kept
//! is [`recorder`]'s: every change is a candidate, compressed within the tag's deviation.
//!
//! Writers (the simulator, tag writes) only append to an in-memory queue under a short lock;
//! [`Historian::flush`] moves the queue to the store in one transaction and prunes what is
//! older than the retention. Queries flush first, so they see every sample recorded before
//! them. Every method that touches the store blocks: async callers run it on the blocking pool.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use plant_model::{AlarmEvent, HistoryRule, TagType};
use store::{
    AlarmHistoryPage, HistoryCursor, HistoryInterval, HistoryLimits, HistoryPage, PendingSample,
    RawHistoryPage, SolutionError, Store,
};

use crate::objects::TagSample;
use crate::plant::write_capability::WriteCapability;

pub mod recorder;

pub use recorder::{MAX_INTERVAL, TagRecorder};

/// Queued rows kept while the database cannot be written; past this the oldest are dropped
/// (and counted in the log) rather than letting memory grow without bound.
const MAX_QUEUED: usize = 100_000;

#[derive(Debug, Default)]
struct Queue {
    samples: Vec<PendingSample>,
    events: Vec<AlarmEvent>,
    /// What each tag's recorder has seen, by tag.
    recorders: HashMap<Arc<str>, TagRecorder>,
    dropped: u64,
}

impl Queue {
    /// Stores the held end of `tag`'s current line (see [`TagRecorder::close`]).
    fn close_line(&mut self, tag: &str) {
        let Some(held) = self.recorders.get_mut(tag).and_then(TagRecorder::close) else {
            return;
        };
        if let Some((name, _)) = self.recorders.get_key_value(tag) {
            self.samples.push(PendingSample {
                tag: Arc::clone(name),
                time: held.timestamp,
                value: held.value,
                quality: held.quality,
            });
        }
    }

    /// See [`Historian::record`].
    fn record(&mut self, tag: &str, sample: &TagSample, rule: &HistoryRule) {
        let stored = match self.recorders.get_mut(tag) {
            Some(recorder) => recorder.take(sample, rule),
            None => {
                self.recorders.insert(Arc::from(tag), TagRecorder::new(sample));
                vec![sample.clone()]
            }
        };
        if stored.is_empty() {
            return;
        }
        let tag: Arc<str> = match self.recorders.get_key_value(tag) {
            Some((known, _)) => Arc::clone(known),
            None => Arc::from(tag),
        };
        for sample in stored {
            self.samples.push(PendingSample {
                tag: Arc::clone(&tag),
                time: sample.timestamp,
                value: sample.value,
                quality: sample.quality,
            });
        }
        if self.samples.len() > MAX_QUEUED {
            let excess = self.samples.len() - MAX_QUEUED;
            self.samples.drain(..excess);
            self.dropped += excess as u64;
        }
    }

    /// See [`Historian::record_events`].
    fn record_events(&mut self, events: impl IntoIterator<Item = AlarmEvent>) {
        self.events.extend(events);
        if self.events.len() > MAX_QUEUED {
            let excess = self.events.len() - MAX_QUEUED;
            self.events.drain(..excess);
            self.dropped += excess as u64;
        }
    }
}

/// The rows one batch of writes queues: the historian's queue is locked at the first and held
/// to the end of the batch (a flush waits for one batch at most).
#[derive(Debug)]
pub(crate) struct Recording<'a> {
    historian: &'a Historian,
    queue: Option<MutexGuard<'a, Queue>>,
}

impl Recording<'_> {
    fn queue(&mut self) -> &mut Queue {
        self.queue.get_or_insert_with(|| self.historian.queue())
    }

    /// See [`Historian::record`].
    pub(crate) fn record(&mut self, tag: &str, sample: &TagSample, rule: &HistoryRule) {
        self.queue().record(tag, sample, rule);
    }

    /// Records `sample` of `tag` when the historian has taken none of the tag's since it
    /// started: the value a tag holds from the start (its initial value, or Bad until its
    /// source answers) is recorded even when nothing ever writes it.
    pub(crate) fn record_if_unseen(&mut self, tag: &str, sample: &TagSample, rule: &HistoryRule) {
        let queue = self.queue();
        if !queue.recorders.contains_key(tag) {
            queue.record(tag, sample, rule);
        }
    }

    /// Queues `events` (nothing is locked when there are none).
    pub(crate) fn record_events(&mut self, events: Vec<AlarmEvent>) {
        if !events.is_empty() {
            self.queue().record_events(events);
        }
    }
}

/// The historian of one solution.
#[derive(Debug)]
pub struct Historian {
    store: Arc<Store>,
    /// How long rows are kept, in milliseconds: `HistoryRetentionHours`, followed live.
    retention_ms: AtomicU64,
    /// The most bytes the history's blocks take, 0 for no bound: `HistoryMaxBytes`, followed
    /// live.
    max_bytes: AtomicU64,
    /// The tags that keep their samples for a time of their own (`history.retention_hours`),
    /// followed as the plant changes.
    own_retention: Mutex<Arc<HashMap<Arc<str>, Duration>>>,
    queue: Mutex<Queue>,
    /// Held through a flush, so flushes take and put back the queue one at a time.
    flushing: Mutex<()>,
    /// Whether this node records what every node sees alike (samples, alarms becoming active
    /// or clear): on a database several nodes share, only the leader does, so each sample is
    /// stored once. What happens on this node alone (an acknowledgement) is always recorded.
    records_shared: AtomicBool,
    /// Where the alarm events this node records for every node go once stored: the
    /// notifications' dispatcher, when there are notifications.
    notify: Mutex<Option<tokio::sync::mpsc::Sender<Vec<AlarmEvent>>>>,
}

impl Historian {
    /// A historian writing to `store`, keeping samples and events for `retention`.
    pub fn new(store: Arc<Store>, retention: Duration) -> Self {
        Self {
            store,
            retention_ms: AtomicU64::new(u64::try_from(retention.as_millis()).unwrap_or(u64::MAX)),
            max_bytes: AtomicU64::new(0),
            own_retention: Mutex::default(),
            queue: Mutex::new(Queue::default()),
            flushing: Mutex::new(()),
            records_shared: AtomicBool::new(true),
            notify: Mutex::new(None),
        }
    }

    /// Hands the alarm events stored from now on (by this node, for every node) to `to`
    /// (`None`: to nobody).
    pub(crate) fn notify_to(&self, to: Option<tokio::sync::mpsc::Sender<Vec<AlarmEvent>>>) {
        *self.notify.lock().unwrap_or_else(PoisonError::into_inner) = to;
    }

    /// Whether this node records what every node sees alike (it leads).
    pub(crate) fn records_shared(&self) -> bool {
        self.records_shared.load(Ordering::Relaxed)
    }

    /// Whether this node stores the samples and alarm transitions every node sees alike (see
    /// `records_shared`); set by the runtime from its leadership.
    pub(crate) fn set_records_shared(&self, records: bool) {
        self.records_shared.store(records, Ordering::Relaxed);
    }

    /// How long samples and events are kept.
    pub fn retention(&self) -> Duration {
        Duration::from_millis(self.retention_ms.load(Ordering::Relaxed))
    }

    /// Keeps samples and events for `retention` from the next flush on (a changed
    /// `HistoryRetentionHours`).
    pub(crate) fn set_retention(&self, retention: Duration) {
        let ms = u64::try_from(retention.as_millis()).unwrap_or(u64::MAX);
        if self.retention_ms.swap(ms, Ordering::Relaxed) != ms {
            tracing::info!(?retention, "history retention changed");
        }
    }

    /// Keeps each of `tags` (dotted name, hours) for its own time from the next flush on, and
    /// every other tag for `HistoryRetentionHours` (the plant was loaded or changed).
    pub(crate) fn set_own_retention(&self, tags: impl IntoIterator<Item = (Arc<str>, u64)>) {
        let own: HashMap<Arc<str>, Duration> = tags
            .into_iter()
            .map(|(tag, hours)| (tag, Duration::from_secs(hours.saturating_mul(3600))))
            .collect();
        *self.own_retention.lock().unwrap_or_else(PoisonError::into_inner) = Arc::new(own);
    }

    fn own_retention(&self) -> Arc<HashMap<Arc<str>, Duration>> {
        Arc::clone(&self.own_retention.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn queue(&self) -> MutexGuard<'_, Queue> {
        // The queue is plain data changed in single steps; a panic elsewhere leaves it usable.
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes a tag sample, queueing what its recorder stores of it as the tag's history `rule`
    /// says (see [`recorder`]).
    pub fn record(&self, tag: &str, sample: &TagSample, rule: &HistoryRule, _: &WriteCapability) {
        self.queue().record(tag, sample, rule);
    }

    /// Queues alarm transitions.
    pub fn record_events(&self, events: impl IntoIterator<Item = AlarmEvent>, _: &WriteCapability) {
        self.queue().record_events(events);
    }

    /// What one batch of writes queues, under one lock taken at its first row (a batch that
    /// records nothing takes none).
    pub(crate) fn recording(&self, _: &WriteCapability) -> Recording<'_> {
        Recording {
            historian: self,
            queue: None,
        }
    }

    /// Writes everything queued in one transaction and prunes rows older than the retention.
    /// Returns the number of rows written. On failure the rows stay queued for the next flush.
    pub fn flush(&self) -> Result<usize, SolutionError> {
        // The kept writer would go on writing into a file that is gone: rows stay queued.
        self.store.refuse_if_lost()?;
        let _flushing = self.flushing.lock().unwrap_or_else(PoisonError::into_inner);
        let (samples, mut events, dropped) = {
            let mut queue = self.queue();
            (
                std::mem::take(&mut queue.samples),
                std::mem::take(&mut queue.events),
                std::mem::take(&mut queue.dropped),
            )
        };
        let samples = if self.records_shared.load(Ordering::Relaxed) {
            samples
        } else {
            events.retain(|event| event.kind.is_act());
            Vec::new()
        };
        if dropped > 0 {
            tracing::warn!(dropped, "historian queue overflowed; oldest rows were dropped");
        }
        let written = self
            .store
            .write_history_blocking(&samples, &events, &self.limits());
        match written {
            Ok(()) => {
                let written = samples.len() + events.len();
                if self.records_shared.load(Ordering::Relaxed) && !events.is_empty() {
                    self.hand_to_notifications(events);
                }
                Ok(written)
            }
            Err(error) => {
                // Put the rows back in front of anything queued since, so none is lost.
                let mut queue = self.queue();
                let newer_samples = std::mem::replace(&mut queue.samples, samples);
                queue.samples.extend(newer_samples);
                let newer_events = std::mem::replace(&mut queue.events, events);
                queue.events.extend(newer_events);
                Err(error)
            }
        }
    }

    /// Hands stored events to the notifications, if any; when they are that far behind, the
    /// events are counted and said, not waited for (the history never waits on a webhook).
    fn hand_to_notifications(&self, events: Vec<AlarmEvent>) {
        let notify = self.notify.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(to) = notify.as_ref()
            && let Err(tokio::sync::mpsc::error::TrySendError::Full(events)) = to.try_send(events)
        {
            tracing::warn!(
                events = events.len(),
                "notifications fell behind: these alarm events are stored but not notified"
            );
        }
    }

    /// What retention keeps now, by age (the solution's and the tags' own) and by size.
    fn limits(&self) -> HistoryLimits {
        let max_bytes = self.max_bytes.load(Ordering::Relaxed);
        let now = SystemTime::now();
        HistoryLimits {
            keep_after: self.keep_after(),
            max_bytes: (max_bytes > 0).then_some(max_bytes),
            own: self
                .own_retention()
                .iter()
                .map(|(tag, kept)| (Arc::clone(tag), now.checked_sub(*kept).unwrap_or(UNIX_EPOCH)))
                .collect(),
        }
    }

    /// Keeps the history's blocks within `max_bytes` (none: no bound) from the next checkpoint
    /// on (a changed `HistoryMaxBytes`).
    pub(crate) fn set_max_bytes(&self, max_bytes: Option<u64>) {
        let bytes = max_bytes.unwrap_or(0);
        if self.max_bytes.swap(bytes, Ordering::Relaxed) != bytes {
            tracing::info!(?max_bytes, "history size bound changed");
        }
    }

    /// The oldest time retention keeps now.
    fn keep_after(&self) -> SystemTime {
        SystemTime::now()
            .checked_sub(self.retention())
            .unwrap_or(UNIX_EPOCH)
    }

    /// Writes everything queued, then folds the store's journal into blocks at once (rather
    /// than when it is due); returns the samples folded.
    pub fn checkpoint(&self) -> Result<usize, SolutionError> {
        self.flush()?;
        self.store.checkpoint_history_blocking(&self.limits())
    }

    /// Rows (samples and alarm events) queued and not yet written.
    pub fn queued(&self) -> usize {
        let queue = self.queue();
        queue.samples.len() + queue.events.len()
    }

    /// Samples of `tag` (dotted name, of `kind`) between `from` and `to` inclusive: at most
    /// `max_samples` (each time bucket's first, lowest, highest and last when the window holds
    /// more), with statistics over all.
    pub fn tag_history(
        &self,
        tag: &str,
        kind: TagType,
        from: SystemTime,
        to: SystemTime,
        max_samples: usize,
    ) -> Result<HistoryPage, SolutionError> {
        let from = self.reachable(tag, from)?;
        self.store
            .tag_history_blocking(tag, kind, (from, to.max(from)), max_samples)
    }

    /// Every sample of `tag` (dotted name, of `kind`) between `from` and `to` inclusive,
    /// oldest first, a page of at most `limit`: the first, or the one `after` a previous
    /// page's cursor.
    pub fn raw_history(
        &self,
        tag: &str,
        kind: TagType,
        (from, to): (SystemTime, SystemTime),
        after: Option<HistoryCursor>,
        limit: usize,
    ) -> Result<RawHistoryPage, SolutionError> {
        let from = self.reachable(tag, from)?;
        self.store
            .raw_history_blocking(tag, kind, (from, to.max(from)), after, limit)
    }

    /// The aggregates of `tag` (dotted name, of `kind`) per `interval` of the window `from..=to`.
    pub fn history_intervals(
        &self,
        tag: &str,
        kind: TagType,
        (from, to): (SystemTime, SystemTime),
        interval: Duration,
    ) -> Result<Vec<HistoryInterval>, SolutionError> {
        let from = self.reachable(tag, from)?;
        self.store
            .history_intervals_blocking(tag, kind, (from, to.max(from)), interval, SystemTime::now())
    }

    /// Where a read of `tag` from `from` may start: after the line still going ends at its
    /// last sample and everything queued is written (so the read reaches them), and no
    /// earlier than retention keeps (what it has passed is not history any more, whether or
    /// not its block is pruned yet: blocks go whole).
    fn reachable(&self, tag: &str, from: SystemTime) -> Result<SystemTime, SolutionError> {
        self.queue().close_line(tag);
        self.flush()?;
        let kept = match self.own_retention().get(tag) {
            Some(kept) => SystemTime::now().checked_sub(*kept).unwrap_or(UNIX_EPOCH),
            None => self.keep_after(),
        };
        Ok(from.max(kept))
    }

    /// Each tag's (dotted name, of its kind) last recorded sample at or before `instant`, `None`
    /// for a tag with none.
    pub fn values_at(
        &self,
        tags: &[(&str, TagType)],
        instant: SystemTime,
    ) -> Result<Vec<Option<store::HistorySample>>, SolutionError> {
        {
            // Each line still going ends at its last sample, so the answer reaches it.
            let mut queue = self.queue();
            for (tag, _) in tags {
                queue.close_line(tag);
            }
        }
        self.flush()?;
        self.store.values_at_blocking(tags, instant)
    }

    /// Alarm transitions between `from` and `to` inclusive, newest first, optionally of one
    /// tag (dotted name) only.
    pub fn alarm_history(
        &self,
        tag: Option<&str>,
        from: SystemTime,
        to: SystemTime,
        max_events: usize,
    ) -> Result<AlarmHistoryPage, SolutionError> {
        self.flush()?;
        self.store.alarm_history_blocking(tag, (from, to), max_events)
    }

    /// How each alarm stood at `from` and the events from `from` to `to`, oldest first, at most
    /// `max_events` of them (what an alarm report reads), after a flush.
    pub fn alarm_record(
        &self,
        from: SystemTime,
        to: SystemTime,
        max_events: usize,
    ) -> Result<store::AlarmRecord, SolutionError> {
        self.flush()?;
        self.store.alarm_record_blocking((from, to), max_events)
    }
}
