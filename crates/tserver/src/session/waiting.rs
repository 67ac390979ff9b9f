//! `WaitingRoom`: a bounded set of connections where a silent one gives up its seat: the
//! framed port's connections that have not logged in yet, and the HTTP surface's connections.
//!
//! A plain cap would let a thousand silent connections keep every seat, so no panel could log
//! in (and no health check answer) for as long as an attack lasts. Instead, when the room is
//! full, a newcomer takes the seat of the oldest connection that is doing nothing: one that has
//! not even sent a Hello, or an HTTP connection between requests. A real client speaks at once,
//! while a squatter is the oldest by far. A connection whose Hello is being checked, or whose
//! HTTP request is being answered, is never evicted.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio_util::sync::CancellationToken;

/// One connection waiting to log in.
#[derive(Debug)]
struct Waiting {
    /// Cancelled when a newcomer takes this seat.
    evicted: CancellationToken,
    /// Uses in progress (a Hello being checked, HTTP requests being answered); evictable at 0.
    busy: usize,
}

/// The seats, by arrival order (lower number, longer waiting).
#[derive(Debug, Default)]
struct Seats {
    next: u64,
    taken: BTreeMap<u64, Waiting>,
}

/// The waiting room of one server.
#[derive(Debug)]
pub(crate) struct WaitingRoom {
    capacity: usize,
    seats: Mutex<Seats>,
}

impl WaitingRoom {
    pub(crate) fn new(capacity: usize) -> Arc<Self> {
        Arc::new(Self {
            capacity: capacity.max(1),
            seats: Mutex::new(Seats::default()),
        })
    }

    fn seats(&self) -> MutexGuard<'_, Seats> {
        // Single inserts and removes: a poisoned lock is still consistent.
        self.seats.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A seat for a new connection: a free one, or the seat of the longest-waiting connection
    /// that has sent no Hello (which is told to leave). `None` when every seat belongs to a
    /// connection whose Hello is being checked.
    pub(crate) fn enter(self: &Arc<Self>) -> Option<Seat> {
        let mut seats = self.seats();
        if seats.taken.len() >= self.capacity {
            let oldest = seats
                .taken
                .iter()
                .find(|(_, waiting)| waiting.busy == 0)
                .map(|(number, _)| *number)?;
            if let Some(evicted) = seats.taken.remove(&oldest) {
                evicted.evicted.cancel();
            }
        }
        let number = seats.next;
        seats.next += 1;
        let evicted = CancellationToken::new();
        seats.taken.insert(
            number,
            Waiting {
                evicted: evicted.clone(),
                busy: 0,
            },
        );
        Some(Seat {
            room: Arc::clone(self),
            number,
            evicted,
        })
    }

    /// Connections waiting now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.seats().taken.len()
    }
}

/// A connection's seat in the waiting room; leaving (drop) frees it.
#[derive(Debug)]
pub(crate) struct Seat {
    room: Arc<WaitingRoom>,
    number: u64,
    evicted: CancellationToken,
}

impl Seat {
    /// The connection sent a Hello: it is being served and keeps its seat until it leaves.
    pub(crate) fn hello_received(&self) {
        if let Some(waiting) = self.room.seats().taken.get_mut(&self.number) {
            waiting.busy = waiting.busy.saturating_add(1);
        }
    }

    /// The connection is answering a request: it keeps its seat until the returned guard is
    /// dropped. `None` when a newcomer has already taken the seat (the connection must close).
    pub(crate) fn occupy(self: &Arc<Self>) -> Option<Occupied> {
        let mut seats = self.room.seats();
        let waiting = seats.taken.get_mut(&self.number)?;
        waiting.busy = waiting.busy.saturating_add(1);
        Some(Occupied(Arc::clone(self)))
    }

    /// Completes when a newcomer has taken this seat.
    pub(crate) async fn evicted(&self) {
        self.evicted.cancelled().await;
    }
}

/// A request in progress on a seat (see [`Seat::occupy`]); dropping it makes the seat
/// evictable again once no other request holds it.
#[derive(Debug)]
pub(crate) struct Occupied(Arc<Seat>);

impl Drop for Occupied {
    fn drop(&mut self) {
        if let Some(waiting) = self.0.room.seats().taken.get_mut(&self.0.number) {
            waiting.busy = waiting.busy.saturating_sub(1);
        }
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.room.seats().taken.remove(&self.number);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_room_evicts_the_oldest_silent_connection_never_one_saying_hello() {
        let room = WaitingRoom::new(3);
        let first = room.enter().expect("free seat");
        let second = room.enter().expect("free seat");
        let third = room.enter().expect("free seat");
        first.hello_received();

        let fourth = room.enter().expect("takes the oldest silent seat");
        assert!(second.evicted.is_cancelled(), "the oldest silent connection goes");
        assert!(!first.evicted.is_cancelled(), "a connection saying Hello stays");
        assert_eq!(room.len(), 3);

        third.hello_received();
        fourth.hello_received();
        assert!(room.enter().is_none(), "every seat is checking a Hello");
        drop(first);
        let _fifth = room.enter().expect("a seat left is free again");
        drop(second);
        assert_eq!(room.len(), 3, "an evicted seat was already freed");
    }

    #[test]
    fn a_seat_answering_a_request_stays_and_is_evictable_again_between_requests() {
        let room = WaitingRoom::new(1);
        let first = Arc::new(room.enter().expect("free seat"));
        let request = first.occupy().expect("not evicted");
        assert!(room.enter().is_none(), "the only seat answers a request");
        drop(request);
        let second = room.enter().expect("takes the idle seat");
        assert!(first.evicted.is_cancelled());
        assert!(
            first.occupy().is_none(),
            "an evicted seat serves no further request"
        );
        drop(second);
    }
}
