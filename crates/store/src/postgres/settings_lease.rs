//! The settings lease: a serving node answers a call from its copy of the `SolutionSettings`
//! row, without a query, while it holds a lease that every writer of the row revokes before
//! its change commits; and the writers' side of it ([`SettingsRevocation`]).
//!
//! The spec asks that a call use every settings change committed before it started. A node
//! cannot learn that nothing was committed without a round trip unless the writers cooperate,
//! so they do (leases in the manner of Chubby's):
//!
//! - A node keeps a copy only while its listener is `LISTEN`ing on [`CHANNEL`]. It reads the
//!   row in one implicit transaction of two statements: the first takes the writer lock
//!   *shared* (`pg_try_advisory_xact_lock_shared`) and, only if granted, writes its lease
//!   (`SettingsCaches.LeaseUntil` = the database's clock + [`LEASE_SECONDS`]); the second, with
//!   a snapshot taken after the lock, reads the row. The copy is kept, until `t0 +`
//!   [`KEEP_FOR`] on the node's monotonic clock (`t0` taken before the read was sent), only if
//!   the lock was granted, the listener was listening before `t0`, and no notification or loss
//!   of the listener came in between.
//! - A writer ([`SettingsRevocation`]) takes the writer lock exclusively on a connection of its
//!   own, commits `SettingsEpoch + 1` with a `NOTIFY`, then waits until every lease either
//!   acknowledged that epoch (`Invalidated >= epoch`) or ran out (`LeaseUntil` passed on the
//!   database's clock), then commits its change and unlocks. A trigger refuses any change of
//!   the row by a session not holding the lock, so nothing bypasses this.
//! - On a notification the node drops its copy *first*, then acknowledges. On losing its
//!   listener it drops the copy and keeps none until it listens again.
//!
//! Why a kept row is current: the node's read held the lock shared before its snapshot, so a
//! writer's locked span either ended before that snapshot (its change is in the row) or began
//! after the read's transaction committed the lease row. In the second case the writer's change
//! commits only after (a) the node acknowledged, which it does after dropping its copy, and the
//! notification arrives after the copy was kept or bumps the counter that stops it being kept;
//! or (b) the lease ran out on the database's clock, `LEASE_SECONDS` after a moment later than
//! `t0`, by which time the copy's `t0 + KEEP_FOR` has passed on the node unless the database's
//! clock jumped forward by more than their difference (3 s) during the lease. A lease is
//! renewed by the same read (so a renewal is a fresh row, never an old one extended), which
//! cannot happen while a writer holds the lock. The row kept is the raw row: every call still
//! parses it.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use solution_settings::SettingsRow;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use sqlx::{PgConnection, PgPool, Postgres, Row};
use tokio_util::sync::CancellationToken;

use super::PgStore;
use crate::SolutionError;

/// The advisory lock a writer of the settings row holds (exclusive) and a node's lease read
/// takes shared: "setting" in ASCII. `schema_v6.sql`'s trigger names its two halves.
pub(super) const WRITER_LOCK: i64 = 0x0073_6574_7469_6e67;

/// Where writers notify the nodes that their copies must go.
const CHANNEL: &str = "settings_invalidate";

/// How long a lease lasts on the database's clock.
const LEASE_SECONDS: u32 = 5;

/// How long a node keeps a copy after the moment before its read was sent: shorter than the
/// lease by the database clock's allowed forward jump.
const KEEP_FOR: Duration = Duration::from_secs(2);

/// How often a node whose copy was used renews it (a fresh read), well inside [`KEEP_FOR`].
pub(super) const RENEW_EVERY: Duration = Duration::from_secs(1);

/// How often a writer looks for the acknowledgements it waits for.
const ACKNOWLEDGED_POLL: Duration = Duration::from_millis(5);

/// How long a writer waits for the leases at most: the lease and slack for a slow database.
/// Past it the write is refused (a lease can only run out meanwhile, never be renewed).
const REVOKE_WAIT: Duration = Duration::from_secs(LEASE_SECONDS as u64 + 5);

/// How long a node waits before listening again after its listener failed.
const RELISTEN_AFTER: Duration = Duration::from_secs(1);

/// Leases no writer has needed to wait for in this long are removed by the next writer.
const FORGOTTEN_AFTER: &str = "1 hour";

/// A node's copy of the row and what decides whether it may be used.
#[derive(Debug)]
pub(super) struct SettingsLease {
    /// The node's name in `SettingsCaches`: the host, the process and the store.
    node: String,
    state: Mutex<LeaseState>,
    /// Whether the copy answered a call since the last renewal.
    used: AtomicBool,
    /// Whether the listener was started (a node serves; an admin command never does).
    started: AtomicBool,
    /// How many times the reader queried the row.
    #[cfg(test)]
    pub(super) queries: AtomicU64,
}

#[derive(Debug, Default)]
struct LeaseState {
    /// Counts notifications and listener losses: a read begun before one is never kept.
    changes: u64,
    /// Whether the listener is `LISTEN`ing now.
    listening: bool,
    /// The row and until when it may answer calls.
    kept: Option<(SettingsRow, Instant)>,
}

/// What a read that may be kept saw when it began: the change count and `t0`.
#[derive(Debug, Clone, Copy)]
pub(super) struct ReadStart {
    changes: u64,
    at: Instant,
}

impl SettingsLease {
    pub(super) fn new() -> Self {
        static STORES: AtomicU64 = AtomicU64::new(0);
        Self {
            node: format!(
                "{}/{}",
                super::sources::node_name(),
                STORES.fetch_add(1, Ordering::Relaxed)
            ),
            state: Mutex::default(),
            used: AtomicBool::new(false),
            started: AtomicBool::new(false),
            #[cfg(test)]
            queries: AtomicU64::new(0),
        }
    }

    /// The kept row, if it may answer a call starting now.
    pub(super) fn kept_row(&self) -> Option<SettingsRow> {
        let state = self.state.lock().ok()?;
        let (row, until) = state.kept.as_ref()?;
        (Instant::now() < *until).then(|| {
            self.used.store(true, Ordering::Relaxed);
            row.clone()
        })
    }

    /// Whether a read starting now may be kept, and what it must be checked against after.
    pub(super) fn read_start(&self) -> Option<ReadStart> {
        let state = self.state.lock().ok()?;
        state.listening.then(|| ReadStart {
            changes: state.changes,
            at: Instant::now(),
        })
    }

    /// Keeps `row`, read under the lease from `start`, unless a notification or a listener loss
    /// came in since.
    fn keep(&self, row: SettingsRow, start: ReadStart) {
        if let Ok(mut state) = self.state.lock()
            && state.listening
            && state.changes == start.changes
        {
            state.kept = Some((row, start.at + KEEP_FOR));
        }
    }

    /// Drops the copy (a writer revokes it, or the listener was lost: `listening` says which).
    fn drop_kept(&self, listening: bool) {
        if let Ok(mut state) = self.state.lock() {
            state.changes += 1;
            state.listening = listening;
            state.kept = None;
        }
    }

    /// Whether the copy answered a call since this was last asked, and is still kept: then a
    /// renewal keeps it from running out under load.
    pub(super) fn renewal_due(&self) -> bool {
        self.used.swap(false, Ordering::Relaxed) && self.state.lock().is_ok_and(|state| state.kept.is_some())
    }

    /// Reads the row on `connection` taking the lease, and keeps it when the lock was granted.
    /// One round trip: a simple query of two statements in one implicit transaction, each with
    /// its own snapshot (READ COMMITTED), so the row is read after the lock was granted.
    pub(super) async fn read(
        &self,
        connection: &mut PgConnection,
        start: ReadStart,
    ) -> Result<SettingsRow, sqlx::Error> {
        let node = self.node.replace('\'', "''");
        let statements = format!(
            "INSERT INTO SettingsCaches (Node, LeaseUntil, Invalidated)
               SELECT '{node}', clock_timestamp() + interval '{LEASE_SECONDS} seconds', Epoch FROM SettingsEpoch
               WHERE pg_try_advisory_xact_lock_shared({WRITER_LOCK})
             ON CONFLICT (Node) DO UPDATE SET LeaseUntil = excluded.LeaseUntil, Invalidated = excluded.Invalidated
             RETURNING Node;
             SELECT ModelEnabled, ModelSettings, ModelOptions FROM SolutionSettings LIMIT 1"
        );
        // Through `Executor`, not `RawSql::fetch_all`: the latter's lifetime bounds make the
        // future not provably `Send`, and the reader is spawned.
        let rows = sqlx::Executor::fetch_all(connection, sqlx::raw_sql(&statements)).await?;
        // The lease's row comes first when the lock was granted; the settings row last.
        let granted = rows.len() == 2;
        let row = settings_of(rows.last().ok_or(sqlx::Error::RowNotFound)?)?;
        if granted {
            self.keep(row.clone(), start);
        }
        Ok(row)
    }

    /// Starts the listener (once): until `stop`, it keeps `LISTEN`ing on a connection of its
    /// own and revokes the copy at each notification, acknowledging through `pool`.
    pub(super) fn start_listening(
        self: &std::sync::Arc<Self>,
        options: &PgConnectOptions,
        pool: PgPool,
        stop: CancellationToken,
    ) {
        if self.started.swap(true, Ordering::Relaxed) {
            return;
        }
        let listener_pool = PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(super::ACQUIRE_TIMEOUT)
            .connect_lazy_with(options.clone());
        let lease = std::sync::Arc::clone(self);
        tokio::spawn(async move {
            tokio::select! {
                () = stop.cancelled() => {}
                () = lease.listen(&listener_pool, &pool) => {}
            }
        });
    }

    async fn listen(&self, listener_pool: &PgPool, pool: &PgPool) {
        loop {
            if let Ok(mut listener) = subscribed(listener_pool).await {
                self.drop_kept(true);
                // Until the connection is lost (`Ok(None)`) or fails.
                while let Ok(Some(_)) = listener.try_recv().await {
                    self.drop_kept(true);
                    self.acknowledge(pool).await;
                }
            }
            self.drop_kept(false);
            tokio::time::sleep(RELISTEN_AFTER).await;
        }
    }

    /// Tells the writers this node holds no copy older than the epoch now. A failure leaves
    /// them waiting for the lease to run out instead.
    async fn acknowledge(&self, pool: &PgPool) {
        let acknowledged = sqlx::query(
            "UPDATE SettingsCaches SET Invalidated = GREATEST(Invalidated, (SELECT Epoch FROM SettingsEpoch))
             WHERE Node = $1",
        )
        .bind(&self.node)
        .execute(pool)
        .await;
        if let Err(error) = acknowledged {
            tracing::debug!(%error, "the settings lease was not acknowledged; writers wait for it to run out");
        }
    }
}

/// A listener on [`CHANNEL`] that does not reconnect by itself: a loss is seen, and answered
/// by dropping the copy before listening again.
async fn subscribed(pool: &PgPool) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.eager_reconnect(false);
    listener.listen(CHANNEL).await?;
    Ok(listener)
}

/// The settings columns of a row read by simple query (text) or prepared statement.
pub(super) fn settings_of(row: &sqlx::postgres::PgRow) -> Result<SettingsRow, sqlx::Error> {
    Ok(SettingsRow {
        model_enabled: row.try_get::<i32, _>(0)? != 0,
        model_settings: row.try_get(1)?,
        model_options: row.try_get::<i64, _>(2)?,
    })
}

/// A writer's hold on the settings row: the writer lock, taken on a connection of its own,
/// after every lease was revoked. Write through [`connection`](Self::connection), then
/// [`release`](Self::release); dropped unreleased, the connection is closed, which frees the
/// lock.
pub(super) struct SettingsRevocation {
    connection: PoolConnection<Postgres>,
    released: bool,
}

impl SettingsRevocation {
    /// Takes the writer lock (waiting for another writer), notifies the nodes and waits until
    /// each lease acknowledged or ran out.
    pub(super) async fn acquire(store: &PgStore) -> Result<Self, SolutionError> {
        let connection = store.pool.acquire().await.map_err(|error| store.error(error))?;
        let mut revocation = Self {
            connection,
            released: false,
        };
        revocation
            .revoke(store)
            .await
            .map_err(|error| store.error(error))?
            .then_some(revocation)
            .ok_or_else(|| SolutionError::Postgres {
                location: store.url.to_string(),
                reason: format!(
                    "a serving node's settings lease neither was given up nor ran out within {} s; nothing was changed",
                    REVOKE_WAIT.as_secs()
                ),
            })
    }

    /// Whether every lease was revoked in time.
    async fn revoke(&mut self, store: &PgStore) -> Result<bool, sqlx::Error> {
        let connection = &mut *self.connection;
        sqlx::query("SELECT pg_advisory_lock($1)")
            .bind(WRITER_LOCK)
            .execute(&mut *connection)
            .await?;
        let mut transaction = sqlx::Connection::begin(&mut *connection).await?;
        let epoch: i64 = sqlx::query_scalar("UPDATE SettingsEpoch SET Epoch = Epoch + 1 RETURNING Epoch")
            .fetch_one(&mut *transaction)
            .await?;
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(CHANNEL)
            .bind(epoch.to_string())
            .execute(&mut *transaction)
            .await?;
        sqlx::query(&format!(
            "DELETE FROM SettingsCaches WHERE LeaseUntil < clock_timestamp() - interval '{FORGOTTEN_AFTER}'"
        ))
        .execute(&mut *transaction)
        .await?;
        transaction.commit().await?;
        let give_up = Instant::now() + REVOKE_WAIT;
        loop {
            let waiting: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM SettingsCaches WHERE Invalidated < $1 AND LeaseUntil > clock_timestamp())",
            )
            .bind(epoch)
            .fetch_one(&mut *connection)
            .await?;
            if !waiting {
                return Ok(true);
            }
            if Instant::now() >= give_up {
                tracing::warn!(url = %store.url, "a settings write waited for a node's lease in vain");
                return Ok(false);
            }
            tokio::time::sleep(ACKNOWLEDGED_POLL).await;
        }
    }

    /// The connection holding the writer lock, to write the row on.
    pub(super) fn connection(&mut self) -> &mut PgConnection {
        &mut self.connection
    }

    /// Frees the writer lock, after the change committed.
    pub(super) async fn release(mut self) -> Result<(), sqlx::Error> {
        sqlx::query("SELECT pg_advisory_unlock($1)")
            .bind(WRITER_LOCK)
            .execute(&mut *self.connection)
            .await?;
        self.released = true;
        Ok(())
    }
}

impl Drop for SettingsRevocation {
    fn drop(&mut self) {
        if !self.released {
            self.connection.close_on_drop();
        }
    }
}
