//! The RuntimeMCP scenario of `cargo xtask bench` (`--only mcp`): `tools/call
//! runtime_get_value` over Streamable HTTP against the bench's tserver, at 1 and 16 calls in
//! flight (one MCP session each); the same call at 1 in flight beside the MCP baseline build,
//! one client calling each in turn; and `resources/read tserver://plant/model` of a 10,000-tag
//! plant. The
//! measuring side runs as `xtask mcp-bench` from the build of the bench's profile, so the client
//! is as optimized as the server.
//!
//! Two clients: `keep-alive` POSTs each JSON-RPC request on a kept-alive connection and reads
//! its SSE answer to the end, as curl, browsers and most MCP hosts do (the server's cost per
//! call); `rmcp` is rmcp's own client, which stops reading an answer's stream at the response
//! and so opens a new TCP connection for every call (what an rmcp-based host pays).
//! `read-model` is the keep-alive client reading the plant model.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use super::harness::{fresh_solution, mcp_token, serve};
use super::latencies::Latencies;
use super::report::{Results, median};
use super::verdicts::{self, Verdicts};
use crate::processes::{Process, free_port, measuring_side};

/// Rounds of the baseline comparison, the two builds called in turn within each.
const BASELINE_ROUNDS: usize = 5;

/// The resource the plant model row reads.
const PLANT_MODEL: &str = "tserver://plant/model";

/// Calls each session makes before its measurement starts.
const WARMUP_CALLS: usize = 20;

/// The protocol version the keep-alive client speaks.
const PROTOCOL_VERSION: &str = "2025-06-18";

/// Which client measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum McpClient {
    KeepAlive,
    Rmcp,
    /// The keep-alive client reading the plant model instead of calling a tool.
    ReadModel,
}

impl McpClient {
    const ALL: [Self; 3] = [Self::KeepAlive, Self::Rmcp, Self::ReadModel];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::KeepAlive => "keep-alive",
            Self::Rmcp => "rmcp",
            Self::ReadModel => "read-model",
        }
    }
}

/// Runs `xtask mcp-bench CLIENT URL TOKEN IN_FLIGHT SECONDS` (the binary `xtask`) and returns
/// its report.
pub(crate) fn run(
    xtask: &Path,
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
    if let [pair, first_url, first_token, second_url, second_token, seconds] = args
        && pair == "pair"
    {
        let duration = Duration::try_from_secs_f64(seconds.parse()?)?;
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
        let report = runtime.block_on(pair_calls(
            [(first_url, first_token), (second_url, second_token)],
            duration,
        ))?;
        println!("{report}");
        return Ok(());
    }
    let [client, url, token, in_flight, seconds] = args else {
        bail!(
            "usage: xtask mcp-bench keep-alive|rmcp|read-model URL TOKEN IN_FLIGHT SECONDS, or \
             xtask mcp-bench pair URL TOKEN URL TOKEN SECONDS"
        );
    };
    let Some(client) = McpClient::ALL.into_iter().find(|known| known.name() == client) else {
        bail!("unknown MCP client {client:?}; known: keep-alive, rmcp, read-model");
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
            McpClient::ReadModel => {
                let session = KeepAliveSession::open(url, token).await?;
                let model = session.model().await?;
                let bytes = std::sync::atomic::AtomicUsize::new(0);
                let run = measure_session(duration, || async {
                    let read = session.read_model().await;
                    if let Ok(size) = read {
                        bytes.store(size, std::sync::atomic::Ordering::Relaxed);
                    }
                    read.is_ok()
                })
                .await;
                let mut report = report(1, &[run])?;
                report["answerBytes"] = bytes.into_inner().into();
                report["modelBytes"] = model.1.into();
                let model = model.0;
                report["tagCount"] = model["tagCount"].clone();
                report["tagsLeft"] = model["tagsLeft"].clone();
                report["truncated"] = model["truncated"].clone();
                Ok(report)
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

    /// One request of `method` with `params`: its id and the whole SSE answer.
    async fn request(&self, method: &str, params: Value) -> anyhow::Result<(u64, String)> {
        let id = self.next_id.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let body = self
            .post(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        Ok((id, body))
    }

    /// One `tools/call runtime_get_value`: whether it succeeded.
    async fn call_get_value(&self) -> anyhow::Result<bool> {
        let (id, body) = self
            .request(
                "tools/call",
                json!({"name": "runtime_get_value", "arguments": {"tag": "Tank1.Level"}}),
            )
            .await?;
        let response = response(&body, id).context("no response in the answer")?;
        Ok(response["result"]["isError"] == json!(false))
    }

    /// One `resources/read` of the plant model, answered whole: the answer's size. The answer
    /// is checked for its id and contents, not parsed: the latency is the server's and the
    /// wire's, not this client's JSON parser's on megabytes.
    async fn read_model(&self) -> anyhow::Result<usize> {
        let (id, body) = self
            .request("resources/read", json!({"uri": PLANT_MODEL}))
            .await?;
        let answered = body.contains(&format!("\"id\":{id}")) && body.contains("\"contents\"");
        if !answered || body.contains("\"error\"") {
            bail!("no plant model in the answer to read {id}");
        }
        Ok(body.len())
    }

    /// The plant model as it reads, parsed once before the measurement, and its size.
    async fn model(&self) -> anyhow::Result<(Value, usize)> {
        let (id, body) = self
            .request("resources/read", json!({"uri": PLANT_MODEL}))
            .await?;
        let response = response(&body, id).context("no response to the plant model's read")?;
        let text = response["result"]["contents"][0]["text"]
            .as_str()
            .with_context(|| format!("the plant model reads as no text: {response}"))?;
        Ok((serde_json::from_str(text)?, text.len()))
    }
}

/// The response with `id` in an SSE answer: a priming event, then the response as one `data:`
/// line.
fn response(body: &str, id: u64) -> Option<Value> {
    body.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(|message| message["id"] == id)
}

/// `tools/call runtime_get_value` on two servers in turn, one call at a time, one kept-alive
/// session each, for `duration` after a warm-up: each server's latencies over the same
/// stretch of time, so whatever else the machine does falls on both alike.
async fn pair_calls(servers: [(&String, &String); 2], duration: Duration) -> anyhow::Result<Value> {
    let first = KeepAliveSession::open(servers[0].0, servers[0].1).await?;
    let second = KeepAliveSession::open(servers[1].0, servers[1].1).await?;
    let sessions = [&first, &second];
    for _ in 0..WARMUP_CALLS {
        for session in sessions {
            session.call_get_value().await?;
        }
    }
    let mut latencies: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
    let mut errors = [0_u64; 2];
    let started = Instant::now();
    let mut turn = 0_usize;
    while started.elapsed() < duration {
        // Which goes first alternates, so neither always follows the other.
        for index in [turn % 2, (turn + 1) % 2] {
            let sent = Instant::now();
            if sessions[index].call_get_value().await.unwrap_or(false) {
                latencies[index].push(u64::try_from(sent.elapsed().as_nanos()).unwrap_or(u64::MAX));
            } else {
                errors[index] += 1;
            }
        }
        turn += 1;
    }
    let [first, second] = [0, 1].map(|index| {
        let mut report = latencies[index].iter().copied().collect::<Latencies>().to_json();
        report["errors"] = errors[index].into();
        report
    });
    Ok(json!({"first": first, "second": second}))
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
    xtask: &Path,
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
            (McpClient::Rmcp | McpClient::ReadModel, _) => {}
        }
        runs.insert(label, report);
    }
    results.insert("mcp tools/call by client and calls in flight", runs.into());
    Ok(())
}

/// A tserver serving RuntimeMCP on a fresh solution of its own.
struct McpServer {
    _process: Process,
    url: String,
    token: String,
}

impl McpServer {
    /// `bin`'s tserver on a fresh solution `name` in `out_dir` with `plant` (the demo's when
    /// none), served as the bench serves tserver.
    fn start(bin: &Path, out_dir: &Path, name: &str, plant: Option<&str>) -> anyhow::Result<Self> {
        let solution = fresh_solution(bin, out_dir, name, plant)?;
        let token = mcp_token(bin, &solution)?;
        let addr = format!("127.0.0.1:{}", free_port()?);
        let http = format!("127.0.0.1:{}", free_port()?);
        let log = std::fs::File::create(out_dir.join(format!("tserver-{name}.log")))?;
        let process = serve(bin, &solution, &addr, &http, &[], log)?;
        Ok(Self {
            _process: process,
            url: format!("http://{http}/mcp"),
            token,
        })
    }
}

/// `tools/call runtime_get_value` at 1 in flight, tserver's p99 over the MCP baseline build's
/// (built from `repository`; not in a `smoke` run): the median of rounds in which one client
/// calls each in turn, both on a fresh demo solution served alike.
pub(crate) fn judge_beside_baseline(
    (xtask, bin): (&Path, &Path),
    (out_dir, repository): (&Path, &Path),
    (seconds, smoke): (f64, bool),
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    let what = "MCP tools/call p99 at 1 in flight over the MCP baseline's".to_owned();
    if smoke {
        verdicts.unjudged(
            what,
            "not built in a smoke run".to_owned(),
            verdicts::MCP_BESIDE_BASELINE,
        );
        return Ok(());
    }
    let baseline = super::baseline::mcp_baseline(repository, &out_dir.join("baseline-mcp"))?;
    let baseline_bin = baseline
        .parent()
        .context("the baseline's tserver is in a directory")?;
    let then = McpServer::start(baseline_bin, out_dir, "mcp-baseline", None)?;
    let now = McpServer::start(bin, out_dir, "mcp-now", None)?;
    let mut rounds = Vec::with_capacity(BASELINE_ROUNDS);
    let mut errors = 0;
    let round_seconds = (seconds * 2.0).to_string();
    for _ in 0..BASELINE_ROUNDS {
        let report = measuring_side(
            xtask,
            "mcp-bench",
            &[
                "pair",
                &then.url,
                &then.token,
                &now.url,
                &now.token,
                &round_seconds,
            ],
        )?;
        let (baseline, tserver) = (&report["first"], &report["second"]);
        errors += baseline["errors"].as_u64().unwrap_or(1) + tserver["errors"].as_u64().unwrap_or(1);
        rounds.push(
            json!({"tserverP99Us": tserver["p99Us"], "tserverP50Us": tserver["p50Us"],
                           "baselineP99Us": baseline["p99Us"], "baselineP50Us": baseline["p50Us"]}),
        );
    }
    let at = |round: &Value, key: &str| round[key].as_f64().unwrap_or(f64::NAN);
    let ratio = median(
        rounds
            .iter()
            .map(|round| at(round, "tserverP99Us") / at(round, "baselineP99Us")),
    );
    let middle = |key: &str| median(rounds.iter().map(|round| at(round, key)));
    let (tserver_p99, baseline_p99) = (middle("tserverP99Us"), middle("baselineP99Us"));
    eprintln!(
        "{:<28} p99 {tserver_p99:>8.1} us beside the MCP baseline's {baseline_p99:.1} us: {ratio:.3}x (median of {BASELINE_ROUNDS} rounds)  errors {errors}",
        "MCP tools/call c=1"
    );
    results.insert(
        "mcp tools/call beside the MCP baseline (commit 2b86ae77), rounds at 1 in flight",
        json!({"rounds": rounds, "ratioP99": ratio, "errors": errors}),
    );
    verdicts.judge(
        what,
        format!(
            "{ratio:.3}x ({tserver_p99:.0} us / {baseline_p99:.0} us, median of {BASELINE_ROUNDS} rounds; p50 {:.0} us / {:.0} us)",
            middle("tserverP50Us"),
            middle("baselineP50Us")
        ),
        verdicts::MCP_BESIDE_BASELINE,
        ratio,
        errors == 0,
    );
    Ok(())
}

/// `resources/read tserver://plant/model` of a 10,000-tag plant (the overview bench's: 100
/// equipment of 100 tags with units, ranges and alarms) at 1 in flight: its p99 and its size.
pub(crate) fn judge_plant_model(
    (xtask, bin): (&Path, &Path),
    out_dir: &Path,
    seconds: f64,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    let plant = super::panel_overview::plant();
    let server = McpServer::start(bin, out_dir, "mcp-model", Some(&plant))?;
    let report = run(
        xtask,
        McpClient::ReadModel,
        &server.url,
        &server.token,
        1,
        seconds,
    )?;
    drop(server);
    let (p50, p99) = (
        report["p50Us"].as_f64().unwrap_or(f64::NAN) / 1_000.0,
        report["p99Us"].as_f64().unwrap_or(f64::NAN) / 1_000.0,
    );
    #[expect(clippy::cast_precision_loss, reason = "sizes in bytes")]
    let [mib, wire_mib] = ["modelBytes", "answerBytes"]
        .map(|key| report[key].as_u64().unwrap_or(u64::MAX) as f64 / (1024.0 * 1024.0));
    let whole = report["truncated"] == json!(false) && report["tagsLeft"] == json!(0);
    eprintln!(
        "{:<28} p99 {p99:.1} ms (p50 {p50:.1}), {mib:.2} MiB ({wire_mib:.2} MiB on the wire), {} tags, truncated {}  errors {}",
        "MCP read plant model", report["tagCount"], report["truncated"], report["errors"]
    );
    verdicts.judge(
        "MCP resources/read tserver://plant/model, 10,000 tags, p99".to_owned(),
        format!(
            "{p99:.1} ms (p50 {p50:.1} ms); {mib:.2} MiB of model, {wire_mib:.2} MiB on the wire, {} tags, none left out",
            report["tagCount"]
        ),
        verdicts::MCP_PLANT_MODEL,
        p99,
        report["errors"].as_u64() == Some(0) && whole && mib <= 4.0,
    );
    results.insert("mcp resources/read of the plant model (10,000 tags)", report);
    Ok(())
}
