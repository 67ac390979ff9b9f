//! Browser logins of a solution in PostgreSQL: the rules (token, digest, expiry, cap) are
//! `browser_sessions.rs`'s; only the statements are this backend's.

use std::time::SystemTime;

use super::PgStore;
use crate::browser_sessions::{BrowserLoginRules, digest, judge, new_token};
use crate::{BrowserLogin, SolutionError, millis};

impl PgStore {
    /// See `SolutionDb::create_browser_session`.
    pub(crate) async fn create_browser_session(
        &self,
        user: &str,
        rules: &BrowserLoginRules,
        now: SystemTime,
    ) -> Result<String, SolutionError> {
        let stored_user = self
            .user(user)
            .await?
            .ok_or_else(|| SolutionError::UnknownUser(user.to_owned()))?
            .name;
        let (token, digest) = new_token();
        let (idle_cutoff, lifetime_cutoff) = rules.cutoffs(now);
        let failed = |error| self.error(error);
        let mut transaction = self.pool.begin().await.map_err(failed)?;
        sqlx::query(
            "INSERT INTO BrowserSessions (Digest, UserName, CreatedAt, LastUsedAt) VALUES ($1, $2, $3, $3)",
        )
        .bind(&digest)
        .bind(&stored_user)
        .bind(millis(now))
        .execute(&mut *transaction)
        .await
        .map_err(failed)?;
        sqlx::query("DELETE FROM BrowserSessions WHERE LastUsedAt < $1 OR CreatedAt < $2")
            .bind(idle_cutoff)
            .bind(lifetime_cutoff)
            .execute(&mut *transaction)
            .await
            .map_err(failed)?;
        sqlx::query(
            "DELETE FROM BrowserSessions WHERE UserName = $1 AND Digest NOT IN
                 (SELECT Digest FROM BrowserSessions WHERE UserName = $1
                  ORDER BY CreatedAt DESC, Digest LIMIT $2)",
        )
        .bind(&stored_user)
        .bind(i64::from(rules.per_user))
        .execute(&mut *transaction)
        .await
        .map_err(failed)?;
        transaction.commit().await.map_err(failed)?;
        Ok(token)
    }

    /// See `SolutionDb::browser_session`.
    pub(crate) async fn browser_session(
        &self,
        token: &str,
        rules: &BrowserLoginRules,
        now: SystemTime,
    ) -> Result<Option<BrowserLogin>, SolutionError> {
        let digest = digest(token);
        let row = sqlx::query(
            "SELECT s.CreatedAt, s.LastUsedAt, u.Name, u.Role FROM BrowserSessions s JOIN Users u ON u.Name = s.UserName WHERE s.Digest = $1",
        )
        .bind(&digest)
        .fetch_optional(&self.pool)
        .await
        .map_err(|error| self.error(error))?;
        let stored = match row {
            Some(row) => Some((
                self.get(&row, 0)?,
                self.get(&row, 1)?,
                self.get(&row, 2)?,
                self.get(&row, 3)?,
            )),
            None => None,
        };
        let statement = match judge(stored, rules, now) {
            Ok(None) => return Ok(None),
            Ok(Some(login)) => {
                sqlx::query("UPDATE BrowserSessions SET LastUsedAt = $2 WHERE Digest = $1")
                    .bind(&digest)
                    .bind(millis(now))
                    .execute(&self.pool)
                    .await
                    .map_err(|error| self.error(error))?;
                return Ok(Some(login));
            }
            Err(()) => "DELETE FROM BrowserSessions WHERE Digest = $1",
        };
        sqlx::query(statement)
            .bind(&digest)
            .execute(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
        Ok(None)
    }

    /// See `SolutionDb::revoke_browser_session`.
    pub(crate) async fn revoke_browser_session(&self, token: &str) -> Result<bool, SolutionError> {
        let done = sqlx::query("DELETE FROM BrowserSessions WHERE Digest = $1")
            .bind(digest(token))
            .execute(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
        Ok(done.rows_affected() > 0)
    }

    /// Ends every browser login of user `name` (its credentials or role changed).
    pub(super) async fn end_browser_sessions(&self, name: &str) -> Result<(), SolutionError> {
        sqlx::query("DELETE FROM BrowserSessions WHERE lower(UserName) = lower($1)")
            .bind(name)
            .execute(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
        Ok(())
    }
}
