//! How every source waits before connecting again: a pause growing from 0.2 s to 30 s, started
//! afresh after a connection that held, during which operators' writes are refused at once.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{FieldWrite, FieldWriteError, not_connected};

/// The pauses before connecting again: 0.2 s, doubled after each failure up to 30 s.
#[derive(Debug)]
pub(crate) struct Backoff {
    next: Duration,
}

impl Backoff {
    /// The first pause, also how often the clients that reconnect by themselves start.
    pub(crate) const FIRST: Duration = Duration::from_millis(200);
    /// The longest pause.
    pub(crate) const MAX: Duration = Duration::from_secs(30);
    /// How long a connection must hold before its loss starts the pauses anew: a peer that
    /// accepts and at once closes is failing, not recovering.
    const STABLE: Duration = Duration::from_secs(30);

    pub(crate) fn new() -> Self {
        Self { next: Self::FIRST }
    }

    /// The pause after a connection that held for `lasted` (zero for one never made).
    pub(crate) fn after(&mut self, lasted: Duration) -> Duration {
        if lasted >= Self::STABLE {
            self.next = Self::FIRST;
        }
        let pause = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        pause
    }
}

/// Waits `pause`, refusing the writes that come meanwhile (source `source` is not connected
/// to its `peer`); false if `shutdown` came first.
pub(crate) async fn pause_refusing_writes(
    pause: Duration,
    writes: &mut mpsc::Receiver<FieldWrite>,
    (source, peer): (&str, &str),
    shutdown: &CancellationToken,
) -> bool {
    let sleep = tokio::time::sleep(pause);
    tokio::pin!(sleep);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return false,
            () = &mut sleep => return true,
            Some(write) = writes.recv() => {
                let _ = write
                    .done
                    .send(Err(FieldWriteError::Refused(not_connected(source, peer))));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_to_the_most_and_start_afresh_after_a_connection_that_held() {
        let mut backoff = Backoff::new();
        let pauses: Vec<u64> = (0..10)
            .map(|_| backoff.after(Duration::ZERO).as_millis() as u64)
            .collect();
        assert_eq!(
            pauses,
            [200, 400, 800, 1600, 3200, 6400, 12800, 25600, 30000, 30000]
        );
        assert_eq!(backoff.after(Duration::from_secs(29)), Backoff::MAX);
        assert_eq!(backoff.after(Duration::from_secs(30)), Backoff::FIRST);
        assert_eq!(backoff.after(Duration::ZERO), Duration::from_millis(400));
    }
}
