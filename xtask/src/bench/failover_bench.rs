//! The failover scenario of `cargo xtask bench`: two tserver nodes behind a real HAProxy running
//! `deploy/haproxy.cfg` as shipped, panels (`FailoverClient`s) reading a tag through it in a
//! loop, and the node holding the panels killed again and again (each time the other node has
//! been restarted and HAProxy counts it up again). A sample is the time from a kill until every
//! panel has read again.
//!
//! The panels run in this process (their cost is a few reads per millisecond; what is measured
//! is the time the move takes, tens of milliseconds and more).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};
use service_client::{ClientOptions, FailoverClient};
use tserver_tests::haproxy::{Haproxy, Node, free_loopback_addr};

use super::harness::serve;
use super::latencies::Latencies;
use super::report::Results;
use super::verdicts::{self, Verdicts};
use crate::processes::{Process, run_quietly};

/// The shape of the failover run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FailoverPlan {
    /// Node kills, each a sample.
    pub(crate) kills: usize,
    /// Panels reading through HAProxy.
    pub(crate) panels: usize,
}

/// The longest wait for any one step (a node starting, HAProxy seeing it, panels moving).
const STEP_LIMIT: Duration = Duration::from_secs(15);

/// A panel's pause between two reads: the resolution of the samples.
const READ_PAUSE: Duration = Duration::from_millis(2);

/// Runs the scenario with the build in `bin`, its files in `out_dir`; returns the samples
/// (`failoverMs`: p50/p99/max over the kills) and the panels' read errors.
pub(crate) fn run(bin: &Path, out_dir: &Path, plan: FailoverPlan) -> anyhow::Result<Value> {
    let tserver = bin.join("tserver");
    let mut nodes = Vec::new();
    for name in ["failover-1.db", "failover-2.db"] {
        let solution = out_dir.join(name);
        let _ = std::fs::remove_file(&solution);
        let path = solution.to_str().context("the bench directory is not UTF-8")?;
        run_quietly(&tserver, &["init", path, "--demo"])?;
        let node = Node {
            listen: free_loopback_addr(),
            http: free_loopback_addr(),
        };
        nodes.push((solution, node));
    }
    let start = |index: usize| -> anyhow::Result<Process> {
        let (solution, node) = &nodes[index];
        let log = std::fs::File::create(out_dir.join(format!("tserver-failover-{}.log", index + 1)))?;
        serve(
            bin,
            solution,
            &node.listen.to_string(),
            &node.http.to_string(),
            // HAProxy (deploy/haproxy.cfg) sends a PROXY header from loopback.
            &["--trusted-proxy", "127.0.0.1"],
            log,
        )
    };
    let mut running = [Some(start(0)?), Some(start(1)?)];
    let haproxy = Haproxy::start([nodes[0].1, nodes[1].1]);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the panels' runtime")?;
    let epoch = Instant::now();
    let reading = Arc::new(AtomicBool::new(true));
    let report = runtime.block_on(async {
        haproxy.wait_until_all_up().await;
        let mut panels = Vec::new();
        for _ in 0..plan.panels {
            let client = FailoverClient::connect(&[haproxy.front.to_string()], ClientOptions::default())
                .await
                .context("a panel cannot connect through haproxy")?;
            client.login("guest", "").await.context("a panel cannot log in")?;
            let panel = Arc::new(Panel::default());
            let task = tokio::spawn(read_in_a_loop(
                client,
                Arc::clone(&panel),
                Arc::clone(&reading),
                epoch,
            ));
            panels.push((panel, task));
        }
        // Every panel is on one node or the other; kill the one with more, alternately after.
        let mut victim = 0;
        let mut samples = Latencies::default();
        for _ in 0..plan.kills {
            let killed_at = elapsed_nanos(epoch);
            drop(running[victim].take());
            let deadline = Instant::now() + STEP_LIMIT;
            while panels
                .iter()
                .any(|(panel, _)| panel.last_read.load(Ordering::Relaxed) <= killed_at)
            {
                if Instant::now() > deadline {
                    bail!("panels were not back within {STEP_LIMIT:?} of a kill");
                }
                tokio::time::sleep(Duration::from_micros(500)).await;
            }
            let back = panels
                .iter()
                .map(|(panel, _)| panel.first_read_after(killed_at))
                .max()
                .unwrap_or(0);
            samples.push(back);
            running[victim] = Some(tokio::task::block_in_place(|| start(victim))?);
            wait_until_up(&haproxy).await?;
            // The panels are all on the other node now: it goes next.
            victim = 1 - victim;
        }
        reading.store(false, Ordering::Relaxed);
        let mut errors = 0;
        for (panel, task) in panels {
            let _ = task.await;
            errors += panel.errors.load(Ordering::Relaxed);
        }
        let mut report = samples.to_json();
        for quantile in ["p50Us", "p99Us", "maxUs"] {
            let ms = report[quantile].as_f64().unwrap_or(f64::NAN) / 1000.0;
            report[quantile.replace("Us", "Ms")] = json!(ms);
        }
        Ok::<Value, anyhow::Error>(
            json!({"kills": plan.kills, "panels": plan.panels, "failover": report, "readErrors": errors}),
        )
    })?;
    drop(haproxy);
    drop(running);
    Ok(report)
}

/// What a panel's reads show: when it last read, and when it first read after a kill.
#[derive(Debug, Default)]
struct Panel {
    /// Nanoseconds from the epoch to the end of its latest successful read.
    last_read: AtomicU64,
    /// Its successful reads' ends, newest last (bounded by the run's length).
    reads: std::sync::Mutex<Vec<u64>>,
    errors: AtomicU64,
}

impl Panel {
    /// Nanoseconds from `killed_at` to the end of this panel's first read after it.
    fn first_read_after(&self, killed_at: u64) -> u64 {
        let reads = self
            .reads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        reads
            .iter()
            .find(|&&at| at > killed_at)
            .map_or(0, |at| at - killed_at)
    }
}

async fn read_in_a_loop(client: FailoverClient, panel: Arc<Panel>, reading: Arc<AtomicBool>, epoch: Instant) {
    while reading.load(Ordering::Relaxed) {
        match client.read_tags(&["Pump1.MotorCurrent"]).await {
            Ok(_) => {
                let at = elapsed_nanos(epoch);
                panel.last_read.store(at, Ordering::Relaxed);
                panel
                    .reads
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(at);
            }
            Err(_) => {
                panel.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        tokio::time::sleep(READ_PAUSE).await;
    }
}

/// Waits until HAProxy counts both nodes up again (a restarted node passes two checks).
async fn wait_until_up(haproxy: &Haproxy) -> anyhow::Result<()> {
    let deadline = Instant::now() + STEP_LIMIT;
    while !haproxy.node_states().await.iter().all(|state| state == "UP") {
        if Instant::now() > deadline {
            bail!("haproxy did not count a restarted node up within {STEP_LIMIT:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

fn elapsed_nanos(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Runs the scenario and judges the p99 time until every panel has read again.
pub(crate) fn judge(
    bin: &Path,
    out_dir: &Path,
    plan: FailoverPlan,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    let failover = run(bin, out_dir, plan)?;
    let (p50, p99, read_errors) = (
        failover["failover"]["p50Ms"].as_f64().unwrap_or(f64::INFINITY),
        failover["failover"]["p99Ms"].as_f64().unwrap_or(f64::INFINITY),
        failover["readErrors"].as_u64().unwrap_or(u64::MAX),
    );
    eprintln!(
        "{:<28} {:>9} kills  p50 {p50:>8.1} ms  p99 {p99:>8.1} ms  max {:.1} ms  read errors {read_errors}",
        format!("failover x{} panels", plan.panels),
        plan.kills,
        failover["failover"]["maxMs"].as_f64().unwrap_or(f64::NAN),
    );
    verdicts.judge(
        format!("failover behind HAProxy, {} node kills, p99", plan.kills),
        format!("{p99:.0} ms (p50 {p50:.0} ms), {read_errors} read errors"),
        verdicts::FAILOVER,
        p99,
        read_errors == 0,
    );
    results.insert("failover", failover);
    Ok(())
}
