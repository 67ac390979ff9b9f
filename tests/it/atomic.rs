//! The atomic path (`TK.AIExecute`) against a scripted OpenAI-compatible server, through a real
//! solution file: every applicable row of the decision matrix, the request on the wire,
//! secrets, `{Tag.X}`, and the sync wrapper from every calling context.

use std::time::Duration;

use ai_envelope::{Envelope, Status};
use scripted_llm::{Reply, ScriptedLlm};
use serde_json::{Value, json};
use tserver::Runtime;

use crate::support::{Solution, admin, store_setting_unchecked, try_admin};

/// A demo solution with the model on and pointed at `url`.
fn solution_for(url: &str) -> Solution {
    let solution = Solution::demo();
    set(&solution, "URL", url);
    set(&solution, "ModelEnabled", "true");
    solution
}

fn set(solution: &Solution, key: &str, value: &str) {
    admin(
        &[
            "settings",
            solution.path.to_str().expect("utf-8"),
            "set",
            key,
            value,
        ],
        "",
    );
}

fn secret(solution: &Solution, name: &str, value: &str) {
    admin(
        &["secrets", solution.path.to_str().expect("utf-8"), "set", name],
        &format!("{value}\n"),
    );
}

async fn execute(solution: &Solution, query: &str) -> Envelope {
    let runtime = Runtime::open(&solution.path).expect("opens");
    let json = runtime.toolkit().ai_execute_async(query).await;
    Envelope::from_json(&json).expect("always a valid envelope")
}

#[tokio::test]
async fn a_plain_query_is_one_post_without_tools_and_its_answer_is_the_text() {
    let llm = ScriptedLlm::start([Reply::text("The impeller is probably blocked.")])
        .await
        .expect("llm");
    let solution = solution_for(&llm.url());
    set(&solution, "Name", "llama3.1:8b");
    let envelope = execute(&solution, "Why is Pump 1 drawing high current?").await;
    assert_eq!(envelope.status, Status::Ok);
    assert_eq!(envelope.text, "The impeller is probably blocked.");
    assert!(envelope.tool_trace.is_empty() && envelope.warnings.is_empty());

    let requests = llm.requests();
    assert_eq!(requests.len(), 1, "one POST, no retry");
    let request = &requests[0];
    assert_eq!(
        (request.method.as_str(), request.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert_eq!(
        request.header("authorization"),
        None,
        "Authorization None sends no header"
    );
    let body = request.json().expect("JSON body");
    assert_eq!(body["model"], "llama3.1:8b");
    assert_eq!(
        body["messages"],
        json!([{"role": "user", "content": "Why is Pump 1 drawing high current?"}])
    );
    assert!(
        body.get("tools").is_none(),
        "the atomic path offers no tools: {body}"
    );
}

#[tokio::test]
async fn a_structured_query_sends_system_context_and_user() {
    let llm = ScriptedLlm::start([Reply::text("ok")]).await.expect("llm");
    let solution = solution_for(&llm.url());
    let query = json!({"system": "Answer in German.", "user": "Pump status?",
                       "context": "Pump1 running at 84 m3/h", "metadata": {"caller": "ShiftReport"}});
    assert_eq!(execute(&solution, &query.to_string()).await.status, Status::Ok);
    let body = llm.requests()[0].json().expect("json");
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "Answer in German."},
            {"role": "system", "content": "Context:\nPump1 running at 84 m3/h"},
            {"role": "user", "content": "Pump status?"}
        ])
    );
    assert!(
        !body.to_string().contains("ShiftReport"),
        "metadata is not sent to the model"
    );
}

#[tokio::test]
async fn gates_and_malformed_queries_send_no_http() {
    let llm = ScriptedLlm::start([]).await.expect("llm");
    let solution = solution_for(&llm.url());
    set(&solution, "ModelEnabled", "false");
    let disabled = execute(&solution, "hello").await;
    assert_eq!(
        (disabled.status, disabled.latency_ms, disabled.warnings.as_slice()),
        (
            Status::Disabled,
            0,
            [localai::gates::MODEL_ENABLED_OFF.to_owned()].as_slice()
        )
    );

    set(&solution, "ModelEnabled", "true");
    for query in [r#"{"system": "no user"}"#, "", r#"{"user": 42}"#] {
        let malformed = execute(&solution, query).await;
        assert_eq!(malformed.status, Status::Error, "{query:?}");
        assert_eq!(malformed.latency_ms, 0);
        assert!(
            malformed.warnings[0].starts_with("malformed query"),
            "{:?}",
            malformed.warnings
        );
    }
    assert!(llm.requests().is_empty());
}

#[tokio::test]
async fn the_atomic_path_ignores_the_tool_surface_bit() {
    let llm = ScriptedLlm::start([Reply::text("Übersetzt.")])
        .await
        .expect("llm");
    let solution = solution_for(&llm.url());
    set(&solution, "ModelOptions", "0");
    let envelope = execute(&solution, "Translate").await;
    assert_eq!(
        (envelope.status, envelope.text.as_str()),
        (Status::Ok, "Übersetzt.")
    );
}

#[tokio::test]
async fn an_unreachable_endpoint_is_an_error_naming_the_configured_url() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let url = format!("http://127.0.0.1:{port}/v1/chat/completions");
    let solution = solution_for(&url);
    let envelope = execute(&solution, "hello").await;
    assert_eq!(envelope.status, Status::Error);
    assert_eq!(envelope.text, "");
    assert_eq!(
        envelope.warnings,
        [format!("LLM endpoint HTTP error: Connection refused ({url})")]
    );

    set(
        &solution,
        "URL",
        "http://no-such-host.invalid/v1/chat/completions",
    );
    set(&solution, "TimeoutSeconds", "10");
    let unresolvable = execute(&solution, "hello").await;
    assert_eq!(unresolvable.status, Status::Error, "{unresolvable:?}");
    assert!(
        unresolvable.warnings[0].contains("no-such-host.invalid"),
        "{:?}",
        unresolvable.warnings
    );
}

#[tokio::test]
async fn non_2xx_replies_report_status_reason_and_the_servers_message() {
    let replies = [
        Reply::status(
            401,
            json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}}),
        ),
        Reply::status(
            404,
            json!({"error": "model \"qwen9\" not found, try pulling it first"}),
        ),
        Reply::status(
            400,
            json!({"error": {"code": 400, "message": "the request exceeds the available context size", "type": "exceed_context_size_error"}}),
        ),
        Reply::status(
            400,
            json!({"object": "error", "message": "This model's maximum context length is 8192 tokens", "type": "BadRequestError", "param": null, "code": 400}),
        ),
        Reply::status(
            503,
            json!({"error": "server busy, please try again.  maximum pending requests exceeded"}),
        ),
    ];
    let expected = [
        "HTTP 401 Unauthorized: Incorrect API key provided",
        "HTTP 404 Not Found: model \"qwen9\" not found, try pulling it first",
        "HTTP 400 Bad Request: the request exceeds the available context size",
        "HTTP 400 Bad Request: This model's maximum context length is 8192 tokens",
        "HTTP 503 Service Unavailable: server busy",
    ];
    let llm = ScriptedLlm::start(replies).await.expect("llm");
    let solution = solution_for(&llm.url());
    for expected in expected {
        let envelope = execute(&solution, "hello").await;
        assert_eq!(envelope.status, Status::Error);
        assert!(
            envelope.warnings[0].contains(expected),
            "{:?} lacks {expected}",
            envelope.warnings
        );
        assert!(envelope.warnings[0].ends_with(&format!("({})", llm.url())));
    }
}

#[tokio::test]
async fn bodies_that_are_not_answers_are_errors() {
    let replies = [
        Reply::Raw {
            status: 200,
            content_type: "text/html".into(),
            body: b"<html>proxy login</html>".to_vec(),
        },
        Reply::Raw {
            status: 200,
            content_type: "application/json".into(),
            body: Vec::new(),
        },
        Reply::Raw {
            status: 200,
            content_type: "application/json".into(),
            body: br#"{"choices": [{"mess"#.to_vec(),
        },
        Reply::status(200, json!({"choices": []})),
        Reply::status(
            200,
            json!({"choices": [{"message": {"role": "assistant", "reasoning_content": "thinking only"}}]}),
        ),
        Reply::DropMidBody {
            declared: 500,
            body: br#"{"choices": [{"message": {"#.to_vec(),
        },
    ];
    let expected = [
        "not JSON",
        "not JSON",
        "not JSON",
        "no choices",
        "no answer content",
        "the response could not be read",
    ];
    let llm = ScriptedLlm::start(replies).await.expect("llm");
    let solution = solution_for(&llm.url());
    for expected in expected {
        let envelope = execute(&solution, "hello").await;
        assert_eq!(envelope.status, Status::Error, "{expected}");
        assert_eq!(envelope.text, "");
        assert!(
            envelope.warnings[0].contains(expected),
            "{:?} lacks {expected}",
            envelope.warnings
        );
    }
}

#[tokio::test]
async fn a_cut_answer_is_ok_with_a_warning_and_reasoning_is_never_the_text() {
    let body = json!({"choices": [{"message": {"role": "assistant", "content": "Partial answ",
        "reasoning": "long hidden chain"}, "finish_reason": "length"}]});
    let llm = ScriptedLlm::start([Reply::status(200, body)]).await.expect("llm");
    let envelope = execute(&solution_for(&llm.url()), "hello").await;
    assert_eq!(
        (envelope.status, envelope.text.as_str()),
        (Status::Ok, "Partial answ")
    );
    assert!(envelope.warnings[0].contains("finish_reason: length"));
}

#[tokio::test]
async fn the_budget_covers_slow_headers_and_a_slow_body() {
    let slow_body = scripted_llm::completion("late").to_string().into_bytes();
    let llm = ScriptedLlm::start([
        Reply::text("too late").after(Duration::from_secs(5)),
        Reply::Trickle {
            body: slow_body,
            chunk: 8,
            every: Duration::from_millis(100),
        },
    ])
    .await
    .expect("llm");
    let solution = solution_for(&llm.url());
    set(&solution, "TimeoutSeconds", "0.3");
    for _ in 0..2 {
        let envelope = execute(&solution, "hello").await;
        assert_eq!(envelope.status, Status::Truncated);
        assert_eq!(envelope.text, "");
        assert!(envelope.latency_ms >= 300, "{}", envelope.latency_ms);
        assert!(
            envelope.latency_ms < 3000,
            "the budget stops the wait: {}",
            envelope.latency_ms
        );
        assert_eq!(envelope.warnings, ["LLM POST wall-clock budget (0.3s) exceeded."]);
    }
}

#[tokio::test]
async fn each_authorization_scheme_and_the_headers_reach_the_wire_with_secrets_resolved() {
    let llm = ScriptedLlm::start((0..4).map(|_| Reply::text("ok")))
        .await
        .expect("llm");
    let solution = solution_for(&llm.url());
    secret(&solution, "ApiKey", "sk-live-canary-4711");
    secret(&solution, "OpsPassword", "pa55-canary");
    set(&solution, "Headers", "X-Plant: north\nX-Key-Id: /secret:ApiKey");

    let schemes = [
        (
            "BearerToken\n/secret:ApiKey",
            "authorization",
            "Bearer sk-live-canary-4711",
        ),
        (
            "BasicAuth\nops\n/secret:OpsPassword",
            "authorization",
            "Basic b3BzOnBhNTUtY2FuYXJ5",
        ),
        (
            "CustomAuth\napi-key: /secret:ApiKey",
            "api-key",
            "sk-live-canary-4711",
        ),
        ("None", "authorization", ""),
    ];
    for (authorization, header, expected) in schemes {
        set(&solution, "Authorization", authorization);
        let envelope = execute(&solution, "hello").await;
        assert_eq!(envelope.status, Status::Ok, "{authorization}: {envelope:?}");
        let request = llm.requests().pop().expect("a request");
        assert_eq!(request.header(header).unwrap_or(""), expected, "{authorization}");
        assert_eq!(request.header("x-plant"), Some("north"));
        assert_eq!(request.header("x-key-id"), Some("sk-live-canary-4711"));
    }

    // The value is stored encrypted: neither the database nor its WAL holds the plaintext.
    for file in [solution.path.clone(), solution.path.with_extension("db-wal")] {
        let bytes = std::fs::read(&file).unwrap_or_default();
        assert!(
            !bytes.windows(10).any(|w| w == b"sk-live-ca"),
            "{} holds the plaintext",
            file.display()
        );
    }
    let names = admin(&["secrets", solution.path.to_str().expect("utf-8"), "list"], "");
    assert_eq!(names, "ApiKey\nOpsPassword\n");
}

#[tokio::test]
async fn a_secret_echoed_back_by_the_server_is_scrubbed_from_the_warning() {
    let llm = ScriptedLlm::start([Reply::status(
        401,
        json!({"error": {"message": "Incorrect API key provided: sk-live-canary-4711"}}),
    )])
    .await
    .expect("llm");
    let solution = solution_for(&format!("{}?key=/secret:ApiKey", llm.url()));
    secret(&solution, "ApiKey", "sk-live-canary-4711");
    let envelope = execute(&solution, "hello").await;
    assert_eq!(envelope.status, Status::Error);
    let json = envelope.to_json();
    assert!(!json.contains("sk-live-canary-4711"), "{json}");
    assert!(
        json.contains("Incorrect API key provided: /secret:ApiKey"),
        "{json}"
    );
    assert!(
        json.contains("?key=/secret:ApiKey"),
        "the URL is shown with its token: {json}"
    );
    assert_eq!(
        llm.requests()[0].path,
        "/v1/chat/completions?key=sk-live-canary-4711"
    );
}

#[tokio::test]
async fn bad_endpoint_configuration_is_an_error_before_any_http() {
    let llm = ScriptedLlm::start([]).await.expect("llm");
    let solution = solution_for(&llm.url());
    let cases = [
        (
            "Authorization",
            "Kerberos\nticket",
            "unknown Authorization scheme 'Kerberos'",
        ),
        (
            "Authorization",
            "BearerToken\n/secret:Missing",
            "secret 'Missing' is not defined",
        ),
        (
            "Authorization",
            "BearerToken",
            "BearerToken needs the token on line 2",
        ),
        ("Headers", "not a header line", "Headers line 1"),
        (
            "URL",
            "ftp://example/v1",
            "invalid LLM endpoint URL (ftp://example/v1)",
        ),
        (
            "URL",
            "http://127.0.0.1:1/{Tag.No.Such}/v1",
            "unknown tag 'No.Such'",
        ),
    ];
    for (key, value, expected) in cases {
        // The admin command refuses what it can judge; a hand edit stores it anyway.
        let path = solution.path.to_str().expect("utf-8");
        let refused = try_admin(&["settings", path, "set", key, value], "");
        assert_eq!(
            refused.is_err(),
            !value.contains('{') && !value.contains("/secret:"),
            "{key}={value}: {refused:?}"
        );
        store_setting_unchecked(&solution.path, key, value);
        let envelope = execute(&solution, "hello").await;
        assert_eq!(envelope.status, Status::Error, "{key}={value}");
        assert!(
            envelope.warnings[0].contains(expected),
            "{key}={value}: {:?}",
            envelope.warnings
        );
        admin(
            &["settings", solution.path.to_str().expect("utf-8"), "unset", key],
            "",
        );
        set(&solution, "URL", &llm.url());
    }
    assert!(llm.requests().is_empty(), "no HTTP was sent");
}

#[tokio::test]
async fn tag_expressions_in_the_url_resolve_against_live_values() {
    let llm = ScriptedLlm::start([Reply::text("ok")]).await.expect("llm");
    let url = format!("http://{}/{{Tag.Pump1.Mode}}/v1/chat/completions", llm.addr());
    let solution = solution_for(&url);
    assert_eq!(execute(&solution, "hello").await.status, Status::Ok);
    assert_eq!(llm.requests()[0].path, "/Auto/v1/chat/completions");
}

#[test]
fn the_sync_wrapper_works_from_a_plain_thread() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let llm = runtime
        .block_on(ScriptedLlm::start([Reply::text("from a thread")]))
        .expect("llm");
    let solution = solution_for(&llm.url());
    let toolkit = Runtime::open(&solution.path).expect("opens").toolkit();
    let answer = std::thread::spawn(move || toolkit.ai_execute("hi"))
        .join()
        .expect("no panic");
    assert_eq!(
        Envelope::from_json(&answer).expect("envelope").text,
        "from a thread"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sync_wrapper_works_from_spawn_blocking_and_from_async_workers() {
    let llm = ScriptedLlm::start((0..3).map(|_| Reply::text("answered")))
        .await
        .expect("llm");
    let solution = solution_for(&llm.url());
    let toolkit = Runtime::open(&solution.path).expect("opens").toolkit();

    let from_blocking = tokio::task::spawn_blocking({
        let toolkit = toolkit.clone();
        move || toolkit.ai_execute("hi")
    });
    let blocking = from_blocking.await.expect("no panic");
    // Straight from this async worker thread, where a naive block_on would panic.
    let inline = toolkit.ai_execute("hi");
    // And from inside a current-thread runtime, where waiting on it would deadlock.
    let nested = std::thread::spawn(move || {
        let single = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("rt");
        single.block_on(async { toolkit.ai_execute("hi") })
    })
    .join()
    .expect("no panic");
    for json in [blocking, inline, nested] {
        let envelope = Envelope::from_json(&json).expect("envelope");
        assert_eq!(
            (envelope.status, envelope.text.as_str()),
            (Status::Ok, "answered")
        );
    }
}

#[tokio::test]
async fn ai_execute_prints_one_envelope_line() {
    let llm = ScriptedLlm::start([Reply::text("From the command line.")])
        .await
        .expect("llm");
    let solution = solution_for(&llm.url());
    let line = tserver::cli::ai_execute(&store::SolutionLocation::File(solution.path.clone()), "hi")
        .await
        .expect("runs");
    assert!(!line.contains('\n'));
    let value: Value = serde_json::from_str(&line).expect("JSON");
    assert_eq!(value["status"], "ok");
    assert_eq!(value["text"], "From the command line.");
    assert_eq!(value["toolTrace"], json!([]));
}

/// `ai-execute` on its own caps the envelope as a server's script would get it: a 2 MiB
/// answer comes back `truncated`, within 1 MiB less 128 bytes, with a warning.
#[tokio::test]
async fn ai_execute_caps_the_envelope_as_in_a_server() {
    let long = "x".repeat(2 * 1024 * 1024);
    let llm = ScriptedLlm::start([Reply::text(&long)]).await.expect("llm");
    let solution = solution_for(&llm.url());
    let line = tserver::cli::ai_execute(&store::SolutionLocation::File(solution.path.clone()), "hi")
        .await
        .expect("runs");
    assert!(
        line.len() <= tserver_proto::DEFAULT_MAX_FRAME - 128,
        "{} bytes",
        line.len()
    );
    let value: Value = serde_json::from_str(&line).expect("JSON");
    assert_eq!(value["status"], "truncated", "{}", &line[..200]);
    assert!(!value["warnings"].as_array().expect("warnings").is_empty());
}
