-- Schema version 10: documents attached to the plant (procedures, manuals). One row per
-- document a plant file attaches, by its path relative to that file: the title it goes by,
-- its text, and what it is about (Scope: JSON {"types": [...], "equipment": [...],
-- "folders": [...]}, all empty for the whole plant). An import replaces them with the
-- plant; a change to any bumps the plant's revision, as a change to the model does.

CREATE TABLE PlantDocuments (
    Path  TEXT PRIMARY KEY,
    Title TEXT NOT NULL,
    Text  TEXT NOT NULL,
    Scope TEXT NOT NULL DEFAULT '{}'
);

PRAGMA user_version = 10;
