//! The proposal round trip: a chat turn whose model proposes an action, streamed to the panel
//! that asked (the proposal reaches it on the way, and in the reply), beside a plain 1-tool
//! turn streamed the same way, both at 1 in flight against 0 ms stand-ins.

use std::process::Command;

use serde_json::json;

use super::harness::Bench;
use super::report::{Results, error_count, latency, median};
use super::tool_turns::tool_turns;
use super::verdicts::{self, Verdicts};
use crate::processes::start_announcing;

/// Alternated rounds (plain, then proposing) the verdict takes its median ratio of.
const ROUNDS: usize = 3;

/// The bench solution's ModelOptions: the demo's bits, and proposals for this scenario only.
const DEMO_OPTIONS: &str = "0x9e";
const WITH_PROPOSALS: &str = "0xde";

/// Runs the rounds and judges the p99 ratio; leaves the bench's model at `plain_url` and its
/// ModelOptions as the demo's.
pub(crate) fn judge(
    bench: &Bench,
    plain_url: &str,
    turns: u64,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    let (_proposing_llm, proposing_url) = start_announcing(
        "scripted LLM (0 ms, one proposal per turn)",
        Command::new(bench.tool("scripted-llm")).args(["--mode", "propose"]),
    )?;
    bench.settings("ModelOptions", WITH_PROPOSALS)?;
    let mut ratios: Vec<f64> = Vec::with_capacity(ROUNDS);
    let mut rounds = Vec::with_capacity(ROUNDS);
    let mut errors = 0;
    for _ in 0..ROUNDS {
        bench.settings("URL", plain_url)?;
        let plain = tool_turns(bench, "chat-stream", plain_url, 1, turns)?;
        bench.settings("URL", &proposing_url)?;
        let proposing = tool_turns(bench, "propose", &proposing_url, 1, turns)?;
        errors += error_count(&plain.report) + error_count(&proposing.report);
        let (plain_p99, proposing_p99) = (latency(&plain.report, "p99"), latency(&proposing.report, "p99"));
        eprintln!(
            "{:<28} p99 {proposing_p99:>8.1} us  beside a plain 1-tool turn's {plain_p99:>8.1} us  errors {}",
            "tserver proposal round trip",
            error_count(&proposing.report)
        );
        ratios.push(proposing_p99 / plain_p99);
        rounds.push(json!({"plainP99Us": plain_p99, "proposingP99Us": proposing_p99,
                           "plainP50Us": latency(&plain.report, "p50"), "proposingP50Us": latency(&proposing.report, "p50"),
                           "errors": error_count(&plain.report) + error_count(&proposing.report)}));
    }
    bench.settings("URL", plain_url)?;
    bench.settings("ModelOptions", DEMO_OPTIONS)?;
    let ratio = median(ratios.into_iter());
    verdicts.judge(
        "proposal round trip (a turn that proposes, to the panel holding it), 1 in flight, p99".to_owned(),
        format!(
            "{ratio:.2}x a plain 1-tool turn's p99 (median of {ROUNDS} alternated rounds, {turns} turns each)"
        ),
        verdicts::PROPOSAL_ROUND_TRIP,
        ratio,
        errors == 0,
    );
    results.insert(
        "proposal round trip beside a plain 1-tool turn, 1 in flight",
        rounds.into(),
    );
    Ok(())
}
