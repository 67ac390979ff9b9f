-- Schema version 15: alarm management. An alarm whose acknowledgement (and an approval of a
-- proposal to acknowledge it) takes the operator's electronic signature; the alarm history
-- records shelving and service besides trips, clears and acknowledgements, and the audit
-- shelving and service besides writes and acknowledgements (SQLite changes a CHECK by
-- rebuilding the table; the audit's rows keep their ids and hashes).
ALTER TABLE AlarmDefinitions ADD COLUMN Signed INTEGER NOT NULL DEFAULT 0 CHECK (Signed IN (0, 1));
-- Seconds its condition must hold before it activates, and stay clear before it clears.
ALTER TABLE AlarmDefinitions ADD COLUMN OnDelay INTEGER NOT NULL DEFAULT 0 CHECK (OnDelay BETWEEN 0 AND 3600);
ALTER TABLE AlarmDefinitions ADD COLUMN OffDelay INTEGER NOT NULL DEFAULT 0 CHECK (OffDelay BETWEEN 0 AND 3600);

CREATE TABLE AlarmHistoryV15 (
    Id        INTEGER PRIMARY KEY,
    Time      INTEGER NOT NULL,
    Alarm     TEXT    NOT NULL,
    Tag       TEXT    NOT NULL,
    Condition TEXT    NOT NULL,
    Event     TEXT    NOT NULL CHECK (Event IN ('Active', 'Acknowledged', 'Cleared', 'Shelved',
                                              'Unshelved', 'ShelvingExpired', 'OutOfService',
                                              'InService')),
    Value     REAL    NULL,
    Priority  INTEGER NOT NULL,
    Message   TEXT    NOT NULL,
    UserName  TEXT    NULL,
    -- Why it was shelved or taken out of service, and until when a shelving lasts.
    Reason    TEXT    NULL,
    Until     INTEGER NULL
);
INSERT INTO AlarmHistoryV15 (Id, Time, Alarm, Tag, Condition, Event, Value, Priority, Message, UserName)
    SELECT Id, Time, Alarm, Tag, Condition, Event, Value, Priority, Message, UserName FROM AlarmHistory;
DROP TABLE AlarmHistory;
ALTER TABLE AlarmHistoryV15 RENAME TO AlarmHistory;
CREATE INDEX AlarmHistoryByTime ON AlarmHistory (Time);

-- The alarms shelved or out of service now, kept apart from the history (which retention
-- prunes) and kept in step with it: a starting server takes them up.
CREATE TABLE AlarmHandling (
    Alarm    TEXT    NOT NULL,
    Kind     TEXT    NOT NULL CHECK (Kind IN ('Shelved', 'OutOfService')),
    UserName TEXT    NOT NULL,
    Reason   TEXT    NOT NULL,
    Since    INTEGER NOT NULL,
    Until    INTEGER NULL,
    PRIMARY KEY (Alarm, Kind)
);

CREATE TABLE AuditV15 (
    Id         INTEGER PRIMARY KEY,
    Time       INTEGER NOT NULL,
    UserName   TEXT    NOT NULL,
    Connection TEXT    NOT NULL,
    Peer       TEXT    NOT NULL,
    Action     TEXT    NOT NULL CHECK (Action IN ('write', 'acknowledge', 'shelve', 'unshelve',
                                                  'out-of-service', 'in-service')),
    Target     TEXT    NOT NULL,
    OldValue   TEXT    NULL,
    NewValue   TEXT    NULL,
    Outcome    TEXT    NOT NULL,
    Signatures TEXT,
    PrevHash   BLOB,
    Hash       BLOB
);
INSERT INTO AuditV15 (Id, Time, UserName, Connection, Peer, Action, Target, OldValue, NewValue,
                      Outcome, Signatures, PrevHash, Hash)
    SELECT Id, Time, UserName, Connection, Peer, Action, Target, OldValue, NewValue, Outcome,
           Signatures, PrevHash, Hash FROM Audit;
DROP TABLE Audit;
ALTER TABLE AuditV15 RENAME TO Audit;
CREATE INDEX AuditByTime ON Audit (Time);

PRAGMA user_version = 15;
