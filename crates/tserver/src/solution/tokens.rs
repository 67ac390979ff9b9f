//! API tokens: bearer tokens for the HTTP surface, each bound to a user and acting with that
//! user's role. A token reads `tst_<id>_<secret>`: the id finds its row, and only a SHA-256
//! digest of the secret is stored, so neither the file nor a listing can give a token back.
//! The token text itself is shown once, when it is created.

use std::time::{Duration, SystemTime};

use chacha20poly1305::aead::OsRng;
use chacha20poly1305::aead::rand_core::RngCore;
use rusqlite::{OptionalExtension, params};
use sha2::{Digest, Sha256};

use super::{Role, SolutionDb, SolutionError, millis, role_of_stored, time_of};

/// What every token starts with (so secret scanners and people can tell one).
pub const TOKEN_PREFIX: &str = "tst_";

/// The longest label a token may have.
const MAX_NAME_CHARS: usize = 64;

/// A stored token, as listed: never its secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiToken {
    /// The public id (also part of the token text).
    pub id: String,
    /// The label given at creation, possibly empty.
    pub name: String,
    /// The user it acts as.
    pub user: String,
    /// When it was made.
    pub created_at: SystemTime,
    /// When it stops working, if ever.
    pub expires_at: Option<SystemTime>,
}

/// Who a valid token acts as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenUser {
    /// The token's id.
    pub token_id: String,
    /// The user, as stored.
    pub user: String,
    /// The user's role now.
    pub role: Role,
    /// When the token stops being valid, if ever.
    pub expires: Option<SystemTime>,
}

/// Why a presented token is not accepted (deliberately coarse: the caller answers 401 for
/// each, and says no more to the client than that).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenRefusal {
    /// Not of the token shape, unknown id, or the secret does not match.
    Invalid,
    /// Its expiry has passed.
    Expired,
}

fn digest(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Equal without an early exit, so the time taken says nothing about where they differ.
fn same(left: &[u8], right: &[u8]) -> bool {
    left.len() == right.len() && left.iter().zip(right).fold(0_u8, |diff, (a, b)| diff | (a ^ b)) == 0
}

fn random_hex(bytes: usize) -> String {
    let mut buffer = vec![0_u8; bytes];
    OsRng.fill_bytes(&mut buffer);
    hex::encode(buffer)
}

impl SolutionDb {
    /// Makes a token for `user` (labelled `name`, valid for `valid_for` or for ever); returns
    /// it as listed and its text, which is shown this once.
    pub fn create_token(
        &self,
        user: &str,
        name: &str,
        valid_for: Option<Duration>,
    ) -> Result<(ApiToken, String), SolutionError> {
        if name.chars().count() > MAX_NAME_CHARS || name.chars().any(char::is_control) {
            return Err(SolutionError::Token(format!(
                "a token name has at most {MAX_NAME_CHARS} characters and no control characters"
            )));
        }
        let stored_user = self
            .user(user)?
            .ok_or_else(|| SolutionError::UnknownUser(user.to_owned()))?
            .name;
        let id = random_hex(6);
        let secret = random_hex(32);
        // Whole milliseconds, as stored, so the token returned is the token listed.
        let created_at = time_of(millis(SystemTime::now()));
        let expires_at = valid_for.map(|valid_for| time_of(millis(created_at + valid_for)));
        self.writer()?.execute(
            "INSERT INTO ApiTokens (Id, Name, User, Digest, CreatedAt, ExpiresAt) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![id, name, stored_user, digest(&secret), millis(created_at), expires_at.map(millis)],
        )?;
        let text = format!("{TOKEN_PREFIX}{id}_{secret}");
        Ok((
            ApiToken {
                id,
                name: name.to_owned(),
                user: stored_user,
                created_at,
                expires_at,
            },
            text,
        ))
    }

    /// Every token, oldest first.
    pub fn tokens(&self) -> Result<Vec<ApiToken>, SolutionError> {
        self.read(|connection| {
            connection
                .prepare("SELECT Id, Name, User, CreatedAt, ExpiresAt FROM ApiTokens ORDER BY CreatedAt, Id")?
                .query_map([], |row| {
                    Ok(ApiToken {
                        id: row.get(0)?,
                        name: row.get(1)?,
                        user: row.get(2)?,
                        created_at: time_of(row.get(3)?),
                        expires_at: row.get::<_, Option<i64>>(4)?.map(time_of),
                    })
                })?
                .collect()
        })
    }

    /// Revokes the token with id (or, when unique, label) `which`; returns it.
    pub fn revoke_token(&self, which: &str) -> Result<ApiToken, SolutionError> {
        let matching: Vec<ApiToken> = self
            .tokens()?
            .into_iter()
            .filter(|token| token.id == which || (!token.name.is_empty() && token.name == which))
            .collect();
        let token = match matching.as_slice() {
            [token] => token.clone(),
            [] => {
                return Err(SolutionError::Token(format!(
                    "no token with id or name {which:?}"
                )));
            }
            _ => {
                return Err(SolutionError::Token(format!(
                    "{} tokens are named {which:?}; revoke one by its id",
                    matching.len()
                )));
            }
        };
        self.writer()?
            .execute("DELETE FROM ApiTokens WHERE Id = ?1", [&token.id])?;
        Ok(token)
    }

    /// Who `text` acts as, if it is a valid token now.
    pub fn verify_token(&self, text: &str) -> Result<Result<TokenUser, TokenRefusal>, SolutionError> {
        let Some((id, secret)) = text
            .strip_prefix(TOKEN_PREFIX)
            .and_then(|rest| rest.split_once('_'))
        else {
            return Ok(Err(TokenRefusal::Invalid));
        };
        let row = self.read(|connection| {
            connection
                .prepare_cached(
                    "SELECT t.Digest, t.ExpiresAt, u.Name, u.Role FROM ApiTokens t JOIN Users u ON u.Name = t.User WHERE t.Id = ?1",
                )?
                .query_row([id], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, Option<i64>>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, String>(3)?,
                    ))
                })
                .optional()
        })?;
        let Some((stored, expires_at, user, role)) = row else {
            return Ok(Err(TokenRefusal::Invalid));
        };
        if !same(stored.as_bytes(), digest(secret).as_bytes()) {
            return Ok(Err(TokenRefusal::Invalid));
        }
        let expires = expires_at.map(time_of);
        if expires.is_some_and(|expires| expires <= SystemTime::now()) {
            return Ok(Err(TokenRefusal::Expired));
        }
        Ok(Ok(TokenUser {
            token_id: id.to_owned(),
            user,
            role: role_of_stored(&role),
            expires,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn solution() -> (tempfile::TempDir, SolutionDb) {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("t.db");
        SolutionDb::create(&path, true).expect("creates");
        let db = SolutionDb::open(&path).expect("opens");
        (dir, db)
    }

    #[test]
    fn a_token_acts_as_its_user_until_revoked_and_only_its_digest_is_stored() {
        let (_dir, db) = solution();
        let (token, text) = db.create_token("GUEST", "laptop", None).expect("made");
        assert_eq!(token.user, "guest", "the user as stored");
        assert!(text.starts_with(TOKEN_PREFIX) && text.contains(&token.id));
        let user = db.verify_token(&text).expect("reads").expect("valid");
        assert_eq!(
            (user.user.as_str(), user.token_id.as_str()),
            ("guest", token.id.as_str())
        );
        let listed = db.tokens().expect("lists");
        assert_eq!(listed, std::slice::from_ref(&token));
        let stored: String = db
            .read(|connection| connection.query_row("SELECT Digest FROM ApiTokens", [], |row| row.get(0)))
            .expect("reads");
        assert!(!text.contains(&stored), "the stored digest is not the secret");

        let mut wrong = text.clone();
        wrong.pop();
        wrong.push(if text.ends_with('0') { '1' } else { '0' });
        for bad in [wrong.as_str(), "tst_", "Bearer x", "", "tst_nope_nope"] {
            assert_eq!(
                db.verify_token(bad).expect("reads"),
                Err(TokenRefusal::Invalid),
                "{bad}"
            );
        }
        assert_eq!(db.revoke_token("laptop").expect("revoked").id, token.id);
        assert_eq!(db.verify_token(&text).expect("reads"), Err(TokenRefusal::Invalid));
        assert!(db.revoke_token("laptop").is_err(), "gone");
    }

    #[test]
    fn expired_tokens_and_tokens_of_removed_users_are_refused() {
        let (_dir, db) = solution();
        let (_, expired) = db
            .create_token("guest", "", Some(Duration::from_millis(1)))
            .expect("made");
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(
            db.verify_token(&expired).expect("reads"),
            Err(TokenRefusal::Expired)
        );
        assert!(matches!(
            db.create_token("nobody", "", None),
            Err(SolutionError::UnknownUser(_))
        ));
        let (_, text) = db.create_token("guest", "", None).expect("made");
        db.remove_user("guest").expect("removed");
        assert_eq!(db.verify_token(&text).expect("reads"), Err(TokenRefusal::Invalid));
        assert!(db.tokens().expect("lists").is_empty(), "removed with their user");
    }

    #[test]
    fn two_tokens_with_one_name_are_revoked_by_id() {
        let (_dir, db) = solution();
        let (first, _) = db.create_token("guest", "ci", None).expect("made");
        db.create_token("guest", "ci", None).expect("made");
        assert!(db.revoke_token("ci").is_err());
        assert_eq!(db.revoke_token(&first.id).expect("revoked"), first);
    }
}
