-- Schema version 3: the plant model file, and operators who act on it. Tags gain what the file
-- describes (writable, history options, a source binding); alarms gain the Digital condition;
-- folders get descriptions; the model as last imported is kept whole, so export gives back what
-- was imported and a running server sees a new import by its revision. Users get a role, and
-- every write and acknowledgement is audited.

ALTER TABLE Tags ADD COLUMN Writable INTEGER NOT NULL DEFAULT 0 CHECK (Writable IN (0, 1));
ALTER TABLE Tags ADD COLUMN History INTEGER NOT NULL DEFAULT 1 CHECK (History IN (0, 1));
ALTER TABLE Tags ADD COLUMN HistoryDeadband REAL NOT NULL DEFAULT 0 CHECK (HistoryDeadband >= 0);
-- The source binding as JSON ({"broker": ..., "topic": ...}); NULL: the runtime owns the value.
ALTER TABLE Tags ADD COLUMN Source TEXT NULL;

-- SQLite cannot change a CHECK, so the alarm table is rebuilt: Digital alarms watch a bool tag
-- (no limit; ActiveWhen is the abnormal state).
CREATE TABLE AlarmDefinitionsV3 (
    Name       TEXT    NOT NULL PRIMARY KEY,
    Tag        TEXT    NOT NULL REFERENCES Tags (Name),
    Condition  TEXT    NOT NULL CHECK (Condition IN ('HiHi', 'Hi', 'Lo', 'LoLo', 'Deviation', 'Digital')),
    LimitValue REAL    NULL,
    Setpoint   REAL    NULL,
    ActiveWhen INTEGER NULL CHECK (ActiveWhen IN (0, 1)),
    Deadband   REAL    NOT NULL DEFAULT 0 CHECK (Deadband >= 0),
    Priority   INTEGER NOT NULL DEFAULT 500 CHECK (Priority BETWEEN 1 AND 1000),
    Message    TEXT    NOT NULL DEFAULT '',
    CHECK (Condition <> 'Deviation' OR Setpoint IS NOT NULL),
    CHECK (Condition = 'Digital' OR LimitValue IS NOT NULL)
);
INSERT INTO AlarmDefinitionsV3 (Name, Tag, Condition, LimitValue, Setpoint, Deadband, Priority, Message)
    SELECT Name, Tag, Condition, LimitValue, Setpoint, Deadband, Priority, Message FROM AlarmDefinitions;
DROP TABLE AlarmDefinitions;
ALTER TABLE AlarmDefinitionsV3 RENAME TO AlarmDefinitions;

-- Folders the plant file describes (folders also exist wherever a tag's path passes).
CREATE TABLE Folders (
    Path        TEXT NOT NULL PRIMARY KEY,
    Description TEXT NOT NULL DEFAULT ''
);

-- The plant model as last imported: its canonical JSON (types and instances unexpanded),
-- bumped Revision on every import (a running server reloads when it changes).
CREATE TABLE PlantModel (
    Id         INTEGER NOT NULL PRIMARY KEY CHECK (Id = 1),
    Json       TEXT    NOT NULL,
    Revision   INTEGER NOT NULL,
    SourceName TEXT    NOT NULL,
    ImportedAt TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

-- What a user may do: viewer (read), operator (also write writable tags and acknowledge
-- alarms), admin (also what later admin calls allow). Users of an older solution become
-- viewers: that is all they could do before, so an upgrade gives nobody new powers.
ALTER TABLE Users ADD COLUMN Role TEXT NOT NULL DEFAULT 'viewer' CHECK (Role IN ('viewer', 'operator', 'admin'));

-- Every write and acknowledgement a client asked for, accepted or refused. Time is Unix
-- milliseconds; values are JSON text (old: before the write; new: asked for).
CREATE TABLE Audit (
    Id         INTEGER PRIMARY KEY,
    Time       INTEGER NOT NULL,
    UserName   TEXT    NOT NULL,
    Connection TEXT    NOT NULL,
    Peer       TEXT    NOT NULL,
    Action     TEXT    NOT NULL CHECK (Action IN ('write', 'acknowledge')),
    Target     TEXT    NOT NULL,
    OldValue   TEXT    NULL,
    NewValue   TEXT    NULL,
    Outcome    TEXT    NOT NULL
);
CREATE INDEX AuditByTime ON Audit (Time);

PRAGMA user_version = 3;
