-- Schema version 2: browser logins (see the file schema's version 7): the SHA-256 digest of
-- each browser's token, its user, and when it was made and last used. Removing the user
-- removes its rows by the foreign key; a password or role change deletes them explicitly.

CREATE TABLE BrowserSessions (
    Digest     TEXT   NOT NULL PRIMARY KEY,
    UserName   TEXT   NOT NULL REFERENCES Users (Name) ON DELETE CASCADE,
    CreatedAt  BIGINT NOT NULL,
    LastUsedAt BIGINT NOT NULL
);
CREATE INDEX BrowserSessionsByUser ON BrowserSessions (UserName);
