-- Schema version 15: no two audit rows follow the same row. Nodes append to the hash chain
-- without a lock, each linking its rows to the newest hash it knows; a node whose head is no
-- longer the newest fails on this index (or on the head check of its insert) and links again.
-- Rows recorded before this version are left out of the index: a trail tampered with before
-- it (a row put in after another, linked to it) is reported by `audit verify`, not refused
-- at start.
DO $$
BEGIN
    EXECUTE format('CREATE UNIQUE INDEX AuditFollows ON Audit (PrevHash) WHERE Id > %s',
                   (SELECT COALESCE(MAX(Id), 0) FROM Audit));
END
$$;
