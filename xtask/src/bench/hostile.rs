//! One chat client, quiet and then beside hostile connections (`tserver_tests::hostile`: the
//! abuse test's six kinds from 127.0.0.2, on a thread at the lowest priority).

use std::time::Duration;

use anyhow::bail;
use serde_json::Value;

use super::harness::Bench;
use super::report::{Results, error_count, latency, parse_duration, strings};
use super::verdicts::{self, Verdicts};

/// Runs the chat client quiet and attacked by `hostile` connections against the model at
/// `llm_url`, and judges the attacked p99 against the quiet one.
pub(crate) fn run(
    bench: &Bench,
    llm_url: &str,
    hostile: usize,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    bench.settings("URL", llm_url)?;
    let quiet = chat(bench)?;
    results.record("tserver chat c=1 quiet".to_owned(), &quiet);
    let (attacked, pace) = chat_beside(bench, hostile, None)?;
    results.record(format!("tserver chat c=1 beside {hostile} hostile"), &attacked);
    let ratio = latency(&attacked, "p99") / latency(&quiet, "p99");
    verdicts.judge(
        format!("chat p99 beside {hostile} hostile connections"),
        format!(
            "{:.0} vs {:.0} us quiet = {ratio:.2}x, {} errors, {pace:.0} hostile connects/s",
            latency(&attacked, "p99"),
            latency(&quiet, "p99"),
            error_count(&attacked)
        ),
        verdicts::HOSTILE,
        ratio,
        error_count(&attacked) == 0,
    );
    Ok(())
}

/// `--only hostile`: the verdict as [`run`] judges it, then the turn beside each kind of the
/// attack alone (as many clients of it as the mix holds), to find which part the turn waits
/// behind. The kinds' rows are results, not verdicts.
pub(crate) fn attribute(
    bench: &Bench,
    llm_url: &str,
    hostile: usize,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    run(bench, llm_url, hostile, results, verdicts)?;
    let per_kind = hostile.div_ceil(tserver_tests::hostile::KINDS);
    for (kind, name) in tserver_tests::hostile::KIND_NAMES.iter().enumerate() {
        let (attacked, pace) = chat_beside(bench, per_kind, Some(kind))?;
        println!(
            "  beside {per_kind} {name}: p99 {:.0} us, {} errors, {pace:.0} hostile connects/s",
            latency(&attacked, "p99"),
            error_count(&attacked)
        );
        results.record(format!("tserver chat c=1 beside {per_kind} {name}"), &attacked);
    }
    Ok(())
}

/// One client's chat turns for the bench's duration.
fn chat(bench: &Bench) -> anyhow::Result<Value> {
    bench.client(&bench.tserver_addr, &strings(&bench.timed("chat", 1, &[])))
}

/// [`chat`] while `count` hostile clients (all of kind `only`, or the mix) attack, and the
/// connections they opened per second: the attack's pace, so a reader sees it was not slowed.
fn chat_beside(bench: &Bench, count: usize, only: Option<usize>) -> anyhow::Result<(Value, f64)> {
    let attack_for = parse_duration(bench.duration)? + parse_duration(bench.warmup)? + Duration::from_secs(2);
    let attackers = tserver_tests::hostile::spawn(
        bench.tserver_addr.parse()?,
        count,
        only,
        std::time::Instant::now() + attack_for,
    )?;
    std::thread::sleep(Duration::from_millis(500));
    let attacked = chat(bench);
    let Ok(connections) = attackers.join() else {
        bail!("the hostile clients' thread panicked");
    };
    Ok((attacked?, connections as f64 / attack_for.as_secs_f64()))
}
