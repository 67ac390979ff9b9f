//! Documents attached to the plant end to end: `tserver plant import` reading them beside the
//! plant file (every problem at its line, nothing changed on any), export writing them back,
//! the revision moving only when a document does, PostgreSQL keeping them, and a running
//! server's `runtime_search_documents` finding a document imported while it runs.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use service_client::{Client, ClientOptions};
use store::test_database::TestDatabase;
use store::{SolutionLocation, Store};
use tserver::Runtime;

use crate::runtime_tools::call;
use crate::support::{ServerProcess, Solution, admin, try_admin};

const SEARCH: &str = "runtime_search_documents";

/// The documents' paths of a search result, in order.
fn paths(result: &Value) -> Vec<&str> {
    result["passages"]
        .as_array()
        .unwrap_or_else(|| panic!("a list of passages: {result}"))
        .iter()
        .map(|passage| passage["path"].as_str().expect("a path"))
        .collect()
}

fn path_of(solution: &Solution) -> &str {
    solution.path.to_str().expect("utf-8 path")
}

/// The demo's plant file as export writes it, beside the solution (where the demo's documents
/// are), under `name`; returns its path.
fn demo_plant_beside(solution: &Solution, name: &str) -> String {
    let exported = admin(&["plant", path_of(solution), "export"], "");
    let file = solution.path.with_file_name(name);
    std::fs::write(&file, exported).expect("writes the plant file");
    file.to_str().expect("utf-8 path").to_owned()
}

fn revision(solution: &str) -> String {
    let shown = admin(&["plant", solution, "show"], "");
    shown
        .lines()
        .find_map(|line| line.strip_prefix("revision "))
        .and_then(|rest| rest.split(':').next())
        .unwrap_or_else(|| panic!("no revision in {shown}"))
        .to_owned()
}

/// The 1-based line of the first line of `text` containing `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|line| line.contains(needle))
        .map(|index| index + 1)
        .unwrap_or_else(|| panic!("{needle:?} is not in the file"))
}

#[test]
fn documents_export_beside_the_plant_file_and_import_back_as_no_change() {
    let solution = Solution::demo();
    let path = path_of(&solution);
    let out = tempfile::tempdir().expect("temp dir");
    let exported = out.path().join("site").join("plant.toml");
    std::fs::create_dir(out.path().join("site")).expect("makes the folder");
    let said = admin(&["plant", path, "export", exported.to_str().expect("utf-8")], "");
    assert!(said.contains("and its 2 documents beside it"), "{said}");
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/plants");
    for document in [
        "procedures/pump-high-motor-current.md",
        "procedures/tank-overfill.md",
    ] {
        assert_eq!(
            std::fs::read_to_string(out.path().join("site").join(document)).expect("written"),
            std::fs::read_to_string(examples.join(document)).expect("the example"),
            "{document}"
        );
    }
    let before = revision(path);
    let again = admin(&["plant", path, "import", exported.to_str().expect("utf-8")], "");
    assert!(again.starts_with("no changes"), "{again}");
    assert_eq!(
        revision(path),
        before,
        "the same documents again leave the revision"
    );

    // One document changed, one removed, one added: listed, and the revision moves once.
    let site = out.path().join("site");
    std::fs::write(
        site.join("procedures/tank-overfill.md"),
        "# Tank overfill\n\nDrain Tank 1 to 50 % before any work inside it.\n",
    )
    .expect("edits");
    std::fs::write(
        site.join("shift-handover.md"),
        "# Shift handover\n\nRead the log.\n",
    )
    .expect("writes");
    let plant = std::fs::read_to_string(&exported).expect("reads");
    let edited = plant.replace("procedures/pump-high-motor-current.md", "shift-handover.md");
    std::fs::write(&exported, &edited).expect("writes");
    let changed = admin(&["plant", path, "import", exported.to_str().expect("utf-8")], "");
    for line in [
        "documents: 1 added, 1 changed, 1 removed",
        "  + shift-handover.md",
        "  ~ procedures/tank-overfill.md",
        "  - procedures/pump-high-motor-current.md",
    ] {
        assert!(changed.contains(line), "{line}: {changed}");
    }
    assert!(!changed.contains("tags:"), "the tags did not change: {changed}");
    let after: u64 = revision(path).parse().expect("a number");
    assert_eq!(after, before.parse::<u64>().expect("a number") + 1);
    let unchanged = admin(&["plant", path, "import", exported.to_str().expect("utf-8")], "");
    assert!(unchanged.starts_with("no changes"), "{unchanged}");
    assert_eq!(revision(path), after.to_string());

    // Only the scope changed: a change too.
    let scoped = edited.replacen(
        "folders = [\"Plant/Area1/Tank1\", \"Plant/Area2/Tank2\"]",
        "folders = [\"Plant/Area1/Tank1\"]",
        1,
    );
    std::fs::write(&exported, &scoped).expect("writes");
    let rescoped = admin(&["plant", path, "import", exported.to_str().expect("utf-8")], "");
    assert!(rescoped.contains("  ~ procedures/tank-overfill.md"), "{rescoped}");
    assert_eq!(revision(path), (after + 1).to_string());
}

#[tokio::test]
async fn export_to_standard_output_warns_that_the_documents_were_not_written() {
    let solution = Solution::demo();
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_tserver-under-test"))
        .args(["plant", path_of(&solution), "export"])
        .output()
        .await
        .expect("tserver runs");
    assert!(output.status.success(), "{output:?}");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(
        stdout.contains("path = \"procedures/tank-overfill.md\""),
        "{stdout}"
    );
    assert!(
        stderr.contains("the plant attaches 2 documents, which were not written: give a FILE"),
        "{stderr}"
    );
}

#[test]
fn an_import_names_each_document_problem_at_its_line_and_changes_nothing() {
    let solution = Solution::demo();
    let path = path_of(&solution);
    let file = demo_plant_beside(&solution, "docs.toml");
    let beside = solution.path.parent().expect("a folder");
    std::fs::write(
        beside.join("procedures/tank-overfill.md"),
        b"# Tanks\nlevel \xe9t\xe9\n",
    )
    .expect("writes");
    std::fs::write(
        beside.join("procedures/pump-high-motor-current.md"),
        vec![b'a'; plant_model::MAX_DOCUMENT_BYTES + 1],
    )
    .expect("writes");
    // A third document, whose file is not there.
    let text = std::fs::read_to_string(&file).expect("reads")
        + "\n[[documents]]\npath = \"procedures/missing.md\"\n";
    std::fs::write(&file, &text).expect("writes");
    let before = admin(&["plant", path, "export"], "");
    let error = try_admin(&["plant", path, "import", &file], "")
        .expect_err("refused")
        .to_string();
    let too_large = line_of(&text, "procedures/pump-high-motor-current.md");
    let not_utf8 = line_of(&text, "procedures/tank-overfill.md");
    let missing = line_of(&text, "procedures/missing.md");
    for wanted in [
        format!(
            "docs.toml:{too_large}:8: documents[0].path: \"procedures/pump-high-motor-current.md\" has more than \
             1048576 bytes; a document may have at most 1048576"
        ),
        format!(
            "docs.toml:{not_utf8}:8: documents[1].path: \"procedures/tank-overfill.md\" is not UTF-8 text: \
             at line 2, column 7 byte 0xe9 is not"
        ),
        format!("docs.toml:{missing}:8: documents[2].path: cannot read \"procedures/missing.md\": "),
    ] {
        assert!(error.contains(&wanted), "{wanted}\n{error}");
    }
    assert!(
        error.ends_with("nothing changed: fix the errors above and import again"),
        "{error}"
    );
    assert_eq!(admin(&["plant", path, "export"], ""), before, "nothing changed");

    // A name the plant does not have, and a path that leaves the folder: at their places.
    let wrong = text
        .replace("\"Plant/Area2/Tank2\"", "\"Plant/Area2/Tank3\"")
        .replace("procedures/missing.md", "../missing.md");
    let file = solution.path.with_file_name("wrong.toml");
    std::fs::write(&file, &wrong).expect("writes");
    let error = try_admin(&["plant", path, "import", file.to_str().expect("utf-8")], "")
        .expect_err("refused")
        .to_string();
    let folder = line_of(&wrong, "Plant/Area2/Tank3");
    let leaving = line_of(&wrong, "../missing.md");
    for wanted in [
        format!(
            "wrong.toml:{folder}:33: documents[1].folders[1]: no folder named \"Plant/Area2/Tank3\" \
             (did you mean \"Plant/Area2/Tank2\"?)"
        ),
        format!(
            "wrong.toml:{leaving}:8: documents[2].path: \"../missing.md\" leaves the plant file's folder"
        ),
    ] {
        assert!(error.contains(&wanted), "{wanted}\n{error}");
    }
}

#[tokio::test]
async fn a_postgres_solution_keeps_the_documents_and_moves_its_revision_only_when_they_change() {
    let database = TestDatabase::create().await;
    let url = database.url();
    admin(&["init", &url], "");
    let solution = Solution::demo();
    let file = demo_plant_beside(&solution, "site.toml");
    let imported = admin(&["plant", &url, "import", &file], "");
    assert!(
        imported.contains("documents: 2 added, 0 changed, 0 removed"),
        "{imported}"
    );
    let on_file = Store::open_file(&solution.path)
        .expect("opens")
        .plant_documents()
        .await
        .expect("reads");
    let location = SolutionLocation::parse(&url).expect("a location");
    let on_postgres = Store::open(&location)
        .await
        .expect("opens")
        .plant_documents()
        .await
        .expect("reads");
    assert_eq!(on_postgres, on_file);
    assert_eq!(on_postgres.len(), 2);
    let before = revision(&url);
    assert!(admin(&["plant", &url, "import", &file], "").starts_with("no changes"));
    assert_eq!(revision(&url), before);
    let beside = solution.path.parent().expect("a folder");
    std::fs::write(
        beside.join("procedures/tank-overfill.md"),
        "# Tank overfill\n\nNo smoking.\n",
    )
    .expect("edits");
    let changed = admin(&["plant", &url, "import", &file], "");
    assert!(changed.contains("  ~ procedures/tank-overfill.md"), "{changed}");
    assert_eq!(
        revision(&url).parse::<u64>().expect("a number"),
        before.parse::<u64>().expect("a number") + 1
    );
}

#[tokio::test]
async fn the_search_tool_cites_passages_of_the_documents_about_the_equipment_asked() {
    let solution = Solution::demo();
    let runtime = Runtime::open(&solution.path).expect("demo opens");
    let found = call(
        &runtime,
        SEARCH,
        json!({"query": "pump motor current high what to do"}),
    )
    .await
    .expect("searches");
    let passages = found["passages"].as_array().expect("a list");
    assert_eq!(passages.len(), 3, "the default cap: {found}");
    assert_eq!(found["truncated"], true, "more passages matched: {found}");
    let first = &passages[0];
    let mut keys: Vec<&str> = first
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["document", "lines", "path", "score", "section", "text"]);
    assert_eq!(first["document"], "Pump 1 high motor current");
    assert_eq!(first["path"], "procedures/pump-high-motor-current.md");
    let lines = first["lines"].as_array().expect("two line numbers");
    let (start, end) = (
        lines[0].as_u64().expect("a line"),
        lines[1].as_u64().expect("a line"),
    );
    assert!(1 <= start && start <= end, "{lines:?}");
    let file = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../examples/plants/procedures/pump-high-motor-current.md"),
    )
    .expect("the example");
    let cited: Vec<&str> = file
        .lines()
        .skip(usize::try_from(start - 1).expect("small"))
        .take(usize::try_from(end - start + 1).expect("small"))
        .collect();
    assert_eq!(
        first["text"].as_str().expect("text").trim(),
        cited.join("\n").trim()
    );
    let score = first["score"].as_f64().expect("a number");
    assert!(
        score > 0.0 && (score * 100.0 - (score * 100.0).round()).abs() < 1e-6,
        "{score}"
    );

    // About Tank 2 (by path): the pump's procedure is not about it.
    let about_tank = call(
        &runtime,
        SEARCH,
        json!({"query": "pump motor current high", "equipment": "Plant/Area2/Tank2", "max_passages": 10}),
    )
    .await
    .expect("searches");
    assert!(!paths(&about_tank).is_empty(), "{about_tank}");
    assert!(
        paths(&about_tank)
            .iter()
            .all(|path| *path == "procedures/tank-overfill.md"),
        "{about_tank}"
    );
    // About Pump1 (by name, in any case): only the pump's.
    let about_pump = call(
        &runtime,
        SEARCH,
        json!({"query": "shift log", "equipment": "pump1"}),
    )
    .await
    .expect("searches");
    assert_eq!(paths(&about_pump), ["procedures/pump-high-motor-current.md"]);
    // One passage asked for; more than the ceiling asked for: the ceiling.
    let one = call(&runtime, SEARCH, json!({"query": "shift log", "max_passages": 1}))
        .await
        .expect("searches");
    assert_eq!((paths(&one).len(), &one["truncated"]), (1, &json!(true)));
    let many = call(&runtime, SEARCH, json!({"query": "the", "max_passages": 1000}))
        .await
        .expect("searches");
    assert!(paths(&many).len() <= 10, "{many}");
    let none = call(&runtime, SEARCH, json!({"query": "zeppelin"}))
        .await
        .expect("searches");
    assert_eq!(none, json!({"passages": [], "truncated": false}));

    let unknown = call(
        &runtime,
        SEARCH,
        json!({"query": "current", "equipment": "Pump9"}),
    )
    .await
    .expect_err("no such equipment");
    assert_eq!(unknown.kind, "not_found");
    assert!(
        unknown
            .message
            .contains("no equipment named \"Pump9\" (did you mean"),
        "{}",
        unknown.message
    );
    let empty = call(&runtime, SEARCH, json!({"query": "  "}))
        .await
        .expect_err("empty");
    assert_eq!(empty.kind, "invalid_arguments");
}

#[tokio::test]
async fn a_running_server_searches_a_document_imported_while_it_runs() {
    let solution = Solution::demo();
    let path = path_of(&solution).to_owned();
    let server = ServerProcess::start(&solution.path, &[], &[]);
    let client = Client::connect(server.addr, ClientOptions::default())
        .await
        .expect("connects");
    client.login("guest", "").await.expect("logs in");
    let search = json!({"query": "handover checklist"});
    let found = |reply: service_client::CallToolReply| -> Vec<String> {
        assert!(!reply.is_error, "{}", reply.content_json);
        let content: Value = serde_json::from_str(&reply.content_json).expect("JSON");
        paths(&content["result"]).into_iter().map(str::to_owned).collect()
    };
    let before = client.call_tool(SEARCH, &search).await.expect("searches");
    assert!(found(before).is_empty(), "not yet attached");

    let file = demo_plant_beside(&solution, "handover.toml");
    let beside = solution.path.parent().expect("a folder");
    std::fs::write(
        beside.join("shift-handover.md"),
        "# Shift handover\n\n## Checklist\n\nWalk the pump house with the next shift before the handover.\n",
    )
    .expect("writes");
    let mut text = std::fs::read_to_string(&file).expect("reads");
    text.push_str("\n[[documents]]\npath = \"shift-handover.md\"\n");
    std::fs::write(&file, text).expect("writes");
    admin(&["plant", &path, "import", &file], "");

    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let reply = client.call_tool(SEARCH, &search).await.expect("searches");
        let paths = found(reply);
        if !paths.is_empty() {
            assert_eq!(paths[0], "shift-handover.md");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the server did not pick the document up"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_document_about_a_type_is_found_for_each_of_its_instances_and_only_them() {
    let solution = Solution::empty();
    let beside = solution.path.parent().expect("a folder");
    std::fs::write(
        beside.join("pump-seals.md"),
        "# Pump seals\n\n## Leaks\n\nA dripping seal is replaced at the next stop.\n",
    )
    .expect("writes");
    std::fs::write(
        beside.join("valves.md"),
        "# Valves\n\nA leaking valve gland is tightened a quarter turn.\n",
    )
    .expect("writes");
    let plant = r#"
[[types]]
name = "Pump"

  [[types.tags]]
  name = "Running"
  type = "bool"

[[types]]
name = "Valve"

  [[types.tags]]
  name = "Open"
  type = "bool"

[[equipment]]
name = "P101"
type = "Pump"
path = "Site/Intake/P101"

[[equipment]]
name = "V7"
type = "Valve"
path = "Site/Intake/V7"

[[documents]]
path = "pump-seals.md"
types = ["Pump"]

[[documents]]
path = "valves.md"
equipment = ["V7"]
"#;
    let file = solution.path.with_file_name("typed.toml");
    std::fs::write(&file, plant).expect("writes");
    admin(
        &[
            "plant",
            path_of(&solution),
            "import",
            file.to_str().expect("utf-8"),
        ],
        "",
    );
    let runtime = Runtime::open(&solution.path).expect("opens");
    let leak = |equipment: &str| json!({"query": "leak", "equipment": equipment, "max_passages": 10});
    let pump = call(&runtime, SEARCH, leak("P101")).await.expect("searches");
    assert_eq!(paths(&pump), ["pump-seals.md"]);
    let by_path = call(&runtime, SEARCH, leak("Site/Intake/P101"))
        .await
        .expect("searches");
    assert_eq!(paths(&by_path), ["pump-seals.md"]);
    let valve = call(&runtime, SEARCH, leak("v7")).await.expect("searches");
    assert_eq!(paths(&valve), ["valves.md"]);
    let both = call(&runtime, SEARCH, json!({"query": "leak"}))
        .await
        .expect("searches");
    assert_eq!(paths(&both).len(), 2, "{both}");
    let folder = call(&runtime, SEARCH, leak("Site/Intake"))
        .await
        .expect("searches");
    assert!(
        paths(&folder).is_empty(),
        "neither is about the whole folder: {folder}"
    );
}

/// A plant folder set up as a hostile one would be: a document linked to the solution's own
/// secrets key (inside the folder), one linked to a system file, one reached through a linked
/// folder, and a FIFO. Each is refused at its line, without blocking, and nothing is imported.
#[cfg(unix)]
#[test]
fn documents_that_are_links_out_fifos_or_the_solutions_own_files_are_refused_at_their_lines() {
    use std::os::unix::fs::symlink;
    let solution = Solution::demo();
    let path = path_of(&solution);
    let file = demo_plant_beside(&solution, "hostile.toml");
    let beside = solution.path.parent().expect("a folder");
    let key = store::key_file(&solution.path);
    let key_text = std::fs::read_to_string(&key).expect("the key file");
    symlink("../plant.db.key", beside.join("procedures/key.md")).expect("links");
    symlink("/etc/passwd", beside.join("passwd.md")).expect("links");
    symlink("/etc", beside.join("linkdir")).expect("links");
    std::fs::hard_link(&key, beside.join("hard.md")).expect("links");
    let fifo = beside.join("fifo.md");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs (coreutils)");
    assert!(made.success());
    // A link that stays inside the folder is a document like any other.
    symlink("procedures/tank-overfill.md", beside.join("overfill-link.md")).expect("links");
    let mut text = std::fs::read_to_string(&file).expect("reads");
    for document in [
        "procedures/key.md",
        "passwd.md",
        "linkdir/passwd",
        "hard.md",
        "fifo.md",
        "plant.db.key",
        "overfill-link.md",
    ] {
        text.push_str(&format!("\n[[documents]]\npath = \"{document}\"\n"));
    }
    std::fs::write(&file, &text).expect("writes");
    let before = admin(&["plant", path, "export"], "");
    let started = Instant::now();
    let error = try_admin(&["plant", path, "import", &file], "")
        .expect_err("refused")
        .to_string();
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the FIFO did not block the import"
    );
    let at = |document: &str| {
        format!(
            "hostile.toml:{}:8: documents[",
            line_of(&text, &format!("\"{document}\""))
        )
    };
    for (document, why) in [
        ("procedures/key.md", "one of the solution's own files"),
        (
            "passwd.md",
            "resolves to /etc/passwd, outside the plant file's folder",
        ),
        (
            "linkdir/passwd",
            "resolves to /etc/passwd, outside the plant file's folder",
        ),
        ("hard.md", "one of the solution's own files"),
        ("fifo.md", "is a FIFO, not a regular file"),
        ("plant.db.key", "one of the solution's own files"),
    ] {
        let line = error
            .lines()
            .find(|line| line.contains(&at(document)))
            .unwrap_or_else(|| panic!("{document} is not refused at its line:\n{error}"));
        assert!(line.contains(why), "{document}: {why}\n{line}");
    }
    assert!(
        !error.contains("overfill-link.md"),
        "a link inside the folder is a document: {error}"
    );
    assert!(!error.contains(key_text.trim()), "the key never shows: {error}");
    assert_eq!(admin(&["plant", path, "export"], ""), before, "nothing changed");
}

/// Export writes documents only as plain files in plain folders of the plant file's folder:
/// a folder or a file that is a link is refused, and nothing is written where it points.
#[cfg(unix)]
#[test]
fn export_never_writes_through_a_link() {
    use std::os::unix::fs::symlink;
    let solution = Solution::demo();
    let path = path_of(&solution);
    let out = tempfile::tempdir().expect("temp dir");
    let elsewhere = tempfile::tempdir().expect("temp dir");
    symlink(elsewhere.path(), out.path().join("procedures")).expect("links");
    let exported = out.path().join("plant.toml");
    let error = try_admin(&["plant", path, "export", exported.to_str().expect("utf-8")], "")
        .expect_err("refused")
        .to_string();
    assert!(
        error.contains("procedures is a link; export writes only plain files and folders"),
        "{error}"
    );
    assert_eq!(
        std::fs::read_dir(elsewhere.path()).expect("lists").count(),
        0,
        "nothing was written through the link"
    );

    // A document's file that is a link to a file elsewhere: refused, the target untouched.
    std::fs::remove_file(out.path().join("procedures")).expect("unlinks");
    std::fs::create_dir(out.path().join("procedures")).expect("makes");
    let target = elsewhere.path().join("victim.txt");
    std::fs::write(&target, "keep me").expect("writes");
    symlink(&target, out.path().join("procedures/tank-overfill.md")).expect("links");
    let error = try_admin(&["plant", path, "export", exported.to_str().expect("utf-8")], "")
        .expect_err("refused")
        .to_string();
    assert!(error.contains("tank-overfill.md is a link"), "{error}");
    assert_eq!(std::fs::read_to_string(&target).expect("reads"), "keep me");
}

/// Documents of `bytes` in all, in files of at most 1 MiB under `folder` (beside the plant
/// file), written as procedures of many sections; returns the `[[documents]]` entries.
fn many_documents(folder: &Path, bytes: usize) -> String {
    const WORDS: [&str; 24] = [
        "pump",
        "valve",
        "tank",
        "level",
        "pressure",
        "flow",
        "motor",
        "current",
        "alarm",
        "operator",
        "check",
        "close",
        "open",
        "drain",
        "isolate",
        "inspect",
        "bearing",
        "seal",
        "filter",
        "strainer",
        "temperature",
        "vibration",
        "restart",
        "report",
    ];
    std::fs::create_dir_all(folder.join("manuals")).expect("makes the folder");
    let mut entries = String::new();
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut written = 0;
    let mut file = 0;
    while written < bytes {
        let mut text = String::new();
        let mut section = 0;
        while text.len() < (bytes - written).min(1000 * 1024) {
            section += 1;
            text.push_str(&format!("## Section {section}\n\n"));
            for _ in 0..12 {
                for _ in 0..14 {
                    // xorshift: words in an order of their own, the same every run.
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    text.push_str(WORDS[usize::try_from(state % 24).expect("small")]);
                    text.push(' ');
                }
                text.push('\n');
            }
            text.push('\n');
        }
        written += text.len();
        let path = format!("manuals/manual-{file}.md");
        std::fs::write(folder.join(&path), &text).expect("writes");
        entries.push_str(&format!("\n[[documents]]\npath = \"{path}\"\n"));
        file += 1;
    }
    entries
}

/// A server starting on a large library answers at once: the search says the documents are
/// being indexed until they are, then finds passages. A search ranks on the blocking pool,
/// never on an async worker: the test's runtime has one worker and one blocking thread, and
/// while the test holds that thread a search waits however long the worker runs on, then
/// answers once the thread is let go. (Timing the search cannot show this: it takes about a
/// millisecond.)
#[test]
fn a_starting_server_answers_while_a_large_library_is_indexed_and_searches_off_the_workers() {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(1)
        .build()
        .expect("a runtime")
        .block_on(a_large_library_is_indexed_and_searched_off_the_worker());
}

async fn a_large_library_is_indexed_and_searched_off_the_worker() {
    let solution = Solution::demo();
    let beside = solution.path.parent().expect("a folder");
    let file = demo_plant_beside(&solution, "large.toml");
    let plant = std::fs::read_to_string(&file).expect("reads");
    let text = format!("{plant}{}", many_documents(beside, 6 * 1024 * 1024));
    std::fs::write(&file, text).expect("writes");
    admin(&["plant", path_of(&solution), "import", &file], "");

    let runtime = Runtime::open(&solution.path).expect("opens at once");
    let early = call(&runtime, SEARCH, json!({"query": "pump seal"}))
        .await
        .expect_err("still indexing");
    assert_eq!(early.kind, "indexing", "{early:?}");
    assert!(early.retryable, "{early:?}");
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        match call(&runtime, SEARCH, json!({"query": "pump seal"})).await {
            Ok(found) => {
                assert!(!paths(&found).is_empty(), "{found}");
                break;
            }
            Err(error) if error.kind == "indexing" && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(error) => panic!("{error:?}"),
        }
    }

    let long_query = "pump valve tank level pressure flow motor current alarm operator check close open \
                      drain isolate inspect bearing seal filter strainer temperature vibration restart report "
        .repeat(4);
    let long_query: String = long_query.chars().take(500).collect();
    let (holding, held) = tokio::sync::oneshot::channel();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let holder = tokio::task::spawn_blocking(move || {
        holding.send(()).expect("the test waits");
        released.recv().expect("the test lets go");
    });
    tokio::time::timeout(Duration::from_secs(60), held)
        .await
        .expect("the runtime's one blocking thread comes free once indexing is done")
        .expect("held");
    let searching = tokio::spawn({
        let runtime = runtime.clone();
        async move { call(&runtime, SEARCH, json!({"query": long_query, "max_passages": 10})).await }
    });
    // Long enough for a search run on the worker to end many times over.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !searching.is_finished(),
        "the search waits for the blocking pool; it never ran on this runtime's one worker"
    );
    release.send(()).expect("the holder waits");
    holder.await.expect("the holder ends");
    let found = tokio::time::timeout(Duration::from_secs(60), searching)
        .await
        .expect("the search answers once the blocking thread is free")
        .expect("no panic")
        .expect("searches");
    assert_eq!(paths(&found).len(), 10, "{found}");
}
