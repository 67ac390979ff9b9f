//! `LoginThrottleConfig`: the rule that answers failed logins from one address, one rule for
//! a server's own count and for the count every node sharing a database keeps in it.

use std::time::Duration;

/// How failed logins from one address are answered; see `docs/LIMITS.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoginThrottleConfig {
    /// Failed logins an address may make before the first lockout.
    pub free_failures: u32,
    /// The first lockout; each further failure doubles it.
    pub first_lockout: Duration,
    /// The longest lockout.
    pub max_lockout: Duration,
    /// An address with no failure for this long starts again from zero.
    pub forget_after: Duration,
    /// Addresses tracked at once; past it, stale entries are dropped first, then the oldest.
    pub max_tracked: usize,
}

impl Default for LoginThrottleConfig {
    fn default() -> Self {
        Self {
            free_failures: 5,
            first_lockout: Duration::from_secs(1),
            max_lockout: Duration::from_secs(300),
            forget_after: Duration::from_secs(900),
            max_tracked: 65_536,
        }
    }
}

impl LoginThrottleConfig {
    /// The lockout earned by the `count`th failure: none before the free failures are used
    /// up, the first lockout at the last free one (so the next Hello is throttled), then
    /// doubled per further failure, capped. One rule for every node: the PostgreSQL store
    /// counts failures across nodes with it too.
    pub fn lockout_after(&self, count: u32) -> Option<Duration> {
        // With no free failures, the first failure earns the first lockout, not twice it.
        let over = count.checked_sub(self.free_failures.max(1))?;
        let factor = 1u32.checked_shl(over.min(31)).unwrap_or(u32::MAX);
        Some(self.first_lockout.saturating_mul(factor).min(self.max_lockout))
    }
}
