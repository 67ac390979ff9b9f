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

/// A token about to be stored: its id, the secret shown once, and the times.
pub(super) struct NewToken {
    pub(super) id: String,
    secret: String,
    pub(super) created_at: SystemTime,
    pub(super) expires_at: Option<SystemTime>,
}

impl NewToken {
    /// A fresh token named `name`, valid for `valid_for` (forever with `None`); refused when
    /// the name is too long or holds control characters.
    pub(super) fn make(name: &str, valid_for: Option<Duration>) -> Result<Self, SolutionError> {
        if name.chars().count() > MAX_NAME_CHARS || name.chars().any(char::is_control) {
            return Err(SolutionError::Token(format!(
                "a token name has at most {MAX_NAME_CHARS} characters and no control characters"
            )));
        }
        // Whole milliseconds, as stored, so the token returned is the token listed.
        let created_at = time_of(millis(SystemTime::now()));
        Ok(Self {
            id: random_hex(6),
            secret: random_hex(32),
            created_at,
            expires_at: valid_for.map(|valid_for| time_of(millis(created_at + valid_for))),
        })
    }

    /// What is stored of the secret.
    pub(super) fn digest(&self) -> String {
        digest(&self.secret)
    }

    /// The token as listed, and its text (shown once), for `user` as stored.
    pub(super) fn issued(self, name: &str, user: String) -> (ApiToken, String) {
        let text = format!("{TOKEN_PREFIX}{}_{}", self.id, self.secret);
        let token = ApiToken {
            id: self.id,
            name: name.to_owned(),
            user,
            created_at: self.created_at,
            expires_at: self.expires_at,
        };
        (token, text)
    }
}

/// The one token `which` (an id, or a name only one token has) names among `tokens`.
pub(super) fn token_named(tokens: Vec<ApiToken>, which: &str) -> Result<ApiToken, SolutionError> {
    let mut matching: Vec<ApiToken> = tokens
        .into_iter()
        .filter(|token| token.id == which || (!token.name.is_empty() && token.name == which))
        .collect();
    match matching.len() {
        1 => Ok(matching.remove(0)),
        0 => Err(SolutionError::Token(format!(
            "no token with id or name {which:?}"
        ))),
        count => Err(SolutionError::Token(format!(
            "{count} tokens are named {which:?}; revoke one by its id"
        ))),
    }
}

/// A presented token's id and secret, if it has the token's shape.
pub(super) fn token_parts(text: &str) -> Option<(&str, &str)> {
    text.strip_prefix(TOKEN_PREFIX)
        .and_then(|rest| rest.split_once('_'))
}

/// A token's row as stored with its user's: digest, expiry, user name and role.
pub(super) type StoredToken = (String, Option<i64>, String, String);

/// Whether the presented `secret` of token `id` opens `stored` (its row, if any).
pub(super) fn judge_token(
    id: &str,
    secret: &str,
    stored: Option<StoredToken>,
) -> Result<TokenUser, TokenRefusal> {
    let Some((stored, expires_at, user, role)) = stored else {
        return Err(TokenRefusal::Invalid);
    };
    if !same(stored.as_bytes(), digest(secret).as_bytes()) {
        return Err(TokenRefusal::Invalid);
    }
    let expires = expires_at.map(time_of);
    if expires.is_some_and(|expires| expires <= SystemTime::now()) {
        return Err(TokenRefusal::Expired);
    }
    Ok(TokenUser {
        token_id: id.to_owned(),
        user,
        role: role_of_stored(&role),
        expires,
    })
}

impl SolutionDb {
    /// Creates a token for `user` (matched case-insensitively), named `name` (may be empty),
    /// valid for `valid_for` or until revoked. Returns it and its text, shown only now.
    pub(crate) fn create_token(
        &self,
        user: &str,
        name: &str,
        valid_for: Option<Duration>,
    ) -> Result<(ApiToken, String), SolutionError> {
        let new = NewToken::make(name, valid_for)?;
        let stored_user = self
            .user(user)?
            .ok_or_else(|| SolutionError::UnknownUser(user.to_owned()))?
            .name;
        self.writer()?.execute(
            "INSERT INTO ApiTokens (Id, Name, User, Digest, CreatedAt, ExpiresAt) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![new.id, name, stored_user, new.digest(), millis(new.created_at), new.expires_at.map(millis)],
        )?;
        Ok(new.issued(name, stored_user))
    }

    /// Every token, oldest first (never a secret).
    pub(crate) fn tokens(&self) -> Result<Vec<ApiToken>, SolutionError> {
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

    /// Revokes the token `which` names: its id, or a name only one token has.
    pub(crate) fn revoke_token(&self, which: &str) -> Result<ApiToken, SolutionError> {
        let token = token_named(self.tokens()?, which)?;
        self.writer()?
            .execute("DELETE FROM ApiTokens WHERE Id = ?1", [&token.id])?;
        Ok(token)
    }

    /// The user a presented token acts as, or why it is refused.
    pub(crate) fn verify_token(&self, text: &str) -> Result<Result<TokenUser, TokenRefusal>, SolutionError> {
        let Some((id, secret)) = token_parts(text) else {
            return Ok(Err(TokenRefusal::Invalid));
        };
        let stored = self.read(|connection| {
            connection
                .prepare_cached(
                    "SELECT t.Digest, t.ExpiresAt, u.Name, u.Role FROM ApiTokens t JOIN Users u ON u.Name = t.User WHERE t.Id = ?1",
                )?
                .query_row([id], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
                })
                .optional()
        })?;
        Ok(judge_token(id, secret, stored))
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
