//! The plant model in the solution: the definitions the runtime loads, an import that writes a
//! checked model in one transaction and says what it added, changed and removed, the model as
//! last imported for export, and the revision a running server watches to reload.

use std::collections::BTreeMap;

use plant_model::{
    AlarmSpec, Condition, DisplayMark, Equipment, ExpandedPlant, FolderSpec, InitialValue, Motion,
    PlantDocument, PlantModel, PromptSpec, SourceBinding, SourceSpec, StoredParts, TagExpression, TagSpec,
    TagType,
};
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};

use super::{SolutionDb, SolutionError};
use crate::documents::{SELECT_DOCUMENTS, document_of_row, scope_json};

/// Each alarm's last `Active` event and every event of it after that, oldest first (the same
/// text for SQLite and PostgreSQL).
pub(crate) const ALARM_EVENTS_SINCE_LAST_TRIP: &str =
    "SELECT h.Time, h.Alarm, h.Tag, h.Condition, h.Event, h.Value, h.Priority, h.Message, h.UserName,
            h.Reason, h.Until
     FROM AlarmHistory h
     JOIN (SELECT Alarm, max(Id) AS Trip FROM AlarmHistory WHERE Event = 'Active' GROUP BY Alarm) t
       ON h.Alarm = t.Alarm AND h.Id >= t.Trip
     ORDER BY h.Id";

/// What an import changes, by kind of thing, each list sorted by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlantChanges {
    /// Tags by dotted name.
    pub tags: Changes,
    /// Alarms by name.
    pub alarms: Changes,
    /// Described folders by path.
    pub folders: Changes,
    /// Attached documents by path (title, text or what it is about changed).
    pub documents: Changes,
    /// Sources (brokers, devices, servers) by name.
    pub sources: Changes,
    /// Site prompts by name.
    pub prompts: Changes,
}

/// Names added, changed and removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// New.
    pub added: Vec<String>,
    /// Defined differently.
    pub changed: Vec<String>,
    /// Gone (a removed tag's history stays).
    pub removed: Vec<String>,
}

impl Changes {
    fn between<T: PartialEq>(before: &BTreeMap<String, T>, after: &BTreeMap<String, T>) -> Self {
        let mut changes = Self::default();
        for (name, definition) in after {
            match before.get(name) {
                None => changes.added.push(name.clone()),
                Some(old) if old != definition => changes.changed.push(name.clone()),
                Some(_) => {}
            }
        }
        changes.removed = before
            .keys()
            .filter(|name| !after.contains_key(*name))
            .cloned()
            .collect();
        changes
    }

    /// Whether nothing changes.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.changed.is_empty() && self.removed.is_empty()
    }
}

impl PlantChanges {
    /// Whether the import changes nothing.
    pub fn is_empty(&self) -> bool {
        self.tags.is_empty()
            && self.alarms.is_empty()
            && self.folders.is_empty()
            && self.documents.is_empty()
            && self.sources.is_empty()
            && self.prompts.is_empty()
    }
}

/// The stored name of a tag type (`text` for the file's `string`).
pub(super) fn stored_type(kind: TagType) -> &'static str {
    match kind {
        TagType::Number => "number",
        TagType::Integer => "integer",
        TagType::Bool => "bool",
        TagType::String => "text",
    }
}

fn type_of_stored(name: &str) -> Option<TagType> {
    match name {
        "number" => Some(TagType::Number),
        "integer" => Some(TagType::Integer),
        "bool" => Some(TagType::Bool),
        "text" => Some(TagType::String),
        _ => None,
    }
}

/// An initial value as stored (text), read back as the tag's type.
fn initial_of_stored(kind: TagType, text: &str) -> Option<InitialValue> {
    let text = text.trim();
    match kind {
        TagType::Number => text.parse().ok().map(InitialValue::Number),
        TagType::Integer => text.parse().ok().map(InitialValue::Integer),
        TagType::Bool => match text.to_ascii_lowercase().as_str() {
            "true" | "1" | "on" => Some(InitialValue::Bool(true)),
            "false" | "0" | "off" => Some(InitialValue::Bool(false)),
            _ => None,
        },
        TagType::String => Some(InitialValue::String(text.to_owned())),
    }
}

/// A value of a number tag written as a whole number is the same number: compared and stored
/// as a number, so writing `62` or `62.0` is no change.
pub(super) fn canonical(tag: &TagSpec) -> TagSpec {
    let mut tag = tag.clone();
    if tag.kind == TagType::Number
        && let Some(value) = tag.initial.as_ref().and_then(InitialValue::as_f64)
    {
        tag.initial = Some(InitialValue::Number(value));
    }
    tag
}

pub(super) fn invalid(name: &str, reason: impl Into<String>) -> SolutionError {
    SolutionError::InvalidTag {
        name: name.to_owned(),
        reason: reason.into(),
    }
}

impl SolutionDb {
    /// Every tag, alarm and described folder the solution defines, as the runtime loads them.
    pub(crate) fn plant_definitions(&self) -> Result<ExpandedPlant, SolutionError> {
        self.read(read_definitions)?
    }

    /// The plant model as last imported, or for a solution never imported into (made before
    /// plant files), its definitions as plain tags and alarms.
    pub(crate) fn plant_model(&self) -> Result<PlantModel, SolutionError> {
        let stored: Option<String> = self.read(read_model_json)?;
        match stored {
            Some(json) => model_of_json(&json),
            None => Ok(model_of_definitions(self.plant_definitions()?)),
        }
    }

    /// The equipment instances of the plant model as last imported (none before an import).
    pub(crate) fn plant_equipment(&self) -> Result<Vec<Equipment>, SolutionError> {
        equipment_of_json(self.read(read_model_json)?.as_deref())
    }

    /// The site's prompts of the plant model as last imported (none before an import).
    pub(crate) fn plant_prompts(&self) -> Result<Vec<plant_model::PromptSpec>, SolutionError> {
        prompts_of_json(self.read(read_model_json)?.as_deref())
    }

    /// The plant's notifications and the sources they may publish through.
    pub(crate) fn plant_notifications(&self) -> Result<PlantNotifications, SolutionError> {
        notifications_of_json(self.read(read_model_json)?.as_deref())
    }

    /// The plant's sources and the tags they feed (only those, each as the runtime loads it):
    /// what the sources start from, without reading the rest of the plant.
    pub(crate) fn plant_sources(&self) -> Result<ExpandedPlant, SolutionError> {
        let (json, tags) = self.read(|connection| {
            // One snapshot: an import committed meanwhile is seen whole or not at all.
            let transaction = connection.unchecked_transaction()?;
            let read = (
                read_model_json(&transaction)?,
                read_tags(&transaction, &BOUND_TAGS, &BTreeMap::new())?,
            );
            transaction.commit()?;
            Ok(read)
        })?;
        sources_of_rows(json.as_deref(), tags?)
    }

    /// The documents attached to the plant, by path.
    pub(crate) fn plant_documents(&self) -> Result<Vec<PlantDocument>, SolutionError> {
        self.read(read_documents)?
    }

    /// The revision of the plant model: 0 before any import, one more with each import.
    pub(crate) fn plant_revision(&self) -> Result<i64, SolutionError> {
        self.read(|connection| {
            connection
                .query_row("SELECT Revision FROM PlantModel WHERE Id = 1", [], |row| {
                    row.get(0)
                })
                .optional()
                .map(Option::unwrap_or_default)
        })
    }

    /// What the alarm history recorded of each alarm since its last trip, oldest first: the
    /// trip, then any acknowledgement and clearing after it (a server takes its alarms' states
    /// up from these when it starts).
    pub(crate) fn alarm_events_since_last_trip(&self) -> Result<Vec<plant_model::AlarmEvent>, SolutionError> {
        self.read(|connection| {
            connection
                .prepare(ALARM_EVENTS_SINCE_LAST_TRIP)?
                .query_map([], crate::history::alarm_event_of_row)?
                .collect()
        })
    }

    /// The alarms shelved or out of service now (see [`crate::KeptHandling`]).
    pub(crate) fn alarm_handling(&self) -> Result<Vec<crate::KeptHandling>, SolutionError> {
        self.read(|connection| {
            connection
                .prepare(crate::history::SELECT_HANDLING)?
                .query_map([], |row| {
                    Ok(crate::history::kept_handling(
                        row.get(0)?,
                        &row.get::<_, String>(1)?,
                        row.get(2)?,
                        row.get(3)?,
                        (row.get(4)?, row.get(5)?),
                    ))
                })?
                .collect()
        })
    }

    /// Deletes the recorded history of a tag no longer in the plant; returns the samples
    /// deleted. A tag still in the plant is refused (its history is what tools read).
    pub(crate) fn purge_tag_history(&self, tag: &str) -> Result<usize, SolutionError> {
        let mut connection = self.writer()?;
        let defined: bool = connection.query_row(
            "SELECT EXISTS (SELECT 1 FROM Tags WHERE Name = ?1)",
            [tag],
            |row| row.get(0),
        )?;
        if defined {
            return Err(invalid(
                tag,
                "it is still in the plant; remove it from the plant file and import first",
            ));
        }
        Ok(crate::history::sqlite::purge(&mut connection, tag)?)
    }

    /// Replaces the plant with `model` (read and checked by `plant_model::read`) in one
    /// transaction, and returns what changed. With `dry_run` the transaction is rolled back:
    /// the changes are what it would make. A removed tag's history is kept.
    pub(crate) fn import_plant(
        &self,
        model: &PlantModel,
        documents: &[PlantDocument],
        source: &str,
        dry_run: bool,
    ) -> Result<PlantChanges, SolutionError> {
        let mut connection = self.writer()?;
        let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let changes = write_plant(&transaction, model, documents, source)?;
        if dry_run {
            transaction.rollback()?;
        } else {
            transaction.commit()?;
        }
        Ok(changes)
    }
}

/// Writes `model` and its `documents` over the plant in `transaction` and returns what
/// changed.
pub(super) fn write_plant(
    transaction: &Transaction<'_>,
    model: &PlantModel,
    documents: &[PlantDocument],
    source: &str,
) -> Result<PlantChanges, SolutionError> {
    let before = read_definitions(transaction)??;
    let after = model.expand();
    let mut changes = changes_between(&before, &after);
    named_part_changes(read_model_json(transaction)?.as_deref(), model, &mut changes)?;
    changes.documents = document_changes(&read_documents(transaction)??, documents);
    if !changes.documents.is_empty() {
        write_documents(transaction, documents)?;
    }
    // Alarms, motions and folders are rewritten whole; tags are updated in place (a removed
    // tag's history stays: it names its tag, it does not refer to Tags).
    transaction.execute("DELETE FROM AlarmDefinitions", [])?;
    transaction.execute("DELETE FROM Simulation", [])?;
    transaction.execute("DELETE FROM Folders", [])?;
    for name in &changes.tags.removed {
        transaction.execute("DELETE FROM Tags WHERE Name = ?1", [name])?;
    }
    {
        let mut upsert = transaction.prepare(&format!(
            "{INSERT_TAGS} VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20) {UPDATE_TAGS}"
        ))?;
        // Paths are unique: a path that moves from one tag to another is freed first.
        transaction.execute("UPDATE Tags SET Path = ' ' || Name", [])?;
        let mut motions =
            transaction.prepare("INSERT INTO Simulation (Tag, Amplitude, PeriodSeconds, Phase, Noise) VALUES (?1, ?2, ?3, ?4, ?5)")?;
        for tag in after.tags.iter().map(canonical) {
            let source = stored_source(&tag)?;
            let recording = StoredRecording::of(&tag);
            upsert.execute(params![
                tag.name,
                tag.path,
                stored_type(tag.kind),
                tag.unit,
                tag.description,
                tag.min,
                tag.max,
                tag.initial.as_ref().map(InitialValue::to_text),
                tag.writable,
                recording.on,
                recording.deadband,
                source,
                tag.proposable,
                stored_values(&tag)?,
                recording.compression,
                recording.max_interval,
                recording.retention_hours,
                tag.signed,
                tag.witness,
                stored_display(&tag)?,
            ])?;
            if let Some(motion) = &tag.simulate {
                motions.execute(params![
                    tag.name,
                    motion.amplitude,
                    motion.period,
                    motion.phase,
                    motion.noise
                ])?;
            }
        }
    }
    {
        let mut insert = transaction.prepare(
            "INSERT INTO AlarmDefinitions (Name, Tag, Condition, LimitValue, Setpoint, ActiveWhen, Deadband, Priority, Message,
                 Cause, Consequence, Response, TimeToRespond, Signed, OnDelay, OffDelay, SuppressWhen)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
        )?;
        for alarm in &after.alarms {
            insert.execute(params![
                alarm.name,
                alarm.tag,
                alarm.condition.name(),
                alarm.limit,
                alarm.setpoint,
                alarm.active_when,
                alarm.deadband,
                alarm.priority,
                alarm.message,
                alarm.cause,
                alarm.consequence,
                alarm.response,
                alarm.time_to_respond,
                alarm.signed,
                alarm.on_delay,
                alarm.off_delay,
                alarm.suppress_when.as_ref().map(ToString::to_string),
            ])?;
        }
        let mut folders = transaction.prepare("INSERT INTO Folders (Path, Description) VALUES (?1, ?2)")?;
        for folder in &after.folders {
            folders.execute(params![folder.path, folder.description])?;
        }
    }
    let json = model_json(model)?;
    let stored: Option<String> = transaction
        .query_row("SELECT Json FROM PlantModel WHERE Id = 1", [], |row| row.get(0))
        .optional()?;
    if stored.as_deref() == Some(json.as_str()) && changes.documents.is_empty() {
        // The same model and documents again: nothing for a running server to reload.
        return Ok(changes);
    }
    transaction.execute(
        "INSERT INTO PlantModel (Id, Json, Revision, SourceName) VALUES (1, ?1, 1, ?2)
         ON CONFLICT (Id) DO UPDATE SET Json = excluded.Json, Revision = Revision + 1,
             SourceName = excluded.SourceName, ImportedAt = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
        params![json, source],
    )?;
    Ok(changes)
}

/// Replaces the stored documents with `documents`.
fn write_documents(transaction: &Transaction<'_>, documents: &[PlantDocument]) -> Result<(), SolutionError> {
    transaction.execute("DELETE FROM PlantDocuments", [])?;
    let mut insert = transaction
        .prepare("INSERT INTO PlantDocuments (Path, Title, Text, Scope) VALUES (?1, ?2, ?3, ?4)")?;
    for document in documents {
        insert.execute(params![
            document.path,
            document.title,
            document.text,
            scope_json(document)?
        ])?;
    }
    Ok(())
}

/// The stored documents, by path; the outer error is SQLite's, the inner a row that does not
/// read.
fn read_documents(connection: &Connection) -> rusqlite::Result<Result<Vec<PlantDocument>, SolutionError>> {
    let rows = connection
        .prepare(SELECT_DOCUMENTS)?
        .query_map([], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, String>(3)?,
            ))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(rows
        .into_iter()
        .map(|(path, title, text, scope)| document_of_row(path, title, text, &scope))
        .collect())
}

/// A `Tags` row as stored (the columns of a [`TagQuery`]'s `select`, in order). Both backends read
/// into it.
#[derive(Debug)]
pub(super) struct TagRow {
    pub(super) name: String,
    pub(super) path: String,
    pub(super) kind: String,
    pub(super) unit: String,
    pub(super) description: String,
    pub(super) min: Option<f64>,
    pub(super) max: Option<f64>,
    pub(super) initial: Option<String>,
    pub(super) writable: bool,
    pub(super) history: bool,
    pub(super) history_deadband: f64,
    pub(super) source: Option<String>,
    pub(super) proposable: bool,
    /// A text tag's set of values, as a JSON array; `None` for any value.
    pub(super) values: Option<String>,
    pub(super) history_compression: String,
    pub(super) history_max_interval: i64,
    pub(super) history_retention_hours: Option<i64>,
    pub(super) signed: bool,
    pub(super) witness: bool,
    /// How the overview displays show it, as JSON; `None` as they would by default.
    pub(super) display: Option<String>,
}

/// How a tag is recorded, as its `Tags` columns keep it: the defaults filled in, so the
/// runtime applies what the row says.
#[derive(Debug)]
pub(super) struct StoredRecording {
    pub(super) on: bool,
    pub(super) deadband: f64,
    pub(super) compression: &'static str,
    pub(super) max_interval: i64,
    pub(super) retention_hours: Option<i64>,
}

impl StoredRecording {
    pub(super) fn of(tag: &TagSpec) -> Self {
        match tag.history.recording(tag.kind, tag.min, tag.max) {
            Some(recording) => Self {
                on: true,
                deadband: recording.deadband,
                compression: recording.compression.name(),
                max_interval: i64::try_from(recording.max_interval).unwrap_or(i64::MAX),
                retention_hours: recording
                    .retention_hours
                    .map(|hours| i64::try_from(hours).unwrap_or(i64::MAX)),
            },
            None => Self {
                on: false,
                deadband: 0.0,
                compression: plant_model::Compression::default().name(),
                max_interval: i64::try_from(plant_model::DEFAULT_MAX_INTERVAL).unwrap_or(i64::MAX),
                retention_hours: None,
            },
        }
    }
}

/// An `AlarmDefinitions` row as stored (the columns of [`SELECT_ALARMS`], in order). Both
/// backends read into it.
#[derive(Debug)]
pub(super) struct AlarmRow {
    pub(super) name: String,
    pub(super) tag: String,
    pub(super) condition: String,
    pub(super) limit: Option<f64>,
    pub(super) setpoint: Option<f64>,
    pub(super) active_when: Option<bool>,
    pub(super) deadband: f64,
    pub(super) priority: u32,
    pub(super) message: String,
    pub(super) cause: String,
    pub(super) consequence: String,
    pub(super) response: String,
    pub(super) time_to_respond: Option<u32>,
    pub(super) signed: bool,
    pub(super) on_delay: u32,
    pub(super) off_delay: u32,
    pub(super) suppress_when: Option<String>,
}

impl TagRow {
    /// The tag this row stores, as the runtime loads it (`motions` by tag); a row that does not
    /// read is named.
    pub(super) fn into_spec(self, motions: &BTreeMap<String, Motion>) -> Result<TagSpec, SolutionError> {
        let TagRow {
            name,
            path,
            kind,
            unit,
            description,
            min,
            max,
            initial,
            writable,
            history,
            history_deadband,
            source,
            proposable,
            values,
            history_compression,
            history_max_interval,
            history_retention_hours,
            signed,
            witness,
            display,
        } = self;
        let Some(kind) = type_of_stored(&kind) else {
            return Err(invalid(&name, format!("unknown type {kind:?}")));
        };
        let initial = match initial.as_deref().map(|text| initial_of_stored(kind, text)) {
            None => None,
            Some(Some(value)) => Some(value),
            Some(None) => {
                return Err(invalid(&name, format!("initial value is not a {}", kind.name())));
            }
        };
        let source = match source.as_deref().map(serde_json::from_str::<Box<SourceBinding>>) {
            None => None,
            Some(Ok(source)) => Some(source),
            Some(Err(error)) => return Err(invalid(&name, format!("its source does not read: {error}"))),
        };
        let values = match values.as_deref().map(serde_json::from_str::<Vec<String>>) {
            None => Vec::new(),
            Some(Ok(values)) => values,
            Some(Err(error)) => {
                return Err(invalid(
                    &name,
                    format!("its set of values does not read: {error}"),
                ));
            }
        };
        let display = match display.as_deref().map(serde_json::from_str::<DisplayMark>) {
            None => None,
            Some(Ok(display)) => Some(display),
            Some(Err(error)) => return Err(invalid(&name, format!("its display does not read: {error}"))),
        };
        Ok(TagSpec {
            simulate: motions.get(&name).cloned(),
            name,
            path,
            kind,
            unit,
            description,
            initial,
            min,
            max,
            history: history_of_row(
                history,
                history_deadband,
                &history_compression,
                (history_max_interval, history_retention_hours),
                (kind, min, max),
            ),
            writable,
            proposable,
            signed,
            witness,
            values,
            source,
            display,
        })
    }
}

/// How a row says its tag is recorded, as the plant file would say it: a value equal to its
/// default is left out, so a tag read back is the tag imported.
fn history_of_row(
    on: bool,
    deadband: f64,
    compression: &str,
    (max_interval, retention_hours): (i64, Option<i64>),
    (kind, min, max): (TagType, Option<f64>, Option<f64>),
) -> plant_model::History {
    let Some(default) = plant_model::History::default().recording(kind, min, max) else {
        return plant_model::History::Off;
    };
    if !on {
        return plant_model::History::Off;
    }
    let max_interval = u64::try_from(max_interval).ok();
    plant_model::History::On(plant_model::HistoryOptions {
        deadband: (deadband != default.deadband).then_some(deadband),
        compression: plant_model::Compression::parse(compression).unwrap_or_default(),
        max_interval: max_interval.filter(|seconds| *seconds != default.max_interval),
        retention_hours: retention_hours.and_then(|hours| u64::try_from(hours).ok()),
    })
}

/// The stored rows of a plant, as either backend reads them.
#[derive(Debug, Default)]
pub(super) struct PlantRows {
    /// `Tags`, by path, each turned into its spec (with its `Simulation` motion) as it was read.
    pub(super) tags: Vec<TagSpec>,
    /// `AlarmDefinitions`, by name.
    pub(super) alarms: Vec<AlarmRow>,
    /// `Folders`, by path.
    pub(super) folders: Vec<FolderSpec>,
}

/// The start of a `Tags` insert, in the SQL both backends speak (the values are each's own).
pub(super) const INSERT_TAGS: &str =
    "INSERT INTO Tags (Name, Path, Type, Units, Description, RangeLow, RangeHigh,
    InitialValue, Writable, History, HistoryDeadband, Source, Proposable, AllowedValues,
    HistoryCompression, HistoryMaxInterval, HistoryRetentionHours, Signed, Witness, Display)";
/// What a `Tags` insert does to a tag that stays: updated in place, its history kept.
pub(super) const UPDATE_TAGS: &str =
    "ON CONFLICT (Name) DO UPDATE SET Path = excluded.Path, Type = excluded.Type,
    Units = excluded.Units, Description = excluded.Description,
    RangeLow = excluded.RangeLow, RangeHigh = excluded.RangeHigh,
    InitialValue = excluded.InitialValue, Writable = excluded.Writable,
    History = excluded.History, HistoryDeadband = excluded.HistoryDeadband,
    Source = excluded.Source, Proposable = excluded.Proposable,
    AllowedValues = excluded.AllowedValues, HistoryCompression = excluded.HistoryCompression,
    HistoryMaxInterval = excluded.HistoryMaxInterval,
    HistoryRetentionHours = excluded.HistoryRetentionHours,
    Signed = excluded.Signed, Witness = excluded.Witness, Display = excluded.Display";

/// The statements that read a plant's rows, in the SQL both backends speak.
pub(super) const SELECT_MOTIONS: &str = "SELECT Tag, Amplitude, PeriodSeconds, Phase, Noise FROM Simulation";
/// A read of `Tags` rows (see [`TagRow`]): the statement, and one that counts the rows it
/// gives (the file's reader sizes its list with it: a plant of 100,000 tags is 50 MB of specs).
pub(super) struct TagQuery {
    pub(super) select: &'static str,
    count: &'static str,
}

/// The [`TagQuery`] of the rows that pass `filter`, by path.
macro_rules! tag_query {
    ($filter:literal) => {
        TagQuery {
            select: concat!(
                "SELECT Name, Path, Type, Units, Description, RangeLow, RangeHigh, InitialValue,
                    Writable, History, HistoryDeadband, Source, Proposable, AllowedValues,
                    HistoryCompression, HistoryMaxInterval, HistoryRetentionHours, Signed, Witness,
                    Display
                 FROM Tags",
                $filter,
                " ORDER BY Path"
            ),
            count: concat!("SELECT COUNT(*) FROM Tags", $filter),
        }
    };
}

/// Every tag.
pub(super) const ALL_TAGS: TagQuery = tag_query!("");
/// The tags a source feeds.
pub(super) const BOUND_TAGS: TagQuery = tag_query!(" WHERE Source IS NOT NULL");
/// The stored plant model, as JSON.
pub(super) const SELECT_MODEL_JSON: &str = "SELECT Json FROM PlantModel WHERE Id = 1";
/// See [`AlarmRow`].
pub(super) const SELECT_ALARMS: &str =
    "SELECT Name, Tag, Condition, LimitValue, Setpoint, ActiveWhen, Deadband, Priority, Message,
        Cause, Consequence, Response, TimeToRespond, Signed, OnDelay, OffDelay, SuppressWhen
 FROM AlarmDefinitions ORDER BY Name";
/// Folders by path.
pub(super) const SELECT_FOLDERS: &str = "SELECT Path, Description FROM Folders ORDER BY Path";

/// What replacing the plant `before` with `after` adds, changes and removes.
pub(super) fn changes_between(before: &ExpandedPlant, after: &ExpandedPlant) -> PlantChanges {
    let by_name_tags = |tags: &[TagSpec]| -> BTreeMap<String, TagSpec> {
        tags.iter()
            .map(|tag| (tag.name.clone(), canonical(tag)))
            .collect()
    };
    let by_name_alarms = |alarms: &[AlarmSpec]| -> BTreeMap<String, AlarmSpec> {
        alarms.iter().map(|a| (a.name.clone(), a.clone())).collect()
    };
    let by_path = |folders: &[FolderSpec]| -> BTreeMap<String, String> {
        folders
            .iter()
            .map(|f| (f.path.clone(), f.description.clone()))
            .collect()
    };
    PlantChanges {
        tags: Changes::between(&by_name_tags(&before.tags), &by_name_tags(&after.tags)),
        alarms: Changes::between(&by_name_alarms(&before.alarms), &by_name_alarms(&after.alarms)),
        folders: Changes::between(&by_path(&before.folders), &by_path(&after.folders)),
        documents: Changes::default(),
        sources: Changes::default(),
        prompts: Changes::default(),
    }
}

/// The sources and prompts replacing those of the stored model (`before_json`; none before any
/// import) with `model`'s add, change and remove, by name.
pub(super) fn named_part_changes(
    before_json: Option<&str>,
    model: &PlantModel,
    changes: &mut PlantChanges,
) -> Result<(), SolutionError> {
    let before = match before_json {
        Some(json) => PlantModel::parts_from_json(json).map_err(unreadable_model)?,
        None => StoredParts::default(),
    };
    fn by_name<T: Clone>(parts: &[T], name: fn(&T) -> String) -> BTreeMap<String, T> {
        parts.iter().map(|part| (name(part), part.clone())).collect()
    }
    let source_name: fn(&SourceSpec) -> String = |source| source.name.clone();
    let prompt_name: fn(&PromptSpec) -> String = |prompt| prompt.name.clone();
    changes.sources = Changes::between(
        &by_name(&before.sources, source_name),
        &by_name(&model.sources, source_name),
    );
    changes.prompts = Changes::between(
        &by_name(&before.prompts, prompt_name),
        &by_name(&model.prompts, prompt_name),
    );
    Ok(())
}

/// The documents replacing `before` with `after` adds, changes (title, text or scope) and
/// removes, by path.
pub(super) fn document_changes(before: &[PlantDocument], after: &[PlantDocument]) -> Changes {
    let by_path = |documents: &[PlantDocument]| {
        documents
            .iter()
            .map(|document| (document.path.clone(), document.clone()))
            .collect()
    };
    Changes::between(&by_path(before), &by_path(after))
}

/// A tag's source binding as stored (JSON), if it has one.
pub(super) fn stored_source(tag: &TagSpec) -> Result<Option<String>, SolutionError> {
    tag.source
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(|error| invalid(&tag.name, format!("its source cannot be stored: {error}")))
}

/// A text tag's set of values as stored (`Tags.AllowedValues`): a JSON array, `None` for none.
pub(super) fn stored_values(tag: &TagSpec) -> Result<Option<String>, SolutionError> {
    (!tag.values.is_empty())
        .then(|| serde_json::to_string(&tag.values))
        .transpose()
        .map_err(|error| invalid(&tag.name, format!("its set of values cannot be stored: {error}")))
}

/// How the overview displays show a tag as stored (`Tags.Display`): JSON, `None` for the defaults.
pub(super) fn stored_display(tag: &TagSpec) -> Result<Option<String>, SolutionError> {
    tag.display
        .as_ref()
        .map(serde_json::to_string)
        .transpose()
        .map_err(|error| invalid(&tag.name, format!("its display cannot be stored: {error}")))
}

/// The model as stored (`PlantModel.Json`).
pub(super) fn model_json(model: &PlantModel) -> Result<String, SolutionError> {
    model
        .to_json()
        .map_err(|error| invalid("(plant model)", format!("the model cannot be stored: {error}")))
}

/// The stored model (`PlantModel.Json`), read back.
pub(super) fn model_of_json(json: &str) -> Result<PlantModel, SolutionError> {
    PlantModel::from_json(json).map_err(unreadable_model)
}

/// The equipment instances of the stored model (`json`; none for a solution never imported
/// into).
/// The notifications and the sources of a stored model (none before an import).
pub(super) fn notifications_of_json(json: Option<&str>) -> Result<PlantNotifications, SolutionError> {
    json.map_or(Ok(PlantNotifications::default()), |json| {
        let (notifications, sources) = PlantModel::notifications_from_json(json).map_err(unreadable_model)?;
        Ok(PlantNotifications {
            notifications,
            sources,
        })
    })
}

/// The plant's notifications, with the sources an MQTT one publishes through.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlantNotifications {
    /// `[[notifications]]`, in file order.
    pub notifications: Vec<plant_model::NotificationSpec>,
    /// `[[sources]]`.
    pub sources: Vec<SourceSpec>,
}

pub(super) fn equipment_of_json(json: Option<&str>) -> Result<Vec<Equipment>, SolutionError> {
    json.map_or(Ok(Vec::new()), |json| {
        PlantModel::equipment_from_json(json).map_err(unreadable_model)
    })
}

pub(super) fn prompts_of_json(json: Option<&str>) -> Result<Vec<plant_model::PromptSpec>, SolutionError> {
    json.map_or(Ok(Vec::new()), |json| {
        PlantModel::prompts_from_json(json).map_err(unreadable_model)
    })
}

/// The refusal of a stored model that does not read.
fn unreadable_model(error: serde_json::Error) -> SolutionError {
    invalid(
        "(plant model)",
        format!("the stored model does not read: {error}"),
    )
}

/// The model of a solution never imported into (made before plant files): its definitions as
/// plain tags and alarms.
pub(super) fn model_of_definitions(definitions: ExpandedPlant) -> PlantModel {
    PlantModel {
        folders: definitions.folders,
        tags: definitions.tags,
        alarms: definitions.alarms,
        ..PlantModel::default()
    }
}

/// The stored plant model's JSON; `None` for a solution never imported into.
fn read_model_json(connection: &Connection) -> rusqlite::Result<Option<String>> {
    connection
        .query_row(SELECT_MODEL_JSON, [], |row| row.get(0))
        .optional()
}

/// The definitions as stored; the outer error is SQLite's, the inner a row that does not read.
fn read_definitions(connection: &Connection) -> rusqlite::Result<Result<ExpandedPlant, SolutionError>> {
    let motions = connection
        .prepare(SELECT_MOTIONS)?
        .query_map([], |row| {
            Ok((
                row.get::<_, String>(0)?,
                Motion {
                    amplitude: row.get(1)?,
                    period: row.get(2)?,
                    phase: row.get(3)?,
                    noise: row.get(4)?,
                },
            ))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let tags = match read_tags(connection, &ALL_TAGS, &motions)? {
        Ok(tags) => tags,
        Err(error) => return Ok(Err(error)),
    };
    let alarms = connection
        .prepare(SELECT_ALARMS)?
        .query_map([], |row| {
            Ok(AlarmRow {
                name: row.get(0)?,
                tag: row.get(1)?,
                condition: row.get(2)?,
                limit: row.get(3)?,
                setpoint: row.get(4)?,
                active_when: row.get(5)?,
                deadband: row.get(6)?,
                priority: row.get(7)?,
                message: row.get(8)?,
                cause: row.get(9)?,
                consequence: row.get(10)?,
                response: row.get(11)?,
                time_to_respond: row.get(12)?,
                signed: row.get(13)?,
                on_delay: row.get(14)?,
                off_delay: row.get(15)?,
                suppress_when: row.get(16)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    let folders = connection
        .prepare(SELECT_FOLDERS)?
        .query_map([], |row| {
            Ok(FolderSpec {
                path: row.get(0)?,
                description: row.get(1)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    Ok(definitions_of_rows(PlantRows {
        tags,
        alarms,
        folders,
    }))
}

/// The tags `query` reads ([`ALL_TAGS`] or [`BOUND_TAGS`]) as the runtime loads them, each row
/// turned into its spec as it is read (`motions` by tag); the outer error is SQLite's, the inner
/// a row that does not read.
fn read_tags(
    connection: &Connection,
    query: &TagQuery,
    motions: &BTreeMap<String, Motion>,
) -> rusqlite::Result<Result<Vec<TagSpec>, SolutionError>> {
    let count: i64 = connection.query_row(query.count, [], |row| row.get(0))?;
    let mut tags = Vec::with_capacity(usize::try_from(count).unwrap_or_default());
    let mut statement = connection.prepare(query.select)?;
    let mut rows = statement.query([])?;
    while let Some(row) = rows.next()? {
        let row = TagRow {
            name: row.get(0)?,
            path: row.get(1)?,
            kind: row.get(2)?,
            unit: row.get(3)?,
            description: row.get(4)?,
            min: row.get(5)?,
            max: row.get(6)?,
            initial: row.get(7)?,
            writable: row.get(8)?,
            history: row.get(9)?,
            history_deadband: row.get(10)?,
            source: row.get(11)?,
            proposable: row.get(12)?,
            values: row.get(13)?,
            history_compression: row.get(14)?,
            history_max_interval: row.get(15)?,
            history_retention_hours: row.get(16)?,
            signed: row.get(17)?,
            witness: row.get(18)?,
            display: row.get(19)?,
        };
        match row.into_spec(motions) {
            Ok(tag) => tags.push(tag),
            Err(error) => return Ok(Err(error)),
        }
    }
    Ok(Ok(tags))
}

/// The sources of the stored model (`json`; none for a solution never imported into) and the
/// tags they feed ([`BOUND_TAGS`]).
pub(super) fn sources_of_rows(
    json: Option<&str>,
    tags: Vec<TagSpec>,
) -> Result<ExpandedPlant, SolutionError> {
    let sources = match json {
        Some(json) => PlantModel::sources_from_json(json).map_err(unreadable_model)?,
        None => Vec::new(),
    };
    Ok(ExpandedPlant {
        tags,
        sources,
        ..ExpandedPlant::default()
    })
}

/// The plant definitions the stored rows describe; a row that does not read is named.
pub(super) fn definitions_of_rows(rows: PlantRows) -> Result<ExpandedPlant, SolutionError> {
    let PlantRows {
        tags,
        alarms: alarm_rows,
        folders,
    } = rows;
    let mut alarms = Vec::with_capacity(alarm_rows.len());
    for row in alarm_rows {
        let Some(condition) = Condition::parse(&row.condition) else {
            return Err(invalid(
                &row.tag,
                format!("alarm {:?} has unknown condition {:?}", row.name, row.condition),
            ));
        };
        let suppress_when = match row.suppress_when.as_deref().map(TagExpression::parse) {
            None => None,
            Some(Ok(expression)) => Some(expression),
            Some(Err(error)) => {
                return Err(invalid(
                    &row.tag,
                    format!(
                        "alarm {:?} has a suppress_when that does not read: {error}",
                        row.name
                    ),
                ));
            }
        };
        alarms.push(AlarmSpec {
            condition,
            name: row.name,
            tag: row.tag,
            limit: row.limit,
            setpoint: row.setpoint,
            active_when: row.active_when,
            deadband: row.deadband,
            priority: row.priority,
            message: row.message,
            cause: row.cause,
            consequence: row.consequence,
            response: row.response,
            time_to_respond: row.time_to_respond,
            signed: row.signed,
            on_delay: row.on_delay,
            off_delay: row.off_delay,
            suppress_when,
        });
    }
    // The sources live in the stored model only (`plant_model`).
    Ok(ExpandedPlant {
        folders,
        tags,
        alarms,
        sources: Vec::new(),
    })
}

/// A plant of two sources, tags fed by each (one of them an equipment instance's member), a
/// tag no source feeds, an alarm and a folder: what both backends' `plant_sources` tests
/// import.
#[cfg(test)]
pub(crate) const PLANT_WITH_SOURCES: &str = r#"
[[sources]]
name = "site"
url = "mqtt://127.0.0.1:1883"
root = "Riverside"

[[sources]]
name = "edge"
url = "mqtt://127.0.0.1:1883"

[[folders]]
path = "Plant/Area1"
description = "Area one"

[[types]]
name = "Pump"

  [[types.tags]]
  name = "Speed"
  type = "number"
  source = { broker = "site" }

[[equipment]]
name = "Pump1"
type = "Pump"
path = "Plant/Area1/Pump1"

[[tags]]
name = "Tank1.Level"
path = "Plant/Area1/Tank1/Level"
type = "number"
source = { broker = "site", topic = "Site/Tank1/Level" }

[[tags]]
name = "Pump2.Current"
path = "Plant/Area1/Pump2/Current"
type = "number"
source = { broker = "edge", sparkplug = "Riverside/Edge1/Pump2", metric = "Motor/Current" }

[[tags]]
name = "Tank1.Setpoint"
path = "Plant/Area1/Tank1/Setpoint"
type = "number"
initial = 50

[[alarms]]
name = "Tank1.High"
tag = "Tank1.Level"
condition = "Hi"
limit = 90
"#;

/// Asserts `read` is what `plant_sources` gives for `model`: its sources, and exactly the
/// tags they feed, as the runtime loads them (by path).
#[cfg(test)]
pub(crate) fn assert_sources_read(read: &ExpandedPlant, model: &PlantModel) {
    assert_eq!(read.sources, model.sources);
    let mut fed: Vec<TagSpec> = model
        .expand()
        .tags
        .iter()
        .filter(|tag| tag.source.is_some())
        .map(canonical)
        .collect();
    fed.sort_by(|one, other| one.path.cmp(&other.path));
    assert_eq!(fed.len(), 3, "the fixture's fed tags");
    assert_eq!(read.tags, fed);
    assert!(read.alarms.is_empty() && read.folders.is_empty());
}
