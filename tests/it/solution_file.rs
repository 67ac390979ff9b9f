//! One server per solution file, and a solution file removed or replaced under its server:
//! noticed at once, said in the log, and nothing more written where it would vanish.

use std::time::{Duration, Instant};

use store::SolutionError;
use tokio_util::sync::CancellationToken;
use tserver::Runtime;

use crate::support::{ServerProcess, Solution, admin};

/// Waits until the server's log has a line with `text`.
fn wait_for_log(server: &ServerProcess, text: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(line) = server.log().lines.into_iter().find(|line| line.contains(text)) {
            return line;
        }
        assert!(
            Instant::now() < deadline,
            "no log line with {text:?}: {:#?}",
            server.log().lines
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_second_server_on_the_same_solution_is_refused_naming_the_first() {
    let solution = Solution::demo();
    let first = ServerProcess::start(&solution.path, &[], &[]);
    let second = std::process::Command::new(env!("CARGO_BIN_EXE_tserver-under-test"))
        .args(["serve", "--listen", "127.0.0.1:0", "--solution"])
        .arg(&solution.path)
        .output()
        .expect("runs");
    assert!(!second.status.success(), "the second server must not run");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains("already being served by tserver pid") && stderr.contains(&first.pid().to_string()),
        "{stderr}"
    );
    assert!(
        stderr.contains(&first.addr.to_string()),
        "the holder's address is named: {stderr}"
    );
    // Admin commands work beside the running server, as before.
    let path = solution.path.to_str().expect("utf-8");
    admin(&["settings", path, "set", "Name", "llama3.1:8b"], "");
    assert_eq!(admin(&["settings", path, "get", "Name"], ""), "llama3.1:8b\n");
    // Once the first is gone, the lock is free (the OS releases it however the process ends).
    drop(first);
    let again = ServerProcess::start(&solution.path, &[], &[]);
    assert!(again.pid() > 0);
}

#[test]
fn a_solution_file_removed_or_replaced_while_serving_is_reported_at_once() {
    for replace in [false, true] {
        let solution = Solution::demo();
        let server = ServerProcess::start(&solution.path, &[], &[]);
        if replace {
            let other = solution.path.with_extension("other");
            std::fs::copy(&solution.path, &other).expect("copy");
            std::fs::rename(&other, &solution.path).expect("replace");
        } else {
            std::fs::remove_file(&solution.path).expect("remove");
        }
        let line = wait_for_log(&server, "solution file lost");
        assert!(line.contains("ERROR"), "{line}");
        let why = if replace {
            "was replaced by another file"
        } else {
            "was removed"
        };
        assert!(line.contains(why), "{line}");
    }
}

#[tokio::test]
async fn history_recorded_after_the_file_is_lost_is_held_not_written_into_the_void() {
    let solution = Solution::demo();
    let runtime = Runtime::open(&solution.path).expect("opens");
    let stop = CancellationToken::new();
    let background = tokio::spawn({
        let (runtime, stop) = (runtime.clone(), stop.clone());
        async move { runtime.run_background(true, stop).await }
    });
    assert_eq!(runtime.solution_lost(), None);
    std::fs::remove_file(&solution.path).expect("remove");
    let deadline = Instant::now() + Duration::from_secs(10);
    while runtime.solution_lost().is_none() {
        assert!(Instant::now() < deadline, "the loss was not noticed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        runtime
            .solution_lost()
            .is_some_and(|why| why.contains("was removed"))
    );
    // The simulator keeps recording; the rows stay queued, and a flush says why it refuses.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(runtime.plant().historian().queued() > 0, "rows are held");
    match runtime.plant().historian().flush() {
        Err(SolutionError::FileLost(why)) => assert!(why.contains("was removed"), "{why}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    stop.cancel();
    background.await.expect("the background task ends");
}

/// Waits until the running background task has applied `hours` of history retention, which
/// it reads with `SimulatorEnabled` at each tick: after that, both settings are in force.
async fn wait_for_retention(runtime: &Runtime, hours: u64) {
    let deadline = Instant::now() + crate::support::PATIENCE;
    while runtime.plant().historian().retention() != Duration::from_secs(hours * 3600) {
        assert!(
            Instant::now() < deadline,
            "the retention of {hours} h was not applied"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_running_server_follows_the_runtime_settings_admin_commands_change() {
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8 path");
    admin(&["settings", path, "set", "SimulatorEnabled", "off"], "");
    let runtime = Runtime::open(&solution.path).expect("opens");
    let stop = CancellationToken::new();
    let background = tokio::spawn({
        let (runtime, stop) = (runtime.clone(), stop.clone());
        async move { runtime.run_background_with(None, stop).await }
    });
    let current = || {
        runtime
            .objects()
            .tag("Pump1.MotorCurrent")
            .expect("a demo tag")
            .current()
            .value
            .clone()
    };
    let still = current();
    let said = admin(&["settings", path, "set", "SimulatorEnabled", "on"], "");
    assert!(
        said.contains("a running server follows it within a second"),
        "{said}"
    );
    let deadline = Instant::now() + crate::support::PATIENCE;
    while current() == still {
        assert!(Instant::now() < deadline, "the simulator was not switched on");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    admin(&["settings", path, "set", "SimulatorEnabled", "off"], "");
    let said = admin(&["settings", path, "set", "HistoryRetentionHours", "5"], "");
    assert!(said.contains("HistoryRetentionHours"), "{said}");
    wait_for_retention(&runtime, 5).await;
    let stopped = current();
    // Another setting seen proves at least one more tick ran with the simulator off.
    admin(&["settings", path, "set", "HistoryRetentionHours", "6"], "");
    wait_for_retention(&runtime, 6).await;
    assert_eq!(current(), stopped, "the simulator stopped");
    stop.cancel();
    background.await.expect("the background task ends");
}

#[test]
fn serve_says_what_is_off_and_the_command_that_turns_it_on() {
    use std::io::BufRead;
    let solution = Solution::demo();
    let path = solution.path.to_str().expect("utf-8 path");
    admin(&["settings", path, "set", "SimulatorEnabled", "off"], "");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tserver-under-test"))
        .args(["serve", path, "--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("tserver starts");
    let stderr = child.stderr.take().expect("stderr");
    let mut before_listening = Vec::new();
    for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
        if line.contains("listening") {
            break;
        }
        before_listening.push(line);
    }
    let _ = child.kill();
    let _ = child.wait();
    let said = before_listening.join("\n");
    assert!(
        said.contains(&format!("the simulator is off, so simulated tags keep their values: `tserver settings {path} set SimulatorEnabled on` starts it")),
        "{said}"
    );
    assert!(
        said.contains(&format!("Local AI is off, so chat answers `disabled`: `tserver settings {path} set ModelEnabled true` turns it on")),
        "{said}"
    );
}
