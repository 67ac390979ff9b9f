//! A chat turn's progress as it runs, for a host that shows it while the model works: answer
//! text as the model writes it, and each tool dispatch as it starts and finishes.
//!
//! The turn pushes into a [`ProgressFeed`] and never waits; the host takes what has gathered
//! from the [`ProgressTap`] whenever it is ready to send. Text that arrives meanwhile merges
//! into one piece, so a host that sends slowly (or a reader that reads slowly) never makes the
//! turn wait, and what waits is never more than the turn's own answer text plus two events per
//! tool dispatch (which the per-turn cap bounds).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use ai_envelope::ToolStatus;
use tokio::sync::Notify;

use crate::tools::ProposalId;

/// The most bytes of a tool's arguments a [`ChatProgress::ToolStarted`] carries (the tool
/// trace in the final envelope has them whole).
pub const MAX_PROGRESS_ARGUMENTS: usize = 1024;

/// One thing that happened in a running turn.
#[derive(Debug, Clone, PartialEq)]
pub enum ChatProgress {
    /// Answer text, following the text before it. Text written before a tool dispatch was the
    /// model's preamble; the answer is the text after the last dispatch.
    Text(String),
    /// A tool dispatch started.
    ToolStarted {
        /// The tool the model asked for (cut to 64 characters, as in the tool trace).
        name: String,
        /// Its arguments as JSON text, cut to [`MAX_PROGRESS_ARGUMENTS`] bytes (then ending in
        /// `…` and no longer valid JSON).
        arguments: String,
    },
    /// A tool dispatch finished.
    ToolFinished {
        /// The tool, as in its `ToolStarted`.
        name: String,
        /// Whether it returned a result.
        status: ToolStatus,
        /// How long it ran.
        elapsed: Duration,
    },
    /// A proposing tool (ModelOptions 0x40) made a proposal for the operator to decide; the
    /// host knows it by `id`.
    ProposalMade {
        /// The proposal's id, as the tool gave it beside its result.
        id: ProposalId,
    },
}

impl ChatProgress {
    /// About how many bytes it takes to send.
    fn size(&self) -> usize {
        match self {
            Self::Text(text) => text.len() + 8,
            Self::ToolStarted { name, arguments } => name.len() + arguments.len() + 16,
            Self::ToolFinished { name, .. } => name.len() + 24,
            Self::ProposalMade { id } => id.as_str().len() + 8,
        }
    }
}

/// What both ends share.
#[derive(Debug)]
struct Board {
    pending: Mutex<VecDeque<ChatProgress>>,
    /// Told whenever something is pushed.
    wake: Arc<Notify>,
}

impl Board {
    fn pending(&self) -> MutexGuard<'_, VecDeque<ChatProgress>> {
        // Pushes and takes leave the queue whole even if a holder panicked.
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Where a turn reports its progress; made with [`progress_feed`] and given to the turn.
#[derive(Debug)]
pub struct ProgressFeed {
    board: Arc<Board>,
}

/// Where the host takes a turn's progress from.
#[derive(Debug)]
pub struct ProgressTap {
    board: Arc<Board>,
}

/// A feed for one turn and its tap. `wake` is told each time something is pushed (one
/// [`Notify`] may serve every turn of a connection: the host then looks at each tap).
pub fn progress_feed(wake: Arc<Notify>) -> (ProgressFeed, ProgressTap) {
    let board = Arc::new(Board {
        pending: Mutex::new(VecDeque::new()),
        wake,
    });
    (
        ProgressFeed {
            board: Arc::clone(&board),
        },
        ProgressTap { board },
    )
}

impl ProgressFeed {
    /// Answer text; merged into the text waiting before it, if any.
    pub fn text(&self, piece: &str) {
        if piece.is_empty() {
            return;
        }
        {
            let mut pending = self.board.pending();
            match pending.back_mut() {
                Some(ChatProgress::Text(text)) => text.push_str(piece),
                _ => pending.push_back(ChatProgress::Text(piece.to_owned())),
            }
        }
        self.board.wake.notify_one();
    }

    /// Any event (text merges as with [`text`](Self::text)). A tool's name is cut to 64
    /// characters and its arguments to [`MAX_PROGRESS_ARGUMENTS`] bytes here, so every event
    /// fits a frame however the model wrote them.
    pub fn event(&self, event: ChatProgress) {
        let event = match event {
            ChatProgress::Text(text) => return self.text(&text),
            ChatProgress::ToolStarted { name, arguments } => ChatProgress::ToolStarted {
                name: cut_name(name),
                arguments: cut_to(arguments, MAX_PROGRESS_ARGUMENTS),
            },
            ChatProgress::ToolFinished {
                name,
                status,
                elapsed,
            } => ChatProgress::ToolFinished {
                name: cut_name(name),
                status,
                elapsed,
            },
            // Made by the host's own tool, not by the model: nothing to cut.
            ChatProgress::ProposalMade { id } => ChatProgress::ProposalMade { id },
        };
        self.board.pending().push_back(event);
        self.board.wake.notify_one();
    }
}

impl ProgressTap {
    /// Whether anything waits to be taken.
    pub fn has_pending(&self) -> bool {
        !self.board.pending().is_empty()
    }

    /// Whether a tool event (anything but text) waits to be taken.
    pub fn has_pending_event(&self) -> bool {
        self.board
            .pending()
            .iter()
            .any(|event| !matches!(event, ChatProgress::Text(_)))
    }

    /// Takes what has gathered, in order, up to about `max_bytes` (at least one event): a
    /// text past the room left is split at a character boundary and its rest stays first in
    /// line for the next take.
    pub fn take(&self, max_bytes: usize) -> Vec<ChatProgress> {
        let mut pending = self.board.pending();
        let mut taken = Vec::new();
        let mut room = max_bytes;
        while let Some(next) = pending.front_mut() {
            let size = next.size();
            if size <= room || taken.is_empty() && !matches!(next, ChatProgress::Text(_)) {
                room = room.saturating_sub(size);
                taken.extend(pending.pop_front());
                continue;
            }
            if let ChatProgress::Text(text) = next {
                let mut cut = room.saturating_sub(8).min(text.len());
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                if cut == 0 && taken.is_empty() {
                    // Too little room for any of it: one character, so every take moves on.
                    cut = text.chars().next().map_or(0, char::len_utf8);
                }
                if cut > 0 {
                    let rest = text.split_off(cut);
                    taken.push(ChatProgress::Text(std::mem::replace(text, rest)));
                }
            }
            break;
        }
        taken
    }
}

/// A tool name cut to 64 characters, as the tool trace shows it.
fn cut_name(name: String) -> String {
    match name.char_indices().nth(64) {
        Some((at, _)) => name[..at].to_owned(),
        None => name,
    }
}

/// `text` cut to at most `max` bytes at a character boundary, with `…` when cut.
fn cut_to(text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    let mut cut = max.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut cut_text = text;
    cut_text.truncate(cut);
    cut_text.push('…');
    cut_text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn started(name: &str) -> ChatProgress {
        ChatProgress::ToolStarted {
            name: name.to_owned(),
            arguments: "{}".to_owned(),
        }
    }

    #[test]
    fn text_merges_while_it_waits_and_events_keep_their_order() {
        let (feed, tap) = progress_feed(Arc::new(Notify::new()));
        assert!(!tap.has_pending());
        feed.text("Let me ");
        assert!(tap.has_pending() && !tap.has_pending_event());
        feed.text("check.");
        feed.event(started("runtime_get_value"));
        feed.text("Pump 1 ");
        feed.text("is fine.");
        assert!(tap.has_pending() && tap.has_pending_event());
        assert_eq!(
            tap.take(usize::MAX),
            [
                ChatProgress::Text("Let me check.".to_owned()),
                started("runtime_get_value"),
                ChatProgress::Text("Pump 1 is fine.".to_owned()),
            ]
        );
        assert!(tap.take(usize::MAX).is_empty());
    }

    #[test]
    fn a_take_holds_about_its_room_and_splits_text_on_a_character_boundary() {
        let (feed, tap) = progress_feed(Arc::new(Notify::new()));
        let text = "é".repeat(100);
        feed.text(&text);
        feed.event(started("t"));
        let mut joined = String::new();
        let mut takes = 0;
        loop {
            let taken = tap.take(50);
            if taken.is_empty() {
                break;
            }
            takes += 1;
            for event in taken {
                match event {
                    ChatProgress::Text(piece) => {
                        assert!(piece.len() <= 42, "{}", piece.len());
                        joined.push_str(&piece);
                    }
                    other => assert_eq!(other, started("t")),
                }
            }
        }
        assert_eq!(joined, text);
        assert!(takes >= 5, "{takes}");
        // An event larger than the room still goes, alone.
        feed.event(started(&"n".repeat(100)));
        assert_eq!(tap.take(10).len(), 1);
        // Text with no room still moves on, a character at a time.
        feed.text("ab");
        assert_eq!(tap.take(0), [ChatProgress::Text("a".to_owned())]);
    }

    #[test]
    fn long_arguments_are_cut_with_a_mark() {
        let (feed, tap) = progress_feed(Arc::new(Notify::new()));
        feed.event(ChatProgress::ToolStarted {
            name: "é".repeat(100),
            arguments: "a".repeat(5000),
        });
        match &tap.take(usize::MAX)[..] {
            [ChatProgress::ToolStarted { name, arguments }] => {
                assert_eq!(name.chars().count(), 64);
                assert!(arguments.len() <= MAX_PROGRESS_ARGUMENTS && arguments.ends_with('…'));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(cut_to("short".to_owned(), 10), "short");
        let cut = cut_to("ééééé".to_owned(), 6);
        assert_eq!(cut, "é…");
        assert!(cut.len() <= 6);
    }

    #[tokio::test]
    async fn every_push_wakes_the_host() {
        let wake = Arc::new(Notify::new());
        let (feed, _tap) = progress_feed(Arc::clone(&wake));
        feed.text("a");
        // The permit waits for a host that was not yet listening.
        tokio::time::timeout(Duration::from_secs(5), wake.notified())
            .await
            .expect("woken");
    }
}
