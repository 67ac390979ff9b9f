-- Schema version 12: an alarm whose acknowledgement (and an approval of a proposal to
-- acknowledge it) takes the operator's electronic signature.
ALTER TABLE AlarmDefinitions ADD COLUMN Signed INTEGER NOT NULL DEFAULT 0 CHECK (Signed IN (0, 1));
