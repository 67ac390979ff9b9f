//! The audit trail: every tag write and alarm acknowledgement a client asked for, who asked,
//! from which connection, the value before and the value asked for, and what came of it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use rusqlite::params;
use tokio::sync::{mpsc, oneshot};

use super::{SolutionDb, SolutionError, Store, millis, time_of};

/// What was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditAction {
    /// A tag write.
    Write,
    /// An alarm acknowledgement.
    Acknowledge,
}

impl AuditAction {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Write => "write",
            Self::Acknowledge => "acknowledge",
        }
    }

    pub(crate) fn parse(text: &str) -> Self {
        if text == "acknowledge" {
            Self::Acknowledge
        } else {
            Self::Write
        }
    }
}

/// One audited request.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEntry {
    /// When it was asked for.
    pub time: SystemTime,
    /// The logged-in user.
    pub user: String,
    /// The connection's server-made GUID.
    pub connection: String,
    /// The client's address.
    pub peer: String,
    /// Write or acknowledge.
    pub action: AuditAction,
    /// The tag or alarm.
    pub target: String,
    /// The value before (JSON), for a write of a known tag.
    pub old_value: Option<String>,
    /// The value asked for (JSON), for a write.
    pub new_value: Option<String>,
    /// `ok`, or why it was refused.
    pub outcome: String,
}

impl SolutionDb {
    /// Records several callers' entries in one transaction (one commit, one sync to disk).
    pub(crate) fn record_audit_batches(&self, batches: &[&[AuditEntry]]) -> Result<(), SolutionError> {
        let mut connection = self.writer()?;
        let transaction = connection.transaction()?;
        {
            let mut insert = transaction.prepare_cached(
                "INSERT INTO Audit (Time, UserName, Connection, Peer, Action, Target, OldValue, NewValue, Outcome)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?;
            for entry in batches.iter().flat_map(|batch| batch.iter()) {
                insert.execute(params![
                    millis(entry.time),
                    entry.user,
                    entry.connection,
                    entry.peer,
                    entry.action.as_str(),
                    entry.target,
                    entry.old_value,
                    entry.new_value,
                    entry.outcome,
                ])?;
            }
        }
        transaction.commit()?;
        Ok(())
    }

    /// Removes the entries older than `before`; how many.
    pub(crate) fn prune_audit(&self, before: SystemTime) -> Result<usize, SolutionError> {
        let connection = self.writer()?;
        Ok(connection.execute("DELETE FROM Audit WHERE Time < ?1", params![millis(before)])?)
    }

    /// The entries since `since` (all without it), oldest first, at most `limit`.
    pub(crate) fn audit(
        &self,
        since: Option<SystemTime>,
        limit: usize,
    ) -> Result<Vec<AuditEntry>, SolutionError> {
        let since = since.map_or(i64::MIN, millis);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.read(|connection| {
            connection
                .prepare(
                    "SELECT Time, UserName, Connection, Peer, Action, Target, OldValue, NewValue, Outcome
                     FROM Audit WHERE Time >= ?1 ORDER BY Id LIMIT ?2",
                )?
                .query_map(params![since, limit], |row| {
                    let time: i64 = row.get(0)?;
                    Ok(AuditEntry {
                        time: time_of(time),
                        user: row.get(1)?,
                        connection: row.get(2)?,
                        peer: row.get(3)?,
                        action: AuditAction::parse(&row.get::<_, String>(4)?),
                        target: row.get(5)?,
                        old_value: row.get(6)?,
                        new_value: row.get(7)?,
                        outcome: row.get(8)?,
                    })
                })?
                .collect()
        })
    }
}

/// How often the audit writer removes rows past the retention (and once when it starts).
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// The most callers' entries committed together.
const MAX_BATCHES_PER_COMMIT: usize = 256;

/// One caller's entries and where its outcome goes.
type AuditJob = (Vec<AuditEntry>, oneshot::Sender<Result<(), String>>);

/// Audit entries from concurrent calls, committed together: a thread of its own takes every
/// caller waiting and commits all their entries in one transaction (group commit), so calls in
/// flight share one sync to disk instead of queuing for one each.
#[derive(Debug, Clone)]
pub struct AuditLog {
    jobs: mpsc::UnboundedSender<AuditJob>,
    /// `AuditRetentionDays` in seconds, followed live: the writer's next prune uses it.
    retention_secs: Arc<AtomicU64>,
}

impl AuditLog {
    /// Starts the writer thread; it ends when the last handle is dropped. It removes the rows
    /// older than `retention` (or what [`Self::set_retention`] said since) when it starts and
    /// at most hourly after a commit.
    pub fn start(store: Arc<Store>, retention: Duration) -> std::io::Result<Self> {
        let (jobs, mut waiting) = mpsc::unbounded_channel::<AuditJob>();
        let retention_secs = Arc::new(AtomicU64::new(retention.as_secs()));
        let followed = Arc::clone(&retention_secs);
        std::thread::Builder::new()
            .name("audit-writer".to_owned())
            .spawn(move || {
                let prune = || {
                    let retention = Duration::from_secs(followed.load(Ordering::Relaxed));
                    let before = SystemTime::now()
                        .checked_sub(retention)
                        .unwrap_or(SystemTime::UNIX_EPOCH);
                    match store.prune_audit_blocking(before) {
                        Ok(0) => {}
                        Ok(removed) => tracing::info!(
                            removed,
                            retention_days = retention.as_secs() / 86_400,
                            "removed audit rows past AuditRetentionDays"
                        ),
                        Err(error) => {
                            tracing::warn!(%error, "could not remove audit rows past their retention")
                        }
                    }
                    Instant::now()
                };
                let mut pruned = prune();
                while let Some(first) = waiting.blocking_recv() {
                    let mut jobs = vec![first];
                    while jobs.len() < MAX_BATCHES_PER_COMMIT {
                        match waiting.try_recv() {
                            Ok(job) => jobs.push(job),
                            Err(_) => break,
                        }
                    }
                    let batches: Vec<&[AuditEntry]> =
                        jobs.iter().map(|(entries, _)| entries.as_slice()).collect();
                    let outcome = store
                        .record_audit_blocking(&batches)
                        .map_err(|error| error.to_string());
                    for (_, reply) in jobs {
                        let _ = reply.send(outcome.clone());
                    }
                    if pruned.elapsed() >= PRUNE_EVERY {
                        pruned = prune();
                    }
                }
            })?;
        Ok(Self { jobs, retention_secs })
    }

    /// How long rows are kept from the next prune on (`AuditRetentionDays`, followed live).
    pub fn set_retention(&self, retention: Duration) {
        self.retention_secs.store(retention.as_secs(), Ordering::Relaxed);
    }

    /// Records `entries`, committed with whatever other calls are recording now; the error
    /// says why they could not be.
    pub async fn record(&self, entries: Vec<AuditEntry>) -> Result<(), String> {
        let (reply, outcome) = oneshot::channel();
        self.jobs
            .send((entries, reply))
            .map_err(|_| "the audit writer has stopped".to_owned())?;
        outcome
            .await
            .unwrap_or_else(|_| Err("the audit writer stopped".to_owned()))
    }
}
