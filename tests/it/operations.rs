//! Operations: `/healthz` and `/readyz` for load balancers, without a token; readiness follows
//! the TCP listener (accepting or not) and the solution (open, or gone from under the server);
//! JSON logs, one object a line with the connection's GUID and the call's id.

use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tserver::http_surface::{HttpConfig, serve};
use tserver::{Runtime, Server, ServerConfig};

use scripted_llm::{Reply, ScriptedLlm};
use service_client::{Client, ClientOptions};

use crate::support::{PATIENCE, ServerProcess, Solution, admin};

/// `GET path` on `addr`: the status and the body.
async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    let response = reqwest::get(format!("http://{addr}{path}"))
        .await
        .expect("the HTTP surface answers");
    let status = response.status().as_u16();
    (status, response.text().await.expect("a body"))
}

/// Polls `/readyz` until its status is `wanted`; returns the body.
async fn readyz_until(addr: std::net::SocketAddr, wanted: u16) -> Value {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let (status, body) = get(addr, "/readyz").await;
        if status == wanted {
            return serde_json::from_str(&body).expect("JSON");
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "/readyz never answered {wanted}: {status} {body}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn readiness_follows_the_listener_and_the_solution_and_health_needs_no_token() {
    let solution = Solution::demo();
    let runtime = Runtime::open(&solution.path).expect("opens");
    let server = Server::new(runtime.clone(), ServerConfig::default()).expect("server");
    let http_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let http = http_listener.local_addr().expect("address");
    let stop_http = CancellationToken::new();
    let config = HttpConfig {
        accepting: Some(server.accepting()),
        ..HttpConfig::default()
    };
    tokio::spawn(serve(http_listener, runtime.clone(), config, stop_http.clone()));

    // Healthy at once, without a token; not ready while the TCP listener does not accept.
    assert_eq!(get(http, "/healthz").await, (200, "ok\n".to_owned()));
    let (status, body) = get(http, "/readyz").await;
    assert_eq!(status, 503, "{body}");
    let body: Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(body["listener"], "not accepting");
    assert_eq!(body["solution"], "open");
    // Everything else still asks for a token.
    assert_eq!(get(http, "/mcp").await.0, 401);

    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let stop_tcp = CancellationToken::new();
    let serving = tokio::spawn(server.run(tcp, stop_tcp.clone()));
    let ready = readyz_until(http, 200).await;
    assert_eq!(ready["ready"], true);
    assert_eq!(ready["listener"], "accepting");

    // A solution file removed from under the server: not ready, saying why.
    std::fs::remove_file(&solution.path).expect("removes");
    assert!(runtime.db().check_file().is_some(), "noticed");
    let gone = readyz_until(http, 503).await;
    assert!(
        gone["solution"]
            .as_str()
            .is_some_and(|text| text.contains("was removed")),
        "{gone}"
    );

    // Shutting down: the listener stops accepting.
    stop_tcp.cancel();
    serving.await.expect("stops");
    let (status, body) = get(http, "/readyz").await;
    assert_eq!(status, 503);
    assert!(body.contains("\"not accepting\""), "{body}");
    stop_http.cancel();
}

#[test]
fn json_logs_are_one_object_a_line_carrying_the_connection_guid_and_the_call_id() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let llm = runtime
        .block_on(ScriptedLlm::start([Reply::text("Pump 1 runs.")]))
        .expect("llm");
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8");
    admin(&["settings", path, "set", "URL", &llm.url()], "");
    admin(&["settings", path, "set", "ModelEnabled", "true"], "");
    let served = ServerProcess::start(
        &solution.path,
        &["--log-format", "json"],
        &[("RUST_LOG", "debug")],
    );
    runtime.block_on(async {
        let client = Client::connect(served.addr, ClientOptions::default())
            .await
            .expect("connects");
        client.login("guest", "").await.expect("logs in");
        client.ping().await.expect("pongs");
        // The chat turn logs its model request (debug) inside its call.
        client.chat("How is Pump 1?").await.expect("answers");
        client.logout().await.expect("logs out");
    });
    let deadline = std::time::Instant::now() + PATIENCE;
    let lines = loop {
        let lines = served.log().lines;
        if lines.iter().any(|line| line.contains("logged out")) {
            break lines;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never logged out: {lines:#?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let events: Vec<Value> = lines
        .iter()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|error| panic!("{error}: {line}")))
        .collect();
    for event in &events {
        assert!(
            event["timestamp"].is_string() && event["level"].is_string() && event["message"].is_string(),
            "{event}"
        );
    }
    let logged_in = events
        .iter()
        .find(|event| event["message"] == "logged in")
        .expect("a login line");
    let spans = logged_in["spans"].as_array().expect("spans");
    assert!(
        spans
            .iter()
            .any(|span| span["name"] == "conn" && span["guid"].as_str().is_some_and(|guid| guid.len() == 36)),
        "{logged_in}"
    );
    // A line logged during a call names the call.
    assert!(
        events
            .iter()
            .any(|event| event["spans"].as_array().is_some_and(|spans| spans
                .iter()
                .any(|span| span["name"] == "call" && span["call_id"].is_number()))),
        "no line carries a call id: {events:#?}"
    );
}
