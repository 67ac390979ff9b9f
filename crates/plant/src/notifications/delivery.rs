//! One notification's delivery: its bounded queue (the oldest dropped first when full,
//! counted), and the task that sends what waits in it as batches, to a webhook (one JSON POST
//! each) or an MQTT broker (a few events each on their alarm's topic, more as one summary),
//! retrying a failed batch with back-off from 1 s to a minute.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use localai::secrets::SecretValue;
use rumqttc::v5::mqttbytes::QoS;
use rumqttc::v5::{AsyncClient, MqttOptions};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::Notice;

/// The most notices a notification holds waiting; past it the oldest go, counted. A trip of a
/// few thousand alarms and its reset, two events each, fit whole (a notice is a few hundred
/// bytes: a few megabytes at most).
pub(crate) const OUTBOX_CAPACITY: usize = 10_000;
/// The most notices one batch carries; the rest follow in the next.
const MAX_BATCH: usize = 500;
/// The most events a batch lists one by one (the rest are counted in its summary).
const LISTED: usize = 50;
/// At most this many events go to MQTT each on its alarm's topic; more are one summary.
const EACH_ON_ITS_TOPIC: usize = 5;
/// How long a batch waits, after the first notice, for the ones recorded with it.
const GATHER: Duration = Duration::from_millis(200);
/// The first wait after a failed delivery, doubled each time up to [`LONGEST_WAIT`].
const FIRST_WAIT: Duration = Duration::from_secs(1);
const LONGEST_WAIT: Duration = Duration::from_secs(60);
/// How long a webhook has to answer.
const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// A notification's queue of notices waiting to be sent.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    waiting: Mutex<VecDeque<Notice>>,
    /// Dropped from a full queue since the last batch said so.
    dropped: AtomicU64,
    wake: Notify,
}

impl Outbox {
    /// Queues `notice`; a full queue drops its oldest, counted.
    pub(crate) fn push(&self, notice: Notice) {
        {
            let mut waiting = self
                .waiting
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if waiting.len() >= OUTBOX_CAPACITY {
                waiting.pop_front();
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
            waiting.push_back(notice);
        }
        self.wake.notify_one();
    }

    /// Says what a stopped notification leaves unsent (the server stopping, an import changing
    /// the notifications).
    fn left_behind(&self, name: &str) {
        let left = self
            .waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len();
        if left > 0 {
            tracing::warn!(notification = %name, left, "notification stopped with events not sent");
        }
    }

    /// The next batch: at most [`MAX_BATCH`] notices, oldest first, and how many were dropped
    /// before them.
    fn take(&self) -> (Vec<Notice>, u64) {
        let mut waiting = self
            .waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = waiting.len().min(MAX_BATCH);
        let notices = waiting.drain(..count).collect();
        (notices, self.dropped.swap(0, Ordering::Relaxed))
    }
}

/// Where a notification sends.
pub(crate) enum Sink {
    /// A JSON POST to `url`, with a bearer token when given.
    Webhook {
        url: String,
        token: Option<SecretValue>,
        client: reqwest::Client,
    },
    /// Publishes under `root` on a broker, through a client of the notification's own.
    Mqtt { client: AsyncClient, root: String },
}

impl Sink {
    pub(crate) fn webhook(url: &str, token: Option<SecretValue>) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .timeout(WEBHOOK_TIMEOUT)
            .build()
            .map_err(|error| format!("cannot make the webhook's HTTP client: {error}"))?;
        Ok(Self::Webhook {
            url: url.to_owned(),
            token,
            client,
        })
    }

    /// A broker's client, its connection driven by a task of its own (reconnecting after a
    /// second) until `stop`.
    pub(crate) fn mqtt(options: MqttOptions, root: &str, stop: &CancellationToken) -> Self {
        let (client, mut connection) = AsyncClient::new(options, MAX_BATCH);
        let stop = stop.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    polled = connection.poll() => {
                        if polled.is_err() {
                            tokio::select! {
                                () = stop.cancelled() => return,
                                () = tokio::time::sleep(FIRST_WAIT) => {}
                            }
                        }
                    }
                }
            }
        });
        Self::Mqtt {
            client,
            root: root.trim_end_matches('/').to_owned(),
        }
    }

    /// Sends `batch`; why it could not be, in words that name no secret.
    async fn send(&self, batch: &Batch<'_>) -> Result<(), String> {
        match self {
            Self::Webhook { url, token, client } => {
                let mut request = client
                    .post(url)
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(batch.to_json().to_string());
                if let Some(token) = token {
                    request = request.bearer_auth(token.expose());
                }
                let response = request.send().await.map_err(|error| {
                    // reqwest's error names the URL; the URL is the plant file's, no secret.
                    format!("the webhook cannot be reached: {}", error.without_url())
                })?;
                if response.status().is_success() {
                    Ok(())
                } else {
                    Err(format!("the webhook answered HTTP {}", response.status()))
                }
            }
            Self::Mqtt { client, root } => {
                let topic = |alarm: Option<&str>| {
                    let base = if root.is_empty() {
                        "alarms".to_owned()
                    } else {
                        format!("{root}/alarms")
                    };
                    alarm.map_or_else(|| base.clone(), |alarm| format!("{base}/{alarm}"))
                };
                let publish = |topic: String, payload: Value| async move {
                    client
                        .publish(topic, QoS::AtLeastOnce, false, payload.to_string())
                        .await
                        .map_err(|error| format!("cannot publish to the broker: {error}"))
                };
                if batch.notices.len() <= EACH_ON_ITS_TOPIC && batch.dropped == 0 {
                    for notice in batch.notices {
                        let mut payload = notice.to_json();
                        payload["notification"] = json!(batch.notification);
                        publish(topic(Some(&notice.alarm)), payload).await?;
                    }
                    Ok(())
                } else {
                    publish(topic(None), batch.to_json()).await
                }
            }
        }
    }
}

/// What one delivery carries.
struct Batch<'a> {
    notification: &'a str,
    notices: &'a [Notice],
    dropped: u64,
}

impl Batch<'_> {
    /// `{"notification", "count", "dropped", "summary": {"cleared": 12}, "events": [...],
    /// "more"}`: at most [`LISTED`] events one by one, every one counted in the summary.
    fn to_json(&self) -> Value {
        let mut summary: BTreeMap<&str, u64> = BTreeMap::new();
        for notice in self.notices {
            *summary.entry(notice.event.name()).or_default() += 1;
        }
        let listed: Vec<Value> = self.notices.iter().take(LISTED).map(Notice::to_json).collect();
        json!({
            "notification": self.notification,
            "count": self.notices.len(),
            "dropped": self.dropped,
            "summary": summary,
            "events": listed,
            "more": self.notices.len().saturating_sub(LISTED),
        })
    }
}

/// Sends what `outbox` holds through `sink` until `shutdown`, a batch at a time, each retried
/// until it is delivered: notices queued meanwhile wait (within the queue's bound) and go in
/// the batches after it, in order.
pub(crate) async fn deliver(
    name: String,
    sink: Sink,
    outbox: std::sync::Arc<Outbox>,
    shutdown: CancellationToken,
) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return outbox.left_behind(&name),
            () = outbox.wake.notified() => {}
        }
        // The notices recorded with the first come within a moment: one batch.
        tokio::select! {
            () = shutdown.cancelled() => return outbox.left_behind(&name),
            () = tokio::time::sleep(GATHER) => {}
        }
        loop {
            let (notices, dropped) = outbox.take();
            if notices.is_empty() && dropped == 0 {
                break;
            }
            if dropped > 0 {
                tracing::warn!(notification = %name, dropped, "notifications dropped: the queue was full (oldest first)");
            }
            let batch = Batch {
                notification: &name,
                notices: &notices,
                dropped,
            };
            let mut wait = FIRST_WAIT;
            let mut failures = 0_u32;
            while let Err(reason) = sink.send(&batch).await {
                failures += 1;
                // Said once, then every tenth try: a target down for an hour is not a log flood.
                if failures == 1 || failures.is_multiple_of(10) {
                    tracing::warn!(notification = %name, failures, %reason, "notification not delivered; trying again");
                }
                tokio::select! {
                    () = shutdown.cancelled() => return outbox.left_behind(&name),
                    () = tokio::time::sleep(wait) => {}
                }
                wait = (wait * 2).min(LONGEST_WAIT);
            }
            if failures > 0 {
                tracing::info!(notification = %name, failures, "notification delivered after failures");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plant_model::NotifiedEvent;

    fn notice(index: usize) -> Notice {
        Notice {
            event: if index.is_multiple_of(2) {
                NotifiedEvent::Active
            } else {
                NotifiedEvent::Cleared
            },
            alarm: format!("A{index}"),
            tag: format!("T{index}"),
            priority: 500,
            message: String::new(),
            time: std::time::SystemTime::UNIX_EPOCH,
            value: None,
            user: None,
            reason: None,
        }
    }

    #[test]
    fn a_full_queue_drops_its_oldest_and_the_next_batch_says_how_many() {
        let outbox = Outbox::default();
        for index in 0..OUTBOX_CAPACITY + 3 {
            outbox.push(notice(index));
        }
        let (first, dropped) = outbox.take();
        assert_eq!((first.len(), dropped), (MAX_BATCH, 3));
        assert_eq!(first[0].alarm, "A3", "the oldest went first");
        // The rest follow in batches, none saying a drop again.
        let mut rest = 0;
        loop {
            let (batch, dropped) = outbox.take();
            assert_eq!(dropped, 0);
            if batch.is_empty() {
                break;
            }
            assert!(batch.len() <= MAX_BATCH);
            rest += batch.len();
        }
        assert_eq!(rest, OUTBOX_CAPACITY - MAX_BATCH);
        let batch = Batch {
            notification: "n",
            notices: &first,
            dropped: 3,
        };
        let json = batch.to_json();
        assert_eq!(
            (&json["count"], &json["dropped"], &json["more"]),
            (&json!(MAX_BATCH), &json!(3), &json!(MAX_BATCH - LISTED))
        );
        assert_eq!(json["events"].as_array().map(Vec::len), Some(LISTED));
        assert_eq!(
            json["summary"],
            json!({"active": MAX_BATCH / 2, "cleared": MAX_BATCH / 2})
        );
    }
}
