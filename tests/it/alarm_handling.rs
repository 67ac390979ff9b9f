//! Shelving and service through the acting path: an operator shelves an alarm (active or not)
//! for at most `ShelvingMaxHours` with a reason, and unshelves it; an admin takes an alarm out
//! of service and puts it back; each is one audit row before it takes effect, a refusal for
//! the role too; an alarm marked `signed` takes the actor's signature to be shelved; the
//! alarm history records each change of handling.

use std::time::{Duration, SystemTime};

use plant::actions::{
    ActError, Actor, GivenSignature, Meaning, RemoveFromService, RequestedWrite, ReturnToService,
    ServiceScope, ShelveAlarm, UnshelveAlarm, WriteTags,
};
use plant::tag_writes::GivenValue;
use plant_model::AlarmEventKind;
use store::Role;
use tserver::Runtime;

use crate::support::{Solution, admin, alarm_label};

const PLANT: &str = r#"
[[tags]]
name = "T"
path = "P/T"
type = "number"
initial = 10.0
writable = true

[[alarms]]
name = "T.Hi"
tag = "T"
condition = "Hi"
limit = 80.0

[[alarms]]
name = "T.HiHi"
tag = "T"
condition = "HiHi"
limit = 95.0
priority = 900
signed = true
"#;

/// A solution with the plant above and an operator with a password.
fn solution() -> Solution {
    let solution = Solution::with_plant(PLANT);
    solution.add_user("ops", "operator", "ops-pw");
    solution
}

fn user(name: &str, role: Role) -> Actor {
    Actor::User {
        name: name.into(),
        role,
        connection: "handling-test".to_owned(),
        peer: "local".to_owned(),
    }
}

fn shelve(alarm: &str, hours: u64, reason: &str) -> ShelveAlarm {
    ShelveAlarm {
        alarm: alarm.to_owned(),
        duration: Duration::from_secs(hours * 3600),
        reason: reason.to_owned(),
        signatures: Vec::new(),
    }
}

async fn set(runtime: &Runtime, value: f64) {
    let write = WriteTags::unsigned(vec![RequestedWrite {
        tag: "T".to_owned(),
        value: Ok(GivenValue::Number(value)),
    }]);
    runtime
        .act_now(user("ops", Role::Operator), write)
        .await
        .expect("written");
}

async fn last_row(runtime: &Runtime) -> store::AuditEntry {
    let rows = runtime.store().audit(None, 10_000).await.expect("reads");
    rows.last().cloned().expect("a row")
}

#[tokio::test]
async fn an_operator_shelves_and_unshelves_and_an_admin_takes_out_of_service_each_audited_first() {
    let solution = solution();
    let runtime = Runtime::open(&solution.path).expect("opens");
    let ops = user("ops", Role::Operator);

    // Shelved ahead of maintenance, while normal.
    let before = SystemTime::now();
    let until = runtime
        .act_now(ops.clone(), shelve("T.Hi", 2, "  transmitter replaced  "))
        .await
        .expect("shelved");
    assert!(
        until >= before + Duration::from_secs(7200) && until <= SystemTime::now() + Duration::from_secs(7200)
    );
    let row = last_row(&runtime).await;
    assert_eq!(
        (
            row.action,
            row.target.as_str(),
            row.new_value.as_deref(),
            row.outcome.as_str()
        ),
        (
            store::AuditAction::Shelve,
            "T.Hi",
            Some("for 2 h: transmitter replaced"),
            "ok"
        )
    );
    assert_eq!(alarm_label(&runtime, "T.Hi"), "shelved");

    // Evaluated while shelved, not annunciated; the assistant is told who shelved it and why;
    // unshelved, it asks for an acknowledgement.
    set(&runtime, 90.0).await;
    assert_eq!(alarm_label(&runtime, "T.Hi"), "shelved");
    let tool = runtime
        .tools()
        .get("runtime_get_active_alarms")
        .expect("the alarm tool");
    let caller = localai::tools::ToolCaller::Script {
        script: "Check".into(),
    };
    let listed = tool
        .call(serde_json::json!({}), caller, localai::tools::TOOL_TIMEOUT)
        .await
        .expect("lists")
        .result;
    let entry = &listed["alarms"][0];
    assert_eq!(
        (
            &entry["name"],
            &entry["shelved"]["by"],
            &entry["shelved"]["reason"]
        ),
        (
            &serde_json::json!("T.Hi"),
            &serde_json::json!("ops"),
            &serde_json::json!("transmitter replaced")
        )
    );
    let folder = runtime
        .tools()
        .get("runtime_describe_object")
        .expect("the describing tool")
        .call(
            serde_json::json!({"path": "P"}),
            localai::tools::ToolCaller::Script {
                script: "Check".into(),
            },
            localai::tools::TOOL_TIMEOUT,
        )
        .await
        .expect("describes")
        .result;
    assert_eq!(
        folder["activeAlarms"],
        serde_json::json!([{"name": "T.Hi", "state": "shelved"}]),
        "a folder's summary says the alarm is shelved, not just active"
    );
    assert!(
        runtime
            .act_now(ops.clone(), UnshelveAlarm { alarm: "T.Hi".into() })
            .await
            .expect("unshelved")
    );
    assert_eq!(alarm_label(&runtime, "T.Hi"), "active");
    assert!(
        !runtime
            .act_now(ops.clone(), UnshelveAlarm { alarm: "T.Hi".into() })
            .await
            .expect("answers"),
        "once"
    );

    // Bounds, said before anything is audited.
    let rows = runtime.store().audit(None, 10_000).await.expect("reads").len();
    let too_long = runtime.act_now(ops.clone(), shelve("T.Hi", 25, "long job")).await;
    assert_eq!(
        too_long,
        Err(ActError::Invalid(
            "duration: shelve for 1 minute to 24 h (ShelvingMaxHours)".into()
        ))
    );
    let unsaid = runtime.act_now(ops.clone(), shelve("T.Hi", 1, " ")).await;
    assert!(matches!(unsaid, Err(ActError::Invalid(message)) if message.starts_with("reason: say why")));
    let unknown = runtime.act_now(ops.clone(), shelve("T.Lo", 1, "r")).await;
    assert_eq!(unknown, Err(ActError::Invalid("no alarm named \"T.Lo\"".into())));
    assert_eq!(
        runtime.store().audit(None, 10_000).await.expect("reads").len(),
        rows
    );

    // A viewer may not shelve, an operator may not take out of service: audited refusals.
    let refused = runtime
        .act_now(user("watcher", Role::Viewer), shelve("T.Hi", 1, "r"))
        .await
        .expect_err("a viewer");
    assert_eq!(
        refused.to_string(),
        "a viewer may not shelve alarms; an admin can make the user an operator"
    );
    assert_eq!(last_row(&runtime).await.outcome, "permission denied");
    let out = RemoveFromService {
        alarms: ServiceScope::Alarm("T.Hi".into()),
        reason: "instrument removed".into(),
        signatures: Vec::new(),
    };
    let refused = runtime
        .act_now(ops.clone(), out.clone())
        .await
        .expect_err("an operator");
    assert_eq!(
        refused.to_string(),
        "an operator may not take alarms out of service; an admin can make the user an admin"
    );
    assert_eq!(alarm_label(&runtime, "T.Hi"), "active");

    // An admin takes it out of service; it cannot be shelved then; back in service, it
    // annunciates again.
    let boss = user("boss", Role::Admin);
    assert_eq!(
        runtime.act_now(boss.clone(), out).await.expect("out of service"),
        1
    );
    assert_eq!(alarm_label(&runtime, "T.Hi"), "out-of-service");
    let row = last_row(&runtime).await;
    assert_eq!(
        (row.action, row.new_value.as_deref()),
        (store::AuditAction::RemoveFromService, Some("instrument removed"))
    );
    let shelved = runtime.act_now(ops.clone(), shelve("T.Hi", 1, "r")).await;
    assert_eq!(
        shelved,
        Err(ActError::Invalid(
            "T.Hi is out of service: put it back in service before shelving it".into()
        ))
    );
    let back = ReturnToService {
        alarms: ServiceScope::Alarm("T.Hi".into()),
    };
    assert_eq!(runtime.act_now(boss, back).await.expect("back"), 1);
    assert_eq!(alarm_label(&runtime, "T.Hi"), "active");

    // The alarm history has each change of handling, by whom.
    runtime.plant().historian().flush().expect("flushes");
    let page = runtime
        .store()
        .alarm_history_blocking(
            Some("T"),
            (before - Duration::from_secs(1), SystemTime::now()),
            100,
        )
        .expect("reads");
    let mut handled: Vec<_> = page
        .events
        .iter()
        .filter(|event| event.alarm == "T.Hi")
        .map(|event| (event.kind, event.user.clone().unwrap_or_default()))
        .collect();
    handled.reverse();
    assert_eq!(
        handled,
        [
            (AlarmEventKind::Shelved, "ops".to_owned()),
            (AlarmEventKind::Active, String::new()),
            (AlarmEventKind::Unshelved, "ops".to_owned()),
            (AlarmEventKind::OutOfService, "boss".to_owned()),
            (AlarmEventKind::InService, "boss".to_owned()),
        ]
    );
    // The audit still verifies with the new actions in its chain.
    drop(runtime);
    assert!(
        admin(&["audit", solution.path.to_str().expect("utf-8"), "verify"], "")
            .starts_with("the audit trail verifies")
    );
}

#[tokio::test]
async fn a_signed_alarm_is_shelved_only_with_the_shelvers_signature() {
    let solution = solution();
    let runtime = Runtime::open(&solution.path).expect("opens");
    let ops = user("ops", Role::Operator);
    let refused = runtime
        .act_now(ops.clone(), shelve("T.HiHi", 1, "test of the trip"))
        .await
        .expect_err("unsigned");
    assert_eq!(
        refused,
        ActError::SignatureRequired(
            "shelving T.HiHi takes your electronic signature: yours is missing; sign with your password and the meaning (approved, performed or reviewed)".into()
        )
    );
    let signed = ShelveAlarm {
        signatures: vec![GivenSignature {
            user: "ops".into(),
            password: localai::secrets::SecretValue::new("ops-pw".to_owned()),
            meaning: Meaning::Performed,
        }],
        ..shelve("T.HiHi", 1, "test of the trip")
    };
    runtime.act_now(ops, signed).await.expect("shelved");
    let row = last_row(&runtime).await;
    assert!(
        row.signatures
            .as_deref()
            .is_some_and(|signed| signed.starts_with("ops (performed, ")),
        "{row:?}"
    );
    assert_eq!(alarm_label(&runtime, "T.HiHi"), "shelved");
}

#[tokio::test]
async fn a_shelving_runs_out_by_itself_audited_and_the_alarm_annunciates_again() {
    let solution = solution();
    let runtime = Runtime::open(&solution.path).expect("opens");
    let ops = user("ops", Role::Operator);
    set(&runtime, 90.0).await;
    let until = runtime
        .act_now(ops, shelve("T.Hi", 1, "flushing the line"))
        .await
        .expect("shelved");
    runtime.expire_shelvings(until - Duration::from_secs(1)).await;
    assert_eq!(alarm_label(&runtime, "T.Hi"), "shelved", "not before its time");
    runtime.expire_shelvings(until).await;
    assert_eq!(
        alarm_label(&runtime, "T.Hi"),
        "active",
        "still in alarm: annunciated again"
    );
    let row = last_row(&runtime).await;
    assert_eq!(
        (
            row.user.as_str(),
            row.action,
            row.target.as_str(),
            row.outcome.as_str()
        ),
        (
            "runtime",
            store::AuditAction::Unshelve,
            "T.Hi",
            "ok: the shelving by ops ran out"
        )
    );
    runtime.plant().historian().flush().expect("flushes");
    let page = runtime
        .store()
        .alarm_history_blocking(
            Some("T"),
            (SystemTime::UNIX_EPOCH, until + Duration::from_secs(1)),
            10,
        )
        .expect("reads");
    let newest = &page.events[0];
    assert_eq!(
        (newest.kind, newest.user.as_deref()),
        (AlarmEventKind::ShelvingExpired, Some("ops"))
    );
}

#[tokio::test]
async fn shelving_and_service_outlive_a_restart_and_the_historys_retention() {
    let solution = solution();
    let runtime = Runtime::open(&solution.path).expect("opens");
    let ops = user("ops", Role::Operator);
    let until = runtime
        .act_now(ops, shelve("T.Hi", 3, "valve repacked"))
        .await
        .expect("shelved");
    let out = RemoveFromService {
        alarms: ServiceScope::Alarm("T.HiHi".into()),
        reason: "switch replaced".into(),
        signatures: vec![GivenSignature {
            user: "boss".into(),
            password: localai::secrets::SecretValue::new("boss-pw".to_owned()),
            meaning: Meaning::Performed,
        }],
    };
    admin(
        &[
            "users",
            solution.path.to_str().expect("utf-8"),
            "add",
            "boss",
            "--role",
            "admin",
        ],
        "boss-pw\n",
    );
    assert_eq!(
        runtime
            .act_now(user("boss", Role::Admin), out)
            .await
            .expect("out of service"),
        1
    );
    runtime.plant().historian().flush().expect("flushes");
    // The history's retention passes over both events; what is kept apart stays.
    let past_them = store::HistoryLimits {
        keep_after: SystemTime::now() + Duration::from_secs(60),
        ..store::HistoryLimits::NONE
    };
    runtime
        .store()
        .write_history_blocking(&[], &[], &past_them)
        .expect("prunes");
    let window = (
        SystemTime::UNIX_EPOCH,
        SystemTime::now() + Duration::from_secs(60),
    );
    let left = runtime
        .store()
        .alarm_history_blocking(None, window, 10)
        .expect("reads");
    assert_eq!(left.total, 0, "the history kept none of it");
    drop(runtime);

    let runtime = Runtime::open(&solution.path).expect("opens again");
    let alarm = |name: &str| {
        runtime
            .objects()
            .alarms()
            .iter()
            .find(|known| known.definition().name == name)
            .expect("the alarm")
            .status()
    };
    let shelved = alarm("T.Hi").handling.shelved.expect("still shelved");
    assert_eq!(
        (shelved.by.as_str(), shelved.reason.as_str()),
        ("ops", "valve repacked")
    );
    let millis = |time: SystemTime| {
        time.duration_since(SystemTime::UNIX_EPOCH)
            .expect("after")
            .as_millis()
    };
    assert_eq!(millis(shelved.until), millis(until), "until the same millisecond");
    let out = alarm("T.HiHi")
        .handling
        .out_of_service
        .expect("still out of service");
    assert_eq!(
        (out.by.as_str(), out.reason.as_str()),
        ("boss", "switch replaced")
    );

    // Its time up while the server was down, the shelving ends at the first look.
    runtime.expire_shelvings(until).await;
    assert_eq!(alarm_label(&runtime, "T.Hi"), "normal");
    runtime.plant().historian().flush().expect("flushes");
    drop(runtime);
    let runtime = Runtime::open(&solution.path).expect("opens a third time");
    assert_eq!(
        alarm_label(&runtime, "T.Hi"),
        "normal",
        "the ended shelving is not taken up"
    );
    assert_eq!(alarm_label(&runtime, "T.HiHi"), "out-of-service");
}

#[tokio::test]
async fn tclient_shelves_lists_and_takes_out_of_service_over_the_wire() {
    let solution = solution();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    admin(&["users", &path, "add", "boss", "--role", "admin"], "boss-pw\n");
    let server = crate::support::TestServer::start(&solution.path, tserver::ServerConfig::default()).await;
    set(&server.runtime, 90.0).await;
    let addr = server.addr.to_string();
    let as_user = |user: &'static str| {
        let addr = addr.clone();
        move |args: &'static [&'static str]| {
            let addr = addr.clone();
            async move {
                let login = ["--addr", addr.as_str(), "--user", user, "--password-stdin"];
                crate::tclient::tclient(&[&login[..], args].concat(), &format!("{user}-pw\n"), false).await
            }
        }
    };
    let (ops, boss) = (as_user("ops"), as_user("boss"));

    let shelved = ops(&[
        "alarms",
        "shelve",
        "T.Hi",
        "--for",
        "90min",
        "--reason",
        "pump swap",
    ])
    .await
    .expect("shelved");
    assert!(shelved.starts_with("shelved T.Hi until "), "{shelved}");
    let listed = ops(&["alarms", "list"]).await.expect("lists");
    assert!(
        listed.starts_with(
            "no alarms\nshelved or out of service (not annunciated):\n  T.Hi shelved by ops until "
        ) && listed.contains(" (in alarm: active): pump swap\n"),
        "{listed}"
    );
    let too_long = ops(&["alarms", "shelve", "T.Hi", "--for", "2d", "--reason", "r"])
        .await
        .expect_err("past ShelvingMaxHours");
    assert!(
        too_long
            .to_string()
            .contains("duration: shelve for 1 minute to 24 h (ShelvingMaxHours)"),
        "{too_long}"
    );
    assert_eq!(
        ops(&["alarms", "unshelve", "T.Hi"]).await.expect("unshelved"),
        "unshelved T.Hi\n"
    );
    assert_eq!(
        ops(&["alarms", "unshelve", "T.Hi"]).await.expect("answers"),
        "T.Hi was not shelved\n"
    );

    let refused = ops(&["alarms", "out-of-service", "T.Hi", "--reason", "r"])
        .await
        .expect_err("an operator");
    assert!(
        refused
            .to_string()
            .contains("an operator may not take alarms out of service"),
        "{refused}"
    );
    // A signed alarm's removal is signed at the prompt: the login's password, then the signature's.
    let login = ["--addr", addr.as_str(), "--user", "boss", "--password-stdin"];
    let out = crate::tclient::tclient(
        &[
            &login[..],
            &[
                "alarms",
                "out-of-service",
                "T.HiHi",
                "--reason",
                "switch replaced",
            ],
        ]
        .concat(),
        "boss-pw\nboss-pw\n",
        false,
    )
    .await
    .expect("taken out of service");
    assert!(
        out.contains("taking out of service T.HiHi takes your electronic signature")
            && out.ends_with("took T.HiHi out of service\n"),
        "{out}"
    );
    assert_eq!(
        boss(&["alarms", "in-service", "T.HiHi"]).await.expect("back"),
        "put T.HiHi back in service\n"
    );
    // A whole folder at once: only T.Hi is in service below P now.
    let folder = crate::tclient::tclient(
        &[
            &login[..],
            &[
                "alarms",
                "out-of-service",
                "--folder",
                "P",
                "--reason",
                "loop check",
            ],
        ]
        .concat(),
        "boss-pw\nboss-pw\n",
        false,
    )
    .await
    .expect("taken out of service");
    assert!(
        folder.ends_with("took 2 alarms below P out of service\n"),
        "{folder}"
    );
    assert_eq!(
        boss(&["alarms", "in-service", "--folder", "P"])
            .await
            .expect("back"),
        "put 2 alarms below P back in service\n"
    );
    let both = boss(&["alarms", "in-service", "T.Hi", "--folder", "P"])
        .await
        .expect_err("one or the other");
    assert!(both.to_string().contains("cannot be used with"), "{both}");
    server.stop().await;
    let trail = admin(&["audit", &path], "");
    for line in [
        "shelve T.Hi by ops",
        "unshelve T.Hi by ops",
        "out-of-service T.Hi by ops",
        "out-of-service T.HiHi by boss",
        "in-service T.HiHi by boss",
    ] {
        assert!(trail.contains(line), "{line:?} in {trail}");
    }
}

#[tokio::test]
async fn an_alarm_with_an_on_delay_activates_only_once_its_condition_held_that_long() {
    let solution = Solution::with_plant(&PLANT.replace("limit = 80.0\n", "limit = 80.0\non_delay = 1\n"));
    let runtime = Runtime::open(&solution.path).expect("opens");
    let shutdown = tokio_util::sync::CancellationToken::new();
    let background = tokio::spawn({
        let (runtime, shutdown) = (runtime.clone(), shutdown.clone());
        async move { runtime.run_background(false, shutdown).await }
    });
    set(&runtime, 90.0).await;
    assert_eq!(alarm_label(&runtime, "T.Hi"), "normal", "waiting out its delay");
    // The background work carries it out once the second has passed.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while alarm_label(&runtime, "T.Hi") != "active" {
        assert!(std::time::Instant::now() < deadline, "the delay never ran out");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    shutdown.cancel();
    background.await.expect("the background work ends");
}

#[tokio::test]
async fn an_alarm_tripping_three_times_within_a_minute_is_listed_as_chattering() {
    let solution = solution();
    let server = crate::support::TestServer::start(&solution.path, tserver::ServerConfig::default()).await;
    for _ in 0..3 {
        set(&server.runtime, 90.0).await;
        set(&server.runtime, 10.0).await;
    }
    let client = server.client().await;
    client.login("ops", "ops-pw").await.expect("logs in");
    let reply = client
        .alarms(service_client::AlarmsRequest::default())
        .await
        .expect("lists");
    let detail = reply
        .active
        .iter()
        .find(|alarm| alarm.name == "T.Hi")
        .expect("cleared, unacknowledged: listed");
    assert_eq!((detail.chattering, detail.chatter_episodes), (true, 1));
    server.stop().await;
}

#[tokio::test]
async fn an_admin_takes_an_equipments_alarms_out_of_service_as_one_signed_act() {
    let plant = format!(
        "{PLANT}
[[tags]]
name = \"U\"
path = \"Q/U\"
type = \"number\"
initial = 10.0

[[alarms]]
name = \"U.Hi\"
tag = \"U\"
condition = \"Hi\"
limit = 80.0
"
    );
    let solution = Solution::with_plant(&plant);
    solution.add_user("boss", "admin", "boss-pw");
    let runtime = Runtime::open(&solution.path).expect("opens");
    let boss = user("boss", Role::Admin);
    let out = |signatures: Vec<GivenSignature>| RemoveFromService {
        alarms: ServiceScope::Folder("p".into()),
        reason: "transmitter replaced".into(),
        signatures,
    };

    // One of its alarms is signed: the whole act takes the admin's one signature.
    let refused = runtime
        .act_now(boss.clone(), out(Vec::new()))
        .await
        .expect_err("unsigned");
    assert!(
        refused
            .to_string()
            .starts_with("taking out of service 2 alarms below P takes your electronic signature"),
        "{refused}"
    );
    let signature = GivenSignature {
        user: "boss".into(),
        password: localai::secrets::SecretValue::new("boss-pw".to_owned()),
        meaning: Meaning::Performed,
    };
    let before = runtime.store().audit(None, 10_000).await.expect("reads").len();
    assert_eq!(
        runtime
            .act_now(boss.clone(), out(vec![signature]))
            .await
            .expect("out of service"),
        2
    );
    let rows = runtime.store().audit(None, 10_000).await.expect("reads");
    let rows: Vec<_> = rows[before..]
        .iter()
        .map(|row| {
            (
                row.target.as_str(),
                row.action,
                row.new_value.as_deref(),
                row.signatures
                    .as_deref()
                    .is_some_and(|signed| signed.starts_with("boss (performed, ")),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (
                "T.Hi",
                store::AuditAction::RemoveFromService,
                Some("transmitter replaced"),
                true
            ),
            (
                "T.HiHi",
                store::AuditAction::RemoveFromService,
                Some("transmitter replaced"),
                true
            ),
        ],
        "one row per alarm, each signed"
    );
    assert_eq!(
        (
            alarm_label(&runtime, "T.Hi"),
            alarm_label(&runtime, "T.HiHi"),
            alarm_label(&runtime, "U.Hi")
        ),
        ("out-of-service", "out-of-service", "normal"),
        "only the folder's alarms"
    );

    // Nothing left to take out; an unknown folder is named.
    let again = runtime.act_now(boss.clone(), out(Vec::new())).await;
    assert_eq!(
        again,
        Err(ActError::Invalid(
            "the alarms below P are all as asked already".into()
        ))
    );
    let nowhere = RemoveFromService {
        alarms: ServiceScope::Folder("Plant/Nowhere".into()),
        ..out(Vec::new())
    };
    assert_eq!(
        runtime.act_now(boss.clone(), nowhere).await,
        Err(ActError::Invalid("no folder \"Plant/Nowhere\"".into()))
    );

    // Back in service together, unsigned: bringing alarms back takes none.
    let back = ReturnToService {
        alarms: ServiceScope::Folder("P".into()),
    };
    assert_eq!(runtime.act_now(boss, back).await.expect("back"), 2);
    assert_eq!(alarm_label(&runtime, "T.HiHi"), "normal");
}
