//! `tserver scripts`: solution scripts stored, changed, switched and removed through the admin
//! command line, a syntax error refused with its line and column, and bad input of every kind
//! answered with a sentence that names it, changing nothing.

use crate::support::{Solution, admin, try_admin};

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
