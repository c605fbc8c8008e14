//! Gemini's stream chunk as serde reads it: the reference reading of one
//! `GenerateContentResponse`.
//!
//! These derived types define what a chunk means; the fast path in [`super::flat`] takes the
//! usual chunk without them and must read it the same way (a property test holds it to that).
//! Keeping them apart leaves the behaviour-defining reading a short listing of its own.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer};
use serde_json::Value;

#[cfg(doc)]
use super::flat::Flat;

/// One streamed `GenerateContentResponse` (or an error object), as serde reads it. This
/// is the reference reading: [`Flat::read_in_place`] takes the usual chunk faster, and
/// everything it leaves goes through here.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Chunk<'a> {
    #[serde(default, borrow)]
    pub(super) candidates: Vec<Candidate<'a>>,
    #[serde(default)]
    pub(super) usage_metadata: Option<UsageMetadata>,
    #[serde(default, borrow, deserialize_with = "borrowed")]
    pub(super) model_version: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "borrowed")]
    pub(super) response_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(super) prompt_feedback: Option<PromptFeedback<'a>>,
    #[serde(default, borrow)]
    pub(super) error: Option<WireError<'a>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Candidate<'a> {
    #[serde(default, borrow)]
    pub(super) content: Option<WireContent<'a>>,
    #[serde(default, borrow, deserialize_with = "borrowed")]
    pub(super) finish_reason: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "borrowed")]
    pub(super) finish_message: Option<Cow<'a, str>>,
}

#[derive(Debug, Deserialize)]
pub(super) struct WireContent<'a> {
    #[serde(default, borrow)]
    pub(super) parts: Vec<Part<'a>>,
}

#[derive(Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Part<'a> {
    #[serde(default, borrow, deserialize_with = "borrowed")]
    pub(super) text: Option<Cow<'a, str>>,
    #[serde(default)]
    pub(super) thought: bool,
    #[serde(default, borrow, deserialize_with = "borrowed")]
    pub(super) thought_signature: Option<Cow<'a, str>>,
    /// Boxed to keep the usual text part small: parts are moved as they are read.
    #[serde(default, borrow)]
    pub(super) function_call: Option<Box<FunctionCall<'a>>>,
}

#[derive(Debug, PartialEq, Deserialize)]
pub(super) struct FunctionCall<'a> {
    #[serde(default, borrow, deserialize_with = "borrowed")]
    pub(super) id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(super) name: Cow<'a, str>,
    #[serde(default)]
    pub(super) args: Option<Value>,
}

#[derive(Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct UsageMetadata {
    #[serde(default)]
    pub(super) prompt_token_count: Option<u64>,
    #[serde(default)]
    pub(super) cached_content_token_count: Option<u64>,
    #[serde(default)]
    pub(super) candidates_token_count: Option<u64>,
    #[serde(default)]
    pub(super) thoughts_token_count: Option<u64>,
}

#[derive(Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PromptFeedback<'a> {
    #[serde(default, borrow, deserialize_with = "borrowed")]
    pub(super) block_reason: Option<Cow<'a, str>>,
}

#[derive(Debug, PartialEq, Deserialize)]
pub(super) struct WireError<'a> {
    #[serde(default, borrow)]
    pub(super) message: Cow<'a, str>,
    #[serde(default, borrow)]
    pub(super) status: Cow<'a, str>,
}

/// A string borrowed from the data when it has no escapes.
#[derive(Deserialize)]
#[serde(transparent)]
pub(super) struct Borrowed<'a>(#[serde(borrow)] pub(super) Cow<'a, str>);

/// An optional [`Borrowed`] string. (A plain `Option<Cow<str>>` field always copies:
/// serde borrows only a bare `Cow` field.)
fn borrowed<'de: 'a, 'a, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Cow<'a, str>>, D::Error> {
    Ok(Option::<Borrowed<'a>>::deserialize(deserializer)?.map(|text| text.0))
}
