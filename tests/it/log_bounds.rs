//! What clients can make the server write to its log: bounded lines, a flat log context, a
//! per-connection allowance and one for all addresses, and nothing of what an MCP client sends
//! (no session id either), whatever they send.

use std::time::Duration;

use tserver_proto::PROTOCOL_VERSION;
use tserver_proto::v1::{Hello, Ping, client_frame, server_frame};

use crate::support::{RawConnection, ServerProcess, Solution};

/// How many re-Hellos the client sends, each with a huge client name.
const RE_HELLOS: u64 = 2_000;

#[tokio::test]
async fn re_hellos_with_huge_client_names_cannot_fill_the_log() {
    let solution = Solution::demo();
    let server = ServerProcess::start(&solution.path, &[], &[]);
    let mut raw = RawConnection::guest(server.addr).await;
    let huge_name = format!("panel\nforged log line {}", "x".repeat(100_000));
    for call_id in 0..RE_HELLOS {
        raw.send(
            call_id + 10,
            client_frame::Body::Hello(Hello {
                protocol_version: PROTOCOL_VERSION,
                client_name: huge_name.clone(),
                // User names match case-insensitively: every one of these logs in.
                user_name: if call_id % 2 == 0 { "guest" } else { "GUEST" }.to_owned(),
                password: String::new(),
            }),
        )
        .await;
    }
    raw.send(1, client_frame::Body::Ping(Ping { nonce: 7 })).await;
    let mut hellos = 0_u64;
    let mut refused = 0_u64;
    loop {
        let Some(frame) = raw.receive().await else {
            break;
        };
        match frame.body {
            Some(server_frame::Body::Hello(_)) => hellos += 1,
            Some(server_frame::Body::Pong(_)) => break,
            _ => {
                refused += 1;
                break;
            }
        }
    }
    assert_eq!(
        (hellos, refused),
        (RE_HELLOS, 0),
        "every re-Hello was answered, then the Ping"
    );
    // The log is written by another thread of the process: give it a moment.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let log = server.log();
    let longest = log.lines.iter().map(String::len).max().unwrap_or(0);
    assert!(longest < 1_000, "a log line of {longest} bytes");
    assert!(
        log.bytes < 32 * 1024,
        "{} log bytes for one connection's {hellos} logins",
        log.bytes
    );
    assert!(
        log.lines.iter().any(|line| line.contains("counted, not written")),
        "the suppression is said once: {:#?}",
        log.lines
    );
    assert!(
        !log.lines.iter().any(|line| line.starts_with("forged")),
        "a newline in a client name cannot start a log line"
    );
    let login_lines: Vec<&String> = log
        .lines
        .iter()
        .filter(|line| line.contains("logged in"))
        .collect();
    assert!(!login_lines.is_empty());
    for line in login_lines {
        assert_eq!(line.matches("user=").count(), 1, "a flat log context: {line}");
    }
}

/// Failed logins from many addresses (each is locked out after a few, but addresses are
/// many): their warnings share one allowance.
#[tokio::test]
async fn failed_logins_from_many_addresses_are_logged_within_one_allowance() {
    const ADDRESSES: u8 = 100;
    let solution = Solution::demo();
    let started = std::time::Instant::now();
    let server = ServerProcess::start(&solution.path, &[], &[]);
    for last in 2..2 + ADDRESSES {
        let source = std::net::IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, last));
        let mut raw = RawConnection::connect_from(source, server.addr).await;
        raw.send(
            1,
            client_frame::Body::Hello(Hello {
                protocol_version: PROTOCOL_VERSION,
                client_name: "panel".to_owned(),
                user_name: format!("nobody\nforged {}", "x".repeat(200)),
                password: "wrong".to_owned(),
            }),
        )
        .await;
        let reply = raw.receive().await.expect("an answer");
        assert!(
            !matches!(reply.body, Some(server_frame::Body::Hello(_))),
            "refused"
        );
    }
    let minutes = started.elapsed().as_secs() / 60 + 1;
    // The log is written by another thread of the process: give it a moment.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let log = server.log();
    let refused = log
        .lines
        .iter()
        .filter(|line| line.contains("login refused"))
        .count();
    assert!(refused > 0, "refusals are logged");
    assert!(
        refused as u64 <= 20 * minutes,
        "{refused} refused-login lines from {ADDRESSES} addresses in {minutes} minute(s)"
    );
    assert!(
        log.lines.iter().any(|line| line.contains("counted, not written")),
        "the suppression is said"
    );
    let longest = log.lines.iter().map(String::len).max().unwrap_or(0);
    assert!(longest < 1_000, "a log line of {longest} bytes");
}

/// What a hostile MCP client sends: huge `clientInfo`, huge method names and ids, huge
/// notifications. Every log line stays short, the log small, and no session id is logged.
#[tokio::test]
async fn hostile_mcp_requests_cannot_fill_the_log_and_session_ids_are_never_logged() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    let token = crate::support::admin(&["tokens", &path, "create", "--user", "guest"], "")
        .trim()
        .to_owned();
    let http = tserver_tests::haproxy::free_loopback_addr();
    let http_arg = http.to_string();
    let server = ServerProcess::start(&solution.path, &["--http", &http_arg], &[]);
    let client = reqwest::Client::new();
    let url = format!("http://{http}/mcp");
    let post = |body: String, session: Option<&str>| {
        let mut request = client
            .post(&url)
            .bearer_auth(&token)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2025-06-18")
            .body(body);
        if let Some(session) = session {
            request = request.header("Mcp-Session-Id", session);
        }
        request.send()
    };
    let huge = "x".repeat(1024 * 1024);
    let mut sessions = Vec::new();
    for _ in 0..10 {
        let initialize = serde_json::json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": format!("forged\nline {huge}"), "version": huge}},
        });
        let response = post(initialize.to_string(), None).await.expect("answers");
        assert_eq!(response.status(), 200);
        let session = response.headers()["mcp-session-id"]
            .to_str()
            .expect("text")
            .to_owned();
        response.text().await.expect("the whole answer");
        let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        let response = post(initialized.to_owned(), Some(&session))
            .await
            .expect("answers");
        assert_eq!(response.status(), 202);
        sessions.push(session);
    }
    let session = sessions[0].clone();
    for index in 0..20 {
        let unknown = serde_json::json!({
            "jsonrpc": "2.0", "id": format!("{index}{huge}"), "method": format!("no/such\n{huge}"),
        });
        let response = post(unknown.to_string(), Some(&session)).await.expect("answers");
        response.text().await.expect("the whole answer");
        let notification = serde_json::json!({
            "jsonrpc": "2.0", "method": format!("notifications/{huge}"), "params": {"x": huge},
        });
        let response = post(notification.to_string(), Some(&session))
            .await
            .expect("answers");
        response.text().await.expect("the whole answer");
        let cancelled = serde_json::json!({
            "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": huge, "reason": huge},
        });
        let response = post(cancelled.to_string(), Some(&session))
            .await
            .expect("answers");
        response.text().await.expect("the whole answer");
    }
    // The log is written by another thread of the process: give it a moment.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let log = server.log();
    let longest = log.lines.iter().map(String::len).max().unwrap_or(0);
    assert!(longest < 1_000, "a log line of {longest} bytes");
    assert!(
        log.bytes < 32 * 1024,
        "{} log bytes for 70 hostile MCP requests",
        log.bytes
    );
    for session in &sessions {
        assert!(
            !log.lines.iter().any(|line| line.contains(session.as_str())),
            "a session id in the log: {:#?}",
            log.lines
        );
    }
    assert!(
        !log.lines.iter().any(|line| line.starts_with("line")
            || line.contains("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx")),
        "no client text of any length in the log: {:#?}",
        log.lines
    );
}
