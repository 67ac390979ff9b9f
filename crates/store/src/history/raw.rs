//! Raw pages of a tag's history: every sample of a window, oldest first, a page at a time,
//! never thinned. A page ends at a cursor (the time of its last sample and how many samples at
//! that time it holds), so the next page starts exactly after it, even among samples that share
//! a millisecond.

use super::block::BlockSummary;
use super::{HistorySample, unix_millis};

/// Where a raw page ended: the next page holds the samples after the `skip`-th at `time_ms`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryCursor {
    /// The time of the last sample sent, unix milliseconds.
    pub time_ms: i64,
    /// How many samples at that time have been sent.
    pub skip: u64,
}

/// A page of a tag's samples, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct RawHistoryPage {
    /// The samples, at most the page's size.
    pub samples: Vec<HistorySample>,
    /// The cursor the page was asked after.
    after: Option<HistoryCursor>,
    /// Whether samples of the window follow the page's.
    more: bool,
}

impl RawHistoryPage {
    /// The cursor after the first `sent` samples of the page (all of them, or fewer when a
    /// reply had room for fewer), `None` when no sample of the window follows them.
    pub fn next(&self, sent: usize) -> Option<HistoryCursor> {
        let sent = sent.min(self.samples.len());
        if sent == self.samples.len() && !self.more {
            return None;
        }
        let Some(last) = sent.checked_sub(1).map(|index| &self.samples[index]) else {
            return self.after.or(Some(HistoryCursor {
                time_ms: i64::MIN,
                skip: 0,
            }));
        };
        let time_ms = unix_millis(last.time);
        let at_time = self.samples[..sent]
            .iter()
            .rev()
            .take_while(|sample| unix_millis(sample.time) == time_ms)
            .count() as u64;
        let before = match self.after {
            Some(after) if after.time_ms == time_ms => after.skip,
            _ => 0,
        };
        Some(HistoryCursor {
            time_ms,
            skip: before + at_time,
        })
    }
}

/// The blocks (by id) a page of `limit` samples after `after` reads: in order of first time,
/// those that end at or after the cursor, until their samples are enough, and every block
/// that starts before one of them ends (a late sample's), so every sample before the first
/// block left unread is among those read.
pub(crate) fn blocks_to_read(
    blocks: &[BlockSummary],
    after: Option<HistoryCursor>,
    limit: usize,
) -> Vec<i64> {
    let from = after.map_or(i64::MIN, |after| after.time_ms);
    let wanted = limit
        .saturating_add(1)
        .saturating_add(after.map_or(0, |after| usize::try_from(after.skip).unwrap_or(usize::MAX)));
    let mut chosen = Vec::new();
    let mut counted = 0usize;
    let mut latest_end: Option<i64> = None;
    for block in blocks.iter().filter(|block| block.last >= from) {
        let overlaps = latest_end.is_some_and(|end| block.first <= end);
        if counted >= wanted && !overlaps {
            break;
        }
        chosen.push(block.id);
        // A block that starts before the cursor holds samples the page skips.
        if block.first >= from {
            counted = counted.saturating_add(block.count);
        }
        latest_end = Some(latest_end.map_or(block.last, |end| end.max(block.last)));
    }
    chosen
}

/// The page of at most `limit` samples after `after` (inclusive window `from..=to`), given
/// the window's samples of the blocks read and the journal in time order (ties in the order
/// read), and where the first block left unread starts (`unread_from`).
pub(crate) fn page_of(
    ordered: Vec<HistorySample>,
    (from, to): (i64, i64),
    after: Option<HistoryCursor>,
    limit: usize,
    unread_from: Option<i64>,
) -> RawHistoryPage {
    let mut skip_at_cursor = after.map_or(0, |after| after.skip);
    let mut samples = Vec::with_capacity(limit.min(ordered.len()));
    let mut more = false;
    for sample in ordered {
        let time = unix_millis(sample.time);
        if time < from || time > to || unread_from.is_some_and(|unread| time >= unread) {
            continue;
        }
        if let Some(after) = after {
            if time < after.time_ms {
                continue;
            }
            if time == after.time_ms && skip_at_cursor > 0 {
                skip_at_cursor -= 1;
                continue;
            }
        }
        if samples.len() == limit {
            more = true;
            break;
        }
        samples.push(sample);
    }
    RawHistoryPage {
        samples,
        after,
        more: more || unread_from.is_some(),
    }
}

#[cfg(test)]
mod tests {
    use plant_model::{Quality, TagValue};

    use super::*;
    use crate::history::from_unix_millis;

    fn at(ms: i64, value: f64) -> HistorySample {
        HistorySample {
            time: from_unix_millis(ms),
            value: TagValue::Number(value),
            quality: Quality::GOOD,
        }
    }

    #[test]
    fn pages_continue_exactly_after_samples_that_share_a_millisecond() {
        let samples: Vec<HistorySample> = [(1, 1.0), (2, 2.0), (2, 3.0), (2, 4.0), (3, 5.0)]
            .iter()
            .map(|(ms, value)| at(*ms, *value))
            .collect();
        let mut after = None;
        let mut read = Vec::new();
        loop {
            let page = page_of(samples.clone(), (0, 10), after, 2, None);
            read.extend(page.samples.clone());
            match page.next(page.samples.len()) {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        assert_eq!(read, samples);
    }

    #[test]
    fn a_page_cut_short_continues_after_what_was_sent() {
        let samples: Vec<HistorySample> = (0..10).map(|ms| at(ms, ms as f64)).collect();
        let page = page_of(samples.clone(), (0, 10), None, 5, None);
        let next = page.next(3).expect("more follows");
        assert_eq!(next, HistoryCursor { time_ms: 2, skip: 1 });
        let rest = page_of(samples, (0, 10), Some(next), 100, None);
        assert_eq!(rest.samples[0], at(3, 3.0));
        assert_eq!(rest.next(rest.samples.len()), None);
    }
}
