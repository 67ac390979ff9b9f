-- Schema version 5: API tokens for the HTTP surface (RuntimeMCP). A token is bound to a user
-- and acts with that user's role; only a SHA-256 digest of its secret part is stored, so the
-- file never holds a usable token. Removing the user removes their tokens.

CREATE TABLE ApiTokens (
    Id         TEXT    NOT NULL PRIMARY KEY,
    Name       TEXT    NOT NULL DEFAULT '',
    User       TEXT    NOT NULL REFERENCES Users (Name) ON DELETE CASCADE,
    Digest     TEXT    NOT NULL,
    CreatedAt  INTEGER NOT NULL,
    ExpiresAt  INTEGER NULL
);
CREATE INDEX ApiTokensByUser ON ApiTokens (User);

PRAGMA user_version = 5;
