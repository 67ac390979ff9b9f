//! Suppression by design: an alarm whose `suppress_when` holds is evaluated and recorded but not
//! annunciated, listed as suppressed with its expression over the wire and to the assistant, and
//! annunciates again once the expression stops holding; suppressed at start, it is never
//! annunciated.

use std::time::{Duration, SystemTime};

use plant::actions::{Actor, RequestedWrite, WriteTags};
use plant::tag_writes::GivenValue;
use plant_model::AlarmEventKind;
use store::Role;
use tserver::Runtime;

use crate::support::{Solution, alarm_label};

const PLANT: &str = r#"
[[types]]
name = "Pump"

  [[types.tags]]
  name = "Running"
  type = "bool"
  writable = true

  [[types.tags]]
  name = "Flow"
  type = "number"
  unit = "m3/h"
  writable = true

  [[types.alarms]]
  name = "Flow.Lo"
  tag = "Flow"
  condition = "Lo"
  limit = 10
  message = "{label} flow low"
  suppress_when = "Running == false"

[[equipment]]
name = "Pump1"
type = "Pump"
path = "Plant/Pump1"
initial = { Running = true, Flow = 50 }

[[equipment]]
name = "Pump2"
type = "Pump"
path = "Plant/Pump2"
initial = { Running = false, Flow = 2 }
"#;

async fn set(runtime: &Runtime, tag: &str, value: GivenValue) {
    let write = WriteTags::unsigned(vec![RequestedWrite {
        tag: tag.to_owned(),
        value: Ok(value),
    }]);
    let ops = Actor::User {
        name: "ops".into(),
        role: Role::Operator,
        connection: "suppression-test".to_owned(),
        peer: "local".to_owned(),
    };
    runtime.act_now(ops, write).await.expect("written");
}

#[tokio::test]
async fn a_stopped_pumps_low_flow_is_recorded_not_annunciated_until_it_runs_again() {
    let solution = Solution::with_plant(PLANT);
    solution.add_user("ops", "operator", "ops-pw");
    let before = SystemTime::now() - Duration::from_secs(1);
    let server = crate::support::TestServer::start(&solution.path, tserver::ServerConfig::default()).await;
    let runtime = &server.runtime;
    assert_eq!(
        alarm_label(runtime, "Pump2.Flow.Lo"),
        "suppressed",
        "stopped with its flow low at start: never annunciated"
    );

    set(runtime, "Pump1.Running", GivenValue::Bool(false)).await;
    assert_eq!(alarm_label(runtime, "Pump1.Flow.Lo"), "suppressed");
    set(runtime, "Pump1.Flow", GivenValue::Number(2.0)).await;
    assert_eq!(
        alarm_label(runtime, "Pump1.Flow.Lo"),
        "suppressed",
        "in alarm underneath"
    );

    // Listed apart, with the expression that holds, over the wire and to the assistant.
    let client = server.client().await;
    client.login("ops", "ops-pw").await.expect("logs in");
    let reply = client
        .alarms(service_client::AlarmsRequest::default())
        .await
        .expect("lists");
    assert!(
        reply.active.iter().all(|alarm| !alarm.name.starts_with("Pump")),
        "none annunciated"
    );
    let mut handled: Vec<_> = reply
        .handled
        .iter()
        .map(|alarm| {
            (
                alarm.name.as_str(),
                alarm.handling.as_str(),
                alarm.handling_reason.as_str(),
                alarm.state.as_str(),
            )
        })
        .collect();
    handled.sort_unstable();
    assert_eq!(
        handled,
        [
            ("Pump1.Flow.Lo", "suppressed", "Pump1.Running == false", "active"),
            ("Pump2.Flow.Lo", "suppressed", "Pump2.Running == false", "active"),
        ]
    );
    let listed = runtime
        .tools()
        .get("runtime_get_active_alarms")
        .expect("the alarm tool")
        .call(
            serde_json::json!({}),
            localai::tools::ToolCaller::Script {
                script: "Check".into(),
            },
            localai::tools::TOOL_TIMEOUT,
        )
        .await
        .expect("lists")
        .result;
    let pump1 = listed["alarms"]
        .as_array()
        .expect("a list")
        .iter()
        .find(|entry| entry["name"] == "Pump1.Flow.Lo")
        .expect("listed to the assistant");
    assert_eq!(pump1["suppressed"]["when"], "Pump1.Running == false");

    // Running again with the flow still low: it annunciates, asking for an acknowledgement.
    set(runtime, "Pump1.Running", GivenValue::Bool(true)).await;
    assert_eq!(alarm_label(runtime, "Pump1.Flow.Lo"), "active");
    assert_eq!(
        alarm_label(runtime, "Pump2.Flow.Lo"),
        "suppressed",
        "each instance on its own pump"
    );

    // The history has every step, the suppression with the expression it followed.
    runtime.plant().historian().flush().expect("flushes");
    let page = runtime
        .store()
        .alarm_history_blocking(Some("Pump1.Flow"), (before, SystemTime::now()), 100)
        .expect("reads");
    let mut steps: Vec<_> = page
        .events
        .iter()
        .map(|event| (event.kind, event.reason.clone().unwrap_or_default()))
        .collect();
    steps.reverse();
    assert_eq!(
        steps,
        [
            (AlarmEventKind::Suppressed, "Pump1.Running == false".to_owned()),
            (AlarmEventKind::Active, String::new()),
            (AlarmEventKind::Unsuppressed, "Pump1.Running == false".to_owned()),
        ]
    );
    server.stop().await;
}
