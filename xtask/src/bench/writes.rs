//! The write round trip (one tag, audited) at 1 and 16 in flight, beside ping.

use serde_json::json;

use super::harness::Bench;
use super::plant_bench::BENCH_FOLDER;
use super::report::{Results, error_count, latency, rps};

/// Runs `writes` writes at each count of writes in flight; reported, not judged.
pub(crate) fn run(bench: &Bench, writes: u64, results: &mut Results) -> anyhow::Result<()> {
    let mut by_in_flight = serde_json::Map::new();
    for connections in [1, 16] {
        let (connections_text, count) = (connections.to_string(), writes.to_string());
        let tag = format!("{BENCH_FOLDER}.T0000");
        let report = bench.client(
            &bench.tserver_addr,
            &[
                "write",
                "-c",
                &connections_text,
                "-n",
                &count,
                "--warmup",
                "0s",
                "--tags",
                &tag,
            ],
        )?;
        let ping = results.get(&format!("tserver ping c={connections}"));
        eprintln!(
            "{:<28} {:>9.0} calls/s  p50 {:>8.1} us  p99 {:>8.1} us  (ping p50 {:.1} us, p99 {:.1} us)  errors {}",
            format!("tserver write c={connections}"),
            rps(&report),
            latency(&report, "p50"),
            latency(&report, "p99"),
            latency(ping, "p50"),
            latency(ping, "p99"),
            error_count(&report)
        );
        let row = json!({"p50Us": latency(&report, "p50"), "p99Us": latency(&report, "p99"), "writesPerSecond": rps(&report),
                         "errors": error_count(&report), "pingP50Us": latency(ping, "p50"), "pingP99Us": latency(ping, "p99")});
        by_in_flight.insert(connections.to_string(), row);
    }
    results.insert(
        "write round trip by writes in flight, beside ping",
        by_in_flight.into(),
    );
    Ok(())
}
