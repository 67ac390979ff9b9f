-- Schema version 16: alarms suppressed by design. An alarm's `suppress_when` (an expression
-- over tags, as the plant file writes it), and the alarm history's record of each suppression
-- beginning and ending (SQLite changes a CHECK by rebuilding the table; the rows keep their ids).
ALTER TABLE AlarmDefinitions ADD COLUMN SuppressWhen TEXT NULL;

CREATE TABLE AlarmHistoryV16 (
    Id        INTEGER PRIMARY KEY,
    Time      INTEGER NOT NULL,
    Alarm     TEXT    NOT NULL,
    Tag       TEXT    NOT NULL,
    Condition TEXT    NOT NULL,
    Event     TEXT    NOT NULL CHECK (Event IN ('Active', 'Acknowledged', 'Cleared', 'Shelved',
                                              'Unshelved', 'ShelvingExpired', 'OutOfService',
                                              'InService', 'Suppressed', 'Unsuppressed')),
    Value     REAL    NULL,
    Priority  INTEGER NOT NULL,
    Message   TEXT    NOT NULL,
    UserName  TEXT    NULL,
    -- Why it was shelved, taken out of service or suppressed, and until when a shelving lasts.
    Reason    TEXT    NULL,
    Until     INTEGER NULL
);
INSERT INTO AlarmHistoryV16 (Id, Time, Alarm, Tag, Condition, Event, Value, Priority, Message,
                             UserName, Reason, Until)
    SELECT Id, Time, Alarm, Tag, Condition, Event, Value, Priority, Message, UserName, Reason,
           Until FROM AlarmHistory;
DROP TABLE AlarmHistory;
ALTER TABLE AlarmHistoryV16 RENAME TO AlarmHistory;
CREATE INDEX AlarmHistoryByTime ON AlarmHistory (Time);

PRAGMA user_version = 16;
