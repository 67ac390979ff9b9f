//! The store: one solution behind one interface, [`Store`], kept in a SQLite file or in a
//! PostgreSQL database that several tserver nodes share.
//!
//! It holds everything a solution keeps: settings, users, secrets, API tokens, the plant's
//! definitions, scripts and their runs, tag and alarm history, the audit trail, sources'
//! reports, and, on a shared database, leadership, login failures and acknowledgements that
//! every node sees. Schemas and migrations live beside the code that reads them.
//!
//! Invariants:
//! - every SQL statement of the project lives in this crate, and no other crate depends on a
//!   SQL driver;
//! - the backend is private: callers hold a [`Store`] and never match on what it is; an
//!   operation one backend has no use for is answered trivially by it (a file's one server
//!   always leads, a database is never a file that can be lost);
//! - the crate knows nothing of sockets, protobuf or the live plant: it speaks
//!   `plant_model`'s vocabulary and the settings types of `solution_settings`, not the Local
//!   AI paths that use them.
//!
//! A file's server keeps a few read connections in a pool and asks for `SolutionSettings` at
//! every call, so an admin change (made by another process on the same file, in WAL mode) is
//! seen by the next call without a restart; the row read last serves for as long as the
//! WAL-index says nothing was committed since (`wal_index.rs`). A serving node on PostgreSQL
//! keeps the row under a lease that every writer revokes before its change commits
//! (`postgres/settings_lease.rs`).

/// Boxes a public `async fn`'s future, so its body, and every future it awaits, compiles once,
/// here, rather than again in each crate that awaits it: rustc builds an `async fn`'s body where
/// its future is polled, so unboxed, a leaf crate compiled the whole async tree beneath it
/// (docs/DECISIONS.md, "Futures boxed at crate boundaries").
pub(crate) use async_recursion::async_recursion as compiled_once;

mod admin;
mod audit;
pub mod audit_chain;
mod browser_sessions;
mod demo;
mod documents;
mod guard;
mod history;
mod location;
mod login_throttle;
mod plant;
mod postgres;
mod row_table;
mod scripts;
mod secrets;
mod source_reports;
mod store;
#[cfg(any(test, feature = "test-database"))]
pub mod test_database;
mod tokens;
mod wal_index;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use guard::FileIdentity;
use wal_index::{HeaderBytes, WalIndexHeader};

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior};
use solution_settings::SettingsRow;

pub use admin::{RuntimeKey, RuntimeSettings, SettingKey, SettingValue, hash_password, parse_bool};
pub use audit::{AuditAction, AuditEntry, AuditLog, MAX_AUDIT_TEXT_CHARS, cut_for_audit};
pub use browser_sessions::{BrowserLogin, BrowserLoginRules};
pub use guard::{ServeLock, lock_path};
pub use history::{
    AlarmHistoryPage, AlarmRecord, HistoryCursor, HistoryDataError, HistoryInterval, HistoryLimits,
    HistoryPage, HistorySample, HistoryStats, KeptHandling, MAX_HISTORY_INTERVALS, MAX_INTERVAL_STATES,
    PendingSample, RawHistoryPage, interval_count,
};
pub use location::SolutionLocation;
pub use login_throttle::LoginThrottleConfig;
pub use plant::{Changes, PlantChanges, PlantNotifications};
pub use postgres::{CopyReport, Leadership, PG_SCHEMA_VERSION, PostgresUrl, SCRIPTS_LEADER, copy_solution};
pub use row_table::{RowTable, file_bytes};
pub use scripts::{ScriptRecord, ScriptRun, ScriptTally, StoredScript};
pub use secrets::{KEY_ENV, create_key_at, key_file};
pub use source_reports::SourceReport;
pub use store::{SolutionAtStart, Store};
pub use tokens::{ApiToken, TOKEN_PREFIX, TokenRefusal, TokenUser};

/// The schema version this build reads and writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 17;

/// The migrations, in order: entry `i` takes a file from version `i` to version `i + 1`.
/// A new file runs them all; an older file runs the ones it lacks when it opens.
const MIGRATIONS: [&str; 17] = [
    include_str!("schema.sql"),
    include_str!("schema_v2.sql"),
    include_str!("schema_v3.sql"),
    include_str!("schema_v4.sql"),
    include_str!("schema_v5.sql"),
    include_str!("schema_v6.sql"),
    include_str!("schema_v7.sql"),
    include_str!("schema_v8.sql"),
    include_str!("schema_v9.sql"),
    include_str!("schema_v10.sql"),
    include_str!("schema_v11.sql"),
    include_str!("schema_v12.sql"),
    include_str!("schema_v13.sql"),
    include_str!("schema_v14.sql"),
    include_str!("schema_v15.sql"),
    include_str!("schema_v16.sql"),
    include_str!("schema_v17.sql"),
];

/// A time as stored: whole milliseconds since the Unix epoch.
fn millis(time: std::time::SystemTime) -> i64 {
    i64::try_from(
        time.duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis(),
    )
    .unwrap_or(i64::MAX)
}

/// A stored time back.
fn time_of(millis: i64) -> std::time::SystemTime {
    std::time::UNIX_EPOCH + Duration::from_millis(u64::try_from(millis).unwrap_or(0))
}

/// How long a statement waits for another writer (an admin command, the server) to finish.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Read connections kept open for reuse; more are opened under load and closed after.
const POOLED_READERS: usize = 8;

/// Why a solution operation failed.
#[derive(Debug, thiserror::Error)]
pub enum SolutionError {
    /// No solution file at the path.
    #[error("no solution file at {0}")]
    NotFound(PathBuf),
    /// `init` refuses to overwrite.
    #[error("{0} already exists; choose another path or remove it first")]
    AlreadyExists(PathBuf),
    /// The file is a SQLite database of a newer schema version or of another program.
    #[error("{path} has schema version {found}; this build reads versions 1 to {SCHEMA_VERSION}")]
    SchemaVersion {
        /// The file.
        path: PathBuf,
        /// Its `user_version`.
        found: i64,
    },
    /// SQLite failed.
    #[error("solution database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// Stored history that cannot be read (a block this build did not write, or damaged).
    #[error("stored history cannot be read: {0}")]
    HistoryData(#[from] HistoryDataError),
    /// A user of that name exists already.
    #[error("user {0:?} already exists")]
    UserExists(String),
    /// No user of that name.
    #[error("no user named {0:?}")]
    UnknownUser(String),
    /// A user name that cannot be used.
    #[error("invalid user name {0:?}: use 1 to 64 visible characters without spaces")]
    InvalidUserName(String),
    /// A settings key no column or ModelSettings key matches.
    #[error("unknown settings key {0:?}")]
    UnknownKey(String),
    /// A settings value that does not fit its column.
    #[error("invalid value for {key}: {reason}")]
    InvalidValue {
        /// The key being set.
        key: String,
        /// Why the value does not fit.
        reason: String,
    },
    /// An API token request that cannot be carried out (a bad label, no such token).
    #[error("{0}")]
    Token(String),
    /// A script request that cannot be carried out (a bad name, no such script, a source that
    /// does not compile).
    #[error("{0}")]
    Script(String),
    /// A `ModelSettings` change whose values would not be used as given (fallen back or
    /// clamped) or would fail every call.
    #[error("refused, nothing changed: {0}")]
    RefusedSettings(String),
    /// `ModelSettings` cannot be edited key by key.
    #[error(transparent)]
    SettingsEdit(#[from] solution_settings::SettingsEditError),
    /// Password hashing failed.
    #[error("password hashing failed: {0}")]
    PasswordHash(String),
    /// The secrets key is missing or unusable, or a secret does not decrypt.
    #[error("secrets: {0}")]
    SecretsKey(String),
    /// No secret of that name.
    #[error("no secret named {0:?}")]
    UnknownSecret(String),
    /// A secret name that cannot be used in a `/secret:<Name>` token.
    #[error("invalid secret name {0:?}: use 1 to 128 letters, digits, '_', '-' or '.'")]
    InvalidSecretName(String),
    /// Another `tserver serve` holds the solution.
    #[error("{path} is already being served by {holder}; stop that server first (admin commands work beside it)", path = path.display())]
    AlreadyServed {
        /// The solution file.
        path: PathBuf,
        /// Who holds it, as its lock file says.
        holder: String,
    },
    /// The lock file could not be opened or written.
    #[error("cannot use the lock file {}: {source}", path.display())]
    LockFile {
        /// The lock file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The solution file was removed or replaced while serving: nothing more is written to it.
    #[error("{0}; nothing more is written to it (restart tserver on the file now at that path)")]
    FileLost(String),
    /// A thread the solution needs (the audit writer) could not start.
    #[error("cannot start the {what} thread: {source}")]
    Thread {
        /// Which thread.
        what: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// A stored tag definition is invalid.
    #[error("tag {name:?} is invalid: {reason}")]
    InvalidTag {
        /// The tag.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A solution location that cannot be used (a malformed `postgres://` URL).
    #[error("solution location {location}: {reason}")]
    Location {
        /// The location, its password replaced by `***`.
        location: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Work on a blocking thread ended before it finished (the runtime is shutting down).
    #[error("{0} stopped before it finished")]
    Interrupted(&'static str),
    /// The PostgreSQL store failed (unreachable, refused, a statement failed).
    #[error("solution store (PostgreSQL at {location}): {reason}")]
    Postgres {
        /// The location, its password replaced by `***`.
        location: String,
        /// The driver's error (never carries the password).
        reason: String,
    },
    /// Other nodes appended to the audit trail before each attempt of an append.
    #[error(
        "solution store (PostgreSQL at {location}): other nodes appended to the audit trail first {attempts} times in a row; nothing of this append was recorded"
    )]
    AuditContended {
        /// The location, its password replaced by `***`.
        location: String,
        /// The attempts made.
        attempts: usize,
    },
    /// The PostgreSQL database holds a newer schema, or another program's `SchemaVersion`.
    #[error(
        "solution store (PostgreSQL at {location}) has schema version {found}; this build reads versions up to {} (or an empty database)",
        postgres::PG_SCHEMA_VERSION
    )]
    PgSchemaVersion {
        /// The location, its password replaced by `***`.
        location: String,
        /// The version found.
        found: i64,
    },
}

/// What a user may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Reads tags, alarms and history, and chats.
    Viewer,
    /// Also writes writable tags and acknowledges alarms.
    Operator,
    /// Also whatever admin calls the wire offers.
    Admin,
}

impl Role {
    /// Every role, least powerful first.
    pub const ALL: [Self; 3] = [Self::Viewer, Self::Operator, Self::Admin];

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Viewer => "viewer",
            Self::Operator => "operator",
            Self::Admin => "admin",
        }
    }

    /// Reads a stored or typed name.
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|role| role.as_str().eq_ignore_ascii_case(text.trim()))
    }

    /// Whether it may write tags and acknowledge alarms.
    pub fn can_operate(self) -> bool {
        matches!(self, Self::Operator | Self::Admin)
    }
}

/// A user as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserRecord {
    /// The name as stored (logins match it case-insensitively).
    pub name: String,
    /// The argon2 PHC hash, or `None` for a passwordless user.
    pub password_hash: Option<String>,
    /// What the user may do.
    pub role: Role,
}

/// What [`Store::check_password`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PasswordCheck {
    /// The password is the user's.
    Right {
        /// The user's name as stored.
        name: String,
        /// What the user may do.
        role: Role,
    },
    /// It is not.
    Wrong,
    /// The user has no password (a demo's `guest`): nothing to check against.
    NoPassword,
    /// No user of that name.
    UnknownUser,
}

/// A stored role name as a role; the column's CHECK admits no other, so anything else is read
/// as the least powerful.
pub(crate) fn role_of_stored(name: &str) -> Role {
    Role::parse(name).unwrap_or(Role::Viewer)
}

/// An open solution file.
#[derive(Debug)]
pub(crate) struct SolutionDb {
    path: PathBuf,
    readers: Mutex<Vec<Connection>>,
    /// The file the path named when it opened (`None` if that could not be read).
    identity: Option<FileIdentity>,
    /// Set once the path no longer names that file: why.
    lost: OnceLock<String>,
    /// The file's WAL-index, which says whether anything was committed since a moment.
    wal_index: Option<WalIndexHeader>,
    /// The settings row read last, and the WAL-index header seen just before it was read.
    settings: Mutex<Option<(HeaderBytes, SettingsRow)>>,
    /// How many times the settings row was read from the file (not from `settings`).
    settings_reads: AtomicU64,
    /// The history's one writer connection, opened on its first append and kept; also
    /// serializes appends.
    history_writer: Mutex<Option<history::sqlite::HistoryWriter>>,
    /// The audit's one writer connection, opened on its first commit and kept; also
    /// serializes the audit's commits and prunes.
    audit_writer: Mutex<Option<Connection>>,
}

impl SolutionDb {
    /// Creates a new solution file (WAL mode) with the spec's default settings, optionally
    /// with the demo plant and a passwordless `guest` user.
    pub(crate) fn create(path: &Path, with_demo: bool) -> Result<(), SolutionError> {
        if path.exists() {
            return Err(SolutionError::AlreadyExists(path.to_owned()));
        }
        let mut connection = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE,
        )?;
        connection.pragma_update(None, "journal_mode", "WAL")?;
        let transaction = connection.transaction()?;
        for migration in MIGRATIONS {
            transaction.execute_batch(migration)?;
        }
        history::sqlite::fold_legacy_rows(&transaction)?;
        if with_demo {
            demo::populate(&transaction)?;
        }
        transaction.commit()?;
        secrets::create_key_file(path)?;
        Ok(())
    }

    /// Opens an existing solution file, upgrading an older schema version in one transaction
    /// (a file of a newer version, or not a solution at all, is refused untouched).
    pub(crate) fn open(path: &Path) -> Result<Self, SolutionError> {
        let mut connection = open_connection(path)?;
        let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let found: i64 = transaction.pragma_query_value(None, "user_version", |row| row.get(0))?;
        let known = usize::try_from(found)
            .ok()
            .filter(|version| (1..=MIGRATIONS.len()).contains(version));
        let Some(version) = known else {
            return Err(SolutionError::SchemaVersion {
                path: path.to_owned(),
                found,
            });
        };
        for migration in &MIGRATIONS[version..] {
            transaction.execute_batch(migration)?;
        }
        history::sqlite::fold_legacy_rows(&transaction)?;
        transaction.commit()?;
        // Opened after the transaction above, which made the WAL-index of a WAL file, and
        // named after the database as SQLite resolved it (a symbolic link followed), as
        // SQLite names it.
        let wal_index = connection
            .path()
            .and_then(|resolved| WalIndexHeader::open(Path::new(resolved)));
        Ok(Self {
            path: path.to_owned(),
            readers: Mutex::new(vec![connection]),
            identity: FileIdentity::of(path).ok(),
            lost: OnceLock::new(),
            wal_index,
            settings: Mutex::new(None),
            settings_reads: AtomicU64::new(0),
            history_writer: Mutex::new(None),
            audit_writer: Mutex::new(None),
        })
    }

    /// Checks that the path still names the file opened; the first time it does not, the
    /// solution is marked lost and the reason returned (later calls return `None`). A lost
    /// solution refuses every write, so nothing goes into a file that will vanish.
    pub(crate) fn check_file(&self) -> Option<&str> {
        if self.lost.get().is_some() {
            return None;
        }
        let reason = self.identity?.lost_at(&self.path)?;
        self.lost.set(reason).ok()?;
        self.lost.get().map(String::as_str)
    }

    /// Why the solution file was lost, if it was (see [`check_file`](Self::check_file)).
    pub(crate) fn lost(&self) -> Option<&str> {
        self.lost.get().map(String::as_str)
    }

    /// The file this solution lives in.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `read` on a pooled connection. Reads are short (a prepared point query), so they
    /// run inline on the caller's thread rather than hopping to a blocking pool.
    pub(crate) fn read<T>(
        &self,
        read: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, SolutionError> {
        let pooled = self.readers.lock().map(|mut pool| pool.pop()).unwrap_or(None);
        let connection = match pooled {
            Some(connection) => connection,
            None => {
                // The path may name another file now: only connections to the lost one serve.
                self.refuse_if_lost()?;
                open_connection(&self.path)?
            }
        };
        let result = read(&connection);
        if let Ok(mut pool) = self.readers.lock()
            && pool.len() < POOLED_READERS
        {
            pool.push(connection);
        }
        Ok(result?)
    }

    /// A connection for a write; admin writes are rare, so each gets its own. Refused once
    /// the file was lost.
    pub(crate) fn writer(&self) -> Result<Connection, SolutionError> {
        self.refuse_if_lost()?;
        open_connection(&self.path)
    }

    /// `FileLost` once the solution file was removed or replaced under this process.
    pub(crate) fn refuse_if_lost(&self) -> Result<(), SolutionError> {
        match self.lost() {
            Some(reason) => Err(SolutionError::FileLost(reason.to_owned())),
            None => Ok(()),
        }
    }

    /// The `SolutionSettings` row as it is now: the row read last while the WAL-index says
    /// nothing was committed since, read afresh otherwise.
    pub(crate) fn settings_row(&self) -> Result<SettingsRow, SolutionError> {
        // Seen before the read: a commit landing meanwhile changes the header, so the row kept
        // is never trusted past a commit it might not show.
        let seen = self.wal_index.as_ref().and_then(WalIndexHeader::read);
        if let Some(seen) = &seen
            && let Ok(kept) = self.settings.lock()
            && let Some((header, row)) = &*kept
            && header == seen
        {
            return Ok(row.clone());
        }
        let row = self.read_settings_row()?;
        if let Some(seen) = seen
            && let Ok(mut kept) = self.settings.lock()
        {
            *kept = Some((seen, row.clone()));
        }
        Ok(row)
    }

    /// How many times [`settings_row`](Self::settings_row) read the file.
    #[cfg(test)]
    fn settings_reads(&self) -> u64 {
        self.settings_reads.load(Ordering::Relaxed)
    }

    fn read_settings_row(&self) -> Result<SettingsRow, SolutionError> {
        self.settings_reads.fetch_add(1, Ordering::Relaxed);
        self.read(|connection| {
            connection
                .prepare_cached(
                    "SELECT ModelEnabled, ModelSettings, ModelOptions FROM SolutionSettings LIMIT 1",
                )?
                .query_row([], |row| {
                    Ok(SettingsRow {
                        model_enabled: row.get::<_, i64>(0)? != 0,
                        model_settings: row.get(1)?,
                        model_options: row.get(2)?,
                    })
                })
        })
    }

    /// The user of that name (matched case-insensitively), if any.
    pub(crate) fn user(&self, name: &str) -> Result<Option<UserRecord>, SolutionError> {
        self.read(|connection| {
            connection
                .prepare_cached("SELECT Name, PasswordHash, Role FROM Users WHERE Name = ?1")?
                .query_row([name], |row| {
                    Ok(UserRecord {
                        name: row.get(0)?,
                        password_hash: row.get(1)?,
                        role: role_of_stored(&row.get::<_, String>(2)?),
                    })
                })
                .optional()
        })
    }
}

/// Opens one connection with the settings every connection needs.
fn open_connection(path: &Path) -> Result<Connection, SolutionError> {
    if !path.exists() {
        return Err(SolutionError::NotFound(path.to_owned()));
    }
    let connection = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    connection.busy_timeout(BUSY_TIMEOUT)?;
    Ok(connection)
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    fn file_at_version(dir: &Path, migrations: usize, user_version: Option<i64>) -> PathBuf {
        let path = dir.join(format!("v{migrations}-{user_version:?}.db"));
        let connection = Connection::open(&path).expect("creates");
        for migration in &MIGRATIONS[..migrations] {
            connection.execute_batch(migration).expect("migrates");
        }
        if let Some(version) = user_version {
            connection
                .pragma_update(None, "user_version", version)
                .expect("sets the version");
        }
        path
    }

    /// Sets `ModelOptions` through a connection of its own, as another process would.
    fn set_options_elsewhere(path: &Path, options: i64) {
        Connection::open(path)
            .expect("opens")
            .execute("UPDATE SolutionSettings SET ModelOptions = ?1", [options])
            .expect("updates");
    }

    /// `.cargo/config.toml` builds the bundled SQLite without the modules no solution uses, and
    /// as every connection needs it, safe to share between threads.
    #[test]
    fn sqlite_is_built_without_the_modules_no_solution_uses() {
        let connection = Connection::open_in_memory().expect("opens");
        let options: Vec<String> = connection
            .prepare("PRAGMA compile_options")
            .and_then(|mut statement| {
                statement
                    .query_map([], |row| row.get(0))?
                    .collect::<Result<_, _>>()
            })
            .expect("reads the compile options");
        for left_out in [
            "ENABLE_FTS3",
            "ENABLE_FTS5",
            "ENABLE_RTREE",
            "ENABLE_DBSTAT_VTAB",
            "SOUNDEX",
        ] {
            assert!(
                !options.iter().any(|option| option == left_out),
                "{left_out} is compiled in: {options:?}"
            );
        }
        assert!(
            options.iter().any(|option| option == "THREADSAFE=1"),
            "{options:?}"
        );
        let fts5 = connection.execute_batch("CREATE VIRTUAL TABLE words USING fts5(text)");
        assert!(fts5.is_err(), "fts5 is available");
    }

    #[test]
    fn the_settings_row_is_kept_until_anything_is_committed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("wal.db");
        SolutionDb::create(&path, false).expect("creates");
        let db = SolutionDb::open(&path).expect("opens");
        for _ in 0..50 {
            assert_eq!(db.settings_row().expect("reads").model_options, 0);
        }
        assert_eq!(
            db.settings_reads(),
            1,
            "nothing committed: the row read once serves"
        );

        set_options_elsewhere(&path, 7);
        assert_eq!(db.settings_row().expect("reads").model_options, 7);
        assert_eq!(db.settings_row().expect("reads").model_options, 7);
        assert_eq!(db.settings_reads(), 2);

        // A commit to another table says nothing of the row, but is a commit: read again.
        Connection::open(&path)
            .expect("opens")
            .execute("INSERT INTO Users (Name) VALUES ('ann')", [])
            .expect("inserts");
        assert_eq!(db.settings_row().expect("reads").model_options, 7);
        assert_eq!(db.settings_reads(), 3);

        // The WAL checkpointed and restarted (new salts, frames from 0): still seen.
        let other = Connection::open(&path).expect("opens");
        let _: i64 = other
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| row.get(0))
            .expect("checkpoints");
        set_options_elsewhere(&path, 7);
        set_options_elsewhere(&path, 9);
        assert_eq!(db.settings_row().expect("reads").model_options, 9);

        // This process's own writes are commits like any other.
        db.set_setting(&SettingKey::parse("ModelOptions").expect("a key"), "0x3")
            .expect("writes");
        assert_eq!(db.settings_row().expect("reads").model_options, 3);
    }

    #[cfg(unix)]
    #[test]
    fn a_file_opened_through_a_symbolic_link_watches_the_wal_index_sqlite_uses() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("real.db");
        SolutionDb::create(&path, false).expect("creates");
        let link = dir.path().join("link.db");
        std::os::unix::fs::symlink(&path, &link).expect("links");
        // A stale WAL-index beside the link (initialized, its copies agreeing), which SQLite
        // never uses: were it read, nothing would ever seem committed.
        let mut stale = [0_u8; 96];
        stale[12] = 1;
        stale[60] = 1;
        std::fs::write(dir.path().join("link.db-shm"), stale).expect("writes");
        let db = SolutionDb::open(&link).expect("opens");
        assert_eq!(db.settings_row().expect("reads").model_options, 0);
        set_options_elsewhere(&link, 4);
        assert_eq!(db.settings_row().expect("reads").model_options, 4);
        assert_eq!(db.settings_row().expect("reads").model_options, 4);
        assert_eq!(db.settings_reads(), 2, "the real WAL-index is watched");
    }

    #[test]
    fn a_file_without_a_wal_index_is_read_at_every_call() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = file_at_version(dir.path(), MIGRATIONS.len(), None);
        let db = SolutionDb::open(&path).expect("opens");
        assert!(db.wal_index.is_none(), "a rollback-journal file has no WAL-index");
        assert_eq!(db.settings_row().expect("reads").model_options, 0);
        set_options_elsewhere(&path, 5);
        assert_eq!(db.settings_row().expect("reads").model_options, 5);
        assert_eq!(db.settings_reads(), 2);
    }

    #[test]
    fn history_past_its_byte_bound_loses_its_oldest_blocks_first() {
        use plant_model::{Quality, TagType, TagValue};
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("bound.db");
        SolutionDb::create(&path, false).expect("creates");
        let db = SolutionDb::open(&path).expect("opens");
        let tag: std::sync::Arc<str> = std::sync::Arc::from("Noisy");
        let start = 1_800_000_000_000_i64;
        // Forty blocks of readings without a pattern, so each block's data is about as large.
        let samples: Vec<PendingSample> = (0..40 * 1024_i64)
            .map(|second| PendingSample {
                tag: std::sync::Arc::clone(&tag),
                time: history::from_unix_millis(start + second * 1000),
                value: TagValue::Number((second.wrapping_mul(2_654_435_761) % 1_000_003) as f64 / 7.0),
                quality: Quality::GOOD,
            })
            .collect();
        db.write_history(&samples, &[], &HistoryLimits::NONE)
            .expect("journals");
        db.checkpoint_history(&HistoryLimits::NONE).expect("folds");
        let held = |db: &SolutionDb| -> i64 {
            db.read(|connection| connection.query_row(history::HISTORY_BYTES, [], |row| row.get(0)))
                .expect("sums")
        };
        let before = held(&db);
        let bound = u64::try_from(before / 2).expect("positive");
        db.checkpoint_history(&HistoryLimits {
            keep_after: UNIX_EPOCH,
            max_bytes: Some(bound),
            own: Vec::new(),
        })
        .expect("prunes");
        let after = u64::try_from(held(&db)).expect("positive");
        assert!(after <= bound, "{after} bytes kept past the bound {bound}");
        assert!(
            after * 10 >= bound * 9,
            "only what was past the bound goes: {after} of {bound}"
        );
        let page = db
            .tag_history("Noisy", TagType::Number, (i64::MIN, i64::MAX), usize::MAX)
            .expect("reads");
        let times: Vec<i64> = page
            .samples
            .iter()
            .map(|sample| history::unix_millis(sample.time))
            .collect();
        assert_eq!(
            times.last(),
            Some(&(start + (40 * 1024 - 1) * 1000)),
            "the newest is kept"
        );
        assert!(
            times.first().is_some_and(|first| *first > start),
            "the oldest went first"
        );
        assert!(
            times.windows(2).all(|pair| pair[1] - pair[0] == 1000),
            "what is kept has no holes"
        );
    }

    #[test]
    fn history_rows_of_an_older_file_are_kept_in_blocks_when_it_opens() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = file_at_version(dir.path(), 11, Some(11));
        let rows: Vec<(&str, i64, rusqlite::types::Value, i64)> = (0..2_500)
            .map(|second| {
                let value = rusqlite::types::Value::Real((second % 97) as f64 / 10.0);
                ("Legacy.Level", 1_800_000_000_000 + second * 1000, value, 192)
            })
            .chain((0..40).map(|step| {
                (
                    "Legacy.Mode",
                    1_800_000_000_000 + step * 60_000,
                    rusqlite::types::Value::Text(format!("m{}", step % 3)),
                    0,
                )
            }))
            .collect();
        {
            let connection = Connection::open(&path).expect("opens");
            for (tag, time, value, quality) in &rows {
                connection
                    .execute(
                        "INSERT INTO TagHistory (Tag, Time, Value, Quality) VALUES (?1, ?2, ?3, ?4)",
                        rusqlite::params![tag, time, value, quality],
                    )
                    .expect("inserts");
            }
        }
        let db = SolutionDb::open(&path).expect("opens and upgrades");
        let legacy: i64 = db
            .read(|connection| {
                connection.query_row(
                    "SELECT COUNT(*) FROM sqlite_master WHERE name = 'TagHistory'",
                    [],
                    |row| row.get(0),
                )
            })
            .expect("reads");
        assert_eq!(legacy, 0, "the row table is dropped once folded");
        for (tag, kind) in [
            ("Legacy.Level", plant_model::TagType::Number),
            ("Legacy.Mode", plant_model::TagType::String),
        ] {
            let page = db
                .tag_history(tag, kind, (i64::MIN, i64::MAX), usize::MAX)
                .expect("reads");
            let expected: Vec<(i64, String, u8)> = rows
                .iter()
                .filter(|row| row.0 == tag)
                .map(|(_, time, value, quality)| {
                    let value = match value {
                        rusqlite::types::Value::Real(number) => {
                            plant_model::TagValue::Number(*number).to_json().to_string()
                        }
                        rusqlite::types::Value::Text(text) => text.clone(),
                        other => format!("{other:?}"),
                    };
                    (*time, value, u8::try_from(*quality).expect("a quality"))
                })
                .collect();
            let kept: Vec<(i64, String, u8)> = page
                .samples
                .iter()
                .map(|sample| {
                    (
                        history::unix_millis(sample.time),
                        match &sample.value {
                            plant_model::TagValue::Text(text) => text.to_string(),
                            value => value.to_json().to_string(),
                        },
                        sample.quality.0,
                    )
                })
                .collect();
            assert_eq!(kept, expected, "{tag}");
        }
    }

    #[test]
    fn a_version_1_file_is_upgraded_when_it_opens() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = file_at_version(dir.path(), 1, None);
        let db = SolutionDb::open(&path).expect("opens and upgrades");
        let (version, alarm_tables): (i64, i64) = db
            .read(|connection| {
                Ok((
                    connection.pragma_query_value(None, "user_version", |row| row.get(0))?,
                    connection.query_row(
                        "SELECT COUNT(*) FROM sqlite_master WHERE name IN ('AlarmDefinitions', 'HistoryBlocks')",
                        [],
                        |row| row.get(0),
                    )?,
                ))
            })
            .expect("reads");
        assert_eq!((version, alarm_tables), (SCHEMA_VERSION, 2));
        assert_eq!(
            db.runtime_settings().expect("defaults"),
            RuntimeSettings::default()
        );
        drop(db);
        SolutionDb::open(&path).expect("opens again without migrating twice");
    }

    #[test]
    fn alarms_of_a_version_8_file_keep_their_definition_and_gain_no_response() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = file_at_version(dir.path(), 8, None);
        let connection = Connection::open(&path).expect("opens");
        connection
            .execute_batch(
                "INSERT INTO Tags (Name, Path, Type) VALUES ('T', 'P/T', 'number');
                 INSERT INTO AlarmDefinitions (Name, Tag, Condition, LimitValue, Priority, Message)
                 VALUES ('T.Hi', 'T', 'Hi', 80, 700, 'T high');",
            )
            .expect("a plant of schema 8");
        drop(connection);
        let db = SolutionDb::open(&path).expect("opens and upgrades");
        let alarms = db.plant_definitions().expect("reads").alarms;
        let alarm = &alarms[0];
        assert_eq!(
            (
                alarm.name.as_str(),
                alarm.limit,
                alarm.priority,
                alarm.message.as_str()
            ),
            ("T.Hi", Some(80.0), 700, "T high")
        );
        assert_eq!(
            (
                alarm.cause.as_str(),
                alarm.consequence.as_str(),
                alarm.response.as_str(),
                alarm.time_to_respond
            ),
            ("", "", "", None)
        );
    }

    #[test]
    fn every_kind_of_alarm_event_is_recorded_and_read_back() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("events.db");
        SolutionDb::create(&path, false).expect("creates");
        let db = SolutionDb::open(&path).expect("opens");
        let start = 1_800_000_000_000;
        let events = history::one_event_of_each_kind(start);
        db.write_history(&[], &events, &HistoryLimits::NONE)
            .expect("records every kind");
        let page = db.alarm_history(None, (start, start + 1000), 100).expect("reads");
        let mut read: Vec<_> = page.events.iter().map(|event| event.kind).collect();
        read.reverse();
        assert_eq!(read, plant_model::AlarmEventKind::ALL);
    }

    #[test]
    fn an_imported_alarm_response_is_stored_and_read_back() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("plant.db");
        SolutionDb::create(&path, false).expect("creates");
        let db = SolutionDb::open(&path).expect("opens");
        let text = r#"
[[tags]]
name = "T"
path = "P/T"
type = "number"

[[alarms]]
name = "T.Hi"
tag = "T"
condition = "Hi"
limit = 80
cause = "Inlet left open"
consequence = "Spill"
response = "Close the inlet"
time_to_respond = 604800
signed = true
on_delay = 30
off_delay = 60
suppress_when = "T < 0 or not (T >= 1)"
"#;
        let model = plant_model::read(text, plant_model::Format::Toml, "t.toml").expect("valid");
        db.import_plant(&model, &[], "t.toml", false).expect("imports");
        let stored = db.plant_definitions().expect("reads");
        assert_eq!(stored.alarms, model.expand().alarms);
        assert_eq!(stored.alarms[0].time_to_respond, Some(604_800));
        assert!(stored.alarms[0].signed, "an alarm acknowledged with a signature");
        assert_eq!((stored.alarms[0].on_delay, stored.alarms[0].off_delay), (30, 60));
        assert_eq!(
            stored.alarms[0]
                .suppress_when
                .as_ref()
                .map(ToString::to_string)
                .as_deref(),
            Some("T < 0 or not T >= 1")
        );
        assert_eq!(db.plant_model().expect("reads"), model);
    }

    #[test]
    fn a_tags_display_mark_is_stored_and_read_back() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("plant.db");
        SolutionDb::create(&path, false).expect("creates");
        let db = SolutionDb::open(&path).expect("opens");
        let text = r#"
[[tags]]
name = "T"
path = "P/T"
type = "number"
display = { key = true, order = 3, normal_range = [10, 20] }

[[tags]]
name = "Run"
path = "P/Run"
type = "bool"
display = { states = ["Idle", "Busy"], normal_state = false }

[[tags]]
name = "Plain"
path = "P/Plain"
type = "number"
"#;
        let model = plant_model::read(text, plant_model::Format::Toml, "t.toml").expect("valid");
        db.import_plant(&model, &[], "t.toml", false).expect("imports");
        let stored = db.plant_definitions().expect("reads");
        let marks: Vec<_> = stored
            .tags
            .iter()
            .map(|tag| (tag.name.as_str(), tag.display.clone()))
            .collect();
        let wanted: Vec<_> = model
            .tags
            .iter()
            .map(|tag| (tag.name.as_str(), tag.display.clone()))
            .collect();
        assert_eq!(marks.len(), 3);
        for mark in &wanted {
            assert!(marks.contains(mark), "{mark:?} is read back");
        }
    }

    #[test]
    fn the_sources_the_tags_they_feed_and_the_equipment_are_read_without_the_rest() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("plant.db");
        SolutionDb::create(&path, false).expect("creates");
        let db = SolutionDb::open(&path).expect("opens");
        let never_imported = db.plant_sources().expect("reads");
        assert!(never_imported.sources.is_empty() && never_imported.tags.is_empty());
        assert!(db.plant_equipment().expect("reads").is_empty());
        let model =
            plant_model::read(plant::PLANT_WITH_SOURCES, plant_model::Format::Toml, "t.toml").expect("valid");
        db.import_plant(&model, &[], "t.toml", false).expect("imports");
        plant::assert_sources_read(&db.plant_sources().expect("reads"), &model);
        assert_eq!(db.plant_equipment().expect("reads"), model.equipment);
    }

    #[test]
    fn users_of_an_older_file_become_viewers() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = file_at_version(dir.path(), 2, None);
        Connection::open(&path)
            .expect("opens")
            .execute(
                "INSERT INTO Users (Name, PasswordHash) VALUES ('shift', NULL)",
                [],
            )
            .expect("a user of schema 2");
        let db = SolutionDb::open(&path).expect("opens and upgrades");
        let user = db.user("shift").expect("reads").expect("kept");
        assert_eq!(user.role, Role::Viewer, "an upgrade gives nobody new powers");
    }

    #[test]
    fn newer_or_foreign_files_are_refused_untouched() {
        let dir = tempfile::tempdir().expect("temp dir");
        for path in [
            file_at_version(dir.path(), MIGRATIONS.len(), Some(SCHEMA_VERSION + 1)),
            file_at_version(dir.path(), 0, None),
        ] {
            let error = SolutionDb::open(&path).expect_err("refused");
            assert!(matches!(error, SolutionError::SchemaVersion { .. }), "{error}");
        }
    }
}
