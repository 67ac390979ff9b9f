//! The README's (and the docs') transcripts, run as written: the command of a transcript block
//! is run (its program built in this package, with the arguments the page gives it), the
//! person's typed answers are its input, and every line the page shows must appear in what it
//! printed, in order (`…` standing for what differs from run to run).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// A page of the repository (`README.md`, `docs/EVAL.md`), as it holds it.
fn page(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// The README.
fn readme() -> String {
    page("README.md")
}

/// The lines of the first `fence` block (`text`, `sh`) after `text` in the README.
fn block(readme: &str, text: &str, fence: &str) -> Vec<String> {
    let section = &readme[readme
        .find(text)
        .unwrap_or_else(|| panic!("the README has {text:?}"))..];
    let mut lines = section.lines();
    let opening = format!("```{fence}");
    lines
        .by_ref()
        .find(|line| line.trim() == opening)
        .unwrap_or_else(|| panic!("a {fence} block after {text:?}"));
    lines
        .take_while(|line| line.trim() != "```")
        .map(str::to_owned)
        .collect()
}

/// The `text` block under `heading` whose first line is a command (`$ ...`).
fn transcript(readme: &str, heading: &str) -> Vec<String> {
    let block = block(readme, heading, "text");
    assert!(
        block.first().is_some_and(|line| line.starts_with("$ ")),
        "the block starts with its command: {block:?}"
    );
    block
}

/// A command line's words, single or double quotes grouping (as a shell reads these).
fn words(command: &str) -> Vec<String> {
    let mut words = Vec::new();
    let (mut word, mut quote, mut started) = (String::new(), None::<char>, false);
    for c in command.chars() {
        match c {
            '"' | '\'' if quote.is_none() => {
                quote = Some(c);
                started = true;
            }
            c if quote == Some(c) => quote = None,
            ' ' if quote.is_none() => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            c => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(word);
    }
    words
}

/// Where `pattern` (its `…` standing for any run of characters within a line) is first found
/// in `text` at or after `from`: the end of the match.
fn find(text: &str, from: usize, pattern: &str) -> Option<usize> {
    let parts: Vec<&str> = pattern.split('…').collect();
    let mut start = from;
    while let Some(at) = text[start..].find(parts[0]).map(|at| start + at) {
        let mut end = at + parts[0].len();
        let rest_matches = parts[1..].iter().all(|part| {
            let found = text[end..].find(part).map(|found| end + found);
            match found {
                Some(found) if !text[end..found].contains('\n') => {
                    end = found + part.len();
                    true
                }
                _ => false,
            }
        });
        if rest_matches {
            return Some(end);
        }
        start = at + parts[0].len().max(1);
    }
    None
}

#[test]
fn the_proposal_transcript_runs_as_written_with_the_builtin_model() {
    let block = transcript(
        &readme(),
        "### Actions the assistant proposes and operators approve",
    );
    let command = words(block[0].trim_start_matches("$ "));
    let separator = command
        .iter()
        .position(|word| word == "--")
        .expect("the command runs tserver-demo with arguments after --");
    assert_eq!(
        &command[..separator],
        ["cargo", "run", "--release", "-p", "tserver-demo"],
        "the command is the demo's"
    );
    // What the person types: the answer after each prompt, then an empty line to quit.
    let mut input = String::new();
    let mut expected = Vec::new();
    for line in &block[1..] {
        match line.strip_suffix(" y").filter(|shown| shown.ends_with("[y/N]")) {
            Some(prompt) => {
                input.push_str("y\n");
                expected.push(format!("{prompt} "));
            }
            None => expected.push(line.clone()),
        }
    }
    input.push('\n');

    let mut child = Command::new(env!("CARGO_BIN_EXE_tserver-demo-under-test"))
        .args(&command[separator + 1..])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the demo starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("the answers are typed");
    let finished = child.wait_with_output().expect("the demo ends");
    let output = String::from_utf8_lossy(&finished.stdout);
    let errors = String::from_utf8_lossy(&finished.stderr);
    assert!(finished.status.success(), "{output}\n{errors}");
    assert!(errors.trim().is_empty(), "nothing on standard error: {errors}");
    let mut at = 0;
    for line in &expected {
        at = find(&output, at, line).unwrap_or_else(|| {
            panic!(
                "the README's line\n  {line}\nis not in what the demo printed (after byte {at}):\n{output}"
            )
        });
    }
}

#[test]
fn a_pattern_matches_within_a_line_and_in_order() {
    let text = "a p-1f: ok\nb (ok, 3 ms)\n";
    assert_eq!(find(text, 0, "p-…: ok"), Some(10));
    assert_eq!(find(text, 0, "a …(ok"), None, "… never spans lines");
    assert_eq!(find(text, 11, "b (ok, … ms)"), Some(text.len() - 1));
    assert_eq!(
        find(text, 11, "a p-"),
        None,
        "only after where the last line matched"
    );
    assert_eq!(
        words(r#"x -q "Switch Pump 1" -i"#),
        ["x", "-q", "Switch Pump 1", "-i"]
    );
    assert_eq!(words(r#"call '{"tag": "A"}'"#), ["call", r#"{"tag": "A"}"#]);
}

/// The program under test a README command runs, and its arguments: `cargo run --release --bin
/// tserver -- ARGS` and `tserver ARGS` alike run `tserver` with ARGS.
fn program(line: &str) -> (Command, Vec<String>) {
    let words = words(line);
    let (name, arguments) = match words.iter().position(|word| word == "--") {
        Some(separator) if words[0] == "cargo" => {
            (words[separator - 1].clone(), words[separator + 1..].to_vec())
        }
        _ => (words[0].clone(), words[1..].to_vec()),
    };
    let binary = match name.as_str() {
        "tserver" => env!("CARGO_BIN_EXE_tserver-under-test"),
        "tclient" => env!("CARGO_BIN_EXE_tclient-under-test"),
        "tserver-demo" => env!("CARGO_BIN_EXE_tserver-demo-under-test"),
        // The shell's own tools, as they are.
        "cp" => "cp",
        other => panic!("the page runs {other}, which this test does not know: {line}"),
    };
    (Command::new(binary), arguments)
}

/// Waits for `serve`'s log to say it listens on the README's address.
fn until_listening(child: &mut std::process::Child) {
    let stderr = child.stderr.take().expect("stderr");
    let (listening, heard) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("listening address=127.0.0.1:3101") {
                let _ = listening.send(());
            }
        }
    });
    heard
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("serve listens on 127.0.0.1:3101, as the README says (is the port taken?)");
}

#[test]
fn the_pieces_and_the_model_settings_run_as_written_on_the_demo_solution() {
    let readme = readme();
    let dir = tempfile::tempdir().expect("temp dir");
    let commands: Vec<String> = block(&readme, "To run the pieces yourself", "sh")
        .into_iter()
        .chain(block(&readme, "names the command that fixes it:", "sh"))
        .filter(|line| !line.trim().is_empty() && !line.trim_start().starts_with('#'))
        .collect();
    assert!(commands.len() >= 10, "{commands:?}");
    let mut server: Option<std::process::Child> = None;
    for line in &commands {
        let (mut command, arguments) = program(line);
        command
            .args(&arguments)
            .current_dir(dir.path())
            .env("RUST_LOG", "info")
            .stdin(Stdio::null());
        if arguments.first().is_some_and(|first| first == "serve") {
            // Served in the background, as "in another terminal" has it, until Ctrl-C.
            let mut child = command
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("serve starts");
            until_listening(&mut child);
            server = Some(child);
            continue;
        }
        let finished = command.output().expect("the command runs");
        let output = String::from_utf8_lossy(&finished.stdout);
        assert!(
            finished.status.success(),
            "{line}\n{output}\n{}",
            String::from_utf8_lossy(&finished.stderr)
        );
        let wanted = match arguments.first().map(String::as_str) {
            Some("ping") => Some("pong from 127.0.0.1:3101"),
            Some("chat") => Some("\"status\":\"disabled\""),
            Some("tools") if arguments.get(1).is_some_and(|verb| verb == "list") => {
                Some("runtime_get_value [0x04]")
            }
            Some("tools") => Some("\"ok\":true"),
            _ => None,
        };
        if let Some(wanted) = wanted {
            assert!(output.contains(wanted), "{line}: {output}");
        }
    }
    let mut server = server.expect("a serve command");
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&server),
        rustix::process::Signal::INT,
    )
    .expect("Ctrl-C reaches serve");
    let status = server.wait().expect("serve ends");
    assert!(status.success(), "Ctrl-C stops serve gracefully: {status}");
    let settings = Command::new(env!("CARGO_BIN_EXE_tserver-under-test"))
        .args(["settings", "demo.db", "get", "ModelEnabled"])
        .current_dir(dir.path())
        .output()
        .expect("settings runs");
    assert_eq!(String::from_utf8_lossy(&settings.stdout).trim(), "true");
}

#[test]
fn the_worked_eval_example_runs_as_written_and_gives_its_tables() {
    let block = block(
        &page("docs/EVAL.md"),
        "### Worked example: two tool configurations",
        "",
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let questions = dir.path().join("examples/eval");
    std::fs::create_dir_all(&questions).expect("a folder for the questions");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/eval/demo.toml"),
        questions.join("demo.toml"),
    )
    .expect("the demo's questions");
    // Each command with the lines the page shows it printing.
    let mut steps: Vec<(String, Vec<String>)> = Vec::new();
    for line in &block {
        match line.strip_prefix("$ ") {
            Some(command) => {
                let command = command.split(" #").next().unwrap_or(command).trim();
                steps.push((command.to_owned(), Vec::new()));
            }
            None => steps
                .last_mut()
                .expect("the block starts with a command")
                .1
                .push(line.clone()),
        }
    }
    assert_eq!(steps.len(), 5, "{steps:?}");
    for (command, shown) in &steps {
        let (mut program, arguments) = program(command);
        let finished = program
            .args(&arguments)
            .current_dir(dir.path())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .output()
            .expect("the command runs");
        let output = String::from_utf8_lossy(&finished.stdout);
        let printed: Vec<&str> = output.lines().collect();
        for line in shown
            .iter()
            .filter(|line| !line.trim().is_empty() && line.trim() != "...")
        {
            let words: Vec<&str> = line.split_whitespace().collect();
            let found = printed.iter().any(|printed| {
                // A table row: the same case, runs, rates and tool checks (the times differ).
                if words.len() == 10 && words[9].len() == 4 {
                    let got: Vec<&str> = printed.split_whitespace().collect();
                    got.len() == 10 && got[..6] == words[..6] && got[9] == words[9]
                } else if words.len() == 11 && words[0] == "total" {
                    let got: Vec<&str> = printed.split_whitespace().collect();
                    got.len() == 11 && got[..5] == words[..5] && got[8..] == words[8..]
                } else {
                    find(printed, 0, line).is_some()
                }
            });
            assert!(
                found,
                "{command}: the page's line\n  {line}\nis not in what it printed:\n{output}"
            );
        }
    }
}
