//! What one connection may put in the audit trail: values and names cut to
//! [`MAX_AUDIT_TEXT_CHARS`], and refusals recorded at most [`REFUSED_ROWS_PER_MINUTE`] rows a
//! minute per connection. Past that a connection's refusals are counted, not recorded: one row
//! says the allowance is reached, and the first refusal of a later minute records one row with
//! the count. Accepted writes and acknowledgements are always recorded (nothing acts
//! unaudited); only what changed nothing is bounded, so a client cannot fill the disk with
//! refusals.

use std::time::{Duration, Instant};

/// The most characters of a value, target or outcome in one audit row.
pub(crate) const MAX_AUDIT_TEXT_CHARS: usize = 256;

/// The refused writes of one call recorded one row each; the rest in one row with their count.
pub(crate) const REFUSED_ROWS_PER_CALL: usize = 10;

/// Audit rows of refusals one connection may add in a minute.
pub(crate) const REFUSED_ROWS_PER_MINUTE: usize = 600;

const WINDOW: Duration = Duration::from_secs(60);

/// `text` cut to [`MAX_AUDIT_TEXT_CHARS`] characters, saying how much was cut.
pub(crate) fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_AUDIT_TEXT_CHARS) {
        None => text.to_owned(),
        Some((end, _)) => format!("{}…(+{} bytes)", &text[..end], text.len() - end),
    }
}

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

/// One connection's allowance of refusal rows.
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
    /// Takes `rows` rows of refusals (standing for `refusals` refused requests) at `now`.
    pub(crate) fn take(&mut self, rows: usize, refusals: u64, now: Instant) -> Allowed {
        if now.duration_since(self.window_start) >= WINDOW {
            self.window_start = now;
            self.rows = 0;
        }
        if self.rows >= REFUSED_ROWS_PER_MINUTE {
            self.counted += refusals;
            return Allowed::Count;
        }
        self.rows += rows;
        if self.rows >= REFUSED_ROWS_PER_MINUTE {
            return Allowed::RecordLast;
        }
        Allowed::Record {
            counted: std::mem::take(&mut self.counted),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_at_a_character_and_says_how_much() {
        assert_eq!(cut("short"), "short");
        let long = "é".repeat(300);
        let cut_text = cut(&long);
        assert!(cut_text.starts_with(&"é".repeat(256)));
        assert!(cut_text.ends_with("…(+88 bytes)"), "{cut_text}");
    }

    #[test]
    fn past_the_allowance_refusals_are_counted_then_reported_in_a_later_minute() {
        let start = Instant::now();
        let mut allowance = AuditAllowance {
            window_start: start,
            rows: 0,
            counted: 0,
        };
        for _ in 0..REFUSED_ROWS_PER_MINUTE - 1 {
            assert_eq!(allowance.take(1, 1, start), Allowed::Record { counted: 0 });
        }
        assert_eq!(allowance.take(1, 1, start), Allowed::RecordLast);
        assert_eq!(allowance.take(1, 5, start), Allowed::Count);
        assert_eq!(allowance.take(1, 7, start), Allowed::Count);
        let later = start + WINDOW;
        assert_eq!(allowance.take(1, 1, later), Allowed::Record { counted: 12 });
        assert_eq!(allowance.take(1, 1, later), Allowed::Record { counted: 0 });
    }
}
