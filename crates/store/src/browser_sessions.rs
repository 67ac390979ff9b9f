//! Browser logins: the token a browser keeps in its session cookie after logging in with a
//! password once. The token is 32 random bytes (hex); only its SHA-256 digest is stored, with
//! the user and when it was made and last used, so any node sharing the solution verifies it.
//! A token unused for longer than the idle limit the caller gives is expired (and deleted when
//! seen); changing or removing its user deletes it (`admin.rs`), as does logging out.

use std::time::{Duration, SystemTime};

use chacha20poly1305::aead::OsRng;
use chacha20poly1305::aead::rand_core::RngCore;
use rusqlite::{OptionalExtension, params};
use sha2::{Digest, Sha256};

use super::{Role, SolutionDb, SolutionError, millis, role_of_stored};

/// Who a valid browser token logs in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrowserLogin {
    /// The user, as stored.
    pub user: String,
    /// The user's role now.
    pub role: Role,
}

/// A fresh token (shown once, to the browser) and the digest stored of it.
pub(super) fn new_token() -> (String, String) {
    let mut secret = [0_u8; 32];
    OsRng.fill_bytes(&mut secret);
    let token = hex::encode(secret);
    let digest = digest(&token);
    (token, digest)
}

/// What is stored of a token.
pub(super) fn digest(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// A token's row as stored with its user's: last use, user name, role.
pub(super) type StoredBrowserSession = (i64, String, String);

/// Whether `stored` (the token's row, if any) is a login at `now` given `idle`: `Ok(None)` when
/// unknown, `Err(())` when expired (the caller deletes it).
pub(super) fn judge(
    stored: Option<StoredBrowserSession>,
    idle: Duration,
    now: SystemTime,
) -> Result<Option<BrowserLogin>, ()> {
    let Some((last_used, user, role)) = stored else {
        return Ok(None);
    };
    let idle_millis = i64::try_from(idle.as_millis()).unwrap_or(i64::MAX);
    if millis(now).saturating_sub(last_used) > idle_millis {
        return Err(());
    }
    Ok(Some(BrowserLogin {
        user,
        role: role_of_stored(&role),
    }))
}

impl SolutionDb {
    /// Starts a browser login for `user` (matched case-insensitively) at `now`; returns the
    /// token, shown only now.
    pub(crate) fn create_browser_session(
        &self,
        user: &str,
        now: SystemTime,
    ) -> Result<String, SolutionError> {
        let stored_user = self
            .user(user)?
            .ok_or_else(|| SolutionError::UnknownUser(user.to_owned()))?
            .name;
        let (token, digest) = new_token();
        self.writer()?.execute(
            "INSERT INTO BrowserSessions (Digest, User, CreatedAt, LastUsedAt) VALUES (?1, ?2, ?3, ?3)",
            params![digest, stored_user, millis(now)],
        )?;
        Ok(token)
    }

    /// The login `token` carries at `now`, unless unknown, revoked or idle for longer than
    /// `idle`; a valid one is marked used at `now`, an expired one deleted.
    pub(crate) fn browser_session(
        &self,
        token: &str,
        idle: Duration,
        now: SystemTime,
    ) -> Result<Option<BrowserLogin>, SolutionError> {
        let digest = digest(token);
        let stored = self.read(|connection| {
            connection
                .prepare_cached(
                    "SELECT s.LastUsedAt, u.Name, u.Role FROM BrowserSessions s JOIN Users u ON u.Name = s.User WHERE s.Digest = ?1",
                )?
                .query_row([&digest], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
                .optional()
        })?;
        match judge(stored, idle, now) {
            Ok(Some(login)) => {
                self.writer()?.execute(
                    "UPDATE BrowserSessions SET LastUsedAt = ?2 WHERE Digest = ?1",
                    params![digest, millis(now)],
                )?;
                Ok(Some(login))
            }
            Ok(None) => Ok(None),
            Err(()) => {
                self.writer()?
                    .execute("DELETE FROM BrowserSessions WHERE Digest = ?1", [&digest])?;
                Ok(None)
            }
        }
    }

    /// Ends the browser login `token` carries (nothing when there is none).
    pub(crate) fn revoke_browser_session(&self, token: &str) -> Result<(), SolutionError> {
        self.writer()?
            .execute("DELETE FROM BrowserSessions WHERE Digest = ?1", [digest(token)])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn solution() -> (tempfile::TempDir, SolutionDb) {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("t.db");
        SolutionDb::create(&path, false).expect("creates");
        let db = SolutionDb::open(&path).expect("opens");
        db.add_user("Ada", Some("pw"), Role::Operator).expect("adds");
        (dir, db)
    }

    const IDLE: Duration = Duration::from_secs(12 * 3600);

    #[test]
    fn a_token_logs_its_user_in_until_revoked_and_only_its_digest_is_stored() {
        let (_dir, db) = solution();
        let now = SystemTime::now();
        let token = db.create_browser_session("ada", now).expect("creates");
        let login = db.browser_session(&token, IDLE, now).expect("reads");
        assert_eq!(
            login,
            Some(BrowserLogin {
                user: "Ada".to_owned(),
                role: Role::Operator
            })
        );
        let stored: String = db
            .read(|connection| {
                connection.query_row("SELECT Digest FROM BrowserSessions", [], |row| row.get(0))
            })
            .expect("reads the row");
        assert_ne!(stored, token);
        assert_eq!(db.browser_session("not-a-token", IDLE, now).expect("reads"), None);
        db.revoke_browser_session(&token).expect("revokes");
        assert_eq!(db.browser_session(&token, IDLE, now).expect("reads"), None);
    }

    #[test]
    fn a_token_expires_after_the_idle_time_and_use_keeps_it_alive() {
        let (_dir, db) = solution();
        let start = SystemTime::now();
        let token = db.create_browser_session("Ada", start).expect("creates");
        let later = start + IDLE - Duration::from_secs(60);
        assert!(db.browser_session(&token, IDLE, later).expect("reads").is_some());
        // Used just now, so still valid a whole idle time after the start.
        let after_start = start + IDLE + Duration::from_secs(60);
        assert!(
            db.browser_session(&token, IDLE, after_start)
                .expect("reads")
                .is_some()
        );
        let idle_too_long = after_start + IDLE + Duration::from_secs(1);
        assert_eq!(
            db.browser_session(&token, IDLE, idle_too_long).expect("reads"),
            None
        );
        // Deleted when seen expired: gone even for a reader with a longer idle limit.
        assert_eq!(
            db.browser_session(&token, IDLE * 10, idle_too_long)
                .expect("reads"),
            None
        );
    }

    #[test]
    fn changing_or_removing_the_user_ends_its_browser_logins() {
        let (_dir, db) = solution();
        let now = SystemTime::now();
        let by_password = db.create_browser_session("Ada", now).expect("creates");
        db.set_password("Ada", Some("new")).expect("sets");
        assert_eq!(db.browser_session(&by_password, IDLE, now).expect("reads"), None);
        let by_role = db.create_browser_session("Ada", now).expect("creates");
        db.set_role("Ada", Role::Viewer).expect("sets");
        assert_eq!(db.browser_session(&by_role, IDLE, now).expect("reads"), None);
        let by_removal = db.create_browser_session("Ada", now).expect("creates");
        db.remove_user("Ada").expect("removes");
        assert_eq!(db.browser_session(&by_removal, IDLE, now).expect("reads"), None);
        assert!(matches!(
            db.create_browser_session("Ada", now),
            Err(SolutionError::UnknownUser(_))
        ));
    }
}
