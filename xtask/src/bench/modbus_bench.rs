//! The Modbus scenario of `cargo xtask bench`: one device holding many holding registers, each
//! bound to a tag, polled by tserver's source every second; the time a whole poll cycle takes
//! (as the source measures it) and the server's CPU per cycle.
//!
//! The device (the tests' tokio-modbus server) runs in the bench's own process; the source
//! runs in `xtask modbus-bench` (the build of the bench's profile), whose CPU is the server's.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;
use tserver_tests::modbus::ModbusServer;

use super::harness::source_reading;
use super::report::Results;
use super::verdicts::{self, Verdicts};
use crate::processes::{cpu_seconds, measuring_side, run_quietly};

/// The shape of the Modbus run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ModbusPlan {
    /// Holding registers, one tag each, all adjacent.
    pub(crate) registers: usize,
    /// Seconds of each measurement.
    pub(crate) seconds: f64,
}

/// Writes the bench solution: the demo's users with a plant of `registers` tags on one
/// device at `device`, polled every second.
fn solution(bin: &Path, out_dir: &Path, device: &str, registers: usize) -> anyhow::Result<PathBuf> {
    let solution = out_dir.join("modbus.db");
    for stale in ["modbus.db", "modbus.db.key", "modbus.db-wal", "modbus.db-shm"] {
        let _ = std::fs::remove_file(out_dir.join(stale));
    }
    let tserver = bin.join("tserver");
    let path = solution.to_str().context("a UTF-8 solution path")?;
    run_quietly(&tserver, &["init", path, "--demo"])?;
    let mut text = format!(
        "[[sources]]\nname = \"rack\"\nurl = \"modbus://{device}\"\npoll_interval = 1000\ntimeout = 5000\n"
    );
    for index in 0..registers {
        text.push_str(&format!(
            "\n[[tags]]\nname = \"MB.R{index:05}\"\npath = \"Modbus/R{index:05}\"\ntype = \"integer\"\nhistory = false\nsource = {{ device = \"rack\", holding_register = {index} }}\n"
        ));
    }
    let file = out_dir.join("modbus-plant.toml");
    std::fs::write(&file, text)?;
    run_quietly(
        &tserver,
        &["plant", path, "import", file.to_str().context("a UTF-8 path")?],
    )?;
    Ok(solution)
}

/// Starts the device, measures the polls through `xtask modbus-bench`, and judges them.
pub(crate) fn judge(
    bin: &Path,
    out_dir: &Path,
    plan: ModbusPlan,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    let device_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let device = device_runtime.block_on(async {
        let device = ModbusServer::start().await;
        let values: Vec<u16> = (0..plan.registers).map(|index| index as u16).collect();
        device.set_holding(0, &values);
        device
    });
    let solution = solution(bin, out_dir, &device.addr().to_string(), plan.registers)?;
    let report = measuring_side(
        &bin.join("xtask"),
        "modbus-bench",
        &[
            solution.to_str().context("a UTF-8 path")?,
            &plan.registers.to_string(),
            &plan.seconds.to_string(),
        ],
    )?;
    drop(device);
    let cycle_ms = report["secondsPerCycle"].as_f64().unwrap_or(f64::NAN) * 1e3;
    let cpu_ms = report["cpuSecondsPerCycle"].as_f64().unwrap_or(f64::NAN) * 1e3;
    let requests = plan.registers.div_ceil(125);
    eprintln!(
        "{:<28} cycle {cycle_ms:.1} ms ({requests} reads), CPU {cpu_ms:.2} ms per cycle, polled every second",
        format!("tserver Modbus x{}", plan.registers)
    );
    verdicts.judge(
        format!("Modbus poll cycle, {} registers on one device", plan.registers),
        format!("{cycle_ms:.1} ms ({requests} reads of up to 125)"),
        verdicts::MODBUS_CYCLE,
        cycle_ms,
        true,
    );
    verdicts.judge(
        format!(
            "tserver CPU per Modbus poll cycle, {} registers at 1 s",
            plan.registers
        ),
        format!("{cpu_ms:.2} ms"),
        verdicts::MODBUS_CPU,
        cpu_ms,
        true,
    );
    results.insert("Modbus polling", report);
    Ok(())
}

/// `xtask modbus-bench SOLUTION REGISTERS SECONDS`: opens the solution, starts its source,
/// waits for every register's first value, then counts poll cycles, the time they took and
/// this process's CPU for SECONDS; prints a JSON report.
pub(crate) fn measure(args: &[String]) -> anyhow::Result<()> {
    let [solution, registers, seconds] = args else {
        bail!("usage: xtask modbus-bench SOLUTION REGISTERS SECONDS");
    };
    let registers: u64 = registers.parse()?;
    let seconds: f64 = seconds.parse()?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let report = runtime.block_on(async {
        let (plant, shutdown) = source_reading(Path::new(solution), registers).await?;
        let status = || {
            plant
                .source_statuses()
                .into_iter()
                .next()
                .context("the bench source")
        };
        let pid = std::process::id();
        let before = status()?;
        let (cpu, started) = (cpu_seconds(pid).unwrap_or(0.0), Instant::now());
        tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
        let after = status()?;
        let cycles = after.polls.saturating_sub(before.polls);
        let (cpu, wall) = (
            cpu_seconds(pid).unwrap_or(0.0) - cpu,
            started.elapsed().as_secs_f64(),
        );
        let busy = after.poll_micros.saturating_sub(before.poll_micros) as f64 / 1e6;
        shutdown.cancel();
        if cycles == 0 {
            bail!("no poll cycle in {wall:.1} s: {:?}", status()?);
        }
        Ok(json!({
            "cycles": cycles,
            "seconds": wall,
            "secondsPerCycle": busy / cycles as f64,
            "cpuSecondsPerCycle": cpu / cycles as f64,
            "errors": status()?.errors,
        }))
    })?;
    println!("{report}");
    Ok(())
}
