//! The 1-tool turn with the stand-in streaming its answers (the chat path asks for a stream),
//! then streamed on to the panel too: tserver's CPU per turn beside the plain turn, and the
//! time from the model's first chunk to the panel's first text.

use std::process::Command;

use serde_json::json;

use super::harness::Bench;
use super::report::{Results, calls, error_count, rps};
use super::tool_turns::tool_turns;
use super::verdicts::{self, Verdicts};
use crate::processes::{cpu_seconds, start_announcing};

/// Runs the three kinds of turn at 16 in flight, then the streamed panel at 1 and 16 in
/// flight; leaves the bench's model at `plain_url`.
pub(crate) fn run(
    bench: &Bench,
    plain_url: &str,
    turns: u64,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    let (_streaming_llm, streaming_url) = start_announcing(
        "scripted LLM (0 ms, one tool call per turn, streamed, stamped)",
        Command::new(bench.tool("scripted-llm")).args(["--mode", "tool", "--stream", "--stamp"]),
    )?;
    let mut cpu_per_turn = serde_json::Map::new();
    for (name, scenario, url) in [
        ("plain", "chat", plain_url),
        ("streamed model", "chat", &streaming_url),
        ("streamed model and panel", "chat-stream", &streaming_url),
    ] {
        bench.settings("URL", url)?;
        let before = cpu_seconds(bench.tserver_pid).unwrap_or(0.0);
        let run = tool_turns(bench, scenario, url, 16, turns)?;
        let spent = cpu_seconds(bench.tserver_pid).unwrap_or(0.0) - before;
        let us = spent * 1e6 / calls(&run.report);
        eprintln!(
            "{:<28} {:>9.0} calls/s  tserver CPU {us:>6.1} us/turn  errors {}",
            format!("tserver chat 1 tool {name}"),
            rps(&run.report),
            error_count(&run.report)
        );
        cpu_per_turn.insert(
            name.to_owned(),
            json!({"cpuUsPerTurn": us, "errors": error_count(&run.report)}),
        );
    }
    bench.settings("URL", &streaming_url)?;
    let mut first_text = serde_json::Map::new();
    for connections in [1, 16] {
        let run = tool_turns(bench, "chat-stream", &streaming_url, connections, turns)?;
        let quantile = |q: &str| run.report["firstTextUs"][q].as_f64().unwrap_or(f64::NAN);
        eprintln!(
            "{:<28} first text p50 {:>7.1} us  p99 {:>7.1} us  errors {}",
            format!("tserver chat-stream c={connections}"),
            quantile("p50"),
            quantile("p99"),
            error_count(&run.report)
        );
        if connections == 1 {
            verdicts.judge(
                "model's first chunk to the panel's first text, 1 in flight, p99".to_owned(),
                format!("{:.0} us (p50 {:.0} us)", quantile("p99"), quantile("p50")),
                verdicts::FIRST_TEXT,
                quantile("p99"),
                error_count(&run.report) == 0,
            );
        }
        first_text.insert(
            connections.to_string(),
            json!({"p50Us": quantile("p50"), "p99Us": quantile("p99"), "turns": run.report["firstTextUs"]["count"],
                   "errors": error_count(&run.report)}),
        );
    }
    results.insert(
        "model's first chunk to the panel's first text, by turns in flight",
        first_text.into(),
    );
    results.insert(
        "tserver CPU per 1-tool turn, plain, streamed model, streamed model and panel",
        cpu_per_turn.into(),
    );
    bench.settings("URL", plain_url)
}
