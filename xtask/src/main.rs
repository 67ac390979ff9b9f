//! Project automation, run as `cargo xtask <task>`.
//!
//! - `ci`: every check CI runs (`.ci/run` installs the system packages, then runs this):
//!   format, lints, tests, and a few seconds of `bench --smoke` and of each fuzz target.
//! - `bench [--smoke] [--llm-url URL]`: every scenario against `tserver` and the reference
//!   server; results in `target/bench/` (see `docs/PERFORMANCE.md`).
//! - `fuzz [--seconds N] [TARGET...]`: every fuzz target of `crates/fuzz` for N seconds each
//!   (default 600) with `cargo fuzz`; CI runs a few seconds of each.
//! - `soak [--minutes N]`: a bounded mixed load against a production (`dist`) `tserver` (30
//!   minutes by default), reporting memory at the start and end and every error.
//! - `screenshots`: the panel's screenshots the README shows, made again (the overview's
//!   browser test), copied into `docs/images/`.
//! - `reference-server ADDR [--relay URL BODY_BYTES]`: the minimal framed server `bench`
//!   compares with, or the minimal relay of a 1-tool turn's POSTs (both run by `bench`).
//! - `mqtt-bench ...`: the in-process side of the MQTT scenarios (run by `bench`).
//! - `modbus-bench ...`: the polling side of the Modbus scenario (run by `bench`).
//! - `opcua-bench ...`: the OPC UA server and both clients of the OPC UA scenario (run by
//!   `bench`).
//! - `mcp-bench ...`: the RuntimeMCP client load (run by `bench`).
//! - `script-bench ...`: the in-process side of the solution-script scenarios (run by `bench`).
//! - `history-bench ...`: the in-process side of the historian scenario (run by `bench`).
//! - `websocket-bench ...`: the WebSocket clients of the `/ws` scenarios (run by `bench`).

use anyhow::{Context, bail};

/// The allocator tserver's binary ships with (mimalloc, no transparent huge pages): the
/// in-process measuring sides run tserver's code (`mqtt-bench` a whole runtime), so they must
/// measure it with the allocator it runs on. The reference server shares it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod bench;
mod ci;
mod fuzz;
mod processes;
mod screenshots;
mod soak;

const TASKS: &str = "ci, bench [--smoke] [--llm-url URL], fuzz [--seconds N] [TARGET...], soak [--minutes N], screenshots, reference-server ADDR [--relay URL BODY_BYTES]";

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("ci") => ci::run(),
        Some("bench") => bench::run(&bench::BenchOptions::parse(&args[1..])?),
        Some("soak") => soak::run(&soak::SoakOptions::parse(&args[1..])?),
        Some("screenshots") => screenshots::run(),
        Some("fuzz") => fuzz::run(&fuzz::FuzzOptions::parse(&args[1..])?),
        Some("mqtt-bench") => bench::mqtt_bench::measure(&args[1..]),
        Some("mqtt-memory") => bench::mqtt_bench::measure_memory(&args[1..]),
        Some("modbus-bench") => bench::modbus_bench::measure(&args[1..]),
        Some("opcua-bench") => bench::opcua_bench::measure(&args[1..]),
        Some("mcp-bench") => bench::mcp_bench::measure(&args[1..]),
        Some("websocket-bench") => bench::websocket_bench::measure(&args[1..]),
        Some("script-bench") => bench::script_bench::measure(&args[1..]),
        Some("history-bench") => bench::history_bench::measure(&args[1..]),
        Some("store-bench") => bench::store_bench::measure(&args[1..]),
        Some("reference-server") => {
            let listen = args.get(1).map_or("127.0.0.1:0", String::as_str);
            let relay = match args.get(2..) {
                None | Some([]) => None,
                Some([flag, url, bytes]) if flag == "--relay" => Some(bench::reference::Relay::new(
                    url,
                    bytes
                        .parse()
                        .with_context(|| format!("--relay: {bytes:?} is not a count of bytes"))?,
                )?),
                Some(_) => bail!("usage: cargo xtask reference-server ADDR [--relay URL BODY_BYTES]"),
            };
            bench::reference::run(
                listen
                    .parse()
                    .with_context(|| format!("{listen:?} is not a socket address"))?,
                relay,
            )
        }
        Some(other) => bail!("unknown task {other:?}; available: {TASKS}"),
        None => bail!("usage: cargo xtask <task>; available: {TASKS}"),
    }
}
