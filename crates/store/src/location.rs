//! `SolutionLocation`: where a solution is, as `--solution` and the admin commands take it: a
//! SQLite file's path, or a `postgres://` URL.

use std::path::PathBuf;

use super::{PostgresUrl, SolutionError};

/// Where a solution is.
#[derive(Debug, Clone)]
pub enum SolutionLocation {
    /// A SQLite solution file.
    File(PathBuf),
    /// A PostgreSQL database.
    Postgres(PostgresUrl),
}

impl SolutionLocation {
    /// Reads a location: `postgres://...` or `postgresql://...` is a database, anything else a
    /// file path.
    pub fn parse(text: &str) -> Result<Self, SolutionError> {
        if PostgresUrl::is_postgres(text) {
            Ok(Self::Postgres(PostgresUrl::parse(text)?))
        } else {
            Ok(Self::File(PathBuf::from(text)))
        }
    }

    /// The files on this machine that hold the solution or its secrets: a solution file, its
    /// key file, its journals and its serve lock (a database has none here). Nothing read into
    /// the solution may be one of them: a document that is the key file would make every
    /// stored secret readable to anyone who can search documents.
    pub fn own_files(&self) -> Vec<PathBuf> {
        let Self::File(path) = self else {
            return Vec::new();
        };
        let beside = |suffix: &str| {
            let mut name = path.as_os_str().to_owned();
            name.push(suffix);
            PathBuf::from(name)
        };
        vec![
            path.clone(),
            crate::key_file(path),
            crate::lock_path(path),
            beside("-wal"),
            beside("-shm"),
            beside("-journal"),
        ]
    }
}

/// The path, or the URL with its password as `***`.
impl std::fmt::Display for SolutionLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::File(path) => write!(f, "{}", path.display()),
            Self::Postgres(url) => write!(f, "{url}"),
        }
    }
}

/// For clap: `--solution` and the admin commands' location arguments.
impl std::str::FromStr for SolutionLocation {
    type Err = SolutionError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}
