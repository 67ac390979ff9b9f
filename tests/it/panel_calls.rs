//! The calls a panel reads the plant and clears its chat with (Browse, TagHistory, Alarms,
//! ChatClear) against a real server on the demo plant, through the client library and
//! `tclient`, for every role and whatever the solution's tool bits say.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use plant_model::{Quality, TagValue};
use scripted_llm::Reply;
use serde_json::Value;
use service_client::{
    AlarmsRequest, Client, ClientError, ErrorCode, HistoryValue, PlantNode, PlantNodeKind, TagHistoryRequest,
};
use tserver::ServerConfig;

use crate::chat::ChatRig;
use crate::support::{Solution, TestServer, admin};
use crate::tclient::tclient;

pub(crate) fn ms(time: SystemTime) -> i64 {
    i64::try_from(time.duration_since(UNIX_EPOCH).expect("after 1970").as_millis()).expect("fits")
}

/// A whole second before the demo's seeded history (its last 2 hours), so the samples and
/// alarm events a test writes after it are the only ones of their window.
fn before_the_seeded_history() -> SystemTime {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970");
    UNIX_EPOCH + Duration::from_secs(now.as_secs() - 3 * 3600)
}

fn number(server: &TestServer, tag: &str, value: f64, time: SystemTime) {
    server
        .runtime
        .plant()
        .write_at(tag, TagValue::Number(value), Quality::GOOD, time)
        .expect("written");
}

/// Asserts `error` is an INVALID_ARGUMENT whose message holds `naming`.
pub(crate) fn assert_invalid(error: &ClientError, naming: &str) {
    match error {
        ClientError::Server {
            code: ErrorCode::InvalidArgument,
            message,
        } => assert!(message.contains(naming), "{message:?} names {naming:?}"),
        other => panic!("expected INVALID_ARGUMENT naming {naming:?}, got {other:?}"),
    }
}

fn node<'a>(nodes: &'a [PlantNode], name: &str) -> &'a PlantNode {
    nodes
        .iter()
        .find(|node| node.name == name)
        .unwrap_or_else(|| panic!("{name} in {nodes:?}"))
}

#[tokio::test]
async fn browse_lists_folders_then_tags_with_what_a_panel_needs() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let client = server.guest().await;

    let root = client.browse("").await.expect("the root");
    assert_eq!(root.folder, "");
    let names: Vec<&str> = root.nodes.iter().map(|node| node.name.as_str()).collect();
    assert_eq!(names, ["Plant"]);
    assert_eq!(root.nodes[0].kind(), PlantNodeKind::Folder);
    assert!(root.nodes[0].has_children);
    assert!(!root.truncated);

    let plant = client.browse("/Plant/").await.expect("a folder");
    let area1 = node(&plant.nodes, "Area1");
    assert_eq!(area1.path, "Plant/Area1");
    assert_eq!(
        area1.description,
        "Pump house: Pump 1 with its motor, Pump 2, Tank 1"
    );
    assert_eq!(node(&plant.nodes, "Area2").description, "Storage: Tank 2");

    let pump = client
        .browse("plant/area1/pump1")
        .await
        .expect("matched ignoring case");
    assert_eq!(pump.folder, "Plant/Area1/Pump1");
    let names: Vec<&str> = pump.nodes.iter().map(|node| node.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "Motor1",
            "DischargePressure",
            "FlowRate",
            "Mode",
            "MotorCurrent",
            "Running",
            "StartCount"
        ],
        "folders first, then tags by name"
    );
    let current = node(&pump.nodes, "MotorCurrent");
    assert_eq!(current.kind(), PlantNodeKind::Tag);
    assert_eq!(current.path, "Plant/Area1/Pump1/MotorCurrent");
    assert_eq!(current.tag, "Pump1.MotorCurrent");
    assert_eq!(current.description, "Pump 1 drive motor current");
    assert_eq!(current.units, "A");
    assert_eq!(current.data_type, "number");
    assert!(!current.writable);
    assert_eq!((current.min, current.max), (Some(0.0), Some(30.0)));
    assert!(!current.has_children);
    let mode = node(&pump.nodes, "Mode");
    assert!(mode.writable);
    assert_eq!(mode.data_type, "text");
    assert_eq!((mode.min, mode.max), (None, None), "unbounded: absent");
    let starts = node(&pump.nodes, "StartCount");
    assert_eq!(starts.data_type, "integer");
    assert_eq!((starts.min, starts.max), (Some(0.0), None));
    assert_eq!(node(&pump.nodes, "Running").data_type, "boolean");

    let unknown = client.browse("Plant/Area9").await.expect_err("no such folder");
    assert_invalid(&unknown, "\"Plant/Area9\" is no folder");
    let tag = client
        .browse("Plant/Area1/Pump1/MotorCurrent")
        .await
        .expect_err("a tag");
    assert_invalid(&tag, "is a tag, not a folder");
    client.ping().await.expect("the connection stays usable");
    server.stop().await;
}

/// The numbers of a history reply's samples.
fn numbers_of(reply: &service_client::TagHistoryReply) -> Vec<f64> {
    reply
        .samples
        .iter()
        .map(|sample| match sample.value {
            Some(HistoryValue::Number(value)) => value,
            ref other => panic!("a number, not {other:?}"),
        })
        .collect()
}

#[tokio::test]
async fn a_one_second_excursion_is_recorded_and_shows_in_a_hundred_bucket_trend() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let client = server.guest().await;
    // After the seeded history: 11, 150, 12, 13 a second apart, then 14 twelve seconds later.
    let start = SystemTime::now() + Duration::from_secs(10);
    for (second, value) in [(0, 11.0), (1, 150.0), (2, 12.0), (3, 13.0), (15, 14.0)] {
        number(&server, "Tank1.Level", value, start + Duration::from_secs(second));
    }
    let window = |since: SystemTime, seconds: u64, max_samples| TagHistoryRequest {
        name: "Tank1.Level".to_owned(),
        since_ms: ms(since),
        until_ms: ms(since + Duration::from_secs(seconds)),
        max_samples,
        ..TagHistoryRequest::default()
    };
    let raw = client
        .tag_history(window(start, 20, 0))
        .await
        .expect("the window");
    assert_eq!(numbers_of(&raw), [11.0, 150.0, 12.0, 13.0, 14.0]);

    // An hour of a level wavering by 5 around 50, a second apart, and the spike in its middle:
    // a trend of 100 buckets (400 samples) keeps it.
    let later = start + Duration::from_secs(60);
    for second in 0..3_600_u32 {
        let value = if second == 1_800 {
            150.0
        } else {
            50.0 + f64::from(second % 2) * 5.0
        };
        number(
            &server,
            "Tank1.Level",
            value,
            later + Duration::from_secs(u64::from(second)),
        );
    }
    let trend = client
        .tag_history(window(later, 3_600, 400))
        .await
        .expect("the trend");
    assert!(
        trend.truncated && trend.samples.len() <= 400,
        "{}",
        trend.samples.len()
    );
    assert_eq!(
        trend.total_samples, 3_600,
        "every move past the deviation was stored"
    );
    let values = numbers_of(&trend);
    assert!(values.contains(&150.0), "the spike shows");
    assert!(values.contains(&50.0) && values.contains(&55.0));
    server.stop().await;
}

#[tokio::test]
async fn tag_history_sends_a_window_oldest_first_and_says_when_it_is_cut() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let start = before_the_seeded_history();
    // One sample every 10 s, zigzagging far past the deviation, so each is stored.
    let zigzag = |step: u32| f64::from(step) + if step % 2 == 1 { 100.0 } else { 0.0 };
    for step in 0..50_u32 {
        let time = start + Duration::from_secs(10 * u64::from(step));
        number(&server, "Tank1.Level", zigzag(step), time);
    }
    let client = server.guest().await;
    let window = |max_samples| TagHistoryRequest {
        name: "Plant/Area1/Tank1/Level".to_owned(),
        since_ms: ms(start),
        until_ms: ms(start + Duration::from_secs(490)),
        max_samples,
        ..TagHistoryRequest::default()
    };
    let whole = client.tag_history(window(0)).await.expect("the window");
    assert_eq!(whole.name, "Tank1.Level");
    assert_eq!(whole.units, "%");
    assert_eq!(whole.total_samples, 50);
    assert!(!whole.truncated);
    let values: Vec<f64> = whole
        .samples
        .iter()
        .map(|sample| match sample.value {
            Some(HistoryValue::Number(value)) => value,
            ref other => panic!("a number, not {other:?}"),
        })
        .collect();
    let expected: Vec<f64> = (0..50).map(zigzag).collect();
    assert_eq!(values, expected, "every sample, oldest first");
    assert_eq!(whole.samples[0].timestamp_ms, ms(start));
    assert!(whole.samples.iter().all(|sample| sample.quality == 192));

    // Cut to 10: the window's two buckets (10 / 4) each keep their first, smallest, largest and
    // last sample (M4).
    let thinned = client.tag_history(window(10)).await.expect("the window, cut");
    assert_eq!(
        numbers_of(&thinned),
        [0.0, 123.0, 24.0, 125.0, 26.0, 149.0],
        "steps 0, 23, 24 of the first half; 25, 26, 49 of the second"
    );
    assert!(thinned.truncated, "the cap says it cut");
    assert_eq!(thinned.total_samples, 50);
    assert!(
        thinned
            .samples
            .windows(2)
            .all(|pair| pair[0].timestamp_ms < pair[1].timestamp_ms),
        "oldest first"
    );

    let unknown = client
        .tag_history(TagHistoryRequest {
            name: "Tank9.Level".to_owned(),
            ..window(0)
        })
        .await
        .expect_err("no such tag");
    assert_invalid(&unknown, "no tag named \"Tank9.Level\"");
    let reversed = client
        .tag_history(TagHistoryRequest {
            since_ms: ms(start) + 1000,
            until_ms: ms(start),
            ..window(0)
        })
        .await
        .expect_err("reversed");
    assert_invalid(&reversed, "is after until_ms");
    let too_many = client
        .tag_history(window(10_001))
        .await
        .expect_err("over the cap");
    assert_invalid(&too_many, "max_samples 10001");
    for (since_ms, until_ms) in [(i64::MAX, 0), (-1, 0), (0, -5)] {
        let far = client
            .tag_history(TagHistoryRequest {
                since_ms,
                until_ms,
                ..window(0)
            })
            .await
            .expect_err("refused");
        assert_eq!(far.server_code(), Some(ErrorCode::InvalidArgument), "{far}");
    }
    server.stop().await;
}

#[tokio::test]
async fn alarms_come_unacknowledged_first_then_by_priority_then_newest_with_their_history() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let base = before_the_seeded_history();
    let at = |seconds| base + Duration::from_secs(seconds);
    number(&server, "Pump1.MotorCurrent", 22.0, at(10)); // Hi, 700
    number(&server, "Motor1.Temperature", 80.0, at(20)); // Hi, 700, newer
    number(&server, "Tank1.Level", 5.0, at(30)); // LoLo, 800
    number(&server, "Tank2.Level", 20.0, at(40)); // Lo, 500
    number(&server, "Motor1.Temperature", 100.0, at(50)); // HiHi, 900
    let client = server.guest().await;
    let acknowledging = SystemTime::now();
    assert!(
        client
            .acknowledge_alarm("Motor1.Temperature.HiHi")
            .await
            .expect("acknowledged")
    );

    let reply = client.alarms(AlarmsRequest::default()).await.expect("alarms");
    let order: Vec<(&str, &str)> = reply
        .active
        .iter()
        .map(|alarm| (alarm.name.as_str(), alarm.state.as_str()))
        .collect();
    assert_eq!(
        order,
        [
            ("Tank1.Level.LoLo", "active"),
            ("Motor1.Temperature.Hi", "active"),
            ("Pump1.MotorCurrent.Hi", "active"),
            ("Tank2.Level.Lo", "active"),
            ("Motor1.Temperature.HiHi", "acknowledged"),
        ]
    );
    assert!(reply.history.is_empty(), "not asked for");
    assert!(!reply.active_truncated);
    let lolo = &reply.active[0];
    assert_eq!(lolo.tag, "Tank1.Level");
    assert_eq!(lolo.condition, "LoLo");
    assert_eq!(lolo.limit, Some(10.0));
    assert_eq!(lolo.priority, 800);
    assert_eq!(lolo.message, "Tank 1 level very low: pump suction at risk");
    assert_eq!(lolo.since_ms, ms(at(30)));
    assert_eq!(lolo.trip_value, Some(5.0));
    assert!(lolo.acknowledged_by.is_empty());
    let value = lolo.value.as_ref().expect("the tag's reading");
    assert_eq!(value.value, Some(service_client::TagValue::Number(5.0)));
    assert_eq!((value.units.as_str(), value.quality), ("%", 192));
    assert_eq!(value.last_good_ms, ms(at(30)));
    let acknowledged = &reply.active[4];
    assert_eq!(acknowledged.acknowledged_by, "guest");
    assert!(acknowledged.acknowledged_ms >= ms(at(50)));

    let with_history = client
        .alarms(AlarmsRequest {
            history: true,
            since_ms: ms(base),
            limit: 0,
        })
        .await
        .expect("alarms and history");
    // The demo's seeded history lies between the events written and the acknowledgement.
    let ours: Vec<_> = with_history
        .history
        .iter()
        .filter(|event| event.timestamp_ms <= ms(at(50)) || event.timestamp_ms >= ms(acknowledging))
        .collect();
    let events: Vec<(&str, &str)> = ours
        .iter()
        .map(|event| (event.name.as_str(), event.kind.as_str()))
        .collect();
    assert_eq!(
        events,
        [
            ("Motor1.Temperature.HiHi", "acknowledged"),
            ("Motor1.Temperature.HiHi", "active"),
            ("Tank2.Level.Lo", "active"),
            ("Tank1.Level.LoLo", "active"),
            ("Motor1.Temperature.Hi", "active"),
            ("Pump1.MotorCurrent.Hi", "active"),
        ],
        "newest first"
    );
    assert_eq!(
        with_history.history[0], *ours[0],
        "the acknowledgement is the newest"
    );
    assert_eq!(ours[0].user, "guest");
    assert_eq!(ours[1].value, Some(100.0));
    assert_eq!(ours[1].timestamp_ms, ms(at(50)));
    assert!(
        with_history
            .history
            .windows(2)
            .all(|pair| pair[0].timestamp_ms >= pair[1].timestamp_ms),
        "newest first"
    );
    assert!(!with_history.history_truncated);
    let cut = client
        .alarms(AlarmsRequest {
            history: true,
            since_ms: ms(base),
            limit: 2,
        })
        .await
        .expect("a cut history");
    assert_eq!(cut.history.len(), 2);
    assert!(cut.history_truncated);

    let too_many = client
        .alarms(AlarmsRequest {
            history: true,
            since_ms: 0,
            limit: 2001,
        })
        .await
        .expect_err("over the cap");
    assert_invalid(&too_many, "limit 2001");
    let future = client
        .alarms(AlarmsRequest {
            history: true,
            since_ms: ms(SystemTime::now() + Duration::from_secs(3600)),
            limit: 0,
        })
        .await
        .expect_err("in the future");
    assert_invalid(&future, "in the future");
    server.stop().await;
}

#[tokio::test]
async fn a_viewer_reads_the_plant_and_clears_its_chat_with_every_tool_bit_off() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8 path");
    admin(&["users", path, "add", "watcher"], "pw\n");
    admin(&["settings", path, "set", "ModelOptions", "0"], "");
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let client: Client = server.client().await;
    client.login("watcher", "pw").await.expect("the viewer logs in");
    let tools = client.list_tools().await.expect_err("tools are off");
    assert_eq!(tools.server_code(), Some(ErrorCode::ToolsDisabled));

    let browsed = client.browse("Plant/Area2/Tank2").await.expect("browse");
    assert_eq!(browsed.nodes.len(), 2);
    let history = client
        .tag_history(TagHistoryRequest {
            name: "Tank2.Level".to_owned(),
            ..TagHistoryRequest::default()
        })
        .await
        .expect("history");
    assert_eq!(history.name, "Tank2.Level");
    let alarms = client
        .alarms(AlarmsRequest {
            history: true,
            ..AlarmsRequest::default()
        })
        .await
        .expect("alarms");
    assert!(alarms.active.is_empty(), "the demo starts inside its limits");
    assert!(
        !client.chat_clear().await.expect("chat clear"),
        "nothing to clear"
    );
    server.stop().await;
}

/// The messages of a POST the model received, as (role, content) pairs.
fn messages(post: &Value) -> Vec<(String, String)> {
    post["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|message| {
            (
                message["role"].as_str().expect("role").to_owned(),
                message["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn conversation(post: &Value) -> Vec<(String, String)> {
    messages(post)
        .into_iter()
        .filter(|(role, _)| role != "system")
        .collect()
}

fn said(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(role, content)| ((*role).to_owned(), (*content).to_owned()))
        .collect()
}

#[tokio::test]
async fn chat_clear_empties_this_connections_transcript_only() {
    let rig = ChatRig::start(
        vec![
            Reply::text("one"),
            Reply::text("two"),
            Reply::text("three"),
            Reply::text("four"),
        ],
        &[],
    )
    .await;
    let panel = rig.server.guest().await;
    let other = rig.server.guest().await;
    panel.chat("first question").await.expect("turn 1");
    other.chat("other question").await.expect("turn 2");
    assert!(panel.chat_clear().await.expect("cleared"), "it held a turn");
    assert!(!panel.chat_clear().await.expect("cleared again"), "now empty");
    panel.chat("second question").await.expect("turn 3");
    other.chat("other again").await.expect("turn 4");
    let posts = rig.posts();
    assert_eq!(posts.len(), 4);
    assert_eq!(
        conversation(&posts[2]),
        said(&[("user", "second question")]),
        "the turn after the clear starts afresh"
    );
    assert_eq!(
        conversation(&posts[3]),
        said(&[
            ("user", "other question"),
            ("assistant", "two"),
            ("user", "other again")
        ]),
        "another connection keeps its conversation"
    );
    rig.stop().await;
}

#[tokio::test]
async fn chat_clear_sent_during_a_turn_waits_for_it_and_clears_what_it_added() {
    let rig = ChatRig::start(
        vec![
            Reply::text("one").after(Duration::from_millis(300)),
            Reply::text("two"),
        ],
        &[],
    )
    .await;
    let panel = rig.server.guest().await;
    let turn = panel.send_chat("first question").await.expect("sent");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while rig.llm.requests().is_empty() {
        assert!(std::time::Instant::now() < deadline, "the first POST arrives");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The turn is at the model now: the clear queues behind it.
    let cleared = panel.chat_clear().await.expect("cleared");
    assert!(cleared, "the clear came after the turn it waited for");
    turn.reply().await.expect("the turn was answered, not cancelled");
    panel.chat("second question").await.expect("turn 2");
    let posts = rig.posts();
    assert_eq!(conversation(&posts[1]), said(&[("user", "second question")]));
    rig.stop().await;
}

#[tokio::test]
async fn tclient_prints_history_as_csv_the_plant_tree_and_alarm_details() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let addr = server.addr.to_string();
    let start = before_the_seeded_history();
    // Wavering past the deviation, so each sample is stored.
    let level = |step: u32| 90.0 + f64::from(step) + if step % 2 == 1 { 5.0 } else { 0.0 };
    for step in 0..5_u32 {
        let time = start + Duration::from_secs(10 * u64::from(step));
        number(&server, "Tank1.Level", level(step), time);
    }
    let since = humantime::format_rfc3339_seconds(start).to_string();
    let until = humantime::format_rfc3339_seconds(start + Duration::from_secs(40)).to_string();
    let csv_text = tclient(
        &[
            "--addr",
            &addr,
            "tags",
            "history",
            "Tank1.Level",
            "--since",
            &since,
            "--until",
            &until,
            "--csv",
        ],
        "",
        false,
    )
    .await
    .expect("history as CSV");
    let mut reader = csv::Reader::from_reader(csv_text.as_bytes());
    assert_eq!(
        reader.headers().expect("a header").iter().collect::<Vec<_>>(),
        ["timestamp", "value", "quality"]
    );
    let rows: Vec<(SystemTime, f64, String)> = reader
        .records()
        .map(|record| {
            let record = record.expect("a row");
            (
                humantime::parse_rfc3339(&record[0]).expect("an RFC 3339 UTC time"),
                record[1].parse().expect("a number"),
                record[2].to_owned(),
            )
        })
        .collect();
    let expected: Vec<(SystemTime, f64, String)> = (0..5_u32)
        .map(|step| {
            (
                start + Duration::from_secs(10 * u64::from(step)),
                level(step),
                "Good".to_owned(),
            )
        })
        .collect();
    assert_eq!(rows, expected, "{csv_text}");

    let table = tclient(
        &["--addr", &addr, "tags", "history", "Tank1.Level", "--since", "1h"],
        "",
        false,
    )
    .await
    .expect("history as a table");
    assert!(table.starts_with("Tank1.Level (%): "), "{table}");
    let unknown = tclient(&["--addr", &addr, "tags", "history", "Tank9.Level"], "", false)
        .await
        .expect_err("no such tag");
    assert!(
        unknown.to_string().contains("no tag named \"Tank9.Level\""),
        "{unknown}"
    );
    let bad_time = tclient(
        &[
            "--addr",
            &addr,
            "tags",
            "history",
            "Tank1.Level",
            "--since",
            "soon",
        ],
        "",
        false,
    )
    .await
    .expect_err("not a time");
    assert!(
        format!("{bad_time:#}").contains("\"soon\" is neither"),
        "{bad_time:#}"
    );

    let tree = tclient(
        &["--addr", &addr, "tags", "browse", "Plant/Area1/Pump1"],
        "",
        false,
    )
    .await
    .expect("a folder");
    let lines: Vec<&str> = tree.lines().collect();
    assert_eq!(lines[0], "Plant/Area1/Pump1");
    assert_eq!(lines[1], "  Motor1/");
    assert!(
        lines.contains(
            &"  MotorCurrent (Pump1.MotorCurrent) [number, A, range 0..30]  Pump 1 drive motor current"
        ),
        "{tree}"
    );
    assert!(
        lines.contains(&"  Mode (Pump1.Mode) [text, writable, one of Auto|Manual|Off]  Pump 1 control mode"),
        "{tree}"
    );

    let alarms = tclient(&["--addr", &addr, "alarms", "list", "--history"], "", false)
        .await
        .expect("alarms");
    let lines: Vec<&str> = alarms.lines().collect();
    // 90 % at the first sample is past the 85 % limit already.
    let active_since = humantime::format_rfc3339_millis(start).to_string();
    assert_eq!(
        lines[0],
        format!(
            "Tank1.Level.Hi [active] priority 700 since {active_since}: Tank1.Level = 94 % (Hi limit 85): Tank 1 level high"
        ),
        "{alarms}"
    );
    assert_eq!(
        lines[1..6],
        [
            "  what to do: Confirm Pump 1 is running; start Pump 2 or reduce the inflow",
            "  respond within: 600 s",
            "  cause: Inflow above what Pump 1 draws, or Pump 1 stopped",
            "  if nobody acts: Tank 1 overflows into the bund",
            "history (newest first):",
        ],
        "{alarms}"
    );
    assert!(
        lines.contains(&format!("  {active_since} Tank1.Level.Hi active value 90").as_str()),
        "{alarms}"
    );
    server.stop().await;
}

#[tokio::test]
async fn tclient_chat_clear_and_the_repls_clear_start_a_new_conversation() {
    let rig = ChatRig::start(
        vec![Reply::text("one"), Reply::text("two"), Reply::text("three")],
        &[],
    )
    .await;
    let addr = rig.server.addr.to_string();
    let alone = tclient(&["--addr", &addr, "chat", "--clear"], "", false)
        .await
        .expect("cleared");
    assert_eq!(alone, "conversation cleared (it was empty)\n");
    let out = tclient(
        &["--addr", &addr, "repl"],
        "first question\n:clear\nsecond question\n",
        false,
    )
    .await
    .expect("replies");
    assert_eq!(out.lines().count(), 2, "one envelope per question: {out}");
    let interactive = tclient(
        &["--addr", &addr, "--no-stream", "repl"],
        ":clear\nthird question\n\n",
        true,
    )
    .await
    .expect("replies");
    assert!(interactive.contains("(conversation cleared)"), "{interactive}");
    let posts = rig.posts();
    assert_eq!(posts.len(), 3);
    assert_eq!(conversation(&posts[0]), said(&[("user", "first question")]));
    assert_eq!(
        conversation(&posts[1]),
        said(&[("user", "second question")]),
        ":clear emptied the first exchange"
    );
    rig.stop().await;
}

#[tokio::test]
async fn a_reading_says_when_its_tag_last_had_a_good_value() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8 path");
    // A tag without an initial value: Bad from the start, never Good.
    let exported = admin(&["plant", path, "export"], "");
    let without_initial = format!(
        "{exported}\n[[tags]]\nname = \"Lab.Sample\"\npath = \"Plant/Lab/Sample\"\ntype = \"number\"\n"
    );
    let file = solution.path.with_file_name("no-initial.toml");
    std::fs::write(&file, without_initial).expect("writes the plant file");
    admin(&["plant", path, "import", file.to_str().expect("utf-8 path")], "");
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let client = server.guest().await;

    let never = &client.read_tags(&["Lab.Sample"]).await.expect("read")[0];
    assert_eq!(
        (never.quality, never.last_good_ms),
        (0, 0),
        "never Good: {never:?}"
    );

    let good = before_the_seeded_history();
    let bad = good + Duration::from_secs(60);
    number(&server, "Tank1.Level", 40.0, good);
    let plant = server.runtime.plant();
    plant
        .write_at("Tank1.Level", TagValue::Number(0.0), Quality::BAD, bad)
        .expect("written");
    plant
        .write_at("Lab.Sample", TagValue::Number(3.0), Quality::GOOD, good)
        .expect("written");
    let readings = client
        .read_tags(&["Tank1.Level", "Lab.Sample"])
        .await
        .expect("read");
    let reported_bad = &readings[0];
    assert_eq!(reported_bad.quality, 0);
    assert_eq!(reported_bad.timestamp_ms, ms(bad), "the Bad value's own time");
    assert_eq!(reported_bad.last_good_ms, ms(good), "and the last Good one's");
    let now_good = &readings[1];
    assert_eq!((now_good.quality, now_good.last_good_ms), (192, ms(good)));
    assert_eq!(now_good.timestamp_ms, now_good.last_good_ms);
    server.stop().await;
}
