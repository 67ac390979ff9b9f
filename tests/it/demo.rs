//! The main job (`tserver-demo`): a demo solution, a running server, a model and a chat, with
//! the built-in rule-based model, a reachable Ollama, or a URL given on the command line.

use scripted_llm::{Reply, ScriptedLlm};
use serde_json::{Value, json};
use service_client::{Status, ToolStatus};
use tserver_demo::model::DISCLOSURE;
use tserver_demo::{DemoOptions, DemoReport, run};

use crate::support::{Solution, admin};

async fn demo(options: DemoOptions, input: &str) -> (DemoReport, String) {
    demo_reading(options, input.as_bytes()).await
}

async fn demo_reading(options: DemoOptions, mut input: impl std::io::BufRead) -> (DemoReport, String) {
    let mut output = Vec::new();
    let report = run(&options, &mut input, &mut output)
        .await
        .expect("the demo runs");
    (report, String::from_utf8(output).expect("utf-8 output"))
}

fn tool_names(report: &DemoReport, turn: usize) -> Vec<&str> {
    report.envelopes[turn]
        .tool_trace
        .iter()
        .map(|entry| entry.name.as_str())
        .collect()
}

/// The same rounding the demo model uses for numbers.
fn shown(value: &Value) -> String {
    let text = format!("{:.2}", value.as_f64().expect("a number"));
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builtin_model_answers_each_question_from_tool_calls_against_the_live_plant() {
    let options = DemoOptions {
        builtin_model: true,
        ..DemoOptions::default()
    };
    let (report, output) = demo(options, "").await;

    assert!(report.builtin_model);
    assert_eq!(report.envelopes.len(), 5, "{output}");
    for envelope in &report.envelopes {
        assert_eq!(envelope.status, Status::Ok, "{output}");
        assert!(
            envelope.text.starts_with(DISCLOSURE),
            "every answer says what wrote it: {}",
            envelope.text
        );
        assert!(
            envelope
                .tool_trace
                .iter()
                .all(|entry| entry.status == ToolStatus::Ok),
            "{output}"
        );
    }
    assert_eq!(
        tool_names(&report, 0),
        [
            "runtime_search_uns",
            "runtime_get_active_alarms",
            "runtime_search_documents"
        ]
    );
    assert_eq!(tool_names(&report, 1), ["runtime_get_active_alarms"]);
    assert_eq!(tool_names(&report, 2), ["runtime_search_uns"]);
    assert_eq!(
        tool_names(&report, 3),
        ["runtime_get_tag_history", "runtime_get_value"]
    );
    assert_eq!(tool_names(&report, 4), ["runtime_list_instances"]);

    // The answers are composed from the tool results, not made up.
    let level = &report.envelopes[2];
    let reading = &level.tool_trace[0].result["results"][0];
    assert_eq!(reading["tag"], "Tank2.Level");
    assert!(
        level
            .text
            .contains(&format!("Tank2.Level = {} %", shown(&reading["value"]))),
        "{}",
        level.text
    );
    let trend = &report.envelopes[3];
    let stats = &trend.tool_trace[0].result["stats"];
    assert!(
        trend.text.contains(&format!("max {} %", shown(&stats["max"]))),
        "{}",
        trend.text
    );
    let pump = &report.envelopes[0];
    assert!(pump.text.contains("Pump1"), "{}", pump.text);
    // What to do, and where that comes from: the passage the documents search returned.
    let cited = &pump.tool_trace[2].result["passages"][0];
    assert_eq!(cited["path"], "procedures/pump-high-motor-current.md");
    let source = format!(
        "\"Pump 1 high motor current\" (procedures/pump-high-motor-current.md, lines {}-{})",
        cited["lines"][0], cited["lines"][1]
    );
    assert!(pump.text.contains(&source), "{source} in {}", pump.text);
    let structure = &report.envelopes[4].text;
    for instance in [
        "Plant/Area1/Pump1",
        "Plant/Area1/Pump2",
        "Plant/Area1/Tank1",
        "Plant/Area2/Tank2",
    ] {
        assert!(structure.contains(instance), "{structure}");
    }

    // The transcript is readable: the question, each tool call, the answer, status and latency.
    assert!(output.contains("built-in demo model"), "{output}");
    assert!(output.contains("you> What is wrong with Pump 1?"), "{output}");
    assert!(
        output.contains("  [tool] runtime_get_active_alarms({}) -> {\"alarms\":"),
        "{output}"
    );
    assert!(output.contains(&format!("ai> {DISCLOSURE}")), "{output}");
    assert!(output.contains("  [ok in "), "{output}");
    // Long tool results are cut to one line in the readable form.
    assert!(
        output
            .lines()
            .all(|line| !line.starts_with("  [tool]") || line.chars().count() < 500),
        "{output}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interactive_mode_keeps_asking_until_an_empty_line() {
    let options = DemoOptions {
        builtin_model: true,
        questions: Vec::new(),
        interactive: true,
        ..DemoOptions::default()
    };
    let (report, output) = demo(options, "Which alarms are active?\nhello\n\nnever asked\n").await;
    assert_eq!(report.envelopes.len(), 2, "{output}");
    assert_eq!(tool_names(&report, 0), ["runtime_get_active_alarms"]);
    assert!(report.envelopes[1].tool_trace.is_empty());
    assert!(
        report.envelopes[1].text.contains("Try:"),
        "{}",
        report.envelopes[1].text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reachable_ollama_is_used_with_one_of_its_models() {
    let ollama = ScriptedLlm::start_with(|request: &scripted_llm::RecordedRequest| {
        if request.path == "/api/tags" {
            Reply::status(
                200,
                json!({"models": [{"name": "llama3.2:3b"}, {"name": "phi4"}]}),
            )
        } else {
            Reply::text("hello from the local model")
        }
    })
    .await
    .expect("fake ollama");
    let options = DemoOptions {
        ollama_url: format!("http://{}", ollama.addr()),
        questions: vec!["Which alarms are active?".to_owned()],
        ..DemoOptions::default()
    };
    let (report, output) = demo(options, "").await;

    assert!(!report.builtin_model);
    assert!(output.contains("llama3.2:3b at http://"), "{output}");
    assert_eq!(report.envelopes[0].text, "hello from the local model");
    // The chat turn's POST; the demo's TankNote script may also have asked (the atomic path,
    // no tools) if the simulated tank tripped its high alarm meanwhile.
    let posts: Vec<Value> = ollama
        .requests()
        .iter()
        .filter(|request| request.method == "POST")
        .map(|request| {
            assert_eq!(request.path, "/v1/chat/completions");
            request.json().expect("json body")
        })
        .filter(|body| body.get("tools").is_some())
        .collect();
    assert_eq!(posts.len(), 1);
    assert_eq!(
        posts[0]["model"], "llama3.2:3b",
        "no default model pulled: the first one listed"
    );
    assert!(
        posts[0]["tools"]
            .as_array()
            .is_some_and(|tools| !tools.is_empty()),
        "the runtime tools are offered"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_given_model_url_is_used_as_is_and_an_absent_ollama_falls_back() {
    // Every request answered alike: the demo's TankNote script may ask too (see above).
    let model =
        ScriptedLlm::start_with(|_: &scripted_llm::RecordedRequest| Reply::text("from the given endpoint"))
            .await
            .expect("model");
    let given = DemoOptions {
        model_url: Some(model.url()),
        model_name: Some("my-model".to_owned()),
        questions: vec!["hi".to_owned()],
        ..DemoOptions::default()
    };
    let (report, _) = demo(given, "").await;
    assert_eq!(report.envelopes[0].text, "from the given endpoint");
    assert!(
        model
            .requests()
            .iter()
            .all(|request| request.json().expect("json")["model"] == "my-model"),
        "every request names the given model"
    );

    // Nothing listens on a port just released: the probe fails fast and the demo model answers.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    let absent = DemoOptions {
        ollama_url: format!("http://127.0.0.1:{port}"),
        questions: vec!["Which alarms are active?".to_owned()],
        ..DemoOptions::default()
    };
    let (report, output) = demo(absent, "").await;
    assert!(report.builtin_model);
    assert!(
        output.contains(&format!("no Ollama answered at http://127.0.0.1:{port}")),
        "{output}"
    );
    assert!(report.envelopes[0].text.starts_with(DISCLOSURE));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_solution_is_served_with_the_model_in_memory_and_its_settings_unchanged() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8 path");
    // The user's own settings: tools off, an endpoint of their own, Local AI off.
    admin(&["settings", path, "set", "ModelOptions", "0"], "");
    admin(
        &[
            "settings",
            path,
            "set",
            "URL",
            "http://gpu-box:8000/v1/chat/completions",
        ],
        "",
    );
    let before = admin(&["settings", path, "show"], "");
    let options = DemoOptions {
        builtin_model: true,
        solution: Some(solution.path.clone()),
        questions: tserver_demo::session::ANY_PLANT_QUESTIONS
            .iter()
            .map(|&question| question.to_owned())
            .collect(),
        ..DemoOptions::default()
    };
    let (report, output) = demo(options, "").await;
    assert!(report.builtin_model);
    assert!(
        output.contains("the solution's own model settings are not changed"),
        "{output}"
    );
    assert_eq!(report.envelopes.len(), 2, "{output}");
    for envelope in &report.envelopes {
        assert_eq!(envelope.status, Status::Ok, "{output}");
        assert!(envelope.text.starts_with(DISCLOSURE), "{}", envelope.text);
        assert!(
            !envelope.tool_trace.is_empty(),
            "answered from the plant: {output}"
        );
    }
    assert_eq!(
        admin(&["settings", path, "show"], ""),
        before,
        "nothing of the model is stored"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_serves_the_operator_panel_while_it_runs_and_prints_its_address() {
    let panel = tserver_tests::haproxy::free_loopback_addr();
    let options = DemoOptions {
        builtin_model: true,
        questions: Vec::new(),
        interactive: true,
        panel: Some(panel),
        ..DemoOptions::default()
    };
    // The demo waits for questions on this pipe until it is closed: meanwhile another thread
    // opens the panel, then closes the pipe.
    let (reader, writer) = std::io::pipe().expect("a pipe");
    let looking = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let page = runtime.block_on(async {
            let deadline = std::time::Instant::now() + crate::support::PATIENCE;
            let page = loop {
                match reqwest::get(format!("http://{panel}/")).await {
                    Ok(response) if response.status().is_success() => {
                        break response.text().await.expect("the page");
                    }
                    _ => {
                        assert!(
                            std::time::Instant::now() < deadline,
                            "no operator panel at {panel}"
                        );
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    }
                }
            };
            // The demo's guest logs in from the page, as the printed line says.
            let login = reqwest::Client::new()
                .post(format!("http://{panel}/api/login"))
                .header("origin", format!("http://{panel}"))
                .json(&serde_json::json!({"user": "guest", "password": ""}))
                .send()
                .await
                .expect("the login answers");
            assert_eq!(login.status().as_u16(), 200, "{:?}", login.text().await);
            page
        });
        drop(writer);
        page
    });
    let (_, output) = demo_reading(options, std::io::BufReader::new(reader)).await;
    let page = looking.join().expect("the page was opened");
    assert!(page.contains("TServer operator panel"), "{page}");
    assert!(
        output.contains(&format!("  panel     http://{panel}/ (the operator panel)")),
        "{output}"
    );
}

#[test]
fn scripts_run_finds_the_server_the_demo_runs_on_its_new_solution() {
    use std::io::{BufRead, Write};
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("demo.db");
    let mut demo = Command::new(env!("CARGO_BIN_EXE_tserver-demo-under-test"))
        .args(["--builtin-model", "--no-panel", "-i", "--solution"])
        .arg(&path)
        .args(["-q", "Which alarms are active?"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the demo starts");
    let stdout = demo.stdout.take().expect("stdout");
    let (asking, heard) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.starts_with("Connected. Ask about the plant") {
                let _ = asking.send(());
            }
        }
    });
    heard
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the demo waits for questions");
    let ran = admin(&["scripts", path.to_str().expect("utf-8"), "run", "TankNote"], "");
    assert!(
        ran.starts_with("ran TankNote in the serving tserver (") && ran.contains("listening on 127.0.0.1:"),
        "{ran}"
    );
    // An empty line ends the demo.
    demo.stdin.take().expect("stdin").write_all(b"\n").expect("typed");
    assert!(demo.wait().expect("the demo ends").success());
}
