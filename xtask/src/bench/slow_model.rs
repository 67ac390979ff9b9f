//! 1,000 turns in flight against a 500 ms model (history off: ten turns per connection).

use super::harness::Bench;
use super::plan::Plan;
use super::report::{Results, error_count, rps, strings};
use super::verdicts::{self, Verdicts};

/// Runs the turns against the model at `slow_url` and judges turns/s against the ideal.
pub(crate) fn run(
    bench: &Bench,
    slow_url: &str,
    plan: &Plan,
    results: &mut Results,
    verdicts: &mut Verdicts,
) -> anyhow::Result<()> {
    bench.settings("URL", slow_url)?;
    bench.settings("ModelOptions", "0x1e")?;
    let in_flight = plan.slow_connections * 10;
    let slow_args = [
        "chat",
        "-c",
        &plan.slow_connections.to_string(),
        "--in-flight",
        "10",
        "-d",
        plan.slow_duration,
        "--warmup",
        plan.slow_warmup,
    ]
    .map(str::to_owned);
    let slow = bench.client(&bench.tserver_addr, &strings(&slow_args))?;
    results.record(format!("tserver chat 500ms x{in_flight}"), &slow);
    let ideal = in_flight as f64 / 0.5;
    verdicts.judge(
        format!("{in_flight} turns in flight, 500 ms model"),
        format!(
            "{:.0} turns/s = {:.0}% of {ideal:.0}, {} errors",
            rps(&slow),
            100.0 * rps(&slow) / ideal,
            error_count(&slow)
        ),
        verdicts::SLOW_MODEL,
        rps(&slow) / ideal,
        error_count(&slow) == 0,
    );
    bench.settings("ModelOptions", "0x9e")
}
