-- Schema version 4: what a running server's MQTT sources report (connection state, counts,
-- the last error), so `tserver sources PATH status` can show it from another process. The
-- server replaces the rows every few seconds; the report is JSON the sources module writes.

CREATE TABLE SourceReports (
    Name       TEXT    NOT NULL PRIMARY KEY,
    Report     TEXT    NOT NULL,
    ReportedAt INTEGER NOT NULL
);

PRAGMA user_version = 4;
