-- Schema version 13: alarms suppressed by design. An alarm's `suppress_when` (an expression
-- over tags, as the plant file writes it), and the alarm history's record of each suppression
-- beginning and ending.
ALTER TABLE AlarmDefinitions ADD COLUMN SuppressWhen TEXT NULL;

ALTER TABLE AlarmHistory DROP CONSTRAINT alarmhistory_event_check;
ALTER TABLE AlarmHistory ADD CONSTRAINT alarmhistory_event_check
    CHECK (Event IN ('Active', 'Acknowledged', 'Cleared', 'Shelved', 'Unshelved',
                     'ShelvingExpired', 'OutOfService', 'InService', 'Suppressed', 'Unsuppressed'));
