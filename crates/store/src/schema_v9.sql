-- Schema version 9: alarm response (ISA-18.2 rationalization). Each alarm may say what usually
-- causes it, what happens if nobody acts, what the operator should do, and within how many
-- seconds; empty texts and a NULL time when the plant file gives none.

ALTER TABLE AlarmDefinitions ADD COLUMN Cause TEXT NOT NULL DEFAULT '';
ALTER TABLE AlarmDefinitions ADD COLUMN Consequence TEXT NOT NULL DEFAULT '';
ALTER TABLE AlarmDefinitions ADD COLUMN Response TEXT NOT NULL DEFAULT '';
ALTER TABLE AlarmDefinitions ADD COLUMN TimeToRespond INTEGER NULL CHECK (TimeToRespond > 0);

PRAGMA user_version = 9;
