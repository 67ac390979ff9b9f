//! Sparkplug B from a real Mosquitto broker: an edge node simulator (a real MQTT client with
//! its NDEATH as will) births a node metric and a device metric; tserver, started after the
//! birth, asks for a rebirth and reads the births, aliased data, a sequence gap (answered with
//! another rebirth request), a device death, a write round trip through DCMD/NCMD, and the
//! node's will when its connection drops.

use std::time::{SystemTime, UNIX_EPOCH};

use plant_model::{Quality, TagValue};
use prost::Message as _;
use service_client::{TagWrite, WriteOutcome, WriteValue};
use sparkplug::edge::{EdgeNode, Reading};
use sparkplug::proto::Payload;
use sparkplug::proto::payload::metric::Value;
use tokio_util::sync::CancellationToken;
use tserver::ServerConfig;

use crate::mqtt_sources::{bind, plant_with, until, until_connected};
use crate::support::{PATIENCE, TestServer};
use tserver_tests::mosquitto::{Mosquitto, Publisher};

const GROUP: &str = "Riverside";
const NODE: &str = "Edge1";
const DEVICE: &str = "Pump1";

fn now_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("after 1970")
            .as_millis(),
    )
    .expect("fits")
}

fn node_metrics(level: f64) -> Vec<Reading> {
    vec![Reading::double("Tank1/Level", 1, level)]
}

fn device_metrics(current: f64) -> Vec<Reading> {
    vec![Reading::double("Motor/Current", 7, current)]
}

/// The edge node's side: publishes as the node, and reads the commands sent to it.
struct EdgeSimulator {
    edge: EdgeNode,
    client: Publisher,
}

impl EdgeSimulator {
    async fn connect(port: u16) -> Self {
        let edge = EdgeNode::new(GROUP, NODE);
        let mut client = Publisher::connect_with_will(port, Some(edge.will())).await;
        client.subscribe(&format!("spBv1.0/{GROUP}/NCMD/{NODE}")).await;
        client.subscribe(&format!("spBv1.0/{GROUP}/DCMD/{NODE}/+")).await;
        Self { edge, client }
    }

    async fn send(&self, message: (String, Vec<u8>)) {
        self.client.publish(&message.0, message.1, false).await;
    }

    /// NBIRTH then DBIRTH, with the given values.
    async fn birth(&mut self, level: f64, current: f64) {
        let birth = self.edge.birth(&node_metrics(level), now_ms());
        self.send(birth).await;
        let device = self.edge.device_birth(DEVICE, &device_metrics(current), now_ms());
        self.send(device).await;
    }

    /// The next command: its topic and its one metric's name and value.
    async fn command(&mut self) -> (String, String, Option<Value>) {
        let (topic, payload) = self.client.next().await;
        let payload = Payload::decode(payload.as_slice()).expect("a Sparkplug payload");
        let metric = payload.metrics.into_iter().next().expect("a metric");
        (topic, metric.name.unwrap_or_default(), metric.value)
    }

    /// Waits for a rebirth request.
    async fn rebirth_request(&mut self) {
        let (topic, name, value) = self.command().await;
        assert_eq!(topic, format!("spBv1.0/{GROUP}/NCMD/{NODE}"));
        assert_eq!(name, sparkplug::REBIRTH_METRIC);
        assert_eq!(value, Some(Value::BooleanValue(true)));
    }
}

#[tokio::test]
async fn births_aliases_gaps_deaths_and_writes_round_trip_through_a_sparkplug_edge_node() {
    let broker = Mosquitto::start();
    let solution = plant_with(&broker.url(), |model| {
        bind(
            model,
            "Tank1.Level",
            plant_model::SourceBinding {
                broker: "site".to_owned(),
                sparkplug: Some(format!("{GROUP}/{NODE}")),
                metric: Some("Tank1/Level".to_owned()),
                ..plant_model::SourceBinding::default()
            },
        );
        bind(
            model,
            "Pump1.MotorCurrent",
            plant_model::SourceBinding {
                broker: "site".to_owned(),
                sparkplug: Some(format!("{GROUP}/{NODE}/{DEVICE}")),
                metric: Some("Motor/Current".to_owned()),
                ..plant_model::SourceBinding::default()
            },
        );
        for tag in &mut model.tags {
            if tag.name == "Tank1.Level" {
                tag.writable = true;
            }
        }
    });
    let mut edge = EdgeSimulator::connect(broker.port).await;
    // Born before the server is there: the server must ask for what it missed.
    edge.birth(60.0, 11.0).await;

    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let runtime = &server.runtime;
    let shutdown = CancellationToken::new();
    runtime.start_sources(&shutdown).await.expect("starts");
    until_connected(runtime).await;
    edge.rebirth_request().await;
    edge.birth(61.0, 12.0).await;
    until(
        runtime,
        "Tank1.Level",
        |value, quality| *value == TagValue::Number(61.0) && quality == Quality::GOOD,
        "took the node's birth",
    )
    .await;
    until(
        runtime,
        "Pump1.MotorCurrent",
        |value, quality| *value == TagValue::Number(12.0) && quality == Quality::GOOD,
        "took the device's birth",
    )
    .await;

    // Data by alias only.
    let data = edge
        .edge
        .data(Some(DEVICE), &[Reading::double("", 7, 13.5)], now_ms());
    edge.send(data).await;
    until(
        runtime,
        "Pump1.MotorCurrent",
        |value, _| *value == TagValue::Number(13.5),
        "read the alias",
    )
    .await;

    // Lost messages: the next one's seq does not follow, and a rebirth is asked for.
    edge.edge.lose(3);
    let data = edge.edge.data(None, &[Reading::double("", 1, 62.0)], now_ms());
    edge.send(data).await;
    edge.rebirth_request().await;
    until(
        runtime,
        "Tank1.Level",
        |value, _| *value == TagValue::Number(62.0),
        "still read the data",
    )
    .await;
    let status = runtime.source_statuses().remove(0);
    assert_eq!(status.errors.get("sequence_gap"), Some(&1), "{status:?}");
    assert_eq!(status.rebirths_requested, 2, "{status:?}");
    edge.birth(62.0, 13.5).await;

    // A device death: its metrics are Bad, kept; the node's stay Good.
    let death = edge.edge.device_death(DEVICE, now_ms());
    edge.send(death).await;
    until(
        runtime,
        "Pump1.MotorCurrent",
        |value, quality| *value == TagValue::Number(13.5) && quality == Quality::BAD,
        "went Bad with its device",
    )
    .await;
    assert_eq!(
        runtime
            .objects()
            .tag("Tank1.Level")
            .expect("tag")
            .current()
            .quality,
        Quality::GOOD
    );

    // A write goes out as an NCMD carrying the metric, typed as its birth declared it; the
    // tag shows it when the node reports it.
    let client = server.guest().await;
    let written = client
        .write_tags(vec![TagWrite {
            name: "Tank1.Level".to_owned(),
            value: Some(WriteValue::Number(33.0)),
        }])
        .await
        .expect("answered");
    assert_eq!(written[0].error, "");
    let (topic, name, value) = edge.command().await;
    assert_eq!(
        (topic.as_str(), name.as_str(), value),
        (
            format!("spBv1.0/{GROUP}/NCMD/{NODE}").as_str(),
            "Tank1/Level",
            Some(Value::DoubleValue(33.0))
        )
    );
    assert_eq!(
        runtime.objects().tag("Tank1.Level").expect("tag").current().value,
        TagValue::Number(62.0),
        "not before the node reports it"
    );
    let data = edge.edge.data(None, &[Reading::double("", 1, 33.0)], now_ms());
    edge.send(data).await;
    until(
        runtime,
        "Tank1.Level",
        |value, _| *value == TagValue::Number(33.0),
        "showed the written value",
    )
    .await;

    // The node's connection drops: the broker publishes its will, and every metric is Bad.
    let EdgeSimulator { mut edge, client } = edge;
    client.vanish();
    until(
        runtime,
        "Tank1.Level",
        |value, quality| *value == TagValue::Number(33.0) && quality == Quality::BAD,
        "went Bad with its node",
    )
    .await;
    until(
        runtime,
        "Pump1.MotorCurrent",
        |_, quality| quality == Quality::BAD,
        "went Bad with its node",
    )
    .await;

    // It comes back with a new session (the next bdSeq) and is current again.
    let _ = edge.death();
    let client = Publisher::connect_with_will(broker.port, Some(edge.will())).await;
    let mut edge = EdgeSimulator { edge, client };
    edge.birth(34.0, 14.0).await;
    until(
        runtime,
        "Tank1.Level",
        |value, quality| *value == TagValue::Number(34.0) && quality == Quality::GOOD,
        "was current after the rebirth",
    )
    .await;
    until(
        runtime,
        "Pump1.MotorCurrent",
        |value, quality| *value == TagValue::Number(14.0) && quality == Quality::GOOD,
        "was current after the device's rebirth",
    )
    .await;
    shutdown.cancel();
    server.stop().await;
}

#[tokio::test]
async fn unknown_aliases_wrong_types_and_junk_payloads_are_counted_by_kind() {
    let broker = Mosquitto::start();
    let solution = plant_with(&broker.url(), |model| {
        bind(
            model,
            "Tank1.Level",
            plant_model::SourceBinding {
                broker: "site".to_owned(),
                sparkplug: Some(format!("{GROUP}/{NODE}")),
                metric: Some("Tank1/Level".to_owned()),
                ..plant_model::SourceBinding::default()
            },
        );
    });
    let mut edge = EdgeSimulator::connect(broker.port).await;
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let runtime = &server.runtime;
    let shutdown = CancellationToken::new();
    runtime.start_sources(&shutdown).await.expect("starts");
    until_connected(runtime).await;
    edge.rebirth_request().await;
    let birth = edge.edge.birth(&node_metrics(50.0), now_ms());
    edge.send(birth).await;
    until(
        runtime,
        "Tank1.Level",
        |value, _| *value == TagValue::Number(50.0),
        "took the birth",
    )
    .await;

    let unknown = edge.edge.data(None, &[Reading::double("", 99, 1.0)], now_ms());
    edge.send(unknown).await;
    let wrong = edge.edge.data(None, &[Reading::boolean("", 1, true)], now_ms());
    edge.send(wrong).await;
    edge.client
        .publish(&format!("spBv1.0/{GROUP}/NDATA/{NODE}"), vec![0xff_u8; 16], false)
        .await;
    // Stamped in microseconds: year 57,000 and more, refused rather than shown.
    let late = edge
        .edge
        .data(None, &[Reading::double("", 1, 77.0)], now_ms() * 1000);
    edge.send(late).await;
    let fine = edge.edge.data(None, &[Reading::double("", 1, 51.0)], now_ms());
    edge.send(fine).await;
    until(
        runtime,
        "Tank1.Level",
        |value, _| *value == TagValue::Number(51.0),
        "read the good message",
    )
    .await;
    let status = runtime.source_statuses().remove(0);
    assert_eq!(status.errors.get("unknown_alias"), Some(&1), "{status:?}");
    assert_eq!(
        status.errors.get("bad_metric"),
        Some(&2),
        "a Boolean value for a Double alias, a metric stamped in microseconds: {status:?}"
    );
    assert_eq!(status.errors.get("bad_protobuf"), Some(&1), "{status:?}");
    shutdown.cancel();
    server.stop().await;
}

/// A broker that accepts every connection, answers CONNACK, reads what the client sends for a
/// moment and closes: what it saw.
#[derive(Debug, Default)]
struct FlappingBrokerLog {
    connections: usize,
    rebirth_requests: usize,
}

/// Serves a flapping broker on `listener` until dropped, counting into `log`.
async fn serve_flapping_broker(
    listener: tokio::net::TcpListener,
    log: std::sync::Arc<std::sync::Mutex<FlappingBrokerLog>>,
) {
    use rumqttc::v5::mqttbytes::v5::{ConnAck, ConnectReturnCode, Packet};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    loop {
        let Ok((mut socket, _)) = listener.accept().await else {
            return;
        };
        log.lock().expect("lock").connections += 1;
        let log = std::sync::Arc::clone(&log);
        tokio::spawn(async move {
            let mut read = bytes::BytesMut::new();
            let mut answered = false;
            let until = tokio::time::Instant::now() + std::time::Duration::from_millis(200);
            loop {
                while let Ok(packet) = Packet::read(&mut read, None) {
                    match packet {
                        Packet::Connect(..) if !answered => {
                            let mut out = bytes::BytesMut::new();
                            Packet::ConnAck(ConnAck {
                                session_present: false,
                                code: ConnectReturnCode::Success,
                                properties: None,
                            })
                            .write(&mut out, None)
                            .expect("a CONNACK");
                            if socket.write_all(&out).await.is_err() {
                                return;
                            }
                            answered = true;
                        }
                        Packet::Publish(publish)
                            if publish.topic.ends_with(format!("NCMD/{NODE}").as_bytes()) =>
                        {
                            log.lock().expect("lock").rebirth_requests += 1;
                        }
                        _ => {}
                    }
                }
                let mut chunk = [0_u8; 4096];
                match tokio::time::timeout_at(until, socket.read(&mut chunk)).await {
                    Ok(Ok(read_bytes)) if read_bytes > 0 => read.extend_from_slice(&chunk[..read_bytes]),
                    // Closed by the client, or our moment is over: close.
                    _ => return,
                }
            }
        });
    }
}

#[tokio::test]
async fn a_broker_that_accepts_and_closes_is_retried_with_a_growing_pause_and_rebirths_stay_paced() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("mqtt://{}", listener.local_addr().expect("addr"));
    let log = std::sync::Arc::new(std::sync::Mutex::new(FlappingBrokerLog::default()));
    let broker = tokio::spawn(serve_flapping_broker(listener, std::sync::Arc::clone(&log)));
    let solution = plant_with(&url, |model| {
        bind(
            model,
            "Tank1.Level",
            plant_model::SourceBinding {
                broker: "site".to_owned(),
                sparkplug: Some(format!("{GROUP}/{NODE}")),
                metric: Some("Tank1/Level".to_owned()),
                ..plant_model::SourceBinding::default()
            },
        );
    });
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let shutdown = CancellationToken::new();
    server.runtime.start_sources(&shutdown).await.expect("starts");
    // Each connection lasts 0.2 s; pauses of 0.2, 0.4, 0.8 and 1.6 s between them leave room for
    // four in the first 3 s (a back-off reset at every CONNACK connected every 0.4 s: eight).
    let first = tokio::time::Instant::now() + PATIENCE;
    while log.lock().expect("lock").connections == 0 {
        assert!(tokio::time::Instant::now() < first, "the source never connected");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let (connections, rebirth_requests) = {
        let seen = log.lock().expect("lock");
        (seen.connections, seen.rebirth_requests)
    };
    assert!((2..=5).contains(&connections), "{connections} connections");
    // At most one rebirth request per node in 5 s, however often the connection comes back (a
    // loaded machine may not have sent the first before its connection closed).
    assert!(
        rebirth_requests <= 1,
        "{rebirth_requests} rebirth requests, {connections} connections"
    );
    shutdown.cancel();
    broker.abort();
    server.stop().await;
}

/// Garbage on thousands of topics of a bound edge node: each topic's refusal may be logged, but
/// all of them together only within one allowance, each line short.
#[tokio::test]
async fn garbage_on_many_topics_is_counted_and_logged_within_one_allowance() {
    const TOPICS: usize = 2_000;
    let broker = Mosquitto::start();
    let solution = plant_with(&broker.url(), |model| {
        bind(
            model,
            "Pump1.MotorCurrent",
            plant_model::SourceBinding {
                broker: "site".to_owned(),
                sparkplug: Some(format!("{GROUP}/{NODE}/{DEVICE}")),
                metric: Some("Motor/Current".to_owned()),
                ..plant_model::SourceBinding::default()
            },
        );
    });
    let path = solution.path.to_str().expect("utf-8").to_owned();
    let started = std::time::Instant::now();
    let server = crate::support::ServerProcess::start(&solution.path, &[], &[]);
    let deadline = tokio::time::Instant::now() + PATIENCE * 4;
    while !crate::support::admin(&["sources", &path, "status"], "").contains("site: connected") {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the source never connected"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let publisher = Publisher::connect(broker.port).await;
    let garbage = format!("\u{ff}forged\nline {}", "x".repeat(4096));
    for index in 0..TOPICS {
        let topic = format!("spBv1.0/{GROUP}/DDATA/{NODE}/garbage{index}{}", "y".repeat(200));
        publisher.publish(&topic, garbage.clone(), false).await;
    }
    let refused = loop {
        let status = crate::support::admin(&["sources", &path, "status"], "");
        let refused: u64 = status
            .split("bad_protobuf ")
            .nth(1)
            .and_then(|rest| rest.split([',', '\n']).next())
            .and_then(|count| count.trim().parse().ok())
            .unwrap_or(0);
        if refused >= TOPICS as u64 {
            break refused;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the garbage was not all refused: {status}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    let minutes = started.elapsed().as_secs() / 60 + 1;
    let log = server.log();
    let longest = log.lines.iter().map(String::len).max().unwrap_or(0);
    assert!(longest < 1_000, "a log line of {longest} bytes");
    let lines = log
        .lines
        .iter()
        .filter(|line| line.contains("message refused"))
        .count();
    assert!(lines > 0, "refusals are logged");
    assert!(
        lines as u64 <= 20 * minutes,
        "{lines} refusal lines for {refused} refused messages in {minutes} minute(s)"
    );
    assert!(
        log.lines.iter().any(|line| line.contains("counted, not written")),
        "the suppression is said"
    );
    assert!(!log.lines.iter().any(|line| line.starts_with("line ")));
    drop(server);
}

#[tokio::test]
async fn a_write_to_an_edge_node_never_born_or_dead_is_refused_and_one_that_is_alive_is_sent() {
    let broker = Mosquitto::start();
    let solution = plant_with(&broker.url(), |model| {
        bind(
            model,
            "Tank1.Level",
            plant_model::SourceBinding {
                broker: "site".to_owned(),
                sparkplug: Some(format!("{GROUP}/{NODE}")),
                metric: Some("Tank1/Level".to_owned()),
                ..plant_model::SourceBinding::default()
            },
        );
        for tag in &mut model.tags {
            if tag.name == "Tank1.Level" {
                tag.writable = true;
            }
        }
    });
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let runtime = &server.runtime;
    let shutdown = CancellationToken::new();
    runtime.start_sources(&shutdown).await.expect("starts");
    until_connected(runtime).await;
    let client = server.guest().await;
    let level = |value: f64| {
        vec![TagWrite {
            name: "Tank1.Level".to_owned(),
            value: Some(WriteValue::Number(value)),
        }]
    };

    // No edge node has been born: the broker is up, but nothing would take the command.
    let unborn = client.write_tags(level(20.0)).await.expect("answered");
    assert_eq!(
        (unborn[0].error.as_str(), unborn[0].outcome()),
        (
            "edge node Riverside/Edge1 has not been born since source \"site\" connected (no NBIRTH); nothing was written",
            WriteOutcome::Refused
        )
    );

    let mut edge = EdgeSimulator::connect(broker.port).await;
    edge.birth(60.0, 11.0).await;
    until(
        runtime,
        "Tank1.Level",
        |value, quality| *value == TagValue::Number(60.0) && quality == Quality::GOOD,
        "took the node's birth",
    )
    .await;
    let sent = client.write_tags(level(30.0)).await.expect("answered");
    assert_eq!(
        (sent[0].error.as_str(), sent[0].outcome()),
        ("", WriteOutcome::SentToField)
    );
    let (topic, name, value) = edge.command().await;
    assert_eq!(
        (topic.as_str(), name.as_str(), value),
        (
            format!("spBv1.0/{GROUP}/NCMD/{NODE}").as_str(),
            "Tank1/Level",
            Some(Value::DoubleValue(30.0))
        )
    );

    // The node's connection drops: its will (NDEATH) says it is dead.
    edge.client.vanish();
    until(
        runtime,
        "Tank1.Level",
        |_, quality| quality == Quality::BAD,
        "went Bad with its node",
    )
    .await;
    let dead = client.write_tags(level(40.0)).await.expect("answered");
    assert_eq!(
        (dead[0].error.as_str(), dead[0].outcome()),
        (
            "edge node Riverside/Edge1 is dead (NDEATH); nothing was written",
            WriteOutcome::Refused
        )
    );
    shutdown.cancel();
    server.stop().await;
}
