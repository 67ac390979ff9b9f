//! Project automation, run as `cargo xtask <task>` (`cargo xtask help` lists the tasks).
//!
//! - `ci`: every check CI runs (`.ci/run` installs the system packages, then runs this):
//!   format, lints, tests, and a few seconds of `bench --smoke` and of each fuzz target.
//! - `bench [--smoke] [--llm-url URL] [--only SCENARIO,...]`: every scenario (or those named)
//!   against `tserver` and the reference server; results in `target/bench/` (see
//!   `docs/PERFORMANCE.md`).
//! - `fuzz [--seconds N] [TARGET...]`: every fuzz target of `crates/fuzz` for N seconds each
//!   (default 600) with `cargo fuzz`; CI runs a few seconds of each.
//! - `soak [--minutes N]`: a bounded mixed load against a production (`dist`) `tserver` (30
//!   minutes by default), reporting memory at the start and end and every error.
//! - `screenshots`: the panel's screenshots the README shows, made again (the overview's
//!   browser test), copied into `docs/images/`.
//! - `reference-server ADDR [--relay URL --body-bytes N]`: the minimal framed server `bench`
//!   compares with, or the minimal relay of a 1-tool turn's POSTs (both run by `bench`).
//! - `mqtt-bench ...`: the in-process side of the MQTT scenarios (run by `bench`).
//! - `modbus-bench ...`: the polling side of the Modbus scenario (run by `bench`).
//! - `opcua-bench ...`: the OPC UA server and both clients of the OPC UA scenario (run by
//!   `bench`).
//! - `mcp-bench ...`: the RuntimeMCP client load (run by `bench`).
//! - `script-bench ...`: the in-process side of the solution-script scenarios (run by `bench`).
//! - `history-bench ...`: the in-process side of the historian scenario (run by `bench`).
//! - `document-bench ...`: the in-process side of the document search scenario (run by `bench`).
//! - `websocket-bench ...`: the WebSocket clients of the `/ws` scenarios (run by `bench`).
//! - `store-bench BIN_DIR`: the SQLite-against-PostgreSQL rows alone, on built binaries.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

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

/// `cargo xtask`: the project's checks, benchmarks and tools.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", version, about, long_about = None)]
struct Xtask {
    #[command(subcommand)]
    task: Task,
}

/// The tasks; the hidden ones are the measuring sides `bench` starts in processes of their own.
#[derive(Debug, Subcommand)]
enum Task {
    /// Every check CI runs: format, lints, tests, a bench smoke and a fuzz smoke.
    Ci,
    /// Every scenario against tserver and the reference server; results in target/bench/.
    Bench(bench::BenchOptions),
    /// A bounded mixed load against a production (dist) tserver, memory and errors reported.
    Soak(soak::SoakOptions),
    /// The panel's screenshots the README shows, made again and copied into docs/images/.
    Screenshots,
    /// Every fuzz target (or those named) with cargo fuzz, each for a bounded time.
    Fuzz(fuzz::FuzzOptions),
    /// The minimal framed server the bench compares with, or the minimal relay of a 1-tool
    /// turn's POSTs.
    ReferenceServer {
        /// Where to listen (port 0: any free one, announced on stdout).
        #[arg(default_value = "127.0.0.1:0")]
        listen: SocketAddr,
        /// Relay each POST to this model URL instead of answering frames.
        #[arg(long, value_name = "URL", requires = "body_bytes")]
        relay: Option<String>,
        /// The size of each relayed POST's body.
        #[arg(long, value_name = "BYTES", requires = "relay")]
        body_bytes: Option<usize>,
    },
    #[command(hide = true)]
    MqttBench(MeasuringSide),
    #[command(hide = true)]
    MqttMemory(MeasuringSide),
    #[command(hide = true)]
    ModbusBench(MeasuringSide),
    #[command(hide = true)]
    OpcuaBench(MeasuringSide),
    #[command(hide = true)]
    McpBench(MeasuringSide),
    #[command(hide = true)]
    WebsocketBench(MeasuringSide),
    #[command(hide = true)]
    ScriptBench(MeasuringSide),
    #[command(hide = true)]
    HistoryBench(MeasuringSide),
    #[command(hide = true)]
    DocumentBench(MeasuringSide),
    /// The SQLite-against-PostgreSQL rows alone, on binaries already built.
    StoreBench {
        /// Where the binaries are (e.g. target/release after `cargo build --release --bins`).
        bin_dir: PathBuf,
    },
}

/// A measuring side's arguments: positional, in the order `bench` passes them.
#[derive(Debug, clap::Args)]
struct MeasuringSide {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<String>,
}

fn main() -> anyhow::Result<()> {
    match Xtask::parse().task {
        Task::Ci => ci::run(),
        Task::Bench(options) => bench::run(&options.checked()?),
        Task::Soak(options) => soak::run(&options),
        Task::Screenshots => screenshots::run(),
        Task::Fuzz(options) => fuzz::run(&options),
        Task::ReferenceServer {
            listen,
            relay,
            body_bytes,
        } => {
            let relay = match (relay, body_bytes) {
                (Some(url), Some(bytes)) => Some(bench::reference::Relay::new(&url, bytes)?),
                // clap requires the two together.
                _ => None,
            };
            bench::reference::run(listen, relay)
        }
        Task::MqttBench(side) => bench::mqtt_bench::measure(&side.args),
        Task::MqttMemory(side) => bench::mqtt_bench::measure_memory(&side.args),
        Task::ModbusBench(side) => bench::modbus_bench::measure(&side.args),
        Task::OpcuaBench(side) => bench::opcua_bench::measure(&side.args),
        Task::McpBench(side) => bench::mcp_bench::measure(&side.args),
        Task::WebsocketBench(side) => bench::websocket_bench::measure(&side.args),
        Task::ScriptBench(side) => bench::script_bench::measure(&side.args),
        Task::HistoryBench(side) => bench::history_bench::measure(&side.args),
        Task::DocumentBench(side) => bench::document_search::measure(&side.args),
        Task::StoreBench { bin_dir } => bench::store_bench::measure(&bin_dir),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Xtask::command().debug_assert();
    }
}
