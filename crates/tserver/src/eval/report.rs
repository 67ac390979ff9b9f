//! What an evaluation came to: per case and in total, as a table for people and as one JSON
//! document (field names in docs/EVAL.md) for scripts.

use std::fmt::Write as _;
use std::time::Duration;

use localai::{Envelope, Usage};
use serde::Serialize;

use super::judge::{Tally, Verdict};
use super::questions::Case;

/// One run of a case, judged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunRecord {
    /// Which run, from 1.
    pub run: u32,
    /// Whether it met everything the case asks.
    pub passed: bool,
    /// Why not (empty when it passed).
    pub reasons: Vec<String>,
    /// The envelope's status (`ok`, `error`, `disabled`, `truncated`).
    pub status: String,
    /// The answer text.
    pub answer: String,
    /// The tools the turn called, in order.
    pub tools: Vec<String>,
    /// From the question to the envelope, in milliseconds.
    pub latency_ms: u64,
    /// Prompt tokens the turn's model requests cost.
    pub prompt_tokens: u64,
    /// Completion tokens the turn's model requests cost.
    pub completion_tokens: u64,
    /// The case's `must_call` entries this run met.
    pub must_call: Tally,
    /// The case's `must_not_call` entries this run kept to.
    pub must_not_call: Tally,
}

impl RunRecord {
    /// The record of run `run`, judged `verdict`.
    pub fn new(run: u32, envelope: &Envelope, elapsed: Duration, usage: &Usage, verdict: Verdict) -> Self {
        Self {
            run,
            passed: verdict.reasons.is_empty(),
            reasons: verdict.reasons,
            status: envelope.status.as_str().to_owned(),
            answer: envelope.text.clone(),
            tools: envelope
                .tool_trace
                .iter()
                .map(|entry| entry.name.clone())
                .collect(),
            latency_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            must_call: verdict.must_call,
            must_not_call: verdict.must_not_call,
        }
    }
}

/// Latency percentiles, in milliseconds (nearest rank).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Latency {
    /// The median.
    pub p50: u64,
    /// The 95th percentile.
    pub p95: u64,
    /// The slowest run.
    pub max: u64,
}

impl Latency {
    fn of(records: &[&RunRecord]) -> Self {
        let mut sorted: Vec<u64> = records.iter().map(|record| record.latency_ms).collect();
        sorted.sort_unstable();
        let rank = |percent: usize| {
            let at = (percent * sorted.len()).div_ceil(100).saturating_sub(1);
            sorted.get(at).copied().unwrap_or(0)
        };
        Self {
            p50: rank(50),
            p95: rank(95),
            max: sorted.last().copied().unwrap_or(0),
        }
    }
}

/// Tokens summed over runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Tokens {
    /// Prompt tokens.
    pub prompt: u64,
    /// Completion tokens.
    pub completion: u64,
}

impl Tokens {
    fn of(records: &[&RunRecord]) -> Self {
        Self {
            prompt: records.iter().map(|record| record.prompt_tokens).sum(),
            completion: records.iter().map(|record| record.completion_tokens).sum(),
        }
    }
}

/// Tool expectations over runs, the two kinds apart: a model that calls nothing keeps every
/// `must_not_call` and meets no `must_call`, which one figure would hide.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ToolChecks {
    /// The cases' `must_call` entries: calls made that succeeded.
    pub must_call: Accuracy,
    /// The cases' `must_not_call` entries: tools left alone.
    pub must_not_call: Accuracy,
}

/// Expectations met over runs, and the fraction met (`None` when none were made).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Accuracy {
    /// Expectations met.
    pub met: u32,
    /// Expectations held to.
    pub made: u32,
    /// `met / made`.
    pub accuracy: Option<f64>,
}

impl Accuracy {
    fn of(tallies: impl Iterator<Item = Tally>) -> Self {
        let (met, made) = tallies.fold((0u32, 0u32), |(met, made), tally| {
            (met.saturating_add(tally.met), made.saturating_add(tally.made))
        });
        Self {
            met,
            made,
            accuracy: (made > 0).then(|| f64::from(met) / f64::from(made)),
        }
    }
}

impl ToolChecks {
    fn of(records: &[&RunRecord]) -> Self {
        Self {
            must_call: Accuracy::of(records.iter().map(|record| record.must_call)),
            must_not_call: Accuracy::of(records.iter().map(|record| record.must_not_call)),
        }
    }
}

/// One reason one run failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// The run, from 1.
    pub run: u32,
    /// Why it failed.
    pub reason: String,
}

/// One case over its runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseReport {
    /// The case's name.
    pub name: String,
    /// Its question.
    pub question: String,
    /// Runs made.
    pub runs: u32,
    /// Runs that passed.
    pub passed_runs: u32,
    /// `passed_runs / runs`.
    pub pass_rate: f64,
    /// The pass rate the case needs.
    pub required_pass_rate: f64,
    /// Whether it reached it.
    pub passed: bool,
    /// Tool expectations over the runs.
    pub tool_checks: ToolChecks,
    /// Latency over the runs.
    pub latency_ms: Latency,
    /// Tokens over the runs.
    pub tokens: Tokens,
    /// Every reason of every failed run, in run order.
    pub failures: Vec<Failure>,
    /// Every run.
    pub results: Vec<RunRecord>,
}

fn rate(passed: u32, runs: u32) -> f64 {
    if runs == 0 {
        0.0
    } else {
        f64::from(passed) / f64::from(runs)
    }
}

/// Whether `achieved` reaches `required` to within half a percent (a written 0.67 or 0.6667 is
/// met by 2 runs of 3); a required 1 needs every run.
fn reaches(achieved: f64, every_run: bool, required: f64) -> bool {
    if required >= 1.0 {
        every_run
    } else {
        achieved + 0.005 >= required
    }
}

fn count(records: &[&RunRecord]) -> u32 {
    u32::try_from(records.len()).unwrap_or(u32::MAX)
}

impl CaseReport {
    /// `case` over `results`.
    pub fn new(case: &Case, results: Vec<RunRecord>) -> Self {
        let all: Vec<&RunRecord> = results.iter().collect();
        let runs = count(&all);
        let passed_runs = count(&results.iter().filter(|record| record.passed).collect::<Vec<_>>());
        let pass_rate = rate(passed_runs, runs);
        Self {
            name: case.name.clone(),
            question: case.question.clone(),
            runs,
            passed_runs,
            pass_rate,
            required_pass_rate: case.pass_rate,
            passed: runs > 0 && reaches(pass_rate, passed_runs == runs, case.pass_rate),
            tool_checks: ToolChecks::of(&all),
            latency_ms: Latency::of(&all),
            tokens: Tokens::of(&all),
            failures: results
                .iter()
                .flat_map(|record| {
                    record.reasons.iter().map(|reason| Failure {
                        run: record.run,
                        reason: reason.clone(),
                    })
                })
                .collect(),
            results,
        }
    }
}

/// Every case together.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Total {
    /// Cases asked.
    pub cases: u32,
    /// Cases that reached their pass rate.
    pub passed_cases: u32,
    /// Runs made.
    pub runs: u32,
    /// Runs that passed.
    pub passed_runs: u32,
    /// `passed_runs / runs`.
    pub pass_rate: f64,
    /// Tool expectations over every run.
    pub tool_checks: ToolChecks,
    /// Latency over every run.
    pub latency_ms: Latency,
    /// Tokens over every run.
    pub tokens: Tokens,
}

/// What an evaluation came to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvalReport {
    /// The model asked, as the solution names it (`None` when it names none).
    pub model: Option<String>,
    /// Runs of each case.
    pub runs_per_case: u32,
    /// Whether every case reached its pass rate.
    pub passed: bool,
    /// Each case.
    pub cases: Vec<CaseReport>,
    /// All together.
    pub total: Total,
}

impl EvalReport {
    /// The report of `cases`, each run `runs_per_case` times.
    pub fn new(runs_per_case: u32, cases: Vec<CaseReport>) -> Self {
        let all: Vec<&RunRecord> = cases.iter().flat_map(|case| &case.results).collect();
        let passed_runs = count(
            &all.iter()
                .copied()
                .filter(|record| record.passed)
                .collect::<Vec<_>>(),
        );
        let total = Total {
            cases: u32::try_from(cases.len()).unwrap_or(u32::MAX),
            passed_cases: u32::try_from(cases.iter().filter(|case| case.passed).count()).unwrap_or(u32::MAX),
            runs: count(&all),
            passed_runs,
            pass_rate: rate(passed_runs, count(&all)),
            tool_checks: ToolChecks::of(&all),
            latency_ms: Latency::of(&all),
            tokens: Tokens::of(&all),
        };
        Self {
            model: None,
            runs_per_case,
            passed: cases.iter().all(|case| case.passed),
            cases,
            total,
        }
    }

    /// The report as one JSON document.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|error| format!("{{\"error\": \"{error}\"}}"))
    }

    /// The report as a table for people, then every failure's reasons, then the verdict.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let model = self.model.as_deref().unwrap_or("the solution's model");
        let _ = writeln!(out, "{model}, {} run(s) a case\n", self.runs_per_case);
        let width = self
            .cases
            .iter()
            .map(|case| case.name.chars().count())
            .max()
            .unwrap_or(0)
            .max("total".len());
        let _ = writeln!(
            out,
            "{:<width$}  {:>7}  {:>5}  {:>5}  {:>7}  {:>7}  {:>7}  {:>7}  {:>8}  result",
            "case", "passed", "rate", "need", "called", "avoided", "p50 ms", "p95 ms", "tokens"
        );
        for case in &self.cases {
            let _ = writeln!(
                out,
                "{:<width$}  {:>7}  {:>5}  {:>5}  {:>7}  {:>7}  {:>7}  {:>7}  {:>8}  {}",
                case.name,
                format!("{}/{}", case.passed_runs, case.runs),
                percent(case.pass_rate),
                percent(case.required_pass_rate),
                tools(&case.tool_checks.must_call),
                tools(&case.tool_checks.must_not_call),
                case.latency_ms.p50,
                case.latency_ms.p95,
                case.tokens.prompt + case.tokens.completion,
                if case.passed { "pass" } else { "FAIL" }
            );
        }
        let total = &self.total;
        let _ = writeln!(
            out,
            "{:<width$}  {:>7}  {:>5}  {:>5}  {:>7}  {:>7}  {:>7}  {:>7}  {:>8}  {}/{} cases pass",
            "total",
            format!("{}/{}", total.passed_runs, total.runs),
            percent(total.pass_rate),
            "",
            tools(&total.tool_checks.must_call),
            tools(&total.tool_checks.must_not_call),
            total.latency_ms.p50,
            total.latency_ms.p95,
            total.tokens.prompt + total.tokens.completion,
            total.passed_cases,
            total.cases
        );
        for case in self.cases.iter().filter(|case| !case.failures.is_empty()) {
            let _ = writeln!(out, "\n{} ({:?}):", case.name, case.question);
            for (runs, reason) in by_reason(&case.failures) {
                let runs: Vec<String> = runs.iter().map(u32::to_string).collect();
                let label = if runs.len() == 1 { "run" } else { "runs" };
                let _ = writeln!(out, "  {label} {}: {reason}", runs.join(", "));
            }
        }
        let failed: Vec<&str> = self
            .cases
            .iter()
            .filter(|case| !case.passed)
            .map(|case| case.name.as_str())
            .collect();
        let _ = if failed.is_empty() {
            writeln!(out, "\nPASS: every case reached its pass rate")
        } else {
            writeln!(
                out,
                "\nFAIL: {} of {} cases below their pass rate: {}",
                failed.len(),
                self.cases.len(),
                failed.join(", ")
            )
        };
        out
    }
}

/// The failures with the runs that failed for each reason, reasons in the order first seen: a
/// model that fails the same way every run is one line to read, not ten.
fn by_reason(failures: &[Failure]) -> Vec<(Vec<u32>, &str)> {
    let mut grouped: Vec<(Vec<u32>, &str)> = Vec::new();
    for failure in failures {
        match grouped.iter_mut().find(|(_, reason)| *reason == failure.reason) {
            Some((runs, _)) => runs.push(failure.run),
            None => grouped.push((vec![failure.run], &failure.reason)),
        }
    }
    grouped
}

fn percent(fraction: f64) -> String {
    format!("{:.0}%", fraction * 100.0)
}

fn tools(checks: &Accuracy) -> String {
    match checks.accuracy {
        Some(_) => format!("{}/{}", checks.met, checks.made),
        None => "-".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(run: u32, passed: bool, latency_ms: u64) -> RunRecord {
        RunRecord {
            run,
            passed,
            reasons: if passed {
                Vec::new()
            } else {
                vec!["did not call runtime_get_value; it called no tool".to_owned()]
            },
            status: "ok".to_owned(),
            answer: String::new(),
            tools: Vec::new(),
            latency_ms,
            prompt_tokens: 100,
            completion_tokens: 10,
            must_call: Tally {
                met: u32::from(passed),
                made: 1,
            },
            must_not_call: Tally::default(),
        }
    }

    fn case(pass_rate: f64) -> Case {
        Case {
            name: "tank2".to_owned(),
            question: "What is the level of Tank 2?".to_owned(),
            pass_rate,
            latency_ms: 1000,
            must_call: Vec::new(),
            must_not_call: Vec::new(),
            facts: Vec::new(),
        }
    }

    #[test]
    fn latency_percentiles_are_nearest_rank() {
        let records: Vec<RunRecord> = (1..=20).map(|ms| record(ms, true, u64::from(ms) * 10)).collect();
        let all: Vec<&RunRecord> = records.iter().collect();
        assert_eq!(
            Latency::of(&all),
            Latency {
                p50: 100,
                p95: 190,
                max: 200
            }
        );
        assert_eq!(Latency::of(&[]), Latency::default());
    }

    #[test]
    fn a_case_passes_when_its_runs_reach_the_rate_it_needs() {
        let runs = || vec![record(1, true, 5), record(2, false, 7), record(3, true, 6)];
        let two_thirds = CaseReport::new(&case(0.6667), runs());
        assert!(two_thirds.passed, "2 of 3 reaches a written 0.6667");
        assert!(CaseReport::new(&case(0.67), runs()).passed, "and a written 0.67");
        assert!(!CaseReport::new(&case(0.7), runs()).passed);
        assert!(!CaseReport::new(&case(1.0), runs()).passed);
        assert_eq!(two_thirds.tool_checks.must_call.met, 2);
        assert_eq!(two_thirds.tool_checks.must_not_call.made, 0, "none asked");
        assert_eq!(two_thirds.tokens.prompt, 300);
        assert_eq!(
            two_thirds.failures,
            vec![Failure {
                run: 2,
                reason: "did not call runtime_get_value; it called no tool".to_owned()
            }]
        );

        let report = EvalReport::new(3, vec![two_thirds, CaseReport::new(&case(1.0), runs())]);
        assert!(!report.passed);
        assert_eq!(
            (
                report.total.passed_cases,
                report.total.passed_runs,
                report.total.runs
            ),
            (1, 4, 6)
        );
        let table = report.to_table();
        assert!(
            table.contains("  run 2: did not call runtime_get_value"),
            "{table}"
        );
        assert!(
            table.ends_with("FAIL: 1 of 2 cases below their pass rate: tank2\n"),
            "{table}"
        );
    }

    #[test]
    fn the_table_says_each_reason_once_with_the_runs_that_failed_for_it() {
        let mut slow = record(2, false, 9000);
        slow.reasons = vec!["took 9000 ms, over the 1000 ms budget".to_owned()];
        let report = EvalReport::new(
            3,
            vec![CaseReport::new(
                &case(1.0),
                vec![record(1, false, 5), slow, record(3, false, 6)],
            )],
        );
        let table = report.to_table();
        assert!(
            table.contains(
                "  runs 1, 3: did not call runtime_get_value; it called no tool\n  run 2: took 9000 ms, over the 1000 ms budget\n"
            ),
            "{table}"
        );
        assert_eq!(
            report.cases[0].failures.len(),
            3,
            "the JSON keeps every run's failure"
        );
    }
}
