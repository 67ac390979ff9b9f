//! Alarm history and the audit trail of a solution in PostgreSQL, appended in one statement per
//! table (arrays unnested server-side), and the history flush that journals tag samples beside
//! them (the blocks themselves are `history_blocks`'s).

use std::time::SystemTime;

use super::PgStore;
use plant_model::AlarmEvent;

use crate::SolutionError;
use crate::history::{
    AlarmHistoryPage, HistoryLimits, KeptHandling, PendingSample, REMOVE_HANDLING, SELECT_HANDLING,
    SET_HANDLING, StoredAlarmEvent, handling_change, kept_handling, unix_millis,
};

impl PgStore {
    /// An `AlarmHistory` row (its columns in the order [`StoredAlarmEvent`] has them) as an
    /// event.
    fn alarm_event_of_row(&self, row: &sqlx::postgres::PgRow) -> Result<AlarmEvent, SolutionError> {
        Ok(StoredAlarmEvent {
            time: self.get(row, 0)?,
            alarm: self.get(row, 1)?,
            tag: self.get(row, 2)?,
            condition: self.get(row, 3)?,
            kind: self.get(row, 4)?,
            value: self.get(row, 5)?,
            priority: u32::try_from(self.get::<i32>(row, 6)?).unwrap_or(0),
            message: self.get(row, 7)?,
            user: self.get(row, 8)?,
            reason: self.get(row, 9)?,
            until: self.get(row, 10)?,
        }
        .into_event())
    }

    /// The alarms shelved or out of service now; see `SolutionDb::alarm_handling`.
    pub(crate) async fn alarm_handling(&self) -> Result<Vec<KeptHandling>, SolutionError> {
        let rows = sqlx::query(SELECT_HANDLING)
            .fetch_all(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
        rows.iter()
            .map(|row| {
                Ok(kept_handling(
                    self.get(row, 0)?,
                    &self.get::<String>(row, 1)?,
                    self.get(row, 2)?,
                    self.get(row, 3)?,
                    (self.get(row, 4)?, self.get(row, 5)?),
                ))
            })
            .collect()
    }

    /// Journals samples and appends alarm events in one transaction, prunes blocks and events
    /// past the `limits`, then folds the journal into blocks when it is due.
    pub(crate) async fn write_history(
        &self,
        samples: &[PendingSample],
        events: &[AlarmEvent],
        limits: &HistoryLimits,
    ) -> Result<(), SolutionError> {
        let now = unix_millis(SystemTime::now());
        let mut transaction = self.pool.begin().await.map_err(|error| self.error(error))?;
        let ids = self.journal_samples(&mut transaction, samples, now).await?;
        if !events.is_empty() {
            sqlx::query(
                "INSERT INTO AlarmHistory (Time, Alarm, Tag, Condition, Event, Value, Priority, Message, UserName,
                     Reason, Until)
                 SELECT * FROM UNNEST($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[],
                                      $6::float8[], $7::integer[], $8::text[], $9::text[], $10::text[],
                                      $11::bigint[])",
            )
            .bind(events.iter().map(|event| unix_millis(event.time)).collect::<Vec<_>>())
            .bind(events.iter().map(|event| event.alarm.as_str()).collect::<Vec<_>>())
            .bind(events.iter().map(|event| event.tag.as_str()).collect::<Vec<_>>())
            .bind(events.iter().map(|event| event.condition.name()).collect::<Vec<_>>())
            .bind(events.iter().map(|event| event.kind.as_str()).collect::<Vec<_>>())
            .bind(events.iter().map(|event| event.value).collect::<Vec<_>>())
            .bind(
                events
                    .iter()
                    .map(|event| i32::try_from(event.priority).unwrap_or(i32::MAX))
                    .collect::<Vec<_>>(),
            )
            .bind(events.iter().map(|event| event.message.as_str()).collect::<Vec<_>>())
            .bind(events.iter().map(|event| event.user.as_deref()).collect::<Vec<_>>())
            .bind(events.iter().map(|event| event.reason.as_deref()).collect::<Vec<_>>())
            .bind(events.iter().map(|event| event.until.map(unix_millis)).collect::<Vec<_>>())
            .execute(&mut *transaction)
            .await
            .map_err(|error| self.error(error))?;
            for event in events {
                let (set, removed) = handling_change(event.kind);
                for kind in removed {
                    sqlx::query(REMOVE_HANDLING)
                        .bind(&event.alarm)
                        .bind(kind)
                        .execute(&mut *transaction)
                        .await
                        .map_err(|error| self.error(error))?;
                }
                if let Some(kind) = set {
                    sqlx::query(SET_HANDLING)
                        .bind(&event.alarm)
                        .bind(kind)
                        .bind(event.user.as_deref().unwrap_or_default())
                        .bind(event.reason.as_deref().unwrap_or_default())
                        .bind(unix_millis(event.time))
                        .bind(event.until.map(unix_millis))
                        .execute(&mut *transaction)
                        .await
                        .map_err(|error| self.error(error))?;
                }
            }
        }
        let cutoff = unix_millis(limits.keep_after);
        // Tags with a retention of their own are pruned at checkpoints.
        sqlx::query(
            "DELETE FROM HistoryBlocks WHERE Last < $1
             AND Tag NOT IN (SELECT Id FROM HistoryTags WHERE Name = ANY($2))",
        )
        .bind(cutoff)
        .bind(limits.own_names())
        .execute(&mut *transaction)
        .await
        .map_err(|error| self.error(error))?;
        sqlx::query("DELETE FROM AlarmHistory WHERE Time < $1")
            .bind(cutoff)
            .execute(&mut *transaction)
            .await
            .map_err(|error| self.error(error))?;
        transaction.commit().await.map_err(|error| self.error(error))?;
        self.after_journal(ids, samples.len(), now, limits).await
    }

    /// Alarm transitions between `from` and `to` (unix milliseconds), newest first, as
    /// `SolutionDb::alarm_history` answers.
    pub(crate) async fn alarm_history(
        &self,
        tag: Option<&str>,
        (from, to): (i64, i64),
        max_events: usize,
    ) -> Result<AlarmHistoryPage, SolutionError> {
        let total: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM AlarmHistory WHERE Time BETWEEN $1 AND $2 AND ($3::text IS NULL OR Tag = $3)",
        )
        .bind(from)
        .bind(to)
        .bind(tag)
        .fetch_one(&self.pool)
        .await
        .map_err(|error| self.error(error))?;
        let rows = sqlx::query(
            "SELECT Time, Alarm, Tag, Condition, Event, Value, Priority, Message, UserName, Reason, Until
             FROM AlarmHistory WHERE Time BETWEEN $1 AND $2 AND ($3::text IS NULL OR Tag = $3)
             ORDER BY Time DESC, Id DESC LIMIT $4",
        )
        .bind(from)
        .bind(to)
        .bind(tag)
        .bind(i64::try_from(max_events).unwrap_or(i64::MAX))
        .fetch_all(&self.pool)
        .await
        .map_err(|error| self.error(error))?;
        let events = rows
            .iter()
            .map(|row| self.alarm_event_of_row(row))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(AlarmHistoryPage {
            events,
            total: usize::try_from(total).unwrap_or(0),
        })
    }

    /// How each alarm stood at `from` and the window's events, as `SolutionDb::alarm_record`
    /// answers.
    pub(crate) async fn alarm_record(
        &self,
        (from, to): (i64, i64),
        max_events: usize,
    ) -> Result<crate::AlarmRecord, SolutionError> {
        let standing = sqlx::query(crate::history::SELECT_STANDING)
            .bind(from)
            .fetch_all(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
        let total: i64 = sqlx::query_scalar(crate::history::COUNT_WINDOW_EVENTS)
            .bind(from)
            .bind(to)
            .fetch_one(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
        let events = sqlx::query(crate::history::SELECT_WINDOW_EVENTS)
            .bind(from)
            .bind(to)
            .bind(i64::try_from(max_events).unwrap_or(i64::MAX))
            .fetch_all(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
        let events_of = |rows: &[sqlx::postgres::PgRow]| {
            rows.iter()
                .map(|row| self.alarm_event_of_row(row))
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(crate::AlarmRecord {
            standing: events_of(&standing)?,
            events: events_of(&events)?,
            total: usize::try_from(total).unwrap_or(0),
        })
    }

    /// What the alarm history recorded of each alarm since its last trip, oldest first; see
    /// `SolutionDb::alarm_events_since_last_trip`.
    pub(crate) async fn alarm_events_since_last_trip(&self) -> Result<Vec<AlarmEvent>, SolutionError> {
        let rows = sqlx::query(crate::plant::ALARM_EVENTS_SINCE_LAST_TRIP)
            .fetch_all(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
        let events = rows
            .iter()
            .map(|row| self.alarm_event_of_row(row))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(events)
    }

    /// The acts on alarms (acknowledgements, shelving, service) recorded after the alarm event
    /// `after` (its `Id`), oldest first, and the last id read. `None` for `after`: the last id
    /// recorded so far, and no act (where a node starts reading).
    pub(crate) async fn alarm_acts_since(
        &self,
        after: Option<i64>,
    ) -> Result<(i64, Vec<AlarmEvent>), SolutionError> {
        let Some(after) = after else {
            let last: Option<i64> = sqlx::query_scalar("SELECT max(Id) FROM AlarmHistory")
                .fetch_one(&self.pool)
                .await
                .map_err(|error| self.error(error))?;
            return Ok((last.unwrap_or(0), Vec::new()));
        };
        let rows = sqlx::query(
            "SELECT Time, Alarm, Tag, Condition, Event, Value, Priority, Message, UserName, Reason, Until, Id
             FROM AlarmHistory WHERE Id > $1 AND Event NOT IN ('Active', 'Cleared') ORDER BY Id",
        )
        .bind(after)
        .fetch_all(&self.pool)
        .await
        .map_err(|error| self.error(error))?;
        let mut last = after;
        let mut acts = Vec::with_capacity(rows.len());
        for row in rows {
            last = last.max(self.get(&row, 11)?);
            acts.push(self.alarm_event_of_row(&row)?);
        }
        Ok((last, acts))
    }
}
