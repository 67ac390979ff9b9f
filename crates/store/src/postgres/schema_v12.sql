-- Schema version 12: alarm management. An alarm whose acknowledgement (and an approval of a
-- proposal to acknowledge it) takes the operator's electronic signature; the alarm history
-- records shelving and service besides trips, clears and acknowledgements, and the audit
-- shelving and service besides writes and acknowledgements.
ALTER TABLE AlarmDefinitions ADD COLUMN Signed INTEGER NOT NULL DEFAULT 0 CHECK (Signed IN (0, 1));
-- Seconds its condition must hold before it activates, and stay clear before it clears.
ALTER TABLE AlarmDefinitions ADD COLUMN OnDelay INTEGER NOT NULL DEFAULT 0 CHECK (OnDelay BETWEEN 0 AND 3600);
ALTER TABLE AlarmDefinitions ADD COLUMN OffDelay INTEGER NOT NULL DEFAULT 0 CHECK (OffDelay BETWEEN 0 AND 3600);

ALTER TABLE AlarmHistory DROP CONSTRAINT alarmhistory_event_check;
ALTER TABLE AlarmHistory ADD CONSTRAINT alarmhistory_event_check
    CHECK (Event IN ('Active', 'Acknowledged', 'Cleared', 'Shelved', 'Unshelved',
                     'ShelvingExpired', 'OutOfService', 'InService'));

ALTER TABLE Audit DROP CONSTRAINT audit_action_check;
ALTER TABLE Audit ADD CONSTRAINT audit_action_check
    CHECK (Action IN ('write', 'acknowledge', 'shelve', 'unshelve', 'out-of-service', 'in-service'));

ALTER TABLE AlarmHistory ADD COLUMN Reason TEXT NULL;
ALTER TABLE AlarmHistory ADD COLUMN Until BIGINT NULL;

-- The alarms shelved or out of service now, kept apart from the history (which retention
-- prunes) and kept in step with it: a starting server takes them up.
CREATE TABLE AlarmHandling (
    Alarm    TEXT   NOT NULL,
    Kind     TEXT   NOT NULL CHECK (Kind IN ('Shelved', 'OutOfService')),
    UserName TEXT   NOT NULL,
    Reason   TEXT   NOT NULL,
    Since    BIGINT NOT NULL,
    Until    BIGINT NULL,
    PRIMARY KEY (Alarm, Kind)
);
