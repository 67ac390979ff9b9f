-- Schema version 14: the audit trail is a hash chain. Each row keeps the hash of the row before
-- it and its own (SHA-256; rows recorded before this version keep NULL and are reported as
-- unchained); pruning leaves a checkpoint the first row kept links to, signed with a key
-- derived from the solution's secrets key.

ALTER TABLE Audit ADD COLUMN PrevHash BLOB;
ALTER TABLE Audit ADD COLUMN Hash BLOB;

CREATE TABLE AuditCheckpoint (
    Id        INTEGER PRIMARY KEY,
    Time      INTEGER NOT NULL,
    ThroughId INTEGER NOT NULL,
    Hash      BLOB    NOT NULL,
    Pruned    INTEGER NOT NULL,
    Signature BLOB    NULL
);

PRAGMA user_version = 14;
