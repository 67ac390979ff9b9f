//! A secret never reaches the logs: every path that could print it (both Local AI paths, their
//! errors, admin commands, failed logins) runs at trace level with the output captured in both
//! log formats (text and JSON), and the value appears nowhere in it, nor in any envelope, nor
//! in the solution's database files.

use std::io::Write;
use std::sync::{Arc, Mutex};

use scripted_llm::{Reply, ScriptedLlm};
use serde_json::json;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tserver::Runtime;
use tserver::cli::{LogFormat, log_layer};

use crate::support::{Solution, TestServer, admin};

const CANARY: &str = "sk-canary-never-logged-93c1";
/// A password tried at login; it must not be logged either.
const PASSWORD_CANARY: &str = "pw-canary-never-logged-51d7";

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("capture lock").extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// A subscriber writing every event, trace level included, into the returned capture, once
/// in each log format the server writes (text, then JSON), built as the server builds them.
fn trace_capture() -> (Captured, impl tracing::Subscriber + Send + Sync) {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_subscriber::filter::LevelFilter::TRACE)
        .with(log_layer(LogFormat::Text, captured.clone(), false))
        .with(log_layer(LogFormat::Json, captured.clone(), false));
    (captured, subscriber)
}

/// Points the solution's endpoint at `url` with the secret in its query and Authorization.
fn point_at_with_secret(path: &str, url: &str) {
    let url = format!("{url}?k=/secret:ApiKey");
    admin(&["settings", path, "set", "URL", &url], "");
    admin(
        &[
            "settings",
            path,
            "set",
            "Authorization",
            "BearerToken\n/secret:ApiKey",
        ],
        "",
    );
}

#[test]
fn no_path_prints_a_secret_even_at_trace_level() {
    let (captured, subscriber) = trace_capture();
    let mut envelopes = Vec::new();
    let mut admin_output = String::new();
    let solution = Solution::demo();
    tracing::subscriber::with_default(subscriber, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("rt");
        runtime.block_on(async {
            let llm = ScriptedLlm::start([
                Reply::text("fine"),
                Reply::status(
                    401,
                    json!({"error": {"message": format!("Incorrect API key provided: {CANARY}")}}),
                ),
                Reply::Close,
                // The chat path: a tool round, then an error echoing the key, then a reset.
                Reply::tool_call("runtime_get_value", json!({"tag": "Pump1.MotorCurrent"})),
                Reply::text("done"),
                Reply::status(
                    500,
                    json!({"error": {"message": format!("upstream rejected key {CANARY}")}}),
                ),
                Reply::Close,
            ])
            .await
            .expect("llm");
            let path = solution.path.to_str().expect("utf-8");
            admin(&["secrets", path, "set", "ApiKey"], &format!("{CANARY}\n"));
            admin(&["settings", path, "set", "ModelEnabled", "true"], "");
            point_at_with_secret(path, &llm.url());
            admin(&["settings", path, "set", "Headers", "X-Key: /secret:ApiKey"], "");
            for args in [
                &["settings", path, "show"][..],
                &["settings", path, "get", "URL"],
                &["settings", path, "get", "Authorization"],
                &["secrets", path, "list"],
            ] {
                admin_output.push_str(&admin(args, ""));
            }
            // Tests on other threads may have met a log call site before this subscriber
            // existed and cached "never" for it; recompute so this capture sees every line.
            tracing::callsite::rebuild_interest_cache();
            let toolkit = Runtime::open(&solution.path).expect("opens").toolkit();
            // ok, an error body echoing the key, a dropped connection.
            for _ in 0..3 {
                envelopes.push(toolkit.ai_execute_async("hello").await);
            }
            // Connection refused with the secret in the URL, and a broken auth line.
            admin(
                &[
                    "settings",
                    path,
                    "set",
                    "URL",
                    "http://127.0.0.1:1/v1?k=/secret:ApiKey",
                ],
                "",
            );
            envelopes.push(toolkit.ai_execute_async("hello").await);
            admin(
                &[
                    "settings",
                    path,
                    "set",
                    "Authorization",
                    "CustomAuth\n/secret:ApiKey",
                ],
                "",
            );
            envelopes.push(toolkit.ai_execute_async("hello").await);

            // The chat path over TCP, with tools; and a failed login with a password canary.
            point_at_with_secret(path, &llm.url());
            admin(&["settings", path, "set", "ModelOptions", "0x9E"], "");
            tracing::callsite::rebuild_interest_cache();
            let server = TestServer::start(&solution.path, tserver::ServerConfig::default()).await;
            let refused = server.client().await.login("guest", PASSWORD_CANARY).await;
            assert!(refused.is_err());
            let client = server.guest().await;
            for _ in 0..3 {
                envelopes.push(client.chat("How is Pump 1?").await.expect("an envelope"));
            }
            server.stop().await;
            assert_eq!(
                llm.requests()[0].header("x-key"),
                Some(CANARY),
                "the secret did reach the wire"
            );
        });
    });
    let logs = String::from_utf8(captured.0.lock().expect("lock").clone()).expect("utf-8");
    assert!(logs.contains("atomic POST"), "the capture saw the calls:\n{logs}");
    let json_lines = logs
        .lines()
        .filter(|line| line.starts_with('{'))
        .filter(|line| serde_json::from_str::<serde_json::Value>(line).is_ok())
        .count();
    assert!(json_lines > 10, "the JSON format wrote its lines too:\n{logs}");
    assert!(
        logs.contains("chat POST"),
        "the capture saw the chat path:\n{logs}"
    );
    assert!(
        logs.contains("login refused") && logs.contains("127.0.0.1"),
        "a failed login is logged with its peer:\n{logs}"
    );
    assert!(!logs.contains(CANARY), "a secret leaked into the logs:\n{logs}");
    assert!(
        !logs.contains(PASSWORD_CANARY),
        "a password leaked into the logs:\n{logs}"
    );
    assert!(
        !admin_output.contains(CANARY),
        "an admin command printed the secret:\n{admin_output}"
    );
    assert!(
        admin_output.contains("ApiKey"),
        "the admin commands ran:\n{admin_output}"
    );
    // The database, its write-ahead log and shared memory hold only ciphertext.
    let database = solution.path.to_str().expect("utf-8 path");
    let mut files_checked = 0;
    for suffix in ["", "-wal", "-shm", "-journal"] {
        if let Ok(bytes) = std::fs::read(format!("{database}{suffix}")) {
            files_checked += 1;
            assert!(
                !bytes
                    .windows(CANARY.len())
                    .any(|window| window == CANARY.as_bytes()),
                "the secret is in plain text in {database}{suffix}"
            );
            assert!(
                !bytes
                    .windows(PASSWORD_CANARY.len())
                    .any(|window| window == PASSWORD_CANARY.as_bytes())
            );
        }
    }
    assert!(files_checked >= 1, "the database file was read");
    for envelope in &envelopes {
        assert!(
            !envelope.contains(CANARY),
            "a secret leaked into an envelope: {envelope}"
        );
    }
    let statuses: Vec<_> = envelopes
        .iter()
        .map(|e| serde_json::from_str::<serde_json::Value>(e).expect("json")["status"].clone())
        .collect();
    // Atomic: ok, the 401, the reset, refused, the broken auth line. Chat: a tool turn, the
    // 500, the reset.
    assert_eq!(
        statuses,
        ["ok", "error", "error", "error", "error", "ok", "error", "error"]
    );
}

/// A secret with characters a URL must encode, so its percent-encoded form differs.
const ODD_CANARY: &str = "sk canary ü-40e7";

#[test]
fn no_envelope_field_or_log_line_carries_a_secret_in_any_form_it_was_sent_in() {
    use base64::Engine;
    let (captured, subscriber) = trace_capture();
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("panel:{ODD_CANARY}"));
    let encoded = "sk%20canary%20%C3%BC-40e7";
    let forms = [ODD_CANARY, encoded, basic.as_str()];
    let echo = format!("key {ODD_CANARY}, url /v1/chat/completions?k={encoded}, header Basic {basic}");
    let solution = Solution::demo();
    let mut envelopes = Vec::new();
    tracing::subscriber::with_default(subscriber, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("rt");
        runtime.block_on(async {
            let llm = ScriptedLlm::start([
                // Atomic: a 401 echoing the request line and the Authorization header, then a
                // 200 whose answer repeats the key.
                Reply::status(401, json!({"error": {"message": echo}})),
                Reply::text(echo.clone()),
                // Chat: the model puts the key in a tool call's arguments (the tool echoes it
                // in its not-found result), then repeats it in its answer.
                Reply::tool_call("runtime_get_value", json!({"tag": ODD_CANARY, "note": echo})),
                Reply::text(echo.clone()),
            ])
            .await
            .expect("llm");
            let path = solution.path.to_str().expect("utf-8");
            admin(&["secrets", path, "set", "ApiKey"], &format!("{ODD_CANARY}\n"));
            admin(&["settings", path, "set", "ModelEnabled", "true"], "");
            admin(&["settings", path, "set", "ModelOptions", "0x9E"], "");
            let url = format!("{}?k=/secret:ApiKey", llm.url());
            admin(&["settings", path, "set", "URL", &url], "");
            admin(
                &[
                    "settings",
                    path,
                    "set",
                    "Authorization",
                    "BasicAuth\npanel\n/secret:ApiKey",
                ],
                "",
            );
            tracing::callsite::rebuild_interest_cache();
            let toolkit = Runtime::open(&solution.path).expect("opens").toolkit();
            envelopes.push(toolkit.ai_execute_async("hello").await);
            envelopes.push(toolkit.ai_execute_async("hello").await);
            let server = TestServer::start(&solution.path, tserver::ServerConfig::default()).await;
            let client = server.guest().await;
            envelopes.push(client.chat("How is Pump 1?").await.expect("an envelope"));
            server.stop().await;
            let sent = llm.requests();
            assert!(
                sent[0].path.contains(encoded),
                "the encoded form did reach the wire: {}",
                sent[0].path
            );
            assert_eq!(
                sent[0].header("authorization"),
                Some(format!("Basic {basic}").as_str())
            );
        });
    });
    let statuses: Vec<_> = envelopes
        .iter()
        .map(|e| serde_json::from_str::<serde_json::Value>(e).expect("json")["status"].clone())
        .collect();
    assert_eq!(statuses, ["error", "ok", "ok"], "{envelopes:#?}");
    let chat: serde_json::Value = serde_json::from_str(&envelopes[2]).expect("json");
    assert_eq!(chat["toolTrace"].as_array().map(Vec::len), Some(1), "{chat}");
    for envelope in &envelopes {
        for form in forms {
            assert!(
                !envelope.contains(form),
                "{form:?} leaked into an envelope: {envelope}"
            );
        }
        assert!(
            envelope.contains("/secret:ApiKey"),
            "scrubbed, not lost: {envelope}"
        );
    }
    assert!(
        envelopes[0].contains("<BasicAuth credentials with /secret:ApiKey>"),
        "{}",
        envelopes[0]
    );
    let logs = String::from_utf8(captured.0.lock().expect("lock").clone()).expect("utf-8");
    assert!(
        logs.contains("chat POST"),
        "the capture saw the chat path:\n{logs}"
    );
    assert!(
        logs.lines().any(|line| line.contains("chat turn")
            && line.contains("prompt_tokens=")
            && line.contains("posts=2")),
        "each turn is logged with what it cost:\n{logs}"
    );
    for form in forms {
        assert!(!logs.contains(form), "{form:?} leaked into the logs:\n{logs}");
    }
}

/// A broker password, right and wrong, never reaches the logs (every tserver line at trace
/// level) nor the sources' status.
#[test]
fn a_broker_password_is_never_logged_whether_the_broker_takes_it_or_not() {
    const BROKER_CANARY: &str = "mqtt-pw-canary-never-logged-7a2e";
    const WRONG_CANARY: &str = "mqtt-wrong-canary-never-logged-c4d1";
    let broker = tserver_tests::mosquitto::Mosquitto::start_with(tserver_tests::mosquitto::BrokerOptions {
        user: Some(("plant".to_owned(), BROKER_CANARY.to_owned())),
        tls: None,
    });
    let solution = crate::mqtt_sources::plant_with(&broker.url(), |model| {
        model.sources[0].username = "plant".to_owned();
        model.sources[0].password = "/secret:BrokerPw".to_owned();
        crate::mqtt_sources::bind(
            model,
            "Tank1.Level",
            plant_model::SourceBinding {
                broker: "site".to_owned(),
                ..plant_model::SourceBinding::default()
            },
        );
    });
    let path = solution.path.to_str().expect("utf-8").to_owned();
    let (captured, subscriber) = trace_capture();
    let mut statuses = String::new();
    // One thread, so the source tasks log into this capture.
    tracing::subscriber::with_default(subscriber, || {
        tracing::callsite::rebuild_interest_cache();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("rt");
        runtime.block_on(async {
            for (password, connects) in [(BROKER_CANARY, true), (WRONG_CANARY, false)] {
                admin(&["secrets", &path, "set", "BrokerPw"], &format!("{password}\n"));
                let runtime = Runtime::open(&solution.path).expect("opens");
                let shutdown = tokio_util::sync::CancellationToken::new();
                runtime.start_sources(&shutdown).await.expect("starts");
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
                loop {
                    let status = runtime.source_statuses().remove(0);
                    let settled = if connects {
                        status.connected
                    } else {
                        status.errors.contains_key("connection")
                    };
                    if settled {
                        statuses.push_str(&format!("{status:?}"));
                        break;
                    }
                    assert!(std::time::Instant::now() < deadline, "{status:?}");
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                shutdown.cancel();
            }
        });
    });
    let logged = String::from_utf8(captured.0.lock().expect("capture").clone()).expect("utf-8");
    assert!(
        logged.contains("connected to the broker"),
        "the capture saw the source"
    );
    for canary in [BROKER_CANARY, WRONG_CANARY] {
        assert!(!logged.contains(canary), "a broker password was logged");
        assert!(
            !statuses.contains(canary),
            "a broker password is in a status: {statuses}"
        );
    }
}

/// An API token, valid or not, never reaches the logs (every line at trace level, rmcp's and
/// axum's included) while it is used on the HTTP surface.
#[test]
fn an_api_token_is_never_logged_when_used_or_refused() {
    use rmcp::ServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    const WRONG_TOKEN: &str = "tst_abcdef012345_wrong-token-canary-never-logged-0b7e";
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    let token = admin(&["tokens", &path, "create", "--user", "guest"], "")
        .trim()
        .to_owned();
    let secret = token.rsplit('_').next().expect("a secret part").to_owned();
    let (captured, subscriber) = trace_capture();
    // One thread, so the server's tasks log into this capture.
    tracing::subscriber::with_default(subscriber, || {
        tracing::callsite::rebuild_interest_cache();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("rt");
        runtime.block_on(async {
            let served = Runtime::open(&solution.path).expect("opens");
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
            let port = listener.local_addr().expect("address").port();
            let stop = tokio_util::sync::CancellationToken::new();
            tokio::spawn(tserver::http_surface::serve(
                listener,
                served,
                tserver::http_surface::HttpConfig::default(),
                stop.clone(),
            ));
            let url = format!("http://127.0.0.1:{port}/mcp");
            for presented in [token.as_str(), WRONG_TOKEN] {
                let transport = StreamableHttpClientTransport::from_config(
                    StreamableHttpClientTransportConfig::with_uri(url.clone())
                        .auth_header(presented.to_owned()),
                );
                match ().serve(transport).await {
                    Ok(client) => {
                        client.list_all_tools().await.expect("listed");
                        client.cancel().await.expect("closes");
                    }
                    Err(error) => assert!(presented == WRONG_TOKEN, "the valid token failed: {error}"),
                }
            }
            stop.cancel();
        });
    });
    let logged = String::from_utf8(captured.0.lock().expect("capture").clone()).expect("utf-8");
    assert!(logged.contains("rmcp"), "the capture saw rmcp serve the requests");
    for canary in [secret.as_str(), "wrong-token-canary-never-logged-0b7e"] {
        assert!(!logged.contains(canary), "a token was logged");
    }
}
