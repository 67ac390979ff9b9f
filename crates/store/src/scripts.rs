//! Solution scripts as stored: name, trigger, Rhai source and whether enabled, plus each one's
//! run record (runs, failures, skipped triggers, the last run's time, duration, outcome and
//! error). A source is compiled before it is stored, so the file never holds one that does not.

use std::time::{Duration, SystemTime};

use rusqlite::{OptionalExtension, params};
use solution_scripts::{Trigger, compile_check};

use super::{SolutionDb, SolutionError, millis, time_of};

/// The longest script name (names are identifiers: classes are imported by them).
const MAX_NAME_CHARS: usize = 64;

/// The largest source.
pub(super) const MAX_SOURCE_BYTES: usize = 256 * 1024;

/// A stored script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredScript {
    /// Its name (an identifier).
    pub name: String,
    /// When it runs.
    pub trigger: Trigger,
    /// The Rhai source, as given.
    pub source: String,
    /// Whether its trigger fires.
    pub enabled: bool,
    /// When it was last added, changed, enabled or disabled.
    pub updated_at: SystemTime,
}

/// How one run ended, to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptRun {
    /// When it started.
    pub started_at: SystemTime,
    /// How long it took.
    pub duration: Duration,
    /// `ok`, or the kind of stop (`failed`, `operations`, `timeout`, `depth`, `size`, ...).
    pub outcome: String,
    /// What went wrong, for a run that did not end well.
    pub error: Option<String>,
}

/// Runs of one script since the last record, to add to it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScriptTally {
    /// Runs that ended.
    pub runs: u64,
    /// Of them, runs that did not end well.
    pub failures: u64,
    /// Triggers dropped because a run was under way and another waiting.
    pub skipped: u64,
    /// The last of the runs.
    pub last: Option<ScriptRun>,
}

/// A script's run record, as `status` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptRecord {
    /// The script.
    pub name: String,
    /// Its trigger, as stored.
    pub trigger: String,
    /// Whether its trigger fires.
    pub enabled: bool,
    /// Runs so far.
    pub runs: u64,
    /// Runs that did not end well.
    pub failures: u64,
    /// Triggers dropped because a run of the script was already under way and one waiting.
    pub skipped: u64,
    /// The last run, if any.
    pub last: Option<ScriptRun>,
}

pub(super) fn check_name(name: &str) -> Result<(), SolutionError> {
    let mut chars = name.chars();
    let starts_well = chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_');
    if !starts_well
        || name.chars().count() > MAX_NAME_CHARS
        || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    {
        return Err(SolutionError::Script(format!(
            "invalid script name {name:?}: use a letter or '_' then letters, digits or '_', at most \
             {MAX_NAME_CHARS} characters"
        )));
    }
    Ok(())
}

pub(super) fn check_source(name: &str, source: &str) -> Result<(), SolutionError> {
    if source.len() > MAX_SOURCE_BYTES {
        return Err(SolutionError::Script(format!(
            "script {name}: the source has {} bytes, more than the {MAX_SOURCE_BYTES} a script may have",
            source.len()
        )));
    }
    compile_check(source)
        .map_err(|error| SolutionError::Script(format!("script {name} does not compile: {error}")))
}

impl StoredScript {
    /// A new script as it will be stored: its name and source checked (the source compiled),
    /// enabled, stamped now. Whether the name is free is the store's to say.
    pub(super) fn new_checked(name: &str, trigger: &Trigger, source: &str) -> Result<Self, SolutionError> {
        check_name(name)?;
        check_source(name, source)?;
        Ok(Self {
            name: name.to_owned(),
            trigger: trigger.clone(),
            source: source.to_owned(),
            enabled: true,
            updated_at: time_of(millis(SystemTime::now())),
        })
    }

    /// The script with a new source (compiled first), trigger, or both, stamped now.
    pub(super) fn changed(
        mut self,
        trigger: Option<&Trigger>,
        source: Option<&str>,
    ) -> Result<Self, SolutionError> {
        if let Some(source) = source {
            check_source(&self.name, source)?;
            source.clone_into(&mut self.source);
        }
        if let Some(trigger) = trigger {
            self.trigger = trigger.clone();
        }
        self.updated_at = time_of(millis(SystemTime::now()));
        Ok(self)
    }

    /// The script switched on or off, stamped now.
    pub(super) fn switched(mut self, enabled: bool) -> Self {
        self.enabled = enabled;
        self.updated_at = time_of(millis(SystemTime::now()));
        self
    }
}

/// Why there is no script to act on.
pub(super) fn no_script(name: &str) -> SolutionError {
    SolutionError::Script(format!("no script named {name:?}"))
}

/// Why a script cannot be added under a name taken.
pub(super) fn exists(existing: &StoredScript) -> SolutionError {
    SolutionError::Script(format!(
        "a script named {} exists already; change it with `update`",
        existing.name
    ))
}

/// The script, if it may be asked to run by itself (a class may not).
pub(super) fn runnable(script: StoredScript) -> Result<StoredScript, SolutionError> {
    if script.trigger == Trigger::Class {
        return Err(SolutionError::Script(format!(
            "{} is a class: it runs when a script imports it, not by itself",
            script.name
        )));
    }
    Ok(script)
}

pub(super) fn trigger_of(name: &str, text: &str) -> Result<Trigger, SolutionError> {
    text.parse()
        .map_err(|error| SolutionError::Script(format!("script {name}: stored trigger {text:?}: {error}")))
}

impl SolutionDb {
    /// Stores a new script (compiled first: a syntax error is refused with its line and column).
    pub(crate) fn add_script(
        &self,
        name: &str,
        trigger: &Trigger,
        source: &str,
    ) -> Result<StoredScript, SolutionError> {
        let script = StoredScript::new_checked(name, trigger, source)?;
        if let Some(existing) = self.script(name)? {
            return Err(exists(&existing));
        }
        self.writer()?.execute(
            "INSERT INTO Scripts (Name, Trigger, Source, Enabled, UpdatedAt) VALUES (?1, ?2, ?3, 1, ?4)",
            params![
                script.name,
                script.trigger.to_string(),
                script.source,
                millis(script.updated_at)
            ],
        )?;
        Ok(script)
    }

    /// Changes a script's source, trigger, or both (the source compiled first).
    pub(crate) fn update_script(
        &self,
        name: &str,
        trigger: Option<&Trigger>,
        source: Option<&str>,
    ) -> Result<StoredScript, SolutionError> {
        let script = self.existing_script(name)?.changed(trigger, source)?;
        self.writer()?.execute(
            "UPDATE Scripts SET Trigger = ?2, Source = ?3, UpdatedAt = ?4 WHERE Name = ?1",
            params![
                script.name,
                script.trigger.to_string(),
                script.source,
                millis(script.updated_at)
            ],
        )?;
        Ok(script)
    }

    /// Enables or disables a script's trigger.
    pub(crate) fn set_script_enabled(
        &self,
        name: &str,
        enabled: bool,
    ) -> Result<StoredScript, SolutionError> {
        let script = self.existing_script(name)?.switched(enabled);
        self.writer()?.execute(
            "UPDATE Scripts SET Enabled = ?2, UpdatedAt = ?3 WHERE Name = ?1",
            params![script.name, enabled, millis(script.updated_at)],
        )?;
        Ok(script)
    }

    /// Removes a script and its run record; returns it.
    pub(crate) fn remove_script(&self, name: &str) -> Result<StoredScript, SolutionError> {
        let script = self.existing_script(name)?;
        let mut writer = self.writer()?;
        let transaction = writer.transaction()?;
        transaction.execute("DELETE FROM Scripts WHERE Name = ?1", [&script.name])?;
        transaction.execute("DELETE FROM ScriptRuns WHERE Name = ?1", [&script.name])?;
        transaction.commit()?;
        Ok(script)
    }

    /// The script named `name` (any case), if stored.
    pub(crate) fn script(&self, name: &str) -> Result<Option<StoredScript>, SolutionError> {
        let row = self.read(|connection| {
            connection
                .prepare_cached(
                    "SELECT Name, Trigger, Source, Enabled, UpdatedAt FROM Scripts WHERE Name = ?1",
                )?
                .query_row([name], script_row)
                .optional()
        })?;
        row.map(|(script, trigger)| {
            Ok(StoredScript {
                trigger: trigger_of(&script.name, &trigger)?,
                ..script
            })
        })
        .transpose()
    }

    fn existing_script(&self, name: &str) -> Result<StoredScript, SolutionError> {
        self.script(name)?.ok_or_else(|| no_script(name))
    }

    /// Every script, by name.
    pub(crate) fn scripts(&self) -> Result<Vec<StoredScript>, SolutionError> {
        let rows = self.read(|connection| {
            connection
                .prepare("SELECT Name, Trigger, Source, Enabled, UpdatedAt FROM Scripts ORDER BY Name")?
                .query_map([], script_row)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        rows.into_iter()
            .map(|(script, trigger)| {
                Ok(StoredScript {
                    trigger: trigger_of(&script.name, &trigger)?,
                    ..script
                })
            })
            .collect()
    }

    /// Every script's run record, by name.
    pub(crate) fn script_records(&self) -> Result<Vec<ScriptRecord>, SolutionError> {
        self.read(|connection| {
            connection
                .prepare(
                    "SELECT s.Name, s.Trigger, s.Enabled, r.Runs, r.Failures, r.Skipped, r.LastRunAt, \
                     r.LastMicros, r.LastOutcome, r.LastError \
                     FROM Scripts s LEFT JOIN ScriptRuns r ON r.Name = s.Name ORDER BY s.Name",
                )?
                .query_map([], |row| {
                    let count = |index: usize| -> rusqlite::Result<u64> {
                        Ok(u64::try_from(row.get::<_, Option<i64>>(index)?.unwrap_or(0)).unwrap_or(0))
                    };
                    let last = match (row.get::<_, Option<i64>>(6)?, row.get::<_, Option<String>>(8)?) {
                        (Some(started), Some(outcome)) => Some(ScriptRun {
                            started_at: time_of(started),
                            duration: Duration::from_micros(
                                u64::try_from(row.get::<_, Option<i64>>(7)?.unwrap_or(0)).unwrap_or(0),
                            ),
                            outcome,
                            error: row.get(9)?,
                        }),
                        _ => None,
                    };
                    Ok(ScriptRecord {
                        name: row.get(0)?,
                        trigger: row.get(1)?,
                        enabled: row.get(2)?,
                        runs: count(3)?,
                        failures: count(4)?,
                        skipped: count(5)?,
                        last,
                    })
                })?
                .collect()
        })
    }

    /// Asks the serving tserver to run `name` once; returns the script and when it was asked
    /// (a run recorded from then on answers it).
    pub(crate) fn request_script_run(&self, name: &str) -> Result<(StoredScript, SystemTime), SolutionError> {
        let script = runnable(self.existing_script(name)?)?;
        let requested_at = time_of(millis(SystemTime::now()));
        self.writer()?.execute(
            "INSERT INTO ScriptRunRequests (Name, RequestedAt) VALUES (?1, ?2) \
             ON CONFLICT (Name) DO UPDATE SET RequestedAt = excluded.RequestedAt",
            params![script.name, millis(requested_at)],
        )?;
        Ok((script, requested_at))
    }

    /// Withdraws a run request nobody took.
    pub(crate) fn withdraw_script_run(&self, name: &str) -> Result<(), SolutionError> {
        self.writer()?
            .execute("DELETE FROM ScriptRunRequests WHERE Name = ?1", [name])?;
        Ok(())
    }

    /// Takes the waiting run requests (they are gone once taken): the scripts' names.
    pub(crate) fn take_script_run_requests(&self) -> Result<Vec<String>, SolutionError> {
        // A read first: almost always there is nothing, and a read takes no write lock.
        let waiting: i64 = self.read(|connection| {
            connection
                .prepare_cached("SELECT count(*) FROM ScriptRunRequests")?
                .query_row([], |row| row.get(0))
        })?;
        if waiting == 0 {
            return Ok(Vec::new());
        }
        let mut writer = self.writer()?;
        let transaction = writer.transaction()?;
        let names = transaction
            .prepare("SELECT Name FROM ScriptRunRequests ORDER BY RequestedAt")?
            .query_map([], |row| row.get(0))?
            .collect::<rusqlite::Result<Vec<String>>>()?;
        transaction.execute("DELETE FROM ScriptRunRequests", [])?;
        transaction.commit()?;
        Ok(names)
    }

    /// Adds runs and skipped triggers to the scripts' records, in one transaction.
    pub(crate) fn record_script_runs(&self, tallies: &[(String, ScriptTally)]) -> Result<(), SolutionError> {
        let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let mut writer = self.writer()?;
        let transaction = writer.transaction()?;
        for (name, tally) in tallies {
            transaction.execute(
                "INSERT INTO ScriptRuns (Name) VALUES (?1) ON CONFLICT (Name) DO NOTHING",
                [name],
            )?;
            transaction.execute(
                "UPDATE ScriptRuns SET Runs = Runs + ?2, Failures = Failures + ?3, Skipped = Skipped + ?4 \
                 WHERE Name = ?1",
                params![
                    name,
                    count(tally.runs),
                    count(tally.failures),
                    count(tally.skipped)
                ],
            )?;
            if let Some(run) = &tally.last {
                transaction.execute(
                    "UPDATE ScriptRuns SET LastRunAt = ?2, LastMicros = ?3, LastOutcome = ?4, LastError = ?5 \
                     WHERE Name = ?1",
                    params![
                        name,
                        millis(run.started_at),
                        i64::try_from(run.duration.as_micros()).unwrap_or(i64::MAX),
                        run.outcome,
                        run.error,
                    ],
                )?;
            }
        }
        transaction.commit()?;
        Ok(())
    }
}

fn script_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<(StoredScript, String)> {
    Ok((
        StoredScript {
            name: row.get(0)?,
            trigger: Trigger::Startup,
            source: row.get(2)?,
            enabled: row.get(3)?,
            updated_at: time_of(row.get(4)?),
        },
        row.get(1)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn solution() -> (tempfile::TempDir, SolutionDb) {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("s.db");
        SolutionDb::create(&path, false).expect("creates");
        let db = SolutionDb::open(&path).expect("opens");
        (dir, db)
    }

    #[test]
    fn scripts_are_added_changed_switched_and_removed() {
        let (_dir, db) = solution();
        let every: Trigger = "every:5s".parse().expect("trigger");
        let added = db
            .add_script("Heartbeat", &every, "log(\"tick\");")
            .expect("added");
        assert_eq!(
            db.script("heartbeat").expect("reads"),
            Some(added.clone()),
            "any case finds it"
        );
        assert!(matches!(
            db.add_script("HEARTBEAT", &every, "1"),
            Err(SolutionError::Script(_))
        ));
        let changed = db
            .update_script("Heartbeat", Some(&Trigger::Startup), Some("log(\"once\");"))
            .expect("changed");
        assert_eq!(
            (changed.trigger, changed.source.as_str()),
            (Trigger::Startup, "log(\"once\");")
        );
        assert!(
            !db.set_script_enabled("Heartbeat", false)
                .expect("disabled")
                .enabled
        );
        assert_eq!(db.scripts().expect("lists").len(), 1);
        let tally = ScriptTally {
            runs: 3,
            failures: 1,
            skipped: 2,
            last: Some(ScriptRun {
                started_at: time_of(1_000),
                duration: Duration::from_micros(1500),
                outcome: "timeout".into(),
                error: Some("stopped after 5s".into()),
            }),
        };
        db.record_script_runs(&[("Heartbeat".into(), tally.clone())])
            .expect("recorded");
        db.record_script_runs(&[("Heartbeat".into(), tally)])
            .expect("recorded again");
        let record = &db.script_records().expect("records")[0];
        assert_eq!((record.runs, record.failures, record.skipped), (6, 2, 4));
        assert_eq!(
            record.last.as_ref().map(|run| run.duration),
            Some(Duration::from_micros(1500))
        );
        db.remove_script("Heartbeat").expect("removed");
        assert!(db.scripts().expect("lists").is_empty());
        assert!(matches!(
            db.remove_script("Heartbeat"),
            Err(SolutionError::Script(_))
        ));
    }

    #[test]
    fn bad_names_and_sources_are_refused_and_nothing_is_stored() {
        let (_dir, db) = solution();
        for name in ["", "1st", "has space", "dash-ed", &"x".repeat(65)] {
            assert!(
                matches!(
                    db.add_script(name, &Trigger::Startup, "1"),
                    Err(SolutionError::Script(_))
                ),
                "{name:?}"
            );
        }
        let error = db
            .add_script("Broken", &Trigger::Startup, "let a = 1;\nlet b = (;\n")
            .expect_err("refused");
        let message = error.to_string();
        assert!(message.contains("line 2, column"), "{message}");
        let huge = "1;".repeat(MAX_SOURCE_BYTES);
        assert!(db.add_script("Huge", &Trigger::Startup, &huge).is_err());
        db.add_script("Good", &Trigger::Startup, "1").expect("added");
        assert!(db.update_script("Good", None, Some("let x = ;")).is_err());
        assert_eq!(
            db.script("Good").expect("reads").map(|script| script.source),
            Some("1".into())
        );
        assert!(
            db.scripts()
                .expect("lists")
                .iter()
                .all(|script| script.name == "Good")
        );
    }
}
