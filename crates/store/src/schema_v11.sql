-- Schema version 11: a text tag's set of values (a mode: Auto, Manual, Off). AllowedValues is
-- the plant file's `values` as a JSON array of strings, NULL for a tag that takes any value;
-- writes and proposals of anything else are refused.

ALTER TABLE Tags ADD COLUMN AllowedValues TEXT NULL;

PRAGMA user_version = 11;
