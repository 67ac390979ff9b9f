//! Admin operations on a PostgreSQL solution: settings get/set/unset and user management, with
//! the same rules as a file's (`admin.rs` works each change out; this writes it). A
//! key-by-key `ModelSettings` edit reads the column `FOR UPDATE`, so two editors on any nodes
//! never lose each other's keys.

use std::collections::HashMap;

use solution_settings::{SettingIssue, editing_issues};
use sqlx::Row;

use super::PgStore;
use super::settings_lease::SettingsRevocation;
use crate::admin::{SettingsWrite, known_user, plan_set, plan_unset, setting_value};
use crate::{
    Role, RuntimeKey, RuntimeSettings, SettingKey, SettingValue, SolutionError, UserRecord, role_of_stored,
};

impl PgStore {
    /// The runtime settings, defaults applied for absent keys (see
    /// [`SolutionDb::runtime_settings`](crate::SolutionDb::runtime_settings)).
    pub(crate) async fn runtime_settings(&self) -> Result<RuntimeSettings, SolutionError> {
        let rows = sqlx::query("SELECT Key, Value FROM RuntimeSettings")
            .fetch_all(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
        let mut stored = HashMap::new();
        for row in rows {
            let key: String = row.try_get(0).map_err(|error| self.error(error))?;
            let value: String = row.try_get(1).map_err(|error| self.error(error))?;
            stored.insert(key, value);
        }
        RuntimeSettings::from_stored(|key: RuntimeKey| Ok(stored.get(key.as_str()).cloned()))
    }

    /// Reads one setting (see [`SolutionDb::setting`](crate::SolutionDb::setting)).
    pub(crate) async fn setting(&self, key: &SettingKey) -> Result<SettingValue, SolutionError> {
        let runtime = match key {
            SettingKey::Runtime(_) => self.runtime_settings().await?,
            _ => RuntimeSettings::default(),
        };
        setting_value(key, &self.settings_row().await?, &runtime)
    }

    /// Writes one setting (see [`SolutionDb::set_setting`](crate::SolutionDb::set_setting)).
    pub(crate) async fn set_setting(&self, key: &SettingKey, value: &str) -> Result<(), SolutionError> {
        self.write_setting(key, |stored| plan_set(key, value, stored))
            .await
    }

    /// Returns a setting to its default (see
    /// [`SolutionDb::unset_setting`](crate::SolutionDb::unset_setting)).
    pub(crate) async fn unset_setting(&self, key: &SettingKey) -> Result<(), SolutionError> {
        self.write_setting(key, |stored| plan_unset(key, stored)).await
    }

    /// What is wrong with the stored `ModelSettings`.
    pub(crate) async fn settings_issues(&self) -> Result<Vec<SettingIssue>, SolutionError> {
        Ok(editing_issues(
            self.settings_row().await?.model_settings.as_deref(),
        ))
    }

    /// Writes one setting. A change of the `SolutionSettings` row is made holding the writer
    /// lock, after every serving node's copy was revoked (`settings_lease.rs`).
    async fn write_setting(
        &self,
        key: &SettingKey,
        plan: impl FnOnce(Option<&str>) -> Result<SettingsWrite, SolutionError>,
    ) -> Result<(), SolutionError> {
        if matches!(key, SettingKey::Runtime(_)) {
            let mut connection = self.pool.acquire().await.map_err(|error| self.error(error))?;
            return self.write_setting_on(&mut connection, key, plan).await;
        }
        let mut revocation = SettingsRevocation::acquire(self).await?;
        self.write_setting_on(revocation.connection(), key, plan).await?;
        revocation.release().await.map_err(|error| self.error(error))
    }

    async fn write_setting_on(
        &self,
        connection: &mut sqlx::PgConnection,
        key: &SettingKey,
        plan: impl FnOnce(Option<&str>) -> Result<SettingsWrite, SolutionError>,
    ) -> Result<(), SolutionError> {
        let mut transaction = sqlx::Connection::begin(connection)
            .await
            .map_err(|error| self.error(error))?;
        let stored: Option<String> = if key.edits_stored_document() {
            sqlx::query_scalar("SELECT ModelSettings FROM SolutionSettings LIMIT 1 FOR UPDATE")
                .fetch_one(&mut *transaction)
                .await
                .map_err(|error| self.error(error))?
        } else {
            None
        };
        let query = match plan(stored.as_deref())? {
            SettingsWrite::Runtime(key, Some(value)) => sqlx::query(
                "INSERT INTO RuntimeSettings (Key, Value) VALUES ($1, $2)
                 ON CONFLICT (Key) DO UPDATE SET Value = excluded.Value",
            )
            .bind(key.as_str())
            .bind(value),
            SettingsWrite::Runtime(key, None) => {
                sqlx::query("DELETE FROM RuntimeSettings WHERE Key = $1").bind(key.as_str())
            }
            SettingsWrite::ModelEnabled(enabled) => {
                sqlx::query("UPDATE SolutionSettings SET ModelEnabled = $1").bind(i32::from(enabled))
            }
            SettingsWrite::ModelOptions(bits) => {
                sqlx::query("UPDATE SolutionSettings SET ModelOptions = $1").bind(i64::from(bits))
            }
            SettingsWrite::ModelSettings(column) => {
                sqlx::query("UPDATE SolutionSettings SET ModelSettings = $1").bind(column)
            }
        };
        query
            .execute(&mut *transaction)
            .await
            .map_err(|error| self.error(error))?;
        transaction.commit().await.map_err(|error| self.error(error))
    }

    /// Replaces a user's password (`None`: passwordless).
    pub(crate) async fn set_password(&self, name: &str, password: Option<&str>) -> Result<(), SolutionError> {
        let hash = match password {
            Some(password) => Some(super::hash_off_the_workers(password).await?),
            None => None,
        };
        let changed = sqlx::query("UPDATE Users SET PasswordHash = $2 WHERE lower(Name) = lower($1)")
            .bind(name)
            .bind(hash)
            .execute(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
        self.end_browser_sessions(name).await?;
        known_user(name, changed.rows_affected() > 0)
    }

    /// Changes a user's role.
    pub(crate) async fn set_role(&self, name: &str, role: Role) -> Result<(), SolutionError> {
        let changed = sqlx::query("UPDATE Users SET Role = $2 WHERE lower(Name) = lower($1)")
            .bind(name)
            .bind(role.as_str())
            .execute(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
        self.end_browser_sessions(name).await?;
        known_user(name, changed.rows_affected() > 0)
    }

    /// Removes a user (and, by the foreign keys, their API tokens and browser logins).
    pub(crate) async fn remove_user(&self, name: &str) -> Result<(), SolutionError> {
        let changed = sqlx::query("DELETE FROM Users WHERE lower(Name) = lower($1)")
            .bind(name)
            .execute(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
        known_user(name, changed.rows_affected() > 0)
    }

    /// Every user, by name.
    pub(crate) async fn users(&self) -> Result<Vec<UserRecord>, SolutionError> {
        let rows = sqlx::query("SELECT Name, PasswordHash, Role FROM Users ORDER BY lower(Name)")
            .fetch_all(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
        rows.iter()
            .map(|row| {
                Ok(UserRecord {
                    name: row.try_get(0).map_err(|error| self.error(error))?,
                    password_hash: row.try_get(1).map_err(|error| self.error(error))?,
                    role: role_of_stored(&row.try_get::<String, _>(2).map_err(|error| self.error(error))?),
                })
            })
            .collect()
    }
}
