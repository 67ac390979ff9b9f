//! The secret resolver: `/secret:<Name>` tokens in URL, Authorization and Headers are replaced
//! by the solution's secret values at call time, server-side only.
//!
//! Values never travel further than the outgoing request: every error names the secret, never
//! its value, and [`Redactions`] scrubs any value a remote server (or the model) echoes back,
//! in any form it was sent in, out of every envelope field before it reaches a caller or a log.

use std::fmt;
use std::sync::LazyLock;

use percent_encoding::{AsciiSet, CONTROLS, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};

pub use solution_settings::{SecretValue, TOKEN_PREFIX};

use crate::{Solution, SolutionError};

/// Finds [`TOKEN_PREFIX`]: built once, as every POST's URL and headers are searched for it
/// (`str::find` sets up a new searcher for each search).
static TOKEN_FINDER: LazyLock<memchr::memmem::Finder<'static>> =
    LazyLock::new(|| memchr::memmem::Finder::new(TOKEN_PREFIX));

/// Why a secret token could not be resolved. Never carries a value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SecretError {
    /// No secret of that name.
    #[error("secret '{0}' is not defined in the solution (tserver secrets PATH set {0})")]
    Missing(String),
    /// A `/secret:` token with no name after it.
    #[error("a '/secret:' token has no name after it")]
    EmptyName,
    /// The store failed.
    #[error("secret '{name}' could not be read: {reason}")]
    Unreadable {
        /// The secret's name.
        name: String,
        /// What failed (never the value).
        reason: String,
    },
}

/// The secret values resolved during one call, to scrub from anything that leaves the call:
/// every field of its envelope (answer text, tool trace, warnings) and every log line.
///
/// Each value is scrubbed in every form it was sent in: as it is, percent-encoded the ways a
/// URL carries it (a server echoing its request line shows `%20`, not a space), and inside the
/// base64 of Basic credentials (a 401 body echoing the `Authorization` header).
#[derive(Default, Clone)]
pub struct Redactions {
    /// The values as resolved, with their tokens.
    values: Vec<(String, String)>,
    /// (form, what replaces it), longest form first.
    forms: Vec<(String, String)>,
}

/// The shortest form scrubbed: a secret of one to three characters would rewrite ordinary
/// words of every answer, and is no secret.
const MIN_SCRUBBED_LEN: usize = 4;

impl fmt::Debug for Redactions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Redactions({} values, {} forms)",
            self.values.len(),
            self.forms.len()
        )
    }
}

/// What a URL encodes in a query (the WHATWG query set, plus `'` for special schemes).
const QUERY: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'<')
    .add(b'>')
    .add(b'\'');
/// What a URL encodes in a path segment.
const PATH: &AsciiSet = &QUERY.add(b'`').add(b'?').add(b'{').add(b'}');
/// What a URL encodes in its user info (`user:password@`).
const USERINFO: &AsciiSet = &PATH
    .add(b'/')
    .add(b':')
    .add(b';')
    .add(b'=')
    .add(b'@')
    .add(b'[')
    .add(b'\\')
    .add(b']')
    .add(b'^')
    .add(b'|');

impl Redactions {
    /// Whether nothing was resolved (then scrubbing is a copy).
    pub fn is_empty(&self) -> bool {
        self.forms.is_empty()
    }

    /// Replaces every form of every resolved secret value in `text` by its token.
    pub fn scrub(&self, text: &str) -> String {
        let mut scrubbed = text.to_owned();
        for (form, token) in &self.forms {
            if scrubbed.contains(form.as_str()) {
                scrubbed = scrubbed.replace(form.as_str(), token);
            }
        }
        scrubbed
    }

    /// Scrubs a JSON value in place: every string, and every object key, at any depth.
    pub fn scrub_value(&self, value: &mut serde_json::Value) {
        use serde_json::Value;
        if self.is_empty() {
            return;
        }
        match value {
            Value::String(text) => *text = self.scrub(text),
            Value::Array(items) => items.iter_mut().for_each(|item| self.scrub_value(item)),
            Value::Object(object) => {
                let scrubbed: serde_json::Map<String, Value> = std::mem::take(object)
                    .into_iter()
                    .map(|(key, mut item)| {
                        self.scrub_value(&mut item);
                        (self.scrub(&key), item)
                    })
                    .collect();
                *object = scrubbed;
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// Scrubs every field of an envelope that can carry text: the answer, each trace entry's
    /// name, arguments and result, and the warnings.
    pub fn scrub_envelope(&self, mut envelope: ai_envelope::Envelope) -> ai_envelope::Envelope {
        if self.is_empty() {
            return envelope;
        }
        envelope.text = self.scrub(&envelope.text);
        for entry in &mut envelope.tool_trace {
            entry.name = self.scrub(&entry.name);
            self.scrub_value(&mut entry.args);
            self.scrub_value(&mut entry.result);
        }
        for warning in &mut envelope.warnings {
            *warning = self.scrub(warning);
        }
        envelope
    }

    /// Where text arriving piece by piece can be cut now and shown (scrubbed), counting from
    /// `from` (what was shown already): before any tail that begins a secret's form, which
    /// more text could complete, and never inside a whole form, which scrubbing the pieces
    /// apart would miss. The rest waits for more text, or for the end.
    pub(crate) fn settled_end(&self, text: &str, from: usize) -> usize {
        let bytes = text.as_bytes();
        let mut end = bytes.len();
        let Some(longest) = self.forms.first().map(|(form, _)| form.len()) else {
            return end;
        };
        // Forms are UTF-8, so a byte match starts on a character boundary.
        for at in bytes.len().saturating_sub(longest - 1).max(from)..bytes.len() {
            let tail = &bytes[at..];
            if self
                .forms
                .iter()
                .any(|(form, _)| form.as_bytes().starts_with(tail))
            {
                end = at;
                break;
            }
        }
        'settle: loop {
            for (form, _) in &self.forms {
                let form = form.as_bytes();
                let low = end.saturating_sub(form.len() - 1).max(from);
                let high = (end + form.len() - 1).min(bytes.len());
                // Every match in this window starts before `end` and ends after it.
                if let Some(found) = bytes[low..high]
                    .windows(form.len())
                    .position(|window| window == form)
                {
                    end = low + found;
                    continue 'settle;
                }
            }
            return end;
        }
    }

    /// Remembers what the decoded request headers carry of the resolved secrets: a header
    /// value cut from a secret that held a whole line (`CustomAuth` + `/secret:HeaderLine`),
    /// and the base64 of Basic credentials holding a secret, so an echo of either is scrubbed.
    pub fn remember_headers(&mut self, headers: &[(String, String)]) {
        for (_, value) in headers {
            if let Some(encoded) = value.strip_prefix("Basic ") {
                self.remember_basic(encoded);
            } else if let Some(token) = self.token_containing(value) {
                self.remember_form(value, &token);
            }
        }
    }

    /// Remembers the Basic credentials an HTTP client makes of a URL's user info (its
    /// percent-decoded user and password), when they hold a resolved secret.
    pub fn remember_url_credentials(&mut self, url: &reqwest::Url) {
        use base64::Engine;
        if url.username().is_empty() && url.password().is_none() {
            return;
        }
        let decode = |text: &str| percent_decode_str(text).decode_utf8_lossy().into_owned();
        let credentials = format!(
            "{}:{}",
            decode(url.username()),
            url.password().map(decode).unwrap_or_default()
        );
        self.remember_basic(&base64::engine::general_purpose::STANDARD.encode(credentials));
    }

    /// Remembers `encoded` (base64 of `user:password`) when what it encodes holds a secret.
    fn remember_basic(&mut self, encoded: &str) {
        use base64::Engine;
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(encoded) else {
            return;
        };
        let decoded = String::from_utf8_lossy(&decoded);
        let token = self
            .values
            .iter()
            .find(|(value, _)| value.len() >= MIN_SCRUBBED_LEN && decoded.contains(value.trim()))
            .map(|(_, token)| token.clone());
        if let Some(token) = token {
            self.add(
                encoded.to_owned(),
                format!("<BasicAuth credentials with {token}>"),
            );
        }
    }

    /// The token of a resolved secret that contains `part` (a piece cut from it), if any.
    fn token_containing(&self, part: &str) -> Option<String> {
        if part.len() < MIN_SCRUBBED_LEN {
            return None;
        }
        self.values
            .iter()
            .find(|(value, _)| value.contains(part))
            .map(|(_, token)| token.clone())
    }

    /// Remembers `value` as the secret `name` resolved to, for tests outside this module.
    #[cfg(test)]
    pub(crate) fn remember_for_test(&mut self, value: &str, name: &str) {
        self.remember(value, name);
    }

    fn remember(&mut self, value: &str, name: &str) {
        let token = format!("{TOKEN_PREFIX}{name}");
        if !self.values.iter().any(|(known, _)| known == value) {
            self.values.push((value.to_owned(), token.clone()));
        }
        self.remember_form(value, &token);
        // Headers are sent trimmed.
        self.remember_form(value.trim(), &token);
    }

    /// Remembers `value` as it is and in each percent-encoding a URL gives it.
    fn remember_form(&mut self, value: &str, token: &str) {
        let forms = [
            value.to_owned(),
            utf8_percent_encode(value, NON_ALPHANUMERIC).to_string(),
            utf8_percent_encode(value, QUERY).to_string(),
            utf8_percent_encode(value, PATH).to_string(),
            utf8_percent_encode(value, USERINFO).to_string(),
        ];
        for form in forms {
            self.add(form, token.to_owned());
        }
    }

    fn add(&mut self, form: String, token: String) {
        if form.len() < MIN_SCRUBBED_LEN || self.forms.iter().any(|(known, _)| *known == form) {
            return;
        }
        self.forms.push((form, token));
        // Longest first, so a form containing another is replaced whole.
        self.forms.sort_by_key(|(form, _)| std::cmp::Reverse(form.len()));
    }
}

/// Whether a character may be part of a secret name.
fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
}

/// Resolves every `/secret:<Name>` token in `text`, remembering the values in `redactions`.
pub async fn resolve_secrets(
    text: &str,
    solution: &dyn Solution,
    redactions: &mut Redactions,
) -> Result<String, SecretError> {
    let mut resolved = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = TOKEN_FINDER.find(rest.as_bytes()) {
        resolved.push_str(&rest[..start]);
        let after = &rest[start + TOKEN_PREFIX.len()..];
        let name_len = after.find(|c: char| !is_name_char(c)).unwrap_or(after.len());
        let name = &after[..name_len];
        if name.is_empty() {
            return Err(SecretError::EmptyName);
        }
        let value = match solution.secret(name).await {
            Ok(Some(value)) => value,
            Ok(None) => return Err(SecretError::Missing(name.to_owned())),
            Err(SolutionError(reason)) => {
                return Err(SecretError::Unreadable {
                    name: name.to_owned(),
                    reason,
                });
            }
        };
        redactions.remember(value.expose(), name);
        resolved.push_str(value.expose());
        rest = &after[name_len..];
    }
    resolved.push_str(rest);
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct OneSecret;

    impl Solution for OneSecret {
        fn settings(&self) -> crate::StoreRead<crate::SettingsRow> {
            crate::store_read_ready(Ok(crate::SettingsRow::default()))
        }
        fn secret(&self, name: &str) -> crate::StoreRead<Option<SecretValue>> {
            crate::store_read_ready(Ok(match name {
                "Key" => Some(SecretValue::new("sk ü/x-1".to_owned())),
                "Line" => Some(SecretValue::new("X-Api-Key:  line-secret-77 ".to_owned())),
                "Pin" => Some(SecretValue::new("42".to_owned())),
                "Pass" => Some(SecretValue::new("p@ss wörd-9".to_owned())),
                _ => None,
            }))
        }
        fn tag_text(&self, _name: &str) -> Option<String> {
            None
        }
        fn tools(&self) -> &crate::tools::ToolCatalog {
            unreachable!("not used")
        }
    }

    /// `resolve_secrets` over [`OneSecret`], whose reads answer at once.
    fn resolve_at_once(text: &str, redactions: &mut Redactions) -> Result<String, SecretError> {
        use futures::FutureExt;
        resolve_secrets(text, &OneSecret, redactions)
            .now_or_never()
            .expect("an in-memory store answers at once")
    }

    #[test]
    fn every_form_a_secret_was_sent_in_is_scrubbed_from_every_envelope_field() {
        let mut redactions = Redactions::default();
        let auth = resolve_at_once("BasicAuth\npanel\n/secret:Key", &mut redactions).expect("resolves");
        let headers = crate::auth::decode_authorization(&auth).expect("decodes");
        redactions.remember_headers(&headers);
        let basic = headers[0].1.strip_prefix("Basic ").expect("basic").to_owned();
        let leaks = [
            "sk ü/x-1".to_owned(),
            "sk%20%C3%BC/x-1".to_owned(),
            "sk%20%C3%BC%2Fx%2D1".to_owned(),
            basic.clone(),
        ];
        let mut envelope = ai_envelope::Envelope::ok(
            format!("key {} and {}", leaks[0], leaks[1]),
            std::time::Duration::ZERO,
        )
        .with_warnings([format!("401: bad header Basic {basic} for /v1?k={}", leaks[2])]);
        envelope.tool_trace.push(ai_envelope::ToolTraceEntry::new(
            leaks[0].clone(),
            json!({"tag": leaks[0], leaks[1].clone(): [leaks[2]]}),
            json!({"error": {"message": format!("no tag {}", leaks[0])}}),
            ai_envelope::ToolStatus::Error,
            std::time::SystemTime::now(),
            std::time::Duration::ZERO,
        ));
        let json = redactions.scrub_envelope(envelope).to_json();
        for leak in &leaks {
            assert!(!json.contains(leak.as_str()), "{leak} in {json}");
        }
        assert!(json.contains("/secret:Key"), "{json}");
        assert!(
            json.contains("<BasicAuth credentials with /secret:Key>"),
            "{json}"
        );
    }

    #[test]
    fn text_shown_piece_by_piece_never_splits_a_secret() {
        let mut redactions = Redactions::default();
        redactions.remember("sk-live-1234", "ApiKey");
        // Cut before a tail that may become the secret, and before a whole one across the end.
        assert_eq!(redactions.settled_end("Your key is sk-li", 0), 12);
        assert_eq!(redactions.settled_end("Your key is s", 0), 12);
        assert_eq!(redactions.settled_end("Your key is x", 0), 13);
        assert_eq!(redactions.settled_end("a sk-live-1234 b", 0), 16);
        assert_eq!(Redactions::default().settled_end("sk-li", 0), 5);
        // Pieces cut at every point and shown as they settle read as the whole text scrubbed.
        let text = "key sk-live-1234, again sk-live-1234 and sk-live-12 end";
        for step in 1..text.len() {
            let (mut shown, mut from, mut upto) = (String::new(), 0, 0);
            while upto < text.len() {
                upto = (upto + step).min(text.len());
                while !text.is_char_boundary(upto) {
                    upto += 1;
                }
                let end = redactions.settled_end(&text[..upto], from);
                shown.push_str(&redactions.scrub(&text[from..end]));
                from = end;
            }
            shown.push_str(&redactions.scrub(&text[from..]));
            assert_eq!(shown, redactions.scrub(text), "step {step}");
        }
    }

    #[test]
    fn header_lines_user_info_and_short_values_are_handled() {
        use base64::Engine;
        let mut redactions = Redactions::default();
        // A secret holding a whole header line: the value sent is what a server echoes.
        let auth = resolve_at_once("CustomAuth\n/secret:Line", &mut redactions).expect("resolves");
        redactions.remember_headers(&crate::auth::decode_authorization(&auth).expect("decodes"));
        assert_eq!(
            redactions.scrub("got line-secret-77, bad"),
            "got /secret:Line, bad"
        );
        // A secret in the URL's user info, sent as Basic credentials by the HTTP client.
        let url = resolve_at_once("http://panel:/secret:Pass@gpu-box/v1", &mut redactions).expect("resolves");
        let url = reqwest::Url::parse(&url).expect("a URL");
        redactions.remember_url_credentials(&url);
        let basic = base64::engine::general_purpose::STANDARD.encode("panel:p@ss wörd-9");
        assert!(!redactions.scrub(&format!("Basic {basic}")).contains(&basic));
        // The URL as sent carries the password in its user-info encoding.
        assert!(url.as_str().contains("p%40ss%20w%C3%B6rd-9"), "{url}");
        assert!(
            !redactions.scrub(url.as_str()).contains("rd-9"),
            "{}",
            redactions.scrub(url.as_str())
        );
        // A two-character secret is no secret, and scrubbing it would mangle every answer.
        resolve_at_once("/secret:Pin", &mut redactions).expect("resolves");
        assert_eq!(redactions.scrub("42 pumps"), "42 pumps");
    }
}
