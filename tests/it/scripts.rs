//! Solution scripts: stored, changed, switched and removed through `tserver scripts`, a syntax
//! error refused with its line and column, bad input of every kind answered with a sentence
//! that names it; and run by a serving tserver on their triggers (startup, every, tag, alarm),
//! runaway runs stopped and recorded while the server goes on, changes taken up at once.

use std::time::Duration;

use plant_model::{Quality, TagValue};
use scripted_llm::{RecordedRequest, Reply, ScriptedLlm};
use service_client::{Envelope, Status, WriteValue};
use store::ServeLock;
use tokio_util::sync::CancellationToken;
use tserver::ServerConfig;

use crate::operator_writes::solution_with_writable_tags;
use crate::support::{PATIENCE, Solution, TestServer, admin, try_admin};

/// A script file in the solution's temporary directory.
fn script_file(solution: &Solution, name: &str, source: &str) -> String {
    let path = solution.path.with_file_name(name);
    std::fs::write(&path, source).expect("writes the script");
    path.to_str().expect("utf-8").to_owned()
}

#[test]
fn scripts_are_added_listed_shown_changed_switched_and_removed() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    let demo = "TankNote  alarm:Tank1.Level.Hi  enabled\n";
    assert_eq!(admin(&["scripts", &path, "list"], ""), demo, "the demo's own");
    let note = script_file(
        &solution,
        "note.rhai",
        "fn on_alarm(alarm) {\n    log(alarm.tag);\n}\n",
    );
    let added = admin(
        &[
            "scripts",
            &path,
            "add",
            "LevelNote",
            "--file",
            &note,
            "--trigger",
            "alarm:*",
        ],
        "",
    );
    assert_eq!(added, "added script LevelNote (alarm:*)\n");
    let util = script_file(&solution, "util.rhai", "fn double(x) { x * 2 }\n");
    admin(
        &[
            "scripts",
            &path,
            "add",
            "Util",
            "--file",
            &util,
            "--trigger",
            "class",
        ],
        "",
    );
    assert_eq!(
        admin(&["scripts", &path, "list"], ""),
        format!("LevelNote  alarm:*  enabled\n{demo}Util  class  enabled\n")
    );
    let shown = admin(&["scripts", &path, "show", "levelnote"], "");
    assert!(
        shown.starts_with("// LevelNote (alarm:*, enabled)\nfn on_alarm(alarm)"),
        "{shown}"
    );

    let tick = script_file(&solution, "tick.rhai", "log(\"tick\");\n");
    let updated = admin(
        &[
            "scripts",
            &path,
            "update",
            "LevelNote",
            "--file",
            &tick,
            "--trigger",
            "every:5s",
        ],
        "",
    );
    assert_eq!(updated, "updated script LevelNote (every:5s)\n");
    assert!(admin(&["scripts", &path, "show", "LevelNote"], "").contains("log(\"tick\");"));
    assert_eq!(
        admin(&["scripts", &path, "disable", "LevelNote"], ""),
        "script LevelNote is disabled\n"
    );
    let status = admin(&["scripts", &path, "status"], "");
    assert!(
        status.contains("LevelNote  every:5s  disabled  runs 0  failures 0  skipped 0  never run"),
        "{status}"
    );
    admin(&["scripts", &path, "enable", "LevelNote"], "");
    assert_eq!(
        admin(&["scripts", &path, "remove", "Util"], ""),
        "removed script Util\n"
    );
    assert_eq!(
        admin(&["scripts", &path, "list"], ""),
        format!("LevelNote  every:5s  enabled\n{demo}")
    );
}

#[test]
fn bad_scripts_triggers_names_and_files_are_refused_saying_what_and_where() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    // Why `scripts add NAME --file FILE --trigger TRIGGER` is refused.
    let refusal = |name: &str, file: &str, trigger: &str| -> String {
        let args = [
            "scripts",
            &path,
            "add",
            name,
            "--file",
            file,
            "--trigger",
            trigger,
        ];
        format!("{:#}", try_admin(&args, "").expect_err("refused"))
    };
    let broken = script_file(
        &solution,
        "broken.rhai",
        "let level = 1;\nlet doubled = (level * ;\nlog(doubled);\n",
    );
    let message = refusal("Broken", &broken, "startup");
    assert!(
        message.contains("script Broken does not compile: line 2, column"),
        "{message}"
    );

    let good = script_file(&solution, "good.rhai", "log(\"ok\");\n");
    for (trigger, wanted) in [
        ("hourly", "unknown trigger"),
        ("every:1ms", "shortest period"),
        ("every:soon", "duration such as"),
        ("tag:", "a name is needed"),
    ] {
        let message = refusal("Good", &good, trigger);
        assert!(message.contains(wanted), "{trigger}: {message}");
    }
    let message = refusal("no good", &good, "startup");
    assert!(message.contains("invalid script name"), "{message}");
    let missing = solution.path.with_file_name("missing.rhai");
    let message = refusal("Good", missing.to_str().expect("utf-8"), "startup");
    assert!(message.contains("cannot read the script file"), "{message}");
    for action in ["show", "remove", "enable"] {
        let error = try_admin(&["scripts", &path, action, "Nowhere"], "").expect_err(action);
        assert!(
            format!("{error:#}").contains("no script named \"Nowhere\""),
            "{action}: {error:#}"
        );
    }
    let error = try_admin(&["scripts", &path, "update", "Nowhere"], "").expect_err("nothing to change");
    assert!(format!("{error:#}").contains("nothing to change"), "{error:#}");
    assert_eq!(
        admin(&["scripts", &path, "list"], ""),
        "TankNote  alarm:Tank1.Level.Hi  enabled\n",
        "nothing was stored beside the demo's own"
    );
}

#[test]
fn triggers_that_can_never_fire_are_refused_and_an_import_that_strands_one_says_so() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    let good = script_file(&solution, "good.rhai", "log(\"ok\");\n");
    let add = |name: &str, trigger: &str| {
        try_admin(
            &[
                "scripts",
                &path,
                "add",
                name,
                "--file",
                &good,
                "--trigger",
                trigger,
            ],
            "",
        )
    };
    let refused = format!("{:#}", add("Nope", "tag:Nope.Tag").expect_err("no such tag"));
    assert!(
        refused.contains("tag:Nope.Tag can never fire: the plant has no tag Nope.Tag")
            && refused.contains("not stored"),
        "{refused}"
    );
    let refused = format!("{:#}", add("Typo", "tag:Tank1.Levl").expect_err("a typo"));
    assert!(refused.contains("did you mean tag:Tank1.Level?"), "{refused}");
    let refused = format!(
        "{:#}",
        add("NoAlarm", "alarm:Nope.Alarm").expect_err("no such alarm")
    );
    assert!(refused.contains("alarm:Nope.Alarm can never fire"), "{refused}");
    let refused = format!(
        "{:#}",
        add("AlarmTypo", "alarm:Tank1.Level.Hj").expect_err("a typo")
    );
    assert!(
        refused.contains("did you mean alarm:Tank1.Level.Hi?"),
        "{refused}"
    );
    // What does exist is taken: a tag in another case, an alarm by its name or by its tag's.
    add("OnLevel", "tag:tank1.level").expect("a tag, case aside");
    add("OnHi", "alarm:Tank1.Level.Hi").expect("an alarm by its name");
    add("OnTank", "alarm:Tank1.Level").expect("an alarm by its tag's name");
    let refused = format!(
        "{:#}",
        try_admin(
            &["scripts", &path, "update", "OnLevel", "--trigger", "tag:Gone"],
            ""
        )
        .expect_err("an update is checked too")
    );
    assert!(refused.contains("tag:Gone can never fire"), "{refused}");

    // A plant without Tank1.Level: imported (the plant is the truth), and said.
    let exported = admin(&["plant", &path, "export"], "");
    let mut model = plant_model::read(&exported, plant_model::Format::Toml, "demo").expect("reads");
    model.tags.retain(|tag| tag.name != "Tank1.Level");
    model.alarms.retain(|alarm| alarm.tag != "Tank1.Level");
    let file = solution.path.with_file_name("smaller.toml");
    std::fs::write(&file, model.to_toml().expect("TOML")).expect("writes");
    let imported = admin(&["plant", &path, "import", file.to_str().expect("utf-8")], "");
    for stranded in [
        "script OnLevel: tag:tank1.level can never fire",
        "script OnHi: alarm:Tank1.Level.Hi",
        "script OnTank:",
    ] {
        assert!(
            imported.contains(&format!("warning: {stranded}")),
            "{stranded}: {imported}"
        );
    }
    let status = admin(&["scripts", &path, "status"], "");
    let on_level = status
        .lines()
        .find(|line| line.starts_with("OnLevel"))
        .expect("listed");
    assert!(on_level.contains("(tag:tank1.level can never fire"), "{status}");
}

/// `solution` with a second text tag, `Pump1.Note`, for scripts that write two notes (the
/// demo's `Pump1.Mode` takes only its modes).
fn with_pump_note(solution: Solution) -> Solution {
    let mut model = solution.plant_model();
    let mut note = model
        .tags
        .iter()
        .find(|tag| tag.name == "Tank1.OperatorNote")
        .cloned()
        .expect("the demo has a note");
    note.name = "Pump1.Note".to_owned();
    note.path = "Plant/Area1/Pump1/Note".to_owned();
    note.description = "Pump 1 note".to_owned();
    model.tags.push(note);
    let file = solution.path.with_file_name("noted.toml");
    std::fs::write(&file, model.to_toml().expect("toml")).expect("writes");
    let path = solution.path.to_str().expect("utf-8");
    admin(&["plant", path, "import", file.to_str().expect("utf-8")], "");
    solution
}

/// A serving tserver with its scripts running, on a demo plant whose Pump1.Mode,
/// Tank1.Level and Pump1.StartCount are writable. The rig holds the solution's serve lock, as
/// `tserver serve` does.
struct ScriptRig {
    solution: Solution,
    server: TestServer,
    stop_scripts: CancellationToken,
    runs: plant::scripts::ScriptRuns,
    _serving: ServeLock,
}

impl ScriptRig {
    /// Stores `scripts` (name, trigger, source), then serves with them running.
    async fn start(scripts: &[(&str, &str, &str)]) -> Self {
        Self::start_on(solution_with_writable_tags(), scripts).await
    }

    /// [`start`](Self::start) on `solution`.
    async fn start_on(solution: Solution, scripts: &[(&str, &str, &str)]) -> Self {
        let rig_path = solution.path.to_str().expect("utf-8").to_owned();
        for (name, trigger, source) in scripts {
            let file = script_file(&solution, &format!("{name}.rhai"), source);
            admin(
                &[
                    "scripts",
                    &rig_path,
                    "add",
                    name,
                    "--file",
                    &file,
                    "--trigger",
                    trigger,
                ],
                "",
            );
        }
        let server = TestServer::start(&solution.path, ServerConfig::default()).await;
        let serving =
            ServeLock::acquire(&solution.path, &server.addr.to_string()).expect("not served elsewhere");
        let stop_scripts = CancellationToken::new();
        let runs = server.runtime.start_scripts(&stop_scripts).await;
        Self {
            solution,
            server,
            stop_scripts,
            runs,
            _serving: serving,
        }
    }

    fn path(&self) -> String {
        self.solution.path.to_str().expect("utf-8").to_owned()
    }

    /// The tag's current value, as JSON.
    fn value(&self, tag: &str) -> serde_json::Value {
        self.server
            .runtime
            .objects()
            .tag(tag)
            .map(|tag| tag.current().value.to_json())
            .unwrap_or_default()
    }

    /// Waits until `check` holds (failing after the test patience).
    async fn until(&self, what: &str, check: impl Fn(&Self) -> bool) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while !check(self) {
            if tokio::time::Instant::now() >= deadline {
                let status = admin(&["scripts", &self.path(), "status"], "");
                panic!("never: {what}; scripts:\n{status}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The `status` line of `name`, once it shows `wanted`.
    async fn status_showing(&self, name: &str, wanted: &str) -> String {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let status = admin(&["scripts", &self.path(), "status"], "");
            if let Some(line) = status
                .lines()
                .find(|line| line.starts_with(name) && line.contains(wanted))
            {
                return line.to_owned();
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{name} never showed {wanted:?}: {status}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Stops serving; the solution stays (until the returned value is dropped).
    async fn stop(self) -> Solution {
        self.stop_scripts.cancel();
        self.server.stop().await;
        self.solution
    }
}

#[tokio::test]
async fn startup_and_every_scripts_run_with_their_classes_and_their_runs_are_recorded() {
    let rig = ScriptRig::start(&[
        (
            "Boot",
            "startup",
            "import \"Naming\" as naming;\nwrite_tag(\"Tank1.OperatorNote\", naming::mode(event.trigger));",
        ),
        // A class importing a class that comes after it by name.
        (
            "Naming",
            "class",
            "import \"Words\" as words;\nfn mode(trigger) { words::auto() + \"-\" + trigger }",
        ),
        ("Words", "class", "fn auto() { \"Auto\" }"),
        (
            "Count",
            "every:200ms",
            "let n = read_tag(\"Pump1.StartCount\").value;\nwrite_tag(\"Pump1.StartCount\", n + 1);",
        ),
    ])
    .await;
    let start = rig.value("Pump1.StartCount").as_i64().expect("an integer");
    rig.until("the startup script wrote", |rig| {
        rig.value("Tank1.OperatorNote") == "Auto-startup"
    })
    .await;
    rig.until("the periodic script ran three times", |rig| {
        rig.value("Pump1.StartCount").as_i64() >= Some(start + 3)
    })
    .await;
    let line = rig.status_showing("Count", "ok").await;
    assert!(line.contains("every:200ms  enabled  runs "), "{line}");
    assert!(line.contains("failures 0"), "{line}");
    let boot = rig.status_showing("Boot", "runs 1 ").await;
    assert!(boot.contains("ok"), "{boot}");
    // The writes are audited as the script's.
    let audit = admin(&["audit", &rig.path()], "");
    assert!(
        audit.contains("write Tank1.OperatorNote by script:Boot"),
        "{audit}"
    );
    rig.stop().await;
}

#[tokio::test]
async fn tag_and_alarm_scripts_run_when_their_tag_changes_or_alarm_trips() {
    let rig = ScriptRig::start_on(
        with_pump_note(solution_with_writable_tags()),
        &[
            (
                "Watch",
                "tag:Tank1.Level",
                "write_tag(\"Pump1.Note\", `level ${event.value}`);",
            ),
            (
                "OnHigh",
                "alarm:Tank1.Level.Hi",
                "write_tag(\"Pump1.StartCount\", if event.alarm == \"Tank1.Level.Hi\" { 7 } else { 0 });",
            ),
            (
                "AnyAlarm",
                "alarm:*",
                "write_tag(\"Tank1.OperatorNote\", `${event.alarm} at ${event.value}`);",
            ),
        ],
    )
    .await;
    let client = rig.server.guest().await;
    let level = |value: f64| {
        vec![service_client::TagWrite {
            name: "Tank1.Level".into(),
            value: Some(WriteValue::Number(value)),
        }]
    };
    client.write_tags(level(42.0)).await.expect("written");
    rig.until("the tag script saw 42", |rig| {
        rig.value("Pump1.Note") == "level 42.0"
    })
    .await;
    assert_ne!(rig.value("Pump1.StartCount"), 7, "no alarm yet");
    client.write_tags(level(99.0)).await.expect("written");
    rig.until("the alarm script ran", |rig| rig.value("Pump1.StartCount") == 7)
        .await;
    rig.until("the any-alarm script ran", |rig| {
        rig.value("Tank1.OperatorNote")
            .as_str()
            .is_some_and(|note| note.starts_with("Tank1.Level.Hi") && note.ends_with(" at 99.0"))
    })
    .await;
    rig.until("the tag script saw 99", |rig| {
        rig.value("Pump1.Note") == "level 99.0"
    })
    .await;
    rig.stop().await;
}

#[tokio::test]
async fn runaway_scripts_are_stopped_and_recorded_while_chat_and_ping_go_on_and_a_fix_runs_at_once() {
    let llm = ScriptedLlm::start_with(|_: &RecordedRequest| Reply::text("Pump 1 runs normally."))
        .await
        .expect("llm");
    let rig = ScriptRig::start_on(
        with_model(solution_with_writable_tags(), &llm.url()),
        &[
            ("Spin", "startup", "loop { }"),
            // Always running (or about to), so the turns below meet it under way.
            ("Again", "every:100ms", "loop { }"),
            ("Deep", "startup", "fn f(n) { f(n + 1) }\nf(0);"),
            ("Huge", "startup", "let s = \"xxxxxxxx\";\nloop { s += s; }"),
            ("Thrower", "startup", "let a = 1;\nthrow \"out of coffee\";"),
        ],
    )
    .await;
    let client = rig.server.guest().await;
    for _ in 0..3 {
        client.ping().await.expect("ping answers while scripts run away");
        let json = client
            .chat("How is Pump 1?")
            .await
            .expect("chat answers while scripts run away");
        let envelope = Envelope::from_json(&json).expect("an envelope");
        assert_eq!(envelope.status, Status::Ok, "{json}");
        assert_eq!(envelope.text, "Pump 1 runs normally.");
    }
    let spin = rig.status_showing("Spin", "operations").await;
    assert!(spin.contains("stopped after 1000000 operations"), "{spin}");
    let again = rig.status_showing("Again", "operations").await;
    assert_eq!(count_in(&again, "runs"), count_in(&again, "failures"), "{again}");
    let deep = rig.status_showing("Deep", "depth").await;
    assert!(deep.contains("nested deeper than 32 levels"), "{deep}");
    let huge = rig.status_showing("Huge", "size").await;
    assert!(
        huge.contains("stopped: Length of string grew past its limit"),
        "{huge}"
    );
    let thrower = rig.status_showing("Thrower", "failed").await;
    assert!(
        thrower.contains("line 2") && thrower.contains("out of coffee"),
        "{thrower}"
    );

    // A changed script is taken up without a restart (a startup script runs again).
    let fixed = script_file(
        &rig.solution,
        "fixed.rhai",
        "write_tag(\"Tank1.OperatorNote\", \"fixed\");",
    );
    admin(&["scripts", &rig.path(), "update", "Spin", "--file", &fixed], "");
    rig.until("the fixed script ran", |rig| {
        rig.value("Tank1.OperatorNote") == "fixed"
    })
    .await;
    rig.stop().await;
}

/// Whether `request` is a script's atomic call asking `query`.
fn asks(request: &RecordedRequest, query: &str) -> bool {
    request.json().is_some_and(|body| {
        body["messages"]
            .as_array()
            .and_then(|messages| messages.last())
            .is_some_and(|last| last["content"] == query)
    })
}

#[tokio::test]
async fn scripts_built_to_crash_the_server_or_flood_the_model_are_stopped_while_it_serves() {
    let llm = ScriptedLlm::start_with(|_: &RecordedRequest| Reply::text("Pump 1 runs normally."))
        .await
        .expect("llm");
    let rig = ScriptRig::start_on(
        with_model(solution_with_writable_tags(), &llm.url()),
        &[
            // Each of these overflowed a worker's stack and aborted the process.
            (
                "DeepMap",
                "startup",
                "let m = #{};\nfor i in 0..20000 { m = #{a: m}; }",
            ),
            ("DeepArray", "startup", "let a = [];\nloop { a = [a]; }"),
            (
                "Chain",
                "startup",
                "let f = || 0;\nfor i in 0..100000 { let g = f; f = || g.call() + 1; }\nf.call();",
            ),
            (
                "DeepWrite",
                "startup",
                "let a = 1;\nfor i in 0..1000 { a = [a]; }\nwrite_tag(\"Tank1.OperatorNote\", a);",
            ),
            // This one sent the model tens of thousands of requests a second.
            ("Flood", "startup", "loop { ai_execute(\"flood\"); }"),
        ],
    )
    .await;
    let client = rig.server.guest().await;
    client.ping().await.expect("ping answers beside the scripts");
    let json = client.chat("How is Pump 1?").await.expect("chat answers");
    assert_eq!(
        Envelope::from_json(&json).expect("an envelope").status,
        Status::Ok,
        "{json}"
    );

    let deep_map = rig.status_showing("DeepMap", "failures 1").await;
    assert!(
        deep_map.contains("size") || deep_map.contains("timeout"),
        "{deep_map}"
    );
    let deep_array = rig.status_showing("DeepArray", "failures 1").await;
    assert!(
        deep_array.contains("size") || deep_array.contains("timeout"),
        "{deep_array}"
    );
    let chain = rig.status_showing("Chain", "failed").await;
    assert!(
        chain.contains("not found: g"),
        "a closure captures nothing: {chain}"
    );
    let deep_write = rig.status_showing("DeepWrite", "size").await;
    assert!(deep_write.contains("deeper than 32 levels"), "{deep_write}");
    let flood = rig.status_showing("Flood", "model-calls").await;
    assert!(flood.contains("more than 10 model calls in one run"), "{flood}");
    assert_eq!(
        llm.requests()
            .iter()
            .filter(|request| asks(request, "flood"))
            .count(),
        10,
        "the run's allowance of model calls"
    );
    client.ping().await.expect("the server is still up");
    rig.stop().await;
}

#[tokio::test]
async fn a_stop_ends_a_run_waiting_for_the_model_at_once() {
    // The model would answer in ten minutes.
    let llm =
        ScriptedLlm::start_with(|_: &RecordedRequest| Reply::text("late").after(Duration::from_secs(600)))
            .await
            .expect("llm");
    let rig = ScriptRig::start_on(
        with_model(solution_with_writable_tags(), &llm.url()),
        &[("Wait", "startup", "loop { ai_execute(\"wait\"); }")],
    )
    .await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !llm.requests().iter().any(|request| asks(request, "wait")) {
        assert!(tokio::time::Instant::now() < deadline, "the script never asked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    rig.stop_scripts.cancel();
    assert!(
        rig.runs.ended(PATIENCE).await,
        "the run waiting for the model ended at the stop"
    );
    assert_eq!(
        llm.requests()
            .iter()
            .filter(|request| asks(request, "wait"))
            .count(),
        1,
        "and asked nothing more"
    );
    rig.stop().await;
}

#[tokio::test]
async fn a_script_slower_than_its_period_runs_back_to_back_and_counts_the_ticks_it_skipped() {
    // Each run waits 450 ms for the model: four or five ticks of its trigger.
    let llm =
        ScriptedLlm::start_with(|_: &RecordedRequest| Reply::text("noted").after(Duration::from_millis(450)))
            .await
            .expect("llm");
    let started = std::time::Instant::now();
    let rig = ScriptRig::start_on(
        with_model(solution_with_writable_tags(), &llm.url()),
        &[(
            "Slow",
            "every:100ms",
            "let reply = ai_execute(\"Anything new?\");\nwrite_tag(\"Tank1.OperatorNote\", reply.text);",
        )],
    )
    .await;
    // Runs and skips are recorded every two seconds.
    let line = loop {
        let line = rig.status_showing("Slow", "runs").await;
        if count_in(&line, "runs") >= 2 && count_in(&line, "skipped") >= 1 {
            break line;
        }
        assert!(started.elapsed() < PATIENCE, "never two runs and a skip: {line}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let (runs, skipped) = (count_in(&line, "runs"), count_in(&line, "skipped"));
    // While a run waits, one tick waits behind it and the others are counted as skipped.
    assert!(skipped >= runs, "{line}");
    // One run at a time: no more model calls than 450 ms waits fit one after another.
    let asked = f64::from(u32::try_from(llm.requests().len()).expect("a count"));
    let most = started.elapsed().as_secs_f64() / 0.45 + 1.0;
    assert!(asked <= most, "{asked} asked in {:?}: {line}", started.elapsed());
    assert_eq!(rig.value("Tank1.OperatorNote"), "noted");
    rig.stop().await;
}

/// The number after `word` in a `scripts status` line.
fn count_in(line: &str, word: &str) -> u64 {
    let after = line.split(word).nth(1).expect(word).trim_start();
    after
        .split_whitespace()
        .next()
        .expect("a number")
        .parse()
        .expect("a count")
}

/// `solution` with its model on, pointed at `url`.
fn with_model(solution: Solution, url: &str) -> Solution {
    let path = solution.path.to_str().expect("utf-8").to_owned();
    admin(&["settings", &path, "set", "URL", url], "");
    admin(&["settings", &path, "set", "ModelEnabled", "true"], "");
    solution
}

#[tokio::test]
async fn the_demos_alarm_note_is_written_by_its_script_from_the_models_answer() {
    let llm = ScriptedLlm::start([Reply::text("Tank 1 is nearly full: check the inlet valve.")])
        .await
        .expect("llm");
    let rig = ScriptRig::start_on(with_model(Solution::demo(), &llm.url()), &[]).await;
    assert!(
        admin(&["scripts", &rig.path(), "list"], "").contains("TankNote  alarm:Tank1.Level.Hi  enabled"),
        "the demo ships its script"
    );
    assert_eq!(rig.value("Tank1.OperatorNote"), "");
    // The field reports the tank running high.
    rig.server
        .runtime
        .plant()
        .write("Tank1.Level", TagValue::Number(95.0), Quality::GOOD)
        .expect("written");
    rig.until("the note is written", |rig| {
        rig.value("Tank1.OperatorNote") == "Tank 1 is nearly full: check the inlet valve."
    })
    .await;
    let requests = llm.requests();
    assert_eq!(requests.len(), 1, "one atomic call");
    let body = requests[0].json().expect("JSON");
    assert!(
        body.get("tools").is_none(),
        "the atomic path offers no tools: {body}"
    );
    assert!(body.to_string().contains("Tank 1 level is 95.0 %"), "{body}");
    // A panel reads the note as any tag.
    let client = rig.server.guest().await;
    let readings = client.read_tags(&["Tank1.OperatorNote"]).await.expect("reads");
    assert_eq!(readings.len(), 1);
    rig.stop().await;
}

#[tokio::test]
async fn ai_execute_async_returns_at_once_and_later_runs_the_callback_with_the_envelope() {
    let llm = ScriptedLlm::start([Reply::text("All pumps normal.")])
        .await
        .expect("llm");
    let rig = ScriptRig::start_on(
        with_pump_note(with_model(Solution::demo(), &llm.url())),
        &[(
            "Ask",
            "startup",
            "fn on_reply(envelope) { write_tag(\"Pump1.Note\", envelope.status + \": \" + envelope.text); }\n\
             ai_execute_async(#{ user: \"Summarize the pumps.\" }, \"on_reply\");\n\
             write_tag(\"Tank1.OperatorNote\", \"asked\");",
        )],
    )
    .await;
    rig.until("the callback ran", |rig| {
        rig.value("Pump1.Note") == "ok: All pumps normal."
    })
    .await;
    assert_eq!(
        rig.value("Tank1.OperatorNote"),
        "asked",
        "the asking run went on at once"
    );
    let body = llm.requests()[0].json().expect("JSON");
    assert!(body.get("tools").is_none(), "{body}");
    assert_eq!(body["messages"][0]["content"], "Summarize the pumps.");
    let line = rig.status_showing("Ask", "runs 2 ").await;
    assert!(line.contains("failures 0"), "the run and its callback: {line}");
    rig.stop().await;
}

#[tokio::test]
async fn a_burst_of_alarm_activations_never_piles_up_runs() {
    // Each run takes a while (about 200,000 operations), far longer than the burst's steps.
    let rig = ScriptRig::start(&[(
        "Slow",
        "alarm:Tank1.Level.Hi",
        "let x = 0; while x < 50000 { x += 1; }\nlet n = read_tag(\"Pump1.StartCount\").value;\nwrite_tag(\"Pump1.StartCount\", n + 1);",
    )])
    .await;
    let start = rig.value("Pump1.StartCount").as_i64().expect("an integer");
    let plant = rig.server.runtime.plant().clone();
    for _ in 0..100 {
        plant
            .write("Tank1.Level", TagValue::Number(99.0), Quality::GOOD)
            .expect("high");
        plant
            .write("Tank1.Level", TagValue::Number(50.0), Quality::GOOD)
            .expect("normal");
        tokio::task::yield_now().await;
    }
    let client = rig.server.guest().await;
    client.ping().await.expect("the server answers during the burst");
    // Every run that started ends; the status adds up.
    let line = rig.status_showing("Slow", "ok").await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let line_after = rig.status_showing("Slow", "ok").await;
    let (runs, skipped) = (count_in(&line_after, "runs"), count_in(&line_after, "skipped"));
    assert!(runs >= 1 && runs + skipped <= 100, "{line} / {line_after}");
    let written = rig.value("Pump1.StartCount").as_i64().expect("an integer") - start;
    assert_eq!(
        u64::try_from(written).expect("grew"),
        runs,
        "each run wrote once: {line_after}"
    );
    rig.stop().await;
}

/// `tserver scripts PATH ARGS...` on the blocking pool (it waits, polling the solution, while
/// the server under test runs on this test's runtime).
async fn admin_beside_server(path: &str, args: &[&str]) -> anyhow::Result<String> {
    let mut full = vec!["scripts".to_owned(), path.to_owned()];
    full.extend(args.iter().map(|arg| (*arg).to_owned()));
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = full.iter().map(String::as_str).collect();
        try_admin(&args, "")
    })
    .await
    .expect("no panic")
}

#[tokio::test]
async fn run_runs_in_the_serving_tserver_or_here_when_none_serves_and_says_which() {
    let rig = ScriptRig::start(&[
        ("Once", "every:1h", "write_tag(\"Tank1.OperatorNote\", event.trigger);"),
        ("Bad", "every:1h", "let a = 1;\nthrow \"no coffee\";"),
        ("Lib", "class", "fn f() { 1 }"),
        (
            "Asks",
            "every:1h",
            // A callback runs alone: it imports what it uses itself.
            "fn done(envelope) {\n    import \"Lib\" as lib;\n    write_tag(\"Tank1.OperatorNote\", `callback ${envelope.status} ${lib::f()}`);\n}\nai_execute_async(\"hi\", \"done\");",
        ),
    ])
    .await;
    let path = rig.path();
    let ran = admin_beside_server(&path, &["run", "Once"]).await.expect("ran");
    assert!(
        ran.starts_with("ran Once in the serving tserver (tserver pid ") && ran.contains("): ok in "),
        "{ran}"
    );
    assert_eq!(rig.value("Tank1.OperatorNote"), "run");
    let failed = admin_beside_server(&path, &["run", "bad"])
        .await
        .expect_err("failed");
    let message = format!("{failed:#}");
    assert!(
        message.contains("Bad ran in the serving tserver") && message.contains("(failed): line 2"),
        "{message}"
    );
    assert!(message.contains("no coffee"), "{message}");
    let class = admin_beside_server(&path, &["run", "Lib"])
        .await
        .expect_err("a class");
    assert!(format!("{class:#}").contains("is a class"), "{class:#}");
    let _solution = rig.stop().await;

    // Nobody serving: the run happens here, against the file, and is recorded there.
    let here = admin_beside_server(&path, &["run", "Once"])
        .await
        .expect("ran here");
    assert!(
        here.starts_with("ran Once here, against the solution file (no tserver serves it): ok in "),
        "{here}"
    );
    let failed_here = admin_beside_server(&path, &["run", "Bad"])
        .await
        .expect_err("failed here");
    let message = format!("{failed_here:#}");
    assert!(
        message.contains("Bad ran here, against the solution file") && message.contains("no coffee"),
        "{message}"
    );
    // An asynchronous AI call's callback runs before the command ends (the model is off: the
    // envelope says so), with the classes loaded.
    let asks = admin_beside_server(&path, &["run", "Asks"])
        .await
        .expect("ran here");
    assert!(
        asks.contains("(then 1 ai_execute_async callback runs, 0 failed)"),
        "{asks}"
    );
    let audit = admin(&["audit", &path], "");
    assert!(
        audit.contains("by script:Asks") && audit.contains("callback disabled 1"),
        "{audit}"
    );
    let status = admin(&["scripts", &path, "status"], "");
    let once = status
        .lines()
        .find(|line| line.starts_with("Once"))
        .expect("Once");
    assert!(once.contains("runs 2 "), "both runs recorded: {status}");
    let class = admin_beside_server(&path, &["run", "Lib"])
        .await
        .expect_err("a class");
    assert!(format!("{class:#}").contains("is a class"), "{class:#}");
}

/// Scripts printing and throwing half a megabyte each, ten times a second: each line is short,
/// and the prints and failures of one script and of all of them together are logged within
/// their allowances.
#[tokio::test]
async fn failing_scripts_throwing_huge_strings_cannot_fill_the_log() {
    const SCRIPTS: usize = 8;
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    // 2^19 bytes: half a MiB thrown, with a newline that must not start a log line.
    let source = "let s = \"x\";\nfor i in 0..19 { s += s; }\nprint(\"forged\\nline \" + s);\n\
                  throw \"forged\\nline \" + s;";
    let file = script_file(&solution, "thrower.rhai", source);
    for index in 0..SCRIPTS {
        let name = format!("Thrower{index}");
        admin(
            &[
                "scripts",
                &path,
                "add",
                &name,
                "--file",
                &file,
                "--trigger",
                "every:100ms",
            ],
            "",
        );
    }
    let started = std::time::Instant::now();
    let server = crate::support::ServerProcess::start(&solution.path, &[], &[]);
    // Until every script has failed more often than its own allowance (20 lines a minute).
    let deadline = tokio::time::Instant::now() + PATIENCE * 4;
    loop {
        let status = admin(&["scripts", &path, "status"], "");
        let failures: Vec<u64> = status
            .lines()
            .filter(|line| line.starts_with("Thrower") && line.contains("failures"))
            .map(|line| count_in(line, "failures"))
            .collect();
        if failures.len() == SCRIPTS && failures.iter().all(|failed| *failed > 30) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the scripts did not fail often enough: {status}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let minutes = started.elapsed().as_secs() / 60 + 1;
    let log = server.log();
    let longest = log.lines.iter().map(String::len).max().unwrap_or(0);
    assert!(longest < 1_000, "a log line of {longest} bytes");
    let stopped = log
        .lines
        .iter()
        .filter(|line| line.contains("script run stopped"))
        .count();
    // 20 a minute for all scripts together (each alone could log 20).
    assert!(
        stopped as u64 <= 20 * minutes,
        "{stopped} failure lines in {minutes} minute(s): {:#?}",
        log.lines
    );
    assert!(stopped > 0, "failures are logged");
    let printed = log
        .lines
        .iter()
        .filter(|line| line.contains("forged\\nline") && !line.contains("script run stopped"))
        .count();
    // The same for what they print.
    assert!(
        printed as u64 <= 20 * minutes,
        "{printed} printed lines in {minutes} minute(s): {:#?}",
        log.lines
    );
    assert!(printed > 0, "prints are logged");
    assert!(
        !log.lines.iter().any(|line| line.starts_with("line ")),
        "a newline in a thrown string cannot start a log line"
    );
    assert!(
        log.bytes as u64 <= 64 * 1024 * minutes,
        "{} log bytes for {SCRIPTS} failing scripts in {minutes} minute(s)",
        log.bytes
    );
}

#[tokio::test]
async fn a_script_proposes_a_write_that_waits_for_an_operator() {
    let solution = solution_with_writable_tags();
    let path = solution.path.to_str().expect("utf-8").to_owned();
    let mut model = solution.plant_model();
    for tag in &mut model.tags {
        if tag.name == "Pump1.Mode" {
            tag.proposable = true;
        }
    }
    let file = solution.path.with_file_name("proposable.toml");
    std::fs::write(&file, model.to_toml().expect("toml")).expect("writes");
    admin(&["plant", &path, "import", file.to_str().expect("utf-8")], "");
    let rig = ScriptRig::start_on(
        solution,
        &[(
            "Advisor",
            "startup",
            "let id = propose_write(\"Pump1.Mode\", \"Manual\", \"the level is high\");\n\
             write_tag(\"Tank1.OperatorNote\", id);\n\
             try { propose_write(\"Tank1.Level\", 10, \"lower\"); } catch (error) { write_tag(\"Pump1.StartCount\", 1); }",
        )],
    )
    .await;
    rig.until("the script proposed", |rig| {
        rig.value("Tank1.OperatorNote")
            .as_str()
            .is_some_and(|id| id.starts_with("p-"))
    })
    .await;
    rig.until("the script was told the second one cannot be proposed", |rig| {
        rig.value("Pump1.StartCount") == 1
    })
    .await;
    let client = rig.server.guest().await;
    let pending = client.list_proposals().await.expect("lists").proposals;
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0].proposer, "script Advisor");
    assert_eq!(rig.value("Tank1.OperatorNote"), pending[0].id.as_str());
    assert_eq!(rig.value("Pump1.Mode"), "Auto", "proposing wrote nothing");
    rig.stop().await;
}
