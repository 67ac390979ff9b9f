//! The runtime tools outside chat: ListTools and CallTool on the framed protocol, gated by
//! ModelOptions at every call, answering exactly what a chat turn's model reads.

use scripted_llm::Reply;
use serde_json::{Value, json};
use service_client::{ClientError, ErrorCode};

use crate::chat::{ChatRig, tool_message_content};
use crate::support::admin;

fn names(tools: &[service_client::ToolInfo]) -> Vec<&str> {
    tools.iter().map(|tool| tool.name.as_str()).collect()
}

#[tokio::test]
async fn tools_are_listed_and_callable_by_the_bits_of_the_moment() {
    let rig = ChatRig::start(vec![], &[]).await;
    let path = rig.solution.path.to_str().expect("utf-8").to_owned();
    let client = rig.server.guest().await;
    // The demo offers UNS, alarm, history and proposal tools (0xde).
    let all = client.list_tools().await.expect("listed");
    assert_eq!(
        names(&all),
        [
            "runtime_get_value",
            "runtime_browse_object_model",
            "runtime_search_uns",
            "runtime_describe_object",
            "runtime_list_instances",
            "runtime_search_documents",
            "runtime_get_active_alarms",
            "runtime_query_alarm_history",
            "runtime_get_alarm_report",
            "runtime_get_tag_history",
            "runtime_find_excursions",
            "runtime_get_values_at",
            "runtime_propose_write",
            "runtime_propose_alarm_ack",
            "runtime_propose_alarm_shelve",
            "runtime_get_proposal"
        ]
    );
    let value = &all[0];
    assert!(value.read_only && value.category == 0x04, "{value:?}");
    let schema: Value = serde_json::from_str(&value.input_schema_json).expect("a JSON schema");
    assert_eq!(schema["required"], json!(["tag"]));

    admin(&["settings", &path, "set", "ModelOptions", "0x06"], "");
    let uns_only = client.list_tools().await.expect("listed");
    assert!(
        names(&uns_only).iter().all(|name| !name.contains("alarm")),
        "{:?}",
        names(&uns_only)
    );
    let refused = client
        .call_tool("runtime_get_active_alarms", &json!({}))
        .await
        .expect("answered");
    assert!(refused.is_error);
    let content: Value = serde_json::from_str(&refused.content_json).expect("JSON");
    assert_eq!(content["error"]["type"], "unknown_tool", "{content}");

    admin(&["settings", &path, "set", "ModelOptions", "0x1c"], "");
    for outcome in [
        client.list_tools().await.map(drop),
        client
            .call_tool("runtime_get_value", &json!({"tag": "Tank1.Level"}))
            .await
            .map(drop),
    ] {
        match outcome {
            Err(ClientError::Server { code, message }) => {
                assert_eq!(code, ErrorCode::ToolsDisabled);
                assert!(message.contains("bit 0x02"), "{message}");
            }
            other => panic!("expected TOOLS_DISABLED, got {other:?}"),
        }
    }
    rig.stop().await;
}

#[tokio::test]
async fn a_tool_call_answers_what_a_chat_turn_shows_the_model_and_bad_arguments_are_tool_errors() {
    let rig = ChatRig::start(
        vec![
            Reply::tool_call("runtime_get_value", json!({"tag": "Tank1.Level"})),
            Reply::text("Tank 1 is fine."),
        ],
        &[],
    )
    .await;
    let client = rig.server.guest().await;
    let envelope = client.chat_envelope("Tank 1?").await.expect("reply");
    assert_eq!(envelope.tool_trace.len(), 1, "{envelope:?}");
    let seen_by_model = tool_message_content(&rig.posts()[1], "call_1");
    let framed = client
        .call_tool("runtime_get_value", &json!({"tag": "Tank1.Level"}))
        .await
        .expect("answered");
    assert!(!framed.is_error);
    let framed: Value = serde_json::from_str(&framed.content_json).expect("JSON");
    assert_eq!(framed, seen_by_model, "the same call, the same content");

    let bad = client
        .call_tool("runtime_get_value", &json!({"tag": 5}))
        .await
        .expect("answered");
    assert!(bad.is_error);
    let bad: Value = serde_json::from_str(&bad.content_json).expect("JSON");
    assert_eq!(bad["error"]["type"], "invalid_arguments", "{bad}");
    let missing = client
        .call_tool("runtime_get_value", &json!({"tag": "No.Such.Tag"}))
        .await
        .expect("answered");
    let missing: Value = serde_json::from_str(&missing.content_json).expect("JSON");
    assert_eq!(missing["error"]["type"], "not_found", "{missing}");
    rig.stop().await;
}
