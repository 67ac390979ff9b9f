//! The plant file's folder as import reads it and export writes it: documents are regular files
//! that resolve inside the folder, never the solution's own files (its key above all), and
//! export never writes through a link.

use std::path::{Component, Path, PathBuf};

use anyhow::{Context, bail};
use store::SolutionLocation;

use crate::user_files::{FileKey, kind_of, read_regular};

/// The folder of a plant file, where its documents are read from and written to.
#[derive(Debug)]
pub(super) struct PlantFolder {
    /// The folder, every link in it resolved.
    root: PathBuf,
    /// The solution's own files that exist (see [`SolutionLocation::own_files`]).
    solution_files: Vec<FileKey>,
}

impl PlantFolder {
    /// The folder of `plant_file`, guarding the files of `solution`.
    pub(super) fn of(plant_file: &Path, solution: &SolutionLocation) -> anyhow::Result<Self> {
        let folder = match plant_file.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        let root = std::fs::canonicalize(folder)
            .with_context(|| format!("cannot find the plant file's folder {}", folder.display()))?;
        let solution_files = solution
            .own_files()
            .into_iter()
            .filter_map(|path| {
                let resolved = std::fs::canonicalize(&path).ok()?;
                let metadata = std::fs::metadata(&resolved).ok()?;
                Some(FileKey::of(&metadata, &resolved))
            })
            .collect();
        Ok(Self { root, solution_files })
    }

    /// A document's bytes (at most a little past [`plant_model::MAX_DOCUMENT_BYTES`]) by its
    /// path relative to the folder, as the plant file writes it; the error says why in words.
    /// Refused: a path that resolves outside the folder (through a link to a file or to a
    /// folder), anything but a regular file, and the solution's own files.
    pub(super) fn read_document(&self, relative: &str) -> Result<Vec<u8>, String> {
        let resolved = std::fs::canonicalize(self.root.join(relative)).map_err(|error| error.to_string())?;
        if !resolved.starts_with(&self.root) {
            return Err(format!(
                "it resolves to {}, outside the plant file's folder {}: a document is a file in \
                 that folder (a link may point only inside it)",
                resolved.display(),
                self.root.display()
            ));
        }
        let (bytes, key) = read_regular(&resolved, plant_model::MAX_DOCUMENT_BYTES)?;
        if self.solution_files.contains(&key) {
            return Err(
                "it is one of the solution's own files (its database, journal, lock or secrets \
                 key): never a document"
                    .to_owned(),
            );
        }
        Ok(bytes)
    }

    /// Writes a stored document at its path relative to the folder, making folders as needed.
    /// Nothing is written through a link, over anything but a regular file, or over the
    /// solution's own files.
    pub(super) fn write_document(&self, document: &plant_model::PlantDocument) -> anyhow::Result<()> {
        // Checked at import; a solution edited by hand could hold anything.
        if let Some(problem) = plant_model::document_path_problem(&document.path) {
            bail!("the stored document {:?} {problem}; not written", document.path);
        }
        let refuse = |at: &Path, what: &str| {
            anyhow::anyhow!(
                "not writing the document {:?}: {} is {what}; export writes only plain files and \
                 folders in the plant file's folder",
                document.path,
                at.display()
            )
        };
        let mut target = self.root.clone();
        let mut parts = Path::new(&document.path).components().peekable();
        while let Some(part) = parts.next() {
            let Component::Normal(name) = part else {
                bail!(
                    "the stored document {:?} is not a relative path; not written",
                    document.path
                );
            };
            target.push(name);
            let existing = match std::fs::symlink_metadata(&target) {
                Ok(metadata) => Some(metadata),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
                Err(error) => {
                    return Err(error).with_context(|| format!("cannot look at {}", target.display()));
                }
            };
            let last = parts.peek().is_none();
            match existing {
                Some(metadata) if metadata.file_type().is_symlink() => return Err(refuse(&target, "a link")),
                Some(metadata) if last && !metadata.is_file() => {
                    return Err(refuse(&target, kind_of(&metadata)));
                }
                Some(metadata) if last => {
                    if self.solution_files.contains(&FileKey::of(&metadata, &target)) {
                        return Err(refuse(&target, "one of the solution's own files"));
                    }
                }
                Some(metadata) if !metadata.is_dir() => return Err(refuse(&target, kind_of(&metadata))),
                Some(_) => {}
                None if last => {}
                None => std::fs::create_dir(&target)
                    .with_context(|| format!("cannot make {}", target.display()))?,
            }
        }
        write_no_follow(&target, document.text.as_bytes())
            .with_context(|| format!("cannot write {}", target.display()))
    }
}

/// Writes `bytes` as the whole of the file at `path`, refusing to follow a link put there since
/// it was looked at.
fn write_no_follow(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.custom_flags(libc::O_NOFOLLOW);
    }
    options.open(path)?.write_all(bytes)
}
