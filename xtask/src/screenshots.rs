//! `cargo xtask screenshots`: the panel's screenshots the README shows, made again from the
//! panel as it is. It runs the overview's browser test (a real server and a headless Chromium
//! on the demo plant), which saves every screen under `target/panel-screenshots/`, and copies
//! the ones the README shows into `docs/images/`.

use std::path::Path;

use anyhow::Context;

use crate::processes::cargo;

/// The screenshots the README shows: (as the test saves it, as `docs/images/` keeps it).
const SHOWN: &[(&str, &str)] = &[
    ("overview-1280x800.png", "panel-overview.png"),
    ("overview-area.png", "panel-area.png"),
];

pub(crate) fn run() -> anyhow::Result<()> {
    cargo(&[
        "test",
        "-p",
        "tserver-tests",
        "--test",
        "it",
        "--",
        "panel_overview::",
    ])?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let saved = root.join("target/panel-screenshots");
    let kept = root.join("docs/images");
    std::fs::create_dir_all(&kept).with_context(|| format!("cannot create {}", kept.display()))?;
    for (from, to) in SHOWN {
        let from = saved.join(from);
        let to = kept.join(to);
        std::fs::copy(&from, &to)
            .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
        println!("{}", to.display());
    }
    Ok(())
}
