//! One OPC UA source: a session with one server (async-opcua's client), a subscription with a
//! monitored item per bound tag (queue size 1, the tag's or the source's sampling interval and
//! deadband), each notification read into its tag, and operators' writes sent with the Write
//! service in the node's own data type.
//!
//! Notifications are coalesced per tag: the subscription's callback keeps the latest value of
//! each tag (a slot per tag, however fast the server sends) and wakes the task, which reads
//! every pending value into the plant in one go; a value replaced before it was read is counted
//! (`coalesced`), the latest is never lost.
//!
//! Quality: before the first notification and while the session is down every tag is Bad; a
//! notification's status code maps by its severity to Good, Uncertain or Bad; a value that
//! does not fit its tag's type makes the tag Bad. Each keeps its last value and that value's
//! time. The client reconnects by itself and the task subscribes again on a new session (a
//! restarted server); when the client gives up on a session, or the server leaves a keep-alive
//! unanswered (it stalls with the connection open), the task starts a new one after a growing
//! pause.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt;
use localai::secrets::SecretValue;
use opcua::client::{
    MonitoredItemMap, OnSubscriptionNotificationCore, Session, SessionActivity, SessionConnectMode,
    SessionPollResult, SubscriptionActivity,
};
use opcua::types::{
    AttributeId, DataChangeFilter, DataChangeNotification, DataChangeTrigger, DataValue, DeadbandType,
    ExtensionObject, MonitoredItemCreateRequest, MonitoringMode, MonitoringParameters, NodeId,
    NotificationMessage, ReadValueId, StatusCode, TimestampsToReturn, Variant, VariantScalarTypeId,
    WriteValue,
};
use plant_model::{Quality, SourceSpec, TagType, TagValue};
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

use super::opcua_client::{self, CONNECT_TIMEOUT, is_untrusted, untrusted_advice, words};
use super::reconnect::{Backoff, pause_refusing_writes};
use super::{
    Address, Binding, FieldWrite, FieldWriteError, Reading, RefusalLines, SourceBoard, SourceCounts,
    WriteFeed, lower_quality, not_connected, write_readings,
};
use crate::log_text::{LogBudget, MessageText};
use crate::plant::Plant;

/// How long a request (the keep-alive's read among them) may wait for the server's answer; a
/// keep-alive without one ends the session, so a server that stalls makes its tags Bad.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the client asks a quiet server whether it still runs.
const KEEP_ALIVE: Duration = Duration::from_secs(5);

/// Monitored items created per request: many servers refuse more in one call (async-opcua's
/// own limit is 1,000).
const ITEMS_PER_CALL: usize = 1000;

/// Notifications asked per publish response: async-opcua's client decodes arrays of at most
/// 1,000 elements, so a larger response would fail; the server sends the rest right after.
const NOTIFICATIONS_PER_PUBLISH: u32 = 1000;

/// Every OPC UA source's lines about refused values together, at most one a minute each kind.
static REFUSALS: RefusalLines = RefusalLines {
    budget: std::sync::LazyLock::new(|| std::sync::Mutex::new(LogBudget::new("refused OPC UA values"))),
    what: "OPC UA value",
};

/// A bound tag and its node.
#[derive(Debug)]
struct Bound {
    tag: String,
    kind: TagType,
    node: NodeId,
    sampling_interval: f64,
    deadband: f64,
    /// The node's data type, read at its first write.
    data_type: Option<VariantScalarTypeId>,
}

/// The task of one OPC UA source.
pub(crate) struct OpcUaSource {
    spec: SourceSpec,
    password: Option<SecretValue>,
    /// Where the client's certificate, its key and the servers' certificates are kept.
    pki_dir: PathBuf,
    tags: Vec<Bound>,
    plant: Plant,
    board: SourceBoard,
    index: usize,
    /// Its counts on the board, kept outside the board's lock.
    counts: Arc<SourceCounts>,
    /// The values of one batch on their way into the plant (kept for its capacity).
    readings: Vec<Reading>,
    writes: mpsc::Receiver<FieldWrite>,
    connected: Arc<AtomicBool>,
}

/// Why a session ended.
#[derive(Debug)]
struct Lost(String);

impl OpcUaSource {
    /// The task of `spec` with the tags bound to it (`Address::OpcUa` bindings).
    pub(crate) fn new(
        spec: SourceSpec,
        password: Option<SecretValue>,
        bindings: Vec<Binding>,
        plant: Plant,
        (board, index, pki_dir): (SourceBoard, usize, PathBuf),
        feed: WriteFeed,
    ) -> Result<Self, String> {
        if !spec.username.is_empty() && password.is_none() {
            return Err(format!(
                "source {:?} names user {:?} without a password",
                spec.name, spec.username
            ));
        }
        let tags = bindings
            .into_iter()
            .filter_map(|binding| match binding.address {
                Address::OpcUa {
                    node,
                    sampling_interval,
                    deadband,
                } => Some(Bound {
                    tag: binding.tag,
                    kind: binding.kind,
                    node,
                    sampling_interval: sampling_interval.unwrap_or(spec.sampling_interval) as f64,
                    deadband: deadband.map_or(spec.deadband, f64::from_bits),
                    data_type: None,
                }),
                _ => None,
            })
            .collect();
        Ok(Self {
            spec,
            password,
            pki_dir,
            tags,
            plant,
            counts: board.counts_of(index),
            readings: Vec::new(),
            board,
            index,
            writes: feed.writes,
            connected: feed.connected,
        })
    }

    /// Opens sessions and reads and writes through them until `shutdown`.
    pub(crate) async fn run(mut self, shutdown: CancellationToken) {
        self.mark_all_bad();
        let mut backoff = Backoff::new();
        loop {
            let started = Instant::now();
            let lost = tokio::select! {
                () = shutdown.cancelled() => break,
                lost = self.session() => lost,
            };
            self.set_connected(false);
            self.mark_all_bad();
            self.note_error("connection", lost.0.clone());
            tracing::warn!(source = %self.spec.name, error = %MessageText(&lost.0), "lost the OPC UA server; its tags are Bad until it is back");
            let pause = backoff.after(started.elapsed());
            let source = (self.spec.name.as_str(), "server");
            if !pause_refusing_writes(pause, &mut self.writes, source, &shutdown).await {
                return;
            }
        }
        self.set_connected(false);
    }

    fn refuse_write(&self, write: FieldWrite) {
        let _ = write.done.send(Err(FieldWriteError::Refused(not_connected(
            &self.spec.name,
            "server",
        ))));
    }

    fn set_connected(&self, connected: bool) {
        self.connected.store(connected, Ordering::Release);
        self.counts.set_connected(connected);
    }

    /// One session: connects, subscribes, then reads notifications and sends writes until the
    /// client gives the session up.
    async fn session(&mut self) -> Lost {
        let mut client = match self.client() {
            Ok(client) => client,
            Err(reason) => return Lost(reason),
        };
        let opened = opcua_client::open_session(
            &mut client,
            &self.spec,
            self.password.as_ref().map(SecretValue::expose),
        )
        .await;
        let (session, event_loop) = match opened {
            Ok(pair) => pair,
            Err(reason) => return Lost(reason),
        };
        let (events_tx, mut events) = mpsc::channel(64);
        let polling = tokio::spawn(poll_events(event_loop.enter(), events_tx));
        let lost = self.connected_session(&session, &mut events).await;
        polling.abort();
        let _ = tokio::time::timeout(Duration::from_secs(2), session.disconnect()).await;
        lost
    }

    /// Subscribes, then serves the session until it is given up.
    async fn connected_session(
        &mut self,
        session: &Arc<Session>,
        events: &mut mpsc::Receiver<Event>,
    ) -> Lost {
        if let Err(refused) = wait_for_connection(events).await {
            return match refused {
                Refused::Untrusted => Lost(untrusted_advice(&self.spec, &self.pki_dir)),
                Refused::Other(reason) => Lost(reason),
            };
        }
        let latest = Arc::new(Latest::new(self.tags.len()));
        if let Err(reason) = self.subscribe(session, Arc::clone(&latest)).await {
            return Lost(reason);
        }
        let mut batch = Vec::new();
        let mut publish_failures = 0_u32;
        self.set_connected(true);
        tracing::info!(source = %self.spec.name, server = %self.spec.url, "connected to the OPC UA server");
        loop {
            tokio::select! {
                event = events.recv() => match event {
                    Some(Event::Lost(status)) => {
                        // Values from before the loss would make Bad tags Good again.
                        latest.clear();
                        self.set_connected(false);
                        self.mark_all_bad();
                        let reason = format!("connection lost: {}", words(status));
                        // Once per loss; the tries to come back are counted, not logged.
                        tracing::warn!(source = %self.spec.name, server = %self.spec.url, reason = %MessageText(&reason), "lost the OPC UA server; its tags are Bad until it is back");
                        self.note_error("connection", reason);
                    }
                    Some(Event::Back { new_session }) => {
                        // A new session has none of the old one's subscriptions.
                        if new_session
                            && let Err(reason) = self.subscribe(session, Arc::clone(&latest)).await
                        {
                            return Lost(reason);
                        }
                        self.set_connected(true);
                        tracing::info!(source = %self.spec.name, server = %self.spec.url, "the OPC UA server is back");
                    }
                    Some(Event::Failed(status)) => {
                        let reason = if is_untrusted(status) {
                            untrusted_advice(&self.spec, &self.pki_dir)
                        } else {
                            format!("cannot reconnect: {}", words(status))
                        };
                        self.note_error("connection", reason);
                    }
                    Some(Event::Published) => publish_failures = 0,
                    Some(Event::PublishFailed(status)) => {
                        publish_failures += 1;
                        let reason = format!("a publish request failed: {}", words(status));
                        if publish_failures >= PUBLISH_FAILURES_TO_END {
                            return Lost(format!(
                                "{publish_failures} publish requests failed one after the other, the last: {}",
                                words(status)
                            ));
                        }
                        self.note_error("publish", reason);
                    }
                    Some(Event::Ended(reason)) => return Lost(reason),
                    None => return Lost("the session's event loop ended".to_owned()),
                },
                () = latest.filled.notified() => {
                    let coalesced = latest.take(&mut batch);
                    self.apply_all(&mut batch, coalesced);
                }
                Some(write) = self.writes.recv() => {
                    if self.connected.load(Ordering::Acquire) {
                        self.write(session, write).await;
                    } else {
                        self.refuse_write(write);
                    }
                }
            }
        }
    }

    fn client(&self) -> Result<opcua::client::Client, String> {
        opcua_client::build(
            opcua_client::client_builder(&self.spec, &self.pki_dir)
                .session_retry_limit(-1)
                // The task subscribes again itself on a new session (see `Event::Back`).
                .recreate_subscriptions(false)
                .session_retry_initial(Backoff::FIRST)
                .session_retry_max(Backoff::MAX)
                .keep_alive_interval(KEEP_ALIVE)
                .request_timeout(REQUEST_TIMEOUT),
        )
    }

    /// Creates the subscription and a monitored item per bound tag, its notifications kept in
    /// `latest`; a node the server refuses makes its tag Bad.
    async fn subscribe(&mut self, session: &Arc<Session>, latest: Arc<Latest>) -> Result<(), String> {
        let callback = Collector(latest);
        let subscription = session
            .create_subscription(
                Duration::from_millis(self.spec.publishing_interval),
                60,
                10,
                NOTIFICATIONS_PER_PUBLISH,
                0,
                true,
                callback,
            )
            .await
            .map_err(|error| format!("cannot subscribe: {error}"))?;
        for first in (0..self.tags.len()).step_by(ITEMS_PER_CALL) {
            let last = (first + ITEMS_PER_CALL).min(self.tags.len());
            let requests: Vec<MonitoredItemCreateRequest> = (first..last)
                .map(|position| monitored_item(position, &self.tags[position]))
                .collect();
            let created = session
                .create_monitored_items(subscription, TimestampsToReturn::Both, requests)
                .await
                .map_err(|error| format!("cannot monitor the bound nodes: {error}"))?;
            for (position, item) in (first..last).zip(&created) {
                let status = item.result.status_code;
                if !status.is_good() {
                    let bound = &self.tags[position];
                    let message = format!(
                        "tag {:?}: the server refused to monitor {}: {}",
                        bound.tag,
                        bound.node,
                        words(status)
                    );
                    self.set_quality(position, Quality::BAD);
                    self.refuse("bad_node", message);
                }
            }
        }
        Ok(())
    }

    /// Reads a batch of notifications into the plant in one write (emptying `batch`) and
    /// counts them with the `coalesced` values they replaced.
    fn apply_all(&mut self, batch: &mut Vec<(usize, DataValue)>, coalesced: u64) {
        for (position, value) in batch.drain(..) {
            if let Some(reading) = self.read(position, value) {
                self.readings.push(reading);
            }
        }
        let tags = &self.tags;
        let refused = write_readings(
            &self.plant,
            &mut self.readings,
            |position| &tags[position].tag,
            &self.counts,
        );
        for error in refused {
            self.note_error("wrong_type", error.to_string());
        }
        if coalesced > 0 {
            self.counts.add_coalesced(coalesced);
        }
    }

    /// A notification for the tag at `position`: its value to write, or `None` when it only
    /// lowers the tag's quality (done here) or is refused.
    fn read(&mut self, position: usize, value: DataValue) -> Option<Reading> {
        let bound = self.tags.get(position)?;
        let quality = match value.status() {
            status if status.is_good() => Quality::GOOD,
            status if status.is_uncertain() => Quality::UNCERTAIN,
            _ => Quality::BAD,
        };
        let time = value
            .source_timestamp
            .or(value.server_timestamp)
            .map_or_else(SystemTime::now, |time| SystemTime::from(time.as_chrono()));
        let converted = match &value.value {
            None | Some(Variant::Empty) if quality != Quality::GOOD => None,
            None | Some(Variant::Empty) => Some(Err("no value".to_owned())),
            Some(variant) => Some(tag_value(variant, bound.kind)),
        };
        match converted {
            None => {
                self.set_quality(position, quality);
                None
            }
            Some(Ok(value)) => Some(Reading {
                position,
                value,
                quality,
                time,
            }),
            Some(Err(reason)) => {
                let message = format!(
                    "tag {:?} ({}) from {}: {reason}",
                    bound.tag,
                    bound.kind.name(),
                    bound.node
                );
                self.set_quality(position, Quality::BAD);
                self.refuse("wrong_type", message);
                None
            }
        }
    }

    /// Sends an operator's write in the node's data type and answers it.
    async fn write(&mut self, session: &Arc<Session>, write: FieldWrite) {
        let answer = self.write_value(session, &write.tag, write.value).await;
        if answer.is_ok() {
            self.board.update(self.index, |status| status.writes += 1);
        }
        let _ = write.done.send(answer);
    }

    async fn write_value(
        &mut self,
        session: &Arc<Session>,
        tag: &str,
        value: TagValue,
    ) -> Result<(), FieldWriteError> {
        let source = self.spec.name.clone();
        let Some(position) = self.tags.iter().position(|bound| bound.tag == tag) else {
            return Err(FieldWriteError::Refused(format!(
                "tag {tag:?} is not bound to source {source:?}; nothing was written"
            )));
        };
        let node = self.tags[position].node.clone();
        let data_type = match self.tags[position].data_type {
            Some(data_type) => data_type,
            None => {
                let data_type = read_data_type(session, &node)
                    .await
                    .map_err(|reason| FieldWriteError::Refused(format!("{reason}; nothing was written")))?;
                self.tags[position].data_type = Some(data_type);
                data_type
            }
        };
        let variant = match value {
            TagValue::Bool(bit) => Variant::Boolean(bit),
            TagValue::Integer(whole) => Variant::Int64(whole),
            TagValue::Number(number) => Variant::Double(number),
            TagValue::Text(text) => Variant::from(&*text),
        };
        let cast = variant.cast(data_type);
        if matches!(cast, Variant::Empty) {
            return Err(FieldWriteError::Refused(format!(
                "node {node} of source {source:?} holds {data_type}, which {variant} does not fit; nothing was written"
            )));
        }
        let request = WriteValue {
            node_id: node.clone(),
            attribute_id: AttributeId::Value as u32,
            value: DataValue::value_only(cast),
            ..Default::default()
        };
        match tokio::time::timeout(super::ACK_TIMEOUT, session.write(&[request])).await {
            Ok(Ok(results)) => match results.first() {
                Some(status) if status.is_good() => Ok(()),
                Some(status) => Err(FieldWriteError::Refused(format!(
                    "the server refused the write to {node} of source {source:?}: {}; nothing was written",
                    words(*status)
                ))),
                None => Err(FieldWriteError::NotConfirmed(format!(
                    "not confirmed: the server answered the write to {node} of source {source:?} without a result; it may or may not have reached the field"
                ))),
            },
            Ok(Err(error)) => Err(FieldWriteError::NotConfirmed(format!(
                "not confirmed: the write to {node} of source {source:?} failed: {error}; it may or may not have reached the field"
            ))),
            Err(_) => Err(FieldWriteError::NotConfirmed(format!(
                "not confirmed: the server did not answer the write to {node} of source {source:?}; it may or may not have reached the field"
            ))),
        }
    }

    fn mark_all_bad(&mut self) {
        for position in 0..self.tags.len() {
            self.set_quality(position, Quality::BAD);
        }
    }

    /// Lowers tag `position`'s quality to `quality` (never raises it), keeping value and time.
    fn set_quality(&mut self, position: usize, quality: Quality) {
        lower_quality(&self.plant, &self.tags[position].tag, quality);
    }

    /// Counts a refused value of kind `kind` and logs it at most once a minute.
    fn refuse(&self, kind: &str, message: String) {
        self.board
            .refuse(self.index, &self.spec.name, &REFUSALS, kind, message);
    }

    fn note_error(&self, kind: &str, message: String) {
        self.board.note_error(self.index, kind, message);
    }
}

/// The latest notification of each bound tag not yet read into the plant: filled by the
/// subscription's callback, emptied by the task in one go.
#[derive(Debug)]
struct Latest {
    slots: Mutex<Slots>,
    /// Wakes the task when a slot fills while all were empty.
    filled: Notify,
}

#[derive(Debug, Default)]
struct Slots {
    /// A slot per bound tag, by position.
    values: Vec<Option<DataValue>>,
    /// The positions of the filled slots, in the order they filled.
    positions: Vec<usize>,
    /// Values replaced by a newer one before the task read them.
    coalesced: u64,
}

impl Latest {
    fn new(tags: usize) -> Self {
        Self {
            slots: Mutex::new(Slots {
                values: (0..tags).map(|_| None).collect(),
                positions: Vec::with_capacity(tags),
                coalesced: 0,
            }),
            filled: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slots> {
        // Slots changed in single steps: a panic elsewhere leaves them usable.
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps each value as the latest of the tag at its `handle - 1` (a handle the source did
    /// not give is ignored), under one lock, and wakes the task once.
    fn put_all(&self, values: impl IntoIterator<Item = (u32, DataValue)>) {
        let mut guard = self.lock();
        let slots = &mut *guard;
        let was_empty = slots.positions.is_empty();
        for (handle, value) in values {
            let Some(position) = (handle as usize).checked_sub(1) else {
                continue;
            };
            let Some(slot) = slots.values.get_mut(position) else {
                continue;
            };
            if slot.replace(value).is_some() {
                slots.coalesced += 1;
            } else {
                slots.positions.push(position);
            }
        }
        let filled = was_empty && !slots.positions.is_empty();
        drop(guard);
        if filled {
            self.filled.notify_one();
        }
    }

    /// Moves every pending value into `batch` with its tag's position, in the order they came;
    /// returns how many values were replaced unread since the last call.
    fn take(&self, batch: &mut Vec<(usize, DataValue)>) -> u64 {
        let mut guard = self.lock();
        let slots = &mut *guard;
        for position in slots.positions.drain(..) {
            if let Some(value) = slots.values[position].take() {
                batch.push((position, value));
            }
        }
        std::mem::take(&mut slots.coalesced)
    }

    /// Forgets the pending values.
    fn clear(&self) {
        let mut guard = self.lock();
        let slots = &mut *guard;
        for position in slots.positions.drain(..) {
            slots.values[position] = None;
        }
    }
}

/// The subscription's callback: the values of each publish response go into the slots under
/// one lock, with one wake-up of the task.
struct Collector(Arc<Latest>);

impl OnSubscriptionNotificationCore for Collector {
    fn on_subscription_notification(&mut self, notification: NotificationMessage, _: MonitoredItemMap<'_>) {
        let Some(data) = notification.notification_data else {
            return;
        };
        let changes = data
            .into_iter()
            .filter_map(|object| object.into_inner_as::<DataChangeNotification>())
            .flat_map(|change| change.monitored_items.into_iter().flatten())
            .map(|item| (item.client_handle, item.value));
        self.0.put_all(changes);
    }
}

/// What the session's event loop reports to the source.
#[derive(Debug)]
enum Event {
    /// The connection is down; the client is trying again.
    Lost(StatusCode),
    /// The session is back: reactivated, or a new one (without the old subscription).
    Back { new_session: bool },
    /// An attempt to connect failed; the client tries again.
    Failed(StatusCode),
    /// A publish response came (values, or a keep-alive).
    Published,
    /// A publish request failed; the client asks again.
    PublishFailed(StatusCode),
    /// The client gave the session up.
    Ended(String),
}

/// Publish requests failing one after the other before the session is given up: a server
/// whose responses cannot be read would otherwise look connected while its tags stay Bad.
const PUBLISH_FAILURES_TO_END: u32 = 3;

/// Drives the session's event loop, passing on what the source acts on.
async fn poll_events(
    stream: impl futures::Stream<Item = Result<SessionPollResult, StatusCode>>,
    events: mpsc::Sender<Event>,
) {
    tokio::pin!(stream);
    while let Some(polled) = stream.next().await {
        let event = match polled {
            Ok(SessionPollResult::ConnectionLost(status)) => Event::Lost(status),
            Ok(SessionPollResult::ReconnectFailed(status)) => Event::Failed(status),
            Ok(SessionPollResult::Reconnected(mode)) => Event::Back {
                new_session: matches!(mode, SessionConnectMode::NewSession(_)),
            },
            // The connection may look open while the server answers nothing (it stalls): the
            // session is given up, so its tags turn Bad and a new one starts.
            Ok(SessionPollResult::SessionActivity(SessionActivity::KeepAliveFailed(status))) => Event::Ended(
                format!("the server did not answer its keep-alive: {}", words(status)),
            ),
            Ok(SessionPollResult::Subscription(SubscriptionActivity::Publish)) => Event::Published,
            Ok(SessionPollResult::Subscription(SubscriptionActivity::PublishFailed(status))) => {
                Event::PublishFailed(status)
            }
            Ok(SessionPollResult::Subscription(SubscriptionActivity::FatalFailure(status))) => {
                Event::Ended(format!("publishing failed for good: {}", words(status)))
            }
            Ok(_) => continue,
            Err(status) => Event::Ended(format!("the session ended: {}", words(status))),
        };
        if events.send(event).await.is_err() {
            return;
        }
    }
    let _ = events.send(Event::Ended("the session ended".to_owned())).await;
}

/// Why a session did not come up.
#[derive(Debug)]
enum Refused {
    /// The server's certificate is not trusted here (trying again cannot help until it is).
    Untrusted,
    Other(String),
}

/// Waits (at most [`CONNECT_TIMEOUT`]) for the event loop to bring the session up. Its first
/// `Back` is taken here: the task would otherwise take it for a new session and subscribe a
/// second time, every value then coming twice.
async fn wait_for_connection(events: &mut mpsc::Receiver<Event>) -> Result<(), Refused> {
    let connected = async {
        loop {
            match events.recv().await {
                Some(Event::Back { .. }) => return Ok(()),
                Some(Event::Published | Event::PublishFailed(_)) => {}
                Some(Event::Ended(reason)) => return Err(Refused::Other(reason)),
                Some(Event::Failed(status)) if is_untrusted(status) => return Err(Refused::Untrusted),
                None => return Err(Refused::Other("the session's event loop ended".to_owned())),
                Some(Event::Lost(_) | Event::Failed(_)) => {}
            }
        }
    };
    tokio::time::timeout(CONNECT_TIMEOUT, connected)
        .await
        .unwrap_or_else(|_| {
            Err(Refused::Other(format!(
                "the session did not come up within {CONNECT_TIMEOUT:?}"
            )))
        })
}

/// The monitored item of the tag at `position` (its client handle is `position + 1`).
fn monitored_item(position: usize, bound: &Bound) -> MonitoredItemCreateRequest {
    let filter = if bound.deadband > 0.0 {
        ExtensionObject::from_message(DataChangeFilter {
            trigger: DataChangeTrigger::StatusValue,
            deadband_type: DeadbandType::Absolute as u32,
            deadband_value: bound.deadband,
        })
    } else {
        ExtensionObject::null()
    };
    MonitoredItemCreateRequest {
        item_to_monitor: ReadValueId {
            node_id: bound.node.clone(),
            attribute_id: AttributeId::Value as u32,
            ..Default::default()
        },
        monitoring_mode: MonitoringMode::Reporting,
        requested_parameters: MonitoringParameters {
            client_handle: u32::try_from(position + 1).unwrap_or(u32::MAX),
            sampling_interval: bound.sampling_interval,
            queue_size: 1,
            discard_oldest: true,
            filter,
        },
    }
}

/// The data type of `node`, as the scalar type its values are written in.
async fn read_data_type(session: &Arc<Session>, node: &NodeId) -> Result<VariantScalarTypeId, String> {
    let request = ReadValueId {
        node_id: node.clone(),
        attribute_id: AttributeId::DataType as u32,
        ..Default::default()
    };
    let read = tokio::time::timeout(
        super::ACK_TIMEOUT,
        session.read(&[request], TimestampsToReturn::Neither, 0.0),
    )
    .await
    .map_err(|_| format!("the server did not tell the data type of {node}"))?
    .map_err(|error| format!("cannot read the data type of {node}: {error}"))?;
    let value = read.into_iter().next().unwrap_or_default();
    match &value.value {
        Some(Variant::NodeId(data_type)) => VariantScalarTypeId::try_from(&**data_type)
            .map_err(|_| format!("node {node} holds {data_type}, a data type this source does not write")),
        _ => Err(format!(
            "cannot read the data type of {node}: {}",
            words(value.status())
        )),
    }
}

/// A tag value of type `kind` from `variant`, or why it does not fit.
fn tag_value(variant: &Variant, kind: TagType) -> Result<TagValue, String> {
    let integer = || -> Option<i64> {
        Some(match variant {
            Variant::SByte(v) => i64::from(*v),
            Variant::Byte(v) => i64::from(*v),
            Variant::Int16(v) => i64::from(*v),
            Variant::UInt16(v) => i64::from(*v),
            Variant::Int32(v) => i64::from(*v),
            Variant::UInt32(v) => i64::from(*v),
            Variant::Int64(v) => *v,
            Variant::UInt64(v) => i64::try_from(*v).ok()?,
            _ => return None,
        })
    };
    let value = match (kind, variant) {
        (TagType::Bool, Variant::Boolean(bit)) => Some(TagValue::Bool(*bit)),
        (TagType::Integer, _) => integer().map(TagValue::Integer),
        (TagType::Number, Variant::Float(float)) => Some(modbus::f32_as_decimal(*float))
            .filter(|number| number.is_finite())
            .map(TagValue::Number),
        (TagType::Number, Variant::Double(double)) => Some(*double)
            .filter(|number| number.is_finite())
            .map(TagValue::Number),
        (TagType::Number, _) => integer().map(|whole| TagValue::Number(whole as f64)),
        (TagType::String, Variant::String(text)) => Some(TagValue::Text(text.as_ref().into())),
        (TagType::String, Variant::LocalizedText(text)) => Some(TagValue::Text(text.text.as_ref().into())),
        (TagType::String, Variant::DateTime(time)) => {
            Some(TagValue::Text(time.as_chrono().to_rfc3339().into()))
        }
        _ => None,
    };
    value.ok_or_else(|| format!("{variant:?} does not fit"))
}

#[cfg(test)]
mod tests {
    use super::{TagType, TagValue, Variant, tag_value};

    #[test]
    fn values_fit_their_tags_type_or_say_why_not() {
        assert_eq!(
            tag_value(&Variant::Double(2.5), TagType::Number),
            Ok(TagValue::Number(2.5))
        );
        assert_eq!(
            tag_value(&Variant::Int32(-7), TagType::Number),
            Ok(TagValue::Number(-7.0))
        );
        assert_eq!(
            tag_value(&Variant::UInt16(7), TagType::Integer),
            Ok(TagValue::Integer(7))
        );
        assert_eq!(
            tag_value(&Variant::Boolean(true), TagType::Bool),
            Ok(TagValue::Bool(true))
        );
        assert_eq!(
            tag_value(&Variant::from("Line 1"), TagType::String),
            Ok(TagValue::Text("Line 1".into()))
        );
        assert!(tag_value(&Variant::Double(2.5), TagType::Integer).is_err());
        assert!(tag_value(&Variant::Double(f64::NAN), TagType::Number).is_err());
        assert!(tag_value(&Variant::UInt64(u64::MAX), TagType::Integer).is_err());
        assert!(tag_value(&Variant::from("x"), TagType::Number).is_err());
        assert!(tag_value(&Variant::Int32(1), TagType::Bool).is_err());
    }
}
