//! Ping at 1, 16 and 128 connections on tserver and the reference server back to back, and the
//! chat gate (Local AI off, settings read at every call) beside the reference ping.

use super::harness::Bench;
use super::report::{Results, latency, rps, strings};
use super::verdicts::{self, Verdicts};

/// What the reference server measured that later rows are set beside.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReferencePing {
    /// Calls/s at 16 connections.
    pub(crate) rate_16: f64,
    /// p99 at 1 connection, in microseconds.
    pub(crate) p99_1: f64,
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
        let reference = bench.client(&bench.reference_addr, &strings(&args))?;
        let ours = bench.client(&bench.tserver_addr, &strings(&args))?;
        results.record(format!("reference ping c={connections}"), &reference);
        results.record(format!("tserver ping c={connections}"), &ours);
        match connections {
            1 => reference_ping.p99_1 = latency(&reference, "p99"),
            16 => reference_ping.rate_16 = rps(&reference),
            _ => {}
        }
        let ratio = rps(&ours) / rps(&reference);
        verdicts.judge(
            format!("ping req/s, {connections} connection(s)"),
            format!("{:.0} vs {:.0} = {ratio:.2}x", rps(&ours), rps(&reference)),
            verdicts::PING_RATE,
            ratio,
            true,
        );
        let p99 = latency(&ours, "p99") / latency(&reference, "p99");
        verdicts.judge(
            format!("ping p99, {connections} connection(s)"),
            format!(
                "{:.0} vs {:.0} us = {p99:.2}x",
                latency(&ours, "p99"),
                latency(&reference, "p99")
            ),
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
