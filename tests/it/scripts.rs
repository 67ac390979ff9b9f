//! Solution scripts: stored, changed, switched and removed through `tserver scripts`, a syntax
//! error refused with its line and column, bad input of every kind answered with a sentence
//! that names it; and run by a serving tserver on their triggers (startup, every, tag, alarm),
//! runaway runs stopped and recorded while the server goes on, changes taken up at once.

use std::time::Duration;

use service_client::WriteValue;
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
    assert_eq!(admin(&["scripts", &path, "list"], ""), "no scripts\n");
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
            "TankNote",
            "--file",
            &note,
            "--trigger",
            "alarm:*",
        ],
        "",
    );
    assert_eq!(added, "added script TankNote (alarm:*)\n");
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
        "TankNote  alarm:*  enabled\nUtil  class  enabled\n"
    );
    let shown = admin(&["scripts", &path, "show", "tanknote"], "");
    assert!(
        shown.starts_with("// TankNote (alarm:*, enabled)\nfn on_alarm(alarm)"),
        "{shown}"
    );

    let tick = script_file(&solution, "tick.rhai", "log(\"tick\");\n");
    let updated = admin(
        &[
            "scripts",
            &path,
            "update",
            "TankNote",
            "--file",
            &tick,
            "--trigger",
            "every:5s",
        ],
        "",
    );
    assert_eq!(updated, "updated script TankNote (every:5s)\n");
    assert!(admin(&["scripts", &path, "show", "TankNote"], "").contains("log(\"tick\");"));
    assert_eq!(
        admin(&["scripts", &path, "disable", "TankNote"], ""),
        "script TankNote is disabled\n"
    );
    let status = admin(&["scripts", &path, "status"], "");
    assert!(
        status.contains("TankNote  every:5s  disabled  runs 0  failures 0  skipped 0  never run"),
        "{status}"
    );
    admin(&["scripts", &path, "enable", "TankNote"], "");
    assert_eq!(
        admin(&["scripts", &path, "remove", "Util"], ""),
        "removed script Util\n"
    );
    assert_eq!(
        admin(&["scripts", &path, "list"], ""),
        "TankNote  every:5s  enabled\n"
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
        "no scripts\n",
        "nothing was stored"
    );
}

/// A serving tserver with its scripts running, on a demo plant whose Pump1.Mode,
/// Tank1.Level and Pump1.StartCount are writable.
struct ScriptRig {
    solution: Solution,
    server: TestServer,
    stop_scripts: CancellationToken,
}

impl ScriptRig {
    /// Stores `scripts` (name, trigger, source), then serves with them running.
    async fn start(scripts: &[(&str, &str, &str)]) -> Self {
        let solution = solution_with_writable_tags();
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
        let stop_scripts = CancellationToken::new();
        server.runtime.start_scripts(&stop_scripts);
        Self {
            solution,
            server,
            stop_scripts,
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
            assert!(tokio::time::Instant::now() < deadline, "never: {what}");
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

    async fn stop(self) {
        self.stop_scripts.cancel();
        self.server.stop().await;
    }
}

#[tokio::test]
async fn startup_and_every_scripts_run_and_their_runs_are_recorded() {
    let rig = ScriptRig::start(&[
        (
            "Boot",
            "startup",
            "write_tag(\"Pump1.Mode\", \"Auto-\" + event.trigger);",
        ),
        (
            "Count",
            "every:200ms",
            "let n = read_tag(\"Pump1.StartCount\").value;\nwrite_tag(\"Pump1.StartCount\", n + 1);",
        ),
    ])
    .await;
    let start = rig.value("Pump1.StartCount").as_i64().expect("an integer");
    rig.until("the startup script wrote", |rig| {
        rig.value("Pump1.Mode") == "Auto-startup"
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
    assert!(audit.contains("write Pump1.Mode by script:Boot"), "{audit}");
    rig.stop().await;
}

#[tokio::test]
async fn tag_and_alarm_scripts_run_when_their_tag_changes_or_alarm_trips() {
    let rig = ScriptRig::start(&[
        (
            "Watch",
            "tag:Tank1.Level",
            "write_tag(\"Pump1.Mode\", `level ${event.value}`);",
        ),
        (
            "OnHigh",
            "alarm:Tank1.Level.Hi",
            "write_tag(\"Pump1.StartCount\", if event.alarm == \"Tank1.Level.Hi\" { 7 } else { 0 });",
        ),
    ])
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
        rig.value("Pump1.Mode") == "level 42.0"
    })
    .await;
    assert_ne!(rig.value("Pump1.StartCount"), 7, "no alarm yet");
    client.write_tags(level(99.0)).await.expect("written");
    rig.until("the alarm script ran", |rig| rig.value("Pump1.StartCount") == 7)
        .await;
    rig.until("the tag script saw 99", |rig| {
        rig.value("Pump1.Mode") == "level 99.0"
    })
    .await;
    rig.stop().await;
}

#[tokio::test]
async fn a_runaway_script_is_stopped_and_recorded_while_the_server_goes_on_and_a_fix_runs_at_once() {
    let rig = ScriptRig::start(&[
        ("Spin", "startup", "loop { }"),
        ("Deep", "startup", "fn f(n) { f(n + 1) }\nf(0);"),
        ("Thrower", "startup", "let a = 1;\nthrow \"out of coffee\";"),
    ])
    .await;
    let client = rig.server.guest().await;
    for _ in 0..5 {
        client.ping().await.expect("ping answers while scripts run away");
    }
    let spin = rig.status_showing("Spin", "operations").await;
    assert!(spin.contains("stopped after 1000000 operations"), "{spin}");
    let deep = rig.status_showing("Deep", "depth").await;
    assert!(deep.contains("nested deeper than 32 levels"), "{deep}");
    let thrower = rig.status_showing("Thrower", "failed").await;
    assert!(
        thrower.contains("line 2") && thrower.contains("out of coffee"),
        "{thrower}"
    );

    // A changed script is taken up without a restart (a startup script runs again).
    let fixed = script_file(
        &rig.solution,
        "fixed.rhai",
        "write_tag(\"Pump1.Mode\", \"fixed\");",
    );
    admin(&["scripts", &rig.path(), "update", "Spin", "--file", &fixed], "");
    rig.until("the fixed script ran", |rig| rig.value("Pump1.Mode") == "fixed")
        .await;
    rig.stop().await;
}
