//! The RuntimeMCP scenario of `cargo xtask bench`: `tools/call runtime_get_value` over
//! Streamable HTTP against the bench's tserver, at 1 and 16 calls in flight (one MCP session
//! each), with rmcp's own client. The measuring side runs as `xtask mcp-bench` from the build
//! of the bench's profile, so the client is as optimized as the server.

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, JsonObject};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

/// Calls each session makes before its measurement starts.
const WARMUP_CALLS: usize = 20;

/// Runs `xtask mcp-bench URL TOKEN IN_FLIGHT SECONDS` (the binary `xtask`) and returns its
/// report.
pub(crate) fn run(
    xtask: &std::path::Path,
    url: &str,
    token: &str,
    in_flight: usize,
    seconds: f64,
) -> anyhow::Result<Value> {
    let output = Command::new(xtask)
        .args([
            "mcp-bench",
            url,
            token,
            &in_flight.to_string(),
            &seconds.to_string(),
        ])
        .output()
        .context("cannot run xtask mcp-bench")?;
    if !output.status.success() {
        bail!(
            "xtask mcp-bench failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(serde_json::from_slice(&output.stdout)?)
}

/// `xtask mcp-bench URL TOKEN IN_FLIGHT SECONDS`: prints a JSON report.
pub(crate) fn measure(args: &[String]) -> anyhow::Result<()> {
    let [url, token, in_flight, seconds] = args else {
        bail!("usage: xtask mcp-bench URL TOKEN IN_FLIGHT SECONDS");
    };
    let in_flight: usize = in_flight.parse()?;
    let duration = Duration::try_from_secs_f64(seconds.parse()?)?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let report = runtime.block_on(calls(url, token, in_flight, duration))?;
    println!("{report}");
    Ok(())
}

async fn calls(url: &str, token: &str, in_flight: usize, duration: Duration) -> anyhow::Result<Value> {
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
    let workers = sessions.iter().map(|session| {
        let request = request.clone();
        async move {
            for _ in 0..WARMUP_CALLS {
                let _ = session.call_tool(request.clone()).await;
            }
            let first = Instant::now();
            let mut latencies = Vec::new();
            let mut errors = 0_u64;
            while first.elapsed() < duration {
                let sent = Instant::now();
                match session.call_tool(request.clone()).await {
                    Ok(result) if result.is_error != Some(true) => {
                        latencies.push(u64::try_from(sent.elapsed().as_nanos()).unwrap_or(u64::MAX));
                    }
                    _ => errors += 1,
                }
            }
            (latencies, errors, first, Instant::now())
        }
    });
    let results = futures::future::join_all(workers).await;
    for session in sessions {
        let _ = session.cancel().await;
    }
    // From the first session's first measured call to the last one's end.
    let (Some(from), Some(until)) = (
        results.iter().map(|result| result.2).min(),
        results.iter().map(|result| result.3).max(),
    ) else {
        bail!("no session ran");
    };
    let elapsed = until.duration_since(from).as_secs_f64();
    let mut latencies: Vec<u64> = results
        .iter()
        .flat_map(|result| result.0.iter().copied())
        .collect();
    let errors: u64 = results.iter().map(|result| result.1).sum();
    latencies.sort_unstable();
    let quantile = |q: f64| -> f64 {
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss,
            reason = "an index into the samples"
        )]
        let index = ((latencies.len() as f64 - 1.0) * q).round() as usize;
        latencies.get(index).map_or(0.0, |nanos| *nanos as f64 / 1000.0)
    };
    #[expect(clippy::cast_precision_loss, reason = "a call count")]
    let per_second = latencies.len() as f64 / elapsed.max(f64::EPSILON);
    Ok(json!({
        "inFlight": in_flight,
        "calls": latencies.len(),
        "errors": errors,
        "callsPerSecond": per_second,
        "p50Us": quantile(0.5),
        "p99Us": quantile(0.99),
    }))
}
