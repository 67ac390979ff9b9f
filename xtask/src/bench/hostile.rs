//! One chat client, quiet and then beside hostile connections (`tserver_tests::hostile`: the
//! abuse test's six kinds from 127.0.0.2, on a thread at the lowest priority).

use std::time::Duration;

use anyhow::bail;

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
    let chat_one = bench.timed("chat", 1, &[]);
    let quiet = bench.client(&bench.tserver_addr, &strings(&chat_one))?;
    results.record("tserver chat c=1 quiet".to_owned(), &quiet);
    let attack_for = parse_duration(bench.duration)? + parse_duration(bench.warmup)? + Duration::from_secs(2);
    let attackers = tserver_tests::hostile::spawn(
        bench.tserver_addr.parse()?,
        hostile,
        std::time::Instant::now() + attack_for,
    )?;
    std::thread::sleep(Duration::from_millis(500));
    let attacked = bench.client(&bench.tserver_addr, &strings(&chat_one));
    if attackers.join().is_err() {
        bail!("the hostile clients' thread panicked");
    }
    let attacked = attacked?;
    results.record(format!("tserver chat c=1 beside {hostile} hostile"), &attacked);
    let ratio = latency(&attacked, "p99") / latency(&quiet, "p99");
    verdicts.judge(
        format!("chat p99 beside {hostile} hostile connections"),
        format!(
            "{:.0} vs {:.0} us quiet = {ratio:.2}x, {} errors",
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
