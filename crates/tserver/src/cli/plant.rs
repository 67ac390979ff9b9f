//! `tserver plant`: import, export or show the plant model, and purge a removed tag's history.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Subcommand;

use super::plant_folder::PlantFolder;
use crate::own_runtime::on_own_runtime;
use store::{SolutionError, SolutionLocation, Store};

/// `tserver plant` actions.
#[derive(Debug, Subcommand)]
pub enum PlantAction {
    /// Replace the plant with a plant file (TOML, or JSON by its `.json` extension), checking
    /// all of it first: on any error nothing changes. Prints what was added, changed and
    /// removed.
    Import {
        /// The plant file (docs/PLANT.md).
        file: PathBuf,
        /// Check and say what would change, without changing anything.
        #[arg(long)]
        dry_run: bool,
    },
    /// Write the plant model as a TOML plant file (to standard output without FILE).
    Export {
        /// Where to write it.
        file: Option<PathBuf>,
    },
    /// Summarize the plant: counts, equipment, folders.
    Show,
    /// Delete the recorded history of a tag that is no longer in the plant (history of
    /// removed tags is otherwise kept until `HistoryRetentionHours` ages it out).
    PurgeHistory {
        /// The tag's dotted name.
        tag: String,
    },
}

/// The plant file `file` and the documents it attaches, read from its folder, every problem
/// reported.
fn read_plant_and_documents(
    file: &Path,
    shown: &str,
    solution: &SolutionLocation,
) -> anyhow::Result<(plant_model::PlantModel, Vec<plant_model::PlantDocument>)> {
    let text = crate::user_files::read_text_file(file, shown, "a plant file", plant_model::MAX_FILE_BYTES)?;
    let format = plant_model::Format::of_file(shown);
    let refused = |errors: plant_model::PlantErrors| {
        anyhow::anyhow!("{errors}\nnothing changed: fix the errors above and import again")
    };
    let model = plant_model::read(&text, format, shown).map_err(refused)?;
    if model.documents.is_empty() {
        return Ok((model, Vec::new()));
    }
    let folder = PlantFolder::of(file, solution)?;
    let documents =
        plant_model::read_documents(&text, format, shown, &model, |path| folder.read_document(path))
            .map_err(refused)?;
    Ok((model, documents))
}

/// Runs a `tserver plant` action.
pub(super) fn plant_command(
    solution: &SolutionLocation,
    action: &PlantAction,
    output: &mut dyn Write,
) -> anyhow::Result<()> {
    match action {
        PlantAction::Import { file, dry_run } => {
            let shown = file.display().to_string();
            let (model, documents) = read_plant_and_documents(file, &shown, solution)?;
            let (changes, stranded) = on_own_runtime(|| async {
                let store = Store::open(solution).await?;
                let stranded = super::scripts::stranded_by(&store, &model.expand()).await?;
                let changes = store.import_plant(&model, &documents, &shown, *dry_run).await?;
                Ok::<_, anyhow::Error>((changes, stranded))
            })?;
            write_changes(&changes, *dry_run, output)?;
            for stranded in stranded {
                // Imported all the same: the plant is the truth, and `scripts status` keeps
                // saying so until the script or its trigger is changed.
                writeln!(output, "warning: {stranded}")?;
            }
            if *dry_run {
                writeln!(output, "nothing changed (dry run)")?;
            } else {
                writeln!(output, "imported {shown}")?;
            }
        }
        PlantAction::Export { file } => {
            let (model, documents) = on_own_runtime(|| async {
                let store = Store::open(solution).await?;
                Ok::<_, SolutionError>((store.plant_model().await?, store.plant_documents().await?))
            })?;
            let text = model
                .to_toml()
                .context("the plant model cannot be written as TOML")?;
            match file {
                Some(file) => {
                    std::fs::write(file, text).with_context(|| format!("cannot write {}", file.display()))?;
                    if !documents.is_empty() {
                        let folder = PlantFolder::of(file, solution)?;
                        for document in &documents {
                            folder.write_document(document)?;
                        }
                    }
                    let beside = match documents.len() {
                        0 => String::new(),
                        count => format!(" and its {count} documents beside it"),
                    };
                    writeln!(output, "exported the plant model to {}{beside}", file.display())?;
                }
                None => {
                    output.write_all(text.as_bytes())?;
                    if !documents.is_empty() {
                        eprintln!(
                            "warning: the plant attaches {} documents, which were not written: \
                             give a FILE to export them beside it",
                            documents.len()
                        );
                    }
                }
            }
        }
        PlantAction::Show => {
            let (model, revision) = on_own_runtime(|| async {
                let store = Store::open(solution).await?;
                Ok::<_, SolutionError>((store.plant_model().await?, store.plant_revision().await?))
            })?;
            let expanded = model.expand();
            if let Some(plant) = &model.plant {
                writeln!(output, "{} ({})", plant.name, plant.description)?;
            }
            writeln!(
                output,
                "revision {}: {} tags, {} alarms, {} equipment of {} types, {} described folders, {} documents",
                revision,
                expanded.tags.len(),
                expanded.alarms.len(),
                model.equipment.len(),
                model.types.len(),
                model.folders.len(),
                model.documents.len()
            )?;
            for instance in &model.equipment {
                writeln!(
                    output,
                    "  {} ({}) at {}",
                    instance.name, instance.kind, instance.path
                )?;
            }
            let mut by_folder: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
            for tag in &expanded.tags {
                let folder = tag.path.rsplit_once('/').map_or("", |(folder, _)| folder);
                *by_folder.entry(folder).or_default() += 1;
            }
            for (folder, count) in by_folder {
                writeln!(output, "  {folder}/: {count} tags")?;
            }
        }
        PlantAction::PurgeHistory { tag } => {
            let removed =
                on_own_runtime(|| async { Store::open(solution).await?.purge_tag_history(tag).await })?;
            writeln!(output, "deleted {removed} history samples of {tag}")?;
        }
    }
    Ok(())
}

/// What an import changed (or would), one line per kind and one per name.
fn write_changes(
    changes: &store::PlantChanges,
    dry_run: bool,
    output: &mut dyn Write,
) -> std::io::Result<()> {
    if changes.is_empty() {
        return writeln!(
            output,
            "no changes: the plant is already as the file describes it"
        );
    }
    let verb = if dry_run { "would be " } else { "" };
    for (kind, list) in [
        ("tags", &changes.tags),
        ("alarms", &changes.alarms),
        ("folders", &changes.folders),
        ("documents", &changes.documents),
        ("sources", &changes.sources),
        ("prompts", &changes.prompts),
    ] {
        if list.is_empty() {
            continue;
        }
        writeln!(
            output,
            "{kind}: {} {verb}added, {} {verb}changed, {} {verb}removed",
            list.added.len(),
            list.changed.len(),
            list.removed.len()
        )?;
        for (mark, names) in [("+", &list.added), ("~", &list.changed), ("-", &list.removed)] {
            for name in names {
                writeln!(output, "  {mark} {name}")?;
            }
        }
    }
    if !changes.tags.removed.is_empty() {
        writeln!(
            output,
            "the history of removed tags is kept until HistoryRetentionHours ages it out; \
             `tserver plant PATH purge-history TAG` deletes it now"
        )?;
    }
    Ok(())
}
