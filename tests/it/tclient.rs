//! `tclient` against a real server, run in process through its command-line entry.

use clap::Parser;
use service_client::cli::{Cli, run};
use tserver::ServerConfig;

use crate::support::{Solution, TestServer, admin};

async fn tclient(args: &[&str], stdin: &str, interactive: bool) -> anyhow::Result<String> {
    let cli = Cli::try_parse_from(std::iter::once("tclient").chain(args.iter().copied()))?;
    let mut output = Vec::new();
    run(&cli, &mut stdin.as_bytes(), &mut output, interactive).await?;
    Ok(String::from_utf8(output).expect("utf-8"))
}

#[tokio::test]
async fn chat_prints_exactly_one_envelope_line() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let addr = server.addr.to_string();
    let out = tclient(
        &["--addr", &addr, "chat", "What is wrong with Pump 1?"],
        "",
        false,
    )
    .await
    .expect("a reply came back");
    assert_eq!(out.lines().count(), 1);
    let envelope = service_client::Envelope::from_json(out.trim_end()).expect("an envelope");
    assert_eq!(envelope.status, service_client::Status::Disabled);
    server.stop().await;
}

#[tokio::test]
async fn repl_without_a_terminal_answers_one_line_per_query_on_one_connection() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8 path");
    admin(&["users", path, "add", "operator"], "pw\n");
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let addr = server.addr.to_string();
    let out = tclient(
        &["--addr", &addr, "--user", "operator", "--password-stdin", "repl"],
        "pw\nfirst question\n\nsecond question\n",
        false,
    )
    .await
    .expect("replies");
    let lines: Vec<_> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    for line in lines {
        assert!(service_client::Envelope::from_json(line).is_ok(), "{line}");
    }
    server.stop().await;
}

#[tokio::test]
async fn interactive_repl_shows_status_and_warnings_readably() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let addr = server.addr.to_string();
    let out = tclient(&["--addr", &addr, "repl"], "status?\n\n", true)
        .await
        .expect("runs");
    assert!(out.contains("you> "), "{out}");
    assert!(
        out.contains("[warning] Local AI master kill-switch (ModelEnabled) is off."),
        "{out}"
    );
    assert!(out.contains("[disabled in 0 ms]"), "{out}");
    server.stop().await;
}

#[tokio::test]
async fn failures_are_errors_not_output() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let addr = server.addr.to_string();
    let refused = tclient(&["--addr", &addr, "--user", "ghost", "ping"], "", false).await;
    assert!(
        refused
            .expect_err("login refused")
            .to_string()
            .contains("login refused")
    );
    let ping = tclient(&["--addr", &addr, "ping"], "", false)
        .await
        .expect("pong");
    assert!(ping.starts_with("pong from"), "{ping}");
    server.stop().await;

    // Nothing listens on the stopped server's port any more.
    let unreachable = tclient(&["--addr", &addr, "ping"], "", false).await;
    assert!(
        unreachable
            .expect_err("cannot connect")
            .to_string()
            .contains("cannot connect")
    );
    assert!(
        tclient(&["--timeout-secs", "-1", "ping"], "", false)
            .await
            .is_err()
    );
}
