//! Password verification for Hello.
//!
//! Argon2 is memory-hard on purpose, so verifications run on the blocking pool behind a
//! semaphore: a login flood queues there instead of exhausting memory or starving the
//! reactor. An unknown user is verified against a dummy hash, so the time taken does not tell
//! whether a user exists. Failed logins are counted per peer address by the
//! [`LoginThrottle`]; a locked-out address is refused before (and again after) it waits for a
//! verification slot, so a guessing flood costs no argon2 time once locked out.
//!
//! The comparison itself is argon2's: the hash of the given password is compared with the
//! stored one in constant time (`password-hash`'s `Output` uses `subtle`), so the time taken
//! does not tell how much of a guess was right.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use argon2::password_hash::{PasswordHash, PasswordVerifier};
use tokio::sync::Semaphore;

use crate::solution::{SolutionDb, UserRecord, admin_hash_password};
use crate::throttle::{LoginThrottle, LoginThrottleConfig};

/// Why a login did not succeed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LoginError {
    /// Unknown user or wrong password; deliberately not saying which.
    #[error("unknown user or wrong password")]
    Refused,
    /// Too many failures from this peer address lately; it may try again after the wait.
    #[error("too many failed logins from this address")]
    Throttled(Duration),
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
    throttle: LoginThrottle,
}

impl Authenticator {
    pub(crate) fn new(
        db: Arc<SolutionDb>,
        max_concurrent: usize,
        throttle: LoginThrottleConfig,
    ) -> Result<Self, LoginError> {
        let dummy_hash =
            admin_hash_password("timing-equaliser").map_err(|e| LoginError::Internal(e.to_string()))?;
        Ok(Self {
            db,
            verifications: Arc::new(Semaphore::new(max_concurrent)),
            dummy_hash,
            throttle: LoginThrottle::new(throttle),
        })
    }

    /// Returns the user's stored name when `password` is right for `user_name` and `peer` is
    /// not locked out; counts the outcome against `peer`.
    pub(crate) async fn verify(
        &self,
        peer: IpAddr,
        user_name: &str,
        password: &str,
    ) -> Result<String, LoginError> {
        self.throttle.check(peer).map_err(LoginError::Throttled)?;
        let outcome = self.verify_unthrottled(peer, user_name, password).await;
        match &outcome {
            Ok(_) => self.throttle.succeeded(peer),
            Err(LoginError::Refused) => {
                let (failures, lockout) = self.throttle.failed(peer);
                // Never the password: only who tried, from where, and what it cost them.
                tracing::warn!(%peer, user = %user_name, failures, ?lockout, "login refused: unknown user or wrong password");
            }
            Err(LoginError::Throttled(wait)) => {
                tracing::warn!(%peer, user = %user_name, retry_in = ?wait, "login refused: address locked out");
            }
            Err(LoginError::Internal(_)) => {}
        }
        outcome
    }

    async fn verify_unthrottled(
        &self,
        peer: IpAddr,
        user_name: &str,
        password: &str,
    ) -> Result<String, LoginError> {
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
                if self.check(peer, hash, password).await? {
                    Ok(name)
                } else {
                    Err(LoginError::Refused)
                }
            }
            None => {
                // Spend the same effort as for a real user, then refuse.
                self.check(peer, self.dummy_hash.clone(), password).await?;
                Err(LoginError::Refused)
            }
        }
    }

    async fn check(&self, peer: IpAddr, hash: String, password: &str) -> Result<bool, LoginError> {
        let _permit = Arc::clone(&self.verifications)
            .acquire_owned()
            .await
            .map_err(|_| LoginError::Internal("login verifier closed".into()))?;
        // Attempts queued behind a flood are checked again: the flood may have locked the
        // address out while they waited.
        self.throttle.check(peer).map_err(LoginError::Throttled)?;
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
