-- Schema version 11: the audit trail is a hash chain. Each row keeps the hash of the row before
-- it and its own (SHA-256; rows recorded before this version keep NULL and are reported as
-- unchained); pruning leaves a checkpoint the first row kept links to, signed with a key
-- derived from the solution's secrets key. Nodes append one at a time (an advisory lock), so
-- the chain never forks.

ALTER TABLE Audit ADD COLUMN PrevHash BYTEA;
ALTER TABLE Audit ADD COLUMN Hash BYTEA;

CREATE TABLE AuditCheckpoint (
    Id        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    Time      BIGINT NOT NULL,
    ThroughId BIGINT NOT NULL,
    Hash      BYTEA  NOT NULL,
    Pruned    BIGINT NOT NULL,
    Signature BYTEA  NULL
);
