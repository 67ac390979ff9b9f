//! `tserver eval`: the demo's questions file against the built-in demo model (every case
//! passes), against a model with faults (exactly the faulty cases fail, each for its reason),
//! bad questions files (line-precise errors, exit 2), the JSON report, and `tserver-demo --eval`.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use scripted_llm::{RecordedRequest, Reply, Responder, ScriptedLlm};
use serde_json::{Value, json};
use tserver::cli::{Cli, Command, eval_exit_code};
use tserver_demo::DemoModel;
use tserver_demo::session::DEMO_EVAL_QUESTIONS;

use crate::support::{Solution, admin};

/// A demo solution whose model is `llm`.
fn solution_asking(llm: &ScriptedLlm) -> Solution {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8");
    admin(&["settings", path, "set", "URL", &llm.url()], "");
    admin(&["settings", path, "set", "Name", "test-model"], "");
    admin(&["settings", path, "set", "ModelEnabled", "true"], "");
    solution
}

/// What `tserver eval ARGS...` printed on standard output and standard error, and its exit
/// status; run beside the test's runtime (it makes its own), which serves the model.
async fn eval(args: &[&str]) -> (ExitCode, String, String) {
    use clap::Parser;
    let args: Vec<String> = std::iter::once("tserver")
        .chain(std::iter::once("eval"))
        .chain(args.iter().copied())
        .map(str::to_owned)
        .collect();
    tokio::task::spawn_blocking(move || {
        let cli = Cli::try_parse_from(args).expect("the command line parses");
        let Command::Eval(args) = cli.command else {
            panic!("not an eval command");
        };
        let (mut output, mut errors) = (Vec::new(), Vec::new());
        let code = eval_exit_code(&args, &mut output, &mut errors);
        (
            code,
            String::from_utf8(output).expect("utf-8 output"),
            String::from_utf8(errors).expect("utf-8 errors"),
        )
    })
    .await
    .expect("eval ran")
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("written");
    path.to_str().expect("utf-8").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_questions_all_pass_against_the_builtin_demo_model() {
    let llm = ScriptedLlm::start_with(DemoModel).await.expect("demo model");
    let solution = solution_asking(&llm);
    let dir = tempfile::tempdir().expect("temp dir");
    let questions = write(dir.path(), "demo.toml", DEMO_EVAL_QUESTIONS);

    let (code, table, errors) =
        eval(&[solution.path.to_str().expect("utf-8"), &questions, "--runs", "2"]).await;

    assert_eq!(code, ExitCode::SUCCESS, "{table}\n{errors}");
    assert!(table.starts_with("test-model, 2 run(s) a case"), "{table}");
    for case in [
        "pump1-diagnosis",
        "active-alarms",
        "tank2-level ",
        "tank2-level-by-tag",
        "tank1-trend",
        "equipment",
    ] {
        let row = table
            .lines()
            .find(|line| line.starts_with(case))
            .unwrap_or_else(|| panic!("no row for {case}: {table}"));
        assert!(row.contains(" 2/2 ") && row.ends_with("pass"), "{row}");
    }
    let total = table
        .lines()
        .find(|line| line.starts_with("total"))
        .expect("a total row");
    assert!(
        total.contains("12/12") && total.ends_with("6/6 cases pass"),
        "{total}"
    );
    assert!(
        table.contains("PASS: every case reached its pass rate"),
        "{table}"
    );
    // Progress, one line a run, went to standard error (of the process, not this writer).
    assert!(errors.is_empty(), "{errors}");
    llm.stop().await;
}

/// The demo model, wrong on purpose for some questions.
struct FaultyModel;

impl FaultyModel {
    fn question(request: &RecordedRequest) -> (String, bool) {
        let body = request.json().unwrap_or(Value::Null);
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let last_user = messages.iter().rposition(|message| message["role"] == "user");
        let question = last_user
            .and_then(|at| messages[at]["content"].as_str())
            .unwrap_or_default()
            .to_owned();
        let first_round = last_user.is_none_or(|at| messages[at + 1..].is_empty());
        (question, first_round)
    }
}

impl Responder for FaultyModel {
    fn respond(&self, request: &RecordedRequest) -> Reply {
        let (question, first_round) = Self::question(request);
        match question.as_str() {
            // A wrong value, stated without looking.
            "What is the level of Tank 2?" => Reply::text("Tank 2 is at 999.5 %."),
            // No tool call at all.
            "What is the value of Tank2.Level?" => Reply::text("I cannot say."),
            // A tool it must not call, beside the right one.
            "Which alarms are active?" if first_round => Reply::ToolCalls(vec![
                (
                    "f_1".to_owned(),
                    "runtime_get_active_alarms".to_owned(),
                    "{}".to_owned(),
                ),
                (
                    "f_2".to_owned(),
                    "runtime_propose_alarm_ack".to_owned(),
                    r#"{"alarm":"Tank1.Level.Hi"}"#.to_owned(),
                ),
            ]),
            // Right, but far slower than its budget (1 ms): it cannot pass by accident.
            "What equipment is there?" => DemoModel.respond(request).after(Duration::from_millis(300)),
            _ => DemoModel.respond(request),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_faulty_model_fails_exactly_the_faulty_cases_each_for_its_reason() {
    let llm = ScriptedLlm::start_with(FaultyModel).await.expect("model");
    let solution = solution_asking(&llm);
    let dir = tempfile::tempdir().expect("temp dir");
    let text =
        DEMO_EVAL_QUESTIONS.replace("name = \"equipment\"\n", "name = \"equipment\"\nlatency_ms = 1\n");
    let questions = write(dir.path(), "faults.toml", &text);

    let (code, json, errors) = eval(&[
        "--solution",
        solution.path.to_str().expect("utf-8"),
        &questions,
        "--runs",
        "1",
        "--json",
    ])
    .await;

    assert_eq!(code, ExitCode::from(1), "{json}\n{errors}");
    let report: Value = serde_json::from_str(&json).expect("one JSON document");
    assert_eq!(report["passed"], false);
    let case = |name: &str| {
        report["cases"]
            .as_array()
            .expect("cases")
            .iter()
            .find(|case| case["name"] == name)
            .unwrap_or_else(|| panic!("no case {name}: {json}"))
            .clone()
    };
    let reasons = |name: &str| -> Vec<String> {
        case(name)["failures"]
            .as_array()
            .expect("failures")
            .iter()
            .map(|failure| {
                assert_eq!(failure["run"], 1, "{failure}");
                failure["reason"].as_str().expect("a reason").to_owned()
            })
            .collect()
    };
    for passing in ["pump1-diagnosis", "tank1-trend"] {
        assert_eq!(case(passing)["passed"], true, "{json}");
        assert!(reasons(passing).is_empty(), "{json}");
    }

    let wrong_value = reasons("tank2-level");
    assert_eq!(wrong_value.len(), 1, "{wrong_value:?}");
    assert!(
        wrong_value[0].starts_with("answer does not state Tank2.Level's value ")
            && wrong_value[0].contains("(±1); it says \"Tank 2 is at 999.5 %.\""),
        "{wrong_value:?}"
    );

    let no_call = reasons("tank2-level-by-tag");
    assert_eq!(
        no_call[0],
        r#"did not call runtime_get_value with {"tag":"Tank2.Level"}; it called no tool"#
    );
    assert!(
        no_call[1].starts_with("answer does not state Tank2.Level's value"),
        "{no_call:?}"
    );
    assert_eq!(no_call.len(), 2, "{no_call:?}");
    let checks = &case("tank2-level-by-tag")["tool_checks"];
    assert_eq!(checks["must_call"]["accuracy"], 0.0);
    assert_eq!(
        checks["must_not_call"]["accuracy"],
        Value::Null,
        "no must_not_call was asked, so none counts as kept: {checks}"
    );

    let forbidden = reasons("active-alarms");
    assert_eq!(
        forbidden,
        [r#"called runtime_propose_alarm_ack with {"alarm":"Tank1.Level.Hi"}, which it must not call"#]
    );
    let checks = &case("active-alarms")["tool_checks"];
    assert_eq!(
        (&checks["must_call"]["met"], &checks["must_call"]["made"]),
        (&json!(1), &json!(1))
    );
    assert_eq!(
        (&checks["must_not_call"]["met"], &checks["must_not_call"]["made"]),
        (&json!(0), &json!(1))
    );

    let slow = reasons("equipment");
    assert_eq!(slow.len(), 1, "{slow:?}");
    assert!(
        slow[0].starts_with("took ") && slow[0].ends_with(" ms, over the 1 ms budget"),
        "{slow:?}"
    );
    assert!(case("equipment")["latency_ms"]["p50"].as_u64().expect("ms") >= 300);

    // The document's shape: the names docs/EVAL.md gives.
    assert_eq!(report["model"], "test-model");
    assert_eq!(report["runs_per_case"], 1);
    let total = &report["total"];
    assert_eq!(total["cases"], 6);
    assert_eq!(total["passed_cases"], 2);
    assert_eq!(total["runs"], 6);
    assert_eq!(total["passed_runs"], 2);
    for field in ["pass_rate", "tool_checks", "latency_ms", "tokens"] {
        assert!(!total[field].is_null(), "total.{field}: {json}");
    }
    for field in ["p50", "p95", "max"] {
        assert!(total["latency_ms"][field].is_u64(), "{json}");
    }
    let run = &case("tank2-level")["results"][0];
    assert_eq!(run["status"], "ok");
    assert_eq!(run["answer"], "Tank 2 is at 999.5 %.");
    assert_eq!(run["passed"], false);
    assert!(run["tools"].as_array().expect("tools").is_empty());
    for field in ["latency_ms", "prompt_tokens", "completion_tokens"] {
        assert!(run[field].is_u64(), "{field}: {run}");
    }
    assert!(run["must_call"]["met"].is_u64(), "{run}");
    assert!(run["must_not_call"]["made"].is_u64(), "{run}");
    llm.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_questions_files_are_named_at_their_line_and_exit_2() {
    let llm = ScriptedLlm::start_with(DemoModel).await.expect("demo model");
    let solution = solution_asking(&llm);
    let path = solution.path.to_str().expect("utf-8");
    let dir = tempfile::tempdir().expect("temp dir");

    let misspelt = DEMO_EVAL_QUESTIONS.replace(
        "value_of = \"Tank2.Level\", tolerance = 1.0 }]\n\n[[cases]]\nname = \"tank2-level-by-tag\"",
        "value_of = \"Tank2.Levl\", tolerance = 1.0 }]\n\n[[cases]]\nname = \"tank2-level-by-tag\"",
    );
    assert_ne!(misspelt, DEMO_EVAL_QUESTIONS);
    let line = misspelt
        .lines()
        .position(|line| line.contains("Tank2.Levl"))
        .expect("the line")
        + 1;
    let file = write(dir.path(), "misspelt.toml", &misspelt);
    let (code, output, errors) = eval(&[path, &file]).await;
    assert_eq!(code, ExitCode::from(2), "{output}");
    assert!(output.is_empty(), "{output}");
    assert!(
        errors.contains(&format!(
            "{file}:{line}:23: cases[2].facts[0].value_of: the plant has no tag \"Tank2.Levl\""
        )),
        "{errors}"
    );

    let typed = write(
        dir.path(),
        "typed.toml",
        "[defaults]\nruns = 2\n\n[[cases]]\nname = \"a\"\nquestion = \"b\"\nlatency_ms = \"fast\"\n",
    );
    let (code, _, errors) = eval(&[path, &typed]).await;
    assert_eq!(code, ExitCode::from(2));
    assert!(
        errors.contains(&format!("{typed}:7:14: cases[0].latency_ms: invalid type")),
        "{errors}"
    );

    // A device is refused before it is read; a file past 1 MiB is refused as one.
    let (code, _, errors) = eval(&[path, "/dev/zero"]).await;
    assert_eq!(code, ExitCode::from(2));
    assert!(
        errors.contains("cannot read /dev/zero: is a device, not a regular file"),
        "{errors}"
    );
    let large = write(dir.path(), "large.toml", &"#".repeat(1024 * 1024 + 1));
    let (code, _, errors) = eval(&[path, &large]).await;
    assert_eq!(code, ExitCode::from(2));
    assert!(
        errors.contains("has more than 1048576 bytes; a questions file may have at most 1048576"),
        "{errors}"
    );

    let broken = write(
        dir.path(),
        "broken.toml",
        "[[cases]]\nname = \"a\nquestion = \"b\"\n",
    );
    let (code, _, errors) = eval(&[path, &broken]).await;
    assert_eq!(code, ExitCode::from(2));
    assert!(errors.contains(&format!("{broken}:2:")), "{errors}");

    // A served file is refused: eval would start its sources beside the server's.
    let good = write(dir.path(), "good.toml", DEMO_EVAL_QUESTIONS);
    let served = store::ServeLock::acquire(&solution.path, "127.0.0.1:3101").expect("the lock");
    let (code, _, errors) = eval(&[path, &good]).await;
    assert_eq!(code, ExitCode::from(2));
    assert!(errors.contains(&format!("cannot evaluate {path}")), "{errors}");
    assert!(errors.contains("listening on 127.0.0.1:3101"), "{errors}");
    drop(served);

    let missing = dir.path().join("nowhere.db");
    let (code, _, errors) = eval(&[missing.to_str().expect("utf-8"), &typed]).await;
    assert_eq!(code, ExitCode::from(2));
    assert!(errors.contains("cannot open solution"), "{errors}");
    assert!(llm.requests().is_empty(), "nothing was asked of the model");
    llm.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_evaluates_its_questions_against_the_builtin_model() {
    let options = tserver_demo::DemoOptions {
        builtin_model: true,
        panel: None,
        eval: Some(tserver_demo::DemoEval {
            runs: Some(1),
            ..tserver_demo::DemoEval::default()
        }),
        ..tserver_demo::DemoOptions::default()
    };
    let mut output = Vec::new();
    let report = tserver_demo::run(&options, &mut std::io::empty(), &mut output)
        .await
        .expect("the demo runs");
    let output = String::from_utf8(output).expect("utf-8");
    let eval = report.eval.expect("an evaluation");
    assert!(eval.passed, "{output}");
    assert_eq!(eval.total.runs, 6, "{output}");
    assert!(report.envelopes.is_empty(), "no chat: {output}");
    assert!(
        output.contains("eval      examples/eval/demo.toml (6 cases, 1 run(s) each)"),
        "{output}"
    );
    assert!(output.contains("built-in demo model at"), "{output}");
    assert!(
        output.contains("PASS: every case reached its pass rate"),
        "{output}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tserver_program_exits_with_the_evaluations_status() {
    let llm = ScriptedLlm::start_with(FaultyModel).await.expect("model");
    let solution = solution_asking(&llm);
    let path = solution.path.to_str().expect("utf-8");
    let dir = tempfile::tempdir().expect("temp dir");
    // A bound on the wait, so a hung process fails the test instead of stalling it.
    let run = |questions: String| async move {
        let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_tserver-under-test"))
            .args(["eval", path, &questions, "--runs", "1"])
            .kill_on_drop(true)
            .output();
        tokio::time::timeout(Duration::from_secs(120), output)
            .await
            .expect("tserver eval ends")
    };

    let passing = DEMO_EVAL_QUESTIONS
        .split("\n[[cases]]")
        .filter(|case| !case.contains("name = \"tank2-level") && !case.contains("name = \"active-alarms\""))
        .collect::<Vec<_>>()
        .join("\n[[cases]]");
    let output = run(write(dir.path(), "passing.toml", &passing))
        .await
        .expect("runs");
    let table = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{table}");
    assert!(table.contains("3/3 cases pass"), "{table}");

    let output = run(write(dir.path(), "all.toml", DEMO_EVAL_QUESTIONS))
        .await
        .expect("runs");
    let table = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{table}");
    assert!(table.contains("tank2-level-by-tag"), "{table}");

    let output = run(write(dir.path(), "bad.toml", "[[cases]]\n"))
        .await
        .expect("runs");
    let errors = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{errors}");
    assert!(
        errors.contains("bad.toml:1:1: cases[0]: missing field `name`"),
        "{errors}"
    );
    llm.stop().await;
}
