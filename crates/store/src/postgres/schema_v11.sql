-- Schema version 11: electronic signatures, and the audit trail as a hash chain. Each audit
-- row keeps the hash of the row before it and its own (SHA-256; rows recorded before this
-- version keep NULL and are reported as unchained); pruning leaves a checkpoint the first row
-- kept links to, signed with a key derived from the solution's secrets key.
-- Nodes append one at a time (an advisory lock), so the chain never forks.

-- A signed act's signatures (who, meaning, when, over what), in the row and so in its hash.
ALTER TABLE Audit ADD COLUMN Signatures TEXT;
ALTER TABLE Audit ADD COLUMN PrevHash BYTEA;
ALTER TABLE Audit ADD COLUMN Hash BYTEA;

-- A tag whose writes are signed by the writer, and by a second operator as witness.
ALTER TABLE Tags ADD COLUMN Signed INTEGER NOT NULL DEFAULT 0 CHECK (Signed IN (0, 1));
ALTER TABLE Tags ADD COLUMN Witness INTEGER NOT NULL DEFAULT 0 CHECK (Witness IN (0, 1));

CREATE TABLE AuditCheckpoint (
    Id        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    Time      BIGINT NOT NULL,
    ThroughId BIGINT NOT NULL,
    Hash      BYTEA  NOT NULL,
    Pruned    BIGINT NOT NULL,
    Signature BYTEA  NULL
);
