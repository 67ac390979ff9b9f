//! The transcript cache: one chat session per client connection, keyed by the connection's
//! server-made GUID, and the truncation that keeps a history valid for every server.
//!
//! A session's turns run one at a time in arrival order (a fair async mutex); different
//! sessions never share anything. A session is removed, and its turn in flight cancelled, when
//! its connection closes.

use std::sync::Arc;

use dashmap::DashMap;
use serde_json::Value;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// What a session remembers between turns.
#[derive(Debug, Default)]
pub(crate) struct Transcript {
    /// The user the transcript belongs to; a turn by another user on the same connection
    /// clears it first (the lazy login reset).
    pub(crate) user: Option<Arc<str>>,
    /// The messages after the system prompt (which is added fresh to every POST).
    pub(crate) messages: Vec<Value>,
}

/// One connection's chat session.
#[derive(Debug, Default)]
pub(crate) struct Session {
    /// Held for the whole of a turn, so turns of one session run in arrival order.
    pub(crate) transcript: Mutex<Transcript>,
    /// Cancelled when the connection closes: the turn in flight stops spending LLM time.
    pub(crate) closed: CancellationToken,
}

/// Every live session of a solution.
#[derive(Debug, Default)]
pub(crate) struct TranscriptCache {
    sessions: DashMap<Uuid, Arc<Session>>,
}

impl TranscriptCache {
    /// The session of a connection, created on its first turn.
    pub(crate) fn session(&self, client_guid: Uuid) -> Arc<Session> {
        Arc::clone(&self.sessions.entry(client_guid).or_default())
    }

    /// Removes a connection's session and cancels its turn in flight.
    pub(crate) fn remove(&self, client_guid: Uuid) {
        if let Some((_, session)) = self.sessions.remove(&client_guid) {
            session.closed.cancel();
        }
    }

    /// How many sessions exist.
    pub(crate) fn len(&self) -> usize {
        self.sessions.len()
    }
}

/// Drops the oldest whole turns until at most `max` messages remain. A turn starts at a
/// `user` message, so the kept history starts with one, and every assistant message with
/// `tool_calls` keeps the `tool` messages answering it (servers answer 400 to a history that
/// breaks either rule). The newest turn is kept whole even when it alone is longer than `max`.
pub(crate) fn truncate(messages: &mut Vec<Value>, max: usize) {
    if messages.len() <= max {
        return;
    }
    let earliest = messages.len() - max;
    let is_turn_start = |index: &usize| messages[*index]["role"] == "user";
    let cut = (earliest..messages.len())
        .find(is_turn_start)
        .or_else(|| (0..earliest).rev().find(is_turn_start))
        .unwrap_or(0);
    messages.drain(..cut);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// A turn: the user message, `rounds` tool rounds of `calls` calls each, and an answer.
    fn turn(index: usize, rounds: &[usize]) -> Vec<Value> {
        let mut messages = vec![json!({"role": "user", "content": format!("question {index}")})];
        for (round, &calls) in rounds.iter().enumerate() {
            let ids: Vec<String> = (0..calls)
                .map(|call| format!("t{index}r{round}c{call}"))
                .collect();
            messages.push(
                json!({"role": "assistant", "content": null, "tool_calls": ids.iter().map(|id| json!({
                "id": id, "type": "function", "function": {"name": "runtime_get_value", "arguments": "{}"}
            })).collect::<Vec<_>>()}),
            );
            for id in ids {
                messages.push(json!({"role": "tool", "tool_call_id": id, "content": "{}"}));
            }
        }
        messages.push(json!({"role": "assistant", "content": format!("answer {index}")}));
        messages
    }

    /// The rules servers enforce: starts with a user message; every tool message answers a
    /// call of the assistant message before it; every call is answered.
    fn assert_valid(messages: &[Value]) -> Result<(), TestCaseError> {
        if let Some(first) = messages.first() {
            prop_assert_eq!(&first["role"], "user");
        }
        let mut pending: Vec<String> = Vec::new();
        for message in messages {
            match message["role"].as_str() {
                Some("tool") => {
                    let id = message["tool_call_id"].as_str().unwrap_or_default().to_owned();
                    prop_assert!(pending.contains(&id), "tool message {} answers nothing", id);
                    pending.retain(|pending| pending != &id);
                }
                role => {
                    prop_assert!(
                        pending.is_empty(),
                        "calls {:?} unanswered before {:?}",
                        pending,
                        role
                    );
                    if let Some(calls) = message["tool_calls"].as_array() {
                        pending = calls
                            .iter()
                            .filter_map(|call| call["id"].as_str().map(str::to_owned))
                            .collect();
                    }
                }
            }
        }
        prop_assert!(pending.is_empty());
        Ok(())
    }

    proptest! {
        #[test]
        fn truncated_histories_stay_valid_and_bounded(
            turns in proptest::collection::vec(proptest::collection::vec(1_usize..4, 0..4), 1..12),
            max in 2_usize..60,
        ) {
            let mut messages: Vec<Value> = turns.iter().enumerate().flat_map(|(i, rounds)| turn(i, rounds)).collect();
            let last_turn = turn(turns.len() - 1, &turns[turns.len() - 1]);
            let before = messages.len();
            truncate(&mut messages, max);
            assert_valid(&messages)?;
            prop_assert!(messages.len() <= max.max(last_turn.len()));
            prop_assert!(messages.ends_with(&last_turn), "the newest turn is kept whole");
            if before <= max {
                prop_assert_eq!(messages.len(), before, "nothing dropped when it fits");
            }
        }
    }

    #[test]
    fn sessions_are_per_connection_and_removal_cancels() {
        let cache = TranscriptCache::default();
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let first = cache.session(a);
        assert!(Arc::ptr_eq(&first, &cache.session(a)));
        assert!(!Arc::ptr_eq(&first, &cache.session(b)));
        cache.remove(a);
        assert!(first.closed.is_cancelled());
        assert_eq!(cache.len(), 1);
    }
}
