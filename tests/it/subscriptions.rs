//! Live tag subscriptions: current readings at once, then merged updates as the plant changes;
//! alarms; deadband; unsubscribe; limits; a reader that does not read; a plant reload; and
//! `tclient tags watch` / `alarms list`.

use std::time::{Duration, Instant};

use futures::StreamExt;
use plant_model::{Quality, TagValue};
use service_client::{ClientError, ErrorCode, SubscribeRequest, TagUpdate, TagValue as WireValue};
use tserver::ServerConfig;
use tserver_proto::v1::{ClientFrame, ServerFrame, client_frame, server_frame};
use tserver_proto::{DEFAULT_MAX_FRAME, Decoded, FrameCodec};

use crate::support::{Solution, TestServer};

fn request(names: &[&str], folder: &str) -> SubscribeRequest {
    SubscribeRequest {
        names: names.iter().map(|name| (*name).to_owned()).collect(),
        folder: folder.to_owned(),
        ..SubscribeRequest::default()
    }
}

async fn next(subscription: &mut service_client::TagSubscription) -> TagUpdate {
    tokio::time::timeout(Duration::from_secs(10), subscription.next_update())
        .await
        .expect("an update within the patience")
        .expect("the connection is open")
}

fn number(server: &TestServer, tag: &str, value: f64) {
    server
        .runtime
        .plant()
        .write(tag, TagValue::Number(value), Quality::GOOD)
        .expect("written");
}

#[tokio::test]
async fn an_alarms_only_subscription_watches_a_whole_plant_sending_no_readings() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let client = server.guest().await;
    let refused = client
        .subscribe(SubscribeRequest {
            alarms_only: true,
            ..request(&[], "Plant")
        })
        .await
        .expect_err("alarms_only without alarms");
    assert!(
        matches!(&refused, ClientError::Server { code: ErrorCode::InvalidArgument, message } if message.contains("set alarms too")),
        "{refused:?}"
    );
    let mut subscription = client
        .subscribe(SubscribeRequest {
            alarms: true,
            alarms_only: true,
            ..request(&[], "Plant")
        })
        .await
        .expect("subscribed");
    assert!(subscription.initial().readings.is_empty(), "no readings");
    assert_eq!(
        subscription.initial().alarms.len(),
        10,
        "every alarm of the plant"
    );
    // A value changes and trips an alarm: the alarm comes, the value does not.
    number(&server, "Pump1.MotorCurrent", 13.0);
    number(&server, "Tank1.Level", 90.0);
    let update = next(&mut subscription).await;
    assert!(update.readings.is_empty(), "{update:?}");
    let states: Vec<(&str, &str)> = update
        .alarms
        .iter()
        .map(|alarm| (alarm.name.as_str(), alarm.state.as_str()))
        .collect();
    assert_eq!(states, [("Tank1.Level.Hi", "active")]);
    server.stop().await;
}

#[tokio::test]
async fn a_subscription_gives_current_readings_then_merged_changes_and_alarms() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let client = server.guest().await;
    let mut subscription = client
        .subscribe(SubscribeRequest {
            alarms: true,
            ..request(&["Pump1.MotorCurrent", "Nope"], "Plant/Area1/Tank1")
        })
        .await
        .expect("subscribed");
    let initial: Vec<(&str, &str)> = subscription
        .initial()
        .readings
        .iter()
        .map(|reading| (reading.name.as_str(), reading.error.as_str()))
        .collect();
    assert_eq!(
        initial,
        [
            ("Pump1.MotorCurrent", ""),
            ("Nope", "unknown tag"),
            ("Tank1.Level", ""),
            ("Tank1.OperatorNote", "")
        ]
    );
    let alarm_names: Vec<&str> = subscription
        .initial()
        .alarms
        .iter()
        .map(|alarm| alarm.name.as_str())
        .collect();
    assert!(alarm_names.contains(&"Tank1.Level.Hi") && alarm_names.contains(&"Pump1.MotorCurrent.HiHi"));

    // A burst of writes to one tag arrives as its latest value, the rest counted as merged.
    for step in 0..50 {
        number(&server, "Pump1.MotorCurrent", 10.0 + f64::from(step) / 10.0);
    }
    let update = next(&mut subscription).await;
    let last = update.readings.last().expect("a reading");
    assert_eq!(last.name, "Pump1.MotorCurrent");
    assert_eq!(last.value, Some(WireValue::Number(14.9)));
    assert!(update.skipped >= 40, "merged changes are counted: {update:?}");

    // Tank 1 past its high limit: the value and the alarm come together.
    number(&server, "Tank1.Level", 90.0);
    let update = next(&mut subscription).await;
    assert_eq!(update.readings[0].name, "Tank1.Level");
    let states: Vec<(&str, &str)> = update
        .alarms
        .iter()
        .map(|alarm| (alarm.name.as_str(), alarm.state.as_str()))
        .collect();
    assert_eq!(states, [("Tank1.Level.Hi", "active")]);

    // The same updates as a stream.
    number(&server, "Tank1.Level", 91.0);
    let streamed = tokio::time::timeout(Duration::from_secs(10), subscription.next())
        .await
        .expect("an update")
        .expect("open");
    assert_eq!(streamed.readings[0].value, Some(WireValue::Number(91.0)));

    // Unsubscribed, nothing more comes.
    assert!(subscription.unsubscribe().await.expect("answered"));
    let mut again = client
        .subscribe(request(&["Tank2.Level"], ""))
        .await
        .expect("subscribed");
    number(&server, "Tank1.Level", 50.0);
    number(&server, "Tank2.Level", 40.0);
    let update = next(&mut again).await;
    assert_eq!(
        update.readings.len(),
        1,
        "only the live subscription sends: {update:?}"
    );
    assert_eq!(update.readings[0].name, "Tank2.Level");
    server.stop().await;
}

#[tokio::test]
async fn deadbands_limits_and_bad_requests() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let client = server.guest().await;
    let mut banded = client
        .subscribe(SubscribeRequest {
            deadband: 1.0,
            ..request(&["Tank1.Level"], "")
        })
        .await
        .expect("subscribed");
    number(&server, "Tank1.Level", 62.5);
    tokio::time::sleep(Duration::from_millis(300)).await;
    number(&server, "Tank1.Level", 64.0);
    let update = next(&mut banded).await;
    assert_eq!(
        update.readings[0].value,
        Some(WireValue::Number(64.0)),
        "the half-point change stayed inside the deadband: {update:?}"
    );
    for (bad, expected) in [
        (request(&[], ""), "nothing to subscribe to"),
        (request(&[], "Plant/Nowhere"), "no folder"),
        (
            SubscribeRequest {
                deadband: -1.0,
                ..request(&["Tank1.Level"], "")
            },
            "deadband",
        ),
    ] {
        let error = client.subscribe(bad).await.expect_err("refused");
        assert!(
            matches!(&error, ClientError::Server { code: ErrorCode::InvalidArgument, message } if message.contains(expected)),
            "{error}"
        );
    }
    let mut held = Vec::new();
    for _ in 1..16 {
        held.push(
            client
                .subscribe(request(&["Tank1.Level"], ""))
                .await
                .expect("within the limit"),
        );
    }
    let error = client
        .subscribe(request(&["Tank1.Level"], ""))
        .await
        .expect_err("the 17th");
    assert!(error.to_string().contains("16 subscriptions"), "{error}");
    server.stop().await;
}

#[tokio::test]
async fn a_reader_that_does_not_read_gets_merged_frames_and_the_latest_values() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let socket = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connects");
    let mut framed = tokio_util::codec::Framed::new(
        socket,
        FrameCodec::<ServerFrame, ClientFrame>::new(DEFAULT_MAX_FRAME),
    );
    use futures::SinkExt;
    let send = |call_id, body| ClientFrame {
        call_id,
        body: Some(body),
    };
    framed
        .send(send(1, crate::support::hello("guest", "")))
        .await
        .expect("sent");
    framed
        .send(send(
            2,
            client_frame::Body::Subscribe(SubscribeRequest {
                max_rate: 100,
                ..request(&[], "Plant")
            }),
        ))
        .await
        .expect("sent");
    // Thousands of changes while the client reads nothing.
    let started = Instant::now();
    let tags = [
        "Pump1.MotorCurrent",
        "Pump1.FlowRate",
        "Tank1.Level",
        "Tank2.Level",
    ];
    for round in 0..2000 {
        for tag in tags {
            number(&server, tag, f64::from(round % 100));
        }
        if round % 200 == 0 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    number(&server, "Tank1.Level", 77.0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let elapsed = started.elapsed();
    let mut frames = 0;
    let mut skipped = 0;
    let mut latest = None;
    while latest != Some(WireValue::Number(77.0)) {
        let frame = tokio::time::timeout(Duration::from_secs(10), framed.next())
            .await
            .expect("a frame")
            .expect("open")
            .expect("decodes");
        let Decoded::Message(frame) = frame else {
            panic!("malformed")
        };
        if let Some(server_frame::Body::TagUpdate(update)) = frame.body {
            frames += 1;
            skipped += update.skipped;
            if let Some(reading) = update
                .readings
                .iter()
                .rev()
                .find(|reading| reading.name == "Tank1.Level")
            {
                latest = reading.value.clone();
            }
        }
    }
    let bound = (elapsed.as_secs_f64() * 100.0) as u64 + 5;
    assert!(frames <= bound, "{frames} frames in {elapsed:?}: not merged");
    assert!(skipped > 1000, "merged changes are counted: {skipped}");
    server.stop().await;
}

#[tokio::test]
async fn tclient_watches_tags_and_lists_alarms() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let addr = server.addr.to_string();
    number(&server, "Tank1.Level", 90.0);
    let run = |args: Vec<String>| async move {
        let cli = <tclient::cli::Cli as clap::Parser>::try_parse_from(
            std::iter::once("tclient".to_owned()).chain(args),
        )
        .expect("arguments");
        let mut output = Vec::new();
        tclient::cli::run(&cli, &mut "".as_bytes(), &mut output, Default::default())
            .await
            .map(|()| String::from_utf8(output).expect("utf-8"))
    };
    let listed = run(vec![
        "--addr".into(),
        addr.clone(),
        "alarms".into(),
        "list".into(),
    ])
    .await
    .expect("lists");
    let first = listed.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("Tank1.Level.Hi [active] priority 700 since ")
            && first.ends_with(": Tank1.Level = 90 % (Hi limit 85): Tank 1 level high"),
        "{listed}"
    );
    assert!(
        listed.lines().skip(1).all(|line| line.starts_with("  ")),
        "one alarm, what to do about it under it: {listed}"
    );
    let args = vec![
        "--addr".into(),
        addr.clone(),
        "tags".into(),
        "watch".into(),
        "Pump1.Mode".into(),
        "Plant/Area2".into(),
        "--updates".into(),
        "1".into(),
    ];
    let writer = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        number(&server, "Tank2.Level", 12.5);
    };
    let (watched, ()) =
        tokio::time::timeout(Duration::from_secs(10), async { tokio::join!(run(args), writer) })
            .await
            .expect("stops after one update");
    let watched = watched.expect("watches");
    let lines: Vec<&str> = watched.lines().collect();
    assert_eq!(lines[0], "Pump1.Mode = \"Auto\" (Good)", "{watched}");
    assert!(
        lines.iter().any(|line| line.starts_with("Tank2.Temperature = ")),
        "{watched}"
    );
    assert_eq!(lines.last(), Some(&"Tank2.Level = 12.5 % (Good)"), "{watched}");
    server.stop().await;
}

#[tokio::test]
async fn a_closed_connection_leaves_no_subscription_running() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let client = server.guest().await;
    let mut held = Vec::new();
    for folder in ["Plant/Area1", "Plant/Area2", "/"] {
        held.push(client.subscribe(request(&[], folder)).await.expect("subscribed"));
    }
    assert_eq!(server.runtime.plant().change_watchers(), 3);
    drop(held);
    drop(client);
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.runtime.plant().change_watchers() > 0 {
        assert!(
            Instant::now() < deadline,
            "subscriptions outlived their connection"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.stop().await;
}
