//! `SettingsReads`: the settings row read at every call, with the reads of calls that arrive
//! together shared. A call's read is answered by a query sent after the call arrived, so it
//! sees every change committed before it (an admin's `settings set` is what the very next call
//! uses, on every node), while a node taking many calls at once sends one query for all the
//! calls that came in while the previous one was out, instead of one each.

use localai::settings::SettingsRow;
use sqlx::Row;
use sqlx::pool::PoolConnection;
use sqlx::{PgPool, Postgres};
use tokio::sync::{mpsc, oneshot};

/// Where one call's read is answered: the row, or why it could not be read.
type Reply = oneshot::Sender<Result<SettingsRow, String>>;

/// The reads waiting for the next query, and the task that sends it.
#[derive(Debug, Clone)]
pub(super) struct SettingsReads {
    requests: mpsc::UnboundedSender<Reply>,
}

impl SettingsReads {
    /// Starts the reader on the current runtime, reading through `pool` (its own, connections
    /// not tested before use); it ends when every handle is dropped.
    pub(super) fn start(pool: PgPool) -> Self {
        let (requests, waiting) = mpsc::unbounded_channel();
        tokio::spawn(reader(pool, waiting));
        Self { requests }
    }

    /// The row as a query sent after this call began reads it.
    pub(super) async fn read(&self) -> Result<SettingsRow, String> {
        let (reply, answer) = oneshot::channel();
        self.requests
            .send(reply)
            .map_err(|_| "the settings reader has stopped".to_owned())?;
        answer
            .await
            .unwrap_or_else(|_| Err("the settings reader has stopped".to_owned()))
    }
}

/// Answers every read waiting when a query is sent with that query's row. The number waiting
/// is bounded by the calls in flight. The queries go on one connection held from query to
/// query: taking one from the pool for each was a quarter of the PostgreSQL gate's throughput.
async fn reader(pool: PgPool, mut requests: mpsc::UnboundedReceiver<Reply>) {
    let mut waiting = Vec::new();
    let mut held: Option<PoolConnection<Postgres>> = None;
    while let Some(first) = requests.recv().await {
        waiting.push(first);
        while let Ok(more) = requests.try_recv() {
            waiting.push(more);
        }
        // A connection the database closed (it restarted) fails once: read again on a new one.
        // (Not after waiting the acquire timeout for a connection: that wait is the budget.)
        let row = match settings_row(&pool, &mut held).await {
            Err(error) if !matches!(error, sqlx::Error::PoolTimedOut) => settings_row(&pool, &mut held).await,
            read => read,
        }
        .map_err(|error| error.to_string());
        for reply in waiting.drain(..) {
            let _ = reply.send(row.clone());
        }
    }
}

/// One read of the `SolutionSettings` row, on the connection held (taken from the pool when
/// none is; dropped when a read on it fails).
async fn settings_row(
    pool: &PgPool,
    held: &mut Option<PoolConnection<Postgres>>,
) -> Result<SettingsRow, sqlx::Error> {
    let connection = match held {
        Some(connection) => connection,
        None => held.insert(pool.acquire().await?),
    };
    let row = sqlx::query("SELECT ModelEnabled, ModelSettings, ModelOptions FROM SolutionSettings LIMIT 1")
        .fetch_one(&mut **connection)
        .await
        .inspect_err(|_| *held = None)?;
    Ok(SettingsRow {
        model_enabled: row.try_get::<i32, _>(0)? != 0,
        model_settings: row.try_get(1)?,
        model_options: row.try_get::<i64, _>(2)?,
    })
}
