//! The plant and the secrets of a solution in PostgreSQL: read into the rows SQLite's reader
//! reads (`solution/plant.rs` turns them into definitions for both), secrets sealed and opened
//! by `solution/secrets.rs` with the key of `TSERVER_SECRETS_KEY`.

use localai::secrets::SecretValue;
use plant_model::{ExpandedPlant, FolderSpec, Motion, PlantModel};
use sqlx::Row;
use sqlx::postgres::PgRow;

use super::PgStore;
use crate::solution::SolutionError;
use crate::solution::plant::{
    PlantRows, SELECT_ALARMS, SELECT_FOLDERS, SELECT_MOTIONS, SELECT_TAGS, definitions_of_rows,
    model_of_definitions, model_of_json,
};
use crate::solution::secrets::{load_key, open_sealed, seal};

impl PgStore {
    /// The plant definitions the runtime loads.
    pub async fn plant_definitions(&self) -> Result<ExpandedPlant, SolutionError> {
        let mut transaction = self.pool.begin().await.map_err(|error| self.error(error))?;
        // One snapshot: an import committed meanwhile is seen whole or not at all.
        sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            .execute(&mut *transaction)
            .await
            .map_err(|error| self.error(error))?;
        let mut rows = PlantRows::default();
        for row in self.fetch(&mut transaction, SELECT_MOTIONS).await? {
            let motion = Motion {
                amplitude: self.get(&row, 1)?,
                period: self.get(&row, 2)?,
                phase: self.get(&row, 3)?,
                noise: self.get(&row, 4)?,
            };
            rows.motions.insert(self.get(&row, 0)?, motion);
        }
        for row in self.fetch(&mut transaction, SELECT_TAGS).await? {
            rows.tags.push((
                self.get(&row, 0)?,
                self.get(&row, 1)?,
                self.get(&row, 2)?,
                self.get(&row, 3)?,
                self.get(&row, 4)?,
                self.get(&row, 5)?,
                self.get(&row, 6)?,
                self.get(&row, 7)?,
                self.get::<i32>(&row, 8)? != 0,
                self.get::<i32>(&row, 9)? != 0,
                self.get(&row, 10)?,
                self.get(&row, 11)?,
            ));
        }
        for row in self.fetch(&mut transaction, SELECT_ALARMS).await? {
            rows.alarms.push((
                self.get(&row, 0)?,
                self.get(&row, 1)?,
                self.get(&row, 2)?,
                self.get(&row, 3)?,
                self.get(&row, 4)?,
                self.get::<Option<i32>>(&row, 5)?.map(|when| when != 0),
                self.get(&row, 6)?,
                // The column's CHECK keeps it to 1..=1000.
                u32::try_from(self.get::<i32>(&row, 7)?).unwrap_or(0),
                self.get(&row, 8)?,
            ));
        }
        for row in self.fetch(&mut transaction, SELECT_FOLDERS).await? {
            rows.folders.push(FolderSpec {
                path: self.get(&row, 0)?,
                description: self.get(&row, 1)?,
            });
        }
        transaction.commit().await.map_err(|error| self.error(error))?;
        definitions_of_rows(rows)
    }

    /// The plant model as last imported (see `SolutionDb::plant_model`).
    pub async fn plant_model(&self) -> Result<PlantModel, SolutionError> {
        let stored: Option<String> = sqlx::query_scalar("SELECT Json FROM PlantModel WHERE Id = 1")
            .fetch_optional(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
        match stored {
            Some(json) => model_of_json(&json),
            None => Ok(model_of_definitions(self.plant_definitions().await?)),
        }
    }

    /// The revision of the plant model: 0 before any import, one more with each import.
    pub async fn plant_revision(&self) -> Result<i64, SolutionError> {
        let revision: Option<i64> = sqlx::query_scalar("SELECT Revision FROM PlantModel WHERE Id = 1")
            .fetch_optional(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
        Ok(revision.unwrap_or_default())
    }

    /// Stores (or replaces) a secret, sealed with the key of `TSERVER_SECRETS_KEY`.
    pub async fn set_secret(&self, name: &str, value: &str) -> Result<(), SolutionError> {
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
    pub async fn secret(&self, name: &str) -> Result<Option<SecretValue>, SolutionError> {
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
    pub async fn secret_names(&self) -> Result<Vec<String>, SolutionError> {
        sqlx::query_scalar("SELECT Name FROM Secrets ORDER BY Name")
            .fetch_all(&self.pool)
            .await
            .map_err(|error| self.error(error))
    }

    /// Removes a secret.
    pub async fn remove_secret(&self, name: &str) -> Result<(), SolutionError> {
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

    /// Every row `sql` selects in `transaction`.
    async fn fetch(
        &self,
        transaction: &mut sqlx::Transaction<'static, sqlx::Postgres>,
        sql: &'static str,
    ) -> Result<Vec<PgRow>, SolutionError> {
        sqlx::query(sql)
            .fetch_all(&mut **transaction)
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
