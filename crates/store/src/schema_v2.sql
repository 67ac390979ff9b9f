-- Schema version 2: the live plant beyond tags (alarms, simulation, history) and the runtime's
-- own settings. Applied to a new file after version 1, and to a version-1 file when it opens.

-- Runtime settings that are not Local AI settings (SolutionSettings keeps exactly the spec's
-- three columns). Keys: SimulatorEnabled (0/1), HistoryRetentionHours (a positive integer).
CREATE TABLE RuntimeSettings (
    Key   TEXT NOT NULL PRIMARY KEY,
    Value TEXT NOT NULL
);

-- Alarm definitions on tags. Condition HiHi/Hi trips at Value >= LimitValue, Lo/LoLo at
-- Value <= LimitValue, Deviation at |Value - Setpoint| >= LimitValue; the alarm clears once the
-- value is back inside the limit by Deadband. Priority 1..1000, higher is more urgent.
CREATE TABLE AlarmDefinitions (
    Name       TEXT    NOT NULL PRIMARY KEY,
    Tag        TEXT    NOT NULL REFERENCES Tags (Name),
    Condition  TEXT    NOT NULL CHECK (Condition IN ('HiHi', 'Hi', 'Lo', 'LoLo', 'Deviation')),
    LimitValue REAL    NOT NULL,
    Setpoint   REAL    NULL,
    Deadband   REAL    NOT NULL DEFAULT 0 CHECK (Deadband >= 0),
    Priority   INTEGER NOT NULL DEFAULT 500 CHECK (Priority BETWEEN 1 AND 1000),
    Message    TEXT    NOT NULL DEFAULT '',
    CHECK (Condition <> 'Deviation' OR Setpoint IS NOT NULL)
);

-- How the simulator moves a numeric tag: its initial value plus a sine of Amplitude and
-- PeriodSeconds (shifted by Phase radians) plus bounded noise, clamped to the tag's range.
CREATE TABLE Simulation (
    Tag           TEXT NOT NULL PRIMARY KEY REFERENCES Tags (Name),
    Amplitude     REAL NOT NULL DEFAULT 0,
    PeriodSeconds REAL NOT NULL DEFAULT 600 CHECK (PeriodSeconds > 0),
    Phase         REAL NOT NULL DEFAULT 0,
    Noise         REAL NOT NULL DEFAULT 0 CHECK (Noise >= 0)
);

-- Historian samples. Time is Unix milliseconds; Value keeps the tag's type (no affinity).
CREATE TABLE TagHistory (
    Tag     TEXT    NOT NULL,
    Time    INTEGER NOT NULL,
    Value,
    Quality INTEGER NOT NULL
);
CREATE INDEX TagHistoryByTagTime ON TagHistory (Tag, Time);
CREATE INDEX TagHistoryByTime ON TagHistory (Time);

-- Alarm history: one row per transition (Active, Acknowledged, Cleared).
CREATE TABLE AlarmHistory (
    Id        INTEGER PRIMARY KEY,
    Time      INTEGER NOT NULL,
    Alarm     TEXT    NOT NULL,
    Tag       TEXT    NOT NULL,
    Condition TEXT    NOT NULL,
    Event     TEXT    NOT NULL CHECK (Event IN ('Active', 'Acknowledged', 'Cleared')),
    Value     REAL    NULL,
    Priority  INTEGER NOT NULL,
    Message   TEXT    NOT NULL,
    UserName  TEXT    NULL
);
CREATE INDEX AlarmHistoryByTime ON AlarmHistory (Time);

PRAGMA user_version = 2;
