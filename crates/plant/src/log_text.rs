//! What a client or the field may put in the server log: their text cut to a readable length,
//! and budgets of log lines (per connection, topic or script, and for all of them together),
//! so no client can fill the disk through the log.

use std::fmt;
use std::time::Duration;

use std::time::Instant;

/// The most characters of one client-chosen string a log line shows.
pub const MAX_LOGGED_CHARS: usize = 64;

/// Client-chosen text as a log field: at most [`MAX_LOGGED_CHARS`] characters, control
/// characters escaped (a newline in a client name must not forge a log line), and the size of
/// what was cut. Formats without allocating.
#[derive(Debug, Clone, Copy)]
pub struct ClientText<'a>(pub &'a str);

impl fmt::Display for ClientText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_cut(f, self.0, MAX_LOGGED_CHARS)
    }
}

/// The most characters of one error message built around client- or field-supplied text (a
/// script's thrown value, a broker's reason) a log line shows: longer than a name, as the
/// message says where and why.
pub(crate) const MAX_LOGGED_MESSAGE_CHARS: usize = 256;

/// An error message that may carry client- or field-supplied text, as a log field: as
/// [`ClientText`], cut at [`MAX_LOGGED_MESSAGE_CHARS`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct MessageText<'a>(pub(crate) &'a str);

impl fmt::Display for MessageText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_cut(f, self.0, MAX_LOGGED_MESSAGE_CHARS)
    }
}

/// Writes `text` cut at `max` characters, control characters escaped, and the size of the cut.
fn write_cut(f: &mut fmt::Formatter<'_>, text: &str, max: usize) -> fmt::Result {
    for (shown, (index, c)) in text.char_indices().enumerate() {
        if shown == max {
            return write!(f, "…(+{} bytes)", text.len() - index);
        }
        if c.is_control() {
            write!(f, "{}", c.escape_default())?;
        } else {
            write!(f, "{c}")?;
        }
    }
    Ok(())
}

/// Log lines one connection may cause per window, beyond which they are counted, not written.
const LINES_PER_WINDOW: u32 = 20;

/// The window of [`LINES_PER_WINDOW`].
const WINDOW: Duration = Duration::from_secs(60);

/// An allowance of log lines for one source (a connection, or the accept loop's refusals): a
/// burst of 20 lines (`LINES_PER_WINDOW`) per minute, then one line saying the rest are
/// counted, and at the next window the count.
#[derive(Debug)]
pub struct LogBudget {
    /// What causes the lines, as the suppression notices name it ("this connection").
    source: &'static str,
    window_start: Instant,
    used: u32,
    suppressed: u64,
}

impl LogBudget {
    /// A full allowance for `source`.
    pub fn new(source: &'static str) -> Self {
        Self {
            source,
            window_start: Instant::now(),
            used: 0,
            suppressed: 0,
        }
    }

    /// Whether the next line may be written; says so in the log when lines start or stop
    /// being suppressed.
    pub fn allow(&mut self) -> bool {
        self.allow_at(Instant::now())
    }

    /// `allow` as of `now`.
    fn allow_at(&mut self, now: Instant) -> bool {
        if now.duration_since(self.window_start) >= WINDOW {
            if self.suppressed > 0 {
                tracing::warn!(
                    suppressed = self.suppressed,
                    "log lines of {} were suppressed (more than {LINES_PER_WINDOW} a minute)",
                    self.source
                );
            }
            *self = Self::new(self.source);
        }
        self.used = self.used.saturating_add(1);
        if self.used <= LINES_PER_WINDOW {
            return true;
        }
        if self.suppressed == 0 {
            tracing::warn!(
                "{} logs more than {LINES_PER_WINDOW} lines a minute; the rest of this minute's are counted, not written",
                self.source
            );
        }
        self.suppressed += 1;
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_text_is_cut_and_escaped() {
        assert_eq!(ClientText("panel-3").to_string(), "panel-3");
        assert_eq!(ClientText("a\nb\u{1b}").to_string(), "a\\nb\\u{1b}");
        let long = "é".repeat(1000);
        let shown = ClientText(&long).to_string();
        assert!(shown.starts_with(&"é".repeat(MAX_LOGGED_CHARS)));
        assert!(
            shown.ends_with(&format!("…(+{} bytes)", 2 * (1000 - MAX_LOGGED_CHARS))),
            "{shown}"
        );
        let thrown = format!("line 3: {}", "x".repeat(512 * 1024));
        let shown = MessageText(&thrown).to_string();
        assert!(shown.starts_with("line 3: xxx"), "{shown}");
        assert_eq!(
            shown,
            format!(
                "line 3: {}…(+{} bytes)",
                "x".repeat(MAX_LOGGED_MESSAGE_CHARS - 8),
                thrown.len() - MAX_LOGGED_MESSAGE_CHARS
            )
        );
    }

    #[test]
    fn a_connection_logs_a_burst_per_minute_then_is_counted() {
        let mut budget = LogBudget::new("this connection");
        let start = Instant::now();
        let allowed = (0..100).filter(|_| budget.allow()).count();
        assert_eq!(allowed, LINES_PER_WINDOW as usize);
        assert_eq!(budget.suppressed, 100 - u64::from(LINES_PER_WINDOW));
        assert!(budget.allow_at(start + WINDOW), "a new window");
        assert_eq!(budget.suppressed, 0);
    }
}
