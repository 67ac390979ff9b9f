-- Schema version 4: alarm response (see the file schema's version 9): what usually causes an
-- alarm, what happens if nobody acts, what the operator should do, and within how many seconds.

ALTER TABLE AlarmDefinitions ADD COLUMN Cause TEXT NOT NULL DEFAULT '';
ALTER TABLE AlarmDefinitions ADD COLUMN Consequence TEXT NOT NULL DEFAULT '';
ALTER TABLE AlarmDefinitions ADD COLUMN Response TEXT NOT NULL DEFAULT '';
ALTER TABLE AlarmDefinitions ADD COLUMN TimeToRespond INTEGER NULL CHECK (TimeToRespond > 0);
