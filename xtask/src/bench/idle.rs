//! Idle logged-in connections: tserver's memory growth while they are held.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::json;

use super::harness::Bench;
use super::report::Results;
use super::verdicts::{self, Verdicts};
use crate::processes::rss_bytes;

/// Holds `connections` idle connections for `hold` while sampling tserver's memory, and judges
/// the growth per connection.
pub(crate) fn run(
    bench: &Bench,
    connections: usize,
    hold: &str,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    let baseline = rss_bytes(bench.tserver_pid).unwrap_or(0);
    let peak = Arc::new(AtomicU64::new(baseline));
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (peak, sampling, pid) = (Arc::clone(&peak), Arc::clone(&sampling), bench.tserver_pid);
        std::thread::spawn(move || {
            while sampling.load(Ordering::Relaxed) {
                if let Some(rss) = rss_bytes(pid) {
                    peak.fetch_max(rss, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let count = connections.to_string();
    let idle = bench.client(&bench.tserver_addr, &["idle", "-c", &count, "-d", hold]);
    sampling.store(false, Ordering::Relaxed);
    let _ = sampler.join();
    let idle = idle?;
    results.record(format!("tserver idle x{connections}"), &idle);
    let growth = peak.load(Ordering::Relaxed).saturating_sub(baseline);
    let per_connection = growth as f64 / connections as f64 / 1024.0;
    let held = idle["connectionsHeld"].as_u64().unwrap_or(0);
    results.insert(
        "tserver memory during idle",
        json!({"baselineBytes": baseline, "peakBytes": peak.load(Ordering::Relaxed), "perConnectionKiB": per_connection}),
    );
    verdicts.judge(
        format!("{connections} idle logged-in connections"),
        format!("{held} held, {per_connection:.1} KiB each"),
        verdicts::IDLE,
        per_connection,
        held == connections as u64,
    );
    Ok(())
}
