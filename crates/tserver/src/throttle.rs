//! `LoginThrottle`: failed logins counted per peer address, with a lockout that grows.
//!
//! The count is kept per address, never per user name, so a lockout says nothing about which
//! users exist, and one attacker cannot lock a user out from every panel of the plant. A
//! locked-out address is refused before any password is checked, so a guessing loop also stops
//! costing argon2 time. A successful login clears the count only when every failure counted
//! was for that same user (someone who mistyped their own password): one account an attacker
//! knows, logged in between guesses at another, never wipes the guesses.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use std::time::Instant;

use store::LoginThrottleConfig;

/// What one address has done lately.
#[derive(Debug, Clone)]
struct Failures {
    count: u32,
    last: Instant,
    locked_until: Option<Instant>,
    /// Whom the failures counted were for.
    users: FailedUsers,
}

/// Whom an address's failures were for: one user (by the folded name tried), or several (a
/// browser token that failed counts as several: it names no user).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FailedUsers {
    One(String),
    Several,
}

impl FailedUsers {
    /// The failures so far, and one more for `user`.
    fn and(self, user: Option<&str>) -> Self {
        match (self, user) {
            (Self::One(before), Some(user)) if before == user => Self::One(before),
            _ => Self::Several,
        }
    }
}

/// The key a user name counts under: case ignored, as logins match names.
pub(crate) fn user_key(name: &str) -> String {
    plant_model::fold(name)
}

/// Failed-login bookkeeping shared by every connection of one server.
#[derive(Debug)]
pub(crate) struct LoginThrottle {
    config: LoginThrottleConfig,
    peers: Mutex<HashMap<IpAddr, Failures>>,
}

impl LoginThrottle {
    pub(crate) fn new(config: LoginThrottleConfig) -> Self {
        Self {
            config,
            peers: Mutex::new(HashMap::new()),
        }
    }

    /// The rule it counts by.
    pub(crate) fn config(&self) -> &LoginThrottleConfig {
        &self.config
    }

    /// `Err(wait)` while `peer` is locked out: how long until it may try again.
    pub(crate) fn check(&self, peer: IpAddr) -> Result<(), Duration> {
        self.check_at(peer, Instant::now())
    }

    /// `check` as of `now`.
    fn check_at(&self, peer: IpAddr, now: Instant) -> Result<(), Duration> {
        let peers = self
            .peers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match peers.get(&peer).and_then(|failures| failures.locked_until) {
            Some(until) if until > now => Err(until - now),
            _ => Ok(()),
        }
    }

    /// Counts a failed login from `peer` for `user` (its [`user_key`]; `None` when the
    /// attempt named none); returns its failures so far and the lockout it earned, if any.
    pub(crate) fn failed(&self, peer: IpAddr, user: Option<&str>) -> (u32, Option<Duration>) {
        self.failed_at(peer, user, Instant::now())
    }

    /// `failed` as of `now`.
    fn failed_at(&self, peer: IpAddr, user: Option<&str>, now: Instant) -> (u32, Option<Duration>) {
        let mut peers = self
            .peers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !peers.contains_key(&peer) && peers.len() >= self.config.max_tracked {
            self.make_room(&mut peers, now);
        }
        let first = || match user {
            Some(user) => FailedUsers::One(user.to_owned()),
            None => FailedUsers::Several,
        };
        let failures = peers.entry(peer).or_insert_with(|| Failures {
            count: 0,
            last: now,
            locked_until: None,
            users: first(),
        });
        if failures.count == 0 || now.duration_since(failures.last) >= self.config.forget_after {
            failures.count = 0;
            failures.users = first();
        } else {
            failures.users = std::mem::replace(&mut failures.users, FailedUsers::Several).and(user);
        }
        failures.count = failures.count.saturating_add(1);
        failures.last = now;
        let lockout = self.config.lockout_after(failures.count);
        failures.locked_until = lockout.map(|lockout| now + lockout);
        (failures.count, lockout)
    }

    /// A successful login of `user` (its [`user_key`]) wipes the address's record when every
    /// failure in it was for that user; otherwise the record stands.
    pub(crate) fn succeeded(&self, peer: IpAddr, user: &str) {
        let mut peers = self
            .peers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if peers
            .get(&peer)
            .is_some_and(|failures| failures.users == FailedUsers::One(user.to_owned()))
        {
            peers.remove(&peer);
        }
    }

    /// Drops every stale entry; when none is stale, the unlocked (else locked) one whose last
    /// failure is oldest. The table stays bounded whatever the number of addresses failing.
    fn make_room(&self, peers: &mut HashMap<IpAddr, Failures>, now: Instant) {
        let forget_after = self.config.forget_after;
        peers.retain(|_, failures| {
            let locked = failures.locked_until.is_some_and(|until| until > now);
            locked || now.duration_since(failures.last) < forget_after
        });
        if peers.len() >= self.config.max_tracked
            && let Some(oldest) = peers
                .iter()
                .min_by_key(|(_, failures)| {
                    (
                        failures.locked_until.is_some_and(|until| until > now),
                        failures.last,
                    )
                })
                .map(|(peer, _)| *peer)
        {
            peers.remove(&oldest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> LoginThrottleConfig {
        LoginThrottleConfig {
            free_failures: 2,
            first_lockout: Duration::from_secs(10),
            max_lockout: Duration::from_secs(35),
            forget_after: Duration::from_secs(100),
            max_tracked: 3,
        }
    }

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn lockouts_start_after_the_free_failures_and_double_up_to_the_cap() {
        let throttle = LoginThrottle::new(config());
        let start = Instant::now();
        let lockouts: Vec<_> = (0..6)
            .map(|_| throttle.failed_at(ip(1), Some("ada"), start).1)
            .collect();
        let secs = |s| Some(Duration::from_secs(s));
        // Two free failures: the second locks, so the third Hello is the first throttled.
        assert_eq!(lockouts, [None, secs(10), secs(20), secs(35), secs(35), secs(35)]);
        assert_eq!(throttle.check_at(ip(1), start), Err(Duration::from_secs(35)));
        assert_eq!(
            throttle.check_at(ip(2), start),
            Ok(()),
            "other addresses are not affected"
        );
        assert_eq!(throttle.check_at(ip(1), start + Duration::from_secs(35)), Ok(()));
    }

    #[test]
    fn without_free_failures_the_first_failure_earns_the_first_lockout() {
        let throttle = LoginThrottle::new(LoginThrottleConfig {
            free_failures: 0,
            ..config()
        });
        assert_eq!(throttle.failed(ip(1), None).1, Some(Duration::from_secs(10)));
        assert_eq!(throttle.failed(ip(1), None).1, Some(Duration::from_secs(20)));
    }

    #[test]
    fn success_and_a_quiet_spell_both_reset_the_count() {
        let throttle = LoginThrottle::new(config());
        let start = Instant::now();
        throttle.failed_at(ip(1), Some("ada"), start);
        throttle.failed_at(ip(1), Some("ada"), start);
        throttle.succeeded(ip(1), "ada");
        assert_eq!(throttle.failed_at(ip(1), Some("ada"), start), (1, None));
        let later = start + Duration::from_secs(100);
        assert_eq!(throttle.failed_at(ip(1), Some("ada"), later), (1, None));
    }

    #[test]
    fn another_users_success_never_clears_the_guesses() {
        let throttle = LoginThrottle::new(config());
        let start = Instant::now();
        // Guesses at "boss", each followed by a good login of a known account.
        assert_eq!(throttle.failed_at(ip(1), Some("boss"), start), (1, None));
        throttle.succeeded(ip(1), "guest");
        assert_eq!(
            throttle.failed_at(ip(1), Some("boss"), start),
            (2, Some(Duration::from_secs(10)))
        );
        throttle.succeeded(ip(1), "guest");
        assert!(throttle.check_at(ip(1), start).is_err(), "locked out");
        // Failures for several users: not even one of them clears them.
        throttle.failed_at(ip(2), Some("ada"), start);
        throttle.failed_at(ip(2), Some("boss"), start);
        throttle.succeeded(ip(2), "ada");
        assert_eq!(throttle.failed_at(ip(2), Some("ada"), start).0, 3);
        // A failed browser token names no user: it counts as another user.
        throttle.failed_at(ip(3), Some("ada"), start);
        throttle.failed_at(ip(3), None, start);
        throttle.succeeded(ip(3), "ada");
        assert_eq!(throttle.failed_at(ip(3), Some("ada"), start).0, 3);
    }

    #[test]
    fn the_table_stays_bounded_and_keeps_locked_addresses() {
        let throttle = LoginThrottle::new(config());
        for _ in 0..3 {
            throttle.failed(ip(1), Some("ada"));
        }
        for peer in 2..=20 {
            throttle.failed(ip(peer), Some("ada"));
        }
        let peers = throttle.peers.lock().expect("lock");
        assert!(peers.len() <= 3);
        drop(peers);
        assert!(throttle.check(ip(1)).is_err(), "the locked address was kept");
    }
}
