//! RuntimeMCP as the official MCP Python SDK (`mcp` on PyPI, in the venv `.ci/run` makes) uses
//! it: every tool called, each structured result checked against its outputSchema by the SDK
//! and by jsonschema's Draft 2020-12 validator; refusals flagged `isError`; resources listed
//! and read; prompts (the built-in ones and the demo plant's own) listed, rendered and completed;
//! a subscription told when the alarms change.

use std::path::PathBuf;
use std::process::Stdio;

use plant_model::{Quality, TagValue};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::mcp::{McpRig, every_tool_call};
use crate::support::{PATIENCE, Solution, admin};

/// Where `.ci/run` puts the SDK's virtual environment.
const VENV: &str = "/var/tmp/tserver-tests-mcp-venv";

/// The Python with the MCP SDK: `TSERVER_TEST_MCP_PYTHON`, else the venv's.
pub(crate) fn python() -> PathBuf {
    let python = std::env::var_os("TSERVER_TEST_MCP_PYTHON")
        .map_or_else(|| PathBuf::from(VENV).join("bin/python"), PathBuf::from);
    assert!(
        python.exists(),
        "the MCP Python SDK is not installed at {}: run .ci/run, or `python3 -m venv {VENV} && \
         {VENV}/bin/pip install mcp==2.3.0 jsonschema==4.26.0`",
        python.display()
    );
    python
}

#[tokio::test]
async fn the_official_python_sdk_calls_reads_renders_and_subscribes_and_every_result_follows_its_schema() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    admin(&["settings", &path, "set", "SimulatorEnabled", "off"], "");
    let rig = McpRig::serving(solution, tserver::http_surface::HttpConfig::default()).await;
    // An alarm standing, so that its acknowledgement and shelving can be proposed.
    let plant = rig.server.runtime.plant();
    plant
        .write("Tank1.Level", TagValue::Number(96.0), Quality::GOOD)
        .expect("written");

    let mut calls: Vec<(String, Value)> = every_tool_call()
        .into_iter()
        .map(|(name, args)| (name.to_owned(), args))
        .collect();
    let extra = [
        ("runtime_describe_object", json!({"path": "Tank1.Level"})),
        (
            "runtime_get_tag_history",
            json!({"tag": "Tank1.Level", "interval_minutes": 30}),
        ),
        (
            "runtime_propose_write",
            json!({"tag": "Pump1.Mode", "value": "Manual", "reason": "checked by the SDK"}),
        ),
        ("runtime_get_proposal", json!({"proposal": "$proposal"})),
        (
            "runtime_propose_alarm_ack",
            json!({"alarm": "Tank1.Level.Hi", "reason": "seen"}),
        ),
        (
            "runtime_propose_alarm_shelve",
            json!({"alarm": "Tank1.Level.Hi", "minutes": 60, "reason": "transmitter swap"}),
        ),
        ("runtime_launch_rocket", json!({})),
    ];
    calls.extend(extra.into_iter().map(|(name, args)| (name.to_owned(), args)));
    let plan = json!({
        "calls": calls,
        "reads": ["tserver://plant/model", "tserver://documents/procedures/tank-overfill.md", "tserver://alarms/active", "tserver://proposals/pending"],
        "prompts": [["diagnose_equipment", {"equipment": "Pump1"}], ["explain_alarm", {"alarm": "Nope.Hi"}], ["tank_check", {"tank": "Tank2"}]],
        "completions": [["prompt", "diagnose_equipment", "equipment", "Pu"], ["resource", "tserver://plant/model/{+folder}", "folder", "Plant"], ["prompt", "tank_check", "tank", "Ta"]],
        "subscribe": "tserver://alarms/active",
    });
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp_sdk_client.py");
    let mut child = tokio::process::Command::new(python())
        .arg(script)
        .args([rig.url().as_str(), rig.token()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python starts");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(format!("{plan}\n").as_bytes())
        .await
        .expect("the plan is written");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let report = loop {
        let line = tokio::time::timeout(PATIENCE * 2, lines.next_line())
            .await
            .expect("the SDK client answers in time")
            .expect("reads")
            .expect("the SDK client reports before it ends");
        let message: Value = serde_json::from_str(&line).expect("a JSON line");
        if message.get("subscribed").is_some() {
            // The level back to normal: the alarm changes under the subscription.
            plant
                .write("Tank1.Level", TagValue::Number(50.0), Quality::GOOD)
                .expect("written");
            continue;
        }
        break message["report"].clone();
    };
    assert!(child.wait().await.expect("ends").success());

    assert_eq!(report["protocolVersion"], "2025-11-25");
    let tools = report["tools"].as_array().expect("tools");
    assert_eq!(tools.len(), 16);
    assert!(
        tools
            .iter()
            .all(|tool| tool["outputSchema"] == true && tool["title"].is_string()),
        "{tools:?}"
    );
    let steps = report["calls"].as_array().expect("calls");
    assert_eq!(steps.len(), calls.len());
    for step in &steps[..steps.len() - 1] {
        assert!(step.get("error").is_none(), "{step}");
        assert_eq!(
            (&step["isError"], &step["validated"]),
            (&json!(false), &json!(true)),
            "{step}"
        );
    }
    let called: std::collections::BTreeSet<&str> =
        steps.iter().filter_map(|step| step["name"].as_str()).collect();
    assert!(
        tools
            .iter()
            .all(|tool| called.contains(tool["name"].as_str().unwrap_or_default())),
        "every tool called"
    );
    let unknown = steps.last().expect("the refusal");
    assert_eq!(unknown["isError"], true, "{unknown}");
    assert_eq!(
        unknown["structured"],
        Value::Null,
        "a refusal has no structured result"
    );
    let followed = steps
        .iter()
        .find(|step| step["name"] == "runtime_get_proposal")
        .expect("followed");
    assert_eq!(followed["structured"]["result"]["state"], "pending", "{followed}");

    let listed: Vec<&str> = report["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|resource| resource["uri"].as_str())
        .collect();
    assert!(
        listed.contains(&"tserver://plant/model") && listed.contains(&"tserver://alarms/active"),
        "{listed:?}"
    );
    assert_eq!(
        report["templates"],
        json!(["tserver://plant/model/{+folder}", "tserver://proposals/{id}"])
    );
    for read in report["reads"].as_array().expect("reads") {
        assert!(read.get("error").is_none(), "{read}");
    }
    assert_eq!(report["reads"][1]["mimeType"], "text/markdown");
    let pending: Value =
        serde_json::from_str(report["reads"][3]["text"].as_str().expect("text")).expect("JSON");
    assert_eq!(pending["count"], 3, "the three proposals made: {pending}");

    let prompts: Vec<&str> = report["prompts"]
        .as_array()
        .expect("prompts")
        .iter()
        .filter_map(|prompt| prompt["name"].as_str())
        .collect();
    assert_eq!(
        prompts,
        [
            "diagnose_equipment",
            "shift_handover",
            "explain_alarm",
            "tank_check"
        ],
        "the built-in prompts, then the demo plant's own"
    );
    assert!(
        report["rendered"][0]["text"]
            .as_str()
            .is_some_and(|text| text.starts_with("What is wrong with Pump1?"))
    );
    assert!(
        report["rendered"][1]["error"]
            .as_str()
            .is_some_and(|error| error.contains("\"Nope.Hi\" is not in the plant")),
        "{}",
        report["rendered"][1]
    );
    assert!(
        report["completions"][0]
            .as_array()
            .is_some_and(|values| values.contains(&json!("Pump1"))),
        "{}",
        report["completions"]
    );
    assert!(
        report["completions"][1]
            .as_array()
            .is_some_and(|values| !values.is_empty())
    );
    assert!(
        report["rendered"][2]["text"]
            .as_str()
            .is_some_and(|text| text.starts_with("Check tank Tank2 over the last 2 hours")),
        "{}",
        report["rendered"][2]
    );
    assert_eq!(report["completions"][2], json!(["Tank1", "Tank2"]));
    assert_eq!(report["updates"], json!(["tserver://alarms/active"]));
    rig.stop().await;
}
