//! The plant and the secrets of a solution in PostgreSQL: read into the rows SQLite's reader
//! reads (`plant.rs` turns them into definitions for both), secrets sealed and opened
//! by `secrets.rs` with the key of `TSERVER_SECRETS_KEY`.

use std::collections::BTreeMap;

use plant_model::{
    Equipment, ExpandedPlant, FolderSpec, InitialValue, Motion, PlantDocument, PlantModel, TagSpec,
};
use solution_settings::SecretValue;
use sqlx::PgConnection;
use sqlx::Row;
use sqlx::postgres::PgRow;

use super::PgStore;
use crate::PlantChanges;
use crate::SolutionError;
use crate::documents::{SELECT_DOCUMENTS, document_of_row, scope_json};
use crate::plant::{
    ALL_TAGS, AlarmRow, BOUND_TAGS, INSERT_TAGS, PlantRows, SELECT_ALARMS, SELECT_FOLDERS, SELECT_MODEL_JSON,
    SELECT_MOTIONS, StoredRecording, TagQuery, TagRow, UPDATE_TAGS, canonical, changes_between,
    definitions_of_rows, document_changes, equipment_of_json, invalid, model_json, model_of_definitions,
    model_of_json, named_part_changes, prompts_of_json, sources_of_rows, stored_display, stored_source,
    stored_type, stored_values,
};
use crate::secrets::{load_key, open_sealed, seal};

/// The advisory lock one import at a time holds (any 64-bit key not used for another purpose).
const PLANT_IMPORT_LOCK: i64 = 0x0070_6c61_6e74_696d;

impl PgStore {
    /// The plant definitions the runtime loads.
    pub(crate) async fn plant_definitions(&self) -> Result<ExpandedPlant, SolutionError> {
        let mut transaction = self.snapshot().await?;
        let rows = self.plant_rows(&mut transaction).await?;
        transaction.commit().await.map_err(|error| self.error(error))?;
        definitions_of_rows(rows)
    }

    /// The plant's rows, read on `connection` (inside the caller's transaction).
    async fn plant_rows(&self, connection: &mut PgConnection) -> Result<PlantRows, SolutionError> {
        let mut motions = BTreeMap::new();
        for row in self.fetch(connection, SELECT_MOTIONS).await? {
            let motion = Motion {
                amplitude: self.get(&row, 1)?,
                period: self.get(&row, 2)?,
                phase: self.get(&row, 3)?,
                noise: self.get(&row, 4)?,
            };
            motions.insert(self.get(&row, 0)?, motion);
        }
        let mut rows = PlantRows {
            tags: self.tags(connection, &ALL_TAGS, &motions).await?,
            ..PlantRows::default()
        };
        for row in self.fetch(connection, SELECT_ALARMS).await? {
            rows.alarms.push(AlarmRow {
                name: self.get(&row, 0)?,
                tag: self.get(&row, 1)?,
                condition: self.get(&row, 2)?,
                limit: self.get(&row, 3)?,
                setpoint: self.get(&row, 4)?,
                active_when: self.get::<Option<i32>>(&row, 5)?.map(|when| when != 0),
                deadband: self.get(&row, 6)?,
                // The column's CHECK keeps it to 1..=1000.
                priority: u32::try_from(self.get::<i32>(&row, 7)?).unwrap_or(0),
                message: self.get(&row, 8)?,
                cause: self.get(&row, 9)?,
                consequence: self.get(&row, 10)?,
                response: self.get(&row, 11)?,
                // The column's CHECK keeps it positive.
                time_to_respond: self
                    .get::<Option<i32>>(&row, 12)?
                    .and_then(|seconds| u32::try_from(seconds).ok()),
                signed: self.get::<i32>(&row, 13)? != 0,
                // The columns' CHECKs keep them to 0..=3600.
                on_delay: u32::try_from(self.get::<i32>(&row, 14)?).unwrap_or(0),
                off_delay: u32::try_from(self.get::<i32>(&row, 15)?).unwrap_or(0),
                suppress_when: self.get(&row, 16)?,
            });
        }
        for row in self.fetch(connection, SELECT_FOLDERS).await? {
            rows.folders.push(FolderSpec {
                path: self.get(&row, 0)?,
                description: self.get(&row, 1)?,
            });
        }
        Ok(rows)
    }

    /// The tags `query` reads ([`ALL_TAGS`] or [`BOUND_TAGS`]) on `connection`, as the runtime
    /// loads them (`motions` by tag).
    async fn tags(
        &self,
        connection: &mut PgConnection,
        query: &TagQuery,
        motions: &BTreeMap<String, Motion>,
    ) -> Result<Vec<TagSpec>, SolutionError> {
        let rows = self.fetch(connection, query.select).await?;
        let mut tags = Vec::with_capacity(rows.len());
        for row in rows {
            let row = TagRow {
                name: self.get(&row, 0)?,
                path: self.get(&row, 1)?,
                kind: self.get(&row, 2)?,
                unit: self.get(&row, 3)?,
                description: self.get(&row, 4)?,
                min: self.get(&row, 5)?,
                max: self.get(&row, 6)?,
                initial: self.get(&row, 7)?,
                writable: self.get::<i32>(&row, 8)? != 0,
                history: self.get::<i32>(&row, 9)? != 0,
                history_deadband: self.get(&row, 10)?,
                source: self.get(&row, 11)?,
                proposable: self.get::<i32>(&row, 12)? != 0,
                values: self.get(&row, 13)?,
                history_compression: self.get(&row, 14)?,
                history_max_interval: self.get(&row, 15)?,
                history_retention_hours: self.get(&row, 16)?,
                signed: self.get::<i32>(&row, 17)? != 0,
                witness: self.get::<i32>(&row, 18)? != 0,
                display: self.get(&row, 19)?,
            };
            tags.push(row.into_spec(motions)?);
        }
        Ok(tags)
    }

    /// The plant model as last imported (see `SolutionDb::plant_model`).
    pub(crate) async fn plant_model(&self) -> Result<PlantModel, SolutionError> {
        match self.model_json(&self.pool).await? {
            Some(json) => model_of_json(&json),
            None => Ok(model_of_definitions(self.plant_definitions().await?)),
        }
    }

    /// The equipment instances of the plant model as last imported (none before an import).
    pub(crate) async fn plant_equipment(&self) -> Result<Vec<Equipment>, SolutionError> {
        equipment_of_json(self.model_json(&self.pool).await?.as_deref())
    }

    /// The site's prompts of the plant model as last imported (none before an import).
    pub(crate) async fn plant_prompts(&self) -> Result<Vec<plant_model::PromptSpec>, SolutionError> {
        prompts_of_json(self.model_json(&self.pool).await?.as_deref())
    }

    /// The plant's notifications and the sources they may publish through.
    pub(crate) async fn plant_notifications(&self) -> Result<crate::PlantNotifications, SolutionError> {
        crate::plant::notifications_of_json(self.model_json(&self.pool).await?.as_deref())
    }

    /// The stored plant model's JSON, read through `executor`; `None` before an import.
    async fn model_json<'e>(
        &self,
        executor: impl sqlx::PgExecutor<'e>,
    ) -> Result<Option<String>, SolutionError> {
        sqlx::query_scalar(SELECT_MODEL_JSON)
            .fetch_optional(executor)
            .await
            .map_err(|error| self.error(error))
    }

    /// The plant's sources and the tags they feed (see `SolutionDb::plant_sources`).
    pub(crate) async fn plant_sources(&self) -> Result<ExpandedPlant, SolutionError> {
        let mut transaction = self.snapshot().await?;
        let json = self.model_json(&mut *transaction).await?;
        let tags = self.tags(&mut transaction, &BOUND_TAGS, &BTreeMap::new()).await?;
        transaction.commit().await.map_err(|error| self.error(error))?;
        sources_of_rows(json.as_deref(), tags)
    }

    /// The revision of the plant model: 0 before any import, one more with each import.
    pub(crate) async fn plant_revision(&self) -> Result<i64, SolutionError> {
        let revision: Option<i64> = sqlx::query_scalar("SELECT Revision FROM PlantModel WHERE Id = 1")
            .fetch_optional(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
        Ok(revision.unwrap_or_default())
    }

    /// Replaces the plant with `model` in one transaction (one import at a time), as
    /// `SolutionDb::import_plant` does; with `dry_run` nothing is kept.
    pub(crate) async fn import_plant(
        &self,
        model: &PlantModel,
        documents: &[PlantDocument],
        source: &str,
        dry_run: bool,
    ) -> Result<PlantChanges, SolutionError> {
        let mut transaction = self.pool.begin().await.map_err(|error| self.error(error))?;
        self.run(
            &mut transaction,
            sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(PLANT_IMPORT_LOCK),
        )
        .await?;
        let before = definitions_of_rows(self.plant_rows(&mut transaction).await?)?;
        let after = model.expand();
        let mut changes = changes_between(&before, &after);
        named_part_changes(
            self.model_json(&mut *transaction).await?.as_deref(),
            model,
            &mut changes,
        )?;
        changes.documents = document_changes(&self.documents_on(&mut transaction).await?, documents);
        if !changes.documents.is_empty() {
            self.write_documents(&mut transaction, documents).await?;
        }
        for statement in [
            "DELETE FROM AlarmDefinitions",
            "DELETE FROM Simulation",
            "DELETE FROM Folders",
            // Paths are unique: a path that moves from one tag to another is freed first.
            "UPDATE Tags SET Path = ' ' || Name",
        ] {
            self.run(&mut transaction, sqlx::query(statement)).await?;
        }
        self.run(
            &mut transaction,
            sqlx::query("DELETE FROM Tags WHERE Name = ANY($1)").bind(&changes.tags.removed),
        )
        .await?;
        let tags: Vec<TagSpec> = after.tags.iter().map(canonical).collect();
        let upsert_tags = format!(
            "{INSERT_TAGS} SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
                 $6::float8[], $7::float8[], $8::text[], $9::integer[], $10::integer[], $11::float8[], $12::text[],
                 $13::integer[], $14::text[], $15::text[], $16::bigint[], $17::bigint[], $18::integer[],
                 $19::integer[], $20::text[])
             {UPDATE_TAGS}"
        );
        let sources = tags.iter().map(stored_source).collect::<Result<Vec<_>, _>>()?;
        let values = tags.iter().map(stored_values).collect::<Result<Vec<_>, _>>()?;
        let displays = tags.iter().map(stored_display).collect::<Result<Vec<_>, _>>()?;
        let recordings: Vec<StoredRecording> = tags.iter().map(StoredRecording::of).collect();
        self.run(
            &mut transaction,
            sqlx::query(&upsert_tags)
                .bind(tags.iter().map(|tag| tag.name.as_str()).collect::<Vec<_>>())
                .bind(tags.iter().map(|tag| tag.path.as_str()).collect::<Vec<_>>())
                .bind(tags.iter().map(|tag| stored_type(tag.kind)).collect::<Vec<_>>())
                .bind(tags.iter().map(|tag| tag.unit.as_str()).collect::<Vec<_>>())
                .bind(
                    tags.iter()
                        .map(|tag| tag.description.as_str())
                        .collect::<Vec<_>>(),
                )
                .bind(tags.iter().map(|tag| tag.min).collect::<Vec<_>>())
                .bind(tags.iter().map(|tag| tag.max).collect::<Vec<_>>())
                .bind(
                    tags.iter()
                        .map(|tag| tag.initial.as_ref().map(InitialValue::to_text))
                        .collect::<Vec<_>>(),
                )
                .bind(tags.iter().map(|tag| i32::from(tag.writable)).collect::<Vec<_>>())
                .bind(
                    recordings
                        .iter()
                        .map(|recording| i32::from(recording.on))
                        .collect::<Vec<_>>(),
                )
                .bind(
                    recordings
                        .iter()
                        .map(|recording| recording.deadband)
                        .collect::<Vec<_>>(),
                )
                .bind(sources)
                .bind(
                    tags.iter()
                        .map(|tag| i32::from(tag.proposable))
                        .collect::<Vec<_>>(),
                )
                .bind(values)
                .bind(
                    recordings
                        .iter()
                        .map(|recording| recording.compression)
                        .collect::<Vec<_>>(),
                )
                .bind(
                    recordings
                        .iter()
                        .map(|recording| recording.max_interval)
                        .collect::<Vec<_>>(),
                )
                .bind(
                    recordings
                        .iter()
                        .map(|recording| recording.retention_hours)
                        .collect::<Vec<_>>(),
                )
                .bind(tags.iter().map(|tag| i32::from(tag.signed)).collect::<Vec<_>>())
                .bind(tags.iter().map(|tag| i32::from(tag.witness)).collect::<Vec<_>>())
                .bind(displays),
        )
        .await?;
        let moving: Vec<(&str, &Motion)> = tags
            .iter()
            .filter_map(|tag| Some((tag.name.as_str(), tag.simulate.as_ref()?)))
            .collect();
        self.run(
            &mut transaction,
            sqlx::query(
                "INSERT INTO Simulation (Tag, Amplitude, PeriodSeconds, Phase, Noise)
                 SELECT * FROM UNNEST($1::text[], $2::float8[], $3::float8[], $4::float8[], $5::float8[])",
            )
            .bind(moving.iter().map(|(name, _)| *name).collect::<Vec<_>>())
            .bind(
                moving
                    .iter()
                    .map(|(_, motion)| motion.amplitude)
                    .collect::<Vec<_>>(),
            )
            .bind(moving.iter().map(|(_, motion)| motion.period).collect::<Vec<_>>())
            .bind(moving.iter().map(|(_, motion)| motion.phase).collect::<Vec<_>>())
            .bind(moving.iter().map(|(_, motion)| motion.noise).collect::<Vec<_>>()),
        )
        .await?;
        let alarms = &after.alarms;
        self.run(
            &mut transaction,
            sqlx::query(
                "INSERT INTO AlarmDefinitions (Name, Tag, Condition, LimitValue, Setpoint, ActiveWhen, Deadband, Priority, Message,
                     Cause, Consequence, Response, TimeToRespond, Signed, OnDelay, OffDelay, SuppressWhen)
                 SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::float8[], $5::float8[],
                                      $6::integer[], $7::float8[], $8::integer[], $9::text[],
                                      $10::text[], $11::text[], $12::text[], $13::integer[], $14::integer[],
                                      $15::integer[], $16::integer[], $17::text[])",
            )
            .bind(alarms.iter().map(|alarm| alarm.name.as_str()).collect::<Vec<_>>())
            .bind(alarms.iter().map(|alarm| alarm.tag.as_str()).collect::<Vec<_>>())
            .bind(alarms.iter().map(|alarm| alarm.condition.name()).collect::<Vec<_>>())
            .bind(alarms.iter().map(|alarm| alarm.limit).collect::<Vec<_>>())
            .bind(alarms.iter().map(|alarm| alarm.setpoint).collect::<Vec<_>>())
            .bind(alarms.iter().map(|alarm| alarm.active_when.map(i32::from)).collect::<Vec<_>>())
            .bind(alarms.iter().map(|alarm| alarm.deadband).collect::<Vec<_>>())
            .bind(
                alarms
                    .iter()
                    .map(|alarm| i32::try_from(alarm.priority).unwrap_or(i32::MAX))
                    .collect::<Vec<_>>(),
            )
            .bind(alarms.iter().map(|alarm| alarm.message.as_str()).collect::<Vec<_>>())
            .bind(alarms.iter().map(|alarm| alarm.cause.as_str()).collect::<Vec<_>>())
            .bind(alarms.iter().map(|alarm| alarm.consequence.as_str()).collect::<Vec<_>>())
            .bind(alarms.iter().map(|alarm| alarm.response.as_str()).collect::<Vec<_>>())
            .bind(
                alarms
                    .iter()
                    .map(|alarm| alarm.time_to_respond.and_then(|seconds| i32::try_from(seconds).ok()))
                    .collect::<Vec<_>>(),
            )
            .bind(alarms.iter().map(|alarm| i32::from(alarm.signed)).collect::<Vec<_>>())
            .bind(
                alarms
                    .iter()
                    .map(|alarm| i32::try_from(alarm.on_delay).unwrap_or(i32::MAX))
                    .collect::<Vec<_>>(),
            )
            .bind(
                alarms
                    .iter()
                    .map(|alarm| i32::try_from(alarm.off_delay).unwrap_or(i32::MAX))
                    .collect::<Vec<_>>(),
            )
            .bind(
                alarms
                    .iter()
                    .map(|alarm| alarm.suppress_when.as_ref().map(ToString::to_string))
                    .collect::<Vec<_>>(),
            ),
        )
        .await?;
        self.run(
            &mut transaction,
            sqlx::query(
                "INSERT INTO Folders (Path, Description) SELECT * FROM UNNEST($1::text[], $2::text[])",
            )
            .bind(
                after
                    .folders
                    .iter()
                    .map(|folder| folder.path.as_str())
                    .collect::<Vec<_>>(),
            )
            .bind(
                after
                    .folders
                    .iter()
                    .map(|folder| folder.description.as_str())
                    .collect::<Vec<_>>(),
            ),
        )
        .await?;
        // The same model and documents again leave the revision: nothing for the nodes to
        // reload.
        self.run(
            &mut transaction,
            sqlx::query(
                "INSERT INTO PlantModel (Id, Json, Revision, SourceName) VALUES (1, $1, 1, $2)
                 ON CONFLICT (Id) DO UPDATE SET Json = excluded.Json, Revision = PlantModel.Revision + 1,
                     SourceName = excluded.SourceName, ImportedAt = now()
                 WHERE PlantModel.Json IS DISTINCT FROM excluded.Json OR $3",
            )
            .bind(model_json(model)?)
            .bind(source)
            .bind(!changes.documents.is_empty()),
        )
        .await?;
        if dry_run {
            transaction.rollback().await.map_err(|error| self.error(error))?;
        } else {
            transaction.commit().await.map_err(|error| self.error(error))?;
        }
        Ok(changes)
    }

    /// The documents attached to the plant, by path.
    pub(crate) async fn plant_documents(&self) -> Result<Vec<PlantDocument>, SolutionError> {
        let mut connection = self.pool.acquire().await.map_err(|error| self.error(error))?;
        self.documents_on(&mut connection).await
    }

    /// The stored documents, read on `connection`.
    async fn documents_on(&self, connection: &mut PgConnection) -> Result<Vec<PlantDocument>, SolutionError> {
        let mut documents = Vec::new();
        for row in self.fetch(connection, SELECT_DOCUMENTS).await? {
            let scope: String = self.get(&row, 3)?;
            documents.push(document_of_row(
                self.get(&row, 0)?,
                self.get(&row, 1)?,
                self.get(&row, 2)?,
                &scope,
            )?);
        }
        Ok(documents)
    }

    /// Replaces the stored documents with `documents` on `connection`.
    async fn write_documents(
        &self,
        connection: &mut PgConnection,
        documents: &[PlantDocument],
    ) -> Result<(), SolutionError> {
        self.run(connection, sqlx::query("DELETE FROM PlantDocuments"))
            .await?;
        let scopes = documents.iter().map(scope_json).collect::<Result<Vec<_>, _>>()?;
        self.run(
            connection,
            sqlx::query(
                "INSERT INTO PlantDocuments (Path, Title, Text, Scope)
                 SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[])",
            )
            .bind(
                documents
                    .iter()
                    .map(|document| document.path.as_str())
                    .collect::<Vec<_>>(),
            )
            .bind(
                documents
                    .iter()
                    .map(|document| document.title.as_str())
                    .collect::<Vec<_>>(),
            )
            .bind(
                documents
                    .iter()
                    .map(|document| document.text.as_str())
                    .collect::<Vec<_>>(),
            )
            .bind(scopes),
        )
        .await
    }

    /// Deletes the recorded history of a tag no longer in the plant; returns the samples
    /// deleted. A tag still in the plant is refused.
    pub(crate) async fn purge_tag_history(&self, tag: &str) -> Result<usize, SolutionError> {
        let defined: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM Tags WHERE Name = $1)")
            .bind(tag)
            .fetch_one(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
        if defined {
            return Err(invalid(
                tag,
                "it is still in the plant; remove it from the plant file and import first",
            ));
        }
        self.purge_history_blocks(tag).await
    }

    /// Runs one statement on `connection`.
    async fn run(
        &self,
        connection: &mut PgConnection,
        query: sqlx::query::Query<'_, sqlx::Postgres, sqlx::postgres::PgArguments>,
    ) -> Result<(), SolutionError> {
        query
            .execute(connection)
            .await
            .map_err(|error| self.error(error))?;
        Ok(())
    }

    /// Stores (or replaces) a secret, sealed with the key of `TSERVER_SECRETS_KEY`.
    pub(crate) async fn set_secret(&self, name: &str, value: &str) -> Result<(), SolutionError> {
        let (nonce, ciphertext) = seal(&load_key(None)?, name, value)?;
        sqlx::query(
            "INSERT INTO Secrets (Name, Nonce, Ciphertext) VALUES ($1, $2, $3)
             ON CONFLICT (Name) DO UPDATE SET Nonce = excluded.Nonce, Ciphertext = excluded.Ciphertext,
             UpdatedAt = now()",
        )
        .bind(name)
        .bind(nonce)
        .bind(ciphertext)
        .execute(&self.pool)
        .await
        .map_err(|error| self.error(error))?;
        Ok(())
    }

    /// Reads and opens a secret; `None` when there is none of that name.
    pub(crate) async fn secret(&self, name: &str) -> Result<Option<SecretValue>, SolutionError> {
        let stored = sqlx::query("SELECT Nonce, Ciphertext FROM Secrets WHERE Name = $1")
            .bind(name)
            .fetch_optional(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
        let Some(row) = stored else {
            return Ok(None);
        };
        let (nonce, ciphertext): (Vec<u8>, Vec<u8>) = (self.get(&row, 0)?, self.get(&row, 1)?);
        open_sealed(&load_key(None)?, name, &nonce, &ciphertext).map(Some)
    }

    /// The names of all secrets (never their values).
    pub(crate) async fn secret_names(&self) -> Result<Vec<String>, SolutionError> {
        sqlx::query_scalar("SELECT Name FROM Secrets ORDER BY Name")
            .fetch_all(&self.pool)
            .await
            .map_err(|error| self.error(error))
    }

    /// Removes a secret.
    pub(crate) async fn remove_secret(&self, name: &str) -> Result<(), SolutionError> {
        let removed = sqlx::query("DELETE FROM Secrets WHERE Name = $1")
            .bind(name)
            .execute(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
        if removed.rows_affected() == 0 {
            return Err(SolutionError::UnknownSecret(name.to_owned()));
        }
        Ok(())
    }

    /// Every row `sql` selects on `connection`.
    async fn fetch(
        &self,
        connection: &mut PgConnection,
        sql: &'static str,
    ) -> Result<Vec<PgRow>, SolutionError> {
        sqlx::query(sql)
            .fetch_all(connection)
            .await
            .map_err(|error| self.error(error))
    }

    /// Column `index` of `row`, as `T`.
    pub(super) fn get<'r, T>(&self, row: &'r PgRow, index: usize) -> Result<T, SolutionError>
    where
        T: sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
    {
        row.try_get(index).map_err(|error| self.error(error))
    }
}
