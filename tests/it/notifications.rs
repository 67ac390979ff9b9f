//! Alarm notifications: a webhook that fails and recovers gets every event in order once it
//! answers, with its bearer token; an alarm left unacknowledged past its time to respond is
//! escalated once; a group of alarms clearing is one notification, not twelve; and over MQTT a
//! few events go each on its alarm's topic under the source's root, a group as one summary.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, StatusCode};
use plant::actions::{Actor, RequestedWrite, WriteTags};
use plant::tag_writes::GivenValue;
use serde_json::Value;
use store::Role;
use tokio_util::sync::CancellationToken;
use tserver::Runtime;
use tserver_tests::mosquitto::{Mosquitto, Publisher};

use crate::support::{PATIENCE, Solution, admin};

/// A local webhook: it answers HTTP 500 to its first `failing` requests, then 204, keeping
/// each body it accepted and the authorization it came with.
#[derive(Debug, Default)]
struct Hook {
    failing: AtomicUsize,
    refused: AtomicUsize,
    accepted: Mutex<Vec<(Value, String)>>,
}

impl Hook {
    async fn start(failing: usize) -> (String, Arc<Self>) {
        let hook = Arc::new(Self {
            failing: AtomicUsize::new(failing),
            ..Self::default()
        });
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post({
                let hook = Arc::clone(&hook);
                move |headers: HeaderMap, body: String| async move {
                    if hook
                        .failing
                        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| left.checked_sub(1))
                        .is_ok()
                    {
                        hook.refused.fetch_add(1, Ordering::SeqCst);
                        return StatusCode::INTERNAL_SERVER_ERROR;
                    }
                    let auth = headers
                        .get("authorization")
                        .and_then(|value| value.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    let body = serde_json::from_str(&body).expect("a JSON body");
                    hook.accepted.lock().expect("kept").push((body, auth));
                    StatusCode::NO_CONTENT
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let url = format!("http://{}/hook", listener.local_addr().expect("an address"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, hook)
    }

    /// Every event accepted so far, in order: (event, alarm).
    fn events(&self) -> Vec<(String, String)> {
        let accepted = self.accepted.lock().expect("kept");
        accepted
            .iter()
            .flat_map(|(body, _)| body["events"].as_array().cloned().unwrap_or_default())
            .map(|event| {
                (
                    event["event"].as_str().unwrap_or_default().to_owned(),
                    event["alarm"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }

    async fn until(&self, what: &str, done: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + PATIENCE;
        while !done(self) {
            assert!(Instant::now() < deadline, "{what}: got {:?}", self.events());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// Twelve tags, each with a Hi alarm at 80 (the first to be answered within a second).
fn plant(notification: &str, extra: &str) -> String {
    let mut text = String::from(extra);
    for index in 0..12 {
        let respond = if index == 0 { "time_to_respond = 1\n" } else { "" };
        text.push_str(&format!(
            "[[tags]]\nname = \"T{index:02}\"\npath = \"Plant/Area/T{index:02}\"\ntype = \"number\"\ninitial = 10.0\nwritable = true\n\n\
             [[alarms]]\nname = \"T{index:02}.Hi\"\ntag = \"T{index:02}\"\ncondition = \"Hi\"\nlimit = 80.0\npriority = 700\n{respond}\n"
        ));
    }
    text.push_str(notification);
    text
}

async fn set(runtime: &Runtime, tags: std::ops::Range<usize>, value: f64) {
    let writes = tags
        .map(|index| RequestedWrite {
            tag: format!("T{index:02}"),
            value: Ok(GivenValue::Number(value)),
        })
        .collect();
    let ops = Actor::User {
        name: "ops".into(),
        role: Role::Operator,
        connection: "notification-test".to_owned(),
        peer: "local".to_owned(),
    };
    runtime
        .act_now(ops, WriteTags::unsigned(writes))
        .await
        .expect("written");
}

/// The runtime of `solution` serving: its notifications and its background work (which
/// stores the history every second, and with it hands the events on).
async fn serving(solution: &Solution) -> (Runtime, CancellationToken) {
    let runtime = Runtime::open(&solution.path).expect("opens");
    let shutdown = CancellationToken::new();
    assert_eq!(runtime.start_notifications(&shutdown).await.expect("started"), 1);
    tokio::spawn({
        let (runtime, shutdown) = (runtime.clone(), shutdown.clone());
        async move { runtime.run_background(false, shutdown).await }
    });
    (runtime, shutdown)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_webhook_gets_every_event_once_it_recovers_and_a_group_clearing_is_one_post() {
    let (url, hook) = Hook::start(2).await;
    let notification = format!(
        "[[notifications]]\nname = \"control-room\"\nwebhook = \"{url}\"\ntoken = \"/secret:HookToken\"\n\
         events = [\"active\", \"cleared\", \"escalated\"]\nfolders = [\"Plant/Area\"]\n"
    );
    let solution = Solution::with_plant(&plant(&notification, ""));
    let path = solution.path.to_str().expect("utf-8");
    admin(&["secrets", path, "set", "HookToken"], "hook-token-1\n");
    let (runtime, shutdown) = serving(&solution).await;

    // The webhook refuses twice: the trip arrives once it answers, with the bearer token.
    set(&runtime, 0..1, 90.0).await;
    hook.until("the trip after the failures", |hook| {
        hook.events().contains(&("active".into(), "T00.Hi".into()))
    })
    .await;
    assert_eq!(
        hook.refused.load(Ordering::SeqCst),
        2,
        "refused twice, then delivered"
    );
    assert_eq!(hook.accepted.lock().expect("kept")[0].1, "Bearer hook-token-1");

    // Unacknowledged past its second to respond: escalated, once.
    hook.until("the escalation", |hook| {
        hook.events().contains(&("escalated".into(), "T00.Hi".into()))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let escalated = hook
        .events()
        .iter()
        .filter(|(event, _)| event == "escalated")
        .count();
    assert_eq!(escalated, 1, "one escalation per activation");

    // Eleven more trip in one write, then all twelve clear in one: one notification says so.
    set(&runtime, 1..12, 90.0).await;
    hook.until("the eleven trips", |hook| {
        hook.events()
            .iter()
            .filter(|(event, _)| event == "active")
            .count()
            == 12
    })
    .await;
    let posts_before = hook.accepted.lock().expect("kept").len();
    set(&runtime, 0..12, 10.0).await;
    hook.until("the twelve clears", |hook| {
        hook.events()
            .iter()
            .filter(|(event, _)| event == "cleared")
            .count()
            == 12
    })
    .await;
    let accepted = hook.accepted.lock().expect("kept").clone();
    assert_eq!(
        accepted.len(),
        posts_before + 1,
        "a group clearing is one notification"
    );
    let clearing = &accepted[posts_before].0;
    assert_eq!(
        (&clearing["count"], &clearing["summary"], &clearing["dropped"]),
        (
            &serde_json::json!(12),
            &serde_json::json!({"cleared": 12}),
            &serde_json::json!(0)
        )
    );

    // An import that points the notification elsewhere applies without a restart.
    let (moved, elsewhere) = Hook::start(0).await;
    let file = solution.path.with_file_name("moved.toml");
    let notification = format!("[[notifications]]\nname = \"control-room\"\nwebhook = \"{moved}\"\n");
    std::fs::write(&file, plant(&notification, "")).expect("writes the plant");
    admin(&["plant", path, "import", file.to_str().expect("utf-8")], "");
    let delivered_before = hook.events().len();
    let deadline = Instant::now() + PATIENCE;
    let mut level = 90.0;
    // Each trip after the reload goes to the new webhook; one before it, to the old.
    while !elsewhere.events().contains(&("active".into(), "T05.Hi".into())) {
        assert!(Instant::now() < deadline, "the moved notification never sent");
        set(&runtime, 5..6, level).await;
        set(&runtime, 5..6, 10.0).await;
        level += 1.0;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert!(
        hook.events()[delivered_before..]
            .iter()
            .all(|(event, alarm)| alarm == "T05.Hi" && (event == "active" || event == "cleared")),
        "the old webhook gets nothing else"
    );
    assert!(
        elsewhere.events().iter().all(|(event, _)| event == "active"),
        "the moved one sends its default events: {:?}",
        elsewhere.events()
    );
    shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_mqtt_a_few_events_go_on_their_alarms_topics_and_a_group_as_one_summary() {
    let broker = Mosquitto::start();
    let extra = format!(
        "[[sources]]\nname = \"site\"\nurl = \"{}\"\nroot = \"Riverside\"\n\n",
        broker.url()
    );
    let notification = "[[notifications]]\nname = \"uns\"\nmqtt = \"site\"\nevents = [\"active\", \"cleared\"]\nmin_priority = 500\n";
    let solution = Solution::with_plant(&plant(notification, &extra));
    let mut field = Publisher::connect(broker.port).await;
    field.subscribe("Riverside/alarms/#").await;
    let (runtime, shutdown) = serving(&solution).await;

    set(&runtime, 0..1, 90.0).await;
    let (topic, payload) = tokio::time::timeout(PATIENCE, field.next())
        .await
        .expect("the trip is published");
    let event: Value = serde_json::from_slice(&payload).expect("JSON");
    assert_eq!(topic, "Riverside/alarms/T00.Hi");
    assert_eq!(
        (&event["event"], &event["notification"], &event["priority"]),
        (
            &serde_json::json!("active"),
            &serde_json::json!("uns"),
            &serde_json::json!(700)
        )
    );

    set(&runtime, 1..9, 90.0).await;
    let (topic, payload) = tokio::time::timeout(PATIENCE, field.next())
        .await
        .expect("the group is published");
    let group: Value = serde_json::from_slice(&payload).expect("JSON");
    assert_eq!(topic, "Riverside/alarms", "eight at once: one summary");
    assert_eq!(
        (&group["count"], &group["summary"]),
        (&serde_json::json!(8), &serde_json::json!({"active": 8}))
    );
    shutdown.cancel();
}
