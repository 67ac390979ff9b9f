//! `SettingsReads`: the settings row as a call starting now must see it. A serving node holding
//! the settings lease (`settings_lease.rs`) answers from its copy without a query; otherwise
//! a call's read is answered by a query sent after the call arrived, so it sees every change
//! committed before it (an admin's `settings set` is what the very next call uses, on every
//! node), while a node taking many calls at once sends one query for all the calls that came
//! in while the previous one was out, instead of one each.

use std::sync::Arc;

use solution_settings::SettingsRow;
use sqlx::pool::PoolConnection;
use sqlx::postgres::PgConnectOptions;
use sqlx::{PgPool, Postgres};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::settings_lease::{self, SettingsLease};

/// Where one call's read is answered: the row, or why it could not be read.
type Reply = oneshot::Sender<Result<SettingsRow, String>>;

/// The reads waiting for the next query, the task that sends it, and the lease's copy.
#[derive(Debug, Clone)]
pub(super) struct SettingsReads {
    requests: mpsc::UnboundedSender<Reply>,
    lease: Arc<SettingsLease>,
    /// Stops the lease's listener once the last handle is dropped.
    stop: CancellationToken,
    _stop_when_dropped: Arc<DropGuard>,
}

impl SettingsReads {
    /// Starts the reader on the current runtime, reading through `pool` (its own, connections
    /// not tested before use); it ends when every handle is dropped.
    pub(super) fn start(pool: PgPool) -> Self {
        let (requests, waiting) = mpsc::unbounded_channel();
        let lease = Arc::new(SettingsLease::new());
        tokio::spawn(reader(pool, waiting, Arc::clone(&lease)));
        let stop = CancellationToken::new();
        Self {
            requests,
            lease,
            _stop_when_dropped: Arc::new(stop.clone().drop_guard()),
            stop,
        }
    }

    /// Takes the settings lease from now on (a serving node): a listener on a connection of its
    /// own (`options`), acknowledgements through `pool`.
    pub(super) fn hold_lease(&self, options: &PgConnectOptions, pool: PgPool) {
        self.lease.start_listening(options, pool, self.stop.clone());
    }

    /// The row as it is for a call starting now: the lease's copy, or the row as a query sent
    /// after this call began reads it.
    pub(super) async fn read(&self) -> Result<SettingsRow, String> {
        if let Some(row) = self.lease.kept_row() {
            return Ok(row);
        }
        let (reply, answer) = oneshot::channel();
        self.requests
            .send(reply)
            .map_err(|_| "the settings reader has stopped".to_owned())?;
        answer
            .await
            .unwrap_or_else(|_| Err("the settings reader has stopped".to_owned()))
    }

    /// Whether the lease's copy would answer a call starting now.
    #[cfg(test)]
    pub(super) fn is_kept(&self) -> bool {
        self.lease.kept_row().is_some()
    }

    /// How many times the row was queried.
    #[cfg(test)]
    pub(super) fn queries(&self) -> u64 {
        self.lease.queries.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Answers every read waiting when a query is sent with that query's row, and renews the
/// lease's copy while it answers calls. The number waiting is bounded by the calls in flight.
/// The queries go on one connection held from query to query: taking one from the pool for
/// each was a quarter of the PostgreSQL gate's throughput.
async fn reader(pool: PgPool, mut requests: mpsc::UnboundedReceiver<Reply>, lease: Arc<SettingsLease>) {
    let mut waiting = Vec::new();
    let mut held: Option<PoolConnection<Postgres>> = None;
    let mut renewals = tokio::time::interval(settings_lease::RENEW_EVERY);
    renewals.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            first = requests.recv() => {
                let Some(first) = first else { break };
                waiting.push(first);
            }
            _ = renewals.tick() => {
                if lease.renewal_due() {
                    let _ = settings_row(&pool, &mut held, &lease).await;
                }
                continue;
            }
        }
        while let Ok(more) = requests.try_recv() {
            waiting.push(more);
        }
        // A connection the database closed (it restarted) fails once: read again on a new one.
        // (Not after waiting the acquire timeout for a connection: that wait is the budget.)
        let row = match settings_row(&pool, &mut held, &lease).await {
            Err(error) if !matches!(error, sqlx::Error::PoolTimedOut) => {
                settings_row(&pool, &mut held, &lease).await
            }
            read => read,
        }
        .map_err(|error| error.to_string());
        for reply in waiting.drain(..) {
            let _ = reply.send(row.clone());
        }
    }
}

/// One read of the `SolutionSettings` row, on the connection held (taken from the pool when
/// none is; dropped when a read on it fails): taking the lease while the node may keep a copy,
/// a prepared point query otherwise.
async fn settings_row(
    pool: &PgPool,
    held: &mut Option<PoolConnection<Postgres>>,
    lease: &SettingsLease,
) -> Result<SettingsRow, sqlx::Error> {
    let connection = match held {
        Some(connection) => connection,
        None => held.insert(pool.acquire().await?),
    };
    #[cfg(test)]
    lease.queries.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let read = match lease.read_start() {
        Some(start) => lease.read(connection, start).await,
        None => sqlx::query("SELECT ModelEnabled, ModelSettings, ModelOptions FROM SolutionSettings LIMIT 1")
            .fetch_one(&mut **connection)
            .await
            .and_then(|row| settings_lease::settings_of(&row)),
    };
    read.inspect_err(|_| *held = None)
}
