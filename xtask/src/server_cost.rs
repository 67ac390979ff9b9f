//! What tserver itself costs per call, apart from the load client and the model stand-in that
//! share its two cores: CPU microseconds per call from `/proc/PID/stat`, and the share of that
//! (and of throughput) the metrics take, against a second tserver started with `--metrics off`.

use anyhow::Context;
use serde_json::{Value, json};

use crate::bench::Bench;
use crate::processes::cpu_seconds;

/// A tserver under measurement: where it listens and its process id (for its CPU time).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Measured<'a> {
    pub(crate) addr: &'a str,
    pub(crate) pid: u32,
}

/// Calls, seconds and tserver CPU seconds summed over runs of one scenario on one server.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Spent {
    calls: u64,
    seconds: f64,
    cpu_seconds: f64,
    errors: u64,
}

impl Spent {
    /// Calls per second over every run.
    pub(crate) fn calls_per_second(&self) -> f64 {
        self.calls as f64 / self.seconds.max(f64::MIN_POSITIVE)
    }

    /// tserver CPU microseconds per call over every run.
    pub(crate) fn cpu_us_per_call(&self) -> f64 {
        self.cpu_seconds * 1e6 / self.calls.max(1) as f64
    }

    pub(crate) fn errors(&self) -> u64 {
        self.errors
    }

    fn add(&mut self, other: Self) {
        self.calls += other.calls;
        self.seconds += other.seconds;
        self.cpu_seconds += other.cpu_seconds;
        self.errors += other.errors;
    }

    pub(crate) fn to_json(self) -> Value {
        json!({"calls": self.calls, "callsPerSecond": self.calls_per_second(),
               "cpuUsPerCall": self.cpu_us_per_call(), "errors": self.errors})
    }
}

/// Runs `tclient bench ARGS` against `server` (a count of calls, no warm-up, so the CPU read
/// around it belongs to the counted calls) and adds what it spent to `spent`.
fn measure(bench: &Bench, server: Measured<'_>, args: &[&str], spent: &mut Spent) -> anyhow::Result<Value> {
    let before = cpu_seconds(server.pid).context("tserver's CPU time is unreadable")?;
    let report = bench.client(server.addr, args)?;
    let after = cpu_seconds(server.pid).context("tserver's CPU time is unreadable")?;
    let calls = report["calls"].as_u64().unwrap_or(0);
    spent.calls += calls;
    spent.seconds += calls as f64 / report["callsPerSecond"].as_f64().unwrap_or(f64::INFINITY);
    spent.cpu_seconds += after - before;
    spent.errors += crate::bench::error_count(&report);
    Ok(report)
}

/// `scenario` at 16 connections, `calls` calls, on `server` alone: what it spends per call.
pub(crate) fn cpu_per_call(
    bench: &Bench,
    server: Measured<'_>,
    scenario: &str,
    calls: u64,
) -> anyhow::Result<Spent> {
    let calls = calls.to_string();
    let mut spent = Spent::default();
    measure(
        bench,
        server,
        &[scenario, "-c", "16", "-n", &calls, "--warmup", "0s"],
        &mut spent,
    )?;
    Ok(spent)
}

/// One scenario on the server with metrics and on the one without, alternated over rounds
/// (each round in the other order). This VM's speed drifts by several percent within seconds,
/// more than the metrics cost, so the verdict is the median of each round's own ratio (two
/// runs seconds apart), not the ratio of the sums.
pub(crate) struct MetricsCost {
    pub(crate) on: Spent,
    pub(crate) off: Spent,
    /// Each round's calls/s with metrics over calls/s without.
    round_ratios: Vec<f64>,
}

impl MetricsCost {
    /// Throughput with metrics as a fraction of throughput without: the median round.
    pub(crate) fn ratio(&self) -> f64 {
        median(self.round_ratios.iter().copied())
    }

    pub(crate) fn to_json(&self) -> Value {
        json!({"metricsOn": self.on.to_json(), "metricsOff": self.off.to_json(),
               "roundRatios": self.round_ratios, "medianRatio": self.ratio()})
    }
}

/// Measures `scenario` (`ping`, `chat` with the model disabled on both solutions) at 16
/// connections, `calls` calls a run, on `on` and `off` alternately.
pub(crate) fn metrics_cost(
    bench: &Bench,
    scenario: &'static str,
    calls: u64,
    on: Measured<'_>,
    off: Measured<'_>,
    rounds: usize,
) -> anyhow::Result<MetricsCost> {
    let calls = calls.to_string();
    let args = [scenario, "-c", "16", "-n", &calls, "--warmup", "0s"];
    let mut cost = MetricsCost {
        on: Spent::default(),
        off: Spent::default(),
        round_ratios: Vec::with_capacity(rounds),
    };
    for round in 0..rounds {
        let mut on_round = Spent::default();
        let mut off_round = Spent::default();
        let mut order = [(on, &mut on_round), (off, &mut off_round)];
        if round % 2 == 1 {
            order.reverse();
        }
        for (server, spent) in order {
            measure(bench, server, &args, spent)?;
        }
        cost.round_ratios
            .push(on_round.calls_per_second() / off_round.calls_per_second().max(f64::MIN_POSITIVE));
        cost.on.add(on_round);
        cost.off.add(off_round);
    }
    Ok(cost)
}

/// The median of `values` (NaN when there are none).
pub(crate) fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.collect();
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => f64::midpoint(values[n / 2 - 1], values[n / 2]),
    }
}
