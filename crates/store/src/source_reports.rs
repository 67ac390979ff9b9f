//! The MQTT sources' reports as the running server last wrote them: one JSON document per
//! source (the sources module owns its shape) and when it was written.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::params;

use super::{SolutionDb, SolutionError};

/// One source's stored report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceReport {
    /// The source's name.
    pub name: String,
    /// The node that wrote it (`None` for a solution file, which one server serves).
    pub node: Option<String>,
    /// The report, as JSON.
    pub report: String,
    /// When the server wrote it.
    pub reported_at: SystemTime,
}

impl SolutionDb {
    /// Replaces the stored reports with `reports` (name, JSON), written now.
    pub(crate) fn replace_source_reports(&self, reports: &[(String, String)]) -> Result<(), SolutionError> {
        let now = i64::try_from(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_millis(),
        )
        .unwrap_or(i64::MAX);
        let mut connection = self.writer()?;
        let transaction = connection.transaction()?;
        transaction.execute("DELETE FROM SourceReports", [])?;
        for (name, report) in reports {
            transaction.execute(
                "INSERT INTO SourceReports (Name, Report, ReportedAt) VALUES (?1, ?2, ?3)",
                params![name, report, now],
            )?;
        }
        transaction.commit()?;
        Ok(())
    }

    /// The stored reports, by name.
    pub(crate) fn source_reports(&self) -> Result<Vec<SourceReport>, SolutionError> {
        self.read(|connection| {
            let mut statement =
                connection.prepare("SELECT Name, Report, ReportedAt FROM SourceReports ORDER BY Name")?;
            let rows = statement.query_map([], |row| {
                let millis: i64 = row.get(2)?;
                Ok(SourceReport {
                    name: row.get(0)?,
                    node: None,
                    report: row.get(1)?,
                    reported_at: UNIX_EPOCH + Duration::from_millis(u64::try_from(millis).unwrap_or(0)),
                })
            })?;
            rows.collect()
        })
    }
}
