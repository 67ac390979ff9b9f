-- Schema version 7: browser logins. A browser that logged in with a password holds a random
-- token in a cookie; only its SHA-256 digest is stored, with its user and when it was made and
-- last used, so any node sharing the solution verifies it. Changing or removing the user
-- deletes its rows.

CREATE TABLE BrowserSessions (
    Digest     TEXT    NOT NULL PRIMARY KEY,
    User       TEXT    NOT NULL COLLATE NOCASE,
    CreatedAt  INTEGER NOT NULL,
    LastUsedAt INTEGER NOT NULL
);
CREATE INDEX BrowserSessionsByUser ON BrowserSessions (User);

PRAGMA user_version = 7;
