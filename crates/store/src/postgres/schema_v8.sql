-- Schema version 8: a text tag's set of values (see the file schema's version 11): the plant
-- file's `values` as a JSON array of strings, NULL for a tag that takes any value.

ALTER TABLE Tags ADD COLUMN AllowedValues TEXT NULL;
