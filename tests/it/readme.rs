//! The README's transcripts, run as written: the command of a transcript block is run (its
//! program built in this package, with the arguments the README gives it), the person's typed
//! answers are its input, and every line the README shows must appear in what it printed, in
//! order (`…` standing for what differs from run to run).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// The README, as the repository holds it.
fn readme() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    std::fs::read_to_string(path).expect("the README reads")
}

/// The `text` block under `heading` whose first line is a command (`$ ...`).
fn transcript(readme: &str, heading: &str) -> Vec<String> {
    let section = &readme[readme
        .find(heading)
        .unwrap_or_else(|| panic!("the README has {heading:?}"))..];
    let mut lines = section.lines();
    lines
        .by_ref()
        .find(|line| line.trim() == "```text")
        .expect("a text block");
    let block: Vec<String> = lines
        .take_while(|line| line.trim() != "```")
        .map(str::to_owned)
        .collect();
    assert!(
        block.first().is_some_and(|line| line.starts_with("$ ")),
        "the block starts with its command: {block:?}"
    );
    block
}

/// A command line's words, double quotes grouping (as a shell reads these).
fn words(command: &str) -> Vec<String> {
    let mut words = Vec::new();
    let (mut word, mut quoted, mut started) = (String::new(), false, false);
    for c in command.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                started = true;
            }
            ' ' if !quoted => {
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
}
