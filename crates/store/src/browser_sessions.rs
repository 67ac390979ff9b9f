//! Browser logins: the token a browser keeps in its session cookie after logging in with a
//! password once. The token is 32 random bytes (hex); only its SHA-256 digest is stored, with
//! the user and when it was made and last used, so any node sharing the solution verifies it.
//! A token unused for longer than the idle limit, or older than the lifetime, is expired
//! (deleted when seen, and swept at every new login); a user keeps at most so many, the oldest
//! ended first; changing or removing its user deletes it (`admin.rs`), as does logging out.

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

/// How long browser logins last, and how many one user keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BrowserLoginRules {
    /// Unused for longer than this, a login ends.
    pub idle: Duration,
    /// Older than this, a login ends however much it is used.
    pub lifetime: Duration,
    /// Logins one user keeps at once; a new one ends the oldest past it.
    pub per_user: u32,
}

impl Default for BrowserLoginRules {
    /// A shift unused (12 h), a day in all (24 h), 32 per user.
    fn default() -> Self {
        Self {
            idle: Duration::from_secs(12 * 3600),
            lifetime: Duration::from_secs(24 * 3600),
            per_user: 32,
        }
    }
}

impl BrowserLoginRules {
    /// The last-use and creation times (milliseconds) before which a login has ended at `now`.
    pub(crate) fn cutoffs(&self, now: SystemTime) -> (i64, i64) {
        let before =
            |span: Duration| millis(now).saturating_sub(i64::try_from(span.as_millis()).unwrap_or(i64::MAX));
        (before(self.idle), before(self.lifetime))
    }
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

/// A token's row as stored with its user's: creation, last use, user name, role.
pub(super) type StoredBrowserSession = (i64, i64, String, String);

/// Whether `stored` (the token's row, if any) is a login at `now` under `rules`: `Ok(None)`
/// when unknown, `Err(())` when expired (the caller deletes it).
pub(super) fn judge(
    stored: Option<StoredBrowserSession>,
    rules: &BrowserLoginRules,
    now: SystemTime,
) -> Result<Option<BrowserLogin>, ()> {
    let Some((created, last_used, user, role)) = stored else {
        return Ok(None);
    };
    let (idle_cutoff, lifetime_cutoff) = rules.cutoffs(now);
    if last_used < idle_cutoff || created < lifetime_cutoff {
        return Err(());
    }
    Ok(Some(BrowserLogin {
        user,
        role: role_of_stored(&role),
    }))
}

impl SolutionDb {
    /// Starts a browser login for `user` (matched case-insensitively) at `now`; returns the
    /// token, shown only now. Expired logins of every user are swept, and this user's oldest
    /// past `rules.per_user` ended, in the same transaction.
    pub(crate) fn create_browser_session(
        &self,
        user: &str,
        rules: &BrowserLoginRules,
        now: SystemTime,
    ) -> Result<String, SolutionError> {
        let stored_user = self
            .user(user)?
            .ok_or_else(|| SolutionError::UnknownUser(user.to_owned()))?
            .name;
        let (token, digest) = new_token();
        let (idle_cutoff, lifetime_cutoff) = rules.cutoffs(now);
        let mut writer = self.writer()?;
        let transaction = writer.transaction()?;
        transaction.execute(
            "INSERT INTO BrowserSessions (Digest, User, CreatedAt, LastUsedAt) VALUES (?1, ?2, ?3, ?3)",
            params![digest, stored_user, millis(now)],
        )?;
        transaction.execute(
            "DELETE FROM BrowserSessions WHERE LastUsedAt < ?1 OR CreatedAt < ?2",
            params![idle_cutoff, lifetime_cutoff],
        )?;
        transaction.execute(
            "DELETE FROM BrowserSessions WHERE User = ?1 AND Digest NOT IN
                 (SELECT Digest FROM BrowserSessions WHERE User = ?1
                  ORDER BY CreatedAt DESC, rowid DESC LIMIT ?2)",
            params![stored_user, rules.per_user],
        )?;
        transaction.commit()?;
        Ok(token)
    }

    /// The login `token` carries at `now`, unless unknown, revoked or ended under `rules`; a
    /// valid one is marked used at `now`, an expired one deleted.
    pub(crate) fn browser_session(
        &self,
        token: &str,
        rules: &BrowserLoginRules,
        now: SystemTime,
    ) -> Result<Option<BrowserLogin>, SolutionError> {
        let digest = digest(token);
        let stored = self.read(|connection| {
            connection
                .prepare_cached(
                    "SELECT s.CreatedAt, s.LastUsedAt, u.Name, u.Role FROM BrowserSessions s JOIN Users u ON u.Name = s.User WHERE s.Digest = ?1",
                )?
                .query_row([&digest], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
                })
                .optional()
        })?;
        match judge(stored, rules, now) {
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

    /// Ends the browser login `token` carries; whether there was one.
    pub(crate) fn revoke_browser_session(&self, token: &str) -> Result<bool, SolutionError> {
        let deleted = self
            .writer()?
            .execute("DELETE FROM BrowserSessions WHERE Digest = ?1", [digest(token)])?;
        Ok(deleted > 0)
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

    fn rules(idle: Duration) -> BrowserLoginRules {
        BrowserLoginRules {
            idle,
            lifetime: idle * 4,
            per_user: 32,
        }
    }

    #[test]
    fn a_token_logs_its_user_in_until_revoked_and_only_its_digest_is_stored() {
        let (_dir, db) = solution();
        let now = SystemTime::now();
        let token = db
            .create_browser_session("ada", &rules(IDLE), now)
            .expect("creates");
        let login = db.browser_session(&token, &rules(IDLE), now).expect("reads");
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
        assert_eq!(
            db.browser_session("not-a-token", &rules(IDLE), now)
                .expect("reads"),
            None
        );
        assert!(db.revoke_browser_session(&token).expect("revokes"));
        assert!(
            !db.revoke_browser_session(&token).expect("nothing left"),
            "only once"
        );
        assert_eq!(
            db.browser_session(&token, &rules(IDLE), now).expect("reads"),
            None
        );
    }

    #[test]
    fn a_token_expires_after_the_idle_time_and_use_keeps_it_alive() {
        let (_dir, db) = solution();
        let start = SystemTime::now();
        let token = db
            .create_browser_session("Ada", &rules(IDLE), start)
            .expect("creates");
        let later = start + IDLE - Duration::from_secs(60);
        assert!(
            db.browser_session(&token, &rules(IDLE), later)
                .expect("reads")
                .is_some()
        );
        // Used just now, so still valid a whole idle time after the start.
        let after_start = start + IDLE + Duration::from_secs(60);
        assert!(
            db.browser_session(&token, &rules(IDLE), after_start)
                .expect("reads")
                .is_some()
        );
        let idle_too_long = after_start + IDLE + Duration::from_secs(1);
        assert_eq!(
            db.browser_session(&token, &rules(IDLE), idle_too_long)
                .expect("reads"),
            None
        );
        // Deleted when seen expired: gone even for a reader with a longer idle limit.
        assert_eq!(
            db.browser_session(&token, &rules(IDLE * 10), idle_too_long)
                .expect("reads"),
            None
        );
    }

    #[test]
    fn changing_or_removing_the_user_ends_its_browser_logins() {
        let (_dir, db) = solution();
        let now = SystemTime::now();
        let by_password = db
            .create_browser_session("Ada", &rules(IDLE), now)
            .expect("creates");
        db.set_password("Ada", Some("new")).expect("sets");
        assert_eq!(
            db.browser_session(&by_password, &rules(IDLE), now)
                .expect("reads"),
            None
        );
        let by_role = db
            .create_browser_session("Ada", &rules(IDLE), now)
            .expect("creates");
        db.set_role("Ada", Role::Viewer).expect("sets");
        assert_eq!(
            db.browser_session(&by_role, &rules(IDLE), now).expect("reads"),
            None
        );
        let by_removal = db
            .create_browser_session("Ada", &rules(IDLE), now)
            .expect("creates");
        db.remove_user("Ada").expect("removes");
        assert_eq!(
            db.browser_session(&by_removal, &rules(IDLE), now).expect("reads"),
            None
        );
        assert!(matches!(
            db.create_browser_session("Ada", &rules(IDLE), now),
            Err(SolutionError::UnknownUser(_))
        ));
    }

    #[test]
    fn a_login_ends_at_its_lifetime_however_much_it_is_used() {
        let (_dir, db) = solution();
        let start = SystemTime::now();
        let rules = rules(IDLE);
        let token = db.create_browser_session("Ada", &rules, start).expect("creates");
        let mut now = start;
        while now < start + rules.lifetime - IDLE {
            now += IDLE / 2;
            assert!(db.browser_session(&token, &rules, now).expect("reads").is_some());
        }
        let past = start + rules.lifetime + Duration::from_secs(1);
        assert_eq!(db.browser_session(&token, &rules, past).expect("reads"), None);
    }

    #[test]
    fn a_new_login_sweeps_the_expired_and_ends_the_users_oldest_past_the_cap() {
        let (_dir, db) = solution();
        db.add_user("Bob", None, Role::Viewer).expect("adds");
        let start = SystemTime::now();
        let rules = BrowserLoginRules {
            idle: IDLE,
            lifetime: IDLE * 2,
            per_user: 3,
        };
        let bobs = db.create_browser_session("Bob", &rules, start).expect("creates");
        let adas: Vec<String> = (0..5)
            .map(|step| {
                let at = start + Duration::from_secs(step);
                db.create_browser_session("Ada", &rules, at).expect("creates")
            })
            .collect();
        let count = |db: &SolutionDb| -> i64 {
            db.read(|connection| {
                connection.query_row("SELECT count(*) FROM BrowserSessions", [], |row| row.get(0))
            })
            .expect("counts")
        };
        assert_eq!(count(&db), 4, "Ada's three newest and Bob's");
        let now = start + Duration::from_secs(10);
        for (index, token) in adas.iter().enumerate() {
            let valid = db.browser_session(token, &rules, now).expect("reads").is_some();
            assert_eq!(valid, index >= 2, "login {index}");
        }
        // Bob's login expires unused; Ada's next login sweeps it without anyone presenting it.
        let later = start + IDLE + Duration::from_secs(60);
        db.browser_session(&adas[4], &rules, start + Duration::from_secs(100))
            .expect("keeps Ada's newest in use");
        db.create_browser_session("Ada", &rules, later).expect("creates");
        assert_eq!(
            count(&db),
            2,
            "Ada's newest two live; Bob's and Ada's unused ones swept"
        );
        assert_eq!(db.browser_session(&bobs, &rules, later).expect("reads"), None);
    }
}
