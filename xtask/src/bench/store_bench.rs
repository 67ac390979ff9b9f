//! The store scenario of `cargo xtask bench`: the same solution served from a SQLite file and
//! from PostgreSQL (a private server the harness starts from the system's binaries, on a free
//! loopback port), measured in the same run: the chat gate (Local AI off, the settings read
//! at every call) and the write round trip (one tag, audited), both at 16 in flight. The
//! PostgreSQL rows are reported beside the file's, as ratios.

use std::path::Path;

use anyhow::Context;
use serde_json::{Value, json};
use tserver_tests::postgres::PrivatePostgres;

use super::harness::{serve, tclient_bench};
use super::plant_bench::BENCH_FOLDER;
use super::report::{Results, error_count, rps};
use super::verdicts::{self, Verdicts};
use crate::processes::{free_port, run_quietly};

/// The shape of the store runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StorePlan {
    /// How long each chat-gate run lasts, and its warm-up (`tclient bench` durations).
    pub(crate) duration: &'static str,
    pub(crate) warmup: &'static str,
    /// Writes per write run.
    pub(crate) writes: u64,
}

/// Calls in flight in every run.
const IN_FLIGHT: &str = "16";

/// The measurements of one store.
struct StoreRun {
    gate_per_second: f64,
    writes_per_second: f64,
    errors: u64,
}

/// Runs the scenario with the build in `bin`, its files in `out_dir`; returns each store's
/// rows and the ratios (PostgreSQL over the file).
pub(crate) fn run(bin: &Path, out_dir: &Path, plan: StorePlan) -> anyhow::Result<Value> {
    let tserver = bin.join("tserver");
    let file = out_dir.join("store.db");
    for stale in ["store.db", "store.db.key", "store.db-wal", "store.db-shm"] {
        let _ = std::fs::remove_file(out_dir.join(stale));
    }
    let path = file.to_str().context("the bench directory is not UTF-8")?;
    run_quietly(&tserver, &["init", path, "--demo"])?;
    super::plant_bench::import_bench_plant(&tserver, &file, 1)?;
    let postgres = PrivatePostgres::start();
    let url = postgres.url("postgres");
    run_quietly(&tserver, &["solution", "copy", path, &url])?;

    let on_file = measure_store(bin, out_dir, path, plan)?;
    let on_database = measure_store(bin, out_dir, &url, plan)?;
    drop(postgres);
    let row = |run: &StoreRun| json!({"chatGatePerSecond": run.gate_per_second, "writesPerSecond": run.writes_per_second, "errors": run.errors});
    Ok(json!({
        "sqlite": row(&on_file),
        "postgres": row(&on_database),
        "chatGateRatio": on_database.gate_per_second / on_file.gate_per_second,
        "writeRatio": on_database.writes_per_second / on_file.writes_per_second,
    }))
}

/// Serves `solution` and runs the chat gate and the writes against it.
fn measure_store(bin: &Path, out_dir: &Path, solution: &str, plan: StorePlan) -> anyhow::Result<StoreRun> {
    let addr = format!("127.0.0.1:{}", free_port()?);
    let http = format!("127.0.0.1:{}", free_port()?);
    let kind = if solution.starts_with("postgres") {
        "postgres"
    } else {
        "sqlite"
    };
    let log = std::fs::File::create(out_dir.join(format!("tserver-store-{kind}.log")))?;
    let server = serve(bin, Path::new(solution), &addr, &http, &[], log)?;
    let gate = tclient_bench(
        bin,
        &addr,
        &[
            "chat",
            "-c",
            IN_FLIGHT,
            "-d",
            plan.duration,
            "--warmup",
            plan.warmup,
        ],
    )?;
    let tag = format!("{BENCH_FOLDER}.T0000");
    let writes = tclient_bench(
        bin,
        &addr,
        &[
            "write",
            "-c",
            IN_FLIGHT,
            "-n",
            &plan.writes.to_string(),
            "--warmup",
            "0s",
            "--tags",
            &tag,
        ],
    )?;
    drop(server);
    Ok(StoreRun {
        gate_per_second: rps(&gate),
        writes_per_second: rps(&writes),
        errors: error_count(&gate) + error_count(&writes),
    })
}

/// `cargo xtask store-bench BIN_DIR`: the store scenario alone, with the full plan, against the
/// binaries in `BIN_DIR` (e.g. `target/release` after `cargo build --release --bins`).
pub(crate) fn measure(bin: &Path) -> anyhow::Result<()> {
    let out_dir = bin.join("..").join("bench");
    std::fs::create_dir_all(&out_dir)?;
    let plan = StorePlan {
        duration: "5s",
        warmup: "1s",
        writes: 5_000,
    };
    println!("{}", serde_json::to_string_pretty(&run(bin, &out_dir, plan)?)?);
    Ok(())
}

/// Runs the scenario and judges each PostgreSQL row against the file's.
pub(crate) fn judge(
    bin: &Path,
    out_dir: &Path,
    plan: StorePlan,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    let store = run(bin, out_dir, plan)?;
    for (row, key, what, target) in [
        (
            "chatGateRatio",
            "chatGatePerSecond",
            "chat gate",
            verdicts::STORE_GATE,
        ),
        (
            "writeRatio",
            "writesPerSecond",
            "write round trip",
            verdicts::STORE_WRITES,
        ),
    ] {
        let (file, database) = (
            store["sqlite"][key].as_f64().unwrap_or(0.0),
            store["postgres"][key].as_f64().unwrap_or(0.0),
        );
        let ratio = store[row].as_f64().unwrap_or(0.0);
        eprintln!(
            "{:<28} {database:>9.0} calls/s  beside SQLite {file:.0} calls/s = {ratio:.2}x",
            format!("{what} on PostgreSQL c=16")
        );
        verdicts.judge(
            format!("{what} on PostgreSQL vs SQLite, c=16"),
            format!("{database:.0} vs {file:.0} calls/s = {ratio:.2}x"),
            target,
            ratio,
            store["sqlite"]["errors"] == 0 && store["postgres"]["errors"] == 0,
        );
    }
    results.insert("store", store);
    Ok(())
}
