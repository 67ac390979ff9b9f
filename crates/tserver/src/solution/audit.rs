//! The audit trail: every tag write and alarm acknowledgement a client asked for, who asked,
//! from which connection, the value before and the value asked for, and what came of it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::params;

use super::{SolutionDb, SolutionError};

/// What was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditAction {
    /// A tag write.
    Write,
    /// An alarm acknowledgement.
    Acknowledge,
}

impl AuditAction {
    fn as_str(self) -> &'static str {
        match self {
            Self::Write => "write",
            Self::Acknowledge => "acknowledge",
        }
    }

    fn parse(text: &str) -> Self {
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

fn millis(time: SystemTime) -> i64 {
    i64::try_from(time.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis()).unwrap_or(i64::MAX)
}

impl SolutionDb {
    /// Records entries in one transaction: all of them, or (on an error) none.
    pub fn record_audit(&self, entries: &[AuditEntry]) -> Result<(), SolutionError> {
        let mut connection = self.writer()?;
        let transaction = connection.transaction()?;
        {
            let mut insert = transaction.prepare_cached(
                "INSERT INTO Audit (Time, UserName, Connection, Peer, Action, Target, OldValue, NewValue, Outcome)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?;
            for entry in entries {
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

    /// The entries since `since` (all without it), oldest first, at most `limit`.
    pub fn audit(&self, since: Option<SystemTime>, limit: usize) -> Result<Vec<AuditEntry>, SolutionError> {
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
                        time: UNIX_EPOCH + Duration::from_millis(u64::try_from(time).unwrap_or_default()),
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
