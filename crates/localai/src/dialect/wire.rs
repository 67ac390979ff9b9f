//! A chat completion (and each chunk of a streamed one) as the reader reads it: the few fields
//! it uses, typed, each taken only when it has the JSON type the reader expects and skipped
//! otherwise (as `Value::as_str` and friends read a value), every other field skipped unread. Read straight from the body, this
//! spends a fraction of what building a `serde_json::Value` tree costs (a map, a hash and an
//! allocation per key), which was a fifth of the server's work in a tool-calling turn.
//!
//! Reading is as tolerant as it was over a `Value`: a field of another type is [`Loose::Other`],
//! never an error. The one input a struct reader refuses that a `Value` accepts is a repeated
//! key; `from_json` reads such a body through a `Value` (the last one wins, as before) with
//! the same types, so every body reads one way.

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{
    self, Deserialize, DeserializeOwned, Deserializer, IgnoredAny, IntoDeserializer, MapAccess, SeqAccess,
    Visitor,
};
use serde_json::Value;

/// A field as the body had it: absent, present with a type the reader does not read, or read.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) enum Loose<T> {
    /// Not in the body.
    #[default]
    Absent,
    /// In the body, but `null` or of another JSON type.
    Other,
    /// In the body with the expected type.
    Is(T),
}

impl<T> Loose<T> {
    /// The value, when it had the expected type.
    pub(crate) fn get(&self) -> Option<&T> {
        match self {
            Self::Is(value) => Some(value),
            Self::Absent | Self::Other => None,
        }
    }

    /// The value, when it had the expected type.
    pub(crate) fn into_option(self) -> Option<T> {
        match self {
            Self::Is(value) => Some(value),
            Self::Absent | Self::Other => None,
        }
    }

    /// Whether the body had the field at all, whatever its type.
    pub(crate) fn is_present(&self) -> bool {
        !matches!(self, Self::Absent)
    }
}

/// The JSON type a [`Loose`] field must have to be read. Scalars need no say: a scalar is
/// offered to the field's type alone, which takes it or not; an array or object must be read
/// into the type or skipped, as it is part of the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JsonType {
    Scalar,
    Array,
    Object,
    /// Any JSON value but `null` (a field kept whole as a `Value`).
    Any,
}

/// A type a [`Loose`] field holds: which JSON type it is read from.
pub(crate) trait Expected {
    const JSON_TYPE: JsonType;
}

impl Expected for String {
    const JSON_TYPE: JsonType = JsonType::Scalar;
}

impl Expected for u64 {
    const JSON_TYPE: JsonType = JsonType::Scalar;
}

impl<T> Expected for Vec<T> {
    const JSON_TYPE: JsonType = JsonType::Array;
}

impl Expected for Value {
    const JSON_TYPE: JsonType = JsonType::Any;
}

impl<T: DeserializeOwned + Expected> Loose<T> {
    /// A parsed value read as such a field. A `Value`'s objects hold each key once and a
    /// `Loose` field takes any JSON, so this cannot fail; were it to, the value is "another
    /// type".
    pub(crate) fn from_value(value: Value) -> Self {
        serde_json::from_value(value).unwrap_or(Self::Other)
    }
}

impl<'de, T: Deserialize<'de> + Expected> Deserialize<'de> for Loose<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(LooseVisitor(PhantomData))
    }
}

struct LooseVisitor<T>(PhantomData<T>);

impl<T> LooseVisitor<T> {
    /// A scalar read as `T` if `T` takes it: made from the scalar alone, so a refusal consumes
    /// nothing of the body and is simply another type.
    fn scalar<'de, S>(scalar: S) -> Loose<T>
    where
        T: Deserialize<'de>,
        S: IntoDeserializer<'de, de::value::Error>,
    {
        T::deserialize(scalar.into_deserializer()).map_or(Loose::Other, Loose::Is)
    }
}

impl<'de, T: Deserialize<'de> + Expected> Visitor<'de> for LooseVisitor<T> {
    type Value = Loose<T>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Loose::Other)
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Self::Value, E> {
        Ok(Self::scalar(value))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Self::Value, E> {
        Ok(Self::scalar(value))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Self::Value, E> {
        Ok(Self::scalar(value))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Self::Value, E> {
        Ok(Self::scalar(value))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Self::Value, E> {
        Ok(Self::scalar(value))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Loose::Other)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Loose::Other)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        if matches!(T::JSON_TYPE, JsonType::Array | JsonType::Any) {
            return T::deserialize(SeqAccessDeserializer::new(seq)).map(Loose::Is);
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Loose::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        if matches!(T::JSON_TYPE, JsonType::Object | JsonType::Any) {
            return T::deserialize(MapAccessDeserializer::new(map)).map(Loose::Is);
        }
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Loose::Other)
    }
}

/// Declares structs read from JSON objects: every field [`Loose`] or `Option<Value>`, absent
/// when missing, unknown keys skipped.
macro_rules! objects {
    ($($(#[$meta:meta])* $name:ident { $($(#[$field_meta:meta])* $field:ident: $type:ty,)* })*) => {$(
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Default, serde::Deserialize)]
        #[serde(default)]
        pub(crate) struct $name {
            $($(#[$field_meta])* pub(crate) $field: $type,)*
        }

        impl Expected for $name {
            const JSON_TYPE: JsonType = JsonType::Object;
        }
    )*};
}

objects! {
    /// A chat-completions response body (or the one a stream adds up to).
    Completion {
        choices: Loose<Vec<Loose<Choice>>>,
        usage: Loose<UsageObject>,
        /// Ollama's prompt tokens, when there is no `usage`.
        prompt_eval_count: Loose<u64>,
        /// Ollama's answer tokens, when there is no `usage`.
        eval_count: Loose<u64>,
    }

    /// One of `choices`.
    Choice {
        /// Present of any type counts as a message (one that is not an object says nothing).
        message: Loose<Message>,
        finish_reason: Loose<String>,
    }

    /// The assistant's message.
    Message {
        content: Loose<String>,
        tool_calls: Loose<Vec<Loose<NativeCall>>>,
    }

    /// One of `tool_calls`.
    NativeCall {
        id: Loose<String>,
        function: Loose<Function>,
    }

    /// A call's `function`.
    Function {
        name: Loose<String>,
        /// An object, a string holding one, or anything else (kept whole to be quoted).
        arguments: Option<Value>,
    }

    /// The OpenAI `usage` object.
    UsageObject {
        prompt_tokens: Loose<u64>,
        completion_tokens: Loose<u64>,
        prompt_tokens_details: Loose<TokenDetails>,
        completion_tokens_details: Loose<TokenDetails>,
    }

    /// `prompt_tokens_details` or `completion_tokens_details`.
    TokenDetails {
        cached_tokens: Loose<u64>,
        reasoning_tokens: Loose<u64>,
    }

    /// One chunk of a stream: an OpenAI `chat.completion.chunk`, an error event, or a line of
    /// Ollama's native stream.
    Chunk {
        /// `error` on vLLM's older error event.
        object: Loose<String>,
        /// The error event's text, or Ollama's message (an object read as a delta).
        message: Loose<Value>,
        error: Loose<Value>,
        /// Kept whole: only a non-empty object counts, and it is read when the stream ends.
        usage: Loose<Value>,
        prompt_eval_count: Loose<u64>,
        eval_count: Loose<u64>,
        choices: Loose<Vec<Loose<ChunkChoice>>>,
        /// Why Ollama's native stream stopped, on its last line.
        done_reason: Loose<String>,
    }

    /// One of a chunk's `choices`.
    ChunkChoice {
        finish_reason: Loose<String>,
        delta: Loose<Delta>,
    }

    /// A piece of the message: text and tool-call fragments.
    Delta {
        content: Loose<String>,
        tool_calls: Loose<Vec<Loose<Fragment>>>,
    }

    /// A piece of a tool call.
    Fragment {
        id: Loose<String>,
        index: Loose<u64>,
        function: Loose<FragmentFunction>,
    }

    /// A fragment's `function`.
    FragmentFunction {
        name: Loose<String>,
        /// A piece of the arguments' text, or the arguments whole as an object.
        arguments: Loose<Value>,
    }
}

/// A JSON document read as `T` (an object type): a body that is JSON but not an object reads as
/// `T`'s default. `Err` carries the JSON error when it is not one JSON document.
fn read_object<T>(text: &str) -> Result<T, serde_json::Error>
where
    T: DeserializeOwned + Expected + Default,
{
    match serde_json::from_str::<Loose<T>>(text) {
        Ok(read) => Ok(read.into_option().unwrap_or_default()),
        // A repeated key (the struct reader refuses one) or not JSON at all: a `Value` keeps
        // the last of repeated keys and says what is wrong with bad JSON.
        Err(_) => Ok(Loose::<T>::from_value(serde_json::from_str(text)?)
            .into_option()
            .unwrap_or_default()),
    }
}

impl Chunk {
    /// A stream's line (its `data:` payload) read as a chunk.
    pub(crate) fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        read_object(text)
    }
}

impl Completion {
    /// A body read as a completion. `Err` carries the JSON error when the body is not one JSON
    /// document.
    pub(crate) fn from_json(body: &[u8]) -> Result<Self, serde_json::Error> {
        // Checked as UTF-8 once, the strings need no check each (a fifth of the parse); a body
        // that is not UTF-8 is not JSON, as the `Value` parser says.
        match std::str::from_utf8(body) {
            Ok(text) => read_object(text),
            Err(_) => Ok(Self::from_value(serde_json::from_slice(body)?)),
        }
    }

    /// A parsed JSON value read as a completion (a value that is not an object reads as empty).
    pub(crate) fn from_value(value: Value) -> Self {
        Loose::<Self>::from_value(value).into_option().unwrap_or_default()
    }

    /// The first choice's message, as a completion's reader takes it: `Err` names what is
    /// missing.
    pub(crate) fn first_choice(&self) -> Result<(&Choice, Option<&Message>), &'static str> {
        let choice = self
            .choices
            .get()
            .and_then(|choices| choices.first())
            .ok_or("LLM response has no choices")?;
        let Loose::Is(choice) = choice else {
            return Err("LLM response choice has no message");
        };
        if !choice.message.is_present() {
            return Err("LLM response choice has no message");
        }
        Ok((choice, choice.message.get()))
    }

    /// [`first_choice`](Self::first_choice), taken out of the completion: the choice (its
    /// `message` left absent) and its message.
    pub(crate) fn into_first_choice(self) -> Result<(Choice, Option<Message>), &'static str> {
        self.first_choice()?;
        let mut choice = self
            .choices
            .into_option()
            .and_then(|choices| choices.into_iter().next())
            .and_then(Loose::into_option)
            .ok_or("LLM response has no choices")?;
        let message = std::mem::take(&mut choice.message).into_option();
        Ok((choice, message))
    }

    /// The first choice's answer text, if it has one.
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn content(&self) -> Option<&str> {
        let (_, message) = self.first_choice().ok()?;
        message?.content.get().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn both_ways(value: &Value) -> Completion {
        let from_text = Completion::from_json(value.to_string().as_bytes()).expect("reads");
        let from_value = Completion::from_value(value.clone());
        assert_eq!(from_text, from_value, "{value}");
        from_text
    }

    #[test]
    fn fields_of_another_type_are_skipped_never_an_error() {
        let odd = both_ways(&json!({
            "choices": [7, {"message": "text", "finish_reason": 3}],
            "usage": {"prompt_tokens": -1, "completion_tokens": 2.5, "prompt_tokens_details": [1],
                      "completion_tokens_details": {"reasoning_tokens": "4"}},
            "eval_count": {"nested": [1, {"deep": null}]},
            "unknown": {"a": [1, 2, {"b": "c"}]},
        }));
        let choices = odd.choices.get().expect("an array");
        assert_eq!(choices[0], Loose::Other);
        let Loose::Is(second) = &choices[1] else {
            panic!("an object");
        };
        assert_eq!(second.message, Loose::Other);
        assert_eq!(second.finish_reason, Loose::Other);
        let usage = odd.usage.get().expect("an object");
        assert_eq!(usage.prompt_tokens, Loose::Other);
        assert_eq!(usage.completion_tokens, Loose::Other);
        assert_eq!(usage.prompt_tokens_details, Loose::Other);
        assert_eq!(
            usage
                .completion_tokens_details
                .get()
                .expect("an object")
                .reasoning_tokens,
            Loose::Other
        );
        assert_eq!(odd.eval_count, Loose::Other);
        assert_eq!(odd.prompt_eval_count, Loose::Absent);
        assert_eq!(both_ways(&json!({"choices": null})).choices, Loose::Other);
    }

    #[test]
    fn a_repeated_key_keeps_the_last_as_a_value_does() {
        let body = br#"{"choices": [{"message": {"content": "first", "content": "last"}}], "choices": 5}"#;
        assert_eq!(Completion::from_json(body).expect("reads").choices, Loose::Other);
        let body = br#"{"choices": [{"message": {"content": "first", "content": "last"}}]}"#;
        let completion = Completion::from_json(body).expect("reads");
        let (_, message) = completion.first_choice().expect("a choice");
        assert_eq!(
            message
                .and_then(|message| message.content.get())
                .map(String::as_str),
            Some("last")
        );
    }

    #[test]
    fn escaped_text_and_arguments_of_any_shape_are_read() {
        let completion = both_ways(&json!({"choices": [{"message": {
            "content": "a \"quoted\" ✓\n",
            "tool_calls": [
                {"id": "c1", "function": {"name": "t", "arguments": "{\"tag\":\"P1\"}"}},
                {"function": {"name": "t", "arguments": {"tag": "P2"}}},
                {"function": {"name": "t", "arguments": null}},
                {"function": {"name": "t"}},
                "not a call",
            ]}, "finish_reason": "tool_calls"}]}));
        let (choice, message) = completion.first_choice().expect("a choice");
        assert_eq!(choice.finish_reason.get().map(String::as_str), Some("tool_calls"));
        let message = message.expect("an object");
        assert_eq!(
            message.content.get().map(String::as_str),
            Some("a \"quoted\" ✓\n")
        );
        let calls = message.tool_calls.get().expect("an array");
        let arguments: Vec<Option<Value>> = calls
            .iter()
            .map(|call| {
                call.get()
                    .and_then(|call| call.function.get())
                    .and_then(|f| f.arguments.clone())
            })
            .collect();
        assert_eq!(
            arguments,
            [
                Some(json!("{\"tag\":\"P1\"}")),
                Some(json!({"tag": "P2"})),
                None,
                None,
                None
            ]
        );
        assert_eq!(calls[4], Loose::Other);
    }

    #[test]
    fn what_is_missing_is_named() {
        for (body, missing) in [
            (json!({}), "LLM response has no choices"),
            (json!({"choices": []}), "LLM response has no choices"),
            (json!({"choices": {"0": {}}}), "LLM response has no choices"),
            (json!({"choices": [1]}), "LLM response choice has no message"),
            (json!({"choices": [{}]}), "LLM response choice has no message"),
        ] {
            assert_eq!(both_ways(&body).first_choice().err(), Some(missing), "{body}");
        }
        let null_message = both_ways(&json!({"choices": [{"message": null}]}));
        assert!(matches!(null_message.first_choice(), Ok((_, None))));
        assert!(Completion::from_json(b"{not json").is_err());
        assert_eq!(
            Completion::from_json(b"[1, 2]").expect("JSON"),
            Completion::default()
        );
    }
}
