-- Schema version 13: a tag may keep its history longer or shorter than the solution's
-- HistoryRetentionHours (the plant file's history.retention_hours); NULL keeps the solution's.

ALTER TABLE Tags ADD COLUMN HistoryRetentionHours INTEGER CHECK (HistoryRetentionHours > 0);

PRAGMA user_version = 13;
