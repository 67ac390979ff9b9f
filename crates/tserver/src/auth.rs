//! Password verification for Hello.
//!
//! Argon2 is memory-hard on purpose, so verifications run on a few threads of their own (one
//! per slot, `max_concurrent_logins`) behind a semaphore: a login flood queues there instead of
//! exhausting memory or starving the reactor. Those threads run at a lower OS priority (nice
//! 10 on Linux), so password guessing never takes CPU from the panels already logged in. An unknown user is verified against a dummy hash, so the time taken does not tell
//! whether a user exists. Failed logins are counted per peer address by the
//! [`LoginThrottle`]; a locked-out address is refused before (and again after) it waits for a
//! verification slot, so a guessing flood costs no argon2 time once locked out.
//!
//! The hash of the given password is compared with the stored one in constant time
//! (`password-hash`'s `Output` equality uses `subtle`), so the time taken does not tell how
//! much of a guess was right.
//!
//! Each verification needs argon2's working memory (19 MiB with the default parameters).
//! Allocating it afresh per login let the allocator keep a copy per blocking thread that ever
//! verified (200 MiB after a guessing burst); instead each verifier thread makes its buffer
//! once and reuses it, so login memory is bounded by the slots.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use argon2::password_hash::{Output, PasswordHash};
use argon2::{Algorithm, Argon2, Block, Params, Version};
use tokio::sync::{Semaphore, mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::throttle::LoginThrottle;
use plant::log_text::{ClientText, LogBudget};
use store::{LoginThrottleConfig, Role, Store, UserRecord, hash_password};

/// Why a login did not succeed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LoginError {
    /// Unknown user or wrong password; deliberately not saying which.
    #[error("unknown user or wrong password")]
    Refused,
    /// The solution has no users at all, so no login can succeed: the reply says how to add
    /// one (it tells a caller nothing a refusal would hide, since nobody could log in).
    #[error("{NO_USERS}")]
    NoUsers,
    /// Too many failures from this peer address lately; it may try again after the wait.
    #[error("too many failed logins from this address")]
    Throttled(Duration),
    /// The server could not check (database or hashing failure).
    #[error("login could not be checked: {0}")]
    Internal(String),
}

/// The refusal of a login on a solution without users: how to add the first.
pub(crate) const NO_USERS: &str = "this solution has no users yet: add one on the server with \
     `tserver users PATH add NAME --role operator` (it asks for the password, or reads it from \
     standard input), or \
     `--no-password` for a passwordless one";

/// How long browser logins (their session cookies) last: a shift unused, a day in all, 32 per
/// user (docs/LIMITS.md).
pub(crate) const BROWSER_LOGINS: store::BrowserLoginRules = store::BrowserLoginRules {
    idle: Duration::from_secs(12 * 3600),
    lifetime: Duration::from_secs(24 * 3600),
    per_user: 32,
};

/// How often a WebSocket logged in by a browser login checks that the login still stands
/// (ended on another node, or past its lifetime); a logout on this node is seen at once.
pub(crate) const BROWSER_LOGIN_RECHECK: Duration = Duration::from_secs(60);

/// The token of a browser login, as its cookie carried it. Never shown: its `Debug` hides it.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct BrowserToken(pub(crate) String);

impl std::fmt::Debug for BrowserToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BrowserToken(..)")
    }
}

/// How often the `Users` table is read for changes made by admin commands.
const USERS_POLL: Duration = Duration::from_secs(1);

/// A successful login: the user as stored, and a fingerprint of the credentials it was checked
/// against, so a later change to them (a removal, a new password) can be recognised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Login {
    /// The user name as stored.
    pub(crate) name: Arc<str>,
    /// What the user may do, as stored when it logged in (a change ends the login).
    pub(crate) role: Role,
    fingerprint: u64,
}

/// Whether a login still stands against the `Users` table now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LoginStanding {
    /// Same user, same credentials.
    Valid,
    /// The user was removed.
    Removed,
    /// The user's password (changed, removed or set) or role was changed.
    PasswordChanged,
    /// The browser login it was made with ended (logged out, or past its lifetime).
    BrowserLoginEnded,
}

/// A fingerprint of one user's credentials and role as stored (the PHC string carries a fresh
/// salt, so even the same password set again changes it).
fn fingerprint(record: &UserRecord) -> u64 {
    let mut hasher = DefaultHasher::new();
    record.name.hash(&mut hasher);
    record.password_hash.hash(&mut hasher);
    record.role.hash(&mut hasher);
    hasher.finish()
}

/// The `Users` table as the watcher last read it: each user's stored name and the
/// fingerprint of its credentials.
pub(crate) type UserFingerprints = HashMap<String, u64>;

/// Checks user names and passwords against the solution's `Users` table.
#[derive(Debug)]
pub(crate) struct Authenticator {
    store: Arc<Store>,
    /// The `Users` table, sent again whenever it changes; each logged-in connection then
    /// checks its login against it.
    users: watch::Sender<Arc<UserFingerprints>>,
    verifications: Arc<Semaphore>,
    dummy_hash: String,
    throttle: LoginThrottle,
    /// The verifier threads' queue; it never holds more jobs than there are permits.
    verifiers: mpsc::Sender<VerifyJob>,
    /// Refused-login lines from every address together (each address is locked out after a
    /// few failures, but addresses are many).
    refusals_logged: Mutex<LogBudget>,
    /// Counts the browser logins ended here: each WebSocket logged in by one then checks
    /// whether its own was.
    browser_logouts: watch::Sender<u64>,
}

/// One password check for a verifier thread: the stored hash, the password, and where the
/// answer goes.
type VerifyJob = (String, String, oneshot::Sender<Result<bool, LoginError>>);

impl Authenticator {
    pub(crate) fn new(
        store: Arc<Store>,
        max_concurrent: usize,
        throttle: LoginThrottleConfig,
    ) -> Result<Self, LoginError> {
        let dummy_hash =
            hash_password("timing-equaliser").map_err(|e| LoginError::Internal(e.to_string()))?;
        Ok(Self {
            store,
            users: watch::Sender::new(Arc::default()),
            verifications: Arc::new(Semaphore::new(max_concurrent)),
            dummy_hash,
            throttle: LoginThrottle::new(throttle),
            verifiers: start_verifiers(max_concurrent)?,
            refusals_logged: Mutex::new(LogBudget::new("refused logins")),
            browser_logouts: watch::Sender::new(0),
        })
    }

    /// A receiver told each time the `Users` table changes (see [`watch_users`](Self::watch_users)).
    pub(crate) fn users(&self) -> watch::Receiver<Arc<UserFingerprints>> {
        self.users.subscribe()
    }

    /// Reads the `Users` table every second until `shutdown` and sends it to the receivers of
    /// [`users`](Self::users) when it differs, so an admin's `users remove` or `passwd`
    /// (another process, same file) reaches the sessions that user holds.
    pub(crate) async fn watch_users(&self, shutdown: CancellationToken) {
        let mut last: Option<UserFingerprints> = None;
        let mut tick = tokio::time::interval(USERS_POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            let table: UserFingerprints = match self.store.users().await {
                Ok(users) => users
                    .iter()
                    .map(|user| (user.name.clone(), fingerprint(user)))
                    .collect(),
                Err(error) => {
                    tracing::warn!(%error, "cannot read the users; logged-in sessions are not re-checked");
                    continue;
                }
            };
            if last.as_ref().is_some_and(|last| *last != table) {
                self.users.send_replace(Arc::new(table.clone()));
            }
            last = Some(table);
        }
    }

    /// Whether `login` still stands against the table the watcher sent. Only a login the
    /// table disagrees with reads its own row, since the table may predate it (a user added,
    /// or a password set, just before this login): the row decides.
    pub(crate) async fn recheck(&self, login: &Login, users: &UserFingerprints) -> LoginStanding {
        if users.get(&*login.name) == Some(&login.fingerprint) {
            return LoginStanding::Valid;
        }
        self.standing(login).await
    }

    /// Whether `login` still stands: the user exists with the credentials it logged in with.
    /// A database failure keeps the login (logged): a session is not ended on a guess.
    async fn standing(&self, login: &Login) -> LoginStanding {
        match self.store.user(&login.name).await {
            Ok(Some(record)) if fingerprint(&record) == login.fingerprint => LoginStanding::Valid,
            Ok(Some(_)) => LoginStanding::PasswordChanged,
            Ok(None) => LoginStanding::Removed,
            Err(error) => {
                tracing::warn!(%error, "cannot re-check a login; it stands");
                LoginStanding::Valid
            }
        }
    }

    /// Returns the login when `password` is right for `user_name` and `peer` is not locked
    /// out; counts the outcome against `peer`.
    pub(crate) async fn verify(
        &self,
        peer: IpAddr,
        user_name: &str,
        password: &str,
    ) -> Result<Login, LoginError> {
        self.lockout(peer).await.map_err(LoginError::Throttled)?;
        let outcome = self.verify_unthrottled(peer, user_name, password).await;
        let user = crate::throttle::user_key(user_name);
        match &outcome {
            Ok(_) => self.succeeded(peer, &user).await,
            Err(LoginError::NoUsers) => {
                let (failures, lockout) = self.failed(peer, Some(&user)).await;
                tracing::warn!(%peer, user = %ClientText(user_name), failures, ?lockout, "login refused: the solution has no users (`tserver users PATH add NAME` adds one)");
            }
            Err(LoginError::Refused) => {
                let (failures, lockout) = self.failed(peer, Some(&user)).await;
                // Never the password: only who tried, from where, and what it cost them.
                let may_log = self
                    .refusals_logged
                    .lock()
                    .map_or(true, |mut budget| budget.allow());
                if may_log {
                    tracing::warn!(%peer, user = %ClientText(user_name), failures, ?lockout, "login refused: unknown user or wrong password");
                }
            }
            Err(LoginError::Throttled(wait)) => {
                // The failure that earned the lockout was logged at warn, with the lockout; a
                // locked-out address retrying in a loop must not fill the log.
                tracing::debug!(%peer, user = %ClientText(user_name), retry_in = ?wait, "login refused: address locked out");
            }
            Err(LoginError::Internal(_)) => {}
        }
        outcome
    }

    /// Returns the login a browser's `token` carries when it is valid (not revoked, not idle
    /// too long, its user unchanged) and `peer` is not locked out; a refused token counts as
    /// a failed login of `peer`, as a wrong password does.
    pub(crate) async fn verify_browser(
        &self,
        peer: IpAddr,
        token: &BrowserToken,
    ) -> Result<Login, LoginError> {
        self.lockout(peer).await.map_err(LoginError::Throttled)?;
        let internal = |error: store::SolutionError| LoginError::Internal(error.to_string());
        let found = self
            .store
            .browser_session(&token.0, BROWSER_LOGINS, std::time::SystemTime::now())
            .await
            .map_err(internal)?;
        let record = match found {
            Some(found) => self.store.user(&found.user).await.map_err(internal)?,
            None => None,
        };
        let Some(record) = record else {
            let (failures, lockout) = self.failed(peer, None).await;
            tracing::warn!(%peer, failures, ?lockout, "login refused: the browser login expired or was revoked");
            return Err(LoginError::Refused);
        };
        self.succeeded(peer, &crate::throttle::user_key(&record.name))
            .await;
        Ok(Login {
            name: Arc::from(record.name.as_str()),
            role: record.role,
            fingerprint: fingerprint(&record),
        })
    }

    /// Starts a browser login for `login`'s user: the token for its cookie.
    pub(crate) async fn start_browser_login(&self, login: &Login) -> Result<BrowserToken, LoginError> {
        self.store
            .create_browser_session(&login.name, BROWSER_LOGINS, std::time::SystemTime::now())
            .await
            .map(BrowserToken)
            .map_err(|error| LoginError::Internal(error.to_string()))
    }

    /// The user and role a browser's `token` logs in now, if it is valid (marks it used).
    pub(crate) async fn browser_login(
        &self,
        token: &BrowserToken,
    ) -> Result<Option<store::BrowserLogin>, LoginError> {
        self.store
            .browser_session(&token.0, BROWSER_LOGINS, std::time::SystemTime::now())
            .await
            .map_err(|error| LoginError::Internal(error.to_string()))
    }

    /// Ends the browser login `token` carries; the WebSockets it logged in on this server are
    /// told (see [`browser_logouts`](Self::browser_logouts)).
    pub(crate) async fn end_browser_login(&self, token: &BrowserToken) -> Result<(), LoginError> {
        let ended = self
            .store
            .revoke_browser_session(&token.0)
            .await
            .map_err(|error| LoginError::Internal(error.to_string()))?;
        if ended {
            self.browser_logouts
                .send_modify(|count| *count = count.wrapping_add(1));
        }
        Ok(())
    }

    /// Changes whenever a browser login ends on this server: each WebSocket logged in by one
    /// then checks its own.
    pub(crate) fn browser_logouts(&self) -> watch::Receiver<u64> {
        self.browser_logouts.subscribe()
    }

    /// `Err(wait)` while `peer` is locked out. On a shared database every node's failures
    /// count; should the database not answer, this node's own count decides.
    async fn lockout(&self, peer: IpAddr) -> Result<(), Duration> {
        match self.store.shared_login_lockout(peer).await {
            Some(Ok(Some(wait))) => return Err(wait),
            Some(Ok(None)) => return Ok(()),
            Some(Err(error)) => {
                tracing::warn!(%error, "cannot read the shared login failures; this node's own count decides")
            }
            None => {}
        }
        self.throttle.check(peer)
    }

    /// Counts a failed login of `peer` for `user` (its key; `None` when it named none): how
    /// many in a row, and the lockout it earned.
    async fn failed(&self, peer: IpAddr, user: Option<&str>) -> (u32, Option<Duration>) {
        let own = self.throttle.failed(peer, user);
        match self
            .store
            .record_shared_login_failure(peer, user, self.throttle.config())
            .await
        {
            Some(Ok(shared)) => return shared,
            Some(Err(error)) => {
                tracing::warn!(%error, "cannot count the failed login in the shared store; this node's own count decides")
            }
            None => {}
        }
        own
    }

    /// Forgets `peer`'s failures after `user` (its key) logged in, when they were all that
    /// user's.
    async fn succeeded(&self, peer: IpAddr, user: &str) {
        self.throttle.succeeded(peer, user);
        if let Err(error) = self.store.clear_shared_login_failures(peer, user).await {
            tracing::warn!(%error, "cannot clear the shared login failures");
        }
    }

    async fn verify_unthrottled(
        &self,
        peer: IpAddr,
        user_name: &str,
        password: &str,
    ) -> Result<Login, LoginError> {
        let record = self
            .store
            .user(user_name)
            .await
            .map_err(|error| LoginError::Internal(error.to_string()))?;
        let login = |record: &UserRecord| Login {
            name: Arc::from(record.name.as_str()),
            role: record.role,
            fingerprint: fingerprint(record),
        };
        match &record {
            Some(
                user @ UserRecord {
                    password_hash: None, ..
                },
            ) => {
                // A passwordless user logs in with an empty password only.
                if password.is_empty() {
                    Ok(login(user))
                } else {
                    Err(LoginError::Refused)
                }
            }
            Some(
                user @ UserRecord {
                    password_hash: Some(hash),
                    ..
                },
            ) => {
                if self.check(peer, hash.clone(), password).await? {
                    Ok(login(user))
                } else {
                    Err(LoginError::Refused)
                }
            }
            None => {
                // Spend the same effort as for a real user, then refuse.
                self.check(peer, self.dummy_hash.clone(), password).await?;
                let users = self
                    .store
                    .users()
                    .await
                    .map_err(|error| LoginError::Internal(error.to_string()))?;
                if users.is_empty() {
                    Err(LoginError::NoUsers)
                } else {
                    Err(LoginError::Refused)
                }
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
        let (answer, answered) = oneshot::channel();
        let gone = || LoginError::Internal("the login verifier threads are gone".to_owned());
        self.verifiers
            .send((hash, password.to_owned(), answer))
            .await
            .map_err(|_| gone())?;
        answered.await.map_err(|_| gone())?
    }
}

/// Starts `threads` verifier threads sharing one queue. They end when the queue's sender (the
/// `Authenticator`) is dropped.
fn start_verifiers(threads: usize) -> Result<mpsc::Sender<VerifyJob>, LoginError> {
    let (sender, receiver) = mpsc::channel::<VerifyJob>(threads.max(1));
    let receiver = Arc::new(Mutex::new(receiver));
    for index in 0..threads.max(1) {
        let receiver = Arc::clone(&receiver);
        std::thread::Builder::new()
            .name(format!("login-verifier-{index}"))
            .spawn(move || {
                lower_own_priority();
                let mut memory = Vec::new();
                loop {
                    // One thread waits on the queue at a time; the others wait for the lock.
                    let job = receiver
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .blocking_recv();
                    let Some((hash, password, answer)) = job else {
                        break;
                    };
                    let _ = answer.send(verify_with_memory(&hash, password.as_bytes(), &mut memory));
                }
            })
            .map_err(|error| {
                LoginError::Internal(format!("cannot start a login verifier thread: {error}"))
            })?;
    }
    Ok(sender)
}

/// Makes the calling thread nice 10: it gets CPU only what serving threads leave. Best effort:
/// where it cannot be done, verification runs at normal priority.
fn lower_own_priority() {
    #[cfg(target_os = "linux")]
    if let Err(error) = rustix::process::setpriority_process(Some(rustix::thread::gettid()), 10) {
        tracing::debug!(%error, "cannot lower the login verifier's priority");
    }
}

/// Whether `password` hashes to the stored PHC string `hash`, computing in `memory` (grown to
/// what the hash's parameters need, never shrunk).
fn verify_with_memory(hash: &str, password: &[u8], memory: &mut Vec<Block>) -> Result<bool, LoginError> {
    fn stored(error: impl std::fmt::Display) -> LoginError {
        LoginError::Internal(format!("stored hash: {error}"))
    }
    let parsed = PasswordHash::new(hash).map_err(stored)?;
    let algorithm = Algorithm::try_from(parsed.algorithm).map_err(stored)?;
    let version = parsed
        .version
        .map(Version::try_from)
        .transpose()
        .map_err(stored)?
        .unwrap_or_default();
    let params = Params::try_from(&parsed).map_err(stored)?;
    let expected = parsed
        .hash
        .ok_or_else(|| LoginError::Internal("stored hash: no hash value".to_owned()))?;
    let salt = parsed
        .salt
        .ok_or_else(|| LoginError::Internal("stored hash: no salt".to_owned()))?;
    let mut salt_bytes = [0u8; 64];
    let salt = salt.decode_b64(&mut salt_bytes).map_err(stored)?;
    let blocks = params.block_count();
    if memory.len() < blocks {
        memory.resize(blocks, Block::default());
    }
    let mut computed = vec![0u8; expected.len()];
    Argon2::new(algorithm, version, params)
        .hash_password_into_with_memory(password, salt, &mut computed, &mut memory[..blocks])
        .map_err(|error| LoginError::Internal(format!("argon2: {error}")))?;
    let computed = Output::new(&computed).map_err(stored)?;
    // `Output`'s equality is constant-time.
    Ok(computed == expected)
}

#[cfg(test)]
mod tests {
    use argon2::password_hash::PasswordVerifier;

    use super::*;

    #[test]
    fn reused_memory_verifies_exactly_as_argon2_does() {
        let hash = hash_password("correct horse").expect("hash");
        let parsed = PasswordHash::new(&hash).expect("parses");
        let mut memory = Vec::new();
        for (password, right) in [
            ("correct horse", true),
            ("correct hors", false),
            ("", false),
            ("correct horse", true),
        ] {
            assert_eq!(
                verify_with_memory(&hash, password.as_bytes(), &mut memory).expect("verifies"),
                right
            );
            assert_eq!(
                Argon2::default()
                    .verify_password(password.as_bytes(), &parsed)
                    .is_ok(),
                right
            );
        }
        let reused = memory.len();
        verify_with_memory(&hash, b"x", &mut memory).expect("verifies");
        assert_eq!(memory.len(), reused, "the buffer is reused, not grown");
        assert!(matches!(
            verify_with_memory("not a hash", b"x", &mut memory),
            Err(LoginError::Internal(_))
        ));
    }
}
