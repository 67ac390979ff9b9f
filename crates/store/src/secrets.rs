//! The solution's secret store: values encrypted at rest with ChaCha20-Poly1305.
//!
//! The key is 32 random bytes, written as 64 hex digits either in the environment variable
//! `TSERVER_SECRETS_KEY` (which wins) or in the key file `<solution>.key` that `tserver init`
//! creates beside the solution with owner-only permissions. The database holds only nonces and
//! ciphertexts, with the secret's name as associated data, so a ciphertext cannot be moved to
//! another name. Values are write-only: nothing lists or prints them.

use std::io::Write;
use std::path::{Path, PathBuf};

use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use rusqlite::{OptionalExtension, params};
use solution_settings::SecretValue;

use super::{SolutionDb, SolutionError};

/// The environment variable that holds the secrets key as 64 hex digits.
pub const KEY_ENV: &str = "TSERVER_SECRETS_KEY";

/// The key file of a solution: the solution path with `.key` appended.
pub fn key_file(solution: &Path) -> PathBuf {
    let mut name = solution.as_os_str().to_owned();
    name.push(".key");
    PathBuf::from(name)
}

/// Creates the key file with a fresh random key, unless one exists already.
pub(super) fn create_key_file(solution: &Path) -> Result<(), SolutionError> {
    if key_file(solution).exists() {
        return Ok(());
    }
    write_key_file(solution, &ChaCha20Poly1305::generate_key(&mut OsRng))
}

/// Writes `key` as a new key file, readable by its owner only.
fn write_key_file(solution: &Path, key: &[u8]) -> Result<(), SolutionError> {
    write_key(&key_file(solution), key)
}

/// Writes a fresh random key to `path` (readable by its owner only), which must not exist yet:
/// the key of a new database solution, whose nodes and admin commands take it from
/// [`KEY_ENV`].
pub fn create_key_at(path: &Path) -> Result<(), SolutionError> {
    write_key(path, &ChaCha20Poly1305::generate_key(&mut OsRng))
}

fn write_key(path: &Path, key: &[u8]) -> Result<(), SolutionError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .map_err(|error| SolutionError::SecretsKey(format!("cannot create {}: {error}", path.display())))?;
    writeln!(file, "{}", hex::encode(key))
        .map_err(|error| SolutionError::SecretsKey(format!("cannot write {}: {error}", path.display())))
}

/// Writes the key of `TSERVER_SECRETS_KEY` into a new solution's key file (a copy out of
/// PostgreSQL, whose nodes take their key from the environment).
pub(super) fn write_key_file_from_env(solution: &Path) -> Result<(), SolutionError> {
    let text = std::env::var(KEY_ENV).map_err(|_| {
        SolutionError::SecretsKey(format!(
            "the solution holds secrets: set {KEY_ENV} to their key (the nodes' key) so the new file can read them"
        ))
    })?;
    let bytes = hex::decode(text.trim())
        .ok()
        .filter(|bytes| bytes.len() == 32)
        .ok_or_else(|| SolutionError::SecretsKey(format!("{KEY_ENV} does not hold 64 hex digits")))?;
    write_key_file(solution, &bytes)
}

/// Loads the key: the environment variable if set, else (for a solution file) its key file.
/// A database keeps no key: its nodes take it from the environment.
pub(super) fn load_key(solution: Option<&Path>) -> Result<Key, SolutionError> {
    let (text, origin) = match (std::env::var(KEY_ENV), solution) {
        (Ok(text), _) => (text, KEY_ENV.to_owned()),
        (Err(_), None) => {
            return Err(SolutionError::SecretsKey(format!(
                "no secrets key: set {KEY_ENV} to the solution's key (a database keeps none; \
                 `tserver init postgres://...` made one and said where, or make one with \
                 `openssl rand -hex 32` before the first secret is stored)"
            )));
        }
        (Err(_), Some(solution)) => {
            let path = key_file(solution);
            let text = std::fs::read_to_string(&path).map_err(|error| {
                SolutionError::SecretsKey(format!(
                    "no secrets key: set {KEY_ENV} or keep the key file {} ({error})",
                    path.display()
                ))
            })?;
            (text, path.display().to_string())
        }
    };
    let bytes = hex::decode(text.trim())
        .ok()
        .filter(|bytes| bytes.len() == 32)
        .ok_or_else(|| SolutionError::SecretsKey(format!("{origin} does not hold 64 hex digits")))?;
    Ok(*Key::from_slice(&bytes))
}

/// A secret's value sealed for storage: the nonce and the ciphertext, bound to its name.
pub(super) fn seal(key: &Key, name: &str, value: &str) -> Result<(Vec<u8>, Vec<u8>), SolutionError> {
    validate_secret_name(name)?;
    let nonce = ChaCha20Poly1305::generate_nonce(&mut OsRng);
    let ciphertext = ChaCha20Poly1305::new(key)
        .encrypt(
            &nonce,
            Payload {
                msg: value.as_bytes(),
                aad: name.as_bytes(),
            },
        )
        .map_err(|_| SolutionError::SecretsKey("encryption failed".into()))?;
    Ok((nonce.to_vec(), ciphertext))
}

/// A stored secret opened: refused when it was sealed under another key or another name.
pub(super) fn open_sealed(
    key: &Key,
    name: &str,
    nonce: &[u8],
    ciphertext: &[u8],
) -> Result<SecretValue, SolutionError> {
    if nonce.len() != 12 {
        return Err(SolutionError::SecretsKey(format!(
            "secret '{name}' is stored corrupted"
        )));
    }
    let plaintext = ChaCha20Poly1305::new(key)
        .decrypt(
            Nonce::from_slice(nonce),
            Payload {
                msg: ciphertext,
                aad: name.as_bytes(),
            },
        )
        .map_err(|_| SolutionError::SecretsKey(format!("secret '{name}' does not decrypt with this key")))?;
    let value = String::from_utf8(plaintext)
        .map_err(|_| SolutionError::SecretsKey(format!("secret '{name}' is not UTF-8")))?;
    Ok(SecretValue::new(value))
}

impl SolutionDb {
    /// Stores (or replaces) a secret, encrypted.
    pub(crate) fn set_secret(&self, name: &str, value: &str) -> Result<(), SolutionError> {
        let (nonce, ciphertext) = seal(&load_key(Some(self.path()))?, name, value)?;
        self.writer()?.execute(
            "INSERT INTO Secrets (Name, Nonce, Ciphertext) VALUES (?1, ?2, ?3)
             ON CONFLICT (Name) DO UPDATE SET Nonce = excluded.Nonce, Ciphertext = excluded.Ciphertext,
             UpdatedAt = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
            params![name, nonce, ciphertext],
        )?;
        Ok(())
    }

    /// Reads and decrypts a secret; `None` when there is none of that name.
    pub(crate) fn secret(&self, name: &str) -> Result<Option<SecretValue>, SolutionError> {
        let stored = self.read(|connection| {
            connection
                .prepare_cached("SELECT Nonce, Ciphertext FROM Secrets WHERE Name = ?1")?
                .query_row([name], |row| {
                    Ok((row.get::<_, Vec<u8>>(0)?, row.get::<_, Vec<u8>>(1)?))
                })
                .optional()
        })?;
        let Some((nonce, ciphertext)) = stored else {
            return Ok(None);
        };
        open_sealed(&load_key(Some(self.path()))?, name, &nonce, &ciphertext).map(Some)
    }

    /// The names of all secrets (never their values).
    pub(crate) fn secret_names(&self) -> Result<Vec<String>, SolutionError> {
        self.read(|connection| {
            connection
                .prepare("SELECT Name FROM Secrets ORDER BY Name")?
                .query_map([], |row| row.get(0))?
                .collect()
        })
    }

    /// Removes a secret.
    pub(crate) fn remove_secret(&self, name: &str) -> Result<(), SolutionError> {
        if self
            .writer()?
            .execute("DELETE FROM Secrets WHERE Name = ?1", [name])?
            == 0
        {
            return Err(SolutionError::UnknownSecret(name.to_owned()));
        }
        Ok(())
    }
}

fn validate_secret_name(name: &str) -> Result<(), SolutionError> {
    let valid = (1..=128).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if valid {
        Ok(())
    } else {
        Err(SolutionError::InvalidSecretName(name.to_owned()))
    }
}
