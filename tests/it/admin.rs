//! The admin commands on a solution file: init, settings, users.

use crate::support::{Solution, admin, try_admin};

#[test]
fn init_writes_the_spec_defaults_and_refuses_to_overwrite() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("plain.db");
    let path = path.to_str().expect("utf-8 path");
    let created = admin(&["init", path], "");
    assert!(
        created.starts_with(&format!("created solution {path}\nnext:\n")),
        "{created}"
    );
    assert_eq!(admin(&["settings", path, "get", "ModelEnabled"], ""), "false\n");
    assert_eq!(admin(&["settings", path, "get", "ModelOptions"], ""), "0x00\n");
    assert_eq!(admin(&["settings", path, "get", "ModelSettings"], ""), "NULL\n");
    assert_eq!(
        admin(&["settings", path, "get", "URL"], ""),
        format!("{}\n", localai::settings::defaults::URL)
    );
    assert_eq!(
        admin(&["users", path, "list"], ""),
        "",
        "a plain solution has no guest"
    );
    // The commands that make it useful, in the order a newcomer needs them.
    let steps: Vec<&str> = created
        .lines()
        .skip(2)
        .map(str::trim)
        .filter(|line| !line.starts_with('#'))
        .collect();
    assert_eq!(
        steps,
        [
            format!("tserver users {path} add NAME --role operator"),
            format!("tserver plant {path} import plant.toml"),
            format!("tserver settings {path} set ModelOptions 0x9e"),
            format!("tserver settings {path} set URL http://localhost:11434/v1/chat/completions"),
            format!("tserver settings {path} set Name qwen2.5:7b-instruct"),
            format!("tserver settings {path} set ModelEnabled true"),
            format!("tserver settings {path} set SimulatorEnabled on"),
            format!("tserver serve {path}"),
            format!("tserver-demo --solution {path}"),
        ]
    );
    // Each admin step works as printed.
    for step in steps
        .iter()
        .filter(|step| step.starts_with("tserver users") || step.starts_with("tserver settings"))
    {
        let args: Vec<&str> = step.split_whitespace().skip(1).collect();
        admin(&args, "a-password\n");
    }
    assert_eq!(admin(&["users", path, "list"], ""), "NAME operator\n");
    assert_eq!(admin(&["settings", path, "get", "ModelOptions"], ""), "0x9e\n");
    let again = try_admin(&["init", path], "").expect_err("refuses to overwrite");
    assert!(again.to_string().contains("already exists"));
}

#[test]
fn the_demo_solution_has_a_passwordless_guest() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8 path");
    assert_eq!(
        admin(&["users", path, "list"], ""),
        "guest operator (passwordless)\n"
    );
}

#[test]
fn users_are_stored_as_argon2_hashes_never_as_plaintext() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8 path");
    admin(&["users", path, "add", "operator"], "plaintext-canary-81\n");
    let listing = admin(&["users", path, "list"], "");
    assert_eq!(
        listing, "guest operator (passwordless)\noperator viewer\n",
        "viewer unless told"
    );
    let bytes = std::fs::read(&solution.path).expect("read db");
    let wal = std::fs::read(solution.path.with_extension("db-wal")).unwrap_or_default();
    for file in [bytes, wal] {
        assert!(!file.windows(19).any(|w| w == b"plaintext-canary-81"));
    }
    let duplicate = try_admin(&["users", path, "add", "OPERATOR"], "x\n").expect_err("duplicate");
    assert!(duplicate.to_string().contains("already exists"));
    let empty = try_admin(&["users", path, "add", "nopass"], "\n").expect_err("empty password");
    assert_eq!(
        empty.to_string(),
        "no password given (the first line of standard input is empty); pipe one in, or pass \
         --no-password for a passwordless user"
    );
    assert_eq!(
        admin(&["users", path, "role", "operator", "Operator"], ""),
        "operator is now operator\n"
    );
    let bad = try_admin(&["users", path, "role", "operator", "root"], "").expect_err("no such role");
    assert!(
        bad.to_string().contains("not a role: viewer, operator or admin"),
        "{bad}"
    );
    admin(&["users", path, "remove", "operator"], "");
    assert_eq!(
        admin(&["users", path, "list"], ""),
        "guest operator (passwordless)\n"
    );
}

#[test]
fn settings_edits_keep_unknown_keys() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8 path");
    admin(
        &[
            "settings",
            path,
            "set",
            "ModelSettings",
            r#"{"Provider":"vllm","URL":"http://a:8000/v1/chat/completions"}"#,
        ],
        "",
    );
    admin(&["settings", path, "set", "Name", "llama3.1:8b"], "");
    admin(&["settings", path, "set", "TimeoutSeconds", "30"], "");
    admin(&["settings", path, "set", "ModelSettings.Region", "eu"], "");
    assert_eq!(
        admin(&["settings", path, "get", "ModelSettings"], ""),
        "{\"Provider\":\"vllm\",\"URL\":\"http://a:8000/v1/chat/completions\",\"Name\":\"llama3.1:8b\",\"TimeoutSeconds\":30,\"Region\":\"eu\"}\n"
    );
    assert_eq!(admin(&["settings", path, "get", "TimeoutSeconds"], ""), "30\n");
    assert_eq!(
        admin(&["settings", path, "get", "ModelSettings.Provider"], ""),
        "vllm\n"
    );
    admin(&["settings", path, "unset", "Name"], "");
    assert_eq!(
        admin(&["settings", path, "get", "Name"], ""),
        format!("{}\n", localai::settings::defaults::NAME)
    );
    assert!(admin(&["settings", path, "get", "ModelSettings"], "").contains("Provider"));
}

#[test]
fn bad_settings_input_gets_clear_errors_and_changes_nothing() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8 path");
    let cases: [(&[&str], &str); 5] = [
        (
            &["settings", path, "set", "ModelEnabled", "maybe"],
            "ModelEnabled",
        ),
        (&["settings", path, "set", "ModelOptions", "0xZZ"], "ModelOptions"),
        (&["settings", path, "set", "ModelSettings", "[1]"], "JSON object"),
        (
            &["settings", path, "set", "Provider", "x"],
            "unknown settings key",
        ),
        (
            &["settings", "/nonexistent/plant.db", "get", "URL"],
            "no solution file",
        ),
    ];
    for (args, expected) in cases {
        let error = try_admin(args, "").expect_err("refused");
        assert!(error.to_string().contains(expected), "{args:?}: {error}");
    }
    assert_eq!(admin(&["settings", path, "get", "ModelOptions"], ""), "0xde\n");
    assert_eq!(admin(&["settings", path, "get", "ModelEnabled"], ""), "false\n");
}

#[test]
fn settings_that_would_not_be_used_as_given_are_refused_and_stored_ones_are_reported() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8 path");
    let before = admin(&["settings", path, "get", "ModelSettings"], "");
    let cases: [(&[&str], &str); 8] = [
        (
            &["settings", path, "set", "ModelSettings", r#"{"URL": 5}"#],
            "URL is a number, not a string",
        ),
        (
            &["settings", path, "set", "TimeoutSeconds", "-1"],
            "TimeoutSeconds -1 is not a positive number",
        ),
        (
            &["settings", path, "set", "TimeoutSeconds", "1e308"],
            "above the ceiling of 3600 s",
        ),
        (
            &["settings", path, "set", "MaxToolDispatchesPerTurn", "1e9"],
            "above the ceiling of 50",
        ),
        (
            &["settings", path, "set", "MaxHistoryMessages", "-5"],
            "MaxHistoryMessages -5 is not a whole number from 2 to 1000",
        ),
        (
            &["settings", path, "set", "URL", "localhost:11434"],
            "URL is not an http:// or https:// URL",
        ),
        (
            &["settings", path, "set", "Authorization", "Bearer\nabc"],
            "unknown Authorization scheme",
        ),
        (&["settings", path, "set", "Name", " "], "Name is empty"),
    ];
    for (args, expected) in cases {
        let error = try_admin(args, "").expect_err("refused").to_string();
        assert!(error.contains(expected), "{args:?}: {error}");
        assert!(error.contains("nothing changed"), "{error}");
    }
    assert_eq!(admin(&["settings", path, "get", "ModelSettings"], ""), before);
    admin(&["settings", path, "set", "TimeoutSeconds", "3600"], "");

    // A value stored by other means (an older build, a hand edit) still falls back or is
    // clamped at read time, and `settings show` says so.
    let db = rusqlite::Connection::open(&solution.path).expect("opens");
    db.execute(
        r#"UPDATE SolutionSettings SET ModelSettings = '{"MaxToolDispatchesPerTurn": 1000000000, "TimeoutSeconds": "soon"}'"#,
        [],
    )
    .expect("hand edit");
    assert_eq!(
        admin(&["settings", path, "get", "MaxToolDispatchesPerTurn"], ""),
        "50\n"
    );
    assert_eq!(admin(&["settings", path, "get", "TimeoutSeconds"], ""), "60\n");
    let shown = admin(&["settings", path, "show"], "");
    assert!(
        shown.contains("warning: MaxToolDispatchesPerTurn 1000000000 is above the ceiling of 50; 50 is used"),
        "{shown}"
    );
    assert!(
        shown.contains("warning: TimeoutSeconds \"soon\" is not a number"),
        "{shown}"
    );
}

#[test]
fn tokens_are_shown_once_listed_without_their_secret_and_revoked_by_id_or_label() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8");
    let text = admin(
        &[
            "tokens",
            path,
            "create",
            "--user",
            "guest",
            "--name",
            "vs code",
            "--expires",
            "30",
        ],
        "",
    );
    let token = text.trim();
    assert!(token.starts_with(store::TOKEN_PREFIX), "{text}");
    let listed = admin(&["tokens", path, "list"], "");
    let secret = token.rsplit('_').next().expect("a secret part");
    assert!(
        !listed.contains(secret),
        "a listing never shows the token: {listed}"
    );
    assert!(listed.contains("\"vs code\"  user guest  created "), "{listed}");
    assert!(!listed.contains("expires never"), "30 days: {listed}");
    let id = listed.split_whitespace().next().expect("an id");
    assert!(token.contains(id), "the id is part of the token");

    let error = try_admin(&["tokens", path, "create", "--user", "nobody"], "").expect_err("refused");
    assert!(error.to_string().contains("no user named \"nobody\""), "{error}");
    let error = try_admin(
        &["tokens", path, "create", "--user", "guest", "--expires", "0"],
        "",
    )
    .expect_err("refused");
    assert!(error.to_string().contains("0 is not in 1..=3650"), "{error}");

    assert!(
        admin(&["tokens", path, "revoke", "vs code"], "").contains(&format!("revoked token {id} of guest"))
    );
    assert_eq!(admin(&["tokens", path, "list"], ""), "no tokens\n");
    let error = try_admin(&["tokens", path, "revoke", id], "").expect_err("gone");
    assert!(error.to_string().contains("no token with id or name"), "{error}");
}

#[test]
fn every_command_that_takes_a_solution_takes_it_first_or_as_an_option() {
    use clap::{CommandFactory, Parser};
    use tserver::cli::Cli;
    // Each command with what it needs beside the solution.
    let samples: &[(&str, &[&str])] = &[
        ("serve", &[]),
        ("init", &[]),
        ("settings", &["show"]),
        ("secrets", &["list"]),
        ("ai-execute", &["What is wrong?"]),
        ("eval", &["questions.toml"]),
        ("users", &["list"]),
        ("audit", &[]),
        ("history", &["export"]),
        ("alarms", &["report"]),
        ("plant", &["show"]),
        ("sources", &["list"]),
        ("tokens", &["list"]),
        ("scripts", &["list"]),
    ];
    let mut taking: Vec<String> = Cli::command()
        .get_subcommands()
        .filter(|command| command.get_arguments().any(|arg| arg.get_id() == "solution"))
        .map(|command| command.get_name().to_owned())
        .collect();
    taking.sort();
    let mut sampled: Vec<String> = samples.iter().map(|(name, _)| (*name).to_owned()).collect();
    sampled.sort();
    assert_eq!(sampled, taking, "every command taking a solution is checked here");
    for (name, rest) in samples {
        let first: Vec<&str> = ["tserver", name, "some/plant.db"]
            .into_iter()
            .chain(rest.iter().copied())
            .collect();
        let option: Vec<&str> = ["tserver", name, "--solution", "some/plant.db"]
            .into_iter()
            .chain(rest.iter().copied())
            .collect();
        for args in [first, option] {
            let cli = Cli::try_parse_from(&args).unwrap_or_else(|error| panic!("{args:?}: {error}"));
            let solution = cli
                .command
                .solution()
                .expect("takes a solution")
                .unwrap_or_else(|error| panic!("{args:?}: {error}"));
            assert_eq!(solution.to_string(), "some/plant.db", "{args:?}");
        }
    }
}

#[test]
fn ai_execute_takes_the_solution_first() {
    let solution = Solution::empty();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_tserver-under-test"))
        .arg("ai-execute")
        .arg(&solution.path)
        .arg("hello")
        .output()
        .expect("tserver runs");
    assert!(output.status.success(), "{output:?}");
    let envelope: serde_json::Value = serde_json::from_slice(&output.stdout).expect("an envelope");
    assert_eq!(envelope["status"], "disabled", "{envelope}");
}

/// A reader that stops reading early (`tserver plant PATH export | head`) ends the command
/// quietly, with status 0: no "Broken pipe" error.
#[test]
fn a_reader_that_stops_early_ends_the_command_quietly() {
    use std::io::Read as _;
    let solution = crate::support::Solution::demo();
    let path = solution.path.to_str().expect("utf-8");
    // Enough tags that the export is far larger than a pipe holds.
    let mut plant = String::new();
    for index in 0..3_000 {
        plant.push_str(&format!(
            "[[tags]]\nname = \"Big.T{index}\"\npath = \"Plant/Big/T{index}\"\ntype = \"number\"\n\
             description = \"a tag with words enough to make the export large\"\n"
        ));
    }
    let file = solution.path.with_file_name("big.toml");
    std::fs::write(&file, plant).expect("writes");
    crate::support::admin(&["plant", path, "import", file.to_str().expect("utf-8")], "");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tserver-under-test"))
        .args(["plant", path, "export"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("tserver runs");
    let mut stdout = child.stdout.take().expect("piped");
    let mut first = [0_u8; 100];
    stdout.read_exact(&mut first).expect("the export starts");
    drop(stdout);
    let output = child.wait_with_output().expect("ends");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{:?}: {stderr}", output.status);
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
}
