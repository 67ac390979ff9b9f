//! Entry points for the fuzz targets in `crates/fuzz` (feature `fuzzing`; not part of the API).
//!
//! Each runs one parser on arbitrary input and checks what must hold whatever the input: no
//! panic (the fuzzer sees that), and the invariants the callers rely on (asserted here, so a
//! violation is a crash the fuzzer reports).

use crate::settings::{ModelSettings, SettingsDocument};
use crate::{atomic, auth, chat, dialect};

/// Tool names offered to the reply reader, as a chat turn with every category on would.
const OFFERED: &[&str] = &[
    "runtime_get_value",
    "runtime_search_uns",
    "runtime_get_active_alarms",
];

/// The chat and atomic query parsers. A parsed query always has a non-empty user message.
pub fn queries(text: &str) {
    if let Ok(query) = chat::ChatQuery::parse(text) {
        assert!(
            !query.user.trim().is_empty(),
            "a chat query with an empty user message"
        );
    }
    if let Ok(query) = atomic::AtomicQuery::parse(text) {
        assert!(
            !query.user.trim().is_empty(),
            "an atomic query with an empty user message"
        );
        let _ = query.messages();
    }
}

/// Both paths' readers of an LLM response body, streamed or not, success and error shapes
/// alike. Every tool call read has an id and a name; error quotes stay short.
pub fn llm_response(body: &[u8]) {
    let none = crate::secrets::Redactions::default();
    assert!(dialect::error_message(body, &none).chars().count() <= 1_000);
    // Streamed or not, the body is read as one response (server-sent events, NDJSON, JSON),
    // and read as it arrives, in pieces, it reads the same, its text handed out as it came.
    let whole = dialect::read_response(body);
    let cut = body
        .first()
        .map_or(0, |first| usize::from(*first) % (body.len() + 1));
    let mut reader = dialect::ResponseReader::default();
    let mut text = String::new();
    let in_pieces = reader
        .push(&body[..cut], &mut |piece| text.push_str(piece))
        .and_then(|()| reader.push(&body[cut..], &mut |piece| text.push_str(piece)))
        .and_then(|()| reader.finish(&mut |piece| text.push_str(piece)));
    assert_eq!(in_pieces, whole, "a body read in two pieces reads differently");
    let Ok(value) = whole else {
        return;
    };
    if !text.is_empty() {
        assert_eq!(
            value.content(),
            Some(text.as_str()),
            "the text handed out is not the answer"
        );
    }
    let _ = atomic::answer(value.clone());
    let mut next = 0u32;
    let mut new_id = || {
        next += 1;
        format!("call_{next}")
    };
    if let Ok(reply) = dialect::read_reply(value, OFFERED, &mut new_id) {
        for call in &reply.calls {
            assert!(!call.id.is_empty(), "a tool call without an id");
            assert!(!call.name.is_empty(), "a tool call without a name");
        }
    }
}

/// The `ModelSettings` column parser is total, and the admin editor never loses a document it
/// accepted.
pub fn model_settings(text: &str) {
    let settings = ModelSettings::parse(Some(text));
    assert!(!settings.timeout.is_zero(), "a zero budget");
    if let Ok(document) = SettingsDocument::from_column(Some(text)) {
        let again = SettingsDocument::from_column(Some(&document.to_json()));
        assert!(
            again.is_ok(),
            "a document that does not survive its own serialization"
        );
    }
}

/// The Authorization and Headers decoders: every header decoded has a valid name and value.
pub fn authorization(text: &str) {
    let decoded = [auth::decode_authorization(text), auth::decode_headers(text)];
    for (name, value) in decoded.into_iter().flatten().flatten() {
        assert!(
            reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_ok(),
            "an invalid header name: {name:?}"
        );
        assert!(
            reqwest::header::HeaderValue::from_str(&value).is_ok(),
            "an invalid header value"
        );
    }
}
