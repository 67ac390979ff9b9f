//! `Leadership`: which one of several nodes on a PostgreSQL solution does what must run once
//! (the solution's scripts and their run requests, storing the history every node sees): the
//! node holding a session-level advisory lock on a connection of its own.
//!
//! The lock lives as long as that connection: a node that dies, or loses the database, loses it
//! at once on the server's side, and another node's next try takes it. Each node tries every
//! `interval` while it does not lead, and checks its connection every `interval` while it does;
//! a failed check makes it step down before anything else can run there. So a node killed
//! hands over within one interval of the database noticing, and a leader cut off from the
//! database stops leading within one interval of losing it (a partition the database has not
//! noticed yet can give two leaders for at most that long: docs/DECISIONS.md).

use std::time::Duration;

use sqlx::{ConnectOptions, Connection};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::PostgresUrl;

/// The advisory lock key of the scripts' leader ("scripts" in ASCII).
pub const SCRIPTS_LEADER: i64 = 0x0073_6372_6970_7473;

/// A node's campaign for one leadership. Dropping it steps down (the connection closes).
#[derive(Debug)]
pub struct Leadership {
    leading: watch::Receiver<bool>,
    stop: CancellationToken,
}

impl Leadership {
    /// Starts campaigning for the lock `key` on the database at `url`, trying (or checking)
    /// every `interval`.
    pub fn campaign(url: &PostgresUrl, key: i64, interval: Duration) -> Self {
        let (report, leading) = watch::channel(false);
        let stop = CancellationToken::new();
        tokio::spawn(campaign(url.clone(), key, interval, report, stop.clone()));
        Self { leading, stop }
    }

    /// A receiver told each time this node starts or stops leading.
    pub fn watch(&self) -> watch::Receiver<bool> {
        self.leading.clone()
    }

    /// Whether this node leads now.
    pub fn is_leader(&self) -> bool {
        *self.leading.borrow()
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn campaign(
    url: PostgresUrl,
    key: i64,
    interval: Duration,
    report: watch::Sender<bool>,
    stop: CancellationToken,
) {
    let mut connection: Option<sqlx::PgConnection> = None;
    loop {
        let was_leading = *report.borrow();
        // Whether this node leads after this round, and whether its connection still works.
        let (leading, connected) = match connection.as_mut() {
            None => match url.options.connect().await {
                Ok(made) => {
                    // Connected: try at once.
                    connection = Some(made);
                    continue;
                }
                Err(error) => {
                    tracing::debug!(%error, "leadership: cannot reach the solution store");
                    (false, false)
                }
            },
            // Leading: the lock holds as long as the connection answers.
            Some(held) if was_leading => {
                let answers = held.ping().await.is_ok();
                (answers, answers)
            }
            Some(held) => match sqlx::query_scalar::<_, bool>("SELECT pg_try_advisory_lock($1)")
                .bind(key)
                .fetch_one(&mut *held)
                .await
            {
                Ok(taken) => (taken, true),
                Err(_) => (false, false),
            },
        };
        if !connected {
            // The connection goes, and with it the lock if it was held; the next round makes
            // a new one.
            connection = None;
        }
        if was_leading && !leading {
            tracing::warn!("this node no longer leads: its connection to the solution store failed");
        } else if leading && !was_leading {
            tracing::info!(key, "this node leads now");
        }
        if leading != was_leading {
            report.send_replace(leading);
        }
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(interval) => {}
        }
    }
    report.send_replace(false);
    if let Some(connection) = connection {
        let _ = connection.close().await;
    }
}
