//! Live plant data from a real Mosquitto broker: plain UNS values (retained ones at startup),
//! JSON payloads with quality, bad payloads counted and refused, and a broker restart that
//! makes the tags Bad until it is back.

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tserver::Runtime;
use tserver::objects::{Quality, TagValue};

use crate::mosquitto::{Mosquitto, Publisher};
use crate::support::{Solution, admin};

const ROOT: &str = "Riverside";

/// The demo plant with Tank1.Level and Tank2.Level fed by the broker (their motions dropped).
fn solution_fed_by(broker: &Mosquitto) -> Solution {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    let exported = admin(&["plant", &path, "export"], "");
    let mut model = plant_model::read(&exported, plant_model::Format::Toml, "demo").expect("reads");
    for tag in &mut model.tags {
        if tag.name == "Tank1.Level" || tag.name == "Tank2.Level" {
            tag.simulate = None;
            tag.source = Some(plant_model::SourceBinding {
                broker: "site".to_owned(),
                topic: None,
            });
        }
    }
    model.sources.push(plant_model::SourceSpec {
        name: "site".to_owned(),
        url: broker.url(),
        client_id: String::new(),
        username: String::new(),
        password: String::new(),
        ca_file: String::new(),
        keep_alive: 5,
        root: ROOT.to_owned(),
        stale_after: 0,
    });
    let file = solution.path.with_file_name("fed.toml");
    std::fs::write(&file, model.to_toml().expect("toml")).expect("writes");
    admin(&["plant", &path, "import", file.to_str().expect("utf-8")], "");
    solution
}

/// Waits until `tag` reads as `wanted`.
async fn until(runtime: &Runtime, tag: &str, wanted: impl Fn(&TagValue, Quality) -> bool, what: &str) {
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
async fn until_connected(runtime: &Runtime) {
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
    assert_eq!(runtime.start_sources(&shutdown).expect("starts"), 1);

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
    runtime.start_sources(&shutdown).expect("starts");
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
