//! The historian's answers over the wire on a real server with the demo plant: raw pages to
//! the window's end, aggregates per interval, many tags at an instant and the refusals of each,
//! and the same through `tclient` and the assistant's history tool.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use plant_model::{Quality, TagValue};
use serde_json::{Value, json};
use service_client::{HistoryCursor, HistoryShape, HistoryValue, StateValue, TagHistoryRequest};
use tokio_util::sync::CancellationToken;
use tserver::ServerConfig;

use crate::panel_calls::{assert_invalid, ms};
use crate::support::{Solution, TestServer};
use crate::tclient::tclient;

/// A whole minute three hours ago, before the demo's seeded history (its last 2 hours), so
/// what a test writes after it is all its window holds.
fn before_the_seeded_history() -> SystemTime {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970");
    UNIX_EPOCH + Duration::from_secs((now.as_secs() - 3 * 3600) / 60 * 60)
}

fn write(server: &TestServer, tag: &str, value: TagValue, time: SystemTime) {
    server
        .runtime
        .plant()
        .write_at(tag, value, Quality::GOOD, time)
        .expect("written");
}

/// Tank1.Level zigzags 0, 100, 0... every 10 s for ten minutes (each sample far past the
/// deviation, so each is stored), then 0 once more at 10 minutes; Pump1.Running turns every
/// 30 s.
fn zigzag(server: &TestServer, start: SystemTime) {
    for step in 0..=60_u32 {
        let value = if step % 2 == 1 { 100.0 } else { 0.0 };
        write(
            server,
            "Tank1.Level",
            TagValue::Number(value),
            start + Duration::from_secs(10 * u64::from(step)),
        );
    }
    for step in 0..20_u32 {
        write(
            server,
            "Pump1.Running",
            TagValue::Bool(step % 2 == 0),
            start + Duration::from_secs(30 * u64::from(step)),
        );
    }
}

#[tokio::test]
async fn raw_pages_intervals_and_values_at_an_instant_over_the_wire() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let start = before_the_seeded_history();
    zigzag(&server, start);
    let client = server.guest().await;
    let window = TagHistoryRequest {
        name: "Tank1.Level".to_owned(),
        since_ms: ms(start),
        until_ms: ms(start + Duration::from_secs(599)),
        ..TagHistoryRequest::default()
    };

    // Raw: pages of 7 until the cursor says the window is done.
    let (mut values, mut pages, mut after) = (Vec::new(), 0, None::<HistoryCursor>);
    loop {
        let page = client
            .tag_history(TagHistoryRequest {
                shape: HistoryShape::Raw.into(),
                max_samples: 7,
                after,
                ..window.clone()
            })
            .await
            .expect("a page");
        assert!(!page.truncated, "a raw page is never thinned");
        assert!(page.samples.len() <= 7);
        pages += 1;
        values.extend(page.samples.iter().map(|sample| match sample.value {
            Some(HistoryValue::Number(value)) => value,
            ref other => panic!("a number, not {other:?}"),
        }));
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
        assert!(pages < 20, "the pages end");
    }
    let expected: Vec<f64> = (0..60)
        .map(|step| if step % 2 == 1 { 100.0 } else { 0.0 })
        .collect();
    assert_eq!(values, expected, "every sample once, oldest first");
    assert_eq!(pages, 9);

    // Intervals of a minute: each holds six samples, 0 and 100, and the line between them
    // averages 50, the last one's last line going to the sample after the window.
    let minutes = client
        .tag_history(TagHistoryRequest {
            shape: HistoryShape::Intervals.into(),
            interval_ms: 60_000,
            until_ms: ms(start + Duration::from_secs(600)) - 1,
            ..window.clone()
        })
        .await
        .expect("intervals");
    assert_eq!(minutes.intervals.len(), 10);
    assert!(!minutes.truncated);
    for (index, interval) in (0..).zip(&minutes.intervals) {
        assert_eq!(interval.start_ms, ms(start) + index * 60_000);
        assert_eq!(interval.end_ms, interval.start_ms + 60_000);
        assert_eq!(interval.count, 6);
        assert_eq!(interval.good_ms, 60_000);
        let average = interval.average.expect("an average");
        assert!((average - 50.0).abs() < 1e-9, "{average}");
        let value = |sample: &Option<service_client::HistorySample>| match sample
            .as_ref()
            .and_then(|sample| sample.value.clone())
        {
            Some(HistoryValue::Number(value)) => value,
            other => panic!("a number, not {other:?}"),
        };
        assert_eq!((value(&interval.min), value(&interval.max)), (0.0, 100.0));
        assert_eq!((value(&interval.first), value(&interval.last)), (0.0, 100.0));
        assert!(interval.states.is_empty(), "a number has no states");
    }
    let running = client
        .tag_history(TagHistoryRequest {
            name: "Pump1.Running".to_owned(),
            shape: HistoryShape::Intervals.into(),
            interval_ms: 120_000,
            until_ms: ms(start + Duration::from_secs(600)) - 1,
            ..window.clone()
        })
        .await
        .expect("intervals");
    assert_eq!(running.intervals.len(), 5);
    for interval in &running.intervals {
        let held: Vec<(bool, i64)> = interval
            .states
            .iter()
            .map(|state| match state.value {
                Some(StateValue::Boolean(value)) => (value, state.duration_ms),
                ref other => panic!("a boolean, not {other:?}"),
            })
            .collect();
        assert_eq!(held, [(true, 60_000), (false, 60_000)]);
        assert_eq!(interval.average, Some(0.5));
    }

    // Many tags at an instant: 15 s in, Tank1.Level last read 100 (at 10 s) and the pump ran.
    let at = client
        .tag_values_at(
            &["Tank1.Level".to_owned(), "Plant/Area1/Pump1/Running".to_owned()],
            ms(start + Duration::from_secs(15)),
        )
        .await
        .expect("values at");
    assert_eq!(at.values.len(), 2);
    assert_eq!(at.values[0].name, "Tank1.Level");
    let level = at.values[0].sample.as_ref().expect("a sample");
    assert_eq!(level.value, Some(HistoryValue::Number(100.0)));
    assert_eq!(level.timestamp_ms, ms(start + Duration::from_secs(10)));
    assert_eq!(at.values[1].name, "Pump1.Running");
    assert_eq!(
        at.values[1]
            .sample
            .as_ref()
            .and_then(|sample| sample.value.clone()),
        Some(HistoryValue::Boolean(true))
    );
    let long_ago = client
        .tag_values_at(&["Tank1.Level".to_owned()], 1_000)
        .await
        .expect("values at");
    assert!(long_ago.values[0].sample.is_none(), "nothing recorded by then");

    // Each shape takes its own fields only, and says what is wrong.
    let refusals = [
        (
            TagHistoryRequest {
                after: Some(HistoryCursor { time_ms: 1, skip: 0 }),
                ..window.clone()
            },
            "`after` is for HISTORY_SHAPE_RAW",
        ),
        (
            TagHistoryRequest {
                interval_ms: 1_000,
                ..window.clone()
            },
            "interval_ms is for HISTORY_SHAPE_INTERVALS",
        ),
        (
            TagHistoryRequest {
                shape: HistoryShape::Intervals.into(),
                ..window.clone()
            },
            "interval_ms 0 must be positive",
        ),
        (
            TagHistoryRequest {
                shape: HistoryShape::Intervals.into(),
                interval_ms: 10,
                ..window.clone()
            },
            "into 59900 intervals, more than 10000",
        ),
        (
            TagHistoryRequest {
                shape: 7,
                ..window.clone()
            },
            "shape 7 is not a history shape",
        ),
        (
            TagHistoryRequest {
                shape: HistoryShape::Raw.into(),
                max_samples: 10_001,
                ..window.clone()
            },
            "max_samples 10001",
        ),
    ];
    for (request, naming) in refusals {
        let error = client.tag_history(request).await.expect_err("refused");
        assert_invalid(&error, naming);
    }
    let unknown = client
        .tag_values_at(&["Tank1.Level".to_owned(), "Tank9.Level".to_owned()], 0)
        .await
        .expect_err("no such tag");
    assert_invalid(&unknown, "names[1]: no tag named \"Tank9.Level\"");
    let none = client.tag_values_at(&[], 0).await.expect_err("no names");
    assert_invalid(&none, "0 names given");
    let many: Vec<String> = (0..1_001).map(|_| "Tank1.Level".to_owned()).collect();
    let too_many = client.tag_values_at(&many, 0).await.expect_err("too many");
    assert_invalid(&too_many, "1001 names given");
    let before_1970 = client
        .tag_values_at(&["Tank1.Level".to_owned()], -1)
        .await
        .expect_err("before 1970");
    assert_invalid(&before_1970, "at_ms -1");
    client.ping().await.expect("the connection stays usable");

    // tclient: aggregates as CSV, every sample, and an instant.
    let addr = server.addr.to_string();
    let since = humantime::format_rfc3339_millis(start).to_string();
    let until = humantime::format_rfc3339_millis(start + Duration::from_secs(600) - Duration::from_millis(1))
        .to_string();
    // `tags history Tank1.Level` over the window, as CSV, with `shape`'s arguments.
    let history_csv = async |shape: &[&str]| {
        let mut args = vec![
            "--addr",
            &addr,
            "tags",
            "history",
            "Tank1.Level",
            "--since",
            &since,
            "--until",
            &until,
        ];
        args.extend(shape);
        args.push("--csv");
        tclient(&args, "", false)
            .await
            .expect("tclient prints the history")
    };
    let csv = history_csv(&["--interval", "2m", "--aggregate", "avg,max,count"]).await;
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], "start,end,avg,max,count");
    assert_eq!(lines.len(), 6, "{csv}");
    assert!(lines[1].ends_with(",50,100,12"), "{csv}");
    let raw = history_csv(&["--raw", "--max-samples", "8"]).await;
    assert_eq!(
        raw.lines().count(),
        1 + 60,
        "a header and every sample, over 8 pages: {raw}"
    );
    let instant = humantime::format_rfc3339_millis(start + Duration::from_secs(15)).to_string();
    let at = tclient(
        &[
            "--addr",
            &addr,
            "tags",
            "at",
            &instant,
            "Tank1.Level",
            "Pump1.Running",
        ],
        "",
        false,
    )
    .await
    .expect("tclient prints the values");
    assert!(at.contains("Tank1.Level = 100 Good (recorded "), "{at}");
    assert!(at.contains("Pump1.Running = true Good"), "{at}");

    // The assistant's tool: per-minute aggregates.
    let answered = client
        .call_tool(
            "runtime_get_tag_history",
            &json!({"tag": "Tank1.Level", "start": since, "end": until, "interval_minutes": 1}),
        )
        .await
        .expect("the tool answers");
    assert!(!answered.is_error, "{}", answered.content_json);
    let content: Value = serde_json::from_str(&answered.content_json).expect("JSON");
    let intervals = content["result"]["intervals"].as_array().expect("intervals");
    assert_eq!(intervals.len(), 10, "{content}");
    assert_eq!(intervals[0]["count"], json!(6));
    assert!((intervals[0]["average"].as_f64().expect("a number") - 50.0).abs() < 1e-9);
    assert_eq!(intervals[0]["max"]["value"], json!(100.0));
    let refused = client
        .call_tool(
            "runtime_get_tag_history",
            &json!({"tag": "Tank1.Level", "minutes": 525_600, "interval_minutes": 1}),
        )
        .await
        .expect("answered");
    assert!(refused.is_error);
    assert!(
        refused.content_json.contains("more than 400"),
        "{}",
        refused.content_json
    );
    server.stop().await;
}

/// A tag nothing writes (the demo's Pump2.Running, the simulator off) is recorded at the value
/// it starts with, by the runtime's first flush, and a later window with no sample of it opens
/// with that value: its trend is a flat line, not "nothing recorded".
#[tokio::test]
async fn a_tag_nothing_writes_keeps_its_value_in_history() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let stop = CancellationToken::new();
    let background = tokio::spawn({
        let (runtime, stop) = (server.runtime.clone(), stop.clone());
        async move { runtime.run_background_with(Some(false), stop).await }
    });
    let held = server
        .runtime
        .plant()
        .objects()
        .tag("Pump2.Running")
        .expect("a demo tag")
        .current();
    let value = Some(HistoryValue::Boolean(held.value == TagValue::Bool(true)));
    let client = server.guest().await;
    let since_start = TagHistoryRequest {
        name: "Pump2.Running".to_owned(),
        since_ms: ms(held.timestamp),
        ..TagHistoryRequest::default()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let recorded = loop {
        let reply = client.tag_history(since_start.clone()).await.expect("a trend");
        if let Some(sample) = reply.samples.first() {
            break sample.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the tag's value is recorded by the first flush"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(recorded.timestamp_ms, ms(held.timestamp));
    assert_eq!(recorded.value, value);

    let later = client
        .tag_history(TagHistoryRequest {
            since_ms: ms(held.timestamp) + 1,
            ..since_start
        })
        .await
        .expect("a trend");
    assert!(later.samples.is_empty(), "{:?}", later.samples);
    let opening = later.opening.expect("the window opens with the value held");
    assert_eq!((opening.timestamp_ms, opening.value), (ms(held.timestamp), value));
    stop.cancel();
    background.await.expect("the background ends");
}
