//! Operators acting on the plant: WriteTags checked write by write, AcknowledgeAlarm, roles
//! enforced for every acting call, and the audit trail of everything asked for.

use plant_model::{Quality, TagValue as PlantValue};
use service_client::{ClientError, ErrorCode, TagValue, TagWrite, WriteOutcome, WriteValue};
use tserver::ServerConfig;

use crate::support::{Solution, TestServer, admin, try_admin};

/// The demo plant with Pump1.Mode, Tank1.Level and Pump1.StartCount writable.
pub(crate) fn solution_with_writable_tags() -> Solution {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    let exported = admin(&["plant", &path, "export"], "");
    let mut model = plant_model::read(&exported, plant_model::Format::Toml, "demo").expect("reads");
    for tag in &mut model.tags {
        if [
            "Pump1.Mode",
            "Tank1.Level",
            "Pump1.StartCount",
            "Tank1.OperatorNote",
            "Pump1.Running",
        ]
        .contains(&tag.name.as_str())
        {
            tag.writable = true;
        }
    }
    let file = solution.path.with_file_name("writable.toml");
    std::fs::write(&file, model.to_toml().expect("toml")).expect("writes");
    admin(&["plant", &path, "import", file.to_str().expect("utf-8")], "");
    solution
}

fn write(name: &str, value: WriteValue) -> TagWrite {
    TagWrite {
        name: name.to_owned(),
        value: Some(value),
    }
}

#[tokio::test]
async fn each_write_is_checked_on_its_own_and_every_one_asked_for_is_audited() {
    let solution = solution_with_writable_tags();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let client = server.guest().await;
    let results = client
        .write_tags(vec![
            write("Pump1.Mode", WriteValue::Text("Manual".into())),
            write("Pump1.Mode", WriteValue::Text("Banana".into())),
            write("Pump1.Mode", WriteValue::Text("off".into())),
            write("Tank1.Level", WriteValue::Number(150.0)),
            write("Pump1.MotorCurrent", WriteValue::Number(5.0)),
            write("No.Such.Tag", WriteValue::Integer(1)),
            write("Tank1.Level", WriteValue::Boolean(true)),
            write("Pump1.StartCount", WriteValue::Number(1300.0)),
            write("Pump1.StartCount", WriteValue::Number(1300.5)),
            TagWrite {
                name: "Pump1.Mode".into(),
                value: None,
            },
            write("Plant/Area1/Tank1/Level", WriteValue::Integer(40)),
        ])
        .await
        .expect("answered");
    let outcomes: Vec<(&str, &str, WriteOutcome)> = results
        .iter()
        .map(|result| (result.name.as_str(), result.error.as_str(), result.outcome()))
        .collect();
    let (written, refused) = (WriteOutcome::Written, WriteOutcome::Refused);
    assert_eq!(
        outcomes,
        [
            ("Pump1.Mode", "", written),
            (
                "Pump1.Mode",
                "\"Banana\" is not one of Auto, Manual, Off",
                refused
            ),
            (
                "Pump1.Mode",
                "\"off\" is not one of Auto, Manual, Off (did you mean \"Off\"?)",
                refused
            ),
            ("Tank1.Level", "150 is outside the range 0..100", refused),
            ("Pump1.MotorCurrent", "not writable", refused),
            ("No.Such.Tag", "unknown tag", refused),
            ("Tank1.Level", "a number tag cannot take the bool true", refused),
            ("Pump1.StartCount", "", written),
            (
                "Pump1.StartCount",
                "an integer tag takes whole numbers: 1300.5 is not one",
                refused
            ),
            ("Pump1.Mode", "no value given", refused),
            ("Plant/Area1/Tank1/Level", "", written),
        ]
    );
    let readings = client
        .read_tags(&["Pump1.Mode", "Pump1.StartCount", "Tank1.Level"])
        .await
        .expect("reads");
    let values: Vec<Option<TagValue>> = readings.into_iter().map(|reading| reading.value).collect();
    assert_eq!(
        values,
        [
            Some(TagValue::Text("Manual".into())),
            Some(TagValue::Integer(1300)),
            Some(TagValue::Number(40.0)),
        ]
    );
    // No write at all, or too many, is refused whole.
    let error = client.write_tags(Vec::new()).await.expect_err("refused");
    assert!(
        matches!(
            error,
            ClientError::Server {
                code: ErrorCode::InvalidArgument,
                ..
            }
        ),
        "{error}"
    );

    let audit = admin(&["audit", solution.path.to_str().expect("utf-8")], "");
    let lines: Vec<&str> = audit.lines().collect();
    assert_eq!(lines.len(), 11, "{audit}");
    assert!(
        lines[0].contains(" write Pump1.Mode by guest (127.0.0.1:")
            && lines[0].ends_with(" \"Auto\" -> \"Manual\": ok"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].ends_with(" -> \"Banana\": \"Banana\" is not one of Auto, Manual, Off"),
        "{}",
        lines[1]
    );
    assert!(
        lines[3].ends_with("-> 150.0: 150 is outside the range 0..100"),
        "{}",
        lines[3]
    );
    assert!(
        lines[5].contains(" write No.Such.Tag by guest") && lines[5].ends_with(" -> 1: unknown tag"),
        "{}",
        lines[5]
    );
    let since_later = admin(
        &[
            "audit",
            solution.path.to_str().expect("utf-8"),
            "--since",
            "2999-01-01T00:00:00Z",
        ],
        "",
    );
    assert_eq!(since_later, "", "nothing after a time to come");
    server.stop().await;
}

#[tokio::test]
async fn a_viewer_may_read_but_not_act_and_a_new_role_takes_effect_at_once() {
    let solution = solution_with_writable_tags();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    admin(&["users", &path, "add", "watcher"], "pw\n");
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let viewer = server.client().await;
    viewer.login("watcher", "pw").await.expect("logs in");
    assert_eq!(viewer.read_tags(&["Pump1.Mode"]).await.expect("reads").len(), 1);
    let watching = viewer
        .subscribe(service_client::SubscribeRequest {
            names: vec!["Pump1.Mode".to_owned()],
            ..service_client::SubscribeRequest::default()
        })
        .await
        .expect("a viewer may subscribe");
    assert_eq!(watching.initial().readings.len(), 1);
    let refused = viewer
        .write_tags(vec![write("Pump1.Mode", WriteValue::Text("Off".into()))])
        .await
        .expect_err("a viewer may not write");
    assert!(
        matches!(&refused, ClientError::Server { code: ErrorCode::PermissionDenied, message }
            if message.contains("a viewer may not write tags")),
        "{refused}"
    );
    let refused = viewer
        .acknowledge_alarm("Tank1.Level.Hi")
        .await
        .expect_err("a viewer may not acknowledge");
    assert!(
        matches!(
            refused,
            ClientError::Server {
                code: ErrorCode::PermissionDenied,
                ..
            }
        ),
        "{refused}"
    );
    assert_eq!(
        server
            .runtime
            .objects()
            .tag("Pump1.Mode")
            .expect("tag")
            .current()
            .value,
        PlantValue::Text("Auto".into()),
        "nothing was written"
    );
    let audit = admin(&["audit", &path], "");
    assert!(
        audit
            .lines()
            .filter(|line| line.ends_with(": permission denied"))
            .count()
            == 2,
        "{audit}"
    );

    // Made an operator, the user must log in again to act as one.
    admin(&["users", &path, "role", "watcher", "operator"], "");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while viewer.ping().await.is_ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "the old login was not ended"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let operator = server.client().await;
    operator.login("watcher", "pw").await.expect("logs in again");
    let results = operator
        .write_tags(vec![write("Pump1.Mode", WriteValue::Text("Off".into()))])
        .await
        .expect("an operator writes");
    assert_eq!(results[0].error, "");
    server.stop().await;
}

#[tokio::test]
async fn operators_acknowledge_alarms_and_each_acknowledgement_is_audited() {
    let solution = solution_with_writable_tags();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    server
        .runtime
        .plant()
        .write("Tank1.Level", PlantValue::Number(90.0), Quality::GOOD)
        .expect("trips Tank1.Level.Hi");
    let client = server.guest().await;
    assert!(
        client
            .acknowledge_alarm("Tank1.Level.Hi")
            .await
            .expect("answered")
    );
    assert!(
        !client
            .acknowledge_alarm("Tank1.Level.Hi")
            .await
            .expect("answered"),
        "once is enough"
    );
    let unknown = client
        .acknowledge_alarm("Tank9.Level.Hi")
        .await
        .expect_err("unknown");
    assert!(
        matches!(&unknown, ClientError::Server { code: ErrorCode::InvalidArgument, message } if message.contains("Tank9")),
        "{unknown}"
    );
    let status = server
        .runtime
        .objects()
        .alarms()
        .iter()
        .find(|alarm| alarm.definition().name == "Tank1.Level.Hi")
        .expect("alarm")
        .status();
    assert_eq!(
        status.acknowledged.map(|(_, user)| user),
        Some("guest".to_owned())
    );
    let audit = admin(&["audit", solution.path.to_str().expect("utf-8")], "");
    assert_eq!(
        audit
            .lines()
            .filter(|line| line.contains(" acknowledge Tank1.Level.Hi by guest"))
            .count(),
        2,
        "{audit}"
    );
    let bad = try_admin(
        &[
            "audit",
            solution.path.to_str().expect("utf-8"),
            "--since",
            "yesterday-ish",
        ],
        "",
    )
    .expect_err("refused");
    assert!(bad.to_string().contains("neither a time"), "{bad}");
    server.stop().await;
}

#[tokio::test]
async fn refused_calls_are_bounded_in_the_audit_per_call_and_per_connection() {
    let solution = solution_with_writable_tags();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    admin(&["users", &path, "add", "watcher"], "pw\n");
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let viewer = server.client().await;
    viewer.login("watcher", "pw").await.expect("logs in");
    let long_text = "x".repeat(900);
    let flood: Vec<TagWrite> = (0..1000)
        .map(|_| write("Pump1.Mode", WriteValue::Text(long_text.clone())))
        .collect();
    for _ in 0..3 {
        viewer
            .write_tags(flood.clone())
            .await
            .expect_err("a viewer may not write");
    }
    // An operator's call of 1,000 refused writes (unknown tags with long names).
    let operator = server.guest().await;
    let unknown: Vec<TagWrite> = (0..1000)
        .map(|index| write(&format!("No.{index}.{long_text}"), WriteValue::Integer(1)))
        .collect();
    let results = operator.write_tags(unknown).await.expect("answered");
    assert!(results.iter().all(|result| result.error == "unknown tag"));

    let audit = admin(&["audit", &path, "--limit", "100000"], "");
    let lines: Vec<&str> = audit.lines().collect();
    let viewer_rows: Vec<&&str> = lines
        .iter()
        .filter(|line| line.contains(" by watcher "))
        .collect();
    assert_eq!(viewer_rows.len(), 3, "one row per refused call: {audit}");
    for row in &viewer_rows {
        assert!(
            row.contains(" write Pump1.Mode and 999 more by watcher ")
                && row.ends_with(": permission denied (1000 writes)")
                && row.len() < 600,
            "{row}"
        );
    }
    let operator_rows: Vec<&&str> = lines.iter().filter(|line| line.contains(" by guest ")).collect();
    assert_eq!(
        operator_rows.len(),
        11,
        "10 refusals listed, one row for the rest: {audit}"
    );
    assert!(operator_rows.iter().all(|row| row.len() < 800), "values cut");
    assert!(
        operator_rows[10].ends_with(": refused: 990 more requests of this call, not listed one by one"),
        "{}",
        operator_rows[10]
    );

    // One connection's refusals past its allowance a minute are counted, not recorded.
    for _ in 0..700 {
        viewer
            .write_tags(vec![write("Pump1.Mode", WriteValue::Text("Off".into()))])
            .await
            .expect_err("a viewer may not write");
    }
    let audit = admin(&["audit", &path, "--limit", "100000"], "");
    let viewer_rows: Vec<&str> = audit
        .lines()
        .filter(|line| line.contains(" by watcher "))
        .collect();
    assert_eq!(
        viewer_rows.len(),
        601,
        "600 rows and the one saying the allowance is reached"
    );
    assert!(
        viewer_rows[600].ends_with(
            ": this connection reached its 600 audit rows of refusals a minute: its further refusals this minute are counted, not recorded"
        ),
        "{}",
        viewer_rows[600]
    );
    // Another connection has its own allowance.
    let other = server.client().await;
    other.login("watcher", "pw").await.expect("logs in");
    other
        .write_tags(vec![write("Pump1.Mode", WriteValue::Text("Off".into()))])
        .await
        .expect_err("a viewer may not write");
    let audit = admin(&["audit", &path, "--limit", "100000"], "");
    assert_eq!(
        audit.lines().filter(|line| line.contains(" by watcher ")).count(),
        602
    );
    server.stop().await;
}

#[tokio::test]
async fn the_audit_is_exported_as_csv_or_json_lines_and_pruned_past_its_retention() {
    let solution = solution_with_writable_tags();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let client = server.guest().await;
    client
        .write_tags(vec![
            write(
                "Tank1.OperatorNote",
                WriteValue::Text("say \"hi\", then stop".into()),
            ),
            write("Tank1.Level", WriteValue::Number(40.0)),
        ])
        .await
        .expect("answered");
    server.stop().await;
    // The first row is made 40 days old.
    let db = rusqlite::Connection::open(&solution.path).expect("opens");
    let aged = db
        .execute(
            "UPDATE Audit SET Time = Time - 40 * 86400000 WHERE Target = 'Tank1.OperatorNote'",
            [],
        )
        .expect("ages the row");
    assert_eq!(aged, 1);
    drop(db);

    let csv = admin(&["audit", &path, "export"], "");
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 3, "{csv}");
    assert_eq!(
        lines[0],
        "time,action,target,user,peer,connection,old_value,new_value,outcome,signatures"
    );
    assert!(
        lines[1].contains(",write,Tank1.OperatorNote,guest,")
            && lines[1].ends_with(r#","""""","""say \""hi\"", then stop""",ok,"#),
        "quoted as CSV: {}",
        lines[1]
    );
    let jsonl = admin(&["audit", &path, "export", "--format", "jsonl"], "");
    let objects: Vec<serde_json::Value> = jsonl
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON object a line"))
        .collect();
    assert_eq!(objects.len(), 2);
    assert_eq!(objects[1]["target"], "Tank1.Level");
    assert_eq!(objects[1]["new_value"], "40.0");

    admin(&["settings", &path, "set", "AuditRetentionDays", "30"], "");
    let refused = try_admin(&["settings", &path, "set", "AuditRetentionDays", "0"], "").expect_err("refused");
    assert!(
        format!("{refused:#}").contains("\"0\" is not a whole number of days from 1 to 3650"),
        "{refused:#}"
    );
    // A server opening the solution removes the rows past 30 days.
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let audit = admin(&["audit", &path], "");
        if audit.lines().count() == 1 {
            assert!(audit.contains(" write Tank1.Level by guest "), "{audit}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never pruned: {audit}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    server.stop().await;
}

/// Reconnecting buys no new allowance: one user's refusals over several connections, each
/// closed before its own allowance runs out, are bounded by the user's allowance a minute.
#[tokio::test]
async fn reconnecting_never_buys_more_audit_rows_of_refusals() {
    let solution = solution_with_writable_tags();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    admin(&["users", &path, "add", "watcher"], "pw\n");
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    for _ in 0..3 {
        let viewer = server.client().await;
        viewer.login("watcher", "pw").await.expect("logs in");
        for _ in 0..590 {
            viewer
                .write_tags(vec![write("Pump1.Mode", WriteValue::Text("Off".into()))])
                .await
                .expect_err("a viewer may not write");
        }
    }
    let audit = admin(&["audit", &path, "--limit", "100000"], "");
    let rows: Vec<&str> = audit
        .lines()
        .filter(|line| line.contains(" by watcher "))
        .collect();
    assert_eq!(
        rows.len(),
        1_201,
        "the user's 1,200 rows a minute and the one saying so"
    );
    assert!(
        rows[1_200].ends_with(
            " reached its 1200 audit rows of refusals a minute: its further refusals this minute are counted, not recorded"
        ),
        "{}",
        rows[1_200]
    );
    server.stop().await;
}
