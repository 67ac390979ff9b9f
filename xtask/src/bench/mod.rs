//! `cargo xtask bench`: every scenario against `tserver` and the reference server in one run.
//!
//! Builds the binaries, starts the reference server, two stand-in model servers (0 ms and
//! 500 ms) and `tserver` on loopback ports, drives each scenario with `tclient bench --json`,
//! and judges the results against the verdict table (`verdicts.rs`), mostly as ratios measured
//! in the same run. It prints the table and writes `target/bench/results.json`. A missed target
//! is reported, never an error: speed depends on the machine.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use serde_json::json;

use self::harness::{Bench, serve};
use self::plan::{FULL, Plan, SMOKE};
use self::report::Results;
use self::verdicts::Verdicts;
use crate::processes::{Process, free_port, run_quietly, start_announcing};

mod alarm_flood;
mod baseline;
mod callgrind;
pub(crate) mod document_search;
mod failover_bench;
mod first_build;
mod harness;
pub(crate) mod history_bench;
mod hostile;
mod idle;
mod latencies;
pub(crate) mod mcp_bench;
pub(crate) mod modbus_bench;
pub(crate) mod mqtt_bench;
pub(crate) mod opcua_bench;
mod panel_load;
mod panel_overview;
mod ping;
mod plan;
mod plant_bench;
mod proposal_turns;
pub(crate) mod reference;
mod report;
pub(crate) mod script_bench;
mod server_cost;
mod slow_model;
pub(crate) mod store_bench;
mod streaming;
mod tool_turns;
mod turn_latency;
mod verdicts;
pub(crate) mod websocket_bench;
mod websocket_client;
mod websocket_subscribers;
mod websocket_throughput;
mod writes;

/// Options of `cargo xtask bench`.
#[derive(Debug, Default, clap::Args)]
pub(crate) struct BenchOptions {
    /// Short runs with debug binaries: proves the harness runs end to end, judges nothing.
    #[arg(long)]
    pub(crate) smoke: bool,
    /// Also measure chat turns against this model URL.
    #[arg(long, value_name = "URL")]
    pub(crate) llm_url: Option<String>,
    /// Run only these scenarios, in this order (repeat the option or separate with commas).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "SCENARIO")]
    pub(crate) only: Vec<Only>,
}

/// Scenarios that run alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Only {
    /// The first release build from a clean target directory, and the README's commands after it.
    FirstBuild,
    /// Ping and chat over `/ws` beside TCP, the subscribers and the panel in Chromium.
    Websocket,
    /// Ping and the chat gate on two tservers alike but for `--metrics on|off`, and tserver's
    /// CPU per call.
    Metrics,
    /// One Modbus device's registers polled.
    Modbus,
    /// One OPC UA server's variables streaming changes.
    #[value(name = "opcua")]
    OpcUa,
    /// MQTT ingestion beside a bare subscriber.
    Mqtt,
    /// The chat gate and the writes on PostgreSQL beside the SQLite file.
    Store,
    /// The chat turn quiet, beside the whole attack, then beside each kind of it alone.
    Hostile,
    /// The historian's ingestion and queries.
    History,
    /// Searches of the largest document library the limits allow (500 documents, 32 MiB).
    Documents,
    /// The whole proposing turn beside a plain 1-tool turn, and the approval round trip.
    Proposals,
    /// The write round trip, unsigned beside the write baseline, and signed.
    Writes,
    /// The overview displays of a 10,000-tag plant and a year's trend in Chromium.
    Panel,
    /// 1,000 alarms of a 10,000-tag plant activating within 10 s, in the panel in Chromium.
    Alarms,
    /// RuntimeMCP: tools/call at 1 and 16 in flight, beside the MCP baseline, and the plant
    /// model of a 10,000-tag plant read.
    Mcp,
}

impl BenchOptions {
    /// The options, checked together: each scenario once, and no smoke run of the first build.
    pub(crate) fn checked(mut self) -> anyhow::Result<Self> {
        if self.smoke && self.only.contains(&Only::FirstBuild) {
            bail!("--only first-build has no smoke run: the build it measures takes minutes");
        }
        let mut seen = Vec::with_capacity(self.only.len());
        self.only.retain(|only| {
            let first = !seen.contains(only);
            seen.push(*only);
            first
        });
        Ok(self)
    }

    /// Whether the whole bench runs (no `--only`).
    fn everything(&self) -> bool {
        self.only.is_empty()
    }

    /// Whether `scenario` runs.
    fn runs(&self, scenario: Only) -> bool {
        self.everything() || self.only.contains(&scenario)
    }
}

/// The processes a run starts before its scenarios; each stops when dropped.
struct Servers {
    tserver: Process,
    tserver_addr: String,
    reference: Process,
    reference_addr: String,
    _fast_llm: Process,
    _slow_llm: Process,
    /// The stand-in that answers every turn with one tool call at once.
    fast_url: String,
    /// The stand-in that answers after 500 ms.
    slow_url: String,
    /// RuntimeMCP's address, and a token of the bench's user for it.
    http_addr: String,
    token: String,
}

/// Runs the whole benchmark.
pub(crate) fn run(options: &BenchOptions) -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("xtask has no parent directory")?
        .to_owned();
    let target_dir = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let (profile, plan) = if options.smoke {
        ("debug", SMOKE)
    } else {
        ("release", FULL)
    };
    let mut results = Results::default();
    let mut verdicts = Verdicts::default();
    // First, on a quiet machine: the build a new user makes (minutes, so never in a smoke run).
    if !options.smoke && options.runs(Only::FirstBuild) {
        let out_dir = target_dir.join("bench");
        std::fs::create_dir_all(&out_dir)?;
        first_build::judge(&root, &out_dir, &mut results, &mut verdicts)?;
        if options.only == [Only::FirstBuild] {
            verdicts.print();
            return write_report(&out_dir, "release", false, results, &verdicts);
        }
    }
    build(
        &["-p", "tserver", "-p", "tclient", "-p", "scripted-llm", "--bins"],
        options.smoke,
    )?;
    // The OPC UA scenario's server (the tests' own) and the reference server (this harness),
    // in one command: both unify the tests' features, so one build of the product's crates
    // serves the two.
    build(
        &[
            "-p",
            "tserver-tests",
            "--bin",
            "opcua-server-under-test",
            "-p",
            "xtask",
            "--bin",
            "xtask",
        ],
        options.smoke,
    )?;
    let bin = target_dir.join(profile);
    let out_dir = target_dir.join("bench");
    std::fs::create_dir_all(&out_dir)?;
    let solution = out_dir.join("bench.db");
    for stale in ["bench.db", "bench.db.key", "bench.db-wal", "bench.db-shm"] {
        let _ = std::fs::remove_file(out_dir.join(stale));
    }
    run_quietly(
        &bin.join("tserver"),
        &[
            "init",
            solution.to_str().context("a UTF-8 solution path")?,
            "--demo",
        ],
    )?;
    plant_bench::import_bench_plant(&bin.join("tserver"), &solution, plan.bench_tags)?;
    let servers = start_servers(&bin, &solution, &out_dir)?;
    let bench = Bench {
        bin,
        out_dir,
        solution,
        tserver_addr: servers.tserver_addr.clone(),
        tserver_pid: servers.tserver.pid(),
        reference_addr: servers.reference_addr.clone(),
        reference_pid: servers.reference.pid(),
        duration: plan.duration,
        warmup: plan.warmup,
    };
    run_scenarios(
        &bench,
        &root,
        &servers,
        &plan,
        options,
        &mut results,
        &mut verdicts,
    )?;
    drop(servers);
    verdicts.print();
    write_report(&bench.out_dir, profile, options.smoke, results, &verdicts)
}

/// `cargo build --release ARGS`: the packages as users deploy them (the product's features). A smoke run instead builds every target of the workspace in the dev profile,
/// with the features `cargo test --workspace` selects, so CI's test build is reused rather
/// than part of the tree compiled again for other features.
fn build(args: &[&str], smoke: bool) -> anyhow::Result<()> {
    if smoke {
        return crate::processes::cargo(&["build", "--workspace", "--all-targets"]);
    }
    let mut build = vec!["build"];
    build.extend_from_slice(args);
    build.push("--release");
    crate::processes::cargo(&build)
}

/// Starts the reference server, the two stand-in models and tserver on the bench solution, and
/// makes the bench's RuntimeMCP token.
fn start_servers(bin: &Path, solution: &Path, out_dir: &Path) -> anyhow::Result<Servers> {
    let (reference, reference_addr) = start_announcing(
        "reference server",
        Command::new(bin.join("xtask")).args(["reference-server", "127.0.0.1:0"]),
    )?;
    let (fast_llm, fast_url) = start_announcing(
        "scripted LLM (0 ms, one tool call per turn)",
        Command::new(bin.join("scripted-llm")).args(["--mode", "tool"]),
    )?;
    let (slow_llm, slow_url) = start_announcing(
        "scripted LLM (500 ms)",
        Command::new(bin.join("scripted-llm")).args(["--latency-ms", "500"]),
    )?;
    let tserver_addr = format!("127.0.0.1:{}", free_port()?);
    let http_addr = format!("127.0.0.1:{}", free_port()?);
    let token = harness::mcp_token(bin, solution)?;
    let tserver = serve(
        bin,
        solution,
        &tserver_addr,
        &http_addr,
        &[],
        std::fs::File::create(out_dir.join("tserver.log"))?,
    )?;
    Ok(Servers {
        tserver,
        tserver_addr,
        reference,
        reference_addr,
        _fast_llm: fast_llm,
        _slow_llm: slow_llm,
        fast_url,
        slow_url,
        http_addr,
        token,
    })
}

/// Every scenario in turn, each adding its measurements to `results` and its rows to
/// `verdicts`.
fn run_scenarios(
    bench: &Bench,
    root: &Path,
    servers: &Servers,
    plan: &Plan,
    options: &BenchOptions,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    if !options.everything() {
        for &scenario in &options.only {
            run_alone(
                scenario,
                bench,
                (root, servers),
                plan,
                options.smoke,
                results,
                verdicts,
            )?;
        }
        return Ok(());
    }
    let reference_ping = ping::run(bench, results, verdicts)?;
    ping::chat_gate(bench, reference_ping, results, verdicts)?;
    server_cost::run(bench, plan, results, verdicts)?;
    let fast_url = &servers.fast_url;
    let tool = tool_turns::run(bench, root, fast_url, plan, options.smoke, results, verdicts)?;
    turn_latency::run(bench, fast_url, plan, &tool, reference_ping, results, verdicts)?;
    streaming::run(bench, fast_url, plan.tool_turns / 2, results, verdicts)?;
    proposal_turns::judge(bench, fast_url, plan.tool_turns / 4, results, verdicts)?;
    tool_turns::judge_model_connections(&tool, verdicts);
    drop(tool);
    websocket_throughput::run(bench, &servers.http_addr, plan.tool_turns / 2, results, verdicts)?;
    slow_model::run(bench, &servers.slow_url, plan, results, verdicts)?;
    hostile::run(bench, fast_url, plan.hostile, results, verdicts)?;
    if let Some(url) = &options.llm_url {
        bench.settings("URL", url)?;
        let given = bench.client(
            &bench.tserver_addr,
            &report::strings(&bench.timed("chat", 4, &[])),
        )?;
        results.record(format!("tserver chat vs {url}"), &given);
    }
    writes::run(bench, root, plan.writes, options.smoke, results, verdicts)?;
    plant_bench::judge_fan_out(bench, (plan.panels, plan.bench_tags), results, verdicts)?;
    browser_scenarios(bench, servers, plan, results, verdicts)?;
    mqtt_bench::judge(&bench.bin, &bench.out_dir, plan.mqtt, results, verdicts)?;
    modbus_bench::judge(&bench.bin, &bench.out_dir, plan.modbus, results, verdicts)?;
    opcua_bench::judge(&bench.bin, &bench.out_dir, plan.opcua, results, verdicts)?;
    script_bench::judge(&bench.bin, &bench.out_dir, plan.scripts, results, verdicts)?;
    failover_bench::judge(&bench.bin, &bench.out_dir, plan.failover, results, verdicts)?;
    store_bench::judge(&bench.bin, &bench.out_dir, plan.store, results, verdicts)?;
    history_bench::judge(&bench.bin, &bench.out_dir, plan.history, results, verdicts)?;
    document_search::judge(&bench.bin, &bench.out_dir, plan.documents, results, verdicts)?;
    mcp_scenarios(bench, root, servers, plan, options.smoke, results, verdicts)?;
    idle::run(bench, plan.idle_connections, plan.idle_hold, results, verdicts)
}

/// One scenario of `--only`, on its own.
fn run_alone(
    scenario: Only,
    bench: &Bench,
    (root, servers): (&Path, &Servers),
    plan: &Plan,
    smoke: bool,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    let (bin, out_dir) = (&bench.bin, &bench.out_dir);
    match scenario {
        // Measured before the servers started, on a quiet machine.
        Only::FirstBuild => Ok(()),
        Only::Websocket => websocket_scenarios(bench, servers, plan, results, verdicts),
        Only::Metrics => server_cost::run(bench, plan, results, verdicts),
        Only::Modbus => modbus_bench::judge(bin, out_dir, plan.modbus, results, verdicts),
        Only::OpcUa => opcua_bench::judge(bin, out_dir, plan.opcua, results, verdicts),
        Only::Mqtt => mqtt_bench::judge(bin, out_dir, plan.mqtt, results, verdicts),
        Only::Store => store_bench::judge(bin, out_dir, plan.store, results, verdicts),
        Only::History => history_bench::judge(bin, out_dir, plan.history, results, verdicts),
        Only::Documents => document_search::judge(bin, out_dir, plan.documents, results, verdicts),
        Only::Panel => panel_overview::judge(bin, out_dir, plan.overview, results, verdicts),
        Only::Alarms => alarm_flood::judge(bin, out_dir, plan.flood, results, verdicts),
        Only::Mcp => mcp_scenarios(bench, root, servers, plan, smoke, results, verdicts),
        Only::Hostile => {
            bench.settings("ModelEnabled", "true")?;
            hostile::attribute(bench, &servers.fast_url, plan.hostile, results, verdicts)
        }
        Only::Writes => writes::run(bench, root, plan.writes, smoke, results, verdicts),
        Only::Proposals => {
            bench.settings("ModelEnabled", "true")?;
            let turns = plan.tool_turns / 4;
            proposal_turns::judge(bench, &servers.fast_url, turns, results, verdicts)
        }
    }
}

/// RuntimeMCP (`--only mcp`): tools/call on the bench's tserver, beside the MCP baseline build,
/// and the plant model of a 10,000-tag plant read.
fn mcp_scenarios(
    bench: &Bench,
    root: &Path,
    servers: &Servers,
    plan: &Plan,
    smoke: bool,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    let xtask = bench.tool("xtask");
    let mcp_url = format!("http://{}/mcp", servers.http_addr);
    mcp_bench::judge(
        &xtask,
        (&mcp_url, &servers.token),
        plan.mcp_seconds,
        results,
        verdicts,
    )?;
    mcp_bench::judge_beside_baseline(
        (&xtask, &bench.bin),
        (&bench.out_dir, root),
        (plan.mcp_seconds, smoke),
        results,
        verdicts,
    )?;
    mcp_bench::judge_plant_model(
        (&xtask, &bench.bin),
        &bench.out_dir,
        plan.mcp_seconds,
        results,
        verdicts,
    )
}

/// The WebSocket scenarios alone (`--only websocket`): ping and chat beside TCP against the
/// 0 ms stand-in, then the subscribers, then the operator panel in Chromium.
fn websocket_scenarios(
    bench: &Bench,
    servers: &Servers,
    plan: &Plan,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    bench.settings("ModelEnabled", "true")?;
    bench.settings("URL", &servers.fast_url)?;
    websocket_throughput::run(bench, &servers.http_addr, plan.tool_turns / 2, results, verdicts)?;
    browser_scenarios(bench, servers, plan, results, verdicts)
}

/// What browsers put on tserver: many WebSocket subscribers under changing tags, then the
/// operator panel loaded in Chromium.
fn browser_scenarios(
    bench: &Bench,
    servers: &Servers,
    plan: &Plan,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    websocket_subscribers::judge(
        bench,
        &servers.http_addr,
        plan.websocket_subscribers,
        results,
        verdicts,
    )?;
    panel_load::judge(
        &servers.http_addr,
        (plan.panel_loads, plan.bench_tags),
        results,
        verdicts,
    )?;
    panel_overview::judge(&bench.bin, &bench.out_dir, plan.overview, results, verdicts)?;
    alarm_flood::judge(&bench.bin, &bench.out_dir, plan.flood, results, verdicts)
}

/// Writes the machine, the results and the verdicts to `out_dir` (`smoke.json` or
/// `results.json`).
fn write_report(
    out_dir: &Path,
    profile: &str,
    smoke: bool,
    results: Results,
    verdicts: &Verdicts,
) -> anyhow::Result<()> {
    let machine = json!({
        "cpus": std::thread::available_parallelism().map_or(0, usize::from),
        "cpu": std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|info| {
            info.lines().find(|line| line.starts_with("model name"))
                .and_then(|line| line.split(':').nth(1)).map(|name| name.trim().to_owned())
        }),
        "kernel": std::fs::read_to_string("/proc/sys/kernel/osrelease").ok().map(|text| text.trim().to_owned()),
        "profile": profile,
    });
    let report = json!({
        "machine": machine,
        "results": results.into_json(),
        "targets": verdicts.to_json(),
    });
    let (file, table) = if smoke {
        ("smoke.json", "smoke.md")
    } else {
        ("results.json", "results.md")
    };
    std::fs::write(out_dir.join(file), serde_json::to_string_pretty(&report)?)?;
    std::fs::write(out_dir.join(table), verdicts.to_markdown())?;
    println!(
        "\nwrote {} and {}",
        out_dir.join(file).display(),
        out_dir.join(table).display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::{Parser, ValueEnum};

    use super::*;

    /// `cargo xtask bench`'s options alone, as the task's parser reads them.
    #[derive(Debug, Parser)]
    struct BenchCommand {
        #[command(flatten)]
        options: BenchOptions,
    }

    fn parse(args: &[&str]) -> anyhow::Result<BenchOptions> {
        let command = BenchCommand::try_parse_from(std::iter::once("bench").chain(args.iter().copied()))?;
        command.options.checked()
    }

    #[test]
    fn every_scenario_that_runs_alone_is_named_by_only() {
        for only in Only::value_variants() {
            let name = only.to_possible_value().expect("a named scenario");
            let options = parse(&["--only", name.get_name()]).expect("a known scenario");
            assert_eq!(options.only, [*only], "--only {}", name.get_name());
        }
        assert_eq!(parse(&["--only", "opcua"]).expect("opcua").only, [Only::OpcUa]);
    }

    #[test]
    fn several_scenarios_run_in_the_order_given_each_once() {
        let options = parse(&["--only", "mqtt,websocket", "--only", "mqtt", "--only", "mcp"]).expect("known");
        assert_eq!(options.only, [Only::Mqtt, Only::Websocket, Only::Mcp]);
        assert!(options.runs(Only::Mcp) && !options.runs(Only::Store));
        let everything = parse(&[]).expect("no options");
        assert!(everything.everything() && everything.runs(Only::FirstBuild));
    }

    #[test]
    fn an_unknown_scenario_is_refused_with_the_known_ones() {
        let error = parse(&["--only", "mqtt-ish"]).expect_err("unknown").to_string();
        assert!(error.contains("'mqtt-ish'"), "{error}");
        assert!(
            error.contains("hostile") && error.contains("first-build"),
            "{error}"
        );
        let error = parse(&["--fast"]).expect_err("unknown option").to_string();
        assert!(error.contains("'--fast'"), "{error}");
        let error = parse(&["--smoke", "--only", "first-build"])
            .expect_err("no smoke")
            .to_string();
        assert!(error.contains("no smoke run"), "{error}");
    }
}
