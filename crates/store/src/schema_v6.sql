-- Schema version 6: solution scripts (Rhai). A script is stored as given, with its trigger and
-- whether it is enabled; its run record sits beside it, so `tserver scripts status` can read
-- what a running server did. Names are identifiers, unique regardless of case, because classes
-- are imported by name.

CREATE TABLE Scripts (
    Name      TEXT    NOT NULL PRIMARY KEY COLLATE NOCASE,
    Trigger   TEXT    NOT NULL,
    Source    TEXT    NOT NULL,
    Enabled   INTEGER NOT NULL DEFAULT 1,
    UpdatedAt INTEGER NOT NULL
);

CREATE TABLE ScriptRuns (
    Name        TEXT    NOT NULL PRIMARY KEY COLLATE NOCASE,
    Runs        INTEGER NOT NULL DEFAULT 0,
    Failures    INTEGER NOT NULL DEFAULT 0,
    Skipped     INTEGER NOT NULL DEFAULT 0,
    LastRunAt   INTEGER NULL,
    LastMicros  INTEGER NULL,
    LastOutcome TEXT    NULL,
    LastError   TEXT    NULL
);

-- `tserver scripts PATH run NAME` asks the serving tserver for a run here; the server takes
-- the request (deletes the row) when it starts the run.
CREATE TABLE ScriptRunRequests (
    Name        TEXT    NOT NULL PRIMARY KEY COLLATE NOCASE,
    RequestedAt INTEGER NOT NULL
);

PRAGMA user_version = 6;
