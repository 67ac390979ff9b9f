//! The audit trail: every tag write and alarm acknowledgement a client asked for, who asked,
//! from which connection, the value before and the value asked for, and what came of it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use std::sync::PoisonError;

use rusqlite::{OptionalExtension, TransactionBehavior, params};
use tokio::sync::{mpsc, oneshot};

use super::audit_chain::{self, ChainBreak, ChainHash, ChainVerified, ChainWalk, ChainedRow, Checkpoint};
use super::{SolutionDb, SolutionError, Store, millis, secrets, time_of};

/// What was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditAction {
    /// A tag write.
    Write,
    /// An alarm acknowledgement.
    Acknowledge,
    /// An alarm shelved.
    Shelve,
    /// An alarm unshelved (by hand, or its shelving ran out).
    Unshelve,
    /// An alarm taken out of service.
    RemoveFromService,
    /// An alarm put back in service.
    ReturnToService,
}

impl AuditAction {
    /// Every action.
    pub const ALL: [Self; 6] = [
        Self::Write,
        Self::Acknowledge,
        Self::Shelve,
        Self::Unshelve,
        Self::RemoveFromService,
        Self::ReturnToService,
    ];

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Write => "write",
            Self::Acknowledge => "acknowledge",
            Self::Shelve => "shelve",
            Self::Unshelve => "unshelve",
            Self::RemoveFromService => "out-of-service",
            Self::ReturnToService => "in-service",
        }
    }

    /// The action of a stored name (the column's CHECK admits no other; anything else reads
    /// as a write).
    pub(crate) fn parse(text: &str) -> Self {
        Self::ALL
            .into_iter()
            .find(|action| action.as_str() == text)
            .unwrap_or(Self::Write)
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
    /// For a signed act, its signatures: who signed, meaning what, when, over the hash of what
    /// was signed.
    pub signatures: Option<String>,
}

/// The most characters of a value, target or outcome in one audit row.
pub const MAX_AUDIT_TEXT_CHARS: usize = 256;

/// `text` cut to [`MAX_AUDIT_TEXT_CHARS`] characters, saying how much was cut.
pub fn cut_for_audit(text: &str) -> String {
    match text.char_indices().nth(MAX_AUDIT_TEXT_CHARS) {
        None => text.to_owned(),
        Some((end, _)) => format!("{}…(+{} bytes)", &text[..end], text.len() - end),
    }
}

impl AuditEntry {
    /// The entry with its texts cut to [`MAX_AUDIT_TEXT_CHARS`] characters each.
    #[must_use]
    pub fn cut_to_bounds(self) -> Self {
        Self {
            target: cut_for_audit(&self.target),
            old_value: self.old_value.as_deref().map(cut_for_audit),
            new_value: self.new_value.as_deref().map(cut_for_audit),
            outcome: cut_for_audit(&self.outcome),
            ..self
        }
    }
}

impl SolutionDb {
    /// Records several callers' entries in one transaction (one commit, one sync to disk),
    /// each row linked to the one before it.
    pub(crate) fn record_audit_batches(&self, batches: &[&[AuditEntry]]) -> Result<(), SolutionError> {
        self.on_audit_writer(|connection| record_linked(connection, batches))
    }

    /// Runs `write` on the audit's one writer connection, opened on first use and kept (its
    /// statements stay prepared); refused once the file was lost.
    fn on_audit_writer<T>(
        &self,
        write: impl FnOnce(&mut rusqlite::Connection) -> Result<T, SolutionError>,
    ) -> Result<T, SolutionError> {
        let mut kept = self.audit_writer.lock().unwrap_or_else(PoisonError::into_inner);
        // The kept connection would go on writing into a file that is gone.
        self.refuse_if_lost()?;
        let connection = match kept.as_mut() {
            Some(connection) => connection,
            None => kept.insert(self.writer()?),
        };
        write(connection)
    }

    /// Removes the oldest entries, up to the first recorded at or after `before` (a prefix of
    /// the chain, so what is kept still links up), and leaves a signed checkpoint the first row
    /// kept links to; how many were removed.
    pub(crate) fn prune_audit(&self, before: SystemTime) -> Result<usize, SolutionError> {
        self.on_audit_writer(|connection| self.prune_linked(connection, before))
    }

    /// [`Self::prune_audit`] on `connection`, the write lock taken first (as
    /// [`record_linked`] takes it).
    fn prune_linked(
        &self,
        connection: &mut rusqlite::Connection,
        before: SystemTime,
    ) -> Result<usize, SolutionError> {
        let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let last_pruned: Option<(i64, Option<Vec<u8>>)> = transaction
            .query_row(
                "SELECT Id, Hash FROM Audit
                 WHERE Id < COALESCE((SELECT MIN(Id) FROM Audit WHERE Time >= ?1), 9223372036854775807)
                 ORDER BY Id DESC LIMIT 1",
                params![millis(before)],
                |row| Ok((row.get(0)?, row.get(1)?)),
            )
            .optional()?;
        let Some((through, hash)) = last_pruned else {
            return Ok(0);
        };
        let pruned = transaction.execute("DELETE FROM Audit WHERE Id <= ?1", params![through])?;
        // Rows recorded before the chain need no checkpoint: the first chained row starts it.
        if let Some(hash) = hash.and_then(|hash| ChainHash::try_from(hash.as_slice()).ok()) {
            let signature = match secrets::load_key(Some(self.path())) {
                Ok(key) => Some(audit_chain::sign_checkpoint(key.as_slice(), through, &hash)),
                Err(error) => {
                    tracing::warn!(%error, "the audit checkpoint is left unsigned: `audit verify` will report it");
                    None
                }
            };
            transaction.execute(
                "INSERT INTO AuditCheckpoint (Time, ThroughId, Hash, Pruned, Signature) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    millis(SystemTime::now()),
                    through,
                    hash.as_slice(),
                    i64::try_from(pruned).unwrap_or(i64::MAX),
                    signature
                ],
            )?;
        }
        transaction.commit()?;
        Ok(pruned)
    }

    /// Walks the whole trail in the chain's order: where it first breaks, or what verified.
    pub(crate) fn verify_audit(&self) -> Result<Result<ChainVerified, ChainBreak>, SolutionError> {
        let key = secrets::load_key(Some(self.path()));
        self.read(|connection| {
            let checkpoint = latest_checkpoint(connection)?;
            let key = key.as_ref().map(|key| key.as_slice()).map_err(ToString::to_string);
            let mut walk = ChainWalk::new(checkpoint.as_ref(), key);
            let mut read = connection.prepare(
                "SELECT Id, Time, UserName, Connection, Peer, Action, Target, OldValue, NewValue, Outcome, Signatures, PrevHash, Hash
                 FROM Audit WHERE Id > ?1 ORDER BY Id LIMIT ?2",
            )?;
            let mut after = i64::MIN;
            while !walk.is_broken() {
                let rows = read
                    .query_map(params![after, VERIFY_PAGE], |row| {
                        Ok(ChainedRow {
                            id: row.get(0)?,
                            entry: entry_of(row, 1)?,
                            previous: row.get(11)?,
                            hash: row.get(12)?,
                        })
                    })?
                    .collect::<Result<Vec<_>, _>>()?;
                let Some(last) = rows.last() else { break };
                after = last.id;
                for row in rows {
                    walk.take(row);
                }
            }
            Ok(walk.finish())
        })
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
                    "SELECT Time, UserName, Connection, Peer, Action, Target, OldValue, NewValue, Outcome, Signatures
                     FROM Audit WHERE Time >= ?1 ORDER BY Id LIMIT ?2",
                )?
                .query_map(params![since, limit], |row| entry_of(row, 0))?
                .collect()
        })
    }
}

/// Rows read at a time by [`SolutionDb::verify_audit`].
const VERIFY_PAGE: i64 = 10_000;

/// Records `batches` in one transaction, each row linked to the one before it. The write lock
/// is taken first (`BEGIN IMMEDIATE`): the chain's head is read in the transaction that writes
/// after it, and a read-then-write transaction fails at once, without waiting, when another
/// connection (the history's writer) committed in between.
fn record_linked(
    connection: &mut rusqlite::Connection,
    batches: &[&[AuditEntry]],
) -> Result<(), SolutionError> {
    let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
    {
        let head = chain_head(&transaction)?;
        let entries = || batches.iter().flat_map(|batch| batch.iter());
        let mut insert = transaction.prepare_cached(
            "INSERT INTO Audit (Time, UserName, Connection, Peer, Action, Target, OldValue, NewValue, Outcome, Signatures, PrevHash, Hash)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        )?;
        for (entry, (previous, hash)) in entries().zip(audit_chain::link(head, entries())) {
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
                entry.signatures,
                previous.as_slice(),
                hash.as_slice(),
            ])?;
        }
    }
    transaction.commit()?;
    Ok(())
}

/// The hash the next row links to: the newest chained row's (a row put in after it without a
/// hash is passed over, so verification names it), else the latest checkpoint's, else the
/// chain's start.
fn chain_head(connection: &rusqlite::Connection) -> rusqlite::Result<ChainHash> {
    let newest: Option<Vec<u8>> = connection
        .prepare_cached("SELECT Hash FROM Audit WHERE Hash IS NOT NULL ORDER BY Id DESC LIMIT 1")?
        .query_row([], |row| row.get(0))
        .optional()?;
    let stored = match newest {
        Some(hash) => Some(hash),
        None => latest_checkpoint(connection)?.map(|checkpoint| checkpoint.hash.to_vec()),
    };
    Ok(stored
        .and_then(|hash| ChainHash::try_from(hash.as_slice()).ok())
        .unwrap_or(audit_chain::GENESIS))
}

/// The checkpoint of the latest pruning, if rows were pruned.
fn latest_checkpoint(connection: &rusqlite::Connection) -> rusqlite::Result<Option<Checkpoint>> {
    let stored: Option<(i64, Vec<u8>, Option<Vec<u8>>)> = connection
        .query_row(
            "SELECT ThroughId, Hash, Signature FROM AuditCheckpoint ORDER BY ThroughId DESC LIMIT 1",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .optional()?;
    Ok(stored.map(|(through, hash, signature)| Checkpoint {
        through,
        // A stored hash of the wrong length links nothing: the first row kept shows it.
        hash: ChainHash::try_from(hash.as_slice()).unwrap_or(audit_chain::GENESIS),
        signature,
    }))
}

/// An entry from the row's columns from `first` on (time, user, connection, peer, action,
/// target, old value, new value, outcome, signatures).
fn entry_of(row: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<AuditEntry> {
    let time: i64 = row.get(first)?;
    Ok(AuditEntry {
        time: time_of(time),
        user: row.get(first + 1)?,
        connection: row.get(first + 2)?,
        peer: row.get(first + 3)?,
        action: AuditAction::parse(&row.get::<_, String>(first + 4)?),
        target: row.get(first + 5)?,
        old_value: row.get(first + 6)?,
        new_value: row.get(first + 7)?,
        outcome: row.get(first + 8)?,
        signatures: row.get(first + 9)?,
    })
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
    #[crate::compiled_once]
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

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(target: String) -> AuditEntry {
        AuditEntry {
            time: SystemTime::now(),
            user: "ops".to_owned(),
            connection: "test".to_owned(),
            peer: "local".to_owned(),
            action: AuditAction::Write,
            target,
            old_value: None,
            new_value: Some("1".to_owned()),
            outcome: "ok".to_owned(),
            signatures: None,
        }
    }

    #[test]
    fn the_audit_waits_for_another_writer_of_the_file_instead_of_failing() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("audit.db");
        SolutionDb::create(&path, false).expect("creates");
        let db = SolutionDb::open(&path).expect("opens");
        let other = super::super::open_connection(&path).expect("a second connection");
        other
            .execute_batch("CREATE TABLE Busy (Value INTEGER)")
            .expect("a table of its own");
        // Another connection commits again and again meanwhile, as the history's writer does
        // (each of its commits between two looks of the audit's, never holding the lock for
        // good: SQLite's busy wait does not queue, so a writer that never pauses could starve
        // any other).
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let busy = {
            let done = Arc::clone(&done);
            std::thread::spawn(move || {
                let mut commits = 0_u64;
                while !done.load(Ordering::Relaxed) && commits < 100_000 {
                    other
                        .execute("INSERT INTO Busy (Value) VALUES (?1)", params![commits])
                        .expect("commits");
                    commits += 1;
                    std::thread::sleep(Duration::from_micros(200));
                }
                commits
            })
        };
        for index in 0..300 {
            let batch = [entry(format!("T{index}"))];
            db.record_audit_batches(&[&batch])
                .unwrap_or_else(|error| panic!("audit {index} failed: {error}"));
        }
        done.store(true, Ordering::Relaxed);
        assert!(busy.join().expect("the other writer") > 0, "it wrote meanwhile");
        let verified = db.verify_audit().expect("reads").expect("the chain holds");
        assert_eq!(verified.rows, 300);
    }

    #[test]
    fn text_is_cut_at_a_character_and_says_how_much() {
        assert_eq!(cut_for_audit("short"), "short");
        let long = "é".repeat(300);
        let cut_text = cut_for_audit(&long);
        assert!(cut_text.starts_with(&"é".repeat(256)));
        assert!(cut_text.ends_with("…(+88 bytes)"), "{cut_text}");
    }
}
