-- Schema version 6: the settings lease (settings_lease.rs). A serving node may answer a call
-- from its copy of the SolutionSettings row while it holds a lease (SettingsCaches); a writer
-- of the row first takes the writer lock, bumps SettingsEpoch and notifies the nodes, and
-- changes the row only once every live lease acknowledged that epoch or ran out.

CREATE TABLE SettingsEpoch (Epoch BIGINT NOT NULL);
CREATE UNIQUE INDEX SettingsEpochHoldsOneRow ON SettingsEpoch ((TRUE));
INSERT INTO SettingsEpoch (Epoch) VALUES (0);

-- One row per serving node: until when (the database's clock) it may answer from its copy,
-- and the last epoch it dropped its copy for.
CREATE TABLE SettingsCaches (
    Node        TEXT PRIMARY KEY,
    LeaseUntil  TIMESTAMPTZ NOT NULL,
    Invalidated BIGINT NOT NULL
);

-- The writer lock is the session advisory lock 0x0073657474696e67 ("setting"): PostgreSQL
-- shows a bigint key as classid (its high half, 7562612) and objid (its low half, 1953066599).
CREATE FUNCTION SettingsWrittenUnderTheWriterLock() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (
        SELECT 1 FROM pg_locks
        WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted
          AND mode = 'ExclusiveLock' AND classid = 7562612 AND objid = 1953066599 AND objsubid = 1
    ) THEN
        RAISE EXCEPTION 'SolutionSettings is changed only through tserver (settings set, solution copy): serving nodes answer from a copy under a lease that a writer revokes first, holding the writer lock'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER SolutionSettingsWrittenUnderTheWriterLock
    BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON SolutionSettings
    FOR EACH STATEMENT EXECUTE FUNCTION SettingsWrittenUnderTheWriterLock();
