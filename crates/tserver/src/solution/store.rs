//! `Store`: one solution behind one interface, in a SQLite file or in PostgreSQL. Each
//! operation works the change out once (`admin.rs`) and writes it with its backend's SQL.
//!
//! It covers everything a solution holds: settings, users, secrets, tokens, the plant, scripts
//! and their runs, history, alarm events, the audit trail, source reports. A file's
//! operations run inline (SQLite answers in microseconds; the runner's periodic ones on the
//! blocking pool); PostgreSQL's are awaited, or waited for on the blocking threads that call
//! them (`*_blocking`).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use localai::secrets::SecretValue;
use localai::settings::{SettingIssue, SettingsRow};
use plant_model::{ExpandedPlant, PlantModel};

use solution_scripts::Trigger;

use super::{
    ApiToken, AuditEntry, PgStore, PlantChanges, Role, RuntimeSettings, ScriptRecord, ScriptTally,
    SettingKey, SettingValue, SolutionDb, SolutionError, SolutionLocation, SourceReport, StoredScript,
    TokenRefusal, TokenUser, UserRecord,
};

/// A solution, wherever it is.
#[derive(Debug)]
pub enum Store {
    /// A SQLite solution file.
    File(Arc<SolutionDb>),
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
            SolutionLocation::File(path) => Self::File(Arc::new(SolutionDb::open(path)?)),
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

    /// The settings the runtime reads when it opens.
    pub async fn runtime_settings(&self) -> Result<RuntimeSettings, SolutionError> {
        on_backend!(self, runtime_settings())
    }

    /// Reads and decrypts a secret; `None` when there is none of that name.
    pub async fn secret(&self, name: &str) -> Result<Option<SecretValue>, SolutionError> {
        on_backend!(self, secret(name))
    }

    /// Stores (or replaces) a secret, encrypted.
    pub async fn set_secret(&self, name: &str, value: &str) -> Result<(), SolutionError> {
        on_backend!(self, set_secret(name, value))
    }

    /// The names of all secrets (never their values).
    pub async fn secret_names(&self) -> Result<Vec<String>, SolutionError> {
        on_backend!(self, secret_names())
    }

    /// Removes a secret.
    pub async fn remove_secret(&self, name: &str) -> Result<(), SolutionError> {
        on_backend!(self, remove_secret(name))
    }

    /// The plant definitions the runtime loads.
    pub async fn plant_definitions(&self) -> Result<ExpandedPlant, SolutionError> {
        on_backend!(self, plant_definitions())
    }

    /// The plant model as last imported.
    pub async fn plant_model(&self) -> Result<PlantModel, SolutionError> {
        on_backend!(self, plant_model())
    }

    /// The revision of the plant model: 0 before any import, one more with each import.
    pub async fn plant_revision(&self) -> Result<i64, SolutionError> {
        on_backend!(self, plant_revision())
    }

    /// What the alarm history recorded of each alarm since its last trip, oldest first.
    pub async fn alarm_events_since_last_trip(
        &self,
    ) -> Result<Vec<crate::objects::AlarmEvent>, SolutionError> {
        on_backend!(self, alarm_events_since_last_trip())
    }

    /// Audit entries from `since` on, oldest first, at most `limit`.
    pub async fn audit(
        &self,
        since: Option<SystemTime>,
        limit: usize,
    ) -> Result<Vec<AuditEntry>, SolutionError> {
        on_backend!(self, audit(since, limit))
    }

    /// Removes the audit entries older than `before`, from a thread that may block; how many.
    pub(crate) fn prune_audit_blocking(&self, before: SystemTime) -> Result<usize, SolutionError> {
        match self {
            Self::File(db) => db.prune_audit(before),
            Self::Postgres(pg) => pg.block_on(pg.prune_audit(before)),
        }
    }

    /// Appends audit entries, all of them or none, from a thread that may block.
    pub(crate) fn record_audit_blocking(&self, batches: &[&[AuditEntry]]) -> Result<(), SolutionError> {
        match self {
            Self::File(db) => db.record_audit_batches(batches),
            Self::Postgres(pg) => pg.block_on(pg.record_audit_batches(batches)),
        }
    }

    /// The solution file, when the solution is one.
    pub fn file(&self) -> Option<&Arc<SolutionDb>> {
        match self {
            Self::File(db) => Some(db),
            Self::Postgres(_) => None,
        }
    }

    /// Why the solution file was lost while served, if it is a file and was.
    pub fn lost(&self) -> Option<&str> {
        self.file().and_then(|db| db.lost())
    }

    /// Where the solution is, as shown to people (a URL's password as `***`).
    pub fn location(&self) -> String {
        match self {
            Self::File(db) => db.path().display().to_string(),
            Self::Postgres(pg) => pg.url().to_string(),
        }
    }

    /// Creates an API token for `user`; returns it and its text, shown only now.
    pub async fn create_token(
        &self,
        user: &str,
        name: &str,
        valid_for: Option<Duration>,
    ) -> Result<(ApiToken, String), SolutionError> {
        on_backend!(self, create_token(user, name, valid_for))
    }

    /// Every API token, oldest first.
    pub async fn tokens(&self) -> Result<Vec<ApiToken>, SolutionError> {
        on_backend!(self, tokens())
    }

    /// Revokes the token `which` names.
    pub async fn revoke_token(&self, which: &str) -> Result<ApiToken, SolutionError> {
        on_backend!(self, revoke_token(which))
    }

    /// The user a presented token acts as, or why it is refused.
    pub async fn verify_token(&self, text: &str) -> Result<Result<TokenUser, TokenRefusal>, SolutionError> {
        on_backend!(self, verify_token(text))
    }

    /// Replaces this node's stored source reports with `reports` (name, JSON).
    pub(crate) async fn replace_source_reports(
        &self,
        reports: Vec<(String, String)>,
    ) -> Result<(), SolutionError> {
        match self {
            Self::File(db) => {
                on_file_thread(db, "storing the source reports", move |db| {
                    db.replace_source_reports(&reports)
                })
                .await
            }
            Self::Postgres(pg) => pg.replace_source_reports(&reports).await,
        }
    }

    /// The stored source reports, by name (and node).
    pub async fn source_reports(&self) -> Result<Vec<SourceReport>, SolutionError> {
        on_backend!(self, source_reports())
    }

    /// Stores a new script (compiled first).
    pub async fn add_script(
        &self,
        name: &str,
        trigger: &Trigger,
        source: &str,
    ) -> Result<StoredScript, SolutionError> {
        on_backend!(self, add_script(name, trigger, source))
    }

    /// Changes a script's source, trigger, or both.
    pub async fn update_script(
        &self,
        name: &str,
        trigger: Option<&Trigger>,
        source: Option<&str>,
    ) -> Result<StoredScript, SolutionError> {
        on_backend!(self, update_script(name, trigger, source))
    }

    /// Enables or disables a script's trigger.
    pub async fn set_script_enabled(&self, name: &str, enabled: bool) -> Result<StoredScript, SolutionError> {
        on_backend!(self, set_script_enabled(name, enabled))
    }

    /// Removes a script and its run record.
    pub async fn remove_script(&self, name: &str) -> Result<StoredScript, SolutionError> {
        on_backend!(self, remove_script(name))
    }

    /// The script named `name` (any case), if stored.
    pub async fn script(&self, name: &str) -> Result<Option<StoredScript>, SolutionError> {
        on_backend!(self, script(name))
    }

    /// Every script's run record, by name.
    pub async fn script_records(&self) -> Result<Vec<ScriptRecord>, SolutionError> {
        on_backend!(self, script_records())
    }

    /// Asks a serving tserver (the leading node, on a database) to run `name` once.
    pub async fn request_script_run(&self, name: &str) -> Result<(StoredScript, SystemTime), SolutionError> {
        on_backend!(self, request_script_run(name))
    }

    /// Withdraws a run request nobody took.
    pub async fn withdraw_script_run(&self, name: &str) -> Result<(), SolutionError> {
        on_backend!(self, withdraw_script_run(name))
    }

    /// Every script, by name; a file is read on a blocking thread (the runner asks every second).
    pub async fn scripts(&self) -> Result<Vec<StoredScript>, SolutionError> {
        match self {
            Self::File(db) => on_file_thread(db, "reading the scripts", |db| db.scripts()).await,
            Self::Postgres(pg) => pg.scripts().await,
        }
    }

    /// Takes the waiting run requests (gone once taken), oldest first.
    pub async fn take_script_run_requests(&self) -> Result<Vec<String>, SolutionError> {
        match self {
            Self::File(db) => {
                on_file_thread(db, "taking the run requests", |db| db.take_script_run_requests()).await
            }
            Self::Postgres(pg) => pg.take_script_run_requests().await,
        }
    }

    /// Adds runs and skipped triggers to the scripts' records.
    pub async fn record_script_runs(&self, tallies: Vec<(String, ScriptTally)>) -> Result<(), SolutionError> {
        match self {
            Self::File(db) => {
                on_file_thread(db, "recording script runs", move |db| {
                    db.record_script_runs(&tallies)
                })
                .await
            }
            Self::Postgres(pg) => pg.record_script_runs(&tallies).await,
        }
    }

    /// Replaces the plant with `model` in one transaction; with `dry_run` nothing is kept.
    pub async fn import_plant(
        &self,
        model: &PlantModel,
        source: &str,
        dry_run: bool,
    ) -> Result<PlantChanges, SolutionError> {
        on_backend!(self, import_plant(model, source, dry_run))
    }

    /// Deletes the recorded history of a tag no longer in the plant.
    pub async fn purge_tag_history(&self, tag: &str) -> Result<usize, SolutionError> {
        on_backend!(self, purge_tag_history(tag))
    }
}

/// Runs `work` on the file on a blocking thread, off the async workers.
async fn on_file_thread<T: Send + 'static>(
    db: &Arc<SolutionDb>,
    what: &'static str,
    work: impl FnOnce(&SolutionDb) -> Result<T, SolutionError> + Send + 'static,
) -> Result<T, SolutionError> {
    let db = Arc::clone(db);
    tokio::task::spawn_blocking(move || work(&db))
        .await
        .map_err(|_| SolutionError::Interrupted(what))?
}
