//! The 1-tool turn at fewer turns in flight (1, 4, 16): where queueing for the cores sets in,
//! and at 1 in flight the latency tserver adds to a turn, judged beside the baseline build and
//! set beside the do-nothing relay's.

use anyhow::Context;
use serde_json::{Value, json};

use super::baseline::Baseline;
use super::harness::Bench;
use super::ping::ReferencePing;
use super::plan::Plan;
use super::report::{Results, calls, error_count, median, rps};
use super::tool_turns::{ToolRun, ToolTurns, tool_turns, tool_turns_at};
use super::verdicts::{self, Verdicts};
use crate::processes::cpu_seconds;

/// Alternated rounds of 1-tool turns at 1 in flight, tserver's and the baseline build's, the
/// added-latency verdict takes its median of.
const LATENCY_ROUNDS: usize = 3;

/// Where the 1-in-flight turns go: the bench, the stand-in model and turns per run.
#[derive(Debug, Clone, Copy)]
struct Turns<'a> {
    bench: &'a Bench,
    llm_url: &'a str,
    count: u64,
}

/// Runs the turn at 1, 4 and 16 in flight and judges the added latency at 1.
pub(crate) fn run(
    bench: &Bench,
    llm_url: &str,
    plan: &Plan,
    tool: &ToolTurns,
    reference_ping: ReferencePing,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    let turns = plan.tool_turns / 2;
    let mut by_in_flight = serde_json::Map::new();
    for connections in [1, 4, 16] {
        let cpu_before = cpu_seconds(bench.tserver_pid).context("tserver's CPU time is unreadable")?;
        let fewer = tool_turns(bench, "chat", llm_url, connections, turns)?;
        let cpu_us =
            (cpu_seconds(bench.tserver_pid).context("tserver's CPU time is unreadable")? - cpu_before) * 1e6
                / calls(&fewer.report);
        eprintln!(
            "{:<28} {:>9.0} calls/s  added p50 {:>8.1} us  p99 {:>8.1} us  tserver CPU {cpu_us:>5.1} us/turn  errors {}",
            format!("tserver chat 1 tool c={connections}"),
            rps(&fewer.report),
            fewer.added("p50"),
            fewer.added("p99"),
            error_count(&fewer.report)
        );
        if connections == 1 {
            one_in_flight(
                Turns {
                    bench,
                    llm_url,
                    count: turns,
                },
                tool,
                &fewer,
                reference_ping,
                results,
                verdicts,
            )?;
        }
        by_in_flight.insert(connections.to_string(), by_in_flight_row(&fewer, cpu_us));
    }
    by_in_flight.insert("64".to_owned(), by_in_flight_row(&tool.warm, tool.cpu_per_turn));
    results.insert(
        "added latency of a 1-tool turn by turns in flight",
        by_in_flight.into(),
    );
    Ok(())
}

fn by_in_flight_row(run: &ToolRun, cpu_us: f64) -> Value {
    json!({"turnsPerSecond": rps(&run.report), "errors": error_count(&run.report), "addedP50Us": run.added("p50"),
           "addedP99Us": run.added("p99"), "modelServerUsPerTurn": run.llm_time_us(), "tserverCpuUsPerTurn": cpu_us})
}

/// The added-latency row at 1 in flight: tserver's run `ours` beside the same turns through the
/// relay (the latency the crossings add by themselves) and the baseline build's.
fn one_in_flight(
    turns: Turns<'_>,
    tool: &ToolTurns,
    ours: &ToolRun,
    reference_ping: ReferencePing,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    let (relayed, relay_cpu_us) = tool.relay.turns(turns.bench, turns.llm_url, 1, turns.count)?;
    let beside = format!(
        "the reference ping's p99 {:.0} us ({:.2}x); a do-nothing relay's added p99 {:.0} us (p50 {:.0} us, {relay_cpu_us:.0} us CPU per turn), tserver's {:.0} us over it",
        reference_ping.p99_1,
        ours.added("p99") / reference_ping.p99_1,
        relayed.added("p99"),
        relayed.added("p50"),
        ours.added("p99") - relayed.added("p99"),
    );
    let what = "added latency of a 1-tool turn, 1 in flight, p99".to_owned();
    match &tool.baseline {
        None => verdicts.unjudged(
            what,
            format!(
                "{:.0} us (p50 {:.0} us); {beside}; the baseline build is not built in a smoke run",
                ours.added("p99"),
                ours.added("p50")
            ),
            verdicts::TURN_LATENCY,
        ),
        Some(baseline) => {
            let errors = error_count(&ours.report) + error_count(&relayed.report);
            beside_baseline(turns, baseline, ours, errors, &beside, verdicts)?;
        }
    }
    results.insert(
        "do-nothing relay of a 1-tool turn, 1 in flight",
        json!({"turnsPerSecond": rps(&relayed.report), "errors": error_count(&relayed.report),
               "addedP50Us": relayed.added("p50"), "addedP99Us": relayed.added("p99"),
               "modelServerUsPerTurn": relayed.llm_time_us(), "postsPerTurn": relayed.posts_per_turn,
               "bodyBytes": relayed.body_bytes, "cpuUsPerTurn": relay_cpu_us}),
    );
    Ok(())
}

/// Alternated rounds, tserver's first being `ours`: a p99 over a few thousand turns moves with
/// the VM's minute as much as the CPU row does.
fn beside_baseline(
    turns: Turns<'_>,
    baseline: &Baseline,
    ours: &ToolRun,
    mut errors: u64,
    beside: &str,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    let mut pairs = Vec::with_capacity(LATENCY_ROUNDS);
    for round in 0..LATENCY_ROUNDS {
        let our_p99 = if round == 0 {
            ours.added("p99")
        } else {
            let run = tool_turns(turns.bench, "chat", turns.llm_url, 1, turns.count)?;
            errors += error_count(&run.report);
            run.added("p99")
        };
        let theirs = tool_turns_at(
            turns.bench,
            baseline.addr(),
            "chat",
            turns.llm_url,
            1,
            turns.count,
        )?;
        errors += error_count(&theirs.report);
        pairs.push((our_p99, theirs.added("p99")));
    }
    let share = median(pairs.iter().map(|(ours, theirs)| ours / theirs));
    verdicts.judge(
        "added latency of a 1-tool turn, 1 in flight, p99".to_owned(),
        format!(
            "{:.0} us = {share:.3}x the baseline build beside it ({:.0} us), median of {LATENCY_ROUNDS} rounds ({}); p50 {:.0} us; {beside}; {errors} errors",
            median(pairs.iter().map(|(ours, _)| *ours)),
            median(pairs.iter().map(|(_, theirs)| *theirs)),
            pairs
                .iter()
                .map(|(ours, theirs)| format!("{ours:.0}/{theirs:.0}"))
                .collect::<Vec<_>>()
                .join(", "),
            ours.added("p50"),
        ),
        verdicts::TURN_LATENCY,
        share,
        errors == 0,
    );
    Ok(())
}
