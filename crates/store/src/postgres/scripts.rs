//! Solution scripts of a solution in PostgreSQL: the rules (names, compiling before storing,
//! classes not run by themselves) are `scripts.rs`'s; only the statements are this
//! backend's. Run records are added to in one statement, so two nodes recording at once (a
//! leader handing over) both count.

use std::time::{Duration, SystemTime};

use solution_scripts::Trigger;
use sqlx::postgres::PgRow;

use super::PgStore;
use crate::scripts::{exists, no_script, runnable, trigger_of};
use crate::{ScriptRecord, ScriptRun, ScriptTally, SolutionError, StoredScript, millis, time_of};

/// The columns [`PgStore::script_of_row`] reads.
const SCRIPT_COLUMNS: &str = "Name, Trigger, Source, Enabled, UpdatedAt";

impl PgStore {
    /// See `SolutionDb::add_script`.
    pub(crate) async fn add_script(
        &self,
        name: &str,
        trigger: &Trigger,
        source: &str,
    ) -> Result<StoredScript, SolutionError> {
        let script = StoredScript::new_checked(name, trigger, source)?;
        if let Some(existing) = self.script(name).await? {
            return Err(exists(&existing));
        }
        sqlx::query(
            "INSERT INTO Scripts (Name, Trigger, Source, Enabled, UpdatedAt) VALUES ($1, $2, $3, 1, $4)",
        )
        .bind(&script.name)
        .bind(script.trigger.to_string())
        .bind(&script.source)
        .bind(millis(script.updated_at))
        .execute(&self.pool)
        .await
        .map_err(|error| self.error(error))?;
        Ok(script)
    }

    /// See `SolutionDb::update_script`.
    pub(crate) async fn update_script(
        &self,
        name: &str,
        trigger: Option<&Trigger>,
        source: Option<&str>,
    ) -> Result<StoredScript, SolutionError> {
        let script = self.existing_script(name).await?.changed(trigger, source)?;
        sqlx::query("UPDATE Scripts SET Trigger = $2, Source = $3, UpdatedAt = $4 WHERE Name = $1")
            .bind(&script.name)
            .bind(script.trigger.to_string())
            .bind(&script.source)
            .bind(millis(script.updated_at))
            .execute(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
        Ok(script)
    }

    /// See `SolutionDb::set_script_enabled`.
    pub(crate) async fn set_script_enabled(
        &self,
        name: &str,
        enabled: bool,
    ) -> Result<StoredScript, SolutionError> {
        let script = self.existing_script(name).await?.switched(enabled);
        sqlx::query("UPDATE Scripts SET Enabled = $2, UpdatedAt = $3 WHERE Name = $1")
            .bind(&script.name)
            .bind(i32::from(enabled))
            .bind(millis(script.updated_at))
            .execute(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
        Ok(script)
    }

    /// See `SolutionDb::remove_script`.
    pub(crate) async fn remove_script(&self, name: &str) -> Result<StoredScript, SolutionError> {
        let script = self.existing_script(name).await?;
        // One statement, so the script and its record go together.
        sqlx::query(
            "WITH Gone AS (DELETE FROM Scripts WHERE Name = $1) DELETE FROM ScriptRuns WHERE Name = $1",
        )
        .bind(&script.name)
        .execute(&self.pool)
        .await
        .map_err(|error| self.error(error))?;
        Ok(script)
    }

    /// The script named `name` (any case), if stored.
    pub(crate) async fn script(&self, name: &str) -> Result<Option<StoredScript>, SolutionError> {
        let row = sqlx::query(&format!(
            "SELECT {SCRIPT_COLUMNS} FROM Scripts WHERE lower(Name) = lower($1)"
        ))
        .bind(name)
        .fetch_optional(&self.pool)
        .await
        .map_err(|error| self.error(error))?;
        row.map(|row| self.script_of_row(&row)).transpose()
    }

    async fn existing_script(&self, name: &str) -> Result<StoredScript, SolutionError> {
        self.script(name).await?.ok_or_else(|| no_script(name))
    }

    /// Every script, by name.
    pub(crate) async fn scripts(&self) -> Result<Vec<StoredScript>, SolutionError> {
        let rows = sqlx::query(&format!("SELECT {SCRIPT_COLUMNS} FROM Scripts ORDER BY Name"))
            .fetch_all(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
        rows.iter().map(|row| self.script_of_row(row)).collect()
    }

    fn script_of_row(&self, row: &PgRow) -> Result<StoredScript, SolutionError> {
        let name: String = self.get(row, 0)?;
        Ok(StoredScript {
            trigger: trigger_of(&name, &self.get::<String>(row, 1)?)?,
            name,
            source: self.get(row, 2)?,
            enabled: self.get::<i32>(row, 3)? != 0,
            updated_at: time_of(self.get(row, 4)?),
        })
    }

    /// Every script's run record, by name.
    pub(crate) async fn script_records(&self) -> Result<Vec<ScriptRecord>, SolutionError> {
        let rows = sqlx::query(
            "SELECT s.Name, s.Trigger, s.Enabled, r.Runs, r.Failures, r.Skipped, r.LastRunAt,
                    r.LastMicros, r.LastOutcome, r.LastError
             FROM Scripts s LEFT JOIN ScriptRuns r ON r.Name = s.Name ORDER BY s.Name",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(|error| self.error(error))?;
        let count = |row: &PgRow, index: usize| -> Result<u64, SolutionError> {
            Ok(u64::try_from(self.get::<Option<i64>>(row, index)?.unwrap_or(0)).unwrap_or(0))
        };
        rows.iter()
            .map(|row| {
                let last = match (
                    self.get::<Option<i64>>(row, 6)?,
                    self.get::<Option<String>>(row, 8)?,
                ) {
                    (Some(started), Some(outcome)) => Some(ScriptRun {
                        started_at: time_of(started),
                        duration: Duration::from_micros(count(row, 7)?),
                        outcome,
                        error: self.get(row, 9)?,
                    }),
                    _ => None,
                };
                Ok(ScriptRecord {
                    name: self.get(row, 0)?,
                    trigger: self.get(row, 1)?,
                    enabled: self.get::<i32>(row, 2)? != 0,
                    runs: count(row, 3)?,
                    failures: count(row, 4)?,
                    skipped: count(row, 5)?,
                    last,
                })
            })
            .collect()
    }

    /// See `SolutionDb::request_script_run`.
    pub(crate) async fn request_script_run(
        &self,
        name: &str,
    ) -> Result<(StoredScript, SystemTime), SolutionError> {
        let script = runnable(self.existing_script(name).await?)?;
        let requested_at = time_of(millis(SystemTime::now()));
        sqlx::query(
            "INSERT INTO ScriptRunRequests (Name, RequestedAt) VALUES ($1, $2)
             ON CONFLICT (Name) DO UPDATE SET RequestedAt = excluded.RequestedAt",
        )
        .bind(&script.name)
        .bind(millis(requested_at))
        .execute(&self.pool)
        .await
        .map_err(|error| self.error(error))?;
        Ok((script, requested_at))
    }

    /// Withdraws a run request nobody took.
    pub(crate) async fn withdraw_script_run(&self, name: &str) -> Result<(), SolutionError> {
        sqlx::query("DELETE FROM ScriptRunRequests WHERE Name = $1")
            .bind(name)
            .execute(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
        Ok(())
    }

    /// Takes the waiting run requests, oldest first: one statement, so a request is taken by
    /// one node only.
    pub(crate) async fn take_script_run_requests(&self) -> Result<Vec<String>, SolutionError> {
        let rows = sqlx::query("DELETE FROM ScriptRunRequests RETURNING Name, RequestedAt")
            .fetch_all(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
        let mut requests = rows
            .iter()
            .map(|row| Ok((self.get::<i64>(row, 1)?, self.get::<String>(row, 0)?)))
            .collect::<Result<Vec<_>, SolutionError>>()?;
        requests.sort();
        Ok(requests.into_iter().map(|(_, name)| name).collect())
    }

    /// Adds runs and skipped triggers to the scripts' records, in one statement.
    pub(crate) async fn record_script_runs(
        &self,
        tallies: &[(String, ScriptTally)],
    ) -> Result<(), SolutionError> {
        let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        sqlx::query(
            "INSERT INTO ScriptRuns (Name, Runs, Failures, Skipped, LastRunAt, LastMicros, LastOutcome, LastError)
             SELECT * FROM UNNEST($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[],
                                  $6::bigint[], $7::text[], $8::text[])
             ON CONFLICT (Name) DO UPDATE SET
                 Runs = ScriptRuns.Runs + excluded.Runs,
                 Failures = ScriptRuns.Failures + excluded.Failures,
                 Skipped = ScriptRuns.Skipped + excluded.Skipped,
                 LastRunAt = COALESCE(excluded.LastRunAt, ScriptRuns.LastRunAt),
                 LastMicros = CASE WHEN excluded.LastRunAt IS NULL THEN ScriptRuns.LastMicros ELSE excluded.LastMicros END,
                 LastOutcome = CASE WHEN excluded.LastRunAt IS NULL THEN ScriptRuns.LastOutcome ELSE excluded.LastOutcome END,
                 LastError = CASE WHEN excluded.LastRunAt IS NULL THEN ScriptRuns.LastError ELSE excluded.LastError END",
        )
        .bind(tallies.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>())
        .bind(tallies.iter().map(|(_, tally)| count(tally.runs)).collect::<Vec<_>>())
        .bind(tallies.iter().map(|(_, tally)| count(tally.failures)).collect::<Vec<_>>())
        .bind(tallies.iter().map(|(_, tally)| count(tally.skipped)).collect::<Vec<_>>())
        .bind(
            tallies
                .iter()
                .map(|(_, tally)| tally.last.as_ref().map(|run| millis(run.started_at)))
                .collect::<Vec<_>>(),
        )
        .bind(
            tallies
                .iter()
                .map(|(_, tally)| tally.last.as_ref().map(|run| i64::try_from(run.duration.as_micros()).unwrap_or(i64::MAX)))
                .collect::<Vec<_>>(),
        )
        .bind(
            tallies
                .iter()
                .map(|(_, tally)| tally.last.as_ref().map(|run| run.outcome.as_str()))
                .collect::<Vec<_>>(),
        )
        .bind(
            tallies
                .iter()
                .map(|(_, tally)| tally.last.as_ref().and_then(|run| run.error.as_deref()))
                .collect::<Vec<_>>(),
        )
        .execute(&self.pool)
        .await
        .map_err(|error| self.error(error))?;
        Ok(())
    }
}
