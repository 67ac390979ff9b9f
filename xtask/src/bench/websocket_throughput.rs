//! Ping and chat over the WebSocket (`/ws`, JSON text messages) beside the same load over TCP
//! (framed protobuf, `tclient bench`), against the same tserver and the same stand-in model in
//! the same run: the WebSocket's calls/s over TCP's.

use serde_json::Value;

use super::harness::Bench;
use super::report::{Results, error_count, rps, strings};
use super::tool_turns::{ONE_TOOL_QUESTION, turns_at};
use super::verdicts::{self, Verdicts};
use crate::processes::measuring_side;

/// Connections of both loads, one call in flight each.
const CONNECTIONS: usize = 16;

/// The most calls a timed load makes (its bound in count), and the most seconds a counted load
/// runs (its bound in time).
const COUNT_BOUND: u64 = 10_000_000;
const SECONDS_BOUND: f64 = 120.0;

/// Ping for the plan's duration, then `turns` 1-tool chat turns against the model the bench's
/// tserver is set to, each over TCP and then over the WebSocket at `http_addr`.
pub(crate) fn run(
    bench: &Bench,
    http_addr: &str,
    turns: u64,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    let seconds = |text: &str| super::report::parse_duration(text).map(|duration| duration.as_secs_f64());
    let tcp_ping = bench.client(
        &bench.tserver_addr,
        &strings(&bench.timed("ping", CONNECTIONS, &[])),
    )?;
    let ws_ping = websocket_load(
        bench,
        http_addr,
        "ping",
        COUNT_BOUND,
        seconds(bench.duration)?,
        seconds(bench.warmup)?,
    )?;
    judge("ping", &tcp_ping, &ws_ping, results, verdicts);
    let tcp_chat = turns_at(bench, &bench.tserver_addr, "chat", CONNECTIONS, turns)?;
    let ws_chat = websocket_load(bench, http_addr, ONE_TOOL_QUESTION, turns, SECONDS_BOUND, 0.0)?;
    judge("chat 1 tool", &tcp_chat, &ws_chat, results, verdicts);
    Ok(())
}

/// `xtask websocket-bench load ...`: its report, in `tclient bench`'s shape.
fn websocket_load(
    bench: &Bench,
    http_addr: &str,
    call: &str,
    count: u64,
    seconds: f64,
    warmup: f64,
) -> anyhow::Result<Value> {
    measuring_side(
        &bench.tool("xtask"),
        "websocket-bench",
        &[
            "load",
            http_addr,
            call,
            &CONNECTIONS.to_string(),
            &count.to_string(),
            &seconds.to_string(),
            &warmup.to_string(),
        ],
    )
}

/// Records both loads and judges the WebSocket's calls/s over TCP's.
fn judge(what: &str, tcp: &Value, ws: &Value, results: &mut Results, verdicts: &mut Verdicts) {
    results.record(format!("tserver {what} TCP c={CONNECTIONS}"), tcp);
    results.record(format!("tserver {what} /ws c={CONNECTIONS}"), ws);
    let ratio = rps(ws) / rps(tcp);
    verdicts.judge(
        format!("{what} over /ws (JSON) vs TCP, {CONNECTIONS} connections"),
        format!("{:.0} vs {:.0} calls/s = {ratio:.2}x", rps(ws), rps(tcp)),
        verdicts::WEBSOCKET_RATE,
        ratio,
        error_count(tcp) == 0 && error_count(ws) == 0,
    );
}
