//! Ping at 1, 16 and 128 connections on tserver and the reference server, alternated over
//! paired rounds, and the chat gate (Local AI off, settings read at every call) beside the
//! reference ping.

use super::harness::Bench;
use super::report::{Results, latency, median, rps, strings};
use super::verdicts::{self, Verdicts};

/// Paired rounds of each connection count. At 128 connections the load client and both
/// servers share two cores and one run a side is at the mercy of the VM (the same binaries
/// read 0.80x to 0.94x run after run), so each row is the median of its rounds' own ratios.
const ROUNDS: usize = 3;

/// The name of one side's round in the results: `tserver ping c=16 #1`.
pub(crate) fn report_name(side: &str, connections: usize, round: usize) -> String {
    format!("{side} ping c={connections} #{round}")
}

/// What the reference server measured that later rows are set beside.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReferencePing {
    /// Calls/s at 16 connections, the median round.
    pub(crate) rate_16: f64,
    /// p99 at 1 connection, in microseconds, the median round.
    pub(crate) p99_1: f64,
}

/// One connection count's rounds: each side's calls/s and p99, in the order run.
#[derive(Debug, Default)]
struct Rounds {
    reference: Vec<(f64, f64)>,
    ours: Vec<(f64, f64)>,
}

/// The median calls/s and the median p99 of one side's rounds.
fn medians(side: &[(f64, f64)]) -> (f64, f64) {
    (
        median(side.iter().map(|&(rate, _)| rate)),
        median(side.iter().map(|&(_, p99)| p99)),
    )
}

impl Rounds {
    /// The median over the rounds of `ratio` applied to each round's (ours, reference).
    fn median_ratio(&self, ratio: impl Fn((f64, f64), (f64, f64)) -> f64) -> f64 {
        median(
            self.ours
                .iter()
                .zip(&self.reference)
                .map(|(&ours, &reference)| ratio(ours, reference)),
        )
    }
}

/// Runs ping on both servers and judges tserver's rate and p99 against the reference's.
pub(crate) fn run(
    bench: &Bench,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<ReferencePing> {
    let mut reference_ping = ReferencePing {
        rate_16: 0.0,
        p99_1: f64::NAN,
    };
    for connections in [1, 16, 128] {
        let args = bench.timed("ping", connections, &[]);
        let args = strings(&args);
        let mut rounds = Rounds::default();
        for round in 1..=ROUNDS {
            let sides = [
                ("reference", &bench.reference_addr),
                ("tserver", &bench.tserver_addr),
            ];
            // Each round in the other order, so neither side always runs on a warmer machine.
            let mut order = [0, 1];
            if round % 2 == 0 {
                order.reverse();
            }
            let mut measured = [(f64::NAN, f64::NAN); 2];
            for side in order {
                let (name, addr) = sides[side];
                let report = bench.client(addr, &args)?;
                results.record(report_name(name, connections, round), &report);
                measured[side] = (rps(&report), latency(&report, "p99"));
            }
            let [reference, ours] = measured;
            rounds.reference.push(reference);
            rounds.ours.push(ours);
        }
        let (ours_rate, ours_p99) = medians(&rounds.ours);
        let (reference_rate, reference_p99) = medians(&rounds.reference);
        match connections {
            1 => reference_ping.p99_1 = reference_p99,
            16 => reference_ping.rate_16 = reference_rate,
            _ => {}
        }
        let ratio = rounds.median_ratio(|(ours, _), (reference, _)| ours / reference);
        verdicts.judge(
            format!("ping req/s, {connections} connection(s)"),
            format!("{ours_rate:.0} vs {reference_rate:.0}, median of {ROUNDS} paired rounds {ratio:.2}x"),
            verdicts::PING_RATE,
            ratio,
            true,
        );
        let p99 = rounds.median_ratio(|(_, ours), (_, reference)| ours / reference);
        verdicts.judge(
            format!("ping p99, {connections} connection(s)"),
            format!("{ours_p99:.0} vs {reference_p99:.0} us, median of {ROUNDS} paired rounds {p99:.2}x"),
            verdicts::PING_P99,
            p99,
            true,
        );
    }
    Ok(reference_ping)
}

/// The chat gate with the model disabled, 16 connections, beside the reference ping.
pub(crate) fn chat_gate(
    bench: &Bench,
    reference_ping: ReferencePing,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    bench.settings("ModelEnabled", "false")?;
    let gate = bench.client(&bench.tserver_addr, &strings(&bench.timed("chat", 16, &[])))?;
    results.record("tserver chat disabled c=16".to_owned(), &gate);
    let ratio = rps(&gate) / reference_ping.rate_16;
    verdicts.judge(
        "chat, model disabled, 16 connections".to_owned(),
        format!(
            "{:.0} vs ping {:.0} = {ratio:.2}x",
            rps(&gate),
            reference_ping.rate_16
        ),
        verdicts::CHAT_GATE,
        ratio,
        true,
    );
    Ok(())
}
