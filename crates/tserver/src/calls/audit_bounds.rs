//! What one connection may put in the audit trail: values and names cut to
//! [`store::MAX_AUDIT_TEXT_CHARS`], and refusals recorded at most [`REFUSED_ROWS_PER_MINUTE`] rows a
//! minute per connection, and [`SHARED_REFUSED_ROWS_PER_MINUTE`] per user and per client
//! address over all their connections (so reconnecting buys no new allowance). Past any of
//! them refusals are counted, not recorded: one row says which allowance is reached, and the
//! first refusal recorded later carries one row with the count. Accepted writes and
//! acknowledgements are always recorded (nothing acts unaudited); only what changed nothing is
//! bounded, so no client can fill the disk with refusals.

use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use dashmap::DashMap;

/// The refused writes of one call recorded one row each; the rest in one row with their count.
pub(crate) const REFUSED_ROWS_PER_CALL: usize = 10;

/// Audit rows of refusals one connection may add in a minute.
pub(crate) const REFUSED_ROWS_PER_MINUTE: usize = 600;

/// Audit rows of refusals one user, and one client address, may add in a minute over all
/// their connections.
pub(crate) const SHARED_REFUSED_ROWS_PER_MINUTE: usize = 1_200;

/// Users or addresses tracked before allowances whose minute is over are dropped.
const TRACKED_BEFORE_PRUNING: usize = 4_096;

const WINDOW: Duration = Duration::from_secs(60);

/// What the connection's allowance says of the refusal rows a call brings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Allowed {
    /// Record them; `counted` refusals of an earlier minute were not recorded (a row with the
    /// count goes with them when above zero).
    Record { counted: u64 },
    /// Record them, and one row saying the allowance is now reached.
    RecordLast,
    /// Do not record them: they are counted.
    Count,
}

/// Whose allowance a decision is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// The connection's.
    Connection,
    /// The logged-in user's, over all its connections.
    User,
    /// The client address's, over all its connections.
    Address,
}

impl Scope {
    /// What it is, in a sentence.
    pub(crate) fn words(self) -> &'static str {
        match self {
            Self::Connection => "this connection",
            Self::User => "this user",
            Self::Address => "this client address",
        }
    }

    /// Its allowance of rows a minute.
    pub(crate) fn limit(self) -> usize {
        match self {
            Self::Connection => REFUSED_ROWS_PER_MINUTE,
            Self::User | Self::Address => SHARED_REFUSED_ROWS_PER_MINUTE,
        }
    }
}

/// One allowance of refusal rows: a connection's, a user's or an address's.
#[derive(Debug)]
pub(crate) struct AuditAllowance {
    window_start: Instant,
    rows: usize,
    /// Refusals not recorded since the allowance was reached.
    counted: u64,
}

impl Default for AuditAllowance {
    fn default() -> Self {
        Self {
            window_start: Instant::now(),
            rows: 0,
            counted: 0,
        }
    }
}

impl AuditAllowance {
    /// Takes `rows` rows of refusals (standing for `refusals` refused requests) at `now`, of
    /// an allowance of `limit` rows a minute.
    pub(crate) fn take(&mut self, limit: usize, rows: usize, refusals: u64, now: Instant) -> Allowed {
        if now.duration_since(self.window_start) >= WINDOW {
            self.window_start = now;
            self.rows = 0;
        }
        if self.rows >= limit {
            self.counted += refusals;
            return Allowed::Count;
        }
        self.rows += rows;
        if self.rows >= limit {
            return Allowed::RecordLast;
        }
        Allowed::Record {
            counted: std::mem::take(&mut self.counted),
        }
    }

    /// Whether its minute is over and it has nothing counted to report: it can be forgotten.
    fn spent(&self, now: Instant) -> bool {
        self.counted == 0 && now.duration_since(self.window_start) >= WINDOW
    }
}

/// The allowances of every user and client address of one server, shared by its connections.
#[derive(Debug, Default)]
pub(crate) struct SharedAllowances {
    users: DashMap<String, AuditAllowance>,
    addresses: DashMap<IpAddr, AuditAllowance>,
}

/// One allowance of `map` taken, pruning those whose minute is over when the map grows.
fn take_from<K: Eq + std::hash::Hash + Clone>(
    map: &DashMap<K, AuditAllowance>,
    key: &K,
    rows: usize,
    refusals: u64,
    now: Instant,
) -> Allowed {
    if map.len() >= TRACKED_BEFORE_PRUNING && !map.contains_key(key) {
        map.retain(|_, allowance| !allowance.spent(now));
    }
    map.entry(key.clone())
        .or_default()
        .take(SHARED_REFUSED_ROWS_PER_MINUTE, rows, refusals, now)
}

impl SharedAllowances {
    /// Takes `rows` rows of refusals (standing for `refusals` refused requests) at `now` from
    /// the client address's allowance, then the user's (its folded name), then the
    /// connection's: the first that says count decides, and the others are not drawn on.
    pub(crate) fn take(
        &self,
        connection: &Mutex<AuditAllowance>,
        user: &str,
        address: IpAddr,
        (rows, refusals): (usize, u64),
        now: Instant,
    ) -> (Allowed, Scope) {
        let mut decided = Vec::with_capacity(3);
        for scope in [Scope::Address, Scope::User, Scope::Connection] {
            let allowed = match scope {
                Scope::Address => take_from(&self.addresses, &address, rows, refusals, now),
                Scope::User => take_from(&self.users, &crate::throttle::user_key(user), rows, refusals, now),
                Scope::Connection => connection
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .take(REFUSED_ROWS_PER_MINUTE, rows, refusals, now),
            };
            if allowed == Allowed::Count {
                return (Allowed::Count, scope);
            }
            decided.push((allowed, scope));
        }
        if let Some(last) = decided
            .iter()
            .find(|(allowed, _)| *allowed == Allowed::RecordLast)
        {
            return last.clone();
        }
        let counted = decided
            .iter()
            .map(|(allowed, _)| match allowed {
                Allowed::Record { counted } => *counted,
                _ => 0,
            })
            .sum();
        (Allowed::Record { counted }, Scope::Connection)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_allowance_refusals_are_counted_then_reported_in_a_later_minute() {
        let start = Instant::now();
        let mut allowance = AuditAllowance {
            window_start: start,
            rows: 0,
            counted: 0,
        };
        let limit = REFUSED_ROWS_PER_MINUTE;
        for _ in 0..limit - 1 {
            assert_eq!(allowance.take(limit, 1, 1, start), Allowed::Record { counted: 0 });
        }
        assert_eq!(allowance.take(limit, 1, 1, start), Allowed::RecordLast);
        assert_eq!(allowance.take(limit, 1, 5, start), Allowed::Count);
        assert_eq!(allowance.take(limit, 1, 7, start), Allowed::Count);
        let later = start + WINDOW;
        assert_eq!(
            allowance.take(limit, 1, 1, later),
            Allowed::Record { counted: 12 }
        );
        assert_eq!(allowance.take(limit, 1, 1, later), Allowed::Record { counted: 0 });
    }

    #[test]
    fn new_connections_of_one_user_or_address_share_its_allowance() {
        let shared = SharedAllowances::default();
        let now = Instant::now();
        let address = IpAddr::from([127, 0, 0, 1]);
        let mut recorded = 0;
        // Connections that reconnect before their own allowance runs out.
        for _ in 0..10 {
            let connection = Mutex::new(AuditAllowance::default());
            for _ in 0..REFUSED_ROWS_PER_MINUTE - 1 {
                match shared.take(&connection, "Watcher", address, (1, 1), now) {
                    (Allowed::Count, _) => {}
                    _ => recorded += 1,
                }
            }
        }
        assert_eq!(recorded, SHARED_REFUSED_ROWS_PER_MINUTE);
        let connection = Mutex::new(AuditAllowance::default());
        assert_eq!(
            shared.take(&connection, "WATCHER", IpAddr::from([127, 0, 0, 2]), (1, 1), now),
            (Allowed::Count, Scope::User),
            "the user's allowance, whatever the case of its name or its address"
        );
        assert_eq!(
            shared.take(&connection, "other", address, (1, 1), now),
            (Allowed::Count, Scope::Address),
        );
        let fresh = shared.take(&connection, "other", IpAddr::from([127, 0, 0, 3]), (1, 1), now);
        assert_eq!(fresh, (Allowed::Record { counted: 0 }, Scope::Connection));
    }
}
