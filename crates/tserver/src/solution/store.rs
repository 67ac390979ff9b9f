//! `Store`: one solution behind one interface, in a SQLite file or in PostgreSQL. Each
//! operation works the change out once (`admin.rs`) and writes it with its backend's SQL.
//!
//! It covers what the admin commands need of settings and users today; the rest of what a
//! solution holds (plant, scripts, tokens, history, audit, throttling) joins it as serving
//! from PostgreSQL is built (issue 22). A file's operations run inline (SQLite answers in
//! microseconds); PostgreSQL's are awaited.

use localai::settings::{SettingIssue, SettingsRow};

use super::{
    PgStore, Role, SettingKey, SettingValue, SolutionDb, SolutionError, SolutionLocation, UserRecord,
};

/// A solution, wherever it is.
#[derive(Debug)]
pub enum Store {
    /// A SQLite solution file.
    File(SolutionDb),
    /// A PostgreSQL database.
    Postgres(PgStore),
}

/// Calls `method` on whichever backend the store is, awaiting PostgreSQL's.
macro_rules! on_backend {
    ($store:expr, $method:ident($($argument:expr),*)) => {
        match $store {
            Store::File(db) => db.$method($($argument),*),
            Store::Postgres(pg) => pg.$method($($argument),*).await,
        }
    };
}

impl Store {
    /// Opens the solution at `location` (a file must exist; a database gets tserver's schema
    /// if it has none).
    pub async fn open(location: &SolutionLocation) -> Result<Self, SolutionError> {
        Ok(match location {
            SolutionLocation::File(path) => Self::File(SolutionDb::open(path)?),
            SolutionLocation::Postgres(url) => Self::Postgres(PgStore::open(url).await?),
        })
    }

    /// The `SolutionSettings` row, read afresh.
    pub async fn settings_row(&self) -> Result<SettingsRow, SolutionError> {
        on_backend!(self, settings_row())
    }

    /// Reads one setting.
    pub async fn setting(&self, key: &SettingKey) -> Result<SettingValue, SolutionError> {
        on_backend!(self, setting(key))
    }

    /// Writes one setting.
    pub async fn set_setting(&self, key: &SettingKey, value: &str) -> Result<(), SolutionError> {
        on_backend!(self, set_setting(key, value))
    }

    /// Returns a setting to its default.
    pub async fn unset_setting(&self, key: &SettingKey) -> Result<(), SolutionError> {
        on_backend!(self, unset_setting(key))
    }

    /// What is wrong with the stored `ModelSettings`.
    pub async fn settings_issues(&self) -> Result<Vec<SettingIssue>, SolutionError> {
        on_backend!(self, settings_issues())
    }

    /// The user of that name (matched case-insensitively), if any.
    pub async fn user(&self, name: &str) -> Result<Option<UserRecord>, SolutionError> {
        on_backend!(self, user(name))
    }

    /// Every user, by name.
    pub async fn users(&self) -> Result<Vec<UserRecord>, SolutionError> {
        on_backend!(self, users())
    }

    /// Adds a user with a role (`password` `None`: passwordless).
    pub async fn add_user(
        &self,
        name: &str,
        password: Option<&str>,
        role: Role,
    ) -> Result<(), SolutionError> {
        on_backend!(self, add_user(name, password, role))
    }

    /// Replaces a user's password (`None`: passwordless).
    pub async fn set_password(&self, name: &str, password: Option<&str>) -> Result<(), SolutionError> {
        on_backend!(self, set_password(name, password))
    }

    /// Changes a user's role.
    pub async fn set_role(&self, name: &str, role: Role) -> Result<(), SolutionError> {
        on_backend!(self, set_role(name, role))
    }

    /// Removes a user.
    pub async fn remove_user(&self, name: &str) -> Result<(), SolutionError> {
        on_backend!(self, remove_user(name))
    }
}
