//! Live plant data from a real Mosquitto broker: plain UNS values (retained ones at startup),
//! JSON payloads with quality, bad payloads counted and refused, and a broker restart that
//! makes the tags Bad until it is back.

use std::time::{Duration, Instant};

use plant_model::{Quality, TagValue};
use service_client::{TagWrite, WriteOutcome, WriteValue};
use tokio_util::sync::CancellationToken;
use tserver::{Runtime, ServerConfig};

use crate::support::{Solution, TestServer, admin};
use tserver_tests::mosquitto::{BrokerOptions, Mosquitto, Publisher};

pub(crate) const ROOT: &str = "Riverside";

/// The demo plant with source `site` on `url` (its root [`ROOT`]), edited by `edit`.
pub(crate) fn plant_with(url: &str, edit: impl FnOnce(&mut plant_model::PlantModel)) -> Solution {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    let exported = admin(&["plant", &path, "export"], "");
    let mut model = plant_model::read(&exported, plant_model::Format::Toml, "demo").expect("reads");
    model.sources.push(plant_model::SourceSpec {
        keep_alive: 5,
        root: ROOT.to_owned(),
        ..plant_model::SourceSpec::new("site", url)
    });
    edit(&mut model);
    let file = solution.path.with_file_name("fed.toml");
    std::fs::write(&file, model.to_toml().expect("toml")).expect("writes");
    admin(&["plant", &path, "import", file.to_str().expect("utf-8")], "");
    solution
}

/// Binds tag `name` to `binding` (dropping its motion).
pub(crate) fn bind(model: &mut plant_model::PlantModel, name: &str, binding: plant_model::SourceBinding) {
    let tag = model
        .tags
        .iter_mut()
        .find(|tag| tag.name == name)
        .expect("a demo tag");
    tag.simulate = None;
    tag.source = Some(Box::new(binding));
}

/// Feeds `name` from its UNS topic on source `site`.
fn uns(model: &mut plant_model::PlantModel, name: &str) {
    bind(
        model,
        name,
        plant_model::SourceBinding {
            broker: "site".to_owned(),
            ..plant_model::SourceBinding::default()
        },
    );
}

/// The demo plant with Tank1.Level and Tank2.Level fed by the broker (their motions dropped).
fn solution_fed_by(broker: &Mosquitto) -> Solution {
    plant_with(&broker.url(), |model| {
        uns(model, "Tank1.Level");
        uns(model, "Tank2.Level");
    })
}

/// Waits until `tag` reads as `wanted`.
pub(crate) async fn until(
    runtime: &Runtime,
    tag: &str,
    wanted: impl Fn(&TagValue, Quality) -> bool,
    what: &str,
) {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let sample = runtime.objects().tag(tag).expect("in the plant").current();
        if wanted(&sample.value, sample.quality) {
            return;
        }
        assert!(Instant::now() < deadline, "{tag} never {what}: {sample:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the source is connected.
pub(crate) async fn until_connected(runtime: &Runtime) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !runtime.source_statuses()[0].connected {
        assert!(Instant::now() < deadline, "the source did not connect");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn level_topic(tank: u8) -> String {
    format!("{ROOT}/Plant/Area{tank}/Tank{tank}/Level")
}

#[tokio::test]
async fn uns_values_flow_in_retained_ones_first_and_bad_payloads_are_counted_not_applied() {
    let broker = Mosquitto::start();
    let publisher = Publisher::connect(broker.port).await;
    publisher.publish(&level_topic(1), "55.5", true).await;
    let solution = solution_fed_by(&broker);
    let runtime = Runtime::open(&solution.path).expect("opens");
    let shutdown = CancellationToken::new();
    assert_eq!(runtime.start_sources(&shutdown).await.expect("starts"), 1);

    until(
        &runtime,
        "Tank1.Level",
        |value, quality| *value == TagValue::Number(55.5) && quality == Quality::GOOD,
        "took the retained value",
    )
    .await;
    publisher
        .publish(
            &level_topic(1),
            r#"{"value": 60.25, "quality": "uncertain", "timestamp": 1795420800250}"#,
            false,
        )
        .await;
    until(
        &runtime,
        "Tank1.Level",
        |value, quality| *value == TagValue::Number(60.25) && quality == Quality::UNCERTAIN,
        "took the JSON value",
    )
    .await;
    let sample = runtime.objects().tag("Tank1.Level").expect("tag").current();
    assert_eq!(
        sample.timestamp,
        std::time::UNIX_EPOCH + Duration::from_millis(1_795_420_800_250),
        "the publisher's time"
    );
    publisher.publish(&level_topic(1), "sixty", false).await;
    publisher
        .publish(&level_topic(1), r#"{"value": 1, "quality": "fine"}"#, false)
        .await;
    publisher
        .publish(&format!("{ROOT}/Plant/Elsewhere/Value"), "1", false)
        .await;
    publisher.publish(&level_topic(2), "38", false).await;
    until(
        &runtime,
        "Tank2.Level",
        |value, _| *value == TagValue::Number(38.0),
        "took its value",
    )
    .await;
    let status = runtime.source_statuses().remove(0);
    assert!(status.connected, "{status:?}");
    assert_eq!(status.tags, 2);
    assert_eq!(status.errors.get("wrong_type"), Some(&1), "{status:?}");
    assert_eq!(status.errors.get("bad_json"), Some(&1), "{status:?}");
    assert_eq!(status.errors.get("unbound"), Some(&1), "{status:?}");
    assert_eq!(
        runtime.objects().tag("Tank1.Level").expect("tag").current().value,
        TagValue::Number(60.25),
        "a refused message changes nothing"
    );
    shutdown.cancel();
}

#[tokio::test]
async fn a_broker_restart_makes_its_tags_bad_then_they_recover_without_a_server_restart() {
    let mut broker = Mosquitto::start();
    let solution = solution_fed_by(&broker);
    let runtime = Runtime::open(&solution.path).expect("opens");
    let shutdown = CancellationToken::new();
    runtime.start_sources(&shutdown).await.expect("starts");
    let publisher = Publisher::connect(broker.port).await;
    // Before anything is published the tag is not current.
    until(
        &runtime,
        "Tank2.Level",
        |_, quality| quality == Quality::BAD,
        "was Bad before any value",
    )
    .await;
    until_connected(&runtime).await;
    publisher.publish(&level_topic(2), "42", false).await;
    until(
        &runtime,
        "Tank2.Level",
        |value, quality| *value == TagValue::Number(42.0) && quality == Quality::GOOD,
        "took 42",
    )
    .await;
    let good_time = runtime
        .objects()
        .tag("Tank2.Level")
        .expect("tag")
        .current()
        .timestamp;

    broker.stop();
    until(
        &runtime,
        "Tank2.Level",
        |_, quality| quality == Quality::BAD,
        "went Bad with the broker",
    )
    .await;
    let stale = runtime.objects().tag("Tank2.Level").expect("tag").current();
    assert_eq!(
        stale.value,
        TagValue::Number(42.0),
        "the last value stays, marked Bad"
    );
    assert_eq!(stale.timestamp, good_time, "with the time it was good");
    assert!(!runtime.source_statuses()[0].connected);

    broker.resume();
    until_connected(&runtime).await;
    let publisher = Publisher::connect(broker.port).await;
    publisher.publish(&level_topic(2), "43", false).await;
    until(
        &runtime,
        "Tank2.Level",
        |value, quality| *value == TagValue::Number(43.0) && quality == Quality::GOOD,
        "recovered",
    )
    .await;
    shutdown.cancel();
}

/// Waits (bounded) until the first source's status satisfies `wanted`; returns it.
pub(crate) async fn until_status(
    runtime: &Runtime,
    wanted: impl Fn(&plant::SourceStatus) -> bool,
    what: &str,
) -> plant::SourceStatus {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = runtime.source_statuses().remove(0);
        if wanted(&status) {
            return status;
        }
        assert!(Instant::now() < deadline, "the source never {what}: {status:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_write_goes_out_to_the_field_and_shows_only_when_the_field_reports_it_back() {
    let mut broker = Mosquitto::start();
    let solution = plant_with(&broker.url(), |model| {
        uns(model, "Tank1.Level");
        for tag in &mut model.tags {
            if tag.name == "Tank1.Level" {
                tag.writable = true;
            }
        }
    });
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let shutdown = CancellationToken::new();
    server.runtime.start_sources(&shutdown).await.expect("starts");
    until_connected(&server.runtime).await;
    let mut field = Publisher::connect(broker.port).await;
    let command = format!("{}/set", level_topic(1));
    field.subscribe(&command).await;
    field.publish(&level_topic(1), "50", false).await;
    until(
        &server.runtime,
        "Tank1.Level",
        |value, _| *value == TagValue::Number(50.0),
        "took 50",
    )
    .await;

    let client = server.guest().await;
    let written = client
        .write_tags(vec![TagWrite {
            name: "Tank1.Level".to_owned(),
            value: Some(WriteValue::Number(70.5)),
        }])
        .await
        .expect("answered");
    assert_eq!(written[0].error, "", "published to the field");
    assert_eq!(
        written[0].outcome(),
        WriteOutcome::SentToField,
        "sent to the field, not written: the tag does not have it yet"
    );
    let (topic, payload) = field.next().await;
    assert_eq!(
        (topic.as_str(), payload.as_slice()),
        (command.as_str(), b"70.5".as_slice())
    );
    assert_eq!(
        server
            .runtime
            .objects()
            .tag("Tank1.Level")
            .expect("tag")
            .current()
            .value,
        TagValue::Number(50.0),
        "not shown before the field reports it"
    );
    // The field simulator echoes the command as its new value.
    field.publish(&level_topic(1), payload, false).await;
    until(
        &server.runtime,
        "Tank1.Level",
        |value, quality| *value == TagValue::Number(70.5) && quality == Quality::GOOD,
        "showed the value the field reported",
    )
    .await;
    assert_eq!(server.runtime.source_statuses()[0].writes, 1);

    broker.stop();
    // Six failed attempts: the source's pause before the next one is now 6.4 s.
    until_status(
        &server.runtime,
        |status| !status.connected && status.errors.get("connection").is_some_and(|&count| count >= 6),
        "failed to reconnect six times",
    )
    .await;
    // Every write while the broker is down is refused at once, none waiting behind another or
    // behind the source's pause between connection attempts.
    let refused = client.write_tags(level_writes(100)).await.expect("answered");
    for result in &refused {
        assert_eq!(
            (result.error.as_str(), result.outcome()),
            (
                "source \"site\" is not connected to its broker; nothing was written",
                WriteOutcome::Refused
            ),
            "{result:?}"
        );
    }
    shutdown.cancel();
    server.stop().await;
}

/// `count` writes of Tank1.Level (1, 2, ... 99, 0, 1, ...: inside its range), in one call.
fn level_writes(count: u32) -> Vec<TagWrite> {
    (1..=count)
        .map(|value| TagWrite {
            name: "Tank1.Level".to_owned(),
            value: Some(WriteValue::Number(f64::from(value % 100))),
        })
        .collect()
}

/// Where [`writable_level`] sends writes: outside the source's root, so the source itself does
/// not subscribe to it.
const LEVEL_COMMANDS: &str = "Field/Tank1/Level/set";

/// The demo plant with Tank1.Level fed by `broker` and writable (to [`LEVEL_COMMANDS`]).
fn writable_level(broker: &Mosquitto) -> Solution {
    plant_with(&broker.url(), |model| {
        bind(
            model,
            "Tank1.Level",
            plant_model::SourceBinding {
                broker: "site".to_owned(),
                command_topic: Some(LEVEL_COMMANDS.to_owned()),
                ..plant_model::SourceBinding::default()
            },
        );
        for tag in &mut model.tags {
            if tag.name == "Tank1.Level" {
                tag.writable = true;
            }
        }
    })
}

#[tokio::test]
async fn a_write_is_answered_when_the_broker_acknowledges_it_and_never_while_the_broker_does_not() {
    let broker = Mosquitto::start();
    let solution = writable_level(&broker);
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let shutdown = CancellationToken::new();
    server.runtime.start_sources(&shutdown).await.expect("starts");
    until_connected(&server.runtime).await;
    let client = server.guest().await;
    let command = LEVEL_COMMANDS;

    // The broker takes a write nobody subscribes to, and says so: no device got it.
    let unheard = client.write_tags(level_writes(1)).await.expect("answered");
    assert_eq!(
        unheard[0].error,
        format!(
            "the broker of source \"site\" took the write, but nothing subscribes to {command}: no field device received it"
        )
    );

    let mut field = Publisher::connect(broker.port).await;
    field.subscribe(command).await;
    let acknowledged = client.write_tags(level_writes(1)).await.expect("answered");
    assert_eq!(acknowledged[0].error, "", "the broker acknowledged it");
    assert_eq!(field.next().await.1, b"1.0");
    assert_eq!(server.runtime.source_statuses()[0].writes, 1);
    let printed = crate::tclient::tclient(
        &[
            "--addr",
            &server.addr.to_string(),
            "tags",
            "write",
            "Tank1.Level=5",
        ],
        "",
        false,
    )
    .await
    .expect("acknowledged");
    assert_eq!(
        printed,
        "Tank1.Level: sent to the field (the tag shows the value when the field reports it back)\n"
    );
    assert_eq!(field.next().await.1, b"5.0");
    assert_eq!(server.runtime.source_statuses()[0].writes, 2);

    // A broker that stops reading while its connection stays up: no write is answered as if
    // it had the write; each says it is not confirmed, and what that means.
    broker.freeze();
    let results = client.write_tags(level_writes(300)).await.expect("answered");
    for result in &results {
        assert_eq!(result.outcome(), WriteOutcome::NotConfirmed, "{result:?}");
        assert!(
            result.error.starts_with("not confirmed: ")
                && result
                    .error
                    .ends_with("; it may or may not have reached the field"),
            "{result:?}"
        );
    }
    assert_eq!(server.runtime.source_statuses()[0].writes, 2);

    // Back: writes are acknowledged again (after the source noticed and reconnected).
    broker.thaw();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let result = client.write_tags(level_writes(1)).await.expect("answered");
        if result[0].error.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "never acknowledged again: {result:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    shutdown.cancel();
    server.stop().await;
}

#[tokio::test]
async fn a_value_not_updated_within_stale_after_turns_uncertain_and_the_tools_say_so() {
    let broker = Mosquitto::start();
    let solution = plant_with(&broker.url(), |model| {
        uns(model, "Tank2.Level");
        model.sources[0].stale_after = 1;
    });
    let runtime = Runtime::open(&solution.path).expect("opens");
    let shutdown = CancellationToken::new();
    runtime.start_sources(&shutdown).await.expect("starts");
    until_connected(&runtime).await;
    let publisher = Publisher::connect(broker.port).await;
    publisher.publish(&level_topic(2), "41", false).await;
    until(
        &runtime,
        "Tank2.Level",
        |value, quality| *value == TagValue::Number(41.0) && quality == Quality::GOOD,
        "took 41",
    )
    .await;
    let good = runtime.objects().tag("Tank2.Level").expect("tag").current();
    until(
        &runtime,
        "Tank2.Level",
        |_, quality| quality == Quality::UNCERTAIN,
        "went stale",
    )
    .await;
    let stale = runtime.objects().tag("Tank2.Level").expect("tag").current();
    assert_eq!(
        (&stale.value, stale.timestamp),
        (&good.value, good.timestamp),
        "the last value and its time stay"
    );
    let reading = crate::runtime_tools::call(
        &runtime,
        "runtime_get_value",
        serde_json::json!({"tag": "Tank2.Level"}),
    )
    .await
    .expect("reads");
    assert_eq!(reading["quality"], "Uncertain", "{reading}");
    assert!(
        reading["note"]
            .as_str()
            .is_some_and(|note| note.contains("possibly stale")),
        "{reading}"
    );
    publisher.publish(&level_topic(2), "42", false).await;
    until(
        &runtime,
        "Tank2.Level",
        |value, quality| *value == TagValue::Number(42.0) && quality == Quality::GOOD,
        "was current again",
    )
    .await;
    shutdown.cancel();
}

#[tokio::test]
async fn huge_payloads_binary_junk_and_a_topic_flood_are_counted_and_never_stall_the_source() {
    let broker = Mosquitto::start();
    let solution = solution_fed_by(&broker);
    let runtime = Runtime::open(&solution.path).expect("opens");
    let shutdown = CancellationToken::new();
    runtime.start_sources(&shutdown).await.expect("starts");
    until_connected(&runtime).await;
    let publisher = Publisher::connect(broker.port).await;
    // Read and refused: over the UNS limit (64 KiB), and not text.
    publisher
        .publish(&level_topic(1), vec![b'1'; 200 * 1024], false)
        .await;
    publisher
        .publish(&level_topic(1), vec![0xff, 0xfe, 0x00], false)
        .await;
    // Over the connection's packet limit: the broker drops it for this client.
    publisher
        .publish(&level_topic(1), vec![b'1'; 3 * 1024 * 1024], false)
        .await;
    const FLOOD: u64 = 5_000;
    for index in 0..FLOOD {
        publisher
            .publish(&format!("{ROOT}/Plant/Flood/T{}", index % 500), "1", false)
            .await;
    }
    publisher.publish(&level_topic(1), "12.5", false).await;
    until(
        &runtime,
        "Tank1.Level",
        |value, quality| *value == TagValue::Number(12.5) && quality == Quality::GOOD,
        "took the value after the flood",
    )
    .await;
    until_status(
        &runtime,
        |status| status.errors.get("unbound") == Some(&FLOOD),
        "counted the flood",
    )
    .await;
    let status = runtime.source_statuses().remove(0);
    assert_eq!(status.errors.get("too_large"), Some(&1), "{status:?}");
    assert_eq!(status.errors.get("not_text"), Some(&1), "{status:?}");
    assert_eq!(
        status.errors.get("connection"),
        None,
        "the connection never dropped: {status:?}"
    );
    assert!(status.connected);
    shutdown.cancel();
}

#[tokio::test]
async fn broker_credentials_come_from_a_secret_and_a_wrong_one_is_refused_without_being_shown() {
    const PASSWORD: &str = "broker-pw-7f3a9c";
    let broker = Mosquitto::start_with(BrokerOptions {
        user: Some(("plant".to_owned(), PASSWORD.to_owned())),
        tls: None,
    });
    let solution = plant_with(&broker.url(), |model| {
        uns(model, "Tank1.Level");
        model.sources[0].username = "plant".to_owned();
        model.sources[0].password = "/secret:BrokerPassword".to_owned();
    });
    let path = solution.path.to_str().expect("utf-8");
    admin(
        &["secrets", path, "set", "BrokerPassword"],
        &format!("{PASSWORD}\n"),
    );
    let runtime = Runtime::open(&solution.path).expect("opens");
    let shutdown = CancellationToken::new();
    runtime.start_sources(&shutdown).await.expect("starts");
    until_connected(&runtime).await;
    shutdown.cancel();

    admin(&["secrets", path, "set", "BrokerPassword"], "not-the-password\n");
    let runtime = Runtime::open(&solution.path).expect("opens");
    let shutdown = CancellationToken::new();
    runtime.start_sources(&shutdown).await.expect("starts");
    until_status(
        &runtime,
        |status| status.errors.contains_key("connection"),
        "was refused",
    )
    .await;
    let status = runtime.source_statuses().remove(0);
    assert!(!status.connected);
    let shown = format!("{status:?}");
    assert!(
        !shown.contains("not-the-password") && !shown.contains(PASSWORD),
        "{shown}"
    );
    shutdown.cancel();
}

#[tokio::test]
async fn tls_to_the_broker_checks_its_certificate_against_the_sources_ca_file() {
    let ca_key = rcgen::KeyPair::generate().expect("key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "Test Broker CA");
    let ca = ca_params.self_signed(&ca_key).expect("CA");
    let server_key = rcgen::KeyPair::generate().expect("key");
    let server_params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
    let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
    let server = server_params.signed_by(&server_key, &issuer).expect("signed");
    let broker = Mosquitto::start_with(BrokerOptions {
        user: None,
        tls: Some((ca.pem(), server.pem(), server_key.serialize_pem())),
    });
    let dir = tempfile::tempdir().expect("dir");
    let ca_file = dir.path().join("broker-ca.pem");
    std::fs::write(&ca_file, ca.pem()).expect("writes");
    let url = format!("mqtts://localhost:{}", broker.port);
    let solution = plant_with(&url, |model| {
        uns(model, "Tank1.Level");
        model.sources[0].ca_file = ca_file.to_str().expect("utf-8").to_owned();
    });
    let runtime = Runtime::open(&solution.path).expect("opens");
    let shutdown = CancellationToken::new();
    runtime.start_sources(&shutdown).await.expect("starts");
    until_connected(&runtime).await;
    shutdown.cancel();

    // A CA that did not sign the broker's certificate: refused, and said why.
    let other_key = rcgen::KeyPair::generate().expect("key");
    let other = ca_params.self_signed(&other_key).expect("CA");
    std::fs::write(&ca_file, other.pem()).expect("writes");
    let runtime = Runtime::open(&solution.path).expect("opens");
    let shutdown = CancellationToken::new();
    runtime.start_sources(&shutdown).await.expect("starts");
    until_status(
        &runtime,
        |status| status.errors.contains_key("connection"),
        "was refused",
    )
    .await;
    let status = runtime.source_statuses().remove(0);
    assert!(!status.connected);
    let (_, reason) = status.last_error.expect("a reason");
    assert!(
        reason.contains("certificate") || reason.contains("TLS"),
        "{reason}"
    );
    shutdown.cancel();
}

/// Waits until every `Bulk.T....` tag reads `value_of(index)`, Good.
async fn until_bulk(runtime: &Runtime, tags: usize, value_of: impl Fn(usize) -> f64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let objects = runtime.objects();
        let behind = (0..tags).find(|index| {
            let sample = objects.tag(&format!("Bulk.T{index:04}")).expect("tag").current();
            (sample.value.clone(), sample.quality) != (TagValue::Number(value_of(*index)), Quality::GOOD)
        });
        let Some(index) = behind else { return };
        assert!(Instant::now() < deadline, "Bulk.T{index:04} never {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The demo plant with `tags` number tags `Bulk.T0000`.. fed from their UNS topics (no
/// history), and whatever `edit` adds.
fn bulk_plant(broker: &Mosquitto, tags: usize, edit: impl FnOnce(&mut plant_model::PlantModel)) -> Solution {
    plant_with(&broker.url(), |model| {
        let template = model
            .tags
            .iter()
            .find(|tag| tag.name == "Tank2.Level")
            .expect("a demo tag")
            .clone();
        for index in 0..tags {
            let mut tag = template.clone();
            tag.name = format!("Bulk.T{index:04}");
            tag.path = format!("Plant/Bulk/T{index:04}");
            tag.min = None;
            tag.max = None;
            tag.simulate = None;
            tag.history = plant_model::History::Off;
            tag.source = Some(Box::new(plant_model::SourceBinding {
                broker: "site".to_owned(),
                ..plant_model::SourceBinding::default()
            }));
            model.tags.push(tag);
        }
        edit(model);
    })
}

fn bulk_topic(index: usize) -> String {
    format!("{ROOT}/Plant/Bulk/T{index:04}")
}

#[tokio::test]
async fn two_thousand_tags_take_their_retained_values_at_startup_then_live_ones() {
    // More retained values than a broker queues for an at-least-once subscriber (Mosquitto:
    // 1,000), so all of them arrive only because the source subscribes at most once.
    const TAGS: usize = 2_000;
    let broker = Mosquitto::start();
    let solution = bulk_plant(&broker, TAGS, |_| {});
    let mut publisher = Publisher::connect(broker.port).await;
    for index in 0..TAGS {
        publisher
            .publish(&bulk_topic(index), index.to_string(), true)
            .await;
    }
    // A round trip through the broker: every retained value is stored once it returns.
    publisher.subscribe("bulk-stored").await;
    let runtime = Runtime::open(&solution.path).expect("opens");
    let shutdown = CancellationToken::new();
    runtime.start_sources(&shutdown).await.expect("starts");
    #[expect(clippy::cast_precision_loss, reason = "small test numbers")]
    until_bulk(&runtime, TAGS, |index| index as f64, "took its retained value").await;
    for index in 0..TAGS {
        publisher
            .publish(&bulk_topic(index), (index + 1).to_string(), false)
            .await;
    }
    #[expect(clippy::cast_precision_loss, reason = "small test numbers")]
    until_bulk(&runtime, TAGS, |index| (index + 1) as f64, "took its live value").await;
    let status = runtime.source_statuses().remove(0);
    assert_eq!(status.tags, TAGS);
    assert_eq!(
        status.messages,
        2 * TAGS as u64,
        "each value counted once: {status:?}"
    );
    assert!(status.errors.is_empty(), "{status:?}");
    shutdown.cancel();
}

#[tokio::test]
async fn a_burst_is_read_in_order_and_each_value_and_refusal_counted_once() {
    // Rounds of values for every tag sent back to back, with a refused and an unbound message
    // in each round: the source reads what arrived together as one batch, and must leave each
    // tag with its last value and count every message once.
    const TAGS: usize = 400;
    const ROUNDS: usize = 4;
    let broker = Mosquitto::start();
    let solution = bulk_plant(&broker, TAGS, |model| uns(model, "Tank1.Level"));
    let runtime = Runtime::open(&solution.path).expect("opens");
    let shutdown = CancellationToken::new();
    runtime.start_sources(&shutdown).await.expect("starts");
    until_connected(&runtime).await;
    let counts = std::sync::Arc::clone(&runtime.source_counts()[0]);
    let publisher = Publisher::connect(broker.port).await;
    for round in 0..ROUNDS {
        for index in 0..TAGS {
            publisher
                .publish(&bulk_topic(index), (round * TAGS + index).to_string(), false)
                .await;
        }
        publisher.publish(&level_topic(1), "full", false).await;
        publisher
            .publish(&format!("{ROOT}/Plant/Elsewhere/Value"), "1", false)
            .await;
        publisher
            .publish(&level_topic(1), (round + 50).to_string(), false)
            .await;
    }
    #[expect(clippy::cast_precision_loss, reason = "small test numbers")]
    until_bulk(
        &runtime,
        TAGS,
        |index| ((ROUNDS - 1) * TAGS + index) as f64,
        "took the last round's value",
    )
    .await;
    until(
        &runtime,
        "Tank1.Level",
        |value, quality| *value == TagValue::Number((ROUNDS + 49) as f64) && quality == Quality::GOOD,
        "took the last round's value",
    )
    .await;
    let values = ((TAGS + 1) * ROUNDS) as u64;
    assert_eq!(counts.messages(), values, "each value counted once");
    let status = runtime.source_statuses().remove(0);
    assert_eq!(status.messages, values, "{status:?}");
    let rounds = ROUNDS as u64;
    assert_eq!(status.errors.get("wrong_type"), Some(&rounds), "{status:?}");
    assert_eq!(status.errors.get("unbound"), Some(&rounds), "{status:?}");
    assert_eq!(status.errors.len(), 2, "{status:?}");
    shutdown.cancel();
}

#[tokio::test]
async fn tserver_sources_status_shows_what_the_running_server_reports() {
    let broker = Mosquitto::start();
    let solution = solution_fed_by(&broker);
    let path = solution.path.to_str().expect("utf-8").to_owned();
    let listed = admin(&["sources", &path, "list"], "");
    assert!(
        listed.contains(&format!("site  {}  root {ROOT}  2 tags", broker.url())),
        "{listed}"
    );
    assert!(admin(&["sources", &path, "status"], "").contains("no reports"));

    let server = crate::support::ServerProcess::start(&solution.path, &[], &[]);
    let publisher = Publisher::connect(broker.port).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        publisher.publish(&level_topic(1), "oops", false).await;
        publisher.publish(&level_topic(2), "40", false).await;
        let status = admin(&["sources", &path, "status"], "");
        if status.contains("site: connected") && status.contains("wrong_type") {
            break status;
        }
        assert!(Instant::now() < deadline, "no report: {status}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(status.contains("2 tags"), "{status}");
    assert!(
        !status.contains("rebirths"),
        "a plain UNS broker asks no Sparkplug node for anything: {status}"
    );
    assert!(status.contains("last error at "), "{status}");
    assert!(status.contains("is not a value for a number tag"), "{status}");
    drop(server);
}

#[tokio::test]
async fn an_import_that_changes_the_sources_restarts_them_without_a_server_restart() {
    let broker = Mosquitto::start();
    let solution = plant_with(&broker.url(), |model| uns(model, "Tank1.Level"));
    let runtime = Runtime::open(&solution.path).expect("opens");
    let shutdown = CancellationToken::new();
    runtime.start_sources(&shutdown).await.expect("starts");
    until_connected(&runtime).await;
    assert_eq!(runtime.source_statuses()[0].tags, 1);

    // The same plant with Tank2.Level bound too, imported while running.
    let path = solution.path.to_str().expect("utf-8").to_owned();
    let exported = admin(&["plant", &path, "export"], "");
    let mut model = plant_model::read(&exported, plant_model::Format::Toml, "x").expect("reads");
    uns(&mut model, "Tank2.Level");
    let file = solution.path.with_file_name("more.toml");
    std::fs::write(&file, model.to_toml().expect("toml")).expect("writes");
    admin(&["plant", &path, "import", file.to_str().expect("utf-8")], "");
    assert!(runtime.reload_plant_if_imported().await, "the import is seen");
    assert_eq!(
        runtime.source_statuses()[0].tags,
        2,
        "restarted with the new bindings"
    );
    until_connected(&runtime).await;
    let publisher = Publisher::connect(broker.port).await;
    publisher.publish(&level_topic(2), "27", false).await;
    until(
        &runtime,
        "Tank2.Level",
        |value, quality| *value == TagValue::Number(27.0) && quality == Quality::GOOD,
        "took its first value from the new binding",
    )
    .await;
    // An import changing no source or binding leaves the tasks (and their counts) alone.
    let messages = runtime.source_statuses()[0].messages;
    admin(&["plant", &path, "import", file.to_str().expect("utf-8")], "");
    runtime.reload_plant_if_imported().await;
    assert_eq!(runtime.source_statuses()[0].messages, messages);
    shutdown.cancel();
}

#[tokio::test]
async fn a_sources_first_value_past_a_limit_raises_its_alarm_at_once() {
    let broker = Mosquitto::start();
    let publisher = Publisher::connect(broker.port).await;
    // Retained before the server starts: the first value the source reports is past the
    // Hi limit (85) of Tank1.Level.
    publisher.publish(&level_topic(1), "95", true).await;
    let solution = plant_with(&broker.url(), |model| {
        uns(model, "Tank1.Level");
        if let Some(tag) = model.tags.iter_mut().find(|tag| tag.name == "Tank1.Level") {
            tag.initial = None;
        }
        // An alarm of its own: the demo's seeded history leaves Tank1.Level.Hi in whatever
        // state the simulation had at the time the solution was made, which a restart restores.
        if let Some(alarm) = model
            .alarms
            .iter_mut()
            .find(|alarm| alarm.name == "Tank1.Level.Hi")
        {
            alarm.name = "Tank1.Level.FirstValueHi".to_owned();
        }
    });
    let runtime = Runtime::open(&solution.path).expect("opens");
    let alarm_state = |runtime: &Runtime| {
        runtime
            .objects()
            .alarms()
            .iter()
            .find(|alarm| alarm.definition().name == "Tank1.Level.FirstValueHi")
            .expect("in the plant")
            .status()
            .state
    };
    assert_eq!(
        alarm_state(&runtime),
        plant::objects::AlarmState::Normal,
        "no value yet (Bad quality): nothing to judge"
    );
    let shutdown = CancellationToken::new();
    runtime.start_sources(&shutdown).await.expect("starts");
    until(
        &runtime,
        "Tank1.Level",
        |value, quality| *value == TagValue::Number(95.0) && quality == Quality::GOOD,
        "took the retained value",
    )
    .await;
    assert_eq!(alarm_state(&runtime), plant::objects::AlarmState::Active);
    shutdown.cancel();
}

#[tokio::test]
async fn a_proposal_for_a_field_bound_tag_reaches_the_broker_only_once_approved() {
    let broker = Mosquitto::start();
    let solution = plant_with(&broker.url(), |model| {
        uns(model, "Tank1.Level");
        for tag in &mut model.tags {
            if tag.name == "Tank1.Level" {
                (tag.writable, tag.proposable) = (true, true);
            }
        }
    });
    admin(
        &[
            "settings",
            solution.path.to_str().expect("utf-8"),
            "set",
            "ModelOptions",
            "0xde",
        ],
        "",
    );
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let shutdown = CancellationToken::new();
    server.runtime.start_sources(&shutdown).await.expect("starts");
    until_connected(&server.runtime).await;
    let mut field = Publisher::connect(broker.port).await;
    let command = format!("{}/set", level_topic(1));
    field.subscribe(&command).await;

    let client = server.guest().await;
    let proposed = client
        .call_tool(
            "runtime_propose_write",
            &serde_json::json!({"tag": "Tank1.Level", "value": 40.5, "reason": "drain a little"}),
        )
        .await
        .expect("answered");
    assert!(!proposed.is_error, "{}", proposed.content_json);
    let content: serde_json::Value = serde_json::from_str(&proposed.content_json).expect("JSON");
    let id = content["result"]["proposal"].as_str().expect("an id").to_owned();
    assert!(
        field.received_so_far().await.is_empty(),
        "a proposal sends nothing to the field"
    );

    let decided = client
        .decide_proposal(&id, service_client::Decision::Approve, "")
        .await
        .expect("approved");
    assert_eq!(decided.write_outcome(), WriteOutcome::SentToField);
    assert_eq!(
        decided.proposal.expect("the proposal").outcome,
        "approved by guest: sent to the field"
    );
    let (topic, payload) = field.next().await;
    assert_eq!(
        (topic.as_str(), payload.as_slice()),
        (command.as_str(), b"40.5".as_slice())
    );
    assert_eq!(server.runtime.source_statuses()[0].writes, 1);
    let audit = admin(&["audit", solution.path.to_str().expect("utf-8")], "");
    assert!(
        audit.lines().count() == 1
            && audit.contains(" write Tank1.Level by guest")
            && audit.contains(&format!(
                "-> 40.5: approved {id}, proposed by a client (guest): \"drain a little\""
            )),
        "{audit}"
    );
    shutdown.cancel();
    server.stop().await;
}
