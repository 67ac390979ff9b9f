//! Documents attached to the plant end to end: `tserver plant import` reading them beside the
//! plant file (every problem at its line, nothing changed on any), export writing them back,
//! the revision moving only when a document does, PostgreSQL keeping them, and a running
//! server's `runtime_search_documents` finding a document imported while it runs.

use std::path::Path;

use store::test_database::TestDatabase;
use store::{SolutionLocation, Store};

use crate::support::{Solution, admin, try_admin};

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
    assert!(said.contains("and its 3 documents beside it"), "{said}");
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/plants");
    for document in [
        "procedures/pump-high-motor-current.md",
        "procedures/tank-levels.md",
        "procedures/site-safety.txt",
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
        site.join("procedures/tank-levels.md"),
        "# Tank level alarms\n\nDrain Tank 1 to 50 % before any work inside it.\n",
    )
    .expect("edits");
    std::fs::write(
        site.join("shift-handover.md"),
        "# Shift handover\n\nRead the log.\n",
    )
    .expect("writes");
    let plant = std::fs::read_to_string(&exported).expect("reads");
    let edited = plant
        .replace("procedures/site-safety.txt", "shift-handover.md")
        .replace("title = \"Site safety rules\"\n", "");
    std::fs::write(&exported, &edited).expect("writes");
    let changed = admin(&["plant", path, "import", exported.to_str().expect("utf-8")], "");
    for line in [
        "documents: 1 added, 1 changed, 1 removed",
        "  + shift-handover.md",
        "  ~ procedures/tank-levels.md",
        "  - procedures/site-safety.txt",
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
    assert!(rescoped.contains("  ~ procedures/tank-levels.md"), "{rescoped}");
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
        stdout.contains("path = \"procedures/tank-levels.md\""),
        "{stdout}"
    );
    assert!(
        stderr.contains("the plant attaches 3 documents, which were not written: give a FILE"),
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
        beside.join("procedures/tank-levels.md"),
        b"# Tanks\nlevel \xe9t\xe9\n",
    )
    .expect("writes");
    std::fs::remove_file(beside.join("procedures/site-safety.txt")).expect("removes");
    std::fs::write(
        beside.join("procedures/pump-high-motor-current.md"),
        vec![b'a'; plant_model::MAX_DOCUMENT_BYTES + 1],
    )
    .expect("writes");
    let text = std::fs::read_to_string(&file).expect("reads");
    let before = admin(&["plant", path, "export"], "");
    let error = try_admin(&["plant", path, "import", &file], "")
        .expect_err("refused")
        .to_string();
    let too_large = line_of(&text, "procedures/pump-high-motor-current.md");
    let not_utf8 = line_of(&text, "procedures/tank-levels.md");
    let missing = line_of(&text, "procedures/site-safety.txt");
    for wanted in [
        format!(
            "docs.toml:{too_large}:8: documents[0].path: \"procedures/pump-high-motor-current.md\" has more than \
             1048576 bytes; a document may have at most 1048576"
        ),
        format!(
            "docs.toml:{not_utf8}:8: documents[1].path: \"procedures/tank-levels.md\" is not UTF-8 text: \
             at line 2, column 7 byte 0xe9 is not"
        ),
        format!("docs.toml:{missing}:8: documents[2].path: cannot read \"procedures/site-safety.txt\": "),
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
        .replace("procedures/site-safety.txt", "../site-safety.txt");
    let file = solution.path.with_file_name("wrong.toml");
    std::fs::write(&file, &wrong).expect("writes");
    let error = try_admin(&["plant", path, "import", file.to_str().expect("utf-8")], "")
        .expect_err("refused")
        .to_string();
    let folder = line_of(&wrong, "Plant/Area2/Tank3");
    let leaving = line_of(&wrong, "../site-safety.txt");
    for wanted in [
        format!(
            "wrong.toml:{folder}:33: documents[1].folders[1]: no folder named \"Plant/Area2/Tank3\" \
             (did you mean \"Plant/Area2/Tank2\"?)"
        ),
        format!(
            "wrong.toml:{leaving}:8: documents[2].path: \"../site-safety.txt\" leaves the plant file's folder"
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
        imported.contains("documents: 3 added, 0 changed, 0 removed"),
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
    assert_eq!(on_postgres.len(), 3);
    let before = revision(&url);
    assert!(admin(&["plant", &url, "import", &file], "").starts_with("no changes"));
    assert_eq!(revision(&url), before);
    let beside = solution.path.parent().expect("a folder");
    std::fs::write(
        beside.join("procedures/site-safety.txt"),
        "Site safety rules\n\nNo smoking.\n",
    )
    .expect("edits");
    let changed = admin(&["plant", &url, "import", &file], "");
    assert!(changed.contains("  ~ procedures/site-safety.txt"), "{changed}");
    assert_eq!(
        revision(&url).parse::<u64>().expect("a number"),
        before.parse::<u64>().expect("a number") + 1
    );
}
