//! Alarm notifications (`[[notifications]]`): the leading node sends the alarm events it
//! records, of the priorities and folders each notification names, to a webhook or to an MQTT
//! broker under the source's root, and escalates an alarm left unacknowledged past its
//! `time_to_respond`. Events recorded together (within the historian's flush, about a second)
//! and those queued while a target is down go out together: a group of alarms clearing or
//! coming back is one notification, never a flood of them. Each target keeps a bounded queue
//! and retries with back-off; what a full queue drops is counted, logged and said in the next
//! notification.

mod delivery;

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use plant_model::{AlarmEvent, NotificationSpec, NotifiedEvent};
use serde_json::{Value, json};
use store::Store;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::objects::{ObjectModel, is_below};
use crate::plant::PlantReader;
use crate::sources::{broker_options, password_of, secret_of};

pub(crate) use delivery::Outbox;
use delivery::Sink;

/// Batches of recorded events waiting for the dispatcher at most; past it the historian counts
/// what it could not hand over and says so.
pub(crate) const RECORDED_BATCHES: usize = 64;
/// How often escalations are looked for.
const ESCALATION_LOOK: Duration = Duration::from_secs(1);

/// One alarm event as a notification carries it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Notice {
    pub(crate) event: NotifiedEvent,
    pub(crate) alarm: String,
    pub(crate) tag: String,
    pub(crate) priority: u32,
    pub(crate) message: String,
    pub(crate) time: SystemTime,
    pub(crate) value: Option<f64>,
    pub(crate) user: Option<String>,
    pub(crate) reason: Option<String>,
}

impl Notice {
    fn of(event: &AlarmEvent) -> Self {
        Self {
            event: NotifiedEvent::of(event.kind),
            alarm: event.alarm.clone(),
            tag: event.tag.clone(),
            priority: event.priority,
            message: event.message.clone(),
            time: event.time,
            value: event.value,
            user: event.user.clone(),
            reason: event.reason.clone(),
        }
    }

    /// The notice as JSON: what a webhook's `events` and an MQTT message carry.
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "event": self.event.name(),
            "alarm": self.alarm,
            "tag": self.tag,
            "priority": self.priority,
            "message": self.message,
            "time": localai::iso8601_millis(self.time),
            "value": self.value,
            "user": self.user,
            "reason": self.reason,
        })
    }
}

/// A notification being served: what it sends, and its queue.
struct Target {
    spec: NotificationSpec,
    outbox: std::sync::Arc<Outbox>,
}

impl Target {
    /// Whether `notice`, of an alarm on a tag at `path`, is one this notification sends.
    fn wants(&self, notice: &Notice, path: Option<&str>) -> bool {
        self.spec.events.contains(&notice.event)
            && notice.priority >= self.spec.min_priority
            && (self.spec.folders.is_empty()
                || path.is_some_and(|path| self.spec.folders.iter().any(|folder| is_below(folder, path))))
    }
}

/// The notifications being served, as started: what a plant import is compared with, and what
/// stops them.
#[derive(Debug, Default)]
pub(crate) struct Serving {
    /// Until when the runtime serves (`None` before serving starts).
    shutdown: Option<CancellationToken>,
    /// What the running ones were started from.
    started_from: Option<store::PlantNotifications>,
    /// Stops the running ones.
    stop: Option<CancellationToken>,
}

impl Serving {
    /// Starts the plant's notifications as `store` keeps them (again, when they changed since
    /// the last start), the ones running stopped first; the historian hands its events to the
    /// new ones. Returns how many run. Before [`Serving::serve`] nothing starts.
    pub(crate) async fn follow(
        &mut self,
        store: &Store,
        plant: &PlantReader,
    ) -> Result<usize, store::SolutionError> {
        let Some(shutdown) = self.shutdown.clone() else {
            return Ok(0);
        };
        let stored = store.plant_notifications().await?;
        if self.started_from.as_ref() == Some(&stored) {
            return Ok(self
                .started_from
                .as_ref()
                .map_or(0, |running| running.notifications.len()));
        }
        if let Some(stop) = self.stop.take() {
            stop.cancel();
        }
        let stop = shutdown.child_token();
        let (to, recorded) = mpsc::channel(RECORDED_BATCHES);
        let started = start(store, &stored, plant.clone(), recorded, &stop).await;
        plant.historian().notify_to((started > 0).then_some(to));
        self.started_from = Some(stored);
        self.stop = Some(stop);
        Ok(started)
    }

    /// From now on, notifications run until `shutdown`.
    pub(crate) fn serve(&mut self, shutdown: &CancellationToken) {
        self.shutdown = Some(shutdown.clone());
    }
}

/// Starts the notifications `stored` until `shutdown`: a delivery task each, and the dispatcher
/// that routes what the historian records (`recorded`) and looks for escalations. Returns how
/// many started; one that cannot (a secret not stored, an unusable broker address) is logged
/// and left out.
async fn start(
    store: &Store,
    stored: &store::PlantNotifications,
    plant: PlantReader,
    recorded: mpsc::Receiver<Vec<AlarmEvent>>,
    shutdown: &CancellationToken,
) -> usize {
    let mut targets = Vec::with_capacity(stored.notifications.len());
    for spec in stored.notifications.iter().cloned() {
        let sink = match sink_of(store, &spec, &stored.sources, shutdown).await {
            Ok(sink) => sink,
            Err(reason) => {
                tracing::error!(notification = %spec.name, %reason, "notification not started");
                continue;
            }
        };
        let outbox = std::sync::Arc::new(Outbox::default());
        tokio::spawn(delivery::deliver(
            spec.name.clone(),
            sink,
            std::sync::Arc::clone(&outbox),
            shutdown.clone(),
        ));
        targets.push(Target { spec, outbox });
    }
    let count = targets.len();
    if count > 0 {
        tokio::spawn(dispatch(targets, plant, recorded, shutdown.clone()));
    }
    count
}

/// Where `spec` sends: its webhook (with its token) or its source's broker.
async fn sink_of(
    store: &Store,
    spec: &NotificationSpec,
    sources: &[plant_model::SourceSpec],
    stop: &CancellationToken,
) -> Result<Sink, String> {
    if !spec.webhook.is_empty() {
        let token = secret_of(store, &spec.token, "token").await?;
        return Sink::webhook(&spec.webhook, token);
    }
    let source = sources
        .iter()
        .find(|source| source.name == spec.mqtt)
        .ok_or_else(|| format!("no source named {:?}", spec.mqtt))?;
    let password = password_of(store, source).await?;
    let options = broker_options(
        source,
        password.as_ref(),
        format!("{}-notify", source.client_id()),
    )?;
    Ok(Sink::mqtt(options, &source.root, stop))
}

/// Routes recorded events to the targets that want them, and escalations once a second,
/// until `shutdown`. Only while this node leads (records what every node sees): another node
/// sends nothing, so an event is notified once.
async fn dispatch(
    targets: Vec<Target>,
    plant: PlantReader,
    mut recorded: mpsc::Receiver<Vec<AlarmEvent>>,
    shutdown: CancellationToken,
) {
    let mut escalated: HashMap<String, SystemTime> = HashMap::new();
    let mut look = tokio::time::interval(ESCALATION_LOOK);
    look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        let notices: Vec<Notice> = tokio::select! {
            () = shutdown.cancelled() => return,
            batch = recorded.recv() => match batch {
                Some(events) => events.iter().map(Notice::of).collect(),
                None => return,
            },
            _ = look.tick() => {
                if !plant.historian().records_shared() {
                    continue;
                }
                escalations(&plant.objects(), &mut escalated, SystemTime::now())
            }
        };
        if notices.is_empty() {
            continue;
        }
        let objects = plant.objects();
        for notice in &notices {
            let path = objects.tag(&notice.tag).map(|tag| tag.definition().path.clone());
            for target in targets
                .iter()
                .filter(|target| target.wants(notice, path.as_deref()))
            {
                target.outbox.push(notice.clone());
            }
        }
    }
}

/// The alarms annunciated and unacknowledged past their `time_to_respond` at `now` and not yet
/// escalated for this activation (`escalated` remembers each alarm's, and forgets the alarms
/// no longer waiting).
fn escalations(
    objects: &ObjectModel,
    escalated: &mut HashMap<String, SystemTime>,
    now: SystemTime,
) -> Vec<Notice> {
    let mut notices = Vec::new();
    let mut waiting = HashMap::new();
    for alarm in objects.alarms() {
        let definition = alarm.definition();
        let Some(seconds) = definition.guidance.time_to_respond else {
            continue;
        };
        let Some((since, trip_value)) = alarm.waiting_since() else {
            continue;
        };
        waiting.insert(definition.name.clone(), since);
        let due = since + Duration::from_secs(u64::from(seconds));
        if now < due || escalated.get(&definition.name) == Some(&since) {
            continue;
        }
        notices.push(Notice {
            event: NotifiedEvent::Escalated,
            alarm: definition.name.clone(),
            tag: definition.tag.clone(),
            priority: definition.priority,
            message: definition.message.clone(),
            time: now,
            value: trip_value,
            user: None,
            reason: Some(format!(
                "unacknowledged {} s after it tripped; its time to respond is {seconds} s",
                now.duration_since(since).unwrap_or_default().as_secs()
            )),
        });
    }
    escalated.retain(|alarm, since| waiting.get(alarm) == Some(since));
    for notice in &notices {
        if let Some(since) = waiting.get(&notice.alarm) {
            escalated.insert(notice.alarm.clone(), *since);
        }
    }
    notices
}
