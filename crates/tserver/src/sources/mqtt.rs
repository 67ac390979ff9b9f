//! One MQTT source: its connection (rumqttc's event loop, which reconnects when polled after
//! a failure), the subscriptions made again on every connection, each message read into the
//! plant, and the tags marked Bad while the broker is out of reach.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime};

use plant_model::SourceSpec;
use rumqttc::{AsyncClient, Event, EventLoop, Incoming, MqttOptions, QoS};
use tokio_util::sync::CancellationToken;

use super::payload::{self, MAX_PAYLOAD_BYTES};
use super::{Binding, SourceBoard};
use crate::objects::Quality;
use crate::plant::Plant;

/// The first pause before reconnecting, doubled after each failure up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// A topic's bad messages are logged at most this often.
const LOG_EVERY: Duration = Duration::from_secs(60);

/// Topics remembered for the log allowance (past that, the oldest are forgotten).
const MAX_LOGGED_TOPICS: usize = 1024;

/// The task of one source.
pub(crate) struct SourceTask {
    spec: SourceSpec,
    password: Option<String>,
    bindings: HashMap<String, Binding>,
    plant: Plant,
    board: SourceBoard,
    index: usize,
    /// When each topic last had a bad message logged.
    logged: HashMap<String, Instant>,
}

impl SourceTask {
    pub(crate) fn new(
        spec: SourceSpec,
        password: Option<String>,
        bindings: HashMap<String, Binding>,
        plant: Plant,
        board: SourceBoard,
        index: usize,
    ) -> Self {
        Self {
            spec,
            password,
            bindings,
            plant,
            board,
            index,
            logged: HashMap::new(),
        }
    }

    /// The host and port of the source's URL (`mqtt://` 1883, `mqtts://` 8883 by default).
    fn address(&self) -> Option<(String, u16, bool)> {
        let (scheme, rest) = self.spec.url.split_once("://")?;
        let tls = scheme == "mqtts";
        let rest = rest.trim_end_matches('/');
        let (host, port) = match rest.rsplit_once(':') {
            Some((host, port)) if !host.ends_with(']') || rest.starts_with('[') => (host, port.parse().ok()?),
            _ => (rest, if tls { 8883 } else { 1883 }),
        };
        Some((host.trim_matches(['[', ']']).to_owned(), port, tls))
    }

    /// The filters to subscribe to: the root's whole tree when every binding is under it, and
    /// each topic that is not.
    fn filters(&self) -> Vec<String> {
        let root = self.spec.root.trim_matches('/');
        let mut filters = Vec::new();
        if !root.is_empty() {
            filters.push(format!("{root}/#"));
        }
        let prefix = format!("{root}/");
        filters.extend(
            self.bindings
                .keys()
                .filter(|topic| root.is_empty() || !topic.starts_with(&prefix))
                .cloned(),
        );
        filters
    }

    fn connect(&self) -> Result<(AsyncClient, EventLoop), String> {
        let (host, port, tls) = self
            .address()
            .ok_or_else(|| format!("{:?} is not a broker address", self.spec.url))?;
        if tls {
            // The plant file accepts mqtts:// now; TLS to brokers comes with its CA handling.
            return Err("mqtts:// is not supported yet; use mqtt://".to_owned());
        }
        let mut options = MqttOptions::new(self.spec.client_id(), host, port);
        options.set_keep_alive(Duration::from_secs(self.spec.keep_alive));
        // A message larger than any payload read is refused by the client, unread.
        options.set_max_packet_size(MAX_PAYLOAD_BYTES + 4096, 64 * 1024);
        if !self.spec.username.is_empty() {
            options.set_credentials(
                self.spec.username.clone(),
                self.password.clone().unwrap_or_default(),
            );
        }
        Ok(AsyncClient::new(options, 64))
    }

    pub(crate) async fn run(mut self, shutdown: CancellationToken) {
        let (client, mut events) = match self.connect() {
            Ok(connection) => connection,
            Err(reason) => {
                tracing::error!(source = %self.spec.name, %reason, "source not started");
                self.note_error("connection", reason);
                return;
            }
        };
        // Until the broker says otherwise, nothing of it is current.
        self.mark_bad();
        let filters = self.filters();
        let mut backoff = FIRST_BACKOFF;
        let mut connected = false;
        loop {
            let event = tokio::select! {
                () = shutdown.cancelled() => break,
                event = events.poll() => event,
            };
            match event {
                Ok(Event::Incoming(Incoming::ConnAck(_))) => {
                    connected = true;
                    backoff = FIRST_BACKOFF;
                    self.board.update(self.index, |status| status.connected = true);
                    tracing::info!(source = %self.spec.name, "connected to the broker");
                    for filter in &filters {
                        if let Err(error) = client.try_subscribe(filter.clone(), QoS::AtLeastOnce) {
                            self.note_error("connection", format!("cannot subscribe to {filter}: {error}"));
                        }
                    }
                }
                Ok(Event::Incoming(Incoming::Publish(message))) => {
                    self.apply(&message.topic, &message.payload);
                }
                Ok(_) => {}
                Err(error) => {
                    if connected {
                        connected = false;
                        tracing::warn!(source = %self.spec.name, %error, "lost the broker; its tags are Bad until it is back");
                        self.board.update(self.index, |status| status.connected = false);
                        self.mark_bad();
                    }
                    self.note_error("connection", error.to_string());
                    tokio::select! {
                        () = shutdown.cancelled() => break,
                        () = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
        let _ = client.try_disconnect();
    }

    /// Reads one message into its tag.
    fn apply(&mut self, topic: &str, bytes: &[u8]) {
        let Some(binding) = self.bindings.get(topic) else {
            // Under the root but bound to no tag: counted, not an error to log.
            self.board.update(self.index, |status| {
                *status.errors.entry("unbound".to_owned()).or_default() += 1
            });
            return;
        };
        match payload::read(bytes, binding.kind) {
            Ok(reading) => {
                let time = reading.timestamp.unwrap_or_else(SystemTime::now);
                match self
                    .plant
                    .write_at(&binding.tag, reading.value, reading.quality, time)
                {
                    Ok(_) => self.board.update(self.index, |status| status.messages += 1),
                    // A reload between the binding and now: the tag is gone or retyped.
                    Err(error) => self.note_error("wrong_type", error.to_string()),
                }
            }
            Err(error) => {
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
                    tracing::warn!(source = %self.spec.name, topic = %crate::log_text::ClientText(topic), %error, "message refused (logged at most once a minute per topic)");
                }
                self.note_error(error.kind(), format!("{topic}: {error}"));
            }
        }
    }

    fn note_error(&self, kind: &str, message: String) {
        self.board.update(self.index, |status| {
            *status.errors.entry(kind.to_owned()).or_default() += 1;
            status.last_error = Some((SystemTime::now(), message));
        });
    }

    /// Marks every bound tag Bad, keeping its value and the time of that value.
    fn mark_bad(&self) {
        let objects = self.plant.objects();
        for binding in self.bindings.values() {
            if let Some(tag) = objects.tag(&binding.tag) {
                let current = tag.current();
                if current.quality != Quality::BAD {
                    let _ = self.plant.write_at(
                        &binding.tag,
                        current.value.clone(),
                        Quality::BAD,
                        current.timestamp,
                    );
                }
            }
        }
    }
}
