-- Schema version 12: tag history in compressed blocks. A tag's history has an integer id
-- (HistoryTags); its samples are kept in blocks of up to 1,024 in time order, each with a
-- summary (count, first, last, min and max with their places, sum; Exact when the summary alone
-- gives the block's first, min, max and last samples), so a long window reads summaries and
-- decodes only the blocks it cuts. Each flush appends one HistoryJournal row first (durable at
-- once); a checkpoint folds the journal into blocks and empties it in one transaction. The
-- rows of TagHistory are folded into blocks by the upgrade itself, which then drops it.

CREATE TABLE HistoryTags (
    Id   INTEGER PRIMARY KEY,
    Name TEXT    NOT NULL UNIQUE
);

CREATE TABLE HistoryBlocks (
    Id         INTEGER PRIMARY KEY,
    Tag        INTEGER NOT NULL REFERENCES HistoryTags (Id),
    Kind       TEXT    NOT NULL CHECK (Kind IN ('number', 'integer', 'bool', 'text')),
    First      INTEGER NOT NULL,
    Last       INTEGER NOT NULL CHECK (Last >= First),
    Count      INTEGER NOT NULL CHECK (Count > 0),
    FirstValue REAL    NULL,
    LastValue  REAL    NULL,
    MinAt      INTEGER NULL,
    MinTime    INTEGER NULL,
    MinValue   REAL    NULL,
    MaxAt      INTEGER NULL,
    MaxTime    INTEGER NULL,
    MaxValue   REAL    NULL,
    Sum        REAL    NULL,
    Exact      INTEGER NOT NULL CHECK (Exact IN (0, 1)),
    Sealed     INTEGER NOT NULL CHECK (Sealed IN (0, 1)),
    Data       BLOB    NOT NULL
);
-- Covers every summary column, so a long window is read from the index alone.
CREATE INDEX HistoryBlocksByTag ON HistoryBlocks (Tag, First, Id, Kind, Last, Count, FirstValue,
    LastValue, MinAt, MinTime, MinValue, MaxAt, MaxTime, MaxValue, Sum, Exact);
CREATE INDEX HistoryBlocksByLast ON HistoryBlocks (Last);
-- A tag's unsealed tail: its newest samples, fewer than a block, kept plainly in a few blocks
-- until a checkpoint packs them.
CREATE INDEX HistoryTails ON HistoryBlocks (Tag) WHERE Sealed = 0;

CREATE TABLE HistoryJournal (
    Id      INTEGER PRIMARY KEY,
    Time    INTEGER NOT NULL,
    Samples INTEGER NOT NULL,
    Data    BLOB    NOT NULL
);

-- How each tag is recorded beyond its deadband (the plant file's history table, defaults filled
-- in): which samples are kept within it, and the longest a tag receiving values goes without
-- one stored.
ALTER TABLE Tags ADD COLUMN HistoryCompression TEXT NOT NULL DEFAULT 'swinging_door'
    CHECK (HistoryCompression IN ('swinging_door', 'deadband', 'none'));
ALTER TABLE Tags ADD COLUMN HistoryMaxInterval INTEGER NOT NULL DEFAULT 600 CHECK (HistoryMaxInterval > 0);

PRAGMA user_version = 12;
