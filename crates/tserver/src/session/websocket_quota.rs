//! `WebSocketQuota`: the share of the display server's connection slots WebSockets may hold, all
//! together, from one client address and for one user, so browsers (or anything holding a
//! valid login) can never take the slots TCP display clients need.

use std::net::IpAddr;
use std::sync::Arc;

use dashmap::DashMap;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How many WebSockets may be open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WebSocketLimits {
    /// All together (each also takes a display slot). Default: half the connection cap.
    pub total: usize,
    /// From one client address. Default 64.
    pub per_address: usize,
    /// Logged in as one user. Default 128.
    pub per_user: usize,
}

impl WebSocketLimits {
    /// The defaults for a server of `max_connections`.
    pub fn for_connections(max_connections: usize) -> Self {
        Self {
            total: (max_connections / 2).max(1),
            per_address: 64,
            per_user: 128,
        }
    }
}

/// Why a WebSocket is not let in or not logged in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebSocketQuotaRefusal {
    /// WebSockets hold their whole share of the display slots.
    #[error(
        "too many WebSockets (limit {0}; the rest of the connections are kept for TCP display clients); try again later"
    )]
    Total(usize),
    /// The client's address holds its share.
    #[error("too many WebSockets from this address (limit {0}); close one first")]
    Address(usize),
    /// The user holds its share.
    #[error("too many WebSockets logged in as this user (limit {0}); close one first")]
    User(usize),
}

/// The counts, shared by every WebSocket of one server.
#[derive(Debug)]
pub(crate) struct WebSocketQuota {
    limits: WebSocketLimits,
    total: Arc<Semaphore>,
    addresses: DashMap<IpAddr, usize>,
    users: DashMap<Arc<str>, usize>,
}

/// One more in a count while held; one less when dropped.
fn take<K: Eq + std::hash::Hash + Clone>(counts: &DashMap<K, usize>, key: &K, limit: usize) -> bool {
    let mut count = counts.entry(key.clone()).or_insert(0);
    if *count >= limit {
        return false;
    }
    *count += 1;
    true
}

fn give_back<K: Eq + std::hash::Hash>(counts: &DashMap<K, usize>, key: &K) {
    // The entry goes with its last holder, so the map is as large as the open WebSockets.
    counts.remove_if_mut(key, |_, count| {
        *count = count.saturating_sub(1);
        *count == 0
    });
}

/// A WebSocket's place in the total and its address's count, held until it closes.
#[derive(Debug)]
pub(crate) struct AddressTicket {
    quota: Arc<WebSocketQuota>,
    address: IpAddr,
    _total: OwnedSemaphorePermit,
}

impl Drop for AddressTicket {
    fn drop(&mut self) {
        give_back(&self.quota.addresses, &self.address);
    }
}

/// A logged-in WebSocket's place in its user's count, held until it logs out or closes.
#[derive(Debug)]
pub(crate) struct UserTicket {
    quota: Arc<WebSocketQuota>,
    user: Arc<str>,
}

impl Drop for UserTicket {
    fn drop(&mut self) {
        give_back(&self.quota.users, &self.user);
    }
}

impl WebSocketQuota {
    pub(crate) fn new(limits: WebSocketLimits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            total: Arc::new(Semaphore::new(limits.total)),
            addresses: DashMap::new(),
            users: DashMap::new(),
        })
    }

    /// A place for one more WebSocket from `address`, or why not.
    pub(crate) fn admit(self: &Arc<Self>, address: IpAddr) -> Result<AddressTicket, WebSocketQuotaRefusal> {
        let total = Arc::clone(&self.total)
            .try_acquire_owned()
            .map_err(|_| WebSocketQuotaRefusal::Total(self.limits.total))?;
        if !take(&self.addresses, &address, self.limits.per_address) {
            return Err(WebSocketQuotaRefusal::Address(self.limits.per_address));
        }
        Ok(AddressTicket {
            quota: Arc::clone(self),
            address,
            _total: total,
        })
    }

    /// A place for one more WebSocket logged in as `user` (the name as stored), or why not.
    pub(crate) fn log_in(self: &Arc<Self>, user: &Arc<str>) -> Result<UserTicket, WebSocketQuotaRefusal> {
        let key: Arc<str> = Arc::from(crate::throttle::user_key(user));
        if !take(&self.users, &key, self.limits.per_user) {
            return Err(WebSocketQuotaRefusal::User(self.limits.per_user));
        }
        Ok(UserTicket {
            quota: Arc::clone(self),
            user: key,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_total_each_address_and_each_user_are_capped_and_places_come_back() {
        let quota = WebSocketQuota::new(WebSocketLimits {
            total: 3,
            per_address: 2,
            per_user: 1,
        });
        let (one, two) = (IpAddr::from([127, 0, 0, 1]), IpAddr::from([127, 0, 0, 2]));
        let first = quota.admit(one).expect("a place");
        let second = quota.admit(one).expect("a place");
        assert_eq!(quota.admit(one).err(), Some(WebSocketQuotaRefusal::Address(2)));
        let third = quota.admit(two).expect("another address");
        assert_eq!(quota.admit(two).err(), Some(WebSocketQuotaRefusal::Total(3)));
        drop(first);
        let _fourth = quota.admit(one).expect("a place came back");
        drop((second, third));
        assert_eq!(
            quota.addresses.get(&two).map(|count| *count),
            None,
            "no entry kept"
        );

        let ada: Arc<str> = Arc::from("Ada");
        let logged_in = quota.log_in(&ada).expect("a place");
        assert_eq!(
            quota.log_in(&Arc::from("ADA")).err(),
            Some(WebSocketQuotaRefusal::User(1)),
            "names fold"
        );
        drop(logged_in);
        quota.log_in(&ada).expect("a place came back");
    }
}
