//! Subscribe: live tag subscriptions of one connection. Each subscription is a task that wakes when the
//! plant changes, waits out its rate, and sends one `TagUpdate` with the latest reading of
//! each subscribed tag that changed since its previous frame.
//!
//! Nothing queues per change: a subscription keeps, per tag, only the version it last sent, so
//! changes that come faster than it sends (or than the panel reads) merge into the next frame
//! (latest value wins) and are counted as skipped. A subscription collects its next frame only
//! once the connection has written its previous one (its turn travels with the frame), so at
//! most one frame per subscription waits for the connection, a slow connection gets the latest
//! values rather than a backlog, and memory follows the number of subscribed tags, never the
//! rate of change.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tserver_proto::v1::{
    AlarmState, ErrorCode, ServerFrame, SubscribeReply, SubscribeRequest, TagReading, TagUpdate, server_frame,
};

use super::to_proto::{CallError, alarm_state, sample_reading, short, unknown_reading};
use plant::PlantReader;
use plant::objects::{Alarm, AlarmStatus, ObjectModel, Tag};
use plant::proposals::ProposalBoard;

/// Subscriptions one connection may hold.
pub(crate) const MAX_SUBSCRIPTIONS: usize = 16;

/// Tags one subscription may watch.
pub(crate) const MAX_TAGS: usize = 10_000;

/// Frames a second unless the client asks otherwise, and the most it may ask for.
const DEFAULT_RATE: u32 = 10;
const MAX_RATE: u32 = 100;

/// What a subscription asked for, kept to follow a plant reload.
#[derive(Debug, Clone)]
struct Wanted {
    names: Vec<String>,
    folder: Option<String>,
    deadband: f64,
    alarms: bool,
    /// Whether only the alarms are watched, not the tags' readings.
    alarms_only: bool,
    /// Whether the pending proposals are watched too.
    proposals: bool,
}

/// One watched tag.
#[derive(Debug)]
struct Watched {
    /// Where its name as asked is in `Wanted::names`; `None` for a folder's tag, named by its
    /// dotted name (no copy of a name per watcher).
    asked: Option<usize>,
    tag: Option<Arc<Tag>>,
    /// The version last sent; `None`: send the next time whatever it is.
    sent_version: Option<u64>,
    /// The numeric value last sent, for the deadband.
    sent_value: Option<f64>,
}

/// One watched alarm and the state last sent.
#[derive(Debug)]
struct WatchedAlarm {
    alarm: Arc<Alarm>,
    sent: Option<AlarmStatus>,
}

/// The tags and alarms one subscription watches in one object model.
#[derive(Debug)]
struct Watch {
    wanted: Wanted,
    tags: Vec<Watched>,
    alarms: Vec<WatchedAlarm>,
}

impl Watch {
    fn bind(wanted: Wanted, objects: &ObjectModel) -> Result<Self, CallError> {
        let mut tags: Vec<Watched> = wanted
            .names
            .iter()
            .enumerate()
            .map(|(index, name)| Watched {
                asked: Some(index),
                tag: objects.tag(name).cloned(),
                sent_version: None,
                sent_value: None,
            })
            .collect();
        if let Some(folder) = &wanted.folder {
            let (path, _) = objects.folder(folder).ok_or_else(|| {
                CallError::new(
                    ErrorCode::InvalidArgument,
                    format!("no folder {:?}", short(folder)),
                )
            })?;
            let prefix = if path.is_empty() {
                String::new()
            } else {
                format!("{path}/")
            };
            tags.extend(
                objects
                    .tags()
                    .filter(|tag| tag.definition().path.starts_with(&prefix))
                    .map(|tag| Watched {
                        asked: None,
                        tag: Some(Arc::clone(tag)),
                        sent_version: None,
                        sent_value: None,
                    }),
            );
        }
        if tags.is_empty() && !wanted.proposals {
            return Err(CallError::new(
                ErrorCode::InvalidArgument,
                "nothing to subscribe to: name tags or a folder, or ask for proposals",
            ));
        }
        if tags.len() > MAX_TAGS && !wanted.alarms_only {
            return Err(CallError::new(
                ErrorCode::InvalidArgument,
                format!("{} tags: a subscription may watch at most {MAX_TAGS}", tags.len()),
            ));
        }
        let alarms: Vec<WatchedAlarm> = if wanted.alarms {
            tags.iter()
                .filter_map(|watched| watched.tag.as_ref())
                .flat_map(|tag| objects.alarms_of(&tag.definition().name))
                .map(|alarm| WatchedAlarm {
                    alarm: Arc::clone(alarm),
                    sent: None,
                })
                .collect()
        } else {
            Vec::new()
        };
        if wanted.alarms_only {
            if alarms.len() > MAX_TAGS {
                return Err(CallError::new(
                    ErrorCode::InvalidArgument,
                    format!(
                        "{} alarms: a subscription may watch at most {MAX_TAGS}",
                        alarms.len()
                    ),
                ));
            }
            // The tags found the alarms; their readings are not sent.
            tags.clear();
        }
        tags.shrink_to_fit();
        Ok(Self { wanted, tags, alarms })
    }

    /// The readings and alarm states that changed since they were last sent (everything the
    /// first time), and how many value changes were merged away.
    fn collect(&mut self) -> (Vec<TagReading>, u64, Vec<AlarmState>) {
        let mut readings = Vec::new();
        let mut skipped = 0u64;
        for watched in &mut self.tags {
            let asked = watched.asked.and_then(|index| self.wanted.names.get(index));
            let Some(tag) = &watched.tag else {
                if watched.sent_version.is_none() {
                    watched.sent_version = Some(0);
                    readings.push(unknown_reading(asked.map_or("", String::as_str)));
                }
                continue;
            };
            // The sample before the version: a version never claims a sample older than the
            // one sent (at worst a sample goes twice).
            let sample = tag.current();
            let version = tag.version();
            if watched.sent_version == Some(version) {
                continue;
            }
            let value = sample.value.as_f64();
            if let (Some(sent), Some(previous), Some(now)) = (watched.sent_version, watched.sent_value, value)
            {
                skipped += version.saturating_sub(sent).saturating_sub(1);
                if (now - previous).abs() < self.wanted.deadband {
                    watched.sent_version = Some(version);
                    continue;
                }
            } else if let Some(sent) = watched.sent_version {
                skipped += version.saturating_sub(sent).saturating_sub(1);
            }
            watched.sent_version = Some(version);
            watched.sent_value = value;
            let name = asked.unwrap_or(&tag.definition().name);
            readings.push(sample_reading(name, tag, &sample));
        }
        let mut alarms = Vec::new();
        for watched in &mut self.alarms {
            let status = watched.alarm.status();
            if watched.sent.as_ref() != Some(&status) {
                alarms.push(alarm_state(&watched.alarm, &status));
                watched.sent = Some(status);
            }
        }
        (readings, skipped, alarms)
    }
}

/// A subscription's frame, holding the subscription's turn: it collects its next frame only
/// when this one is dropped, once written.
#[derive(Debug)]
pub(crate) struct SubscriptionFrame {
    pub(crate) frame: ServerFrame,
    _turn: OwnedSemaphorePermit,
}

/// The subscriptions of one connection, and the frames they send.
#[derive(Debug, Default)]
pub(crate) struct Subscriptions {
    running: HashMap<u64, CancellationToken>,
    /// Where the tasks send their frames. Made at the first subscription: most connections
    /// never subscribe, and an idle channel still holds a block of frame slots.
    frames: Option<(mpsc::Sender<SubscriptionFrame>, mpsc::Receiver<SubscriptionFrame>)>,
}

impl Subscriptions {
    /// Starts a subscription under `call_id` (its frames carry that id); returns the reply
    /// with the current readings. It stops on [`unsubscribe`](Self::unsubscribe) or when
    /// `connection` is cancelled.
    pub(crate) fn subscribe(
        &mut self,
        call_id: u64,
        request: SubscribeRequest,
        plant: &PlantReader,
        proposals: &ProposalBoard,
        connection: &CancellationToken,
    ) -> Result<server_frame::Body, CallError> {
        self.running.retain(|_, cancel| !cancel.is_cancelled());
        if self.running.len() >= MAX_SUBSCRIPTIONS {
            return Err(CallError::new(
                ErrorCode::InvalidArgument,
                format!(
                    "this connection has {MAX_SUBSCRIPTIONS} subscriptions already; unsubscribe one first"
                ),
            ));
        }
        if self.running.contains_key(&call_id) {
            return Err(CallError::new(
                ErrorCode::InvalidArgument,
                format!("subscription {call_id} exists: use another call_id"),
            ));
        }
        if !request.deadband.is_finite() || request.deadband < 0.0 {
            return Err(CallError::new(
                ErrorCode::InvalidArgument,
                "the deadband must be 0 or more",
            ));
        }
        if request.alarms_only && !request.alarms {
            return Err(CallError::new(
                ErrorCode::InvalidArgument,
                "alarms_only watches alarms: set alarms too",
            ));
        }
        let rate = match request.max_rate {
            0 => DEFAULT_RATE,
            rate => rate.min(MAX_RATE),
        };
        let folder = Some(request.folder.trim().to_owned()).filter(|folder| !folder.is_empty());
        // Kept as long as the subscription runs: no room for more.
        let mut names = request.names;
        names.shrink_to_fit();
        let wanted = Wanted {
            names,
            folder,
            deadband: request.deadband,
            alarms: request.alarms,
            alarms_only: request.alarms_only,
            proposals: request.proposals,
        };
        let objects = plant.objects();
        let mut watch = Watch::bind(wanted, &objects)?;
        let (readings, _, alarms) = watch.collect();
        let cancel = connection.child_token();
        self.running.insert(call_id, cancel.clone());
        let (sender, _) = self
            .frames
            .get_or_insert_with(|| mpsc::channel(MAX_SUBSCRIPTIONS));
        let task = Subscription {
            call_id,
            watch,
            objects,
            plant: plant.clone(),
            interval: Duration::from_secs(1) / rate,
            frames: sender.clone(),
            turn: Arc::new(Semaphore::new(1)),
            proposals: request.proposals.then(|| proposals.revision()),
        };
        tokio::spawn(task.run(cancel));
        Ok(server_frame::Body::Subscribe(SubscribeReply { readings, alarms }))
    }

    /// Stops a subscription; whether it was running.
    pub(crate) fn unsubscribe(&mut self, call_id: u64) -> bool {
        match self.running.remove(&call_id) {
            Some(cancel) => {
                let was_running = !cancel.is_cancelled();
                cancel.cancel();
                was_running
            }
            None => false,
        }
    }

    /// The next update frame of a subscription still running (a frame sent just before its
    /// Unsubscribe is dropped); pending while there is none. Its subscription collects the
    /// next one once this is dropped.
    pub(crate) async fn next_frame(&mut self) -> Option<SubscriptionFrame> {
        let Some((_, frames)) = &mut self.frames else {
            return std::future::pending().await;
        };
        loop {
            let frame = frames.recv().await?;
            if self.running.contains_key(&frame.frame.call_id) {
                return Some(frame);
            }
        }
    }
}

/// One running subscription.
struct Subscription {
    call_id: u64,
    watch: Watch,
    /// The model the watch is bound to.
    objects: Arc<ObjectModel>,
    plant: PlantReader,
    interval: Duration,
    frames: mpsc::Sender<SubscriptionFrame>,
    /// One permit: held by the frame on its way to the client.
    turn: Arc<Semaphore>,
    /// The pending proposals' revision, when they are watched.
    proposals: Option<watch::Receiver<u64>>,
}

impl Subscription {
    async fn run(mut self, cancel: CancellationToken) {
        let mut changes = self.plant.changes();
        let mut next_allowed = Instant::now() + self.interval;
        let mut proposals_waiting = false;
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                changed = changes.changed() => if changed.is_err() { return },
                changed = proposals_changed(self.proposals.as_mut()) => match changed {
                    Ok(()) => proposals_waiting = true,
                    Err(_) => return,
                },
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep_until(next_allowed) => {}
            }
            // The previous frame is written before the next is collected, so it carries the
            // values of the moment it can go out.
            let turn = tokio::select! {
                () = cancel.cancelled() => return,
                turn = Arc::clone(&self.turn).acquire_owned() => match turn {
                    Ok(turn) => turn,
                    Err(_) => return,
                },
            };
            // Everything up to now is looked at below; a change after this wakes the next round.
            changes.borrow_and_update();
            let current = self.plant.objects();
            if !Arc::ptr_eq(&current, &self.objects) {
                // A reload: watch the new model's tags, and send them all once.
                match Watch::bind(self.watch.wanted.clone(), &current) {
                    Ok(watch) => self.watch = watch,
                    Err(error) => tracing::debug!(?error, "a subscription's tags are all gone"),
                }
                self.objects = current;
            }
            let (readings, skipped, alarms) = self.watch.collect();
            // A change seen while waiting for the rate or the turn goes out in this frame too.
            if let Some(revision) = self.proposals.as_mut()
                && revision.has_changed().unwrap_or(false)
            {
                revision.mark_unchanged();
                proposals_waiting = true;
            }
            let proposals_changed = std::mem::take(&mut proposals_waiting);
            if readings.is_empty() && alarms.is_empty() && !proposals_changed {
                continue;
            }
            metrics::counter!(crate::telemetry::SUBSCRIPTION_UPDATES).increment(1);
            if skipped > 0 {
                metrics::counter!(crate::telemetry::SUBSCRIPTION_COALESCED).increment(skipped);
            }
            let frame = ServerFrame {
                call_id: self.call_id,
                body: Some(server_frame::Body::TagUpdate(TagUpdate {
                    readings,
                    skipped,
                    alarms,
                    proposals_changed,
                })),
            };
            tokio::select! {
                () = cancel.cancelled() => return,
                sent = self.frames.send(SubscriptionFrame { frame, _turn: turn }) => if sent.is_err() { return },
            }
            next_allowed = Instant::now() + self.interval;
        }
    }
}

/// Completes when the watched proposals change (`Err` when the board is gone); pending
/// forever when they are not watched.
async fn proposals_changed(
    revision: Option<&mut watch::Receiver<u64>>,
) -> Result<(), watch::error::RecvError> {
    match revision {
        Some(revision) => revision.changed().await,
        None => std::future::pending().await,
    }
}
