//! The MQTT sources' reports of a solution in PostgreSQL: every node connects to the same
//! brokers, so each node's reports are kept under its own name, replaced whole each time it
//! writes them; a node gone for [`STALE_AFTER`] has its reports removed by the others.

use std::time::{Duration, SystemTime};

use super::PgStore;
use crate::{SolutionError, SourceReport, millis, time_of};

/// How long the reports of a node that stopped writing them are kept.
const STALE_AFTER: Duration = Duration::from_secs(600);

/// This node's name in the reports: the host and the process.
pub(super) fn node_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|host| host.trim().to_owned())
        .ok()
        .filter(|host| !host.is_empty())
        .unwrap_or_else(|| "node".to_owned());
    format!("{host}:{}", std::process::id())
}

impl PgStore {
    /// Replaces this node's reports with `reports` (name, JSON), written now, and removes
    /// those of nodes silent for [`STALE_AFTER`].
    pub(crate) async fn replace_source_reports(
        &self,
        reports: &[(String, String)],
    ) -> Result<(), SolutionError> {
        let now = SystemTime::now();
        let mut transaction = self.pool.begin().await.map_err(|error| self.error(error))?;
        sqlx::query("DELETE FROM SourceReports WHERE Node = $1 OR ReportedAt < $2")
            .bind(&self.node)
            .bind(millis(now.checked_sub(STALE_AFTER).unwrap_or(now)))
            .execute(&mut *transaction)
            .await
            .map_err(|error| self.error(error))?;
        sqlx::query(
            "INSERT INTO SourceReports (Node, Name, Report, ReportedAt)
             SELECT $1, Name, Report, $4 FROM UNNEST($2::text[], $3::text[]) AS Reports (Name, Report)",
        )
        .bind(&self.node)
        .bind(reports.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>())
        .bind(
            reports
                .iter()
                .map(|(_, report)| report.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(millis(now))
        .execute(&mut *transaction)
        .await
        .map_err(|error| self.error(error))?;
        transaction.commit().await.map_err(|error| self.error(error))
    }

    /// Every node's reports, by source name then node.
    pub(crate) async fn source_reports(&self) -> Result<Vec<SourceReport>, SolutionError> {
        let rows =
            sqlx::query("SELECT Name, Node, Report, ReportedAt FROM SourceReports ORDER BY Name, Node")
                .fetch_all(&self.pool)
                .await
                .map_err(|error| self.error(error))?;
        rows.iter()
            .map(|row| {
                Ok(SourceReport {
                    name: self.get(row, 0)?,
                    node: Some(self.get(row, 1)?),
                    report: self.get(row, 2)?,
                    reported_at: time_of(self.get(row, 3)?),
                })
            })
            .collect()
    }
}
