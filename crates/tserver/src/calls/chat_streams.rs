//! The progress of a connection's streamed chat turns on its way to the wire: which turns
//! stream, when each may send its next progress frame, and the frames themselves.
//!
//! A tool dispatch's start and end go out at once (a turn has few: the per-turn cap bounds
//! them), and so does a turn's first answer text, so the panel sees the model start writing
//! without delay; after that a turn sends text at most once per [`PROGRESS_INTERVAL`], and
//! what gathers meanwhile merges in the turn's [`ProgressTap`]. The session writes the frames;
//! while a write waits for a slow reader nothing else is taken, so what waits is only the
//! merged progress, never a queue of frames. A turn's last progress goes out just before its
//! reply.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use localai::{ProgressFeed, ProgressTap, progress_feed};
use plant::proposals::ProposalBoard;
use tokio::sync::Notify;
use tokio::time::Instant;
use tserver_proto::v1::ServerFrame;

use super::to_proto::{REPLY_FRAME_OVERHEAD, progress_body, reply};

/// The least time between two progress frames of one turn that carry text.
pub(crate) const PROGRESS_INTERVAL: Duration = Duration::from_millis(50);

/// One streamed turn.
#[derive(Debug)]
struct StreamedTurn {
    tap: ProgressTap,
    /// When its latest progress frame with text went out.
    text_sent: Option<Instant>,
}

/// The streamed turns of one connection.
#[derive(Debug)]
pub(crate) struct ChatStreams {
    /// Told by every turn's feed when it has progress.
    wake: Arc<Notify>,
    turns: HashMap<u64, StreamedTurn>,
    /// The earliest time a turn with progress waiting may send it.
    due: Option<Instant>,
    /// The most progress one frame carries: the frame limit less the frame's own bytes.
    frame_room: usize,
    /// Where the proposals a turn makes are looked up by id.
    proposals: Arc<ProposalBoard>,
}

impl ChatStreams {
    pub(crate) fn new(max_frame: usize, proposals: Arc<ProposalBoard>) -> Self {
        Self {
            wake: Arc::new(Notify::new()),
            turns: HashMap::new(),
            due: None,
            frame_room: max_frame.saturating_sub(REPLY_FRAME_OVERHEAD),
            proposals,
        }
    }

    /// The most bytes of progress or of proposals one frame carries.
    pub(crate) fn frame_room(&self) -> usize {
        self.frame_room
    }

    /// Starts streaming the turn of `call_id`: its progress goes to the feed returned.
    pub(crate) fn open(&mut self, call_id: u64) -> ProgressFeed {
        let (feed, tap) = progress_feed(Arc::clone(&self.wake));
        self.turns.insert(call_id, StreamedTurn { tap, text_sent: None });
        feed
    }

    /// Completes when a turn may have progress to send (pending while no turn streams).
    pub(crate) async fn ready(&self) {
        if self.turns.is_empty() {
            return std::future::pending().await;
        }
        match self.due {
            Some(due) => tokio::select! {
                () = self.wake.notified() => {}
                () = tokio::time::sleep_until(due) => {}
            },
            None => self.wake.notified().await,
        }
    }

    /// The progress frames due now, and when the next ones will be.
    pub(crate) fn due_frames(&mut self, now: Instant) -> Vec<ServerFrame> {
        let mut frames = Vec::new();
        let mut due: Option<Instant> = None;
        for (call_id, turn) in &mut self.turns {
            if !turn.tap.has_pending() {
                continue;
            }
            match turn.text_sent.map(|sent| sent + PROGRESS_INTERVAL) {
                // Only text waits for its interval; a tool event takes the text with it.
                Some(next) if next > now && !turn.tap.has_pending_event() => {
                    due = Some(due.map_or(next, |due| due.min(next)));
                }
                _ => {
                    if drain(*call_id, &turn.tap, self.frame_room, &self.proposals, &mut frames) {
                        turn.text_sent = Some(now);
                    }
                }
            }
        }
        self.due = due;
        frames
    }

    /// Stops streaming the turn of `call_id`: the frames of whatever progress it still has,
    /// to go out before its reply.
    pub(crate) fn close(&mut self, call_id: u64) -> Vec<ServerFrame> {
        let mut frames = Vec::new();
        if let Some(turn) = self.turns.remove(&call_id) {
            drain(call_id, &turn.tap, self.frame_room, &self.proposals, &mut frames);
        }
        frames
    }
}

/// Frames of everything `tap` holds, each within `room`; returns whether any carried text. A
/// proposal goes in a frame of its own: it is larger on the wire than in the tap.
fn drain(
    call_id: u64,
    tap: &ProgressTap,
    room: usize,
    proposals: &ProposalBoard,
    frames: &mut Vec<ServerFrame>,
) -> bool {
    let mut text = false;
    loop {
        let events = tap.take(room);
        if events.is_empty() {
            return text;
        }
        text |= events
            .iter()
            .any(|event| matches!(event, localai::ChatProgress::Text(_)));
        let mut batch = Vec::with_capacity(events.len());
        for event in events {
            if matches!(event, localai::ChatProgress::ProposalMade { .. }) {
                if !batch.is_empty() {
                    frames.push(reply(
                        call_id,
                        progress_body(std::mem::take(&mut batch), proposals, room),
                    ));
                }
                frames.push(reply(call_id, progress_body(vec![event], proposals, room)));
            } else {
                batch.push(event);
            }
        }
        if !batch.is_empty() {
            frames.push(reply(call_id, progress_body(batch, proposals, room)));
        }
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;
    use tserver_proto::v1::{chat_event, server_frame};

    use super::*;

    /// The events of progress frames, text joined per frame.
    fn texts(frames: &[ServerFrame]) -> Vec<String> {
        frames
            .iter()
            .map(|frame| match &frame.body {
                Some(server_frame::Body::ChatProgress(progress)) => progress
                    .events
                    .iter()
                    .map(|event| match &event.event {
                        Some(chat_event::Event::Text(text)) => text.clone(),
                        other => format!("{other:?}"),
                    })
                    .collect(),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[tokio::test]
    async fn the_first_progress_goes_at_once_then_at_most_one_frame_per_interval() {
        let mut streams = ChatStreams::new(1 << 20, Arc::default());
        let feed = streams.open(7);
        let start = Instant::now();
        // Nothing yet: nothing due.
        assert!(streams.due_frames(start).is_empty());
        feed.text("Pump ");
        tokio::time::timeout(Duration::from_secs(1), streams.ready())
            .await
            .expect("woken");
        let frames = streams.due_frames(start);
        assert_eq!(texts(&frames), ["Pump "]);
        assert_eq!(frames[0].call_id, 7);
        // More within the interval waits, merged, until the interval has passed.
        feed.text("1 is ");
        feed.text("fine.");
        assert!(streams.due_frames(start + Duration::from_millis(10)).is_empty());
        assert_eq!(streams.due, Some(start + PROGRESS_INTERVAL));
        let frames = streams.due_frames(start + PROGRESS_INTERVAL);
        assert_eq!(texts(&frames), ["1 is fine."]);
        // A tool event goes at once, taking the text waiting with it; the interval then counts
        // from there.
        feed.text("Checking.");
        feed.event(localai::ChatProgress::ToolFinished {
            name: "t".into(),
            status: localai::ToolStatus::Ok,
            elapsed: Duration::from_millis(3),
        });
        let at = start + PROGRESS_INTERVAL + Duration::from_millis(1);
        assert_eq!(streams.due_frames(at).len(), 1);
        feed.event(localai::ChatProgress::ToolStarted {
            name: "t".into(),
            arguments: "{}".into(),
        });
        assert_eq!(
            streams.due_frames(at).len(),
            1,
            "an event without text goes at once"
        );
        feed.text("more");
        assert!(streams.due_frames(at + Duration::from_millis(1)).is_empty());
        // Closing sends what is left at once, and ends the stream.
        feed.text(" Done.");
        assert_eq!(texts(&streams.close(7)), ["more Done."]);
        assert!(streams.close(7).is_empty());
    }

    #[test]
    fn progress_frames_fit_the_smallest_frame_limit() {
        let max_frame = 4096;
        let mut streams = ChatStreams::new(max_frame, Arc::default());
        let feed = streams.open(u64::MAX);
        feed.text(&"é".repeat(10_000));
        feed.event(localai::ChatProgress::ToolStarted {
            name: "€".repeat(100),
            arguments: "a".repeat(5000),
        });
        let frames = streams.close(u64::MAX);
        assert!(frames.len() >= 5, "{}", frames.len());
        for frame in &frames {
            assert!(frame.encoded_len() <= max_frame, "{}", frame.encoded_len());
        }
    }
}
