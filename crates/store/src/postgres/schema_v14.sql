-- Schema version 14: how the overview displays show a tag (key value, order, hidden, normal
-- range or state, state words), as the plant file's `display` gives it, in JSON.
ALTER TABLE Tags ADD COLUMN Display TEXT NULL;
