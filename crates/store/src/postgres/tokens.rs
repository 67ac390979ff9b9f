//! API tokens of a solution in PostgreSQL: the rules (names, digests, expiry, which token a
//! name means) are `tokens.rs`'s; only the statements are this backend's.

use std::time::Duration;

use super::PgStore;
use crate::tokens::{NewToken, judge_token, token_named, token_parts};
use crate::{ApiToken, SolutionError, TokenRefusal, TokenUser, millis, time_of};

impl PgStore {
    /// See `SolutionDb::create_token`.
    pub(crate) async fn create_token(
        &self,
        user: &str,
        name: &str,
        valid_for: Option<Duration>,
    ) -> Result<(ApiToken, String), SolutionError> {
        let new = NewToken::make(name, valid_for)?;
        let stored_user = self
            .user(user)
            .await?
            .ok_or_else(|| SolutionError::UnknownUser(user.to_owned()))?
            .name;
        sqlx::query(
            "INSERT INTO ApiTokens (Id, Name, UserName, Digest, CreatedAt, ExpiresAt) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&new.id)
        .bind(name)
        .bind(&stored_user)
        .bind(new.digest())
        .bind(millis(new.created_at))
        .bind(new.expires_at.map(millis))
        .execute(&self.pool)
        .await
        .map_err(|error| self.error(error))?;
        Ok(new.issued(name, stored_user))
    }

    /// Every token, oldest first (never a secret).
    pub(crate) async fn tokens(&self) -> Result<Vec<ApiToken>, SolutionError> {
        let rows = sqlx::query(
            "SELECT Id, Name, UserName, CreatedAt, ExpiresAt FROM ApiTokens ORDER BY CreatedAt, Id",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(|error| self.error(error))?;
        rows.iter()
            .map(|row| {
                Ok(ApiToken {
                    id: self.get(row, 0)?,
                    name: self.get(row, 1)?,
                    user: self.get(row, 2)?,
                    created_at: time_of(self.get(row, 3)?),
                    expires_at: self.get::<Option<i64>>(row, 4)?.map(time_of),
                })
            })
            .collect()
    }

    /// Revokes the token `which` names: its id, or a name only one token has.
    pub(crate) async fn revoke_token(&self, which: &str) -> Result<ApiToken, SolutionError> {
        let token = token_named(self.tokens().await?, which)?;
        sqlx::query("DELETE FROM ApiTokens WHERE Id = $1")
            .bind(&token.id)
            .execute(&self.pool)
            .await
            .map_err(|error| self.error(error))?;
        Ok(token)
    }

    /// The user a presented token acts as, or why it is refused.
    pub(crate) async fn verify_token(
        &self,
        text: &str,
    ) -> Result<Result<TokenUser, TokenRefusal>, SolutionError> {
        let Some((id, secret)) = token_parts(text) else {
            return Ok(Err(TokenRefusal::Invalid));
        };
        let row = sqlx::query(
            "SELECT t.Digest, t.ExpiresAt, u.Name, u.Role FROM ApiTokens t JOIN Users u ON u.Name = t.UserName WHERE t.Id = $1",
        )
        .bind(id)
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
        Ok(judge_token(id, secret, stored))
    }
}
