//! Tidy: every Rust file opens with a `//!` line saying what it is for, and no line ends in
//! white space.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, build output and hidden directories left out.
pub(crate) fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name.to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

#[test]
fn every_rust_file_says_what_it_is_for_and_has_no_trailing_space() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for dir in ["crates", "tests", "xtask"] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 20, "found the sources ({} files)", files.len());
    let mut problems = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("readable source");
        if !text.starts_with("//!") {
            problems.push(format!("{}: does not open with a `//!` line", file.display()));
        }
        for (number, line) in text.lines().enumerate() {
            if line.ends_with(' ') || line.ends_with('\t') {
                problems.push(format!("{}:{}: trailing white space", file.display(), number + 1));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
