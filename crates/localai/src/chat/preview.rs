//! What of a model reply's text a panel may see while it arrives: everything the final
//! envelope would show, and nothing it would not. Text that may be a tool call written as
//! text (a reply opening with `{` or `[`, or from a `<tool_call>` tag on) waits for the reply's
//! end, and so does a tail that may be the start of a secret, so a secret the model (or a
//! proxy) repeats is scrubbed as the envelope's text is, never shown in two halves.

use crate::progress::ProgressFeed;
use crate::secrets::Redactions;

/// The tag that opens a tool call written as text.
const TOOL_CALL_TAG: &str = "<tool_call>";

/// The preview of one model reply (one POST).
#[derive(Debug)]
pub(crate) struct AnswerPreview<'a> {
    feed: &'a ProgressFeed,
    redactions: &'a Redactions,
    /// Whether tools were offered: only then can the text hold tool calls.
    tools_offered: bool,
    /// The reply's text so far, as the model sent it.
    text: String,
    /// How much of `text` has been shown.
    shown: usize,
    /// The text reached a `<tool_call>` tag: nothing more of it is shown.
    stopped: bool,
}

impl<'a> AnswerPreview<'a> {
    pub(crate) fn new(feed: &'a ProgressFeed, redactions: &'a Redactions, tools_offered: bool) -> Self {
        Self {
            feed,
            redactions,
            tools_offered,
            text: String::new(),
            shown: 0,
            stopped: false,
        }
    }

    /// Takes the next piece of the reply's text and shows what is settled.
    pub(crate) fn push(&mut self, piece: &str) {
        self.text.push_str(piece);
        if self.stopped {
            return;
        }
        let mut end = self.text.len();
        if self.tools_offered {
            let opening = self.text.trim_start();
            if opening.is_empty() || opening.starts_with(['{', '[']) {
                // Maybe a tool call as bare JSON: the reply's end tells.
                return;
            }
            let unseen = &self.text[self.shown..];
            if let Some(at) = unseen.find(TOOL_CALL_TAG) {
                end = self.shown + at;
                self.stopped = true;
            } else {
                // A tail that may become the tag waits.
                end -= (1..TOOL_CALL_TAG.len())
                    .rev()
                    .find(|len| unseen.ends_with(&TOOL_CALL_TAG[..*len]))
                    .unwrap_or(0);
            }
        }
        let end = self.redactions.settled_end(&self.text[..end], self.shown);
        self.show(end);
    }

    /// The reply has ended: when it is the answer (it asked for no tool), shows what was held
    /// back. `answer` is its text as read; a server that did not stream shows it whole here.
    pub(crate) fn finish(mut self, answer: Option<&str>) {
        let Some(answer) = answer else { return };
        if self.text.is_empty() {
            self.text = answer.to_owned();
        }
        if self.text == answer {
            self.show(self.text.len());
        }
    }

    fn show(&mut self, end: usize) {
        if end > self.shown {
            self.feed
                .text(&self.redactions.scrub(&self.text[self.shown..end]));
            self.shown = end;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::sync::Notify;

    use super::*;
    use crate::progress::{ChatProgress, progress_feed};

    /// What a preview shows of `pieces`, as one text per take after each piece, and at the
    /// end given `answer`.
    fn shown(
        pieces: &[&str],
        tools_offered: bool,
        redactions: &Redactions,
        answer: Option<&str>,
    ) -> Vec<String> {
        let (feed, tap) = progress_feed(Arc::new(Notify::new()));
        let mut preview = AnswerPreview::new(&feed, redactions, tools_offered);
        let mut takes = Vec::new();
        let take = |takes: &mut Vec<String>| {
            let text: String = tap
                .take(usize::MAX)
                .into_iter()
                .map(|event| match event {
                    ChatProgress::Text(text) => text,
                    other => panic!("{other:?}"),
                })
                .collect();
            takes.push(text);
        };
        for piece in pieces {
            preview.push(piece);
            take(&mut takes);
        }
        preview.finish(answer);
        take(&mut takes);
        takes
    }

    #[test]
    fn plain_text_shows_as_it_comes() {
        let none = Redactions::default();
        assert_eq!(
            shown(&["Pump 1 ", "is fine."], true, &none, Some("Pump 1 is fine.")),
            ["Pump 1 ", "is fine.", ""]
        );
        // Without streaming the whole answer shows at the end.
        assert_eq!(
            shown(&[], true, &none, Some("Pump 1 is fine.")),
            ["Pump 1 is fine."]
        );
    }

    #[test]
    fn text_that_may_be_a_tool_call_waits_for_the_end() {
        let none = Redactions::default();
        // Bare JSON: a call (the reply asked for tools) is never shown; JSON that was the
        // answer shows at the end.
        assert_eq!(shown(&["{\"name\":", " \"t\"}"], true, &none, None), ["", "", ""]);
        assert_eq!(
            shown(&["[1, ", "2]"], true, &none, Some("[1, 2]")),
            ["", "", "[1, 2]"]
        );
        // Without tools, JSON is just text.
        assert_eq!(shown(&["{1"], false, &none, Some("{1")), ["{1", ""]);
        // A tag: the text before it shows, nothing from it on, a tail that may become it waits.
        assert_eq!(
            shown(
                &["Let me check. <tool", "_call>{\"name\": \"t\"}</tool_call> ok"],
                true,
                &none,
                None
            ),
            ["Let me check. ", "", ""]
        );
        assert_eq!(
            shown(&["a <to", "y"], true, &none, Some("a <toy")),
            ["a ", "<toy", ""]
        );
    }

    #[test]
    fn a_secret_is_never_shown_in_two_halves() {
        let mut redactions = Redactions::default();
        redactions.remember_for_test("sk-live-1234", "ApiKey");
        let takes = shown(
            &["The key is sk-", "live-", "1234.", " Done"],
            true,
            &redactions,
            Some("The key is sk-live-1234. Done"),
        );
        assert_eq!(takes.concat(), "The key is /secret:ApiKey. Done");
        assert!(takes.iter().all(|take| !take.contains("sk-")), "{takes:?}");
    }
}
