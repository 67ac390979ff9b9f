//! `Store`: one solution behind one interface, in a SQLite file or in PostgreSQL. Each
//! operation works the change out once (`admin.rs`) and writes it with its backend's SQL.
//!
//! It covers everything a solution holds: settings, users, secrets, tokens, the plant, scripts
//! and their runs, history, alarm events, the audit trail, source reports. A file's
//! operations run inline (SQLite answers in microseconds; the runner's periodic ones on the
//! blocking pool); PostgreSQL's are awaited, or waited for on the blocking threads that call
//! them (`*_blocking`).

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use plant_model::{AlarmEvent, Equipment, ExpandedPlant, PlantDocument, PlantModel, TagType};

use solution_scripts::Trigger;
use solution_settings::{SecretValue, SettingIssue, SettingsRow};

use std::collections::HashMap;

use crate::history::page::{HistoryRead, HistoryShape};
use crate::history::unix_millis;
use crate::postgres::PgStore;
use crate::{
    AlarmHistoryPage, AlarmRecord, ApiToken, AuditEntry, BrowserLogin, BrowserLoginRules, HistoryCursor,
    HistoryInterval, HistoryLimits, HistoryPage, HistorySample, Leadership, LoginThrottleConfig,
    PasswordCheck, PendingSample, PlantChanges, RawHistoryPage, Role, RuntimeSettings, ScriptRecord,
    ScriptTally, SettingKey, SettingValue, SolutionDb, SolutionError, SolutionLocation, SourceReport,
    StoredScript, TokenRefusal, TokenUser, UserRecord,
};

/// A solution, wherever it is.
#[derive(Debug)]
pub struct Store {
    backend: Backend,
}

/// Where a solution is kept; known to this crate alone.
#[derive(Debug)]
enum Backend {
    /// A SQLite solution file.
    File(Arc<SolutionDb>),
    /// A PostgreSQL database.
    Postgres(PgStore),
}

/// What a runtime loads from its solution when it opens.
#[derive(Debug)]
pub struct SolutionAtStart {
    /// The settings the runtime reads when it opens.
    pub settings: RuntimeSettings,
    /// The revision of the plant model.
    pub plant_revision: i64,
    /// The plant definitions the runtime loads.
    pub definitions: ExpandedPlant,
    /// The documents attached to the plant.
    pub documents: Vec<PlantDocument>,
    /// The equipment instances of the plant model (the documents' searches are about them).
    pub equipment: Vec<Equipment>,
    /// The site's prompts.
    pub prompts: Vec<plant_model::PromptSpec>,
    /// What the alarm history recorded of each alarm since its last trip, oldest first.
    pub alarm_record: Vec<AlarmEvent>,
    /// The alarms shelved or out of service.
    pub alarm_handling: Vec<crate::KeptHandling>,
}

/// Calls `method` on whichever backend the store is, awaiting PostgreSQL's.
macro_rules! on_backend {
    ($store:expr, $method:ident($($argument:expr),*)) => {
        match &$store.backend {
            Backend::File(db) => db.$method($($argument),*),
            Backend::Postgres(pg) => pg.$method($($argument),*).await,
        }
    };
}

/// Calls `method` on whichever backend the store is, from a thread that may block.
macro_rules! on_backend_blocking {
    ($store:expr, $method:ident($($argument:expr),*)) => {
        match &$store.backend {
            Backend::File(db) => db.$method($($argument),*),
            Backend::Postgres(pg) => pg.block_on(pg.$method($($argument),*)),
        }
    };
}

impl Store {
    /// Opens the solution at `location` (a file must exist; a database gets tserver's schema
    /// if it has none).
    #[crate::compiled_once]
    pub async fn open(location: &SolutionLocation) -> Result<Self, SolutionError> {
        Ok(match location {
            SolutionLocation::File(path) => Self::open_file(path)?,
            SolutionLocation::Postgres(url) => Self {
                backend: Backend::Postgres(PgStore::open(url).await?),
            },
        })
    }

    /// The solution file, when the solution is one (not a PostgreSQL database).
    pub fn file_path(&self) -> Option<&Path> {
        match &self.backend {
            Backend::File(db) => Some(db.path()),
            Backend::Postgres(_) => None,
        }
    }

    /// Opens an existing solution file, upgrading an older schema version.
    pub fn open_file(path: &Path) -> Result<Self, SolutionError> {
        Ok(Self {
            backend: Backend::File(Arc::new(SolutionDb::open(path)?)),
        })
    }

    /// Creates a new solution file with the default settings, optionally with the demo plant
    /// and a passwordless `guest` user.
    pub fn create_file(path: &Path, with_demo: bool) -> Result<(), SolutionError> {
        SolutionDb::create(path, with_demo)
    }

    /// What a runtime loads when it opens.
    #[crate::compiled_once]
    pub async fn at_start(&self) -> Result<SolutionAtStart, SolutionError> {
        Ok(SolutionAtStart {
            settings: self.runtime_settings().await?,
            plant_revision: self.plant_revision().await?,
            definitions: self.plant_definitions().await?,
            documents: self.plant_documents().await?,
            equipment: self.plant_equipment().await?,
            prompts: self.plant_prompts().await?,
            alarm_record: self.alarm_events_since_last_trip().await?,
            alarm_handling: self.alarm_handling().await?,
        })
    }

    /// What a runtime loads when it opens, from a thread that may block.
    pub fn at_start_blocking(&self) -> Result<SolutionAtStart, SolutionError> {
        Ok(SolutionAtStart {
            settings: on_backend_blocking!(self, runtime_settings())?,
            plant_revision: on_backend_blocking!(self, plant_revision())?,
            definitions: on_backend_blocking!(self, plant_definitions())?,
            documents: on_backend_blocking!(self, plant_documents())?,
            equipment: on_backend_blocking!(self, plant_equipment())?,
            prompts: on_backend_blocking!(self, plant_prompts())?,
            alarm_record: on_backend_blocking!(self, alarm_events_since_last_trip())?,
            alarm_handling: on_backend_blocking!(self, alarm_handling())?,
        })
    }

    /// Answers settings reads from a copy kept under a lease that every writer revokes first
    /// (a serving node on PostgreSQL: a call then needs no query; a file needs none anyway).
    /// Must be called on a runtime; once is enough.
    pub fn hold_settings_lease(&self) {
        if let Backend::Postgres(pg) = &self.backend {
            pg.hold_settings_lease();
        }
    }

    /// The `SolutionSettings` row as a call starting now must see it: every change committed
    /// before the call is in it.
    #[crate::compiled_once]
    pub async fn settings_row(&self) -> Result<SettingsRow, SolutionError> {
        on_backend!(self, settings_row())
    }

    /// Reads one setting.
    #[crate::compiled_once]
    pub async fn setting(&self, key: &SettingKey) -> Result<SettingValue, SolutionError> {
        on_backend!(self, setting(key))
    }

    /// Writes one setting.
    #[crate::compiled_once]
    pub async fn set_setting(&self, key: &SettingKey, value: &str) -> Result<(), SolutionError> {
        on_backend!(self, set_setting(key, value))
    }

    /// Returns a setting to its default.
    #[crate::compiled_once]
    pub async fn unset_setting(&self, key: &SettingKey) -> Result<(), SolutionError> {
        on_backend!(self, unset_setting(key))
    }

    /// What is wrong with the stored `ModelSettings`.
    #[crate::compiled_once]
    pub async fn settings_issues(&self) -> Result<Vec<SettingIssue>, SolutionError> {
        on_backend!(self, settings_issues())
    }

    /// The user of that name (matched case-insensitively), if any.
    #[crate::compiled_once]
    pub async fn user(&self, name: &str) -> Result<Option<UserRecord>, SolutionError> {
        on_backend!(self, user(name))
    }

    /// Whether `password` is `user`'s, as a signature checks it: the password entered again,
    /// verified against its argon2 hash on a thread that may block.
    #[crate::compiled_once]
    pub async fn check_password(&self, user: &str, password: &str) -> Result<PasswordCheck, SolutionError> {
        let Some(record) = self.user(user).await? else {
            return Ok(PasswordCheck::UnknownUser);
        };
        let Some(hash) = record.password_hash else {
            return Ok(PasswordCheck::NoPassword);
        };
        let password = password.to_owned();
        let right = tokio::task::spawn_blocking(move || {
            use argon2::password_hash::{PasswordHash, PasswordVerifier};
            PasswordHash::new(&hash)
                .map(|parsed| {
                    argon2::Argon2::default()
                        .verify_password(password.as_bytes(), &parsed)
                        .is_ok()
                })
                .map_err(|error| SolutionError::PasswordHash(error.to_string()))
        })
        .await
        .map_err(|_| SolutionError::Interrupted("checking a password"))??;
        Ok(if right {
            PasswordCheck::Right {
                name: record.name,
                role: record.role,
            }
        } else {
            PasswordCheck::Wrong
        })
    }

    /// Every user, by name.
    #[crate::compiled_once]
    pub async fn users(&self) -> Result<Vec<UserRecord>, SolutionError> {
        on_backend!(self, users())
    }

    /// Adds a user with a role (`password` `None`: passwordless).
    #[crate::compiled_once]
    pub async fn add_user(
        &self,
        name: &str,
        password: Option<&str>,
        role: Role,
    ) -> Result<(), SolutionError> {
        on_backend!(self, add_user(name, password, role))
    }

    /// Replaces a user's password (`None`: passwordless).
    #[crate::compiled_once]
    pub async fn set_password(&self, name: &str, password: Option<&str>) -> Result<(), SolutionError> {
        on_backend!(self, set_password(name, password))
    }

    /// Changes a user's role.
    #[crate::compiled_once]
    pub async fn set_role(&self, name: &str, role: Role) -> Result<(), SolutionError> {
        on_backend!(self, set_role(name, role))
    }

    /// Removes a user.
    #[crate::compiled_once]
    pub async fn remove_user(&self, name: &str) -> Result<(), SolutionError> {
        on_backend!(self, remove_user(name))
    }

    /// The settings the runtime reads when it opens.
    #[crate::compiled_once]
    pub async fn runtime_settings(&self) -> Result<RuntimeSettings, SolutionError> {
        on_backend!(self, runtime_settings())
    }

    /// Reads and decrypts a secret; `None` when there is none of that name.
    #[crate::compiled_once]
    pub async fn secret(&self, name: &str) -> Result<Option<SecretValue>, SolutionError> {
        on_backend!(self, secret(name))
    }

    /// Stores (or replaces) a secret, encrypted.
    #[crate::compiled_once]
    pub async fn set_secret(&self, name: &str, value: &str) -> Result<(), SolutionError> {
        on_backend!(self, set_secret(name, value))
    }

    /// The names of all secrets (never their values).
    #[crate::compiled_once]
    pub async fn secret_names(&self) -> Result<Vec<String>, SolutionError> {
        on_backend!(self, secret_names())
    }

    /// Removes a secret.
    #[crate::compiled_once]
    pub async fn remove_secret(&self, name: &str) -> Result<(), SolutionError> {
        on_backend!(self, remove_secret(name))
    }

    /// The plant definitions the runtime loads.
    #[crate::compiled_once]
    pub async fn plant_definitions(&self) -> Result<ExpandedPlant, SolutionError> {
        on_backend!(self, plant_definitions())
    }

    /// The plant model as last imported.
    #[crate::compiled_once]
    pub async fn plant_model(&self) -> Result<PlantModel, SolutionError> {
        on_backend!(self, plant_model())
    }

    /// The equipment instances of the plant model as last imported (none before an import),
    /// without reading the rest of it.
    #[crate::compiled_once]
    pub async fn plant_equipment(&self) -> Result<Vec<Equipment>, SolutionError> {
        on_backend!(self, plant_equipment())
    }

    /// The site's prompts of the plant model as last imported (none before an import).
    #[crate::compiled_once]
    pub async fn plant_prompts(&self) -> Result<Vec<plant_model::PromptSpec>, SolutionError> {
        on_backend!(self, plant_prompts())
    }

    /// The plant's notifications and the sources an MQTT one publishes through.
    #[crate::compiled_once]
    pub async fn plant_notifications(&self) -> Result<crate::PlantNotifications, SolutionError> {
        on_backend!(self, plant_notifications())
    }

    /// The plant's sources and the tags they feed (only those, each as the runtime loads it):
    /// what the sources start from, without reading the rest of the plant.
    #[crate::compiled_once]
    pub async fn plant_sources(&self) -> Result<ExpandedPlant, SolutionError> {
        on_backend!(self, plant_sources())
    }

    /// The documents attached to the plant, by path.
    #[crate::compiled_once]
    pub async fn plant_documents(&self) -> Result<Vec<PlantDocument>, SolutionError> {
        on_backend!(self, plant_documents())
    }

    /// The revision of the plant model: 0 before any import, one more with each import.
    #[crate::compiled_once]
    pub async fn plant_revision(&self) -> Result<i64, SolutionError> {
        on_backend!(self, plant_revision())
    }

    /// The alarms shelved or out of service now (kept apart from the history, which
    /// retention prunes).
    #[crate::compiled_once]
    pub async fn alarm_handling(&self) -> Result<Vec<crate::KeptHandling>, SolutionError> {
        on_backend!(self, alarm_handling())
    }

    /// What the alarm history recorded of each alarm since its last trip, oldest first.
    #[crate::compiled_once]
    pub async fn alarm_events_since_last_trip(&self) -> Result<Vec<AlarmEvent>, SolutionError> {
        on_backend!(self, alarm_events_since_last_trip())
    }

    /// Audit entries from `since` on, oldest first, at most `limit`.
    #[crate::compiled_once]
    pub async fn audit(
        &self,
        since: Option<SystemTime>,
        limit: usize,
    ) -> Result<Vec<AuditEntry>, SolutionError> {
        on_backend!(self, audit(since, limit))
    }

    /// Walks the whole audit trail in the chain's order: where it first breaks (a row changed,
    /// removed or inserted), or what verified.
    #[crate::compiled_once]
    pub async fn verify_audit(
        &self,
    ) -> Result<Result<crate::audit_chain::ChainVerified, crate::audit_chain::ChainBreak>, SolutionError>
    {
        on_backend!(self, verify_audit())
    }

    /// Removes the oldest audit entries, up to the first recorded at or after `before` (the
    /// chain's prefix), from a thread that may block; how many.
    pub fn prune_audit_blocking(&self, before: SystemTime) -> Result<usize, SolutionError> {
        on_backend_blocking!(self, prune_audit(before))
    }

    /// Appends audit entries, all of them or none, from a thread that may block.
    pub fn record_audit_blocking(&self, batches: &[&[AuditEntry]]) -> Result<(), SolutionError> {
        on_backend_blocking!(self, record_audit_batches(batches))
    }

    /// Checks that a solution file's path still names the file opened; the first time it does
    /// not, the solution is marked lost and the reason returned (later calls return `None`; a
    /// lost solution refuses every write). `None` for a database, which cannot be lost so.
    pub fn check_file(&self) -> Option<&str> {
        match &self.backend {
            Backend::File(db) => db.check_file(),
            Backend::Postgres(_) => None,
        }
    }

    /// Why the solution file was lost while served, if it is a file and was.
    pub fn lost(&self) -> Option<&str> {
        match &self.backend {
            Backend::File(db) => db.lost(),
            Backend::Postgres(_) => None,
        }
    }

    /// `FileLost` once a solution file was removed or replaced under this process.
    pub fn refuse_if_lost(&self) -> Result<(), SolutionError> {
        match &self.backend {
            Backend::File(db) => db.refuse_if_lost(),
            Backend::Postgres(_) => Ok(()),
        }
    }

    /// Where the solution is, as shown to people (a URL's password as `***`).
    pub fn location(&self) -> String {
        match &self.backend {
            Backend::File(db) => db.path().display().to_string(),
            Backend::Postgres(pg) => pg.url().to_string(),
        }
    }

    /// Starts campaigning for the leadership `key` names among the nodes sharing the
    /// database, checking every `interval`; `None` for a file, whose one server always leads.
    pub fn campaign(&self, key: i64, interval: Duration) -> Option<Leadership> {
        match &self.backend {
            Backend::File(_) => None,
            Backend::Postgres(pg) => Some(Leadership::campaign(pg.url(), key, interval)),
        }
    }

    /// How long `peer` must still wait before it may log in, as every node sharing the
    /// database counts its failures; `None` for a file, whose one server counts its own.
    #[crate::compiled_once]
    pub async fn shared_login_lockout(
        &self,
        peer: IpAddr,
    ) -> Option<Result<Option<Duration>, SolutionError>> {
        match &self.backend {
            Backend::File(_) => None,
            Backend::Postgres(pg) => Some(pg.login_lockout(peer).await),
        }
    }

    /// Counts a failed login from `peer` (for `user`, the key of the name tried; `None` when it
    /// named none) for every node sharing the database: its failures so far and the lockout
    /// `config` gives that count. `None` for a file, whose one server
    /// counts its own.
    #[crate::compiled_once]
    pub async fn record_shared_login_failure(
        &self,
        peer: IpAddr,
        user: Option<&str>,
        config: &LoginThrottleConfig,
    ) -> Option<Result<(u32, Option<Duration>), SolutionError>> {
        match &self.backend {
            Backend::File(_) => None,
            Backend::Postgres(pg) => Some(pg.record_login_failure(peer, user, config).await),
        }
    }

    /// Forgets `peer`'s failed logins on every node sharing the database when every one was
    /// for `user` (the key the failures were recorded under; nothing for a file).
    #[crate::compiled_once]
    pub async fn clear_shared_login_failures(&self, peer: IpAddr, user: &str) -> Result<(), SolutionError> {
        match &self.backend {
            Backend::File(_) => Ok(()),
            Backend::Postgres(pg) => pg.clear_login_failures(peer, user).await,
        }
    }

    /// The acts on alarms (acknowledgements, shelving, service) the nodes sharing the database
    /// recorded after the alarm event `after` (its `Id`): the last id read and the events,
    /// oldest first (`None` for `after`: the last id so far, and none). A file, whose one
    /// server makes them all itself, has none.
    #[crate::compiled_once]
    pub async fn alarm_acts_since(
        &self,
        after: Option<i64>,
    ) -> Result<(i64, Vec<AlarmEvent>), SolutionError> {
        match &self.backend {
            Backend::File(_) => Ok((after.unwrap_or(0), Vec::new())),
            Backend::Postgres(pg) => pg.alarm_acts_since(after).await,
        }
    }

    /// Appends tag samples and alarm events in one transaction and prunes the history past the
    /// `limits`, from a thread that may block. On failure nothing is written.
    pub fn write_history_blocking(
        &self,
        samples: &[PendingSample],
        events: &[AlarmEvent],
        limits: &HistoryLimits,
    ) -> Result<(), SolutionError> {
        on_backend_blocking!(self, write_history(samples, events, limits))
    }

    /// Folds the history journal into blocks now rather than when it is due (after seeding a
    /// history, say), keeping within the `limits`; returns how many samples it folded. From a
    /// thread that may block.
    pub fn checkpoint_history_blocking(&self, limits: &HistoryLimits) -> Result<usize, SolutionError> {
        on_backend_blocking!(self, checkpoint_history(limits))
    }

    /// Samples of `tag` (dotted name, of `kind`) between `from` and `to` inclusive: at most
    /// `max_samples` (each time bucket's first, lowest, highest and last when the window holds
    /// more), with statistics over all; from a thread that may block.
    pub fn tag_history_blocking(
        &self,
        tag: &str,
        kind: TagType,
        (from, to): (SystemTime, SystemTime),
        max_samples: usize,
    ) -> Result<HistoryPage, SolutionError> {
        let window = (unix_millis(from), unix_millis(to));
        let shape = HistoryShape::Trend { max: max_samples };
        let (read, data) = self.read_tag_history_blocking(tag, HistoryRead::new(kind, window, shape))?;
        Ok(read.finish(&data)?)
    }

    /// Every sample of `tag` (dotted name, of `kind`) between `from` and `to` inclusive, oldest
    /// first, a page of at most `limit` at a time: the first page, or the one `after` a
    /// previous page's [`RawHistoryPage::next`]; from a thread that may block.
    pub fn raw_history_blocking(
        &self,
        tag: &str,
        kind: TagType,
        (from, to): (SystemTime, SystemTime),
        after: Option<HistoryCursor>,
        limit: usize,
    ) -> Result<RawHistoryPage, SolutionError> {
        let window = (unix_millis(from), unix_millis(to));
        let shape = HistoryShape::Raw { after, limit };
        let (read, data) = self.read_tag_history_blocking(tag, HistoryRead::new(kind, window, shape))?;
        Ok(read.finish_raw(&data)?)
    }

    /// The aggregates of `tag` (dotted name, of `kind`) per `interval` of the window `from..=to`
    /// (at most [`MAX_HISTORY_INTERVALS`](crate::MAX_HISTORY_INTERVALS): a shorter interval is
    /// widened), the value held after the last sample counted up to `now` at most; from a
    /// thread that may block.
    pub fn history_intervals_blocking(
        &self,
        tag: &str,
        kind: TagType,
        (from, to): (SystemTime, SystemTime),
        interval: Duration,
        now: SystemTime,
    ) -> Result<Vec<HistoryInterval>, SolutionError> {
        let window = (unix_millis(from), unix_millis(to));
        let shape = HistoryShape::Intervals {
            step: i64::try_from(interval.as_millis()).unwrap_or(i64::MAX),
            now: unix_millis(now),
        };
        let (read, data) = self.read_tag_history_blocking(tag, HistoryRead::new(kind, window, shape))?;
        Ok(read.finish_intervals(&data)?)
    }

    fn read_tag_history_blocking(
        &self,
        tag: &str,
        read: HistoryRead,
    ) -> Result<(HistoryRead, HashMap<i64, Vec<u8>>), SolutionError> {
        on_backend_blocking!(self, read_tag_history(tag, read))
    }

    /// Each tag's (dotted name, of its kind) last recorded sample at or before `instant`, `None`
    /// for a tag with none; from a thread that may block.
    pub fn values_at_blocking(
        &self,
        tags: &[(&str, TagType)],
        instant: SystemTime,
    ) -> Result<Vec<Option<HistorySample>>, SolutionError> {
        let instant = unix_millis(instant);
        on_backend_blocking!(self, values_at(tags, instant))
    }

    /// Alarm transitions between `from` and `to` inclusive, newest first, optionally of one
    /// tag (dotted name) only; from a thread that may block.
    pub fn alarm_history_blocking(
        &self,
        tag: Option<&str>,
        (from, to): (SystemTime, SystemTime),
        max_events: usize,
    ) -> Result<AlarmHistoryPage, SolutionError> {
        let window = (unix_millis(from), unix_millis(to));
        on_backend_blocking!(self, alarm_history(tag, window, max_events))
    }

    /// What an alarm report reads: how each alarm stood at `from`, and the events from `from`
    /// to `to`, at most `max_events` of them, oldest first. From a thread that may block.
    pub fn alarm_record_blocking(
        &self,
        (from, to): (SystemTime, SystemTime),
        max_events: usize,
    ) -> Result<AlarmRecord, SolutionError> {
        let window = (unix_millis(from), unix_millis(to));
        on_backend_blocking!(self, alarm_record(window, max_events))
    }

    /// Creates an API token for `user`; returns it and its text, shown only now.
    #[crate::compiled_once]
    pub async fn create_token(
        &self,
        user: &str,
        name: &str,
        valid_for: Option<Duration>,
    ) -> Result<(ApiToken, String), SolutionError> {
        on_backend!(self, create_token(user, name, valid_for))
    }

    /// Every API token, oldest first.
    #[crate::compiled_once]
    pub async fn tokens(&self) -> Result<Vec<ApiToken>, SolutionError> {
        on_backend!(self, tokens())
    }

    /// Revokes the token `which` names.
    #[crate::compiled_once]
    pub async fn revoke_token(&self, which: &str) -> Result<ApiToken, SolutionError> {
        on_backend!(self, revoke_token(which))
    }

    /// The user a presented token acts as, or why it is refused.
    #[crate::compiled_once]
    pub async fn verify_token(&self, text: &str) -> Result<Result<TokenUser, TokenRefusal>, SolutionError> {
        on_backend!(self, verify_token(text))
    }

    /// Starts a browser login for `user` at `now` under `rules` (expired logins swept, the
    /// user's oldest past the cap ended); returns the token, shown only now.
    #[crate::compiled_once]
    pub async fn create_browser_session(
        &self,
        user: &str,
        rules: BrowserLoginRules,
        now: SystemTime,
    ) -> Result<String, SolutionError> {
        match &self.backend {
            Backend::File(db) => {
                let user = user.to_owned();
                on_file_thread(db, "starting a browser login", move |db| {
                    db.create_browser_session(&user, &rules, now)
                })
                .await
            }
            Backend::Postgres(pg) => pg.create_browser_session(user, &rules, now).await,
        }
    }

    /// The login a browser's `token` carries at `now`, unless unknown, revoked, or ended under
    /// `rules` (then it is deleted); a valid one is marked used at `now`.
    #[crate::compiled_once]
    pub async fn browser_session(
        &self,
        token: &str,
        rules: BrowserLoginRules,
        now: SystemTime,
    ) -> Result<Option<BrowserLogin>, SolutionError> {
        match &self.backend {
            Backend::File(db) => {
                let token = token.to_owned();
                on_file_thread(db, "checking a browser login", move |db| {
                    db.browser_session(&token, &rules, now)
                })
                .await
            }
            Backend::Postgres(pg) => pg.browser_session(token, &rules, now).await,
        }
    }

    /// Ends the browser login `token` carries; whether there was one.
    #[crate::compiled_once]
    pub async fn revoke_browser_session(&self, token: &str) -> Result<bool, SolutionError> {
        match &self.backend {
            Backend::File(db) => {
                let token = token.to_owned();
                on_file_thread(db, "ending a browser login", move |db| {
                    db.revoke_browser_session(&token)
                })
                .await
            }
            Backend::Postgres(pg) => pg.revoke_browser_session(token).await,
        }
    }

    /// Replaces this node's stored source reports with `reports` (name, JSON).
    #[crate::compiled_once]
    pub async fn replace_source_reports(&self, reports: Vec<(String, String)>) -> Result<(), SolutionError> {
        match &self.backend {
            Backend::File(db) => {
                on_file_thread(db, "storing the source reports", move |db| {
                    db.replace_source_reports(&reports)
                })
                .await
            }
            Backend::Postgres(pg) => pg.replace_source_reports(&reports).await,
        }
    }

    /// The stored source reports, by name (and node).
    #[crate::compiled_once]
    pub async fn source_reports(&self) -> Result<Vec<SourceReport>, SolutionError> {
        on_backend!(self, source_reports())
    }

    /// Stores a new script (compiled first).
    #[crate::compiled_once]
    pub async fn add_script(
        &self,
        name: &str,
        trigger: &Trigger,
        source: &str,
    ) -> Result<StoredScript, SolutionError> {
        on_backend!(self, add_script(name, trigger, source))
    }

    /// Changes a script's source, trigger, or both.
    #[crate::compiled_once]
    pub async fn update_script(
        &self,
        name: &str,
        trigger: Option<&Trigger>,
        source: Option<&str>,
    ) -> Result<StoredScript, SolutionError> {
        on_backend!(self, update_script(name, trigger, source))
    }

    /// Enables or disables a script's trigger.
    #[crate::compiled_once]
    pub async fn set_script_enabled(&self, name: &str, enabled: bool) -> Result<StoredScript, SolutionError> {
        on_backend!(self, set_script_enabled(name, enabled))
    }

    /// Removes a script and its run record.
    #[crate::compiled_once]
    pub async fn remove_script(&self, name: &str) -> Result<StoredScript, SolutionError> {
        on_backend!(self, remove_script(name))
    }

    /// The script named `name` (any case), if stored.
    #[crate::compiled_once]
    pub async fn script(&self, name: &str) -> Result<Option<StoredScript>, SolutionError> {
        on_backend!(self, script(name))
    }

    /// Every script's run record, by name.
    #[crate::compiled_once]
    pub async fn script_records(&self) -> Result<Vec<ScriptRecord>, SolutionError> {
        on_backend!(self, script_records())
    }

    /// Asks a serving tserver (the leading node, on a database) to run `name` once.
    #[crate::compiled_once]
    pub async fn request_script_run(&self, name: &str) -> Result<(StoredScript, SystemTime), SolutionError> {
        on_backend!(self, request_script_run(name))
    }

    /// Withdraws a run request nobody took.
    #[crate::compiled_once]
    pub async fn withdraw_script_run(&self, name: &str) -> Result<(), SolutionError> {
        on_backend!(self, withdraw_script_run(name))
    }

    /// Every script, by name; a file is read on a blocking thread (the runner asks every second).
    #[crate::compiled_once]
    pub async fn scripts(&self) -> Result<Vec<StoredScript>, SolutionError> {
        match &self.backend {
            Backend::File(db) => on_file_thread(db, "reading the scripts", |db| db.scripts()).await,
            Backend::Postgres(pg) => pg.scripts().await,
        }
    }

    /// Takes the waiting run requests (gone once taken), oldest first.
    #[crate::compiled_once]
    pub async fn take_script_run_requests(&self) -> Result<Vec<String>, SolutionError> {
        match &self.backend {
            Backend::File(db) => {
                on_file_thread(db, "taking the run requests", |db| db.take_script_run_requests()).await
            }
            Backend::Postgres(pg) => pg.take_script_run_requests().await,
        }
    }

    /// Adds runs and skipped triggers to the scripts' records.
    #[crate::compiled_once]
    pub async fn record_script_runs(&self, tallies: Vec<(String, ScriptTally)>) -> Result<(), SolutionError> {
        match &self.backend {
            Backend::File(db) => {
                on_file_thread(db, "recording script runs", move |db| {
                    db.record_script_runs(&tallies)
                })
                .await
            }
            Backend::Postgres(pg) => pg.record_script_runs(&tallies).await,
        }
    }

    /// Replaces the plant with `model` and its `documents` (as
    /// [`plant_model::read_documents`] read them) in one transaction; with `dry_run` nothing is
    /// kept.
    #[crate::compiled_once]
    pub async fn import_plant(
        &self,
        model: &PlantModel,
        documents: &[PlantDocument],
        source: &str,
        dry_run: bool,
    ) -> Result<PlantChanges, SolutionError> {
        on_backend!(self, import_plant(model, documents, source, dry_run))
    }

    /// Deletes the recorded history of a tag no longer in the plant.
    #[crate::compiled_once]
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
