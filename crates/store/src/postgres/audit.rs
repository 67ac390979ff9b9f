//! The audit trail on PostgreSQL: rows appended as a hash chain one node at a time (an
//! advisory lock held while the newest hash is read and the rows are inserted, so nodes never
//! fork the chain), pruned as a prefix with a signed checkpoint, and verified in id order.

use std::time::SystemTime;

use sqlx::Row;
use sqlx::postgres::PgRow;

use super::PgStore;
use crate::audit_chain::{self, ChainBreak, ChainHash, ChainVerified, ChainWalk, ChainedRow, Checkpoint};
use crate::secrets::load_key;
use crate::{AuditAction, AuditEntry, SolutionError, millis, time_of};

/// The advisory lock an append and a prune hold ("taudit" in ASCII).
const CHAIN_LOCK: i64 = 0x7461_7564_6974;

/// Rows read at a time by [`PgStore::verify_audit`].
const VERIFY_PAGE: i64 = 10_000;

/// The columns of an entry, in the order [`PgStore::entry_of`] reads them from `first` on.
const ENTRY_COLUMNS: &str =
    "Time, UserName, Connection, Peer, Action, Target, OldValue, NewValue, Outcome, Signatures";

impl PgStore {
    /// Appends audit entries, all of them or none, each linked to the one before it.
    pub(crate) async fn record_audit_batches(&self, batches: &[&[AuditEntry]]) -> Result<(), SolutionError> {
        let entries = || batches.iter().flat_map(|batch| batch.iter());
        let mut transaction = self.locked(CHAIN_LOCK).await?;
        // The newest chained row's hash (a row put in after it without one is passed over, so
        // verification names it), else the latest checkpoint's, else the chain's start.
        let head: Option<Option<Vec<u8>>> = sqlx::query_scalar(
            "SELECT COALESCE(
                 (SELECT Hash FROM Audit WHERE Hash IS NOT NULL ORDER BY Id DESC LIMIT 1),
                 (SELECT Hash FROM AuditCheckpoint ORDER BY ThroughId DESC LIMIT 1))",
        )
        .fetch_optional(&mut *transaction)
        .await
        .map_err(|error| self.error(error))?;
        let head = head
            .flatten()
            .and_then(|hash| ChainHash::try_from(hash.as_slice()).ok())
            .unwrap_or(audit_chain::GENESIS);
        let links = audit_chain::link(head, entries());
        sqlx::query(
            "INSERT INTO Audit (Time, UserName, Connection, Peer, Action, Target, OldValue, NewValue, Outcome, Signatures, PrevHash, Hash)
             SELECT a, b, c, d, e, f, g, h, i, j, k, l
             FROM UNNEST($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[],
                         $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::bytea[], $12::bytea[])
                  WITH ORDINALITY AS given(a, b, c, d, e, f, g, h, i, j, k, l, position)
             ORDER BY position",
        )
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
        .execute(&mut *transaction)
        .await
        .map_err(|error| self.error(error))?;
        transaction.commit().await.map_err(|error| self.error(error))?;
        Ok(())
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
