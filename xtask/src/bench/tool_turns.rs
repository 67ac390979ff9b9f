//! The 1-tool chat turn against a zero-latency model at 64 turns in flight: tserver's CPU per
//! turn, judged beside the baseline build (tag `bench-baseline-1`) run in the same rounds, with
//! the reference ping and a do-nothing relay of the turn measured alongside.

use std::path::Path;
use std::process::Command;

use anyhow::Context;
use serde_json::{Value, json};

use super::baseline::Baseline;
use super::harness::{Bench, llm_stats};
use super::plan::Plan;
use super::report::{Results, calls, error_count, latency, median, rps};
use super::server_cost;
use super::verdicts::{self, Verdicts};
use crate::processes::{Process, cpu_seconds, cpu_time, start_announcing};

/// Rounds of (reference pings, the relay, the baseline build, then tserver's 1-tool turns) the
/// CPU-per-turn verdict takes its median of.
const TOOL_TURN_ROUNDS: usize = 5;

/// The question whose answer takes one tool call.
pub(crate) const ONE_TOOL_QUESTION: &str = "How is Pump1.MotorCurrent?";

/// A run of tool turns with what the stand-in model server counted during it.
#[derive(Debug)]
pub(crate) struct ToolRun {
    pub(crate) report: Value,
    pub(crate) posts: u64,
    pub(crate) posts_per_turn: f64,
    /// The stand-in's mean time per POST, from request read to reply written.
    pub(crate) service_us: f64,
    /// Connections the stand-in accepted during the run.
    pub(crate) opened: u64,
    /// The mean body of a POST, in bytes.
    pub(crate) body_bytes: u64,
}

impl ToolRun {
    fn new(report: Value, before: scripted_llm::Stats, after: scripted_llm::Stats) -> Self {
        // The stand-in counts a connection when it accepts it, so `after` counts the connection
        // that read it; `before` was read over a connection it had counted already.
        let opened = after.connections.saturating_sub(before.connections + 1);
        let posts = after.requests - before.requests;
        let service_us = (after.service_nanos - before.service_nanos) as f64 / posts.max(1) as f64 / 1000.0;
        let posts_per_turn = posts as f64 / calls(&report);
        let body_bytes = (after.request_body_bytes - before.request_body_bytes) / posts.max(1);
        Self {
            report,
            posts,
            posts_per_turn,
            service_us,
            opened,
            body_bytes,
        }
    }

    /// The stand-in's time per turn: the part of a turn's latency that is not TServer's.
    pub(crate) fn llm_time_us(&self) -> f64 {
        self.posts_per_turn * self.service_us
    }

    /// The turn latency at `quantile` minus the stand-in's time per turn.
    pub(crate) fn added(&self, quantile: &str) -> f64 {
        latency(&self.report, quantile) - self.llm_time_us()
    }
}

/// `turns` turns of the 1-tool question in `scenario` (`chat`, `chat-stream`) against the
/// server at `addr`, on `connections` connections, one in flight each, with no warm-up:
/// `tclient bench`'s report.
pub(crate) fn turns_at(
    bench: &Bench,
    addr: &str,
    scenario: &str,
    connections: usize,
    turns: u64,
) -> anyhow::Result<Value> {
    let (connections, turns) = (connections.to_string(), turns.to_string());
    bench.client(
        addr,
        &[
            scenario,
            "-c",
            &connections,
            "-n",
            &turns,
            "--warmup",
            "0s",
            "--query",
            ONE_TOOL_QUESTION,
        ],
    )
}

/// [`turns_at`] with the stand-in at `llm_url` counted around it, so that every POST it counts
/// belongs to a measured turn.
pub(crate) fn tool_turns_at(
    bench: &Bench,
    addr: &str,
    scenario: &str,
    llm_url: &str,
    connections: usize,
    turns: u64,
) -> anyhow::Result<ToolRun> {
    let before = llm_stats(llm_url)?;
    let report = turns_at(bench, addr, scenario, connections, turns)?;
    let after = llm_stats(llm_url)?;
    Ok(ToolRun::new(report, before, after))
}

/// [`tool_turns_at`] against the bench's tserver.
pub(crate) fn tool_turns(
    bench: &Bench,
    scenario: &str,
    llm_url: &str,
    connections: usize,
    turns: u64,
) -> anyhow::Result<ToolRun> {
    tool_turns_at(bench, &bench.tserver_addr, scenario, llm_url, connections, turns)
}

/// The do-nothing relay of a 1-tool turn (`xtask reference-server --relay`): the same frames
/// from the same client, the same two POSTs of the same size to the same stand-in, and nothing
/// else. What it costs is what the turn's process crossings cost on this machine; what a turn
/// costs beyond it is TServer's own.
pub(crate) struct TurnRelay {
    process: Process,
    addr: String,
}

impl TurnRelay {
    fn start(bench: &Bench, llm_url: &str, body_bytes: u64) -> anyhow::Result<Self> {
        let (process, addr) = start_announcing(
            "reference relay",
            Command::new(bench.tool("xtask")).args([
                "reference-server",
                "127.0.0.1:0",
                "--relay",
                llm_url,
                "--body-bytes",
                &body_bytes.to_string(),
            ]),
        )?;
        Ok(Self { process, addr })
    }

    /// `turns` relayed turns on `connections` connections, one in flight each, and the relay's
    /// CPU microseconds per turn.
    pub(crate) fn turns(
        &self,
        bench: &Bench,
        llm_url: &str,
        connections: usize,
        turns: u64,
    ) -> anyhow::Result<(ToolRun, f64)> {
        let before = llm_stats(llm_url)?;
        let cpu_before = cpu_seconds(self.process.pid()).context("the relay's CPU time is unreadable")?;
        let (connections, count) = (connections.to_string(), turns.to_string());
        let report = bench.client(
            &self.addr,
            &["ping", "-c", &connections, "-n", &count, "--warmup", "0s"],
        )?;
        let cpu = cpu_seconds(self.process.pid()).context("the relay's CPU time is unreadable")? - cpu_before;
        let after = llm_stats(llm_url)?;
        let cpu_us = cpu * 1e6 / calls(&report);
        Ok((ToolRun::new(report, before, after), cpu_us))
    }
}

/// One round of the CPU-per-turn measurement.
#[derive(Debug)]
struct Round {
    /// tserver's CPU microseconds per turn.
    turn_cpu_us: f64,
    /// The reference server's CPU microseconds per ping just before.
    ping_cpu_us: f64,
    /// Errors of tserver's turns.
    errors: u64,
    /// The relay's CPU per turn in reference pings.
    relay_in_pings: f64,
    /// The share of the turn's CPU time spent in user space, and of the ping's: a ping is
    /// mostly the kernel's work, a turn much less, so a machine whose user-space pace differs
    /// moves the ratio.
    turn_user_share: f64,
    ping_user_share: f64,
    /// The baseline build's CPU microseconds per turn and its errors (not in a smoke run).
    baseline: Option<(f64, u64)>,
}

/// What the 64-in-flight turns left for the rows that follow.
pub(crate) struct ToolTurns {
    /// The first run, on a cold server: how many model connections the turns open.
    pub(crate) cold: ToolRun,
    /// The last round's run, on a server that has been serving.
    pub(crate) warm: ToolRun,
    /// tserver's CPU microseconds per turn, median of the rounds.
    pub(crate) cpu_per_turn: f64,
    pub(crate) relay: TurnRelay,
    /// The baseline build, warmed (not in a smoke run).
    pub(crate) baseline: Option<Baseline>,
}

/// One tool call per turn against the zero-latency model at `llm_url`, 64 turns in flight.
pub(crate) fn run(
    bench: &Bench,
    repository: &Path,
    llm_url: &str,
    plan: &Plan,
    smoke: bool,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<ToolTurns> {
    let turns = plan.tool_turns;
    bench.settings("ModelEnabled", "true")?;
    bench.settings("URL", llm_url)?;
    // The first run finds the server cold (no connection to the model yet, the allocator's
    // arenas not grown): it tells how many connections the turns open. What a turn costs is
    // read from the same run made again, as a server that has been serving runs it.
    let cold = tool_turns(bench, "chat", llm_url, 64, turns)?;
    results.record("tserver chat 1 tool c=64 (cold)".to_owned(), &cold.report);
    // The relay's turns carry as many bytes as tserver's (their history has filled by now).
    let relay = TurnRelay::start(bench, llm_url, cold.body_bytes)?;
    // The baseline build, warmed as tserver was (its connections to the model open, its
    // histories full); a smoke run does not build it.
    let baseline = if smoke {
        None
    } else {
        let baseline = Baseline::start(repository, &bench.out_dir.join("baseline"), llm_url)?;
        turns_at(bench, baseline.addr(), "chat", 64, turns)?;
        Some(baseline)
    };
    // This VM's speed drifts by 10-30% within minutes, more than the margin the row is judged
    // by, so each turn run is set against the reference ping measured just before it, over
    // rounds: the verdict is the median round's ratio, as for the metrics rows.
    let mut rounds = Vec::with_capacity(TOOL_TURN_ROUNDS);
    let mut warm = None;
    for _ in 0..TOOL_TURN_ROUNDS {
        let (round, run) = round(bench, llm_url, &relay, baseline.as_ref(), plan)?;
        rounds.push(round);
        warm = Some(run);
    }
    let warm = warm.context("no tool-turn round ran")?;
    results.record("tserver chat 1 tool c=64".to_owned(), &warm.report);
    results.insert(
        "model server during the tool scenario",
        json!({"posts": cold.posts, "postsPerTurn": cold.posts_per_turn, "meanServiceUs": cold.service_us,
               "connectionsOpened": cold.opened}),
    );
    results.insert(
        "tserver CPU per 1-tool turn, rounds beside the baseline build and the reference ping",
        rounds
            .iter()
            .map(|round| {
                json!({"turnCpuUs": round.turn_cpu_us, "referencePingCpuUs": round.ping_cpu_us, "errors": round.errors,
                       "baselineTurnCpuUs": round.baseline.map(|(us, _)| us),
                       "relayCpuInPings": round.relay_in_pings, "turnUserShare": round.turn_user_share,
                       "referencePingUserShare": round.ping_user_share})
            })
            .collect::<Vec<_>>()
            .into(),
    );
    let cpu_per_turn = judge_cpu(&rounds, &warm, baseline.is_some(), verdicts);
    Ok(ToolTurns {
        cold,
        warm,
        cpu_per_turn,
        relay,
        baseline,
    })
}

/// One round: reference pings, the relay's turns, the baseline build's turns, then tserver's.
fn round(
    bench: &Bench,
    llm_url: &str,
    relay: &TurnRelay,
    baseline: Option<&Baseline>,
    plan: &Plan,
) -> anyhow::Result<(Round, ToolRun)> {
    let turns = plan.tool_turns;
    let reference = bench.reference();
    let ping_before = cpu_time(reference.pid).context("the reference server's CPU time is unreadable")?;
    let ping = server_cost::cpu_per_call(bench, reference, "ping", plan.cost_calls / 4)?;
    let ping_split =
        cpu_time(reference.pid).context("the reference server's CPU time is unreadable")? - ping_before;
    let (_, relay_cpu_us) = relay.turns(bench, llm_url, 64, turns)?;
    let baseline = match baseline {
        None => None,
        Some(baseline) => {
            let unreadable = "the baseline build's CPU time is unreadable";
            let before = cpu_seconds(baseline.pid()).context(unreadable)?;
            let report = turns_at(bench, baseline.addr(), "chat", 64, turns)?;
            let spent = cpu_seconds(baseline.pid()).context(unreadable)? - before;
            Some((spent * 1e6 / calls(&report), error_count(&report)))
        }
    };
    let turn_before = cpu_time(bench.tserver_pid).context("tserver's CPU time is unreadable")?;
    let run = tool_turns(bench, "chat", llm_url, 64, turns)?;
    let turn_split = cpu_time(bench.tserver_pid).context("tserver's CPU time is unreadable")? - turn_before;
    let round = Round {
        turn_cpu_us: turn_split.total() * 1e6 / calls(&run.report),
        ping_cpu_us: ping.cpu_us_per_call(),
        errors: error_count(&run.report),
        relay_in_pings: relay_cpu_us / ping.cpu_us_per_call(),
        turn_user_share: turn_split.user_share(),
        ping_user_share: ping_split.user_share(),
        baseline,
    };
    Ok((round, run))
}

/// The CPU-per-turn row: tserver's turn over the baseline build's, median of the rounds (in
/// reference pings and beside the relay as well). Returns tserver's median CPU per turn.
fn judge_cpu(rounds: &[Round], warm: &ToolRun, judged: bool, verdicts: &mut Verdicts) -> f64 {
    let in_pings = median(rounds.iter().map(|round| round.turn_cpu_us / round.ping_cpu_us));
    let cpu_per_turn = median(rounds.iter().map(|round| round.turn_cpu_us));
    let errors: u64 = rounds
        .iter()
        .map(|round| round.errors + round.baseline.map_or(0, |(_, errors)| errors))
        .sum();
    let in_pings = format!(
        "{cpu_per_turn:.1} us = {in_pings:.1} reference pings, median of {TOOL_TURN_ROUNDS} rounds ({}; {:.0} turns/s, {errors} errors); a do-nothing relay of the turn: {:.1} pings; in user space: {:.0}% of the turn, {:.0}% of the ping",
        rounds
            .iter()
            .map(|round| format!("{:.1}", round.turn_cpu_us / round.ping_cpu_us))
            .collect::<Vec<_>>()
            .join(", "),
        rps(&warm.report),
        median(rounds.iter().map(|round| round.relay_in_pings)),
        100.0 * median(rounds.iter().map(|round| round.turn_user_share)),
        100.0 * median(rounds.iter().map(|round| round.ping_user_share)),
    );
    let what = "tserver CPU per 1-tool turn, 64 in flight".to_owned();
    if !judged {
        verdicts.unjudged(
            what,
            format!("{in_pings}; the baseline build is not built in a smoke run"),
            verdicts::TURN_CPU,
        );
        return cpu_per_turn;
    }
    let beside: Vec<(f64, f64)> = rounds
        .iter()
        .filter_map(|round| {
            round
                .baseline
                .map(|(baseline, _)| (round.turn_cpu_us / baseline, baseline))
        })
        .collect();
    let share = median(beside.iter().map(|(share, _)| *share));
    verdicts.judge(
        what,
        format!(
            "{cpu_per_turn:.1} us = {share:.3}x the baseline build beside it ({:.1} us), median of {TOOL_TURN_ROUNDS} rounds ({}); {in_pings}",
            median(beside.iter().map(|(_, us)| *us)),
            beside
                .iter()
                .map(|(share, _)| format!("{share:.3}"))
                .collect::<Vec<_>>()
                .join(", "),
        ),
        verdicts::TURN_CPU,
        share,
        errors == 0,
    );
    cpu_per_turn
}

/// The model-server connections row: the cold run at 64 in flight opens no more connections to
/// the model than turns in flight.
pub(crate) fn judge_model_connections(tool: &ToolTurns, verdicts: &mut Verdicts) {
    let (calls, opened) = (tool.cold.report["calls"].as_u64().unwrap_or(0), tool.cold.opened);
    verdicts.judge(
        format!("model-server connections over {calls} turns at 64 in flight"),
        opened.to_string(),
        verdicts::MODEL_CONNECTIONS,
        opened as f64,
        error_count(&tool.cold.report) == 0,
    );
}
