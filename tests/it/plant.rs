//! The live plant over time: the simulator moved at times the test chooses (no sleeping),
//! alarms tripping and clearing, the historian's interval and retention, the background task's
//! last flush, and display reads agreeing with the assistant's tool reads.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use plant::simulator::TagMotion;
use plant_model::{AlarmEventKind, Quality, TagValue};
use serde_json::{Value, json};
use service_client::TagValue as WireValue;
use tokio_util::sync::CancellationToken;
use tserver::{Runtime, ServerConfig};

use crate::runtime_tools::call;
use crate::support::{Solution, TestServer, admin, try_admin};

fn motion(runtime: &Runtime, tag: &str) -> TagMotion {
    runtime
        .simulator()
        .motions()
        .iter()
        .find(|motion| motion.tag == tag)
        .cloned()
        .unwrap_or_else(|| panic!("{tag} is simulated"))
}

/// The first whole second from `from` (stepping by `step`) where `wanted` holds.
fn first_time(from: SystemTime, step: Duration, wanted: impl Fn(SystemTime) -> bool) -> SystemTime {
    (0..100_000)
        .map(|n| from + step * n)
        .find(|&time| wanted(time))
        .expect("the motion gets there within the search")
}

async fn tool(runtime: &Runtime, name: &str, arguments: Value) -> Value {
    call(runtime, name, arguments).await.expect("tool succeeds")
}

pub(crate) fn rfc3339(time: SystemTime) -> String {
    humantime::format_rfc3339_millis(time).to_string()
}

#[tokio::test]
async fn simulator_steps_move_values_trip_and_clear_an_alarm_and_record_history() {
    let solution = Solution::demo();
    let runtime = Runtime::open(&solution.path).expect("opens");
    let level = motion(&runtime, "Tank1.Level");
    // Six hours back: clear of the two hours of history `init --demo` seeded.
    let origin = SystemTime::now() - Duration::from_secs(6 * 3600);
    let second = Duration::from_secs(1);
    let low = first_time(origin, second, |t| level.value_at(t) < 70.0);
    let high = first_time(low, second, |t| level.value_at(t) > 88.0);
    let back = first_time(high, second, |t| level.value_at(t) < 75.0);

    assert!(
        runtime
            .simulator()
            .step(low)
            .iter()
            .all(|event| event.alarm != "Tank1.Level.Hi")
    );
    let tripped = runtime.simulator().step(high);
    let trip = tripped
        .iter()
        .find(|event| event.alarm == "Tank1.Level.Hi")
        .expect("the high level trips Tank1.Level.Hi");
    assert_eq!(trip.kind, AlarmEventKind::Active);
    assert_eq!(trip.time, high);
    let reading = tool(&runtime, "runtime_get_value", json!({"tag": "Tank1.Level"})).await;
    let value = reading["value"].as_f64().expect("number");
    assert!((value - level.value_at(high)).abs() < 0.001, "{value}");
    assert_eq!(reading["timestamp"], rfc3339(high));
    let active = tool(
        &runtime,
        "runtime_get_active_alarms",
        json!({"path": "Tank1.Level"}),
    )
    .await;
    assert_eq!(active["alarms"][0]["name"], "Tank1.Level.Hi");
    assert_eq!(active["alarms"][0]["activeSince"], rfc3339(high));

    let cleared = runtime.simulator().step(back);
    assert!(
        cleared
            .iter()
            .any(|event| event.alarm == "Tank1.Level.Hi" && event.kind == AlarmEventKind::Cleared),
        "{cleared:?}"
    );
    let active = tool(
        &runtime,
        "runtime_get_active_alarms",
        json!({"path": "Tank1.Level"}),
    )
    .await;
    assert_eq!(active["alarms"][0]["state"], "normal-unacked");

    let recorded = tank1_history(&runtime, low, back).await;
    assert_eq!(recorded.len(), 3, "one sample per step: {recorded:?}");
    assert!((recorded[1] - level.value_at(high)).abs() < 0.001);
    assert_eq!(
        tank1_alarm_events(&runtime, low, back).await,
        ["Cleared", "Active"],
        "newest first"
    );
}

/// Tank1.Level's recorded values between `from` and `to`, through the history tool.
async fn tank1_history(runtime: &Runtime, from: SystemTime, to: SystemTime) -> Vec<f64> {
    let history = tool(
        runtime,
        "runtime_get_tag_history",
        json!({"tag": "Tank1.Level", "start": rfc3339(from), "end": rfc3339(to)}),
    )
    .await;
    history["samples"]
        .as_array()
        .expect("samples")
        .iter()
        .filter_map(|sample| sample["value"].as_f64())
        .collect()
}

/// The kinds of Tank1.Level's alarm events between `from` and `to`, newest first, through the
/// alarm-history tool.
async fn tank1_alarm_events(runtime: &Runtime, from: SystemTime, to: SystemTime) -> Vec<String> {
    let alarms = tool(
        runtime,
        "runtime_query_alarm_history",
        json!({"tag": "Tank1.Level", "start": rfc3339(from), "end": rfc3339(to)}),
    )
    .await;
    alarms["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|event| event["event"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn a_batch_of_writes_is_applied_in_order_recorded_and_announced_once() {
    let solution = Solution::demo();
    let runtime = Runtime::open(&solution.path).expect("opens");
    let plant = runtime.plant();
    let mut changes = plant.reader().changes();
    let changes_before = *changes.borrow_and_update();
    let version_before = plant.objects().tag("Tank1.Level").expect("tag").version();
    // Six hours back: clear of the two hours of history `init --demo` seeded.
    let high = SystemTime::now() - Duration::from_secs(6 * 3600);
    let back = high + Duration::from_secs(1);
    let write = |tag, value, quality, time| plant::TagWrite {
        tag,
        value,
        quality,
        time,
    };
    let written = plant.write_batch([
        write("Tank1.Level", TagValue::Number(99.0), Quality::GOOD, high),
        write("No.Such.Tag", TagValue::Number(1.0), Quality::GOOD, high),
        write("Pump1.Mode", TagValue::Number(1.0), Quality::GOOD, high),
        write("Tank1.Level", TagValue::Number(40.0), Quality::UNCERTAIN, back),
    ]);

    assert_eq!(written.written, 2);
    assert_eq!(
        written
            .refused
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        [
            "unknown tag \"No.Such.Tag\"",
            "tag \"Pump1.Mode\" holds Text values"
        ]
    );
    let level = plant.objects().tag("Tank1.Level").expect("tag").current();
    assert_eq!(
        (level.value.clone(), level.quality, level.timestamp),
        (TagValue::Number(40.0), Quality::UNCERTAIN, back),
        "the last write of the tag is its value"
    );
    assert_eq!(
        plant.objects().tag("Tank1.Level").expect("tag").version() - version_before,
        2,
        "each write counts"
    );
    assert_eq!(
        changes.borrow_and_update().wrapping_sub(changes_before),
        1,
        "the watchers are told once"
    );
    assert_eq!(
        tank1_history(&runtime, high, back).await,
        [99.0, 40.0],
        "both recorded (the quality changed)"
    );
    assert_eq!(
        tank1_alarm_events(&runtime, high, back).await,
        ["Cleared", "Active"],
        "newest first"
    );
}

#[tokio::test]
async fn the_historian_keeps_the_samples_a_line_within_the_deviation_needs() {
    let solution = Solution::demo();
    let runtime = Runtime::open(&solution.path).expect("opens");
    // A whole second, as the history keeps milliseconds.
    let five_hours_ago = SystemTime::now() - Duration::from_secs(5 * 3600);
    let origin = UNIX_EPOCH
        + Duration::from_secs(
            five_hours_ago
                .duration_since(UNIX_EPOCH)
                .expect("after 1970")
                .as_secs(),
        );
    for second in 0..60 {
        runtime.simulator().step(origin + Duration::from_secs(second));
    }
    let history = tool(
        &runtime,
        "runtime_get_tag_history",
        json!({"tag": "Pump1.MotorCurrent", "start": rfc3339(origin),
               "end": rfc3339(origin + Duration::from_secs(59)), "max_samples": 1000}),
    )
    .await;
    let stored: Vec<(f64, f64)> = history["samples"]
        .as_array()
        .expect("samples")
        .iter()
        .map(|sample| {
            let time = humantime::parse_rfc3339(sample["time"].as_str().expect("time")).expect("rfc 3339");
            let at = time.duration_since(origin).expect("after").as_secs_f64();
            (at, sample["value"].as_f64().expect("a number"))
        })
        .collect();
    let total = stored.len();
    assert!((2..60).contains(&total), "compressed, not every second: {total}");
    // The demo plant's deviation for Pump 1's current: the line through the stored samples
    // passes within it of every second's value.
    let deviation = 0.5;
    let motion = runtime
        .simulator()
        .motions()
        .iter()
        .find(|motion| motion.tag == "Pump1.MotorCurrent")
        .cloned()
        .expect("simulated");
    for second in 0..60_u32 {
        let at = f64::from(second);
        let value = motion.value_at(origin + Duration::from_secs(u64::from(second)));
        let after = stored
            .iter()
            .position(|(time, _)| *time >= at)
            .expect("the last is stored");
        let line = if stored[after].0 == at {
            stored[after].1
        } else {
            let ((ta, va), (tb, vb)) = (stored[after - 1], stored[after]);
            va + (vb - va) * (at - ta) / (tb - ta)
        };
        assert!(
            (line - value).abs() <= deviation + 1e-3,
            "second {second}: {value} received, the history's line says {line}"
        );
    }
}

#[tokio::test]
async fn history_older_than_the_retention_is_pruned() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8");
    admin(&["settings", path, "set", "HistoryRetentionHours", "1"], "");
    let runtime = Runtime::open(&solution.path).expect("opens");
    // The demo seeded two hours; reseeding flushes, which prunes to one.
    runtime
        .seed_history(Duration::from_secs(3 * 3600), Duration::from_secs(60))
        .expect("seeds");
    let history = tool(
        &runtime,
        "runtime_get_tag_history",
        json!({"tag": "Tank2.Level", "minutes": 300, "max_samples": 1000}),
    )
    .await;
    let oldest = history["samples"][0]["time"].as_str().expect("a sample");
    let oldest = humantime::parse_rfc3339(oldest).expect("time");
    let age = SystemTime::now().duration_since(oldest).expect("in the past");
    assert!(
        age <= Duration::from_secs(3600 + 60),
        "oldest sample is {age:?} old"
    );
    // An hour of one-minute samples, compressed within the tank's deviation.
    assert!(history["totalSamples"].as_u64().is_some_and(|total| total >= 10));
}

#[tokio::test]
async fn the_background_task_flushes_what_was_recorded_when_it_stops() {
    let solution = Solution::demo();
    let runtime = Runtime::open(&solution.path).expect("opens");
    let stamp = SystemTime::now() - Duration::from_secs(4 * 3600);
    runtime
        .plant()
        .write_at("Pump1.StartCount", TagValue::Integer(1285), Quality::GOOD, stamp)
        .expect("write");
    let stopped = CancellationToken::new();
    stopped.cancel();
    runtime.run_background(false, stopped).await;
    let store = store::Store::open_file(&solution.path).expect("opens");
    let page = store
        .tag_history_blocking(
            "Pump1.StartCount",
            plant_model::TagType::Integer,
            (stamp, stamp),
            10,
        )
        .expect("the sample reached the database");
    let stored = page.samples.first().map(|sample| sample.value.clone());
    assert_eq!(stored, Some(TagValue::Integer(1285)));
}

#[tokio::test]
async fn display_reads_and_tool_reads_see_the_same_plant() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    server.runtime.simulator().step(SystemTime::now());
    server
        .runtime
        .plant()
        .write("Pump1.Mode", TagValue::Text("Manual".into()), Quality::UNCERTAIN)
        .expect("write");
    let client = server.guest().await;
    let names = ["Pump1.MotorCurrent", "Tank1.Level", "Pump1.Mode", "Pump1.Running"];
    let readings = client.read_tags(&names).await.expect("display read");
    for reading in readings {
        let tool_read = tool(&server.runtime, "runtime_get_value", json!({"tag": reading.name})).await;
        let display_value = match reading.value.expect("a value") {
            WireValue::Number(value) => json!(value),
            WireValue::Integer(value) => json!(value),
            WireValue::Boolean(value) => json!(value),
            WireValue::Text(value) => json!(value),
        };
        assert_eq!(display_value, tool_read["value"], "{}", reading.name);
        let quality = Quality(u8::try_from(reading.quality).expect("OPC byte"));
        assert_eq!(quality.label(), tool_read["quality"], "{}", reading.name);
        let display_time = SystemTime::UNIX_EPOCH
            + Duration::from_millis(u64::try_from(reading.timestamp_ms).expect("after 1970"));
        assert_eq!(rfc3339(display_time), tool_read["timestamp"], "{}", reading.name);
    }
    drop(client);
    server.stop().await;
}

#[test]
fn serve_refuses_a_simulator_switch_that_is_not_on_or_off() {
    use clap::Parser;
    let parsed = tserver::cli::Cli::try_parse_from([
        "tserver",
        "serve",
        "--solution",
        "plant.db",
        "--simulator",
        "sometimes",
    ]);
    let error = parsed.expect_err("refused");
    assert!(error.to_string().contains("not on or off"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_history_is_exported_as_csv_or_json_lines_for_a_window_and_some_tags() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    let runtime = Runtime::open(&solution.path).expect("opens");
    // Three hours ago, on whole seconds: a start count that steps and a mode that changes.
    let three_hours_ago = SystemTime::now() - Duration::from_secs(3 * 3600);
    let start = UNIX_EPOCH
        + Duration::from_secs(
            three_hours_ago
                .duration_since(UNIX_EPOCH)
                .expect("after 1970")
                .as_secs(),
        );
    let at = |second: u64| start + Duration::from_secs(second);
    for (second, count) in [(0, 1300), (1, 1310), (2, 1305)] {
        runtime
            .plant()
            .write_at(
                "Pump1.StartCount",
                TagValue::Integer(count),
                Quality::GOOD,
                at(second),
            )
            .expect("written");
    }
    for (second, mode) in [(0, "Manual"), (3, "Off")] {
        runtime
            .plant()
            .write_at(
                "Pump1.Mode",
                TagValue::Text(mode.into()),
                Quality::GOOD,
                at(second),
            )
            .expect("written");
    }
    // A reader of the history ends each line at its last sample and stores it.
    let historian = std::sync::Arc::clone(runtime.plant().historian());
    let window = (at(0), at(10));
    tokio::task::spawn_blocking(move || {
        for (tag, kind) in [
            ("Pump1.StartCount", plant_model::TagType::Integer),
            ("Pump1.Mode", plant_model::TagType::String),
        ] {
            historian
                .tag_history(tag, kind, window.0, window.1, 100)
                .expect("reads");
        }
    })
    .await
    .expect("read");
    let since = rfc3339(at(0));
    let until = rfc3339(at(10));
    let export = |format: &str| {
        admin(
            &[
                "history",
                &path,
                "export",
                "--tag",
                "Pump1.StartCount",
                "--tag",
                "Pump1.Mode",
                "--since",
                &since,
                "--until",
                &until,
                "--format",
                format,
            ],
            "",
        )
    };
    let time = |second: u64| rfc3339(at(second));
    assert_eq!(
        export("csv"),
        format!(
            "time,tag,value,quality\n{},Pump1.StartCount,1300,Good\n{},Pump1.StartCount,1310,Good\n{},Pump1.StartCount,1305,Good\n\
             {},Pump1.Mode,Manual,Good\n{},Pump1.Mode,Off,Good\n",
            time(0),
            time(1),
            time(2),
            time(0),
            time(3)
        )
    );
    let lines: Vec<Value> = export("jsonl")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 5);
    assert_eq!(
        lines[4],
        json!({"time": time(3), "tag": "Pump1.Mode", "value": "Off", "quality": "Good"})
    );
    let unknown =
        try_admin(&["history", &path, "export", "--tag", "Pump1.StartCnt"], "").expect_err("refused");
    assert!(
        unknown.to_string().contains(
            "--tag \"Pump1.StartCnt\": the plant has no such tag (did you mean \"Pump1.StartCount\"?)"
        ),
        "{unknown}"
    );
    let backwards = try_admin(
        &["history", &path, "export", "--since", &until, "--until", &since],
        "",
    )
    .expect_err("refused");
    assert!(
        backwards.to_string().contains("--since is after --until"),
        "{backwards}"
    );
}

#[tokio::test]
async fn a_tag_with_a_retention_of_its_own_keeps_its_history_that_long() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8");
    let mut model = solution.plant_model();
    let level = model
        .tags
        .iter_mut()
        .find(|tag| tag.name == "Tank1.Level")
        .expect("the demo's tank");
    let plant_model::History::On(options) = &mut level.history else {
        panic!("Tank1.Level is recorded");
    };
    options.retention_hours = Some(3);
    let file = solution.path.with_file_name("site.toml");
    std::fs::write(&file, model.to_toml().expect("toml")).expect("writes");
    admin(&["plant", path, "import", file.to_str().expect("utf-8")], "");
    assert!(
        admin(&["plant", path, "export"], "").contains("retention_hours = 3"),
        "the tag's own retention is stored"
    );
    admin(&["settings", path, "set", "HistoryRetentionHours", "1"], "");
    let runtime = Runtime::open(&solution.path).expect("opens");
    runtime
        .seed_history(Duration::from_secs(4 * 3600), Duration::from_secs(60))
        .expect("seeds");
    let oldest = async |tag: &str| {
        let history = tool(
            &runtime,
            "runtime_get_tag_history",
            json!({"tag": tag, "minutes": 300, "max_samples": 1000}),
        )
        .await;
        let oldest = history["samples"][0]["time"].as_str().expect("a sample");
        let oldest = humantime::parse_rfc3339(oldest).expect("time");
        SystemTime::now().duration_since(oldest).expect("in the past")
    };
    let own = oldest("Tank1.Level").await;
    assert!(
        own > Duration::from_secs(2 * 3600 + 1800) && own <= Duration::from_secs(3 * 3600 + 60),
        "Tank1.Level keeps its 3 hours: its oldest sample is {own:?} old"
    );
    let other = oldest("Tank2.Level").await;
    assert!(
        other <= Duration::from_secs(3600 + 60),
        "Tank2.Level keeps the solution's hour: its oldest sample is {other:?} old"
    );
}
