//! The proposing turn: from an operator's question to the reply of a turn whose one tool call
//! is a proposal, beside a plain 1-tool turn (question to reply), both streamed, at 1 in flight
//! against 0 ms stand-ins. Both make the same two model requests, so the ratio is the proposal's
//! own cost. When the proposal showed in the panel (streamed as it is made) is reported beside.

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
    let mut whole_turn_ratios: Vec<f64> = Vec::with_capacity(ROUNDS);
    let mut rounds = Vec::with_capacity(ROUNDS);
    let mut errors = 0;
    for _ in 0..ROUNDS {
        bench.settings("URL", plain_url)?;
        let plain = tool_turns(bench, "chat-stream", plain_url, 1, turns)?;
        bench.settings("URL", &proposing_url)?;
        let proposing = tool_turns(bench, "propose", &proposing_url, 1, turns)?;
        errors += error_count(&plain.report) + error_count(&proposing.report);
        let plain_p99 = latency(&plain.report, "p99");
        let seen = |quantile: &str| {
            proposing.report["proposalSeenUs"][quantile]
                .as_f64()
                .unwrap_or(f64::NAN)
        };
        let turn_p99 = latency(&proposing.report, "p99");
        eprintln!(
            "{:<28} p99 {:>8.1} us to the proposal, {turn_p99:>8.1} us to the reply; a plain 1-tool turn {plain_p99:>8.1} us  errors {}",
            "tserver proposal round trip",
            seen("p99"),
            error_count(&proposing.report)
        );
        ratios.push(seen("p99") / plain_p99);
        whole_turn_ratios.push(turn_p99 / plain_p99);
        rounds.push(json!({"plainP99Us": plain_p99, "plainP50Us": latency(&plain.report, "p50"),
                           "proposalSeenP99Us": seen("p99"), "proposalSeenP50Us": seen("p50"),
                           "proposingTurnP99Us": turn_p99, "proposingTurnP50Us": latency(&proposing.report, "p50"),
                           "errors": error_count(&plain.report) + error_count(&proposing.report)}));
    }
    bench.settings("URL", plain_url)?;
    bench.settings("ModelOptions", DEMO_OPTIONS)?;
    let seen = median(ratios.into_iter());
    let whole_turn = median(whole_turn_ratios.into_iter());
    verdicts.judge(
        "proposing turn (question to reply, one proposal), 1 in flight, p99".to_owned(),
        format!(
            "{whole_turn:.2}x a plain 1-tool turn's p99; the proposal showed in the panel at {seen:.2}x (medians of {ROUNDS} alternated rounds, {turns} turns each)"
        ),
        verdicts::PROPOSING_TURN,
        whole_turn,
        errors == 0,
    );
    results.insert(
        "proposal round trip beside a plain 1-tool turn, 1 in flight",
        rounds.into(),
    );
    Ok(())
}
