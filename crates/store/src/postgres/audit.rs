//! The audit trail on PostgreSQL: rows appended to a hash chain by every node without a lock
//! (a unique index on each row's link and a head check in the insert keep the chain unforked),
//! pruned as a prefix with a signed checkpoint, and verified in id order.

use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

use sqlx::postgres::{PgConnection, PgRow};
use sqlx::{ConnectOptions, Row};

use super::PgStore;
use crate::audit_chain::{self, ChainBreak, ChainHash, ChainVerified, ChainWalk, ChainedRow, Checkpoint};
use crate::secrets::load_key;
use crate::{AuditAction, AuditEntry, SolutionError, millis, time_of};

/// The advisory lock a prune holds ("taudit" in ASCII).
const CHAIN_LOCK: i64 = 0x7461_7564_6974;

/// Rows read at a time by [`PgStore::verify_audit`].
const VERIFY_PAGE: i64 = 10_000;

/// Appends tried before an append gives up: each one lost means another node appended, so
/// only a node outpaced this many times in a row fails (its act is then refused, unaudited
/// acts never carried out).
const APPEND_ATTEMPTS: usize = 32;

/// The index no two rows following the same row get past (schema version 15).
const FOLLOWS_INDEX: &str = "auditfollows";

/// The columns of an entry, in the order [`PgStore::entry_of`] reads them from `first` on.
const ENTRY_COLUMNS: &str =
    "Time, UserName, Connection, Peer, Action, Target, OldValue, NewValue, Outcome, Signatures";

/// The chain's newest hash (the newest hashed row's, else the latest checkpoint's, else the
/// start): what an append links to and checks is still the newest.
const CHAIN_HEAD: &str = "COALESCE(
     (SELECT Hash FROM Audit WHERE Hash IS NOT NULL ORDER BY Id DESC LIMIT 1),
     (SELECT Hash FROM AuditCheckpoint ORDER BY ThroughId DESC LIMIT 1))";

/// The newest hash of the chain a node last appended or read, if it knows one.
#[derive(Debug, Default)]
pub(crate) struct KnownHead(Mutex<Option<ChainHash>>);

impl KnownHead {
    fn get(&self) -> Option<ChainHash> {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set(&self, head: Option<ChainHash>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = head;
    }
}

/// The connection appends use, kept between them as the file store keeps its audit
/// connection: a pooled one is pinged at every checkout, a round trip for each append.
#[derive(Debug, Default)]
pub(crate) struct AppendConnection(tokio::sync::Mutex<Option<PgConnection>>);

/// Why an append did not go in.
enum Lost {
    /// The head it linked to is no longer the newest: another node appended.
    Outpaced,
    /// The connection failed during the insert (a restarted database closed it): the rows
    /// went in if the chain's head is now `newest`.
    Broken {
        newest: ChainHash,
        error: sqlx::Error,
    },
    Failed(sqlx::Error),
}

impl PgStore {
    /// Appends audit entries, all of them or none, each linked to the one before it: one
    /// statement while this node's known head is the newest, else read again and linked again.
    pub(crate) async fn record_audit_batches(&self, batches: &[&[AuditEntry]]) -> Result<(), SolutionError> {
        for _ in 0..APPEND_ATTEMPTS {
            let head = match self.audit_head.get() {
                Some(head) => head,
                None => self.chain_head().await?,
            };
            match self.append_after(head, batches).await {
                Ok(newest) => {
                    self.audit_head.set(Some(newest));
                    return Ok(());
                }
                Err(Lost::Outpaced) => self.audit_head.set(None),
                Err(Lost::Broken { newest, error }) => {
                    let head = self.chain_head().await.map_err(|_| self.error(error))?;
                    if head == newest {
                        self.audit_head.set(Some(newest));
                        return Ok(());
                    }
                    self.audit_head.set(Some(head));
                }
                Err(Lost::Failed(error)) => {
                    self.audit_head.set(None);
                    return Err(self.error(error));
                }
            }
        }
        Err(SolutionError::AuditContended {
            location: self.url.to_string(),
            attempts: APPEND_ATTEMPTS,
        })
    }

    /// The chain's newest hash, read.
    async fn chain_head(&self) -> Result<ChainHash, SolutionError> {
        let head: Option<Option<Vec<u8>>> = sqlx::query_scalar(&format!("SELECT {CHAIN_HEAD}"))
            .fetch_optional(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
        Ok(head
            .flatten()
            .and_then(|hash| ChainHash::try_from(hash.as_slice()).ok())
            .unwrap_or(audit_chain::GENESIS))
    }

    /// Inserts `batches` linked after `head` in one statement, which inserts nothing unless
    /// `head` is still the chain's newest; the newest hash after them.
    async fn append_after(&self, head: ChainHash, batches: &[&[AuditEntry]]) -> Result<ChainHash, Lost> {
        let entries = || batches.iter().flat_map(|batch| batch.iter());
        let links = audit_chain::link(head, entries());
        let Some(&(_, newest)) = links.last() else {
            return Ok(head);
        };
        let mut kept = self.append_connection.0.lock().await;
        let mut connection = match kept.take() {
            Some(connection) => connection,
            None => self.url.options.connect().await.map_err(Lost::Failed)?,
        };
        // Two nodes' inserts checking the same head at once both pass the check (neither sees
        // the other's rows before they commit): the unique index on PrevHash turns the second away.
        let inserted = sqlx::query(&format!(
            "INSERT INTO Audit (Time, UserName, Connection, Peer, Action, Target, OldValue, NewValue, Outcome, Signatures, PrevHash, Hash)
             SELECT a, b, c, d, e, f, g, h, i, j, k, l
             FROM UNNEST($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[],
                         $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::bytea[], $12::bytea[])
                  WITH ORDINALITY AS given(a, b, c, d, e, f, g, h, i, j, k, l, position)
             WHERE COALESCE({CHAIN_HEAD}, $14) = $13
             ORDER BY position"
        ))
        .bind(entries().map(|entry| millis(entry.time)).collect::<Vec<_>>())
        .bind(entries().map(|entry| entry.user.as_str()).collect::<Vec<_>>())
        .bind(entries().map(|entry| entry.connection.as_str()).collect::<Vec<_>>())
        .bind(entries().map(|entry| entry.peer.as_str()).collect::<Vec<_>>())
        .bind(entries().map(|entry| entry.action.as_str()).collect::<Vec<_>>())
        .bind(entries().map(|entry| entry.target.as_str()).collect::<Vec<_>>())
        .bind(entries().map(|entry| entry.old_value.as_deref()).collect::<Vec<_>>())
        .bind(entries().map(|entry| entry.new_value.as_deref()).collect::<Vec<_>>())
        .bind(entries().map(|entry| entry.outcome.as_str()).collect::<Vec<_>>())
        .bind(entries().map(|entry| entry.signatures.as_deref()).collect::<Vec<_>>())
        .bind(links.iter().map(|(previous, _)| previous.to_vec()).collect::<Vec<_>>())
        .bind(links.iter().map(|(_, hash)| hash.to_vec()).collect::<Vec<_>>())
        .bind(head.to_vec())
        .bind(audit_chain::GENESIS.to_vec())
        .execute(&mut connection)
        .await;
        let outcome = match inserted {
            Ok(done) if usize::try_from(done.rows_affected()) == Ok(links.len()) => Ok(newest),
            // The check failed: every row or none is inserted, one statement.
            Ok(_) => Err(Lost::Outpaced),
            Err(sqlx::Error::Database(error))
                if error.is_unique_violation() && error.constraint() == Some(FOLLOWS_INDEX) =>
            {
                Err(Lost::Outpaced)
            }
            Err(error @ sqlx::Error::Database(_)) => Err(Lost::Failed(error)),
            // The connection itself failed: the next attempt opens another.
            Err(error) => return Err(Lost::Broken { newest, error }),
        };
        *kept = Some(connection);
        outcome
    }

    /// Removes the oldest entries, up to the first recorded at or after `before` (a prefix of
    /// the chain), and leaves a signed checkpoint the first row kept links to; how many.
    pub(crate) async fn prune_audit(&self, before: SystemTime) -> Result<usize, SolutionError> {
        let mut transaction = self.locked(CHAIN_LOCK).await?;
        let last_pruned = sqlx::query(
            "SELECT Id, Hash FROM Audit
             WHERE Id < COALESCE((SELECT MIN(Id) FROM Audit WHERE Time >= $1), 9223372036854775807)
             ORDER BY Id DESC LIMIT 1",
        )
        .bind(millis(before))
        .fetch_optional(&mut *transaction)
        .await
        .map_err(|error| self.error(error))?;
        let Some(last_pruned) = last_pruned else {
            return Ok(0);
        };
        let through: i64 = self.get(&last_pruned, 0)?;
        let hash: Option<Vec<u8>> = self.get(&last_pruned, 1)?;
        let pruned = sqlx::query("DELETE FROM Audit WHERE Id <= $1")
            .bind(through)
            .execute(&mut *transaction)
            .await
            .map_err(|error| self.error(error))?
            .rows_affected();
        // Rows recorded before the chain need no checkpoint: the first chained row starts it.
        if let Some(hash) = hash.and_then(|hash| ChainHash::try_from(hash.as_slice()).ok()) {
            let signature = match load_key(None) {
                Ok(key) => Some(audit_chain::sign_checkpoint(key.as_slice(), through, &hash)),
                Err(error) => {
                    tracing::warn!(%error, "the audit checkpoint is left unsigned: `audit verify` will report it");
                    None
                }
            };
            sqlx::query(
                "INSERT INTO AuditCheckpoint (Time, ThroughId, Hash, Pruned, Signature) VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(millis(SystemTime::now()))
            .bind(through)
            .bind(hash.as_slice())
            .bind(i64::try_from(pruned).unwrap_or(i64::MAX))
            .bind(signature)
            .execute(&mut *transaction)
            .await
            .map_err(|error| self.error(error))?;
        }
        transaction.commit().await.map_err(|error| self.error(error))?;
        Ok(usize::try_from(pruned).unwrap_or(usize::MAX))
    }

    /// Walks the whole trail in the chain's order: where it first breaks, or what verified.
    pub(crate) async fn verify_audit(&self) -> Result<Result<ChainVerified, ChainBreak>, SolutionError> {
        let checkpoint = sqlx::query(
            "SELECT ThroughId, Hash, Signature FROM AuditCheckpoint ORDER BY ThroughId DESC LIMIT 1",
        )
        .fetch_optional(&self.pool)
        .await
        .map_err(|error| self.error(error))?
        .map(|row| -> Result<Checkpoint, SolutionError> {
            let hash: Vec<u8> = self.get(&row, 1)?;
            Ok(Checkpoint {
                through: self.get(&row, 0)?,
                // A stored hash of the wrong length links nothing: the first row kept shows it.
                hash: ChainHash::try_from(hash.as_slice()).unwrap_or(audit_chain::GENESIS),
                signature: self.get(&row, 2)?,
            })
        })
        .transpose()?;
        let key = load_key(None);
        let key = key
            .as_ref()
            .map(|key| key.as_slice())
            .map_err(ToString::to_string);
        let mut walk = ChainWalk::new(checkpoint.as_ref(), key);
        let mut after = i64::MIN;
        while !walk.is_broken() {
            let rows = sqlx::query(&format!(
                "SELECT Id, {ENTRY_COLUMNS}, PrevHash, Hash FROM Audit WHERE Id > $1 ORDER BY Id LIMIT $2"
            ))
            .bind(after)
            .bind(VERIFY_PAGE)
            .fetch_all(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
            let Some(last) = rows.last() else { break };
            after = self.get(last, 0)?;
            for row in &rows {
                walk.take(ChainedRow {
                    id: self.get(row, 0)?,
                    entry: self.entry_of(row, 1)?,
                    previous: self.get(row, 11)?,
                    hash: self.get(row, 12)?,
                });
            }
        }
        Ok(walk.finish())
    }

    /// Audit entries from `since` on, oldest first, at most `limit`.
    pub(crate) async fn audit(
        &self,
        since: Option<SystemTime>,
        limit: usize,
    ) -> Result<Vec<AuditEntry>, SolutionError> {
        let rows = sqlx::query(&format!(
            "SELECT {ENTRY_COLUMNS} FROM Audit WHERE Time >= $1 ORDER BY Id LIMIT $2"
        ))
        .bind(since.map_or(i64::MIN, millis))
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await
        .map_err(|error| self.error(error))?;
        rows.iter().map(|row| self.entry_of(row, 0)).collect()
    }

    /// An entry from the row's [`ENTRY_COLUMNS`] from `first` on.
    fn entry_of(&self, row: &PgRow, first: usize) -> Result<AuditEntry, SolutionError> {
        let action: String = row.try_get(first + 4).map_err(|error| self.error(error))?;
        Ok(AuditEntry {
            time: time_of(self.get(row, first)?),
            user: self.get(row, first + 1)?,
            connection: self.get(row, first + 2)?,
            peer: self.get(row, first + 3)?,
            action: AuditAction::parse(&action),
            target: self.get(row, first + 5)?,
            old_value: self.get(row, first + 6)?,
            new_value: self.get(row, first + 7)?,
            outcome: self.get(row, first + 8)?,
            signatures: self.get(row, first + 9)?,
        })
    }
}
