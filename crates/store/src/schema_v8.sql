-- Schema version 8: proposable tags. A tag marked proposable may be proposed for a write (by
-- the assistant, an MCP client or a script) that an operator then approves or declines; only
-- writable tags are (the plant file's reader refuses one that is not).

ALTER TABLE Tags ADD COLUMN Proposable INTEGER NOT NULL DEFAULT 0 CHECK (Proposable IN (0, 1));

PRAGMA user_version = 8;
