//! The tokens a model server says a reply cost: the OpenAI `usage` object (vLLM, llama.cpp
//! and the cloud APIs send it too, with cached and reasoning tokens where they count them) or
//! Ollama's `prompt_eval_count`/`eval_count`. Summed over the POSTs of a turn.

use super::wire::{Completion, Loose, TokenDetails};

/// Tokens of one reply, or of a turn's replies added up. A count a server did not give is 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Tokens of the request (`prompt_tokens`, Ollama's `prompt_eval_count`).
    pub prompt_tokens: u64,
    /// Tokens of the answer (`completion_tokens`, Ollama's `eval_count`).
    pub completion_tokens: u64,
    /// Prompt tokens served from the server's cache (`prompt_tokens_details.cached_tokens`).
    pub cached_tokens: u64,
    /// Completion tokens spent on reasoning (`completion_tokens_details.reasoning_tokens`).
    pub reasoning_tokens: u64,
}

impl Usage {
    /// The usage a response body reports; zeros where it reports none (`usage: {}`, `null`,
    /// missing, negative or not a number).
    pub(crate) fn of(response: &Completion) -> Self {
        let count = |value: &Loose<u64>| value.get().copied().unwrap_or(0);
        let detail = |details: &Loose<TokenDetails>, pick: fn(&TokenDetails) -> &Loose<u64>| {
            details.get().map_or(0, |details| count(pick(details)))
        };
        match response.usage.get() {
            Some(usage) => Self {
                prompt_tokens: count(&usage.prompt_tokens),
                completion_tokens: count(&usage.completion_tokens),
                cached_tokens: detail(&usage.prompt_tokens_details, |d| &d.cached_tokens),
                reasoning_tokens: detail(&usage.completion_tokens_details, |d| &d.reasoning_tokens),
            },
            None => Self {
                prompt_tokens: count(&response.prompt_eval_count),
                completion_tokens: count(&response.eval_count),
                ..Self::default()
            },
        }
    }

    /// Whether the server reported anything.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

impl std::ops::AddAssign for Usage {
    /// Saturating: the counts come from the server, which may send any number.
    fn add_assign(&mut self, other: Self) {
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.completion_tokens = self.completion_tokens.saturating_add(other.completion_tokens);
        self.cached_tokens = self.cached_tokens.saturating_add(other.cached_tokens);
        self.reasoning_tokens = self.reasoning_tokens.saturating_add(other.reasoning_tokens);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn of(response: Value) -> Usage {
        Usage::of(&Completion::from_value(response))
    }

    #[test]
    fn usage_is_read_in_every_dialect_and_added_up() {
        let openai = of(json!({"usage": {"prompt_tokens": 120, "completion_tokens": 30,
            "prompt_tokens_details": {"cached_tokens": 100}, "completion_tokens_details": {"reasoning_tokens": 12}}}));
        assert_eq!(
            openai,
            Usage {
                prompt_tokens: 120,
                completion_tokens: 30,
                cached_tokens: 100,
                reasoning_tokens: 12
            }
        );
        let ollama = of(json!({"model": "qwen2.5:7b", "prompt_eval_count": 26, "eval_count": 290}));
        assert_eq!((ollama.prompt_tokens, ollama.completion_tokens), (26, 290));
        for nothing in [
            json!({}),
            json!({"usage": {}}),
            json!({"usage": null}),
            json!({"usage": {"prompt_tokens": -1}}),
        ] {
            assert!(of(nothing.clone()).is_empty(), "{nothing}");
        }
        let mut turn = openai;
        turn += ollama;
        assert_eq!(turn.prompt_tokens, 146);
        turn += of(json!({"usage": {"prompt_tokens": u64::MAX}}));
        assert_eq!(turn.prompt_tokens, u64::MAX, "saturates, never wraps");
    }
}
