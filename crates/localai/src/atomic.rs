//! The atomic path (`TK.AIExecute`): one stateless POST for server scripts.
//!
//! Gate 1, parse the query, read fresh settings, resolve secrets and `{Tag.X}`, decode the
//! auth, build one `messages` array, POST once within the wall-clock budget, read
//! `choices[0].message.content`. No tools, no transcript, no hooks, no retry. The execution,
//! the HTTP POST included, belongs to this path alone: the chat path has its own, so the two
//! run independently (the spec locks that). What the server answers is read through
//! [`crate::dialect`], as the chat path reads it, so the two never word it differently.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ai_envelope::Envelope;
use serde_json::{Value, json};

use crate::auth::{decode_authorization, decode_headers};
use crate::dialect::{
    Completion, MAX_RESPONSE_BYTES, Usage, read_reply, read_response, reqwest_failure, status_warning,
    too_large, transport_warning, unreadable_warning,
};
use crate::expressions::resolve_tag_expressions;
use crate::secrets::{Redactions, resolve_secrets};
use crate::settings::{ModelSettings, SettingsParser};
use crate::{Solution, gates};

/// A script's query: plain text, or `{"system", "user", "context", "metadata"}`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AtomicQuery {
    /// Sent as the first `system` message.
    pub(crate) system: Option<String>,
    /// Sent as the `user` message. Required.
    pub(crate) user: String,
    /// Sent as a second `system` message, `Context:` followed by the text (or the JSON).
    pub(crate) context: Option<String>,
    /// Never sent to the model: logged with the call, for the caller's correlation.
    pub(crate) metadata: Option<Value>,
}

impl AtomicQuery {
    /// Parses a query. Text that is not a JSON object is the user message itself.
    pub(crate) fn parse(query: &str) -> Result<Self, String> {
        let object = match serde_json::from_str::<Value>(query) {
            Ok(Value::Object(object)) => object,
            _ if query.trim().is_empty() => return Err("the query is empty".to_owned()),
            _ => {
                return Ok(Self {
                    system: None,
                    user: query.to_owned(),
                    context: None,
                    metadata: None,
                });
            }
        };
        let text = |key: &str| -> Result<Option<String>, String> {
            match object.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(text)) if text.trim().is_empty() => Ok(None),
                Some(Value::String(text)) => Ok(Some(text.clone())),
                Some(_) => Err(format!("'{key}' must be a string")),
            }
        };
        let user = text("user")?.ok_or("the query object has no 'user' text")?;
        let context = match object.get("context") {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) if text.trim().is_empty() => None,
            Some(Value::String(text)) => Some(text.clone()),
            Some(other) => Some(other.to_string()),
        };
        Ok(Self {
            system: text("system")?,
            user,
            context,
            metadata: object.get("metadata").filter(|value| !value.is_null()).cloned(),
        })
    }

    pub(crate) fn messages(&self) -> Vec<Value> {
        let mut messages = Vec::with_capacity(3);
        if let Some(system) = &self.system {
            messages.push(json!({"role": "system", "content": system}));
        }
        if let Some(context) = &self.context {
            messages.push(json!({"role": "system", "content": format!("Context:\n{context}")}));
        }
        messages.push(json!({"role": "user", "content": self.user}));
        messages
    }
}

/// The endpoint after resolution: what is POSTed where, and the URL as configured (tokens
/// unresolved) for warnings.
struct Endpoint {
    url: reqwest::Url,
    shown_url: String,
    headers: Vec<(String, String)>,
    /// The secrets it was resolved with, scrubbed from what a server sends back before any of
    /// it is cut to an excerpt.
    redactions: Redactions,
}

/// The atomic path of one solution.
#[derive(Debug)]
pub(crate) struct AtomicPath {
    solution: Arc<dyn Solution>,
    http: Result<reqwest::Client, String>,
    settings: SettingsParser,
}

impl AtomicPath {
    pub(crate) fn new(solution: Arc<dyn Solution>) -> Self {
        let http = reqwest::Client::builder()
            .pool_idle_timeout(Duration::from_secs(90))
            // A redirect is reported, never followed (`dialect::redirect_warning`).
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|error| format!("the HTTP client could not be built: {error}"));
        Self {
            solution,
            http,
            settings: SettingsParser::default(),
        }
    }

    pub(crate) async fn execute(&self, query: &str) -> Envelope {
        let row = match self.solution.settings().await {
            Ok(row) => row,
            Err(error) => {
                return Envelope::precondition_error(format!("could not read SolutionSettings: {error}"));
            }
        };
        if let Err(closed) = gates::model_enabled(&row) {
            return closed;
        }
        let query = match AtomicQuery::parse(query) {
            Ok(query) => query,
            Err(reason) => return Envelope::precondition_error(format!("malformed query: {reason}")),
        };
        if let Some(metadata) = &query.metadata {
            // The caller's own correlation data, cut so no query can flood the log.
            let metadata: String = metadata.to_string().chars().take(200).collect();
            tracing::debug!(%metadata, "atomic call");
        }
        let started = Instant::now();
        let settings = self.settings.settings(&row);
        let mut redactions = Redactions::default();
        let endpoint = match self.endpoint(&settings, &mut redactions).await {
            Ok(endpoint) => endpoint,
            Err(warning) => return Envelope::error(redactions.scrub(&warning), started.elapsed()),
        };
        let http = match &self.http {
            Ok(http) => http,
            Err(warning) => return Envelope::error(warning.clone(), started.elapsed()),
        };
        let body = json!({"model": settings.name, "messages": query.messages(), "stream": false});
        let budget = settings.timeout;
        tracing::debug!(url = %endpoint.shown_url, model = %settings.name, ?budget, "atomic POST");
        let outcome = tokio::time::timeout(budget, post(http, &endpoint, &body)).await;
        let usage = match &outcome {
            Ok(Ok(answer)) => answer.usage,
            _ => Usage::default(),
        };
        let envelope = match outcome {
            Err(_) => {
                crate::telemetry::budget_exhausted("atomic");
                Envelope::truncated(
                    "",
                    format!(
                        "LLM POST wall-clock budget ({}) exceeded.",
                        settings.timeout_label()
                    ),
                    started.elapsed().max(budget),
                )
            }
            Ok(Err(warning)) => Envelope::error(warning, started.elapsed()),
            Ok(Ok(answer)) => Envelope::ok(answer.text, started.elapsed()).with_warnings(answer.warnings),
        };
        crate::telemetry::operation_ended(
            "atomic",
            &settings.name,
            envelope.status.as_str(),
            started.elapsed(),
            (usage.prompt_tokens, usage.completion_tokens),
        );
        tracing::debug!(
            status = envelope.status.as_str(),
            latency_ms = envelope.latency_ms,
            prompt_tokens = usage.prompt_tokens,
            completion_tokens = usage.completion_tokens,
            cached_tokens = usage.cached_tokens,
            reasoning_tokens = usage.reasoning_tokens,
            "atomic call"
        );
        // A server (or the model) may echo a secret anywhere: the answer included.
        redactions.scrub_envelope(envelope)
    }

    /// Resolves secrets and tag expressions and decodes the auth. Errors are warnings that
    /// quote the configured URL, never a resolved value.
    async fn endpoint(
        &self,
        settings: &ModelSettings,
        redactions: &mut Redactions,
    ) -> Result<Endpoint, String> {
        let solution = self.solution.as_ref();
        let shown_url = settings.url.clone();
        let url = resolve_secrets(&settings.url, solution, redactions)
            .await
            .map_err(|e| format!("URL: {e}"))?;
        let url = resolve_tag_expressions(&url, solution).map_err(|e| format!("URL: {e}"))?;
        let url = reqwest::Url::parse(url.trim())
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https") && url.host().is_some())
            .ok_or_else(|| format!("invalid LLM endpoint URL ({shown_url}): expected an http(s) URL"))?;
        let authorization = resolve_secrets(&settings.authorization, solution, redactions)
            .await
            .map_err(|e| format!("Authorization: {e}"))?;
        let headers = resolve_secrets(&settings.headers, solution, redactions)
            .await
            .map_err(|e| format!("Headers: {e}"))?;
        let mut all = decode_headers(&headers).map_err(|e| e.to_string())?;
        all.extend(decode_authorization(&authorization).map_err(|e| e.to_string())?);
        redactions.remember_headers(&all);
        redactions.remember_url_credentials(&url);
        Ok(Endpoint {
            url,
            shown_url,
            headers: all,
            redactions: redactions.clone(),
        })
    }
}

/// One POST and the whole response body, then the answer. Errors are warnings.
async fn post(http: &reqwest::Client, endpoint: &Endpoint, body: &Value) -> Result<Answer, String> {
    let mut request = http
        .post(endpoint.url.clone())
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body.to_string());
    for (name, value) in &endpoint.headers {
        request = request.header(name.as_str(), value.as_str());
    }
    let shown = &endpoint.shown_url;
    let mut response = request
        .send()
        .await
        .map_err(|error| transport_warning(&reqwest_failure(&error), shown))?;
    let status = response.status();
    if status.is_redirection() {
        let location = response
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|value| value.to_str().ok());
        return Err(crate::dialect::redirect_warning(
            status.as_u16(),
            status.canonical_reason().unwrap_or(""),
            location,
            shown,
            &endpoint.redactions,
        ));
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|error| unreadable_warning(&reqwest_failure(&error), shown))?
    {
        if bytes.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(too_large(shown));
        }
        bytes.extend_from_slice(&chunk);
    }
    if !status.is_success() {
        return Err(status_warning(status, &bytes, shown, &endpoint.redactions));
    }
    answer(read_response(&bytes)?)
}

/// The answer of a chat-completions response, read as the chat path reads one (never a
/// reasoning field), plus the warning about why the model stopped, if any. The atomic path
/// offers no tools, so a reply that asks for some has no answer.
pub(crate) fn answer(value: Completion) -> Result<Answer, String> {
    let mut unnamed = 0_u32;
    let reply = read_reply(value, &[], &mut || {
        unnamed += 1;
        format!("call_{unnamed}")
    })?;
    if !reply.calls.is_empty() {
        return Err("the model asked for tool calls, but the atomic path offers no tools".to_owned());
    }
    let text = reply.content.ok_or("LLM response has no answer content")?;
    let warnings = reply.finish.warning().map(str::to_owned).into_iter().collect();
    Ok(Answer {
        text,
        warnings,
        usage: reply.usage,
    })
}

/// What one atomic call got: the answer, the warnings about it, and the tokens it cost.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Answer {
    text: String,
    warnings: Vec<String>,
    usage: Usage,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_the_user_message() {
        let query = AtomicQuery::parse("Translate 'pump' to German").expect("plain text");
        assert_eq!(query.user, "Translate 'pump' to German");
        assert_eq!(
            query.messages(),
            vec![json!({"role": "user", "content": "Translate 'pump' to German"})]
        );
        // JSON that is not an object is text too.
        assert_eq!(AtomicQuery::parse("[1, 2]").expect("text").user, "[1, 2]");
    }

    #[test]
    fn structured_query_builds_system_context_and_user_messages() {
        let query = AtomicQuery::parse(
            r#"{"system": "Be brief.", "user": "Summarise.", "context": {"Pump1.FlowRate": 84}, "metadata": {"script": "Shift"}}"#,
        )
        .expect("structured");
        assert_eq!(
            query.messages(),
            vec![
                json!({"role": "system", "content": "Be brief."}),
                json!({"role": "system", "content": "Context:\n{\"Pump1.FlowRate\":84}"}),
                json!({"role": "user", "content": "Summarise."}),
            ]
        );
        assert_eq!(query.metadata, Some(json!({"script": "Shift"})));
    }

    #[test]
    fn a_query_object_without_user_text_is_malformed() {
        for bad in [
            r#"{"system": "x"}"#,
            r#"{"user": ""}"#,
            r#"{"user": 5}"#,
            "",
            "   ",
        ] {
            assert!(AtomicQuery::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn reasoning_is_never_the_answer() {
        let value = json!({"choices": [{"message": {"role": "assistant", "content": "42",
            "reasoning": "thinking...", "reasoning_content": "more thinking"}, "finish_reason": "length"}]});
        let Answer {
            text,
            warnings,
            usage,
        } = answer(Completion::from_value(value)).expect("answer");
        assert!(usage.is_empty());
        assert_eq!(text, "42");
        assert_eq!(warnings.len(), 1);
        let only_reasoning =
            json!({"choices": [{"message": {"role": "assistant", "reasoning_content": "hmm"}}]});
        assert!(answer(Completion::from_value(only_reasoning)).is_err());
        assert!(answer(Completion::from_value(json!({"choices": []}))).is_err());
    }
}
