-- Schema version 14: electronic signatures, and the audit trail as a hash chain. Each audit
-- row keeps the hash of the row before it and its own (SHA-256; rows recorded before this
-- version keep NULL and are reported as unchained); pruning leaves a checkpoint the first row
-- kept links to, signed with a key derived from the solution's secrets key.

-- A signed act's signatures (who, meaning, when, over what), in the row and so in its hash.
ALTER TABLE Audit ADD COLUMN Signatures TEXT;
ALTER TABLE Audit ADD COLUMN PrevHash BLOB;
ALTER TABLE Audit ADD COLUMN Hash BLOB;

-- A tag whose writes are signed by the writer, and by a second operator as witness.
ALTER TABLE Tags ADD COLUMN Signed INTEGER NOT NULL DEFAULT 0 CHECK (Signed IN (0, 1));
ALTER TABLE Tags ADD COLUMN Witness INTEGER NOT NULL DEFAULT 0 CHECK (Witness IN (0, 1));

CREATE TABLE AuditCheckpoint (
    Id        INTEGER PRIMARY KEY,
    Time      INTEGER NOT NULL,
    ThroughId INTEGER NOT NULL,
    Hash      BLOB    NOT NULL,
    Pruned    INTEGER NOT NULL,
    Signature BLOB    NULL
);

PRAGMA user_version = 14;
