//! The write round trip (one tag, audited) at 1 and 16 in flight, beside ping; the unsigned
//! write at 1 in flight judged beside the write baseline (the build before the acting path,
//! signatures and the audit's hash chain); and a signed write's beside an unsigned one's: what
//! a signature adds (one argon2 verification).

use serde_json::json;

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

use super::baseline::Baseline;
use super::harness::{Bench, tclient_bench, tclient_bench_as};
use super::plant_bench::{BENCH_FOLDER, SIGNED_TAG};
use super::report::{Results, error_count, latency, median, rps};
use super::verdicts::{self, Verdicts};

/// Alternated rounds of unsigned writes at 1 in flight, the write baseline's and tserver's.
const BASELINE_ROUNDS: usize = 5;

/// Runs `writes` writes at each count of writes in flight (reported), the unsigned write beside
/// the write baseline built from `repository` (judged; not built in a `smoke` run), and the
/// signed write (reported).
pub(crate) fn run(
    bench: &Bench,
    repository: &Path,
    writes: u64,
    smoke: bool,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
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
        let ping = results.get(&super::ping::report_name("tserver", connections, 1));
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
    beside_baseline(bench, repository, writes, smoke, results, verdicts)?;
    signed(bench, writes, results)
}

/// The unsigned write's p50 at 1 in flight over the write baseline's, the median of rounds in
/// which each is measured right after the other (this VM's speed drifts within minutes).
fn beside_baseline(
    bench: &Bench,
    repository: &Path,
    writes: u64,
    smoke: bool,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    let what = "unsigned write p50 at 1 in flight over the write baseline's".to_owned();
    if smoke {
        verdicts.unjudged(
            what,
            "not built in a smoke run".to_owned(),
            verdicts::WRITE_LATENCY,
        );
        return Ok(());
    }
    let baseline = Baseline::start_writes(repository, &bench.out_dir.join("baseline-writes"))?;
    let tag = format!("{BENCH_FOLDER}.T0000");
    let count = writes.to_string();
    let args = ["write", "-c", "1", "-n", &count, "--warmup", "0s", "--tags", &tag];
    // Warmed alike: the first writes find each solution file's pages cold.
    tclient_bench(&bench.bin, baseline.addr(), &args)?;
    let mut rounds = Vec::with_capacity(BASELINE_ROUNDS);
    let mut errors = 0;
    for round in 0..BASELINE_ROUNDS {
        // Each goes first in every other round, so neither always follows the other's writes.
        let mut order = [baseline.addr(), bench.tserver_addr.as_str()];
        if round % 2 == 1 {
            order.reverse();
        }
        let [first, second] = order.map(|addr| tclient_bench(&bench.bin, addr, &args));
        let (first, second) = (first?, second?);
        let (baseline_report, tserver_report) = if round % 2 == 1 {
            (second, first)
        } else {
            (first, second)
        };
        errors += error_count(&baseline_report) + error_count(&tserver_report);
        rounds.push(json!({"tserverP50Us": latency(&tserver_report, "p50"), "tserverP99Us": latency(&tserver_report, "p99"),
                           "baselineP50Us": latency(&baseline_report, "p50"), "baselineP99Us": latency(&baseline_report, "p99")}));
    }
    let ratio = median(rounds.iter().map(|round| {
        round["tserverP50Us"].as_f64().unwrap_or(f64::NAN)
            / round["baselineP50Us"].as_f64().unwrap_or(f64::NAN)
    }));
    let middle = |key: &str| median(rounds.iter().map(|round| round[key].as_f64().unwrap_or(f64::NAN)));
    let (tserver_p50, baseline_p50) = (middle("tserverP50Us"), middle("baselineP50Us"));
    eprintln!(
        "{:<28} p50 {tserver_p50:>8.1} us beside the write baseline's {baseline_p50:.1} us: {ratio:.3}x (median of {BASELINE_ROUNDS} rounds)  errors {errors}",
        "tserver unsigned write c=1"
    );
    results.insert(
        "unsigned write beside the write baseline (commit 7a74e614), rounds at 1 in flight",
        json!({"rounds": rounds, "ratioP50": ratio, "errors": errors}),
    );
    verdicts.judge(
        what,
        format!(
            "{ratio:.3}x ({tserver_p50:.0} us / {baseline_p50:.0} us, median of {BASELINE_ROUNDS} rounds)"
        ),
        verdicts::WRITE_LATENCY,
        ratio,
        errors == 0,
    );
    Ok(())
}

/// The user the signed writes log in and sign as, and their password.
const SIGNER: (&str, &str) = ("bench-signer", "bench-signer-password");

/// A signed write's round trip at one in flight, beside the unsigned one just measured:
/// reported, not judged (a signature is an argon2 verification by design).
fn signed(bench: &Bench, writes: u64, results: &mut Results) -> anyhow::Result<()> {
    add_signer(bench)?;
    // Each signed write costs an argon2 verification: fewer of them say as much.
    let count = (writes / 10).max(20).to_string();
    let report = tclient_bench_as(
        &bench.bin,
        &bench.tserver_addr,
        SIGNER,
        &[
            "write", "-c", "1", "-n", &count, "--warmup", "0s", "--tags", SIGNED_TAG, "--sign",
        ],
    )?;
    let unsigned = results.get("write round trip by writes in flight, beside ping")["1"].clone();
    let unsigned_p50 = unsigned["p50Us"].as_f64().unwrap_or(f64::NAN);
    let extra_ms = (latency(&report, "p50") - unsigned_p50) / 1000.0;
    eprintln!(
        "{:<28} {:>9.0} calls/s  p50 {:>8.1} us  p99 {:>8.1} us  (unsigned p50 {unsigned_p50:.1} us: {extra_ms:+.2} ms a signature)  errors {}",
        "tserver signed write c=1",
        rps(&report),
        latency(&report, "p50"),
        latency(&report, "p99"),
        error_count(&report)
    );
    results.insert(
        "signed write round trip beside an unsigned one",
        json!({"p50Us": latency(&report, "p50"), "p99Us": latency(&report, "p99"), "errors": error_count(&report),
               "unsignedP50Us": unsigned_p50, "extraP50Ms": extra_ms}),
    );
    Ok(())
}

/// Adds the signing operator to the bench solution (once: a second run finds it there).
fn add_signer(bench: &Bench) -> anyhow::Result<()> {
    let solution = bench.solution.to_str().context("a UTF-8 solution path")?;
    let listed = Command::new(bench.tool("tserver"))
        .args(["users", solution, "list"])
        .output()
        .context("cannot list the bench users")?;
    if String::from_utf8_lossy(&listed.stdout)
        .lines()
        .any(|line| line.starts_with(&format!("{} ", SIGNER.0)))
    {
        return Ok(());
    }
    let mut child = Command::new(bench.tool("tserver"))
        .args(["users", solution, "add", SIGNER.0, "--role", "operator"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .context("cannot add the bench's signer")?;
    child
        .stdin
        .take()
        .context("the users command's input")?
        .write_all(format!("{}\n", SIGNER.1).as_bytes())?;
    let status = child.wait()?;
    if !status.success() {
        bail!("adding the bench's signer failed with {status}");
    }
    Ok(())
}
