-- Schema version 5: documents attached to the plant (see the file schema's version 10).

CREATE TABLE PlantDocuments (
    Path  TEXT PRIMARY KEY,
    Title TEXT NOT NULL,
    Text  TEXT NOT NULL,
    Scope TEXT NOT NULL DEFAULT '{}'
);
