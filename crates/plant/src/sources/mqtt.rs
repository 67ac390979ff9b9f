//! One MQTT source: its MQTT 5 connection (rumqttc's event loop, which reconnects when polled
//! after a failure), the subscriptions made again on every connection, each message read into
//! the plant (plain UNS or Sparkplug B), staleness, and operators' writes published to the
//! field and answered when the broker acknowledges them.
//!
//! A write is answered from the broker's PUBACK: rumqttc gives each QoS 1 publish its packet id
//! when it sends it (`Outgoing::Publish(id)`, in the order the publishes were handed to it), so
//! the task keeps its publishes in that order, learns each one's id, and answers the write when
//! the PUBACK with that id comes. A lost connection answers every write still waiting as not
//! confirmed (rumqttc starts a clean session and does not send them again).
//!
//! The connection tells the broker the largest packet it takes (MQTT 5's Maximum Packet
//! Size), so the broker drops bigger messages instead of sending them: a huge message costs
//! neither memory nor the connection.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use futures::FutureExt;
use localai::secrets::SecretValue;

use plant_model::SourceSpec;
use rumqttc::Outgoing;
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::mqttbytes::v5::{Packet, PubAck, PubAckReason};
use rumqttc::v5::{AsyncClient, ConnectionError, Event, EventLoop, MqttOptions};
use rumqttc::{NetworkOptions, TlsConfiguration, Transport};
use sparkplug::{DecodeError, Decoded, MessageKind, NAMESPACE, RebirthReason, SparkplugDecoder, Target};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tserver_tls::rustls;

use super::payload;
use super::reconnect::Backoff;
use super::sparkplug::{metric_value, now_ms, tag_value, time_of};
use super::{
    Address, Binding, FieldWrite, FieldWriteError, Reading, SourceBoard, SourceCounts, WriteFeed,
    lower_quality, not_connected, write_readings,
};
use crate::key_index::KeyIndex;
use crate::log_text::{ClientText, LogBudget, MessageText};
use crate::plant::Plant;
use plant_model::{Quality, TagValue};

/// The largest MQTT packet taken: a Sparkplug birth of many thousand metrics, with room for
/// the topic and properties. The broker drops bigger ones for this client.
const MAX_PACKET_BYTES: u32 = 1024 * 1024 + 64 * 1024;

/// A topic's bad messages are logged at most this often.
const LOG_EVERY: Duration = Duration::from_secs(60);

/// Topics remembered for the log allowance (past that, the oldest are forgotten).
const MAX_LOGGED_TOPICS: usize = 1024;

/// Every source's refused-message lines together: garbage on many topics (each logged at most
/// once a minute) must not fill the log either.
static REFUSAL_LINES: std::sync::LazyLock<std::sync::Mutex<LogBudget>> =
    std::sync::LazyLock::new(|| std::sync::Mutex::new(LogBudget::new("refused MQTT messages")));

/// Every source's rebirth-request lines together (each edge node is asked at most once per
/// pause, but a flood of made-up nodes is many nodes).
static REBIRTH_LINES: std::sync::LazyLock<std::sync::Mutex<LogBudget>> =
    std::sync::LazyLock::new(|| std::sync::Mutex::new(LogBudget::new("rebirth requests")));

/// Whether `budget` allows one more line.
fn allowed(budget: &std::sync::Mutex<LogBudget>) -> bool {
    budget
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .allow()
}

/// Requests (subscriptions, writes, rebirth requests) waiting for the connection.
const REQUEST_QUEUE: usize = 1024;

/// QoS 1 publishes (writes, rebirth requests) sent and not yet acknowledged at most; more wait
/// in the request queue. The client keeps a slot for each possible one (some 200 bytes): left
/// at the protocol's 65,535, that is 14 MB per source, where brokers take 20 to 100 anyway
/// (their Receive Maximum, which lowers it further).
const PUBLISHES_IN_FLIGHT: u16 = 100;

/// Events handled in one wake-up at most (those the event loop has already read), their
/// values written into the plant together: a burst is read at the pace of the socket, and a
/// write or the shutdown waits for no more than this many.
const BATCH: usize = 512;

/// The connection's side of the task: the client, its event loop, and where the connection
/// stands.
struct Link {
    client: AsyncClient,
    events: EventLoop,
    /// The filters subscribed to on every connection.
    filters: Vec<String>,
    backoff: Backoff,
    connected: bool,
    connected_since: Option<Instant>,
    /// The pause before the next connection attempt: writes are still answered during it
    /// (refused at once), never left waiting behind it.
    reconnect_at: Option<tokio::time::Instant>,
}

/// The time of the batch being read, read at its first message that needs it: the messages
/// of one wake-up arrived together.
#[derive(Debug, Default, Clone, Copy)]
struct BatchClock {
    instant: Option<Instant>,
    system: Option<SystemTime>,
}

impl BatchClock {
    fn instant(&mut self) -> Instant {
        *self.instant.get_or_insert_with(Instant::now)
    }

    fn system(&mut self) -> SystemTime {
        *self.system.get_or_insert_with(SystemTime::now)
    }
}

/// The UNS topic a tag is bound to (none for a Sparkplug metric): its key in `by_topic`.
fn topic_of(bound: &Bound) -> Cow<'_, str> {
    match &bound.binding.address {
        Address::Uns { topic, .. } => Cow::Borrowed(topic),
        _ => Cow::Borrowed(""),
    }
}

/// The bound tag's name: its key in `by_tag`.
fn tag_of(bound: &Bound) -> Cow<'_, str> {
    Cow::Borrowed(&bound.binding.tag)
}

/// A bound tag and when its source last updated it.
#[derive(Debug)]
struct Bound {
    binding: Binding,
    last_update: Option<Instant>,
    /// Marked Uncertain for staleness since its last update.
    stale: bool,
}

/// A write handed to the MQTT client, waiting for its broker's acknowledgement.
#[derive(Debug)]
struct WaitingWrite {
    /// The topic it was published to, for the answer.
    topic: String,
    done: oneshot::Sender<Result<(), FieldWriteError>>,
}

/// The task of one source.
pub(crate) struct SourceTask {
    spec: SourceSpec,
    options: MqttOptions,
    tags: Vec<Bound>,
    /// UNS topic → tag.
    by_topic: KeyIndex,
    /// Sparkplug node or device → metric name → tag.
    by_target: HashMap<Target, HashMap<String, usize>>,
    /// Tag name → tag, for writes.
    by_tag: KeyIndex,
    decoder: SparkplugDecoder,
    plant: Plant,
    board: SourceBoard,
    index: usize,
    /// Its counts on the board, kept outside the board's lock.
    counts: Arc<SourceCounts>,
    /// The values read since the last flush, in order (kept for its capacity).
    readings: Vec<Reading>,
    /// Messages received since the last flush, and the counter they go to.
    received: u64,
    received_counter: metrics::Counter,
    clock: BatchClock,
    /// A Sparkplug message's bound metrics (index, tag), kept for its capacity.
    bound_metrics: Vec<(usize, usize)>,
    writes: mpsc::Receiver<FieldWrite>,
    /// Whether the broker connection is up, shared with [`super::Sources::write`], which
    /// refuses a write at once while it is down.
    connected: Arc<AtomicBool>,
    /// The QoS 1 publishes handed to the client and not yet sent, in order: a write's answer,
    /// or `None` for a rebirth request.
    unsent: VecDeque<Option<WaitingWrite>>,
    /// A publish the client holds back until its packet id is free again (a collision).
    collided: Option<(u16, Option<WaitingWrite>)>,
    /// Writes sent and waiting for their PUBACK, by packet id.
    in_flight: HashMap<u16, WaitingWrite>,
    /// When each topic last had a bad message logged.
    logged: HashMap<String, Instant>,
    /// When each edge node was last asked for a rebirth (the decoder's own pacing starts anew
    /// with each connection; this one outlives them).
    rebirths_asked: HashMap<(String, String), Instant>,
}

impl std::fmt::Debug for SourceTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The options hold the password: only the name is shown.
        f.debug_struct("SourceTask")
            .field("source", &self.spec.name)
            .field("tags", &self.tags.len())
            .finish_non_exhaustive()
    }
}

/// The host, port and scheme of a source URL (`mqtt://` 1883, `mqtts://` 8883 by default).
fn address(url: &str) -> Option<(String, u16, bool)> {
    let (scheme, rest) = url.split_once("://")?;
    let tls = scheme == "mqtts";
    let rest = rest.trim_end_matches('/');
    let (host, port) = match rest.rsplit_once(':') {
        Some((host, port)) if !host.ends_with(']') || rest.starts_with('[') => (host, port.parse().ok()?),
        _ => (rest, if tls { 8883 } else { 1883 }),
    };
    Some((host.trim_matches(['[', ']']).to_owned(), port, tls))
}

/// The client TLS configuration for `mqtts://`: the source's CA file, or the system's roots.
fn tls_config(ca_file: &str) -> Result<Arc<rustls::ClientConfig>, String> {
    if !ca_file.is_empty() {
        return tserver_tls::client_config(Path::new(ca_file)).map_err(|error| error.to_string());
    }
    let mut roots = rustls::RootCertStore::empty();
    let found = rustls_native_certs::load_native_certs();
    for certificate in found.certs {
        // A system certificate rustls cannot use is skipped, as browsers do.
        let _ = roots.add(certificate);
    }
    if roots.is_empty() {
        return Err("no ca_file is given and the system has no CA certificates".to_owned());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| error.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// How a client connects to the broker of `spec` as `client_id` (its address, TLS with the
/// source's CA, its credentials); refused when the URL or the TLS setup is unusable.
pub(crate) fn broker_options(
    spec: &SourceSpec,
    password: Option<&SecretValue>,
    client_id: String,
) -> Result<MqttOptions, String> {
    let (host, port, tls) =
        address(&spec.url).ok_or_else(|| format!("{:?} is not a broker address", spec.url))?;
    let mut options = MqttOptions::new(client_id, host, port);
    options.set_keep_alive(Duration::from_secs(spec.keep_alive.max(5)));
    options.set_max_packet_size(Some(MAX_PACKET_BYTES));
    options.set_outgoing_inflight_upper_limit(PUBLISHES_IN_FLIGHT);
    // A write to the field is a small packet an operator waits for: sent at once, not held
    // back (Nagle) until the broker acknowledges what went before.
    let mut network = NetworkOptions::new();
    network.set_tcp_nodelay(true);
    options.set_network_options(network);
    if tls {
        let config = tls_config(&spec.ca_file).map_err(|reason| format!("TLS to the broker: {reason}"))?;
        options.set_transport(Transport::tls_with_config(TlsConfiguration::Rustls(config)));
    }
    if !spec.username.is_empty() {
        options.set_credentials(spec.username.clone(), password.map_or("", SecretValue::expose));
    }
    Ok(options)
}

impl SourceTask {
    /// The task of `spec` feeding `bindings`; refused when the URL or TLS setup is unusable.
    pub(crate) fn new(
        spec: SourceSpec,
        password: Option<SecretValue>,
        bindings: Vec<Binding>,
        plant: Plant,
        board: SourceBoard,
        index: usize,
        feed: WriteFeed,
    ) -> Result<Self, String> {
        let options = broker_options(&spec, password.as_ref(), spec.client_id())?;
        let mut task = Self {
            spec,
            options,
            tags: Vec::with_capacity(bindings.len()),
            by_topic: KeyIndex::default(),
            by_target: HashMap::new(),
            by_tag: KeyIndex::with_capacity(bindings.len()),
            decoder: SparkplugDecoder::new(),
            plant,
            counts: board.counts_of(index),
            readings: Vec::new(),
            received: 0,
            received_counter: metrics::Counter::noop(),
            clock: BatchClock::default(),
            bound_metrics: Vec::new(),
            board,
            index,
            writes: feed.writes,
            connected: feed.connected,
            unsent: VecDeque::new(),
            collided: None,
            in_flight: HashMap::new(),
            logged: HashMap::new(),
            rebirths_asked: HashMap::new(),
        };
        // A Modbus point is no broker's (the plant file's reader keeps them apart).
        let bindings = bindings
            .into_iter()
            .filter(|binding| !matches!(binding.address, Address::Modbus(_) | Address::OpcUa { .. }));
        for (position, binding) in bindings.enumerate() {
            if let Address::Sparkplug { target, metric } = &binding.address {
                task.by_target
                    .entry(target.clone())
                    .or_default()
                    .insert(metric.clone(), position);
            }
            let uns = matches!(binding.address, Address::Uns { .. });
            task.tags.push(Bound {
                binding,
                last_update: None,
                stale: false,
            });
            if uns {
                task.by_topic.insert(&task.tags, position, topic_of);
            }
            task.by_tag.insert(&task.tags, position, tag_of);
        }
        Ok(task)
    }

    /// The filters to subscribe to: the root's whole tree, each UNS topic not under it, and
    /// every message of each Sparkplug edge node bound (its devices' too).
    fn filters(&self) -> Vec<String> {
        let root = self.spec.root.trim_matches('/');
        let mut filters = Vec::new();
        if !root.is_empty() && !self.by_topic.is_empty() {
            filters.push(format!("{root}/#"));
        }
        let prefix = format!("{root}/");
        filters.extend(
            self.by_topic
                .positions()
                .map(|position| topic_of(&self.tags[position]))
                .filter(|topic| root.is_empty() || !topic.starts_with(&prefix))
                .map(Cow::into_owned),
        );
        let mut nodes: Vec<String> = self
            .by_target
            .keys()
            .map(|target| format!("{NAMESPACE}/{}/+/{}/#", target.group, target.node))
            .collect();
        nodes.sort();
        nodes.dedup();
        filters.extend(nodes);
        filters
    }

    /// The Sparkplug edge nodes bound, once each.
    fn nodes(&self) -> Vec<(String, String)> {
        let mut nodes: Vec<(String, String)> = self
            .by_target
            .keys()
            .map(|target| (target.group.clone(), target.node.clone()))
            .collect();
        nodes.sort();
        nodes.dedup();
        nodes
    }

    pub(crate) async fn run(mut self, shutdown: CancellationToken) {
        let (client, events) = AsyncClient::new(self.options.clone(), REQUEST_QUEUE);
        // Until the broker says otherwise, nothing of it is current.
        self.mark_bad(|_| true);
        let mut link = Link {
            client,
            events,
            filters: self.filters(),
            backoff: Backoff::new(),
            connected: false,
            connected_since: None,
            reconnect_at: None,
        };
        let pause = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(pause);
        let mut staleness = tokio::time::interval(self.staleness_tick());
        staleness.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let event = tokio::select! {
                () = shutdown.cancelled() => break,
                event = link.events.poll(), if link.reconnect_at.is_none() => event,
                () = &mut pause, if link.reconnect_at.is_some() => {
                    link.reconnect_at = None;
                    continue;
                }
                Some(write) = self.writes.recv() => {
                    self.publish_write(&link.client, link.connected, write);
                    continue;
                }
                _ = staleness.tick(), if self.spec.stale_after > 0 => {
                    self.mark_stale();
                    continue;
                }
            };
            self.handle(event, &mut link);
            // What the event loop has already read (one read from the socket brings many
            // messages) is handled in the same wake-up, and written into the plant together.
            for _ in 1..BATCH {
                if link.reconnect_at.is_some() {
                    break;
                }
                let Some(event) = link.events.poll().now_or_never() else {
                    break;
                };
                self.handle(event, &mut link);
            }
            self.flush();
            if let Some(at) = link.reconnect_at {
                pause.as_mut().reset(at);
            }
        }
        self.flush();
        self.connected.store(false, Ordering::Release);
        self.unconfirmed();
        let _ = link.client.try_disconnect();
    }

    /// One event of the connection.
    fn handle(&mut self, event: Result<Event, ConnectionError>, link: &mut Link) {
        match event {
            Ok(Event::Incoming(Packet::ConnAck(_))) => {
                link.connected = true;
                self.connected.store(true, Ordering::Release);
                link.connected_since = Some(Instant::now());
                self.counts.set_connected(true);
                // Taken here, not per message (a lookup each time): a recorder installed
                // after the task started is found at the next connection.
                self.received_counter = metrics::counter!(crate::telemetry::MQTT_MESSAGES);
                tracing::info!(source = %self.spec.name, "connected to the broker");
                // At most once: values are state (the latest counts, and the broker resends
                // retained ones on every subscription), and a broker queues QoS 1 messages
                // for a subscriber only up to a limit (Mosquitto: 1,000), dropping the
                // rest of a large retained tree.
                for filter in &link.filters {
                    if let Err(error) = link.client.try_subscribe(filter.clone(), QoS::AtMostOnce) {
                        self.note_error("connection", format!("cannot subscribe to {filter}: {error}"));
                    }
                }
                // Births are not retained: what the edge nodes hold comes from asking.
                self.decoder = SparkplugDecoder::new();
                for (group, node) in self.nodes() {
                    self.ask_rebirth_on_connect(&link.client, &group, &node);
                }
            }
            Ok(Event::Incoming(Packet::Publish(message))) => {
                self.received += 1;
                match std::str::from_utf8(&message.topic) {
                    Ok(topic)
                        if topic.starts_with(NAMESPACE) && topic[NAMESPACE.len()..].starts_with('/') =>
                    {
                        self.apply_sparkplug(&link.client, topic, &message.payload);
                    }
                    Ok(topic) => self.apply_uns(topic, &message.payload),
                    Err(_) => self.note_error("bad_topic", "a topic that is not UTF-8".to_owned()),
                }
            }
            // Events of a connection already lost (rumqttc hands them out before the next
            // ConnAck) are not this connection's: the writes they were for are answered.
            Ok(Event::Outgoing(Outgoing::Publish(id))) if link.connected => self.sent(id),
            Ok(Event::Outgoing(Outgoing::AwaitAck(id))) if link.connected => {
                self.collided = Some((id, self.unsent.pop_front().flatten()));
            }
            Ok(Event::Incoming(Packet::PubAck(ack))) if link.connected => self.acknowledged(&ack),
            Ok(_) => {}
            Err(error) => self.lost(&error, link),
        }
    }

    /// The connection failed (or could not be made): its writes are answered, its tags Bad,
    /// and the next attempt waits for the backoff's pause.
    fn lost(&mut self, error: &ConnectionError, link: &mut Link) {
        self.connected.store(false, Ordering::Release);
        // rumqttc keeps a packet-id collision across reconnects (its clean state does not
        // clear it), and while it lasts sends nothing it is asked to: no subscription, no
        // write would leave again. A new client starts clean.
        if self.collided.is_some() {
            (link.client, link.events) = AsyncClient::new(self.options.clone(), REQUEST_QUEUE);
        }
        self.unconfirmed();
        if link.connected {
            link.connected = false;
            tracing::warn!(source = %self.spec.name, error = %MessageText(&error.to_string()), "lost the broker; its tags are Bad until it is back");
            self.counts.set_connected(false);
            self.mark_bad(|_| true);
        }
        self.note_error("connection", error.to_string());
        let lasted = link
            .connected_since
            .take()
            .map_or(Duration::ZERO, |since| since.elapsed());
        link.reconnect_at = Some(tokio::time::Instant::now() + link.backoff.after(lasted));
    }

    /// Writes the values read since the last flush into the plant in one batch, and counts
    /// them and the messages received.
    fn flush(&mut self) {
        if self.received > 0 {
            self.received_counter
                .increment(std::mem::take(&mut self.received));
        }
        self.clock = BatchClock::default();
        let tags = &self.tags;
        let refused = write_readings(
            &self.plant,
            &mut self.readings,
            |position| &tags[position].binding.tag,
            &self.counts,
        );
        for error in refused {
            self.note_error("wrong_type", error.to_string());
        }
    }

    /// The client sent the oldest publish handed to it, as packet `id`.
    fn sent(&mut self, id: u16) {
        let waiting = match self.collided.take() {
            Some((held, waiting)) if held == id => waiting,
            other => {
                self.collided = other;
                self.unsent.pop_front().flatten()
            }
        };
        if let Some(waiting) = waiting {
            self.in_flight.insert(id, waiting);
        }
    }

    /// The broker acknowledged packet `ack.pkid`: its write is answered.
    fn acknowledged(&mut self, ack: &PubAck) {
        let Some(waiting) = self.in_flight.remove(&ack.pkid) else {
            return;
        };
        let source = &self.spec.name;
        let outcome = match ack.reason {
            PubAckReason::Success => {
                self.board.update(self.index, |status| status.writes += 1);
                Ok(())
            }
            PubAckReason::NoMatchingSubscribers => Err(FieldWriteError::Refused(format!(
                "the broker of source {source:?} took the write, but nothing subscribes to {}: no field device received it",
                ClientText(&waiting.topic)
            ))),
            reason => Err(FieldWriteError::Refused(format!(
                "the broker of source {source:?} refused the write ({reason:?}); nothing was written"
            ))),
        };
        let _ = waiting.done.send(outcome);
    }

    /// The connection is lost (or the task ends): every write not yet acknowledged is
    /// answered as not confirmed, and forgotten.
    fn unconfirmed(&mut self) {
        let reason = format!(
            "not confirmed: the connection to the broker of source {:?} was lost before it acknowledged the write; it may or may not have reached the field",
            self.spec.name
        );
        let collided = self.collided.take().and_then(|(_, waiting)| waiting);
        let waiting = self
            .unsent
            .drain(..)
            .flatten()
            .chain(collided)
            .chain(self.in_flight.drain().map(|(_, waiting)| waiting));
        for write in waiting {
            let _ = write
                .done
                .send(Err(FieldWriteError::NotConfirmed(reason.clone())));
        }
    }

    /// How often staleness is checked: twice per `stale_after`, at most once a second.
    fn staleness_tick(&self) -> Duration {
        Duration::from_millis((self.spec.stale_after * 500).clamp(250, 1000))
    }

    /// Reads one plain UNS message into its tag.
    fn apply_uns(&mut self, topic: &str, bytes: &[u8]) {
        let Some(position) = self.by_topic.get(&self.tags, topic, topic_of) else {
            // Under the root but bound to no tag: counted, not an error to log.
            self.count("unbound");
            return;
        };
        let kind = self.tags[position].binding.kind;
        match payload::read(bytes, kind) {
            Ok(reading) => {
                let time = reading.timestamp.unwrap_or_else(|| self.clock.system());
                self.update(position, reading.value, reading.quality, time);
            }
            Err(error) => self.refuse(topic, error.kind(), &error),
        }
    }

    /// Reads one Sparkplug B message: its metrics into their tags, its deaths as Bad, and a
    /// rebirth asked for when the decoder cannot trust what it has.
    fn apply_sparkplug(&mut self, client: &AsyncClient, topic: &str, bytes: &[u8]) {
        let decoded = match self.decoder.decode(topic, bytes, Instant::now()) {
            Ok(decoded) => decoded,
            Err(error) => {
                let kind = match &error {
                    DecodeError::TooLarge(_) => "too_large",
                    DecodeError::Topic(_) => "bad_topic",
                    DecodeError::Payload(_) => "bad_protobuf",
                    DecodeError::TooMany(_) => "too_many_nodes",
                };
                self.refuse(topic, kind, &error);
                return;
            }
        };
        if decoded.stale_death {
            tracing::debug!(source = %self.spec.name, topic = %ClientText(topic), "ignored the death of an earlier session");
        }
        if let Some(reason) = &decoded.rebirth {
            if matches!(reason, RebirthReason::SequenceGap { .. }) {
                self.note_error("sequence_gap", format!("{topic}: {reason}"));
            }
            let (group, node) = (decoded.target.group.clone(), decoded.target.node.clone());
            self.ask_rebirth(client, &group, &node, &reason.to_string());
        }
        if decoded.offline {
            self.mark_offline(&decoded);
        }
        for problem in &decoded.problems {
            let kind = match problem {
                sparkplug::MetricProblem::UnknownAlias(_) => "unknown_alias",
                _ => "bad_metric",
            };
            self.refuse(topic, kind, problem);
        }
        let Some(metrics) = self.by_target.get(&decoded.target) else {
            return;
        };
        let mut bound = std::mem::take(&mut self.bound_metrics);
        bound.extend(
            decoded
                .metrics
                .iter()
                .enumerate()
                .filter_map(|(index, metric)| Some((index, *metrics.get(&metric.name)?))),
        );
        let mut wrong = Vec::new();
        let mut late = Vec::new();
        for (index, position) in bound.drain(..) {
            let metric = &decoded.metrics[index];
            if let Some(millis) = metric
                .timestamp
                .filter(|&millis| millis > localai::LAST_RFC3339_MILLIS)
            {
                // Most likely micro- or nanoseconds: the reading would be millennia ahead.
                late.push(format!(
                    "metric {:?} is stamped {millis} Unix milliseconds, after the year 9999 (sent in micro- or nanoseconds?)",
                    metric.name
                ));
                continue;
            }
            let time = metric.timestamp.map_or_else(|| self.clock.system(), time_of);
            let kind = self.tags[position].binding.kind;
            match &metric.value {
                // A null metric: the publisher has no value; keep the last one, Bad.
                sparkplug::MetricValue::Null => self.set_quality(position, Quality::BAD),
                value => match tag_value(value, kind) {
                    Some(value) => self.update(position, value, Quality::GOOD, time),
                    None => wrong.push(format!(
                        "metric {:?} is {value:?}, not a {}",
                        metric.name,
                        crate::objects::type_label(kind)
                    )),
                },
            }
        }
        self.bound_metrics = bound;
        for reason in wrong {
            self.refuse(topic, "wrong_type", &reason);
        }
        for reason in late {
            self.refuse(topic, "bad_metric", &reason);
        }
    }

    /// A new value for the tag at `position`, written with the rest of its batch.
    fn update(&mut self, position: usize, value: TagValue, quality: Quality, time: SystemTime) {
        let now = self.clock.instant();
        let bound = &mut self.tags[position];
        bound.last_update = Some(now);
        bound.stale = false;
        self.readings.push(Reading {
            position,
            value,
            quality,
            time,
        });
    }

    /// Asks edge node `group`/`node` for its births as a connection starts, unless it was
    /// asked less than [`sparkplug::REBIRTH_PAUSE`] ago (its births may still be on their way,
    /// and a broker dropping the connection again and again must not make the node rebirth at
    /// every reconnect). Requests the decoder makes are paced by the decoder.
    fn ask_rebirth_on_connect(&mut self, client: &AsyncClient, group: &str, node: &str) {
        let key = (group.to_owned(), node.to_owned());
        if self
            .rebirths_asked
            .get(&key)
            .is_none_or(|asked| asked.elapsed() >= sparkplug::REBIRTH_PAUSE)
        {
            self.ask_rebirth(client, group, node, "the server connected");
        }
    }

    /// Asks edge node `group`/`node` for its births again.
    fn ask_rebirth(&mut self, client: &AsyncClient, group: &str, node: &str, why: &str) {
        let now = Instant::now();
        if self.rebirths_asked.len() >= sparkplug::MAX_NODES {
            self.rebirths_asked
                .retain(|_, asked| now.duration_since(*asked) < sparkplug::REBIRTH_PAUSE);
        }
        self.rebirths_asked
            .insert((group.to_owned(), node.to_owned()), now);
        let (topic, payload) = sparkplug::rebirth_request(group, node, now_ms());
        match client.try_publish(topic, QoS::AtLeastOnce, false, payload) {
            Ok(()) => {
                self.unsent.push_back(None);
                if allowed(&REBIRTH_LINES) {
                    tracing::info!(source = %self.spec.name, group = %ClientText(group), node = %ClientText(node), why = %ClientText(why), "asked an edge node for a rebirth");
                }
                self.board
                    .update(self.index, |status| status.rebirths_requested += 1);
            }
            Err(error) => self.note_error(
                "connection",
                format!(
                    "cannot ask {}/{} for a rebirth: {error}",
                    ClientText(group),
                    ClientText(node)
                ),
            ),
        }
    }

    /// Hands an operator's write to the client, to be answered at its PUBACK; or answers it
    /// now when it cannot be sent.
    fn publish_write(&mut self, client: &AsyncClient, connected: bool, write: FieldWrite) {
        match self.write_message(connected, &write.tag, &write.value) {
            Ok((topic, payload)) => match client.try_publish(topic.clone(), QoS::AtLeastOnce, false, payload)
            {
                Ok(()) => self.unsent.push_back(Some(WaitingWrite {
                    topic,
                    done: write.done,
                })),
                Err(error) => {
                    let _ = write.done.send(Err(FieldWriteError::Refused(format!(
                        "source {:?} could not publish the write ({error}); nothing was written",
                        self.spec.name
                    ))));
                }
            },
            Err(reason) => {
                let _ = write.done.send(Err(FieldWriteError::Refused(reason)));
            }
        }
    }

    /// The topic and payload of a write of `tag`, or why it cannot go out.
    fn write_message(
        &self,
        connected: bool,
        tag: &str,
        value: &TagValue,
    ) -> Result<(String, Vec<u8>), String> {
        let source = &self.spec.name;
        if !connected {
            return Err(not_connected(source, "broker"));
        }
        let position = self
            .by_tag
            .get(&self.tags, tag, tag_of)
            .ok_or_else(|| format!("tag {tag:?} is not bound to source {source:?}; nothing was written"))?;
        match &self.tags[position].binding.address {
            Address::Uns { topic, command } => {
                let text = match value {
                    TagValue::Text(text) => text.to_string(),
                    other => other.to_json().to_string(),
                };
                let command = command.clone().unwrap_or_else(|| format!("{topic}/set"));
                Ok((command, text.into_bytes()))
            }
            Address::Sparkplug { target, metric } => {
                let (group, node) = (ClientText(&target.group), ClientText(&target.node));
                match self.decoder.liveness(target) {
                    sparkplug::Liveness::Alive => {}
                    sparkplug::Liveness::NeverBorn => {
                        return Err(format!(
                            "edge node {group}/{node} has not been born since source {source:?} connected (no NBIRTH); nothing was written"
                        ));
                    }
                    sparkplug::Liveness::Dead => {
                        return Err(format!(
                            "edge node {group}/{node} is dead (NDEATH); nothing was written"
                        ));
                    }
                    sparkplug::Liveness::DeviceNotBorn => {
                        let device = ClientText(target.device.as_deref().unwrap_or_default());
                        return Err(format!(
                            "device {group}/{node}/{device} is not born (no DBIRTH since its node's birth, or a DDEATH); nothing was written"
                        ));
                    }
                }
                let datatype = self.decoder.datatype_of(target, metric);
                sparkplug::write_command(target, metric, &metric_value(value), datatype, now_ms()).ok_or_else(
                    || format!("{value:?} does not fit metric {metric:?} as its birth declared it; nothing was written"),
                )
            }
            Address::Modbus(_) | Address::OpcUa { .. } => Err(format!(
                "tag {tag:?} is not on broker {source:?}; nothing was written"
            )),
        }
    }

    /// Counts (and logs, at most once a minute per topic and within every source's allowance
    /// together) a refused message.
    fn refuse(&mut self, topic: &str, kind: &str, error: &dyn std::fmt::Display) {
        metrics::counter!(crate::telemetry::MQTT_REFUSED, "kind" => kind.to_owned()).increment(1);
        let now = Instant::now();
        let due = self
            .logged
            .get(topic)
            .is_none_or(|last| now.duration_since(*last) >= LOG_EVERY);
        if due {
            if self.logged.len() >= MAX_LOGGED_TOPICS {
                self.logged.clear();
            }
            self.logged.insert(topic.to_owned(), now);
            if allowed(&REFUSAL_LINES) {
                tracing::warn!(source = %self.spec.name, topic = %ClientText(topic), error = %ClientText(&error.to_string()), "message refused (logged at most once a minute per topic)");
            }
        }
        self.note_error(kind, format!("{}: {error}", ClientText(topic)));
    }

    fn count(&self, kind: &str) {
        self.board.update(self.index, |status| {
            *status.errors.entry(kind.to_owned()).or_default() += 1
        });
    }

    fn note_error(&self, kind: &str, message: String) {
        self.board.update(self.index, |status| {
            *status.errors.entry(kind.to_owned()).or_default() += 1;
            status.last_error = Some((SystemTime::now(), message));
        });
    }

    /// The tags of a dead (or untrusted) node or device: Bad, keeping their values.
    fn mark_offline(&mut self, decoded: &Decoded) {
        let whole_node = decoded.kind == MessageKind::NDeath || decoded.target.device.is_none();
        self.mark_bad(|address| match address {
            Address::Sparkplug { target, .. } => {
                target.group == decoded.target.group
                    && target.node == decoded.target.node
                    && (whole_node || target.device == decoded.target.device)
            }
            Address::Uns { .. } | Address::Modbus(_) | Address::OpcUa { .. } => false,
        });
    }

    /// Marks the bound tags `which` picks Bad, keeping each one's value and its time.
    fn mark_bad(&mut self, which: impl Fn(&Address) -> bool) {
        for position in 0..self.tags.len() {
            if which(&self.tags[position].binding.address) {
                self.set_quality(position, Quality::BAD);
            }
        }
    }

    /// Tags past `stale_after` without an update: Uncertain, keeping value and time.
    fn mark_stale(&mut self) {
        let limit = Duration::from_secs(self.spec.stale_after);
        let now = Instant::now();
        for position in 0..self.tags.len() {
            let bound = &mut self.tags[position];
            let Some(last) = bound.last_update else { continue };
            if bound.stale || now.duration_since(last) < limit {
                continue;
            }
            bound.stale = true;
            self.set_quality(position, Quality::UNCERTAIN);
        }
    }

    /// Lowers the tag's quality to `quality` (never raises it), keeping value and time; the
    /// values read before it are written first, so the tag ends as the messages left it.
    fn set_quality(&mut self, position: usize, quality: Quality) {
        self.flush();
        lower_quality(&self.plant, &self.tags[position].binding.tag, quality);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_addresses_take_default_ports_and_bracketed_ipv6() {
        assert_eq!(address("mqtt://broker"), Some(("broker".to_owned(), 1883, false)));
        assert_eq!(address("mqtts://broker"), Some(("broker".to_owned(), 8883, true)));
        assert_eq!(
            address("mqtt://127.0.0.1:1999/"),
            Some(("127.0.0.1".to_owned(), 1999, false))
        );
        assert_eq!(
            address("mqtts://[::1]:8000"),
            Some(("::1".to_owned(), 8000, true))
        );
        assert_eq!(address("mqtt://host:port"), None);
    }
}
