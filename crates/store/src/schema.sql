-- The solution database, schema version 1. One SQLite file is one solution.

-- The three Local AI columns of the spec, exactly; one row.
CREATE TABLE SolutionSettings (
    ModelEnabled  INTEGER NOT NULL DEFAULT 0 CHECK (ModelEnabled IN (0, 1)),
    ModelSettings TEXT    NULL,
    ModelOptions  INTEGER NOT NULL DEFAULT 0
);
CREATE TRIGGER SolutionSettingsHoldsOneRow
BEFORE INSERT ON SolutionSettings
WHEN (SELECT COUNT(*) FROM SolutionSettings) > 0
BEGIN
    SELECT RAISE(ABORT, 'SolutionSettings holds exactly one row');
END;
INSERT INTO SolutionSettings DEFAULT VALUES;

-- Users who may log in. PasswordHash is an argon2 PHC string; NULL marks a passwordless
-- user (the demo's `guest`), who logs in with an empty password.
CREATE TABLE Users (
    Name         TEXT NOT NULL PRIMARY KEY COLLATE NOCASE,
    PasswordHash TEXT NULL,
    CreatedAt    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

-- Tag definitions of the runtime object model.
CREATE TABLE Tags (
    Name         TEXT NOT NULL PRIMARY KEY,
    Path         TEXT NOT NULL UNIQUE,
    Type         TEXT NOT NULL CHECK (Type IN ('number', 'integer', 'bool', 'text')),
    Units        TEXT NOT NULL DEFAULT '',
    Description  TEXT NOT NULL DEFAULT '',
    RangeLow     REAL NULL,
    RangeHigh    REAL NULL,
    InitialValue TEXT NULL
);

-- Secrets referenced as /secret:<Name>. Values are ChaCha20-Poly1305 ciphertexts (the name is
-- the associated data); the key lives outside the database (see docs/SECRETS.md).
CREATE TABLE Secrets (
    Name       TEXT NOT NULL PRIMARY KEY,
    Nonce      BLOB NOT NULL,
    Ciphertext BLOB NOT NULL,
    UpdatedAt  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

PRAGMA user_version = 1;
