//! Password verification for Hello.
//!
//! Argon2 is memory-hard on purpose, so verifications run on the blocking pool behind a
//! semaphore: a login flood queues there instead of exhausting memory or starving the
//! reactor. An unknown user is verified against a dummy hash, so the time taken does not tell
//! whether a user exists.

use std::sync::Arc;

use argon2::password_hash::{PasswordHash, PasswordVerifier};
use tokio::sync::Semaphore;

use crate::solution::{SolutionDb, UserRecord, admin_hash_password};

/// Why a login did not succeed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LoginError {
    /// Unknown user or wrong password; deliberately not saying which.
    #[error("unknown user or wrong password")]
    Refused,
    /// The server could not check (database or hashing failure).
    #[error("login could not be checked: {0}")]
    Internal(String),
}

/// Checks user names and passwords against the solution's `Users` table.
#[derive(Debug)]
pub(crate) struct Authenticator {
    db: Arc<SolutionDb>,
    verifications: Arc<Semaphore>,
    dummy_hash: String,
}

impl Authenticator {
    pub(crate) fn new(db: Arc<SolutionDb>, max_concurrent: usize) -> Result<Self, LoginError> {
        let dummy_hash =
            admin_hash_password("timing-equaliser").map_err(|e| LoginError::Internal(e.to_string()))?;
        Ok(Self {
            db,
            verifications: Arc::new(Semaphore::new(max_concurrent)),
            dummy_hash,
        })
    }

    /// Returns the user's stored name when `password` is right for `user_name`.
    pub(crate) async fn verify(&self, user_name: &str, password: &str) -> Result<String, LoginError> {
        let record = self
            .db
            .user(user_name)
            .map_err(|error| LoginError::Internal(error.to_string()))?;
        match record {
            Some(UserRecord {
                name,
                password_hash: None,
            }) => {
                // A passwordless user logs in with an empty password only.
                if password.is_empty() {
                    Ok(name)
                } else {
                    Err(LoginError::Refused)
                }
            }
            Some(UserRecord {
                name,
                password_hash: Some(hash),
            }) => {
                if self.check(hash, password).await? {
                    Ok(name)
                } else {
                    Err(LoginError::Refused)
                }
            }
            None => {
                // Spend the same effort as for a real user, then refuse.
                self.check(self.dummy_hash.clone(), password).await?;
                Err(LoginError::Refused)
            }
        }
    }

    async fn check(&self, hash: String, password: &str) -> Result<bool, LoginError> {
        let _permit = Arc::clone(&self.verifications)
            .acquire_owned()
            .await
            .map_err(|_| LoginError::Internal("login verifier closed".into()))?;
        let password = password.to_owned();
        tokio::task::spawn_blocking(move || {
            let parsed =
                PasswordHash::new(&hash).map_err(|e| LoginError::Internal(format!("stored hash: {e}")))?;
            Ok(argon2::Argon2::default()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok())
        })
        .await
        .map_err(|error| LoginError::Internal(format!("verification task failed: {error}")))?
    }
}
