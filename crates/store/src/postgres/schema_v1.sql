-- The solution in PostgreSQL, schema version 1: the same tables and meanings as a SQLite
-- solution of version 6 (solution/schema*.sql), in one script. Differences, each for a reason:
-- unquoted names (PostgreSQL folds them to lower case, so queries spell them as SQLite's do);
-- case-insensitive names through unique indexes on lower(Name) (no extension needed);
-- TIMESTAMPTZ where SQLite keeps ISO text; BYTEA for blobs; identity columns for row ids;
-- history values as JSONB (SQLite's column keeps each value's own type); ApiTokens.UserName for
-- SQLite's User (a reserved word here).

-- The three Local AI columns of the spec, exactly; one row (the unique index on a constant).
CREATE TABLE SolutionSettings (
    ModelEnabled  INTEGER NOT NULL DEFAULT 0 CHECK (ModelEnabled IN (0, 1)),
    ModelSettings TEXT    NULL,
    -- BIGINT: every bit of the 32-bit mask, as SQLite's 64-bit INTEGER holds it.
    ModelOptions  BIGINT  NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX SolutionSettingsHoldsOneRow ON SolutionSettings ((TRUE));
INSERT INTO SolutionSettings DEFAULT VALUES;

CREATE TABLE RuntimeSettings (
    Key   TEXT NOT NULL PRIMARY KEY,
    Value TEXT NOT NULL
);

-- PasswordHash: an argon2 PHC string; NULL for a passwordless user (the demo's guest).
CREATE TABLE Users (
    Name         TEXT        NOT NULL PRIMARY KEY,
    PasswordHash TEXT        NULL,
    CreatedAt    TIMESTAMPTZ NOT NULL DEFAULT now(),
    Role         TEXT        NOT NULL DEFAULT 'viewer' CHECK (Role IN ('viewer', 'operator', 'admin'))
);
CREATE UNIQUE INDEX UsersByLowerName ON Users (lower(Name));

CREATE TABLE Tags (
    Name            TEXT             NOT NULL PRIMARY KEY,
    Path            TEXT             NOT NULL UNIQUE,
    Type            TEXT             NOT NULL CHECK (Type IN ('number', 'integer', 'bool', 'text')),
    Units           TEXT             NOT NULL DEFAULT '',
    Description     TEXT             NOT NULL DEFAULT '',
    RangeLow        DOUBLE PRECISION NULL,
    RangeHigh       DOUBLE PRECISION NULL,
    InitialValue    TEXT             NULL,
    Writable        INTEGER          NOT NULL DEFAULT 0 CHECK (Writable IN (0, 1)),
    History         INTEGER          NOT NULL DEFAULT 1 CHECK (History IN (0, 1)),
    HistoryDeadband DOUBLE PRECISION NOT NULL DEFAULT 0 CHECK (HistoryDeadband >= 0),
    Source          TEXT             NULL
);

CREATE TABLE AlarmDefinitions (
    Name       TEXT             NOT NULL PRIMARY KEY,
    Tag        TEXT             NOT NULL REFERENCES Tags (Name),
    Condition  TEXT             NOT NULL CHECK (Condition IN ('HiHi', 'Hi', 'Lo', 'LoLo', 'Deviation', 'Digital')),
    LimitValue DOUBLE PRECISION NULL,
    Setpoint   DOUBLE PRECISION NULL,
    ActiveWhen INTEGER          NULL CHECK (ActiveWhen IN (0, 1)),
    Deadband   DOUBLE PRECISION NOT NULL DEFAULT 0 CHECK (Deadband >= 0),
    Priority   INTEGER          NOT NULL DEFAULT 500 CHECK (Priority BETWEEN 1 AND 1000),
    Message    TEXT             NOT NULL DEFAULT '',
    CHECK (Condition <> 'Deviation' OR Setpoint IS NOT NULL),
    CHECK (Condition = 'Digital' OR LimitValue IS NOT NULL)
);

CREATE TABLE Simulation (
    Tag           TEXT             NOT NULL PRIMARY KEY REFERENCES Tags (Name),
    Amplitude     DOUBLE PRECISION NOT NULL DEFAULT 0,
    PeriodSeconds DOUBLE PRECISION NOT NULL DEFAULT 600 CHECK (PeriodSeconds > 0),
    Phase         DOUBLE PRECISION NOT NULL DEFAULT 0,
    Noise         DOUBLE PRECISION NOT NULL DEFAULT 0 CHECK (Noise >= 0)
);

CREATE TABLE Folders (
    Path        TEXT NOT NULL PRIMARY KEY,
    Description TEXT NOT NULL DEFAULT ''
);

CREATE TABLE PlantModel (
    Id         INTEGER     NOT NULL PRIMARY KEY CHECK (Id = 1),
    Json       TEXT        NOT NULL,
    Revision   BIGINT      NOT NULL,
    SourceName TEXT        NOT NULL,
    ImportedAt TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Historian samples: Time in Unix milliseconds, Value a JSON scalar of the tag's type.
CREATE TABLE TagHistory (
    Tag     TEXT    NOT NULL,
    Time    BIGINT  NOT NULL,
    Value   JSONB   NULL,
    Quality INTEGER NOT NULL
);
CREATE INDEX TagHistoryByTagTime ON TagHistory (Tag, Time);
CREATE INDEX TagHistoryByTime ON TagHistory (Time);

CREATE TABLE AlarmHistory (
    Id        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    Time      BIGINT           NOT NULL,
    Alarm     TEXT             NOT NULL,
    Tag       TEXT             NOT NULL,
    Condition TEXT             NOT NULL,
    Event     TEXT             NOT NULL CHECK (Event IN ('Active', 'Acknowledged', 'Cleared')),
    Value     DOUBLE PRECISION NULL,
    Priority  INTEGER          NOT NULL,
    Message   TEXT             NOT NULL,
    UserName  TEXT             NULL
);
CREATE INDEX AlarmHistoryByTime ON AlarmHistory (Time);

CREATE TABLE Audit (
    Id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    Time       BIGINT NOT NULL,
    UserName   TEXT   NOT NULL,
    Connection TEXT   NOT NULL,
    Peer       TEXT   NOT NULL,
    Action     TEXT   NOT NULL CHECK (Action IN ('write', 'acknowledge')),
    Target     TEXT   NOT NULL,
    OldValue   TEXT   NULL,
    NewValue   TEXT   NULL,
    Outcome    TEXT   NOT NULL
);
CREATE INDEX AuditByTime ON Audit (Time);

-- Secrets: ChaCha20-Poly1305 ciphertexts, the name as associated data, the key outside.
CREATE TABLE Secrets (
    Name       TEXT        NOT NULL PRIMARY KEY,
    Nonce      BYTEA       NOT NULL,
    Ciphertext BYTEA       NOT NULL,
    UpdatedAt  TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- What each node's MQTT sources report; several nodes report the same source, so the node
-- is part of the key.
CREATE TABLE SourceReports (
    Node       TEXT   NOT NULL,
    Name       TEXT   NOT NULL,
    Report     TEXT   NOT NULL,
    ReportedAt BIGINT NOT NULL,
    PRIMARY KEY (Node, Name)
);

CREATE TABLE ApiTokens (
    Id        TEXT   NOT NULL PRIMARY KEY,
    Name      TEXT   NOT NULL DEFAULT '',
    UserName  TEXT   NOT NULL REFERENCES Users (Name) ON DELETE CASCADE,
    Digest    TEXT   NOT NULL,
    CreatedAt BIGINT NOT NULL,
    ExpiresAt BIGINT NULL
);
CREATE INDEX ApiTokensByUser ON ApiTokens (UserName);

CREATE TABLE Scripts (
    Name      TEXT    NOT NULL PRIMARY KEY,
    Trigger   TEXT    NOT NULL,
    Source    TEXT    NOT NULL,
    Enabled   INTEGER NOT NULL DEFAULT 1,
    UpdatedAt BIGINT  NOT NULL
);
CREATE UNIQUE INDEX ScriptsByLowerName ON Scripts (lower(Name));

CREATE TABLE ScriptRuns (
    Name        TEXT    NOT NULL PRIMARY KEY,
    Runs        BIGINT  NOT NULL DEFAULT 0,
    Failures    BIGINT  NOT NULL DEFAULT 0,
    Skipped     BIGINT  NOT NULL DEFAULT 0,
    LastRunAt   BIGINT  NULL,
    LastMicros  BIGINT  NULL,
    LastOutcome TEXT    NULL,
    LastError   TEXT    NULL
);
CREATE UNIQUE INDEX ScriptRunsByLowerName ON ScriptRuns (lower(Name));

CREATE TABLE ScriptRunRequests (
    Name        TEXT   NOT NULL PRIMARY KEY,
    RequestedAt BIGINT NOT NULL
);
CREATE UNIQUE INDEX ScriptRunRequestsByLowerName ON ScriptRunRequests (lower(Name));

-- Failed logins by peer address, counted by every node alike (times from the database's
-- clock, so nodes whose clocks drift still agree on a lockout).
CREATE TABLE LoginFailures (
    Peer          TEXT        NOT NULL PRIMARY KEY,
    Failures      INTEGER     NOT NULL,
    LastFailureAt TIMESTAMPTZ NOT NULL,
    LockedUntil   TIMESTAMPTZ NULL
);
