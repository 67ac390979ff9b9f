//! `tclient` against a real server, run in process through its command-line entry.

use clap::Parser;
use tclient::cli::{Cli, Terminals, run};
use tserver::ServerConfig;

use crate::support::{Solution, TestServer, admin};

pub(crate) async fn tclient(args: &[&str], stdin: &str, interactive: bool) -> anyhow::Result<String> {
    tclient_on(
        args,
        stdin,
        Terminals {
            input: interactive,
            output: false,
        },
    )
    .await
}

/// Runs the `tclient` program as a process of its own, with standard input empty (not a
/// terminal) and standard output and error captured.
pub(crate) async fn tclient_process(args: &[&str]) -> std::process::Output {
    let args: Vec<String> = args.iter().map(|arg| (*arg).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_tclient-under-test"))
            .args(args)
            .env("RUST_BACKTRACE", "0")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("tclient runs")
    })
    .await
    .expect("the run")
}

/// `tclient` with its input and output on a terminal or not, as `terminals` says.
async fn tclient_on(args: &[&str], stdin: &str, terminals: Terminals) -> anyhow::Result<String> {
    let cli = Cli::try_parse_from(std::iter::once("tclient").chain(args.iter().copied()))?;
    let mut output = Vec::new();
    run(&cli, &mut stdin.as_bytes(), &mut output, terminals).await?;
    Ok(String::from_utf8(output).expect("utf-8"))
}

#[tokio::test]
async fn chat_prints_exactly_one_envelope_line() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let addr = server.addr.to_string();
    let out = tclient(
        &["--addr", &addr, "chat", "What is wrong with Pump 1?"],
        "",
        false,
    )
    .await
    .expect("a reply came back");
    assert_eq!(out.lines().count(), 1);
    let envelope = service_client::Envelope::from_json(out.trim_end()).expect("an envelope");
    assert_eq!(envelope.status, service_client::Status::Disabled);
    server.stop().await;
}

#[tokio::test]
async fn repl_without_a_terminal_answers_one_line_per_query_on_one_connection() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8 path");
    admin(&["users", path, "add", "operator"], "pw\n");
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let addr = server.addr.to_string();
    let out = tclient(
        &["--addr", &addr, "--user", "operator", "--password-stdin", "repl"],
        "pw\nfirst question\n\nsecond question\n",
        false,
    )
    .await
    .expect("replies");
    let lines: Vec<_> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    for line in lines {
        assert!(service_client::Envelope::from_json(line).is_ok(), "{line}");
    }
    server.stop().await;
}

#[tokio::test]
async fn interactive_repl_shows_status_and_warnings_readably() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let addr = server.addr.to_string();
    let out = tclient(&["--addr", &addr, "repl"], "status?\n\n", true)
        .await
        .expect("runs");
    assert!(out.contains("you> "), "{out}");
    assert!(
        out.contains(&format!("[warning] {}", localai::gates::MODEL_ENABLED_OFF)),
        "{out}"
    );
    assert!(out.contains("[disabled in 0 ms]"), "{out}");
    server.stop().await;
}

#[tokio::test]
async fn failures_are_errors_not_output() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let addr = server.addr.to_string();
    let refused = tclient(&["--addr", &addr, "--user", "ghost", "ping"], "", false)
        .await
        .expect_err("login refused")
        .to_string();
    assert!(
        refused.contains("login refused")
            && refused.contains("(as \"ghost\"): give the user with --user NAME")
            && refused.contains("tserver users PATH add NAME"),
        "{refused}"
    );
    let ping = tclient(&["--addr", &addr, "ping"], "", false)
        .await
        .expect("pong");
    assert!(ping.starts_with("pong from"), "{ping}");
    server.stop().await;

    // Nothing listens on the stopped server's port any more.
    let unreachable = tclient(&["--addr", &addr, "ping"], "", false).await;
    assert!(
        unreachable
            .expect_err("cannot connect")
            .to_string()
            .contains("cannot connect")
    );
    assert!(
        tclient(&["--timeout-secs", "-1", "ping"], "", false)
            .await
            .is_err()
    );
}

async fn bench_json(addr: &str, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--addr", addr, "bench"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--warmup", "0s", "--json"]);
    let out = tclient(&all, "", false).await.expect("the bench runs");
    serde_json::from_str(out.trim_end()).expect("one JSON report")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_counts_every_call_of_each_scenario_and_reports_latency_quantiles() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let addr = server.addr.to_string();

    let ping = bench_json(&addr, &["ping", "-c", "3", "--in-flight", "2", "-n", "300"]).await;
    assert_eq!(ping["calls"], 300, "{ping}");
    assert_eq!(ping["outcomes"]["ok"], 300, "{ping}");
    assert_eq!(ping["errors"], serde_json::json!({}), "{ping}");
    assert_eq!(ping["mode"], "closed");
    let latency = &ping["latencyUs"];
    let quantiles: Vec<f64> = ["p50", "p90", "p99", "p999", "max"]
        .iter()
        .map(|q| latency[*q].as_f64().expect("a number"))
        .collect();
    assert!(quantiles[0] > 0.0, "{ping}");
    assert!(
        quantiles.windows(2).all(|pair| pair[0] <= pair[1]),
        "quantiles rise: {ping}"
    );

    // A solution with Local AI off answers every chat turn at the gate, as `disabled`.
    let chat = bench_json(&addr, &["chat", "-c", "2", "-n", "50"]).await;
    assert_eq!(chat["outcomes"], serde_json::json!({"disabled": 50}), "{chat}");

    let tags = bench_json(
        &addr,
        &["tags", "--tags", "Tank1.Level,Pump1.Running", "-n", "40"],
    )
    .await;
    assert_eq!(tags["outcomes"]["ok"], 40, "{tags}");

    // Open loop: a fixed schedule, still exactly the calls asked for.
    let open = bench_json(&addr, &["ping", "-c", "2", "--rate", "2000", "-n", "100"]).await;
    assert_eq!(open["mode"], "open");
    assert_eq!(open["calls"], 100, "{open}");

    let idle = bench_json(&addr, &["idle", "-c", "25", "-d", "200ms"]).await;
    assert_eq!(idle["connectionsHeld"], 25, "{idle}");
    assert_eq!(idle["outcomes"]["ok"], 25, "{idle}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_reports_refused_logins_by_kind_and_rejects_bad_options() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let addr = server.addr.to_string();

    for (args, expected) in [
        (&["bench", "ping", "-c", "0"][..], "at least 1"),
        (
            &["bench", "ping", "--rate=-5"][..],
            "--rate must be a positive number",
        ),
        (&["bench", "ping", "-n", "0"][..], "--count must be at least 1"),
    ] {
        let mut all = vec!["--addr", addr.as_str()];
        all.extend_from_slice(args);
        let error = tclient(&all, "", false).await.expect_err("refused");
        assert!(error.to_string().contains(expected), "{args:?}: {error}");
    }
    let parse = tclient(&["--addr", &addr, "bench", "ping", "-d", "soon"], "", false).await;
    assert!(parse.is_err(), "an unreadable duration is refused");

    let error = tclient(
        &[
            "--addr", &addr, "--user", "nobody", "bench", "ping", "-c", "2", "-n", "5",
        ],
        "",
        false,
    )
    .await
    .expect_err("no connection logs in");
    assert!(error.to_string().contains("login_refused"), "{error}");
    server.stop().await;
}

/// Runs the `tclient` program with its standard error on a new pseudo-terminal (100 columns);
/// returns its standard output and what it drew on the terminal.
#[cfg(target_os = "linux")]
fn tclient_on_a_terminal(args: &[&str]) -> (String, String) {
    use std::io::Read;
    use std::process::{Command, Stdio};

    use rustix::fs::{Mode, OFlags};
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};

    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).expect("a pty");
    grantpt(&master).expect("grantpt");
    unlockpt(&master).expect("unlockpt");
    let name = ptsname(&master, Vec::new()).expect("the pty's name");
    let terminal = rustix::fs::open(name.as_c_str(), OFlags::RDWR | OFlags::NOCTTY, Mode::empty())
        .expect("opens the terminal side");
    let size = rustix::termios::Winsize {
        ws_row: 24,
        ws_col: 100,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    rustix::termios::tcsetwinsize(&terminal, size).expect("sets the window size");
    let child = Command::new(env!("CARGO_BIN_EXE_tclient-under-test"))
        .args(args)
        .env("TERM", "xterm")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(terminal))
        .spawn()
        .expect("tclient starts");
    // The child holds the only terminal side now, so reading the master ends when it exits.
    let reader = std::thread::spawn(move || {
        let mut drawn = Vec::new();
        let mut master = std::fs::File::from(master);
        let mut buffer = [0u8; 4096];
        // Linux answers EIO, not end-of-file, once the terminal side is closed.
        while let Ok(read @ 1..) = master.read(&mut buffer) {
            drawn.extend_from_slice(&buffer[..read]);
        }
        drawn
    });
    let output = child.wait_with_output().expect("tclient ends");
    assert!(output.status.success(), "{output:?}");
    let drawn = reader.join().expect("the reader thread");
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&drawn).into_owned(),
    )
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_draws_a_progress_bar_on_a_terminal_and_nothing_on_a_pipe() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let addr = server.addr.to_string();
    let args = ["--addr", &addr, "bench", "ping", "-d", "1s", "--warmup", "0s"];
    let owned: Vec<String> = args.iter().map(|arg| (*arg).to_owned()).collect();
    let (report, drawn) = tokio::task::spawn_blocking(move || {
        tclient_on_a_terminal(&owned.iter().map(String::as_str).collect::<Vec<_>>())
    })
    .await
    .expect("the terminal run");
    // Each redraw is a line of its own (`\r`, then erase the line): the bar, elapsed/total
    // and the calls so far, which only rise, then a last erase leaves the terminal clean.
    let frames: Vec<&str> = drawn
        .split("\r\u{1b}[2K")
        .filter(|frame| !frame.is_empty())
        .collect();
    assert!(frames.len() >= 2, "several redraws: {drawn:?}");
    assert!(frames.iter().all(|frame| frame.contains("/1s")), "{drawn:?}");
    let filled: Vec<usize> = frames.iter().map(|frame| frame.matches('█').count()).collect();
    assert!(filled.windows(2).all(|pair| pair[0] <= pair[1]), "{filled:?}");
    assert!(filled.last() > filled.first(), "the bar fills: {filled:?}");
    let calls: Vec<u64> = frames
        .iter()
        .filter_map(|frame| frame.split_whitespace().rev().nth(1)?.parse().ok())
        .collect();
    assert!(
        !calls.is_empty() && calls.windows(2).all(|pair| pair[0] <= pair[1]),
        "{drawn:?}"
    );
    assert!(calls.last() > Some(&0), "{drawn:?}");
    assert!(drawn.ends_with("\r\u{1b}[2K"), "cleared at the end: {drawn:?}");
    assert!(
        report.contains("calls"),
        "the report goes to standard output: {report}"
    );

    // Standard error on a pipe: no bar, nothing at all.
    let piped = tclient_process(&args).await;
    assert!(piped.status.success(), "{piped:?}");
    assert!(
        piped.stderr.is_empty(),
        "{:?}",
        String::from_utf8_lossy(&piped.stderr)
    );
    assert!(String::from_utf8_lossy(&piped.stdout).contains("calls"));
    server.stop().await;
}

#[tokio::test]
async fn tags_read_and_write_and_alarms_ack_from_the_command_line() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let addr = server.addr.to_string();
    let written = tclient(
        &["--addr", &addr, "tags", "write", "Pump1.Mode=Manual"],
        "",
        false,
    )
    .await
    .expect("the guest operates the demo");
    assert_eq!(written, "Pump1.Mode: written\n");
    let read = tclient(
        &[
            "--addr",
            &addr,
            "tags",
            "read",
            "Pump1.Mode",
            "Pump1.MotorCurrent",
        ],
        "",
        false,
    )
    .await
    .expect("reads");
    let lines: Vec<&str> = read.lines().collect();
    assert_eq!(lines[0], "Pump1.Mode = \"Manual\" (Good)");
    assert!(
        lines[1].starts_with("Pump1.MotorCurrent = ") && lines[1].ends_with(" A (Good)"),
        "{read}"
    );
    let pair = tclient(
        &["--addr", &addr, "tags", "write", "Pump1.Mode", "Off"],
        "",
        false,
    )
    .await
    .expect("NAME VALUE works too");
    assert_eq!(pair, "Pump1.Mode: written\n");
    let refused = tclient(
        &["--addr", &addr, "tags", "write", "Pump1.MotorCurrent=3"],
        "",
        false,
    )
    .await
    .expect_err("not writable");
    assert!(refused.to_string().contains("1 of 1 writes refused"), "{refused}");
    let typed = tclient(
        &["--addr", &addr, "tags", "write", "Pump1.StartCount=many"],
        "",
        false,
    )
    .await
    .expect_err("not a number");
    assert_eq!(
        format!("{typed:#}"),
        "Pump1.StartCount takes whole numbers: many is not one"
    );
    let fraction = tclient(
        &["--addr", &addr, "tags", "write", "Pump1.StartCount=85.5"],
        "",
        false,
    )
    .await
    .expect_err("not a whole number");
    assert_eq!(
        format!("{fraction:#}"),
        "Pump1.StartCount takes whole numbers: 85.5 is not one",
        "one sentence, no parser's error chain"
    );
    let ack = tclient(&["--addr", &addr, "alarms", "ack", "Tank1.Level.Hi"], "", false)
        .await
        .expect("answered");
    assert_eq!(
        ack, "Tank1.Level.Hi had nothing to acknowledge\n",
        "the simulator is off: no alarm"
    );
    server.stop().await;
}

#[tokio::test]
async fn the_alarm_list_says_what_to_do_and_how_soon() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8 path");
    let file = solution.path.with_file_name("boiler.toml");
    std::fs::write(&file, crate::plant_file::guided_boiler()).expect("writes");
    admin(&["plant", path, "import", file.to_str().expect("utf-8 path")], "");
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let addr = server.addr.to_string();
    let listed = tclient(&["--addr", &addr, "alarms", "list"], "", false)
        .await
        .expect("lists");
    let lines: Vec<&str> = listed.lines().collect();
    assert!(lines[0].starts_with("Boiler.Temp.Hi [active] "), "{listed}");
    assert_eq!(
        lines[1..],
        [
            "  what to do: Trip the burner",
            "  respond within: 300 s",
            "  cause: Burner stuck on",
            "  if nobody acts: Relief valve lifts",
        ],
        "{listed}"
    );
    server.stop().await;
}

#[tokio::test]
async fn tools_list_and_call_from_the_command_line() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let addr = server.addr.to_string();
    let listed = tclient(&["--addr", &addr, "tools", "list"], "", false)
        .await
        .expect("listed");
    assert!(listed.starts_with("runtime_get_value [0x04] "), "{listed}");
    assert_eq!(
        listed.lines().count(),
        16,
        "the demo offers its read tools and proposals: {listed}"
    );
    let called = tclient(
        &[
            "--addr",
            &addr,
            "tools",
            "call",
            "runtime_get_value",
            r#"{"tag": "Tank1.Level"}"#,
        ],
        "",
        false,
    )
    .await
    .expect("called");
    let content: serde_json::Value = serde_json::from_str(called.trim()).expect("one JSON line");
    assert_eq!(content["ok"], true, "{content}");
    assert_eq!(content["result"]["tag"], "Tank1.Level", "{content}");
    let failed = tclient(
        &[
            "--addr",
            &addr,
            "tools",
            "call",
            "runtime_get_value",
            r#"{"tag": "Nope"}"#,
        ],
        "",
        false,
    )
    .await
    .expect_err("a tool failure is an error");
    assert!(
        failed
            .to_string()
            .contains("runtime_get_value reported a failure"),
        "{failed}"
    );
    let bad = tclient(
        &["--addr", &addr, "tools", "call", "runtime_get_value", "{tag"],
        "",
        false,
    )
    .await
    .expect_err("not JSON");
    assert!(bad.to_string().contains("are not JSON"), "{bad}");
    let misspelt = tclient(
        &[
            "--addr",
            &addr,
            "tools",
            "call",
            "runtime_get_value",
            r#"{"tagg": "Tank1.Level"}"#,
        ],
        "",
        false,
    )
    .await
    .expect_err("a misspelt argument");
    assert!(
        misspelt
            .to_string()
            .contains("unknown key `tagg`; did you mean `tag`?"),
        "{misspelt}"
    );
    server.stop().await;
}

#[tokio::test]
async fn tags_read_fails_naming_each_tag_it_could_not_read() {
    let solution = Solution::demo();
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let addr = server.addr.to_string();
    let output = tclient_process(&["--addr", &addr, "tags", "read", "Tank1.Level", "Nope.Tag"]).await;
    assert!(
        !output.status.success(),
        "an unknown tag fails the command: {output:?}"
    );
    let printed = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = printed.lines().collect();
    assert!(lines[0].starts_with("Tank1.Level = "), "{printed}");
    assert_eq!(lines[1], "Nope.Tag: unknown tag", "{printed}");
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim_end(),
        "Error: not read: Nope.Tag (unknown tag)"
    );
    let read = tclient(&["--addr", &addr, "tags", "read", "Tank1.Level"], "", false)
        .await
        .expect("a known tag reads");
    assert!(read.starts_with("Tank1.Level = "), "{read}");
    server.stop().await;
}

#[tokio::test]
async fn a_fresh_solution_names_the_command_that_fixes_each_refusal() {
    let solution = Solution::empty();
    let path = solution.path.to_str().expect("utf-8 path");
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let addr = server.addr.to_string();

    let error = tclient(&["--addr", &addr, "ping"], "", false)
        .await
        .expect_err("nobody can log in yet");
    let error = error.to_string();
    assert!(error.contains("has no users yet"), "{error}");
    assert!(
        error.contains("`tserver users PATH add NAME --role operator`"),
        "{error}"
    );

    admin(&["users", path, "add", "ada", "--role", "operator"], "pw\n");
    let wrong = tclient(
        &["--addr", &addr, "--user", "ada", "--password-stdin", "ping"],
        "not-it\n",
        false,
    )
    .await
    .expect_err("a wrong password");
    assert!(
        wrong.to_string().contains("unknown user or wrong password"),
        "with users, a refusal says no more: {wrong}"
    );

    let login = ["--addr", addr.as_str(), "--user", "ada", "--password-stdin"];
    let tools = tclient(&[&login[..], &["tools", "list"]].concat(), "pw\n", false)
        .await
        .expect_err("the runtime tools are off");
    let tools = tools.to_string();
    assert!(tools.contains("TOOLS_DISABLED"), "{tools}");
    assert!(
        tools.contains("`tserver settings PATH set ModelOptions 0x9e`"),
        "{tools}"
    );

    let chat = tclient(&[&login[..], &["chat", "hello"]].concat(), "pw\n", false)
        .await
        .expect("a disabled envelope");
    let envelope = service_client::Envelope::from_json(chat.trim_end()).expect("an envelope");
    assert_eq!(envelope.warnings, [localai::gates::MODEL_ENABLED_OFF]);
    assert!(
        envelope.warnings[0].contains("`tserver settings PATH set ModelEnabled true`"),
        "{chat}"
    );

    admin(&["settings", path, "set", "ModelEnabled", "true"], "");
    let chat = tclient(&[&login[..], &["chat", "hello"]].concat(), "pw\n", false)
        .await
        .expect("a disabled envelope");
    assert!(
        chat.contains("`tserver settings PATH set ModelOptions 0x9e`"),
        "{chat}"
    );
    server.stop().await;
}

/// Runs `program ARGS` with standard input and error on a new pseudo-terminal, as a person at
/// a terminal would: waits for `prompt` to be drawn, types `typed` and Enter, and returns the
/// process's output and everything the terminal showed (what it echoed included).
#[cfg(target_os = "linux")]
fn typed_at_a_terminal(
    program: &str,
    args: &[&str],
    prompt: &str,
    typed: &str,
) -> (std::process::Output, String) {
    use std::io::{Read, Write};
    use std::process::{Command, Stdio};

    use rustix::fs::{Mode, OFlags};
    use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};

    let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC).expect("a pty");
    grantpt(&master).expect("grantpt");
    unlockpt(&master).expect("unlockpt");
    let name = ptsname(&master, Vec::new()).expect("the pty's name");
    let terminal = rustix::fs::open(name.as_c_str(), OFlags::RDWR | OFlags::NOCTTY, Mode::empty())
        .expect("opens the terminal side");
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::from(terminal.try_clone().expect("a second descriptor")))
        .stdout(Stdio::piped())
        .stderr(Stdio::from(terminal))
        .spawn()
        .expect("the program starts");
    let mut master = std::fs::File::from(master);
    let mut writer = master.try_clone().expect("a writer");
    let (prompted, seen) = std::sync::mpsc::channel();
    let prompt = prompt.to_owned();
    let reader = std::thread::spawn(move || {
        let mut drawn = Vec::new();
        let mut buffer = [0u8; 4096];
        let mut prompted = Some(prompted);
        // Linux answers EIO, not end-of-file, once the terminal side is closed.
        while let Ok(read @ 1..) = master.read(&mut buffer) {
            drawn.extend_from_slice(&buffer[..read]);
            if String::from_utf8_lossy(&drawn).contains(&prompt)
                && let Some(prompted) = prompted.take()
            {
                let _ = prompted.send(());
            }
        }
        String::from_utf8_lossy(&drawn).into_owned()
    });
    seen.recv_timeout(crate::support::PATIENCE)
        .expect("the prompt is drawn");
    // A person reads the prompt before typing; the program may switch echo off just after
    // drawing it, so typing waits for that (and a program that never does fails here).
    let deadline = std::time::Instant::now() + crate::support::PATIENCE;
    while rustix::termios::tcgetattr(&writer)
        .expect("the terminal's modes")
        .local_modes
        .contains(rustix::termios::LocalModes::ECHO)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "echo stays on while the password is asked for"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    writer.write_all(format!("{typed}\r").as_bytes()).expect("typed");
    let output = child.wait_with_output().expect("the program ends");
    drop(writer);
    (output, reader.join().expect("the reader thread"))
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passwords_typed_at_a_terminal_are_asked_for_and_never_echoed() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8 path").to_owned();
    let (added, drawn) = tokio::task::spawn_blocking(move || {
        typed_at_a_terminal(
            env!("CARGO_BIN_EXE_tserver-under-test"),
            &["users", &path, "add", "ada", "--role", "operator"],
            "password of ada: ",
            "Typed-Secret-913",
        )
    })
    .await
    .expect("the terminal run");
    assert!(added.status.success(), "{added:?} {drawn}");
    assert!(!drawn.contains("Typed-Secret-913"), "not echoed: {drawn:?}");
    assert_eq!(
        String::from_utf8_lossy(&added.stdout),
        "added user ada (operator)\n"
    );

    // tclient asks too, for a user other than the guest, and logs in with what was typed.
    let server = TestServer::start(&solution.path, ServerConfig::default()).await;
    let addr = server.addr.to_string();
    let (pinged, drawn) = tokio::task::spawn_blocking(move || {
        typed_at_a_terminal(
            env!("CARGO_BIN_EXE_tclient-under-test"),
            &["--addr", &addr, "--user", "ada", "tags", "read", "Tank1.Level"],
            "password of ada: ",
            "Typed-Secret-913",
        )
    })
    .await
    .expect("the terminal run");
    assert!(pinged.status.success(), "{pinged:?} {drawn}");
    assert!(!drawn.contains("Typed-Secret-913"), "not echoed: {drawn:?}");
    assert!(
        String::from_utf8_lossy(&pinged.stdout).contains("Tank1.Level"),
        "{pinged:?}"
    );
    server.stop().await;
}
