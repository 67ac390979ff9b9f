//! What tserver itself costs per call, apart from the load client and the model stand-in that
//! share its two cores: CPU microseconds per call from `/proc/PID/stat`, and the share of that
//! (of throughput, and of instructions under callgrind) the metrics take, against a twin
//! started with `--metrics off`.

use std::process::Command;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Value, json};

use super::callgrind::{Counter, under_callgrind};
use super::harness::{Bench, Measured, fresh_solution, start_serving, tserver_command};
use super::plan::Plan;
use super::report::{Results, error_count, median};
use super::verdicts::{self, Verdicts};
use crate::processes::{Process, cpu_seconds, free_port, run_quietly};

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
    spent.errors += error_count(&report);
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

/// Paired rounds of the counted runs.
const COUNTED_ROUNDS: usize = 5;

/// The scenarios whose metrics cost is judged, and their names in the rows.
const METERED: [(&str, &str); 2] = [("ping", "ping"), ("chat", "chat gate")];

/// One scenario's instructions per call on the twin with metrics and the one without, under
/// callgrind, alternated over rounds like [`MetricsCost`]: the verdict is the median round's
/// instructions without metrics over with (throughput's inverse: 0.97x is metrics adding 3%).
struct InstructionsCost {
    on: Vec<f64>,
    off: Vec<f64>,
}

impl InstructionsCost {
    /// Instructions per call without metrics over with: the median round.
    fn ratio(&self) -> f64 {
        median(self.on.iter().zip(&self.off).map(|(on, off)| off / on))
    }

    fn to_json(&self) -> Value {
        json!({"metricsOnPerCall": self.on, "metricsOffPerCall": self.off,
               "medianRatio": self.ratio()})
    }
}

/// Measures `scenario` at 16 connections, `calls` counted calls a run after as many uncounted
/// (the first calls meet caches and pools still empty), on `on` and `off` alternately.
fn instructions_cost(
    bench: &Bench,
    scenario: &str,
    calls: u64,
    on: &CountedTwin,
    off: &CountedTwin,
) -> anyhow::Result<InstructionsCost> {
    let calls_arg = calls.to_string();
    let args = [scenario, "-c", "16", "-n", &calls_arg, "--warmup", "0s"];
    for twin in [on, off] {
        bench.client(&twin.twin.addr, &args)?;
    }
    let mut cost = InstructionsCost {
        on: Vec::with_capacity(COUNTED_ROUNDS),
        off: Vec::with_capacity(COUNTED_ROUNDS),
    };
    for round in 0..COUNTED_ROUNDS {
        let mut order = [(on, &mut cost.on), (off, &mut cost.off)];
        if round % 2 == 1 {
            order.reverse();
        }
        for (twin, counts) in order {
            twin.counter.zero()?;
            let report = bench.client(&twin.twin.addr, &args)?;
            let instructions = twin.counter.read()?;
            if error_count(&report) > 0 {
                bail!("{scenario} under callgrind failed: {report}");
            }
            counts.push(instructions as f64 / report["calls"].as_u64().unwrap_or(calls).max(1) as f64);
        }
    }
    Ok(cost)
}

/// The reference server's CPU per ping (how fast this machine is today), then tserver's CPU
/// per call and the metrics' share of it: ping and the chat gate on two tservers that differ
/// only in `--metrics`, each on its own new demo solution with the model off. Not the bench's
/// own server beside a new one: that one has served every scenario before (its plant, its
/// history, its allocator's state), which the ratio would count as the metrics' cost. The
/// throughput of the two is reported; the verdict is their instructions per call under
/// callgrind, because this VM's speed drifts within seconds by several times the 3% judged.
pub(crate) fn run(
    bench: &Bench,
    plan: &Plan,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    let metered = Twin::start(bench, "on")?;
    let unmetered = Twin::start(bench, "off")?;
    let reference_cpu = cpu_per_call(bench, bench.reference(), "ping", plan.cost_calls)?;
    eprintln!(
        "{:<28} {:>9.0} calls/s  reference CPU {:>5.1} us/call",
        "reference ping c=16 (CPU)",
        reference_cpu.calls_per_second(),
        reference_cpu.cpu_us_per_call()
    );
    let mut costs = serde_json::Map::new();
    costs.insert("reference ping".to_owned(), reference_cpu.to_json());
    let mut timed = Vec::with_capacity(METERED.len());
    for (scenario, name) in METERED {
        let cost = metrics_cost(
            bench,
            scenario,
            plan.cost_calls / 2,
            metered.measured(),
            unmetered.measured(),
            8,
        )?;
        eprintln!(
            "{:<28} {:>9.0} vs {:>9.0} calls/s metrics on/off = {:.3}x  tserver CPU {:>5.1} vs {:>5.1} us/call",
            format!("tserver {name} c=16"),
            cost.on.calls_per_second(),
            cost.off.calls_per_second(),
            cost.ratio(),
            cost.on.cpu_us_per_call(),
            cost.off.cpu_us_per_call()
        );
        timed.push(cost);
    }
    drop((metered, unmetered));
    // A run that cannot count (valgrind missing, a dump not written) still reports the rest.
    let counted = count_instructions(bench, plan.counted_calls);
    for (index, ((scenario, name), timed)) in METERED.into_iter().zip(timed).enumerate() {
        let what = format!("{name} instructions per call without metrics over with, 16 connections");
        let natively = format!(
            "natively {:.0} vs {:.0} calls/s, {:.3}x (tserver CPU {:.1} vs {:.1} us per call)",
            timed.on.calls_per_second(),
            timed.off.calls_per_second(),
            timed.ratio(),
            timed.on.cpu_us_per_call(),
            timed.off.cpu_us_per_call()
        );
        let mut cost = timed.to_json();
        match &counted {
            Ok(counted) => {
                let counted = &counted[index];
                let per_call = |counts: &[f64]| median(counts.iter().copied());
                eprintln!(
                    "{:<28} {:>9.0} vs {:>9.0} instructions/call metrics off/on = {:.3}x",
                    format!("tserver {scenario} c=16"),
                    per_call(&counted.off),
                    per_call(&counted.on),
                    counted.ratio(),
                );
                verdicts.judge(
                    what,
                    format!(
                        "{:.0} vs {:.0} instructions a call (medians), median of {COUNTED_ROUNDS} paired rounds {:.3}x; {natively}",
                        per_call(&counted.off),
                        per_call(&counted.on),
                        counted.ratio(),
                    ),
                    verdicts::METRICS_COST,
                    counted.ratio(),
                    timed.on.errors() + timed.off.errors() == 0,
                );
                cost["instructions"] = counted.to_json();
            }
            Err(error) => verdicts.unjudged(
                what,
                format!("not counted: {error:#}; {natively}"),
                verdicts::METRICS_COST,
            ),
        }
        costs.insert(name.to_owned(), cost);
    }
    results.insert(
        "metrics on vs off and tserver CPU per call, 16 connections",
        costs.into(),
    );
    Ok(())
}

/// Each of [`METERED`]'s instructions per call on two twins under callgrind.
fn count_instructions(bench: &Bench, calls: u64) -> anyhow::Result<Vec<InstructionsCost>> {
    let metered = CountedTwin::start(bench, "on")?;
    let unmetered = CountedTwin::start(bench, "off")?;
    METERED
        .into_iter()
        .map(|(scenario, _)| instructions_cost(bench, scenario, calls, &metered, &unmetered))
        .collect()
}

/// A tserver started with `--metrics on|off` on a new demo solution of its own, the model off.
struct Twin {
    addr: String,
    process: Process,
}

impl Twin {
    fn start(bench: &Bench, metrics: &str) -> anyhow::Result<Self> {
        let (mut command, addr, http) = Self::command(bench, metrics, "")?;
        let log = Self::log(bench, metrics, "")?;
        let process = start_serving(command.stderr(log), &addr, &http, Duration::from_secs(20))?;
        Ok(Self { addr, process })
    }

    /// `tserver serve` on a new solution, the model off; its address and its HTTP address.
    fn command(bench: &Bench, metrics: &str, kind: &str) -> anyhow::Result<(Command, String, String)> {
        let name = format!("bench-metrics-{metrics}{kind}");
        let solution = fresh_solution(&bench.bin, &bench.out_dir, &name, None)?;
        let path = solution.to_str().context("a UTF-8 solution path")?;
        run_quietly(
            &bench.tool("tserver"),
            &["settings", path, "set", "ModelEnabled", "false"],
        )?;
        let addr = format!("127.0.0.1:{}", free_port()?);
        let http = format!("127.0.0.1:{}", free_port()?);
        let command = tserver_command(&bench.bin, &solution, &addr, &http, &["--metrics", metrics]);
        Ok((command, addr, http))
    }

    fn log(bench: &Bench, metrics: &str, kind: &str) -> anyhow::Result<std::fs::File> {
        let path = bench
            .out_dir
            .join(format!("tserver-bench-metrics-{metrics}{kind}.log"));
        Ok(std::fs::File::create(path)?)
    }

    fn measured(&self) -> Measured<'_> {
        Measured {
            addr: &self.addr,
            pid: self.process.pid(),
        }
    }
}

/// A [`Twin`] under callgrind, counting the instructions it executes.
struct CountedTwin {
    twin: Twin,
    counter: Counter,
}

impl CountedTwin {
    fn start(bench: &Bench, metrics: &str) -> anyhow::Result<Self> {
        let (command, addr, http) = Twin::command(bench, metrics, "-counted")?;
        let out = bench
            .out_dir
            .join(format!("callgrind-bench-metrics-{metrics}.out"));
        let mut counted = under_callgrind(&command, &out);
        let log = Twin::log(bench, metrics, "-counted")?;
        // Under callgrind tserver starts some fifty times slower.
        let process = start_serving(counted.stderr(log), &addr, &http, Duration::from_secs(300))?;
        let counter = Counter::new(process.pid(), &out);
        Ok(Self {
            twin: Twin { addr, process },
            counter,
        })
    }
}
