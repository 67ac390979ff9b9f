//! The RuntimeMCP scenario of `cargo xtask bench`: `tools/call runtime_get_value` over
//! Streamable HTTP against the bench's tserver, at 1 and 16 calls in flight (one MCP session
//! each). The measuring side runs as `xtask mcp-bench` from the build of the bench's profile,
//! so the client is as optimized as the server.
//!
//! Two clients: `keep-alive` POSTs each JSON-RPC request on a kept-alive connection and reads
//! its SSE answer to the end, as curl, browsers and most MCP hosts do (the server's cost per
//! call); `rmcp` is rmcp's own client, which stops reading an answer's stream at the response
//! and so opens a new TCP connection for every call (what an rmcp-based host pays).

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use super::latencies::Latencies;
use super::report::Results;
use super::verdicts::{self, Verdicts};
use crate::processes::measuring_side;

/// Calls each session makes before its measurement starts.
const WARMUP_CALLS: usize = 20;

/// The protocol version the keep-alive client speaks.
const PROTOCOL_VERSION: &str = "2025-06-18";

/// Which client measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum McpClient {
    KeepAlive,
    Rmcp,
}

impl McpClient {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::KeepAlive => "keep-alive",
            Self::Rmcp => "rmcp",
        }
    }
}

/// Runs `xtask mcp-bench CLIENT URL TOKEN IN_FLIGHT SECONDS` (the binary `xtask`) and returns
/// its report.
pub(crate) fn run(
    xtask: &std::path::Path,
    client: McpClient,
    url: &str,
    token: &str,
    in_flight: usize,
    seconds: f64,
) -> anyhow::Result<Value> {
    measuring_side(
        xtask,
        "mcp-bench",
        &[
            client.name(),
            url,
            token,
            &in_flight.to_string(),
            &seconds.to_string(),
        ],
    )
}

/// `xtask mcp-bench CLIENT URL TOKEN IN_FLIGHT SECONDS`: prints a JSON report.
pub(crate) fn measure(args: &[String]) -> anyhow::Result<()> {
    let [client, url, token, in_flight, seconds] = args else {
        bail!("usage: xtask mcp-bench keep-alive|rmcp URL TOKEN IN_FLIGHT SECONDS");
    };
    let client = match client.as_str() {
        "keep-alive" => McpClient::KeepAlive,
        "rmcp" => McpClient::Rmcp,
        other => bail!("unknown MCP client {other:?}; known: keep-alive, rmcp"),
    };
    let in_flight: usize = in_flight.parse()?;
    let duration = Duration::try_from_secs_f64(seconds.parse()?)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let report = runtime.block_on(async {
        match client {
            McpClient::KeepAlive => {
                let mut sessions = Vec::with_capacity(in_flight);
                for _ in 0..in_flight {
                    sessions.push(KeepAliveSession::open(url, token).await?);
                }
                let results = futures::future::join_all(sessions.iter().map(|session| {
                    measure_session(duration, move || async move {
                        session.call_get_value().await.unwrap_or(false)
                    })
                }))
                .await;
                report(in_flight, &results)
            }
            McpClient::Rmcp => rmcp_calls(url, token, in_flight, duration).await,
        }
    })?;
    println!("{report}");
    Ok(())
}

/// One MCP session on a connection of its own, kept alive between calls.
struct KeepAliveSession {
    http: reqwest::Client,
    url: String,
    bearer: String,
    session: String,
    next_id: std::sync::atomic::AtomicU64,
}

impl KeepAliveSession {
    async fn open(url: &str, token: &str) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .tcp_nodelay(true)
            .build()
            .context("an HTTP client")?;
        let bearer = format!("Bearer {token}");
        let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "xtask mcp-bench", "version": "1"}}});
        let answer = http
            .post(url)
            .header("Authorization", &bearer)
            .header("Accept", "application/json, text/event-stream")
            .json(&initialize)
            .send()
            .await
            .context("initialize")?
            .error_for_status()?;
        let session = answer
            .headers()
            .get("mcp-session-id")
            .and_then(|value| value.to_str().ok())
            .context("no Mcp-Session-Id in the initialize answer")?
            .to_owned();
        answer.bytes().await?;
        let opened = Self {
            http,
            url: url.to_owned(),
            bearer,
            session,
            next_id: std::sync::atomic::AtomicU64::new(1),
        };
        opened
            .post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await?;
        Ok(opened)
    }

    /// POSTs one JSON-RPC message in the session and reads the answer to its end.
    async fn post(&self, message: Value) -> anyhow::Result<String> {
        let answer = self
            .http
            .post(&self.url)
            .header("Authorization", &self.bearer)
            .header("Accept", "application/json, text/event-stream")
            .header("Mcp-Session-Id", &self.session)
            .header("MCP-Protocol-Version", PROTOCOL_VERSION)
            .json(&message)
            .send()
            .await?
            .error_for_status()?;
        Ok(answer.text().await?)
    }

    /// One `tools/call runtime_get_value`: whether it succeeded.
    async fn call_get_value(&self) -> anyhow::Result<bool> {
        let id = self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let body = self
            .post(
                json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                "name": "runtime_get_value", "arguments": {"tag": "Tank1.Level"}}}),
            )
            .await?;
        // The SSE answer: a priming event, then the response as one `data:` line.
        let response = body
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
            .find(|message| message["id"] == id)
            .context("no response in the answer")?;
        Ok(response["result"]["isError"] == json!(false))
    }
}

/// What one session measured: latencies (ns), errors, and when it ran.
type SessionRun = (Vec<u64>, u64, Instant, Instant);

/// Calls `call` (true: it succeeded) after a warm-up until `duration` has passed.
async fn measure_session<F, C>(duration: Duration, mut call: C) -> SessionRun
where
    C: FnMut() -> F,
    F: std::future::Future<Output = bool>,
{
    for _ in 0..WARMUP_CALLS {
        call().await;
    }
    let first = Instant::now();
    let mut latencies = Vec::new();
    let mut errors = 0_u64;
    while first.elapsed() < duration {
        let sent = Instant::now();
        if call().await {
            latencies.push(u64::try_from(sent.elapsed().as_nanos()).unwrap_or(u64::MAX));
        } else {
            errors += 1;
        }
    }
    (latencies, errors, first, Instant::now())
}

async fn rmcp_calls(url: &str, token: &str, in_flight: usize, duration: Duration) -> anyhow::Result<Value> {
    let mut sessions = Vec::with_capacity(in_flight);
    for _ in 0..in_flight {
        let transport = StreamableHttpClientTransport::from_config(
            StreamableHttpClientTransportConfig::with_uri(url.to_owned()).auth_header(token.to_owned()),
        );
        sessions.push(().serve(transport).await.context("an MCP session initializes")?);
    }
    let mut arguments = JsonObject::new();
    arguments.insert("tag".to_owned(), json!("Tank1.Level"));
    let request = CallToolRequestParams::new("runtime_get_value").with_arguments(arguments);
    let results =
        futures::future::join_all(sessions.iter().map(|session| {
            let request = &request;
            measure_session(duration, move || {
                let request = request.clone();
                async move {
                    matches!(session.call_tool(request).await, Ok(result) if result.is_error != Some(true))
                }
            })
        }))
        .await;
    for session in sessions {
        let _ = session.cancel().await;
    }
    report(in_flight, &results)
}

/// The report of all sessions' runs.
fn report(in_flight: usize, results: &[SessionRun]) -> anyhow::Result<Value> {
    // From the first session's first measured call to the last one's end.
    let (Some(from), Some(until)) = (
        results.iter().map(|result| result.2).min(),
        results.iter().map(|result| result.3).max(),
    ) else {
        bail!("no session ran");
    };
    let elapsed = until.duration_since(from).as_secs_f64();
    let latencies: Latencies = results
        .iter()
        .flat_map(|result| result.0.iter().copied())
        .collect();
    let errors: u64 = results.iter().map(|result| result.1).sum();
    #[expect(clippy::cast_precision_loss, reason = "a call count")]
    let per_second = latencies.len() as f64 / elapsed.max(f64::EPSILON);
    let mut report = latencies.to_json();
    report["inFlight"] = in_flight.into();
    report["calls"] = latencies.len().into();
    report["errors"] = errors.into();
    report["callsPerSecond"] = per_second.into();
    Ok(report)
}

/// RuntimeMCP: tools/call runtime_get_value over Streamable HTTP at `url`, one MCP session per
/// call in flight; the verdicts from a client that keeps its connection alive, and rmcp's own
/// client (a new connection per call) beside it for what an rmcp-based host sees.
pub(crate) fn judge(
    xtask: &std::path::Path,
    (url, token): (&str, &str),
    seconds: f64,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    let mut runs = serde_json::Map::new();
    for (client, in_flight) in [
        (McpClient::KeepAlive, 1),
        (McpClient::KeepAlive, 16),
        (McpClient::Rmcp, 1),
        (McpClient::Rmcp, 16),
    ] {
        let report = run(xtask, client, url, token, in_flight, seconds)?;
        let (p50, p99, per_second) = (
            report["p50Us"].as_f64().unwrap_or(0.0),
            report["p99Us"].as_f64().unwrap_or(f64::INFINITY),
            report["callsPerSecond"].as_f64().unwrap_or(0.0),
        );
        let label = format!("MCP tools/call {} c={in_flight}", client.name());
        eprintln!(
            "{label:<28} {per_second:>9.0} calls/s  p50 {p50:>8.1} us  p99 {p99:>8.1} us  errors {}",
            report["errors"]
        );
        let clean = report["errors"].as_u64() == Some(0);
        match (client, in_flight) {
            (McpClient::KeepAlive, 1) => verdicts.judge(
                "MCP tools/call runtime_get_value, 1 in flight, p99".to_owned(),
                format!("{p99:.0} us (p50 {p50:.0} us), {per_second:.0} calls/s"),
                verdicts::MCP_P99,
                p99,
                clean,
            ),
            (McpClient::KeepAlive, _) => verdicts.judge(
                format!("MCP tools/call runtime_get_value, {in_flight} in flight"),
                format!("{per_second:.0} calls/s, p99 {p99:.0} us"),
                verdicts::MCP_RATE,
                per_second,
                clean,
            ),
            // rmcp's client is reported, not judged: its cost is the client's connections.
            (McpClient::Rmcp, _) => {}
        }
        runs.insert(label, report);
    }
    results.insert("mcp tools/call by client and calls in flight", runs.into());
    Ok(())
}
