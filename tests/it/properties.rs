//! Properties of both Local AI paths: whatever the query and whatever the model server sends
//! (status, headers, body bytes, timing), the caller gets one envelope with exactly the five
//! fields, an allowed status and a latency within the budget.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use scripted_llm::{RecordedRequest, Reply, ScriptedLlm};
use serde_json::{Value, json};
use tserver::ServerConfig;

use crate::support::{Solution, TestServer, admin};

/// The budget of every case; slow replies go past it on purpose.
const BUDGET_SECS: &str = "0.3";
/// How far past the budget an envelope may report.
const LATENCY_LIMIT_MS: u64 = 300 + 1000;

fn text() -> impl Strategy<Value = String> {
    prop_oneof![".{0,40}", "[a-zA-Z ]{0,20}", Just(String::new())]
}

/// Any JSON value, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        text().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map(text(), inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// Bodies of every kind a server might send: completions (text or tool calls, well or badly
/// formed), error shapes, any JSON, any bytes.
fn body() -> impl Strategy<Value = Vec<u8>> {
    let completion = (any_json(), any_json(), prop_oneof![Just(json!("stop")), Just(json!("length")), Just(json!("tool_calls")), any_json()])
        .prop_map(|(content, calls, finish)| {
            json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": content, "tool_calls": calls}, "finish_reason": finish}]})
        });
    let tool_call = (
        prop_oneof![
            Just("runtime_get_value".to_owned()),
            Just("runtime_search_uns".to_owned()),
            text()
        ],
        prop_oneof![Just(r#"{"tag": "Pump1.FlowRate"}"#.to_owned()), text()],
    )
        .prop_map(|(name, arguments)| {
            json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}
            ]}, "finish_reason": "tool_calls"}]})
        });
    let text_call = text().prop_map(|inner| {
        json!({"choices": [{"message": {"role": "assistant", "content": format!("<tool_call>{{\"name\": \"runtime_get_value\", \"arguments\": {inner}}}</tool_call>")}}]})
    });
    let error =
        (text(), any_json()).prop_map(|(message, code)| json!({"error": {"message": message, "code": code}}));
    prop_oneof![
        3 => completion.prop_map(|value| value.to_string().into_bytes()),
        2 => tool_call.prop_map(|value| value.to_string().into_bytes()),
        1 => text_call.prop_map(|value| value.to_string().into_bytes()),
        1 => error.prop_map(|value| value.to_string().into_bytes()),
        1 => any_json().prop_map(|value| value.to_string().into_bytes()),
        1 => proptest::collection::vec(any::<u8>(), 0..200),
    ]
}

fn headers() -> impl Strategy<Value = Vec<(String, String)>> {
    let name = prop_oneof![
        Just("content-type"),
        Just("content-encoding"),
        Just("x-request-id"),
        Just("retry-after"),
        Just("connection"),
        Just("cache-control"),
    ];
    let value = prop_oneof![
        Just("application/json".to_owned()),
        Just("text/html; charset=utf-8".to_owned()),
        Just("gzip".to_owned()),
        Just("close".to_owned()),
        "[ -~]{0,24}",
    ];
    proptest::collection::vec((name.prop_map(str::to_owned), value), 0..4)
}

/// One reply of the model server: status, headers, body and a delay before it.
fn reply() -> impl Strategy<Value = Reply> {
    let status = prop_oneof![6 => Just(200_u16), 1 => 200_u16..600, 1 => prop::sample::select(vec![400_u16, 401, 404, 429, 500, 502, 503])];
    let delay = prop_oneof![6 => Just(0_u64), 3 => 0_u64..20, 1 => Just(500_u64)];
    (status, headers(), body(), delay).prop_map(|(status, headers, body, delay)| {
        Reply::Custom {
            status,
            headers,
            body,
        }
        .after(Duration::from_millis(delay))
    })
}

/// Any query: text of any kind, or a JSON object with some of the query fields.
fn query() -> impl Strategy<Value = String> {
    let object = (
        proptest::option::of(any_json()),
        proptest::option::of(any_json()),
        proptest::option::of(any_json()),
    )
        .prop_map(|(user, system, context)| {
            let mut object = serde_json::Map::new();
            for (key, value) in [("user", user), ("system", system), ("context", context)] {
                if let Some(value) = value {
                    object.insert(key.to_owned(), value);
                }
            }
            Value::Object(object).to_string()
        });
    prop_oneof![3 => text(), 2 => object, 1 => any_json().prop_map(|value| value.to_string())]
}

/// The envelope rules: exactly the five fields, each of its type, an allowed status, and a
/// latency within the budget plus a margin.
fn check_envelope(path: &str, json: &str) -> Result<(), TestCaseError> {
    let value: Value = serde_json::from_str(json)
        .map_err(|e| TestCaseError::fail(format!("{path}: not JSON ({e}): {json}")))?;
    let object = value
        .as_object()
        .ok_or_else(|| TestCaseError::fail(format!("{path}: not an object: {json}")))?;
    let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
    keys.sort_unstable();
    prop_assert_eq!(
        keys,
        ["latencyMs", "status", "text", "toolTrace", "warnings"],
        "{}: {}",
        path,
        json
    );
    prop_assert!(value["text"].is_string(), "{}: {}", path, json);
    prop_assert!(
        matches!(
            value["status"].as_str(),
            Some("ok" | "error" | "disabled" | "truncated")
        ),
        "{}: {}",
        path,
        json
    );
    prop_assert!(value["toolTrace"].is_array(), "{}: {}", path, json);
    let warnings = value["warnings"]
        .as_array()
        .ok_or_else(|| TestCaseError::fail(format!("{path}: warnings")))?;
    prop_assert!(warnings.iter().all(Value::is_string), "{}: {}", path, json);
    let latency = value["latencyMs"]
        .as_u64()
        .ok_or_else(|| TestCaseError::fail(format!("{path}: latencyMs")))?;
    prop_assert!(
        latency <= LATENCY_LIMIT_MS,
        "{}: latency {} ms: {}",
        path,
        latency,
        json
    );
    Ok(())
}

#[test]
fn any_query_and_any_model_reply_give_a_valid_envelope_on_both_paths() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let current = Arc::new(Mutex::new(Reply::text("ready")));
    let (llm, solution, server, client) = runtime.block_on(async {
        let responder = Arc::clone(&current);
        let llm =
            ScriptedLlm::start_with(move |_: &RecordedRequest| responder.lock().expect("reply").clone())
                .await
                .expect("llm");
        let solution = Solution::demo();
        let path = solution.path.to_str().expect("utf-8");
        admin(&["settings", path, "set", "URL", &llm.url()], "");
        admin(&["settings", path, "set", "ModelEnabled", "true"], "");
        admin(&["settings", path, "set", "TimeoutSeconds", BUDGET_SECS], "");
        let server = TestServer::start(&solution.path, ServerConfig::default()).await;
        let client = server.guest().await;
        (llm, solution, server, client)
    });
    let toolkit = server.runtime.toolkit();

    let mut runner = TestRunner::new(Config {
        cases: 48,
        failure_persistence: None,
        ..Config::default()
    });
    let outcome = runner.run(&(query(), reply()), |(query, reply)| {
        *current.lock().expect("reply") = reply;
        runtime.block_on(async {
            let chat = client
                .chat(&query)
                .await
                .map_err(|error| TestCaseError::fail(format!("chat call failed: {error}")))?;
            check_envelope("chat", &chat)?;
            check_envelope("atomic", &toolkit.ai_execute_async(&query).await)
        })
    });
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
    runtime.block_on(async move {
        drop(client);
        server.stop().await;
        llm.stop().await;
    });
    drop(solution);
}
