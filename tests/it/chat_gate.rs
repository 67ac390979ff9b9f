//! Chat through the platform before the model is switched on: the gate path of the envelope.

use service_client::Status;
use tserver::ServerConfig;

use crate::support::{Solution, TestServer, admin};

#[tokio::test]
async fn chat_with_the_model_disabled_returns_the_disabled_envelope() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let client = server.guest().await;
    let json = client.chat("What is wrong with Pump 1?").await.expect("a reply");
    let value: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    assert_eq!(
        value,
        serde_json::json!({
            "text": "",
            "status": "disabled",
            "toolTrace": [],
            "latencyMs": 0,
            "warnings": [localai::gates::MODEL_ENABLED_OFF]
        })
    );
    // A refused turn is answered at the gate: no transcript session is made for it.
    assert_eq!(server.runtime.local_ai().chat_sessions(), 0);
    server.stop().await;
}

#[tokio::test]
async fn an_admin_settings_change_is_seen_by_the_running_server_at_its_next_call() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8 path");
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let client = server.guest().await;

    let before = client.chat_envelope("hello").await.expect("reply");
    assert_eq!(before.status, Status::Disabled);
    assert_eq!(before.warnings, [localai::gates::MODEL_ENABLED_OFF]);

    admin(&["settings", path, "set", "ModelOptions", "0"], "");
    admin(&["settings", path, "set", "ModelEnabled", "on"], "");
    let gate_two = client.chat_envelope("hello").await.expect("reply");
    assert_eq!(gate_two.status, Status::Disabled);
    assert_eq!(gate_two.warnings, [localai::gates::RUNTIME_MCP_OFF]);
    assert_eq!(gate_two.latency_ms, 0);

    admin(&["settings", path, "set", "ModelEnabled", "off"], "");
    let again = client.chat_envelope("hello").await.expect("reply");
    assert_eq!(again.warnings, [localai::gates::MODEL_ENABLED_OFF]);
    server.stop().await;
}
