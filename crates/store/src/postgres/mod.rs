//! A solution in PostgreSQL, for several tserver nodes sharing one: the location (a
//! `postgres://` URL whose password never reaches a log or an error), the connection pool, and
//! the schema, created and upgraded under a transaction-scoped advisory lock so nodes and admin
//! commands starting together migrate exactly once.
//!
//! The tables mean what a SQLite solution's mean (`schema_v1.sql` says where they differ). The
//! SQL of this backend lives here and in its submodules; SQLite's in the crate's other modules.

use std::sync::Arc;
use std::time::Duration;

use solution_settings::SettingsRow;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{ConnectOptions, Row};

use super::{Role, SolutionError, UserRecord, role_of_stored};

mod admin;
mod audit;
mod browser_sessions;
mod copy;
#[cfg(test)]
mod database_tests;
mod history;
mod history_blocks;
mod leadership;
#[cfg(test)]
mod lease_tests;
mod login_failures;
mod plant;
mod scripts;
mod settings_lease;
mod settings_reads;
mod sources;
mod tokens;

pub use copy::{CopyReport, copy_solution};
pub use leadership::{Leadership, SCRIPTS_LEADER};

/// The schema version this build reads and writes (`SchemaVersion.Version`).
pub const PG_SCHEMA_VERSION: i64 = 15;

/// The migrations, in order: entry `i` takes a database from version `i` to `i + 1`.
const MIGRATIONS: [&str; 15] = [
    include_str!("schema_v1.sql"),
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
];

/// The advisory lock key every migration takes (`pg_advisory_xact_lock`): any constant shared
/// by all builds; this one spells "tserver" in ASCII.
const MIGRATION_LOCK: i64 = 0x0074_7365_7276_6572;

/// How long a call waits for a pooled connection (the database down or saturated) before it
/// fails with an error naming the store.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);

/// Connections a node keeps at most.
const MAX_CONNECTIONS: u32 = 16;

/// Connections of the settings reader (one query out at a time; one more while a stale one
/// is replaced).
const SETTINGS_CONNECTIONS: u32 = 2;

/// Where a PostgreSQL solution is: its connection options, and the URL as it may be shown
/// (the password, if any, replaced by `***`).
#[derive(Clone)]
pub struct PostgresUrl {
    /// Shared: the options are large, and every pool and copy clones the URL.
    options: std::sync::Arc<PgConnectOptions>,
    shown: String,
}

impl std::fmt::Debug for PostgresUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PostgresUrl").field(&self.shown).finish()
    }
}

impl std::fmt::Display for PostgresUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

impl PostgresUrl {
    /// Whether `text` names a PostgreSQL solution rather than a file.
    pub fn is_postgres(text: &str) -> bool {
        text.starts_with("postgres://") || text.starts_with("postgresql://")
    }

    /// Reads a `postgres://user[:password]@host[:port]/database[?sslmode=...]` URL. Without a
    /// password in the URL, libpq's `PGPASSWORD` (then `~/.pgpass`) applies, as for `psql`.
    /// A password written `/secret:NAME` is the credential `NAME` the service manager gives
    /// the process (the file `$CREDENTIALS_DIRECTORY/NAME`, systemd's `LoadCredential=`): the
    /// database's password cannot live in the solution that database holds.
    pub fn parse(text: &str) -> Result<Self, SolutionError> {
        let (text, credential) = match credential_token(text) {
            Some((without, name)) => (without, Some(name)),
            None => (text.to_owned(), None),
        };
        let shown = match &credential {
            Some(name) => text.replacen('@', &format!(":{TOKEN}{name}@"), 1),
            None => redacted(&text),
        };
        let refused = |reason: String| SolutionError::Location {
            location: shown.clone(),
            reason,
        };
        // sqlx's configuration errors name the part, never echo the URL.
        let mut options: PgConnectOptions = text
            .parse()
            .map_err(|error: sqlx::Error| refused(error.to_string()))?;
        if let Some(name) = &credential {
            options = options.password(&read_credential(name).map_err(refused)?);
        }
        // Statements are logged by tserver's own tracing, not sqlx's (which would log values);
        // the server's NOTICEs (a migration's "already exists, skipping") are not news to
        // anyone, so only warnings and errors are sent. Every statement is planned with its
        // values: the history is partitioned by week, a generic plan prunes no partition when
        // it is made, and PostgreSQL makes one at a statement's sixth run on each connection,
        // which for a year of history costs 20 ms of planning where a custom plan costs less
        // than one.
        let options = std::sync::Arc::new(options.disable_statement_logging().options([
            ("client_min_messages", "warning"),
            ("plan_cache_mode", "force_custom_plan"),
        ]));
        Ok(Self { options, shown })
    }
}

/// The secret token a URL's password may be.
const TOKEN: &str = solution_settings::TOKEN_PREFIX;

/// A URL whose password is `/secret:NAME`: the URL without a password, and `NAME`.
fn credential_token(text: &str) -> Option<(String, String)> {
    let (scheme, rest) = text.split_once("://")?;
    // The user-info ends at the `@` that follows the token; the token itself holds a `/`.
    let (user, after_user) = rest.split_once(':')?;
    if user.contains(['/', '@', '?']) {
        return None;
    }
    let (name, host) = after_user.strip_prefix(TOKEN)?.split_once('@')?;
    Some((format!("{scheme}://{user}@{host}"), name.to_owned()))
}

/// The credential `name` the service manager gave the process, trimmed of its line end.
fn read_credential(name: &str) -> Result<String, String> {
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !valid {
        return Err(format!(
            "the password token names credential {name:?}: use letters, digits, '_', '-' or '.'"
        ));
    }
    let directory = std::env::var_os("CREDENTIALS_DIRECTORY").ok_or_else(|| {
        format!(
            "the password is credential {name:?}, but CREDENTIALS_DIRECTORY is not set (systemd's LoadCredential={name}:FILE sets it; or set it to a directory holding a file {name})"
        )
    })?;
    let path = std::path::Path::new(&directory).join(name);
    let text = std::fs::read_to_string(&path)
        .map_err(|error| format!("cannot read credential {name:?} from {}: {error}", path.display()))?;
    Ok(text.trim_end_matches(['\r', '\n']).to_owned())
}

/// `text` with the password of its user-info part, if any, replaced by `***`.
fn redacted(text: &str) -> String {
    let Some((scheme, rest)) = text.split_once("://") else {
        return text.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((user_info, host)) => match user_info.split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => text.to_owned(),
        },
        None => text.to_owned(),
    }
}

/// A PostgreSQL solution: a pool of connections to it.
#[derive(Debug, Clone)]
pub(crate) struct PgStore {
    pool: PgPool,
    url: PostgresUrl,
    /// The runtime the pool's connections live on, for [`block_on`](Self::block_on).
    runtime: tokio::runtime::Handle,
    /// This node's name where rows are kept per node (source reports).
    node: String,
    /// The settings row, read for every call with the reads of calls arriving together shared.
    settings: settings_reads::SettingsReads,
    /// What this node's history writer knows between flushes.
    history: Arc<history_blocks::PgHistoryWriter>,
    /// The newest hash of the audit chain this node knows, so that an append needs no read.
    audit_head: Arc<audit::KnownHead>,
    /// The connection this node appends audit rows on.
    append_connection: Arc<audit::AppendConnection>,
}

impl PgStore {
    /// Opens the solution at `url`: connects, then creates or upgrades its schema (a database
    /// of a newer schema is refused untouched; one holding other tables named like ours fails
    /// the migration, which rolls back whole).
    pub(crate) async fn open(url: &PostgresUrl) -> Result<Self, SolutionError> {
        // One connection first: a pool retries a refused connection until its acquire timeout
        // and then says only "pool timed out"; this says which address refused and why.
        let probe = url
            .options
            .connect()
            .await
            .map_err(|error| url.connect_error(error))?;
        let _ = sqlx::Connection::close(probe).await;
        let pool = PgPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(PgConnectOptions::clone(&url.options))
            .await
            .map_err(|error| store_error(url, error))?;
        let store = Self {
            pool: pool.clone(),
            url: url.clone(),
            runtime: tokio::runtime::Handle::current(),
            node: sources::node_name(),
            history: Arc::default(),
            audit_head: Arc::default(),
            append_connection: Arc::default(),
            settings: settings_reads::SettingsReads::start(
                PgPoolOptions::new()
                    .max_connections(SETTINGS_CONNECTIONS)
                    .acquire_timeout(ACQUIRE_TIMEOUT)
                    // Checked by use instead: a read that fails on a stale connection is sent
                    // again once on a new one (SettingsReads), so a call costs one round trip.
                    .test_before_acquire(false)
                    .connect_lazy_with(PgConnectOptions::clone(&url.options)),
            ),
        };
        store.migrate().await?;
        Ok(store)
    }

    /// Whether the database at `url` holds a tserver schema already (one connection, closed
    /// after).
    pub(crate) async fn has_schema(url: &PostgresUrl) -> Result<bool, SolutionError> {
        let mut connection = url
            .options
            .connect()
            .await
            .map_err(|error| url.connect_error(error))?;
        let found: Option<String> = sqlx::query_scalar("SELECT to_regclass('schemaversion')::text")
            .fetch_one(&mut connection)
            .await
            .map_err(|error| store_error(url, error))?;
        let _ = sqlx::Connection::close(connection).await;
        Ok(found.is_some())
    }

    /// Where the solution is, as it may be shown.
    pub(crate) fn url(&self) -> &PostgresUrl {
        &self.url
    }

    /// The schema version the database holds (after `open`, this build's).
    #[cfg(test)]
    pub(crate) async fn schema_version(&self) -> Result<i64, SolutionError> {
        let version: i64 = sqlx::query_scalar("SELECT Version FROM SchemaVersion")
            .fetch_one(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
        Ok(version)
    }

    /// Creates or upgrades the schema in one transaction under the migration lock: a second
    /// node or admin command opening at the same moment waits, then finds it done.
    async fn migrate(&self) -> Result<(), SolutionError> {
        let mut transaction = self.locked(MIGRATION_LOCK).await?;
        sqlx::query("CREATE TABLE IF NOT EXISTS SchemaVersion (Version BIGINT NOT NULL)")
            .execute(&mut *transaction)
            .await
            .map_err(|error| self.error(error))?;
        let found: Option<i64> = sqlx::query_scalar("SELECT Version FROM SchemaVersion")
            .fetch_optional(&mut *transaction)
            .await
            .map_err(|error| self.error(error))?;
        let found = found.unwrap_or(0);
        let known = usize::try_from(found)
            .ok()
            .filter(|version| *version <= MIGRATIONS.len());
        let Some(version) = known else {
            return Err(SolutionError::PgSchemaVersion {
                location: self.url.to_string(),
                found,
            });
        };
        // Through `Executor::execute`, not `RawSql::execute`: the latter's lifetime bounds
        // make the future not provably `Send`, and serving spawns it.
        let pending = MIGRATIONS[version..].concat();
        sqlx::Executor::execute(&mut *transaction, sqlx::raw_sql(&pending))
            .await
            .map_err(|error| self.error(error))?;
        self.fold_legacy_rows(&mut transaction).await?;
        sqlx::query("DELETE FROM SchemaVersion")
            .execute(&mut *transaction)
            .await
            .map_err(|error| self.error(error))?;
        sqlx::query("INSERT INTO SchemaVersion (Version) VALUES ($1)")
            .bind(PG_SCHEMA_VERSION)
            .execute(&mut *transaction)
            .await
            .map_err(|error| self.error(error))?;
        transaction.commit().await.map_err(|error| self.error(error))
    }

    /// Serves the settings from the lease's copy from now on (a serving node; see
    /// `settings_lease.rs`).
    pub(crate) fn hold_settings_lease(&self) {
        self.settings.hold_lease(&self.url.options, self.pool.clone());
    }

    /// Whether a call starting now would be answered from the lease's copy.
    #[cfg(test)]
    pub(crate) fn settings_kept(&self) -> bool {
        self.settings.is_kept()
    }

    /// How many times the settings row was queried for calls.
    #[cfg(test)]
    pub(crate) fn settings_queries(&self) -> u64 {
        self.settings.queries()
    }

    /// The `SolutionSettings` row as a call starting now must see it: every change committed
    /// before is in it.
    pub(crate) async fn settings_row(&self) -> Result<SettingsRow, SolutionError> {
        self.settings
            .read()
            .await
            .map_err(|reason| SolutionError::Postgres {
                location: self.url.to_string(),
                reason,
            })
    }

    /// The user of that name (matched case-insensitively), if any.
    pub(crate) async fn user(&self, name: &str) -> Result<Option<UserRecord>, SolutionError> {
        let row = sqlx::query("SELECT Name, PasswordHash, Role FROM Users WHERE lower(Name) = lower($1)")
            .bind(name)
            .fetch_optional(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
        row.map(|row| {
            Ok(UserRecord {
                name: row.try_get(0).map_err(|error| self.error(error))?,
                password_hash: row.try_get(1).map_err(|error| self.error(error))?,
                role: role_of_stored(&row.try_get::<String, _>(2).map_err(|error| self.error(error))?),
            })
        })
        .transpose()
    }

    /// Adds a user with a role (`password` `None`: passwordless), as
    /// [`SolutionDb::add_user`](super::SolutionDb::add_user) does; a name taken in any case is
    /// refused.
    pub(crate) async fn add_user(
        &self,
        name: &str,
        password: Option<&str>,
        role: Role,
    ) -> Result<(), SolutionError> {
        super::admin::validate_user_name(name)?;
        let password_hash = match password {
            Some(password) => Some(hash_off_the_workers(password).await?),
            None => None,
        };
        let added = sqlx::query(
            "INSERT INTO Users (Name, PasswordHash, Role) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
        )
        .bind(name)
        .bind(password_hash)
        .bind(role.as_str())
        .execute(&self.pool)
        .await
        .map_err(|error| self.error(error))?;
        if added.rows_affected() == 0 {
            return Err(SolutionError::UserExists(name.to_owned()));
        }
        Ok(())
    }

    fn error(&self, error: sqlx::Error) -> SolutionError {
        store_error(&self.url, error)
    }

    /// A transaction holding the advisory lock `key` until it ends: one node (or admin command)
    /// at a time does what it guards.
    async fn locked(&self, key: i64) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, SolutionError> {
        let mut transaction = self.pool.begin().await.map_err(|error| self.error(error))?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(key)
            .execute(&mut *transaction)
            .await
            .map_err(|error| self.error(error))?;
        Ok(transaction)
    }

    /// A read-only transaction on one snapshot, begun in one round trip: what is committed
    /// meanwhile (an import, a checkpoint) is seen whole or not at all.
    async fn snapshot(&self) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, SolutionError> {
        self.pool
            .begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .await
            .map_err(|error| self.error(error))
    }

    /// Runs a store operation to its end for a thread that may block: the solution's blocking
    /// threads (the historian's flush and queries on the blocking pool, the audit writer).
    /// Never from an async task: that would stall a worker (and tokio refuses it).
    pub(crate) fn block_on<F: std::future::Future>(&self, operation: F) -> F::Output {
        self.runtime.block_on(operation)
    }
}

/// Hashes a password (argon2 takes tens of milliseconds) on a blocking thread, off the async
/// workers.
async fn hash_off_the_workers(password: &str) -> Result<String, SolutionError> {
    let password = password.to_owned();
    tokio::task::spawn_blocking(move || crate::hash_password(&password))
        .await
        .map_err(|error| SolutionError::PasswordHash(error.to_string()))?
}

/// A driver error as the store's: names the (redacted) location, never a password.
impl PostgresUrl {
    /// The database's name, as the URL gives it.
    pub fn database(&self) -> Option<&str> {
        self.options.get_database()
    }

    /// A failed connection, naming the address it went to and the system's reason (such as
    /// "Connection refused") rather than the pool's.
    fn connect_error(&self, error: sqlx::Error) -> SolutionError {
        let reason = match &error {
            sqlx::Error::Io(io) => format!(
                "cannot connect to {}:{}: {io}",
                self.options.get_host(),
                self.options.get_port()
            ),
            _ => error.to_string(),
        };
        SolutionError::Postgres {
            location: self.to_string(),
            reason,
        }
    }
}

fn store_error(url: &PostgresUrl, error: sqlx::Error) -> SolutionError {
    SolutionError::Postgres {
        location: url.to_string(),
        reason: error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::{credential_token, redacted};

    #[test]
    fn a_secret_token_as_the_password_is_taken_out_of_the_url() {
        assert_eq!(
            credential_token("postgres://tserver:/secret:DbPass@db.plant:5432/plant?sslmode=require"),
            Some((
                "postgres://tserver@db.plant:5432/plant?sslmode=require".to_owned(),
                "DbPass".to_owned()
            ))
        );
        for plain in [
            "postgres://tserver:s3cret@db/plant",
            "postgres://tserver@db/plant",
            "postgres://db/plant",
            "postgres://db:5432/secret:x@y",
        ] {
            assert_eq!(credential_token(plain), None, "{plain}");
        }
    }

    #[test]
    fn a_password_in_the_url_is_never_shown() {
        assert_eq!(
            redacted("postgres://tserver:s3cret@db.plant:5432/plant?sslmode=require"),
            "postgres://tserver:***@db.plant:5432/plant?sslmode=require"
        );
        assert_eq!(
            redacted("postgres://tserver@db/plant"),
            "postgres://tserver@db/plant"
        );
        assert_eq!(redacted("postgresql://db/plant"), "postgresql://db/plant");
        // An @ in the password (percent-encoded or not) stays hidden.
        assert_eq!(
            redacted("postgres://u:p@ss@db/plant"),
            "postgres://u:***@db/plant"
        );
    }
}
