//! Live plant data from the field: the plant file's `[[sources]]`, each a task holding one
//! connection. An MQTT source (rumqttc, MQTT 5) reads plain UNS messages and Sparkplug B
//! metrics; a Modbus source (tokio-modbus) polls a device's coils and registers; an OPC UA
//! source (async-opcua) subscribes to a server's variables. Each reads into the tags bound to
//! it, with honest quality, and carries operators' writes out to the field.
//!
//! Quality: while a broker or device is unreachable, after a Sparkplug DEATH, or before a
//! tag's first value, the tag is Bad; past its source's `stale_after` without an update (MQTT)
//! it is Uncertain. Either way it keeps its last value and that value's time. A task connects
//! again after a growing pause; nothing it does blocks the server.
//!
//! Writes: a write to a source-bound tag is sent to the field (an MQTT publish to
//! `<topic>/set` or a Sparkplug NCMD/DCMD, answered at the broker's PUBACK; a Modbus write,
//! answered by the device; an OPC UA Write, answered by the server) or, after [`ACK_TIMEOUT`], answered as not confirmed; a write while
//! the source is out of reach is refused at once. It does not change the tag: the tag shows
//! the value when the field reports it back.
//!
//! Sources and bindings are read when the server starts serving (`tserver serve`); a plant
//! import that changes them restarts every source task with the new ones (a generation).

mod modbus;
mod mqtt;
pub(crate) use mqtt::broker_options;
mod opcua;
mod opcua_access;
mod opcua_browse;
mod opcua_client;
mod reconnect;

pub use opcua_access::{OpcUaAccess, OpcUaAccessError, PresentedCertificate, TrustedCertificate};
pub use opcua_browse::{BrowsedNode, SKELETON_MAX_VARIABLES, Skeleton};
pub(crate) mod payload;
mod sparkplug;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use localai::secrets::SecretValue;
use plant_model::{ExpandedPlant, SourceKind, SourceSpec, TagSpec};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::actions::Audited;
use crate::plant::{Plant, TagWrite};
use plant_model::{TagType, TagValue};
use store::{SolutionError, Store};

/// Writes waiting for one source's task; past this a write is refused as busy.
const WRITE_QUEUE: usize = 1024;

/// How long a write waits for its broker's acknowledgement (or its device's answer) before
/// it is answered as not confirmed.
pub(crate) const ACK_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a write to the field was not confirmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FieldWriteError {
    /// Nothing was sent (or the broker refused it): the field did not get it.
    Refused(String),
    /// Sent, but its broker did not acknowledge it: it may or may not have reached the field.
    NotConfirmed(String),
}

impl std::fmt::Display for FieldWriteError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Refused(reason) | Self::NotConfirmed(reason) => f.write_str(reason),
        }
    }
}

/// Where a bound tag's values come from and its writes go.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Address {
    /// A plain UNS topic, and the topic writes are published to when not `<topic>/set`.
    Uns { topic: String, command: Option<String> },
    /// A Sparkplug B metric of an edge node or device.
    Sparkplug {
        target: ::sparkplug::Target,
        metric: String,
    },
    /// A coil, discrete input or register of a Modbus device.
    Modbus(::modbus::Point),
    /// A variable of an OPC UA server, with the tag's own sampling interval (ms) and deadband
    /// (as `f64` bits), when it gives them.
    OpcUa {
        node: ::opcua::types::NodeId,
        sampling_interval: Option<u64>,
        deadband: Option<u64>,
    },
}

/// A tag fed by a source.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Binding {
    /// The tag's dotted name.
    pub(crate) tag: String,
    pub(crate) kind: TagType,
    pub(crate) address: Address,
}

/// What one source has done, for `status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceStatus {
    /// The source's name.
    pub name: String,
    /// Whether it is connected now.
    pub connected: bool,
    /// Messages read into the plant.
    pub messages: u64,
    /// Values replaced by a newer one of the same tag before they were read (OPC UA: a flood
    /// costs this count, never memory or the latest value).
    pub coalesced: u64,
    /// Messages refused, by kind (`wrong_type`, `bad_json`, `too_large`, `not_text`,
    /// `unbound`, `bad_protobuf`, `bad_topic`, `unknown_alias`, `bad_metric`, `sequence_gap`,
    /// `too_many_nodes`) and connection failures (`connection`).
    pub errors: BTreeMap<String, u64>,
    /// The last error, and when.
    pub last_error: Option<(SystemTime, String)>,
    /// Tags bound to it.
    pub tags: usize,
    /// Rebirths asked of Sparkplug edge nodes.
    pub rebirths_requested: u64,
    /// Operator writes published to the field.
    pub writes: u64,
    /// Poll cycles completed (Modbus: every read of the plan answered).
    pub polls: u64,
    /// The time those cycles took, in all (microseconds).
    pub poll_micros: u64,
}

impl SourceStatus {
    /// The report the running server stores for `tserver sources PATH status`.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "connected": self.connected,
            "messages": self.messages,
            "coalesced": self.coalesced,
            "errors": self.errors,
            "last_error": self.last_error.as_ref().map(|(time, message)| {
                serde_json::json!({"time": localai::iso8601_millis(*time), "message": message})
            }),
            "tags": self.tags,
            "rebirths_requested": self.rebirths_requested,
            "writes": self.writes,
            "polls": self.polls,
            "poll_micros": self.poll_micros,
        })
    }
}

/// How often the running server stores its sources' reports.
const REPORT_EVERY: Duration = Duration::from_secs(2);

/// Stores the board's statuses every [`REPORT_EVERY`] until `shutdown`, so another process
/// (`tserver sources PATH status`) can read them.
async fn report(store: Arc<Store>, board: SourceBoard, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(REPORT_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let reports: Vec<(String, String)> = board
            .statuses()
            .iter()
            .map(|status| (status.name.clone(), status.to_json().to_string()))
            .collect();
        if let Err(error) = store.replace_source_reports(reports).await {
            tracing::debug!(%error, "could not store the sources' reports");
        }
    }
}

/// The counts of one source that change with every value (and whether it is connected),
/// kept apart from its status so that neither its task nor a reader takes a lock for them.
#[derive(Debug, Default)]
pub struct SourceCounts {
    connected: AtomicBool,
    messages: AtomicU64,
    coalesced: AtomicU64,
}

impl SourceCounts {
    /// Whether the source is connected now.
    pub fn connected(&self) -> bool {
        self.connected.load(Ordering::Acquire)
    }

    /// Messages (values) read into the plant so far.
    pub fn messages(&self) -> u64 {
        self.messages.load(Ordering::Relaxed)
    }

    /// Values replaced by a newer one before they were read, so far.
    pub fn coalesced(&self) -> u64 {
        self.coalesced.load(Ordering::Relaxed)
    }

    fn set_connected(&self, connected: bool) {
        self.connected.store(connected, Ordering::Release);
    }

    fn add_messages(&self, count: u64) {
        self.messages.fetch_add(count, Ordering::Relaxed);
    }

    fn add_coalesced(&self, count: u64) {
        self.coalesced.fetch_add(count, Ordering::Relaxed);
    }
}

/// One source on the board: its status, and the counts kept outside the lock.
#[derive(Debug)]
struct Entry {
    status: SourceStatus,
    counts: Arc<SourceCounts>,
}

/// The shared status of every source, updated by their tasks.
#[derive(Debug, Default, Clone)]
pub(crate) struct SourceBoard {
    entries: Arc<Mutex<Vec<Entry>>>,
}

impl SourceBoard {
    /// Every source's status now.
    pub(crate) fn statuses(&self) -> Vec<SourceStatus> {
        self.lock()
            .iter()
            .map(|entry| SourceStatus {
                connected: entry.counts.connected(),
                messages: entry.counts.messages(),
                coalesced: entry.counts.coalesced(),
                ..entry.status.clone()
            })
            .collect()
    }

    /// Every source's counts, to be read without a lock.
    pub(crate) fn counts(&self) -> Vec<Arc<SourceCounts>> {
        self.lock()
            .iter()
            .map(|entry| Arc::clone(&entry.counts))
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        // Plain counters changed in single steps: a panic elsewhere leaves them usable.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn register(&self, status: SourceStatus) -> usize {
        let mut entries = self.lock();
        entries.push(Entry {
            status,
            counts: Arc::default(),
        });
        entries.len() - 1
    }

    fn update(&self, index: usize, change: impl FnOnce(&mut SourceStatus)) {
        if let Some(entry) = self.lock().get_mut(index) {
            change(&mut entry.status);
        }
    }

    /// The counts of source `index` (fresh ones, counted nowhere, for an index not
    /// registered).
    fn counts_of(&self, index: usize) -> Arc<SourceCounts> {
        self.lock()
            .get(index)
            .map(|entry| Arc::clone(&entry.counts))
            .unwrap_or_default()
    }

    /// Counts an error of kind `kind` for source `index` and keeps it as its last.
    fn note_error(&self, index: usize, kind: &str, message: String) {
        self.update(index, |status| {
            *status.errors.entry(kind.to_owned()).or_default() += 1;
            status.last_error = Some((SystemTime::now(), message));
        });
    }
}

/// What a source refuses from its field, logged together at most once a minute each kind:
/// the budget the lines share and what they are called ("Modbus answer").
#[derive(Debug)]
struct RefusalLines {
    budget: std::sync::LazyLock<Mutex<crate::log_text::LogBudget>>,
    what: &'static str,
}

impl SourceBoard {
    /// Counts a refusal of kind `kind` for source `index` (named `source`) and logs it when
    /// `lines` allow.
    fn refuse(&self, index: usize, source: &str, lines: &RefusalLines, kind: &str, message: String) {
        let allowed = lines
            .budget
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .allow();
        if allowed {
            tracing::warn!(source = %source, error = %crate::log_text::MessageText(&message), "{} refused (logged at most once a minute)", lines.what);
        }
        self.note_error(index, kind, message);
    }
}

/// Lowers `tag`'s quality to `quality` (never raises it), keeping its value and time.
fn lower_quality(plant: &Plant, tag: &str, quality: plant_model::Quality) {
    let objects = plant.objects();
    if let Some(found) = objects.tag(tag) {
        let current = found.current();
        if current.quality.0 > quality.0 {
            let _ = plant.write_at(tag, current.value.clone(), quality, current.timestamp);
        }
    }
}

/// A value read from the field for the bound tag at `position`, waiting for its batch's write.
#[derive(Debug)]
struct Reading {
    position: usize,
    value: TagValue,
    quality: plant_model::Quality,
    time: SystemTime,
}

/// Writes `readings` into the plant as one batch (emptying it, its capacity kept), the tag of
/// each named by `tag_of`, and counts what was written; returns why the others were refused (a
/// reload between the binding and now removed or retyped the tag).
fn write_readings<'a>(
    plant: &Plant,
    readings: &mut Vec<Reading>,
    tag_of: impl Fn(usize) -> &'a str,
    counts: &SourceCounts,
) -> Vec<crate::objects::WriteError> {
    if readings.is_empty() {
        return Vec::new();
    }
    let written = plant.write_batch(readings.drain(..).map(|reading| TagWrite {
        tag: tag_of(reading.position),
        value: reading.value,
        quality: reading.quality,
        time: reading.time,
    }));
    counts.add_messages(written.written);
    written.refused
}

/// An operator's write on its way to the field.
#[derive(Debug)]
pub(crate) struct FieldWrite {
    pub(crate) tag: String,
    pub(crate) value: TagValue,
    /// Acknowledged by the broker, or why not.
    pub(crate) done: oneshot::Sender<Result<(), FieldWriteError>>,
}

/// The source task's side of its [`Inbox`].
#[derive(Debug)]
pub(crate) struct WriteFeed {
    pub(crate) writes: mpsc::Receiver<FieldWrite>,
    /// Set while the broker connection is up.
    pub(crate) connected: Arc<AtomicBool>,
}

/// Where one running source takes writes.
#[derive(Debug, Clone)]
struct Inbox {
    writes: mpsc::Sender<FieldWrite>,
    /// Set by the source's task while its connection is up: a write while it is down is
    /// refused here, at once, without queueing behind anything.
    connected: Arc<AtomicBool>,
    /// What the source connects to, for messages: "broker" or "device".
    peer: &'static str,
}

/// The running sources: their status board and the inbox of each for writes, replaced
/// together when a plant import changes the sources (a new generation).
#[derive(Debug, Default, Clone)]
pub(crate) struct Sources {
    generation: Arc<Mutex<Generation>>,
}

/// One set of source tasks, started from one plant model.
#[derive(Debug, Default, Clone)]
struct Generation {
    board: SourceBoard,
    inboxes: HashMap<String, Inbox>,
    /// The [`fingerprint`] of what it was started from: a reload that gives the same leaves
    /// it running.
    started_from: u64,
    /// Cancels this generation's tasks; `None` before the sources were started.
    cancel: Option<CancellationToken>,
    /// The server's shutdown, parent of every generation.
    shutdown: Option<CancellationToken>,
}

impl Sources {
    fn current(&self) -> Generation {
        self.generation
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Every source's status now.
    pub(crate) fn statuses(&self) -> Vec<SourceStatus> {
        self.current().board.statuses()
    }

    /// Every running source's counts, to be read without a lock (until the sources restart).
    pub(crate) fn counts(&self) -> Vec<Arc<SourceCounts>> {
        self.generation
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .board
            .counts()
    }

    /// Publishes a write of `tag` to the field through source `source` and waits (at most
    /// [`ACK_TIMEOUT`]) for its broker to acknowledge it: an act whose audit is recorded.
    pub(crate) async fn write(
        &self,
        source: &str,
        tag: &str,
        value: TagValue,
        _: &Audited,
    ) -> Result<(), FieldWriteError> {
        let inbox = self.current().inboxes.get(source).cloned().ok_or_else(|| {
            FieldWriteError::Refused(format!("source {source:?} is not running; nothing was written"))
        })?;
        if !inbox.connected.load(Ordering::Acquire) {
            return Err(FieldWriteError::Refused(not_connected(source, inbox.peer)));
        }
        let (done, outcome) = oneshot::channel();
        let write = FieldWrite {
            tag: tag.to_owned(),
            value,
            done,
        };
        inbox.writes.try_send(write).map_err(|error| match error {
            mpsc::error::TrySendError::Full(_) => FieldWriteError::Refused(format!(
                "source {source:?} has {WRITE_QUEUE} writes waiting; nothing was written"
            )),
            mpsc::error::TrySendError::Closed(_) => {
                FieldWriteError::Refused(format!("source {source:?} has stopped; nothing was written"))
            }
        })?;
        match tokio::time::timeout(ACK_TIMEOUT, outcome).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(_)) => Err(FieldWriteError::NotConfirmed(format!(
                "not confirmed: source {source:?} stopped before its {} acknowledged the write; it may or may not have reached the field",
                inbox.peer
            ))),
            Err(_) => Err(FieldWriteError::NotConfirmed(format!(
                "not confirmed: the {} of source {source:?} did not acknowledge the write within {} s; it may or may not have reached the field",
                inbox.peer,
                ACK_TIMEOUT.as_secs()
            ))),
        }
    }

    /// Starts a task per source of the solution's plant; they stop with `shutdown`. A source
    /// that cannot start (a secret that does not resolve, an unreadable CA file) is logged and
    /// counted, and the others run. Returns how many sources the plant declares.
    pub(crate) async fn start(
        &self,
        store: &Arc<Store>,
        plant: &Plant,
        shutdown: &CancellationToken,
    ) -> Result<usize, SolutionError> {
        let plant_sources = store.plant_sources().await?;
        let count = plant_sources.sources.len();
        let sources = sources_of(plant_sources);
        let passwords = passwords_of(store, &sources).await;
        let mut generation = self.generation.lock().unwrap_or_else(PoisonError::into_inner);
        *generation = start_generation(store, plant, sources, passwords, shutdown);
        Ok(count)
    }

    /// After a plant reload: when the sources or their bindings changed, stops the running
    /// tasks and starts the new ones. Nothing happens before [`Sources::start`]. One caller at
    /// a time (the runtime's background loop).
    pub(crate) async fn restart_if_changed(&self, store: &Arc<Store>, plant: &Plant) {
        let started_from = {
            let generation = self.generation.lock().unwrap_or_else(PoisonError::into_inner);
            if generation.shutdown.is_none() {
                return;
            }
            generation.started_from
        };
        let sources = match store.plant_sources().await {
            Ok(plant_sources) => sources_of(plant_sources),
            Err(error) => {
                tracing::error!(%error, "cannot read the plant's sources; the running ones stay");
                return;
            }
        };
        if fingerprint(&sources) == started_from {
            return;
        }
        let passwords = passwords_of(store, &sources).await;
        let mut generation = self.generation.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(shutdown) = generation.shutdown.clone() else {
            return;
        };
        if let Some(cancel) = generation.cancel.take() {
            cancel.cancel();
        }
        let count = sources.len();
        *generation = start_generation(store, plant, sources, passwords, &shutdown);
        tracing::info!(sources = count, "the plant's sources changed; restarted them");
    }
}

/// The refusal of a write while `source` is not connected to its `peer` (broker, device).
pub(crate) fn not_connected(source: &str, peer: &str) -> String {
    format!("source {source:?} is not connected to its {peer}; nothing was written")
}

/// Where OPC UA sources keep the client's certificate and key and the servers' certificates:
/// beside the solution file (`<solution>.opcua-pki/`), or `tserver-opcua-pki/` in the working
/// directory for a solution in PostgreSQL.
fn opcua_pki_dir(store: &Store) -> std::path::PathBuf {
    match store.file_path() {
        Some(path) => {
            let mut name = path.as_os_str().to_owned();
            name.push(".opcua-pki");
            std::path::PathBuf::from(name)
        }
        None => std::path::PathBuf::from("tserver-opcua-pki"),
    }
}

/// Each source's broker or server password (see [`password_of`]).
async fn passwords_of(
    store: &Store,
    sources: &[(SourceSpec, Vec<Binding>)],
) -> HashMap<String, Result<Option<SecretValue>, String>> {
    let mut passwords = HashMap::with_capacity(sources.len());
    for (source, _) in sources {
        passwords.insert(source.name.clone(), password_of(store, source).await);
    }
    passwords
}

/// The broker or server password of `source`: `None` without one, the secret's value for a
/// `/secret:` token, or why it cannot be had (the source then does not start).
pub(crate) async fn password_of(store: &Store, source: &SourceSpec) -> Result<Option<SecretValue>, String> {
    secret_of(store, &source.password, "password").await
}

/// The secret a `/secret:<Name>` `token` (the plant file's `what`) names: `None` for no token,
/// or why it cannot be had.
pub(crate) async fn secret_of(store: &Store, token: &str, what: &str) -> Result<Option<SecretValue>, String> {
    match token.strip_prefix(localai::secrets::TOKEN_PREFIX) {
        None => Ok(None),
        Some(name) => match store.secret(name).await {
            Ok(Some(secret)) => Ok(Some(secret)),
            Ok(None) => Err(format!("the {what} names secret {name:?}, which is not stored")),
            Err(error) => Err(error.to_string()),
        },
    }
}

/// Each source of `plant` (its sources and the tags they feed, [`Store::plant_sources`]) with
/// its bindings.
fn sources_of(plant: ExpandedPlant) -> Vec<(SourceSpec, Vec<Binding>)> {
    let source_of = |tag: &TagSpec| {
        let binding = tag.source.as_ref()?;
        plant
            .sources
            .iter()
            .position(|source| source.name == binding.source_name())
    };
    let positions: Vec<Option<usize>> = plant.tags.iter().map(source_of).collect();
    // Each source's list sized at once: a plant of 100,000 bound tags has 15 MB of bindings.
    let mut counts = vec![0; plant.sources.len()];
    for &index in positions.iter().flatten() {
        counts[index] += 1;
    }
    let mut bound: Vec<Vec<Binding>> = counts.into_iter().map(Vec::with_capacity).collect();
    for (tag, index) in plant.tags.into_iter().zip(positions) {
        let (Some(index), Some(binding)) = (index, &tag.source) else {
            continue;
        };
        let address = match (
            binding.opcua_node(),
            binding.modbus_point(),
            binding.sparkplug_target(),
            &binding.metric,
        ) {
            (Some(Ok(node)), ..) => Address::OpcUa {
                node,
                sampling_interval: binding.sampling_interval,
                deadband: binding.deadband.map(f64::to_bits),
            },
            // The plant file's reader checked the node id and the point; one it refused never
            // gets here.
            (Some(Err(_)), ..) | (None, Some(Err(_)), ..) => continue,
            (None, Some(Ok(point)), ..) => Address::Modbus(point),
            (None, None, Some((group, node, device)), Some(metric)) => Address::Sparkplug {
                target: ::sparkplug::Target {
                    group: group.to_owned(),
                    node: node.to_owned(),
                    device: device.map(str::to_owned),
                },
                metric: metric.clone(),
            },
            _ => Address::Uns {
                topic: binding
                    .topic
                    .clone()
                    .unwrap_or_else(|| plant.sources[index].topic_of(&tag.path)),
                command: binding.command_topic.clone(),
            },
        };
        bound[index].push(Binding {
            kind: tag.kind,
            tag: tag.name,
            address,
        });
    }
    plant.sources.into_iter().zip(bound).collect()
}

/// A digest of the sources and bindings of `model`: a reload with the same one leaves the
/// running sources alone (kept instead of a copy of every binding).
fn fingerprint(sources: &[(SourceSpec, Vec<Binding>)]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for (source, bindings) in sources {
        serde_json::to_string(source)
            .unwrap_or_default()
            .hash(&mut hasher);
        bindings.hash(&mut hasher);
    }
    hasher.finish()
}

/// Starts the tasks of every source of `model` under a new child of `shutdown`.
fn start_generation(
    store: &Arc<Store>,
    plant: &Plant,
    sources: Vec<(SourceSpec, Vec<Binding>)>,
    mut passwords: HashMap<String, Result<Option<SecretValue>, String>>,
    shutdown: &CancellationToken,
) -> Generation {
    let cancel = shutdown.child_token();
    let any = !sources.is_empty();
    let mut generation = Generation {
        started_from: fingerprint(&sources),
        shutdown: Some(shutdown.clone()),
        ..Generation::default()
    };
    for (source, bindings) in sources {
        let board = &generation.board;
        let index = board.register(SourceStatus {
            name: source.name.clone(),
            tags: bindings.len(),
            ..SourceStatus::default()
        });
        let name = source.name.clone();
        let refuse = |reason: String| {
            tracing::error!(source = %name, %reason, "source not started");
            board.update(index, |status| {
                *status.errors.entry("connection".to_owned()).or_default() += 1;
                status.last_error = Some((SystemTime::now(), reason));
            });
        };
        let password = match passwords.remove(&source.name).unwrap_or(Ok(None)) {
            Ok(password) => password,
            Err(reason) => {
                refuse(reason);
                continue;
            }
        };
        let (inbox, writes) = mpsc::channel(WRITE_QUEUE);
        let connected = Arc::new(AtomicBool::new(false));
        let feed = WriteFeed {
            writes,
            connected: Arc::clone(&connected),
        };
        let kind = source.kind();
        let started = match kind {
            SourceKind::Mqtt => mqtt::SourceTask::new(
                source,
                password,
                bindings,
                plant.clone(),
                board.clone(),
                index,
                feed,
            )
            .map(|task| tokio::spawn(task.run(cancel.child_token()))),
            SourceKind::Modbus => {
                modbus::ModbusSource::new(source, bindings, plant.clone(), (board.clone(), index), feed)
                    .map(|task| tokio::spawn(task.run(cancel.child_token())))
            }
            SourceKind::OpcUa => opcua::OpcUaSource::new(
                source,
                password,
                bindings,
                plant.clone(),
                (board.clone(), index, opcua_pki_dir(store)),
                feed,
            )
            .map(|task| tokio::spawn(task.run(cancel.child_token()))),
        };
        if let Err(reason) = started {
            refuse(reason);
            continue;
        }
        generation.inboxes.insert(
            name,
            Inbox {
                writes: inbox,
                connected,
                peer: match kind {
                    SourceKind::Mqtt => "broker",
                    SourceKind::Modbus => "device",
                    SourceKind::OpcUa => "server",
                },
            },
        );
    }
    if any {
        tokio::spawn(report(
            Arc::clone(store),
            generation.board.clone(),
            cancel.child_token(),
        ));
    }
    generation.cancel = Some(cancel);
    generation
}
