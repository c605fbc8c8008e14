//! The flat view the decoder takes of one chunk, and the in-place reader that fills it.
//!
//! This is the hot-path reading (one chunk per streamed delta): it writes the first
//! candidate's fields straight into a [`Flat`] instead of building every level of
//! [`Chunk`] and moving it up. It is serde plumbing with one duty, to agree with the
//! reference reading in [`super::wire`], so it sits apart from both that reading and the
//! decoder.

use std::borrow::Cow;
use std::fmt;

use serde::Deserializer;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::wire::{Borrowed, Candidate, Chunk, Part, PromptFeedback, UsageMetadata, WireError};

/// What the decoder uses from one chunk: the chunk's own fields and the first candidate's
/// parts and finish (one candidate is requested; any others are ignored).
#[derive(Debug, Default, PartialEq)]
pub(super) struct Flat<'a> {
    /// The first part, held inline: nearly every chunk has exactly one.
    pub(super) first_part: Option<Part<'a>>,
    pub(super) more_parts: Vec<Part<'a>>,
    pub(super) finish_reason: Option<Cow<'a, str>>,
    pub(super) finish_message: Option<Cow<'a, str>>,
    pub(super) usage_metadata: Option<UsageMetadata>,
    pub(super) model_version: Option<Cow<'a, str>>,
    pub(super) response_id: Option<Cow<'a, str>>,
    pub(super) prompt_feedback: Option<PromptFeedback<'a>>,
    pub(super) error: Option<WireError<'a>>,
}

impl<'a> From<Chunk<'a>> for Flat<'a> {
    fn from(chunk: Chunk<'a>) -> Self {
        let mut flat = Flat {
            usage_metadata: chunk.usage_metadata,
            model_version: chunk.model_version,
            response_id: chunk.response_id,
            prompt_feedback: chunk.prompt_feedback,
            error: chunk.error,
            ..Flat::default()
        };
        if let Some(candidate) = chunk.candidates.into_iter().next() {
            flat.finish_reason = candidate.finish_reason;
            flat.finish_message = candidate.finish_message;
            for part in candidate
                .content
                .into_iter()
                .flat_map(|content| content.parts)
            {
                flat.push_part(part);
            }
        }
        flat
    }
}

impl<'a> Flat<'a> {
    /// Reads `data` with the first candidate's fields written straight into `self`. Read
    /// as a [`Chunk`], every level of the nesting (chunk, candidate, content, part) is
    /// built and then moved into the level above, a cost paid on every chunk.
    ///
    /// It takes only the usual shape, each struct a JSON object with every known key once,
    /// and returns `false` for anything else (the caller then reads a [`Chunk`], which
    /// decides what it means). Where it returns `true`, `self` is what `From<Chunk>` gives.
    pub(super) fn read_in_place(&mut self, data: &'a str) -> bool {
        let mut deserializer = serde_json::Deserializer::from_str(data);
        deserializer.deserialize_map(InPlace::Chunk(self)).is_ok() && deserializer.end().is_ok()
    }

    fn push_part(&mut self, part: Part<'a>) {
        if self.first_part.is_none() && self.more_parts.is_empty() {
            self.first_part = Some(part);
        } else {
            self.more_parts.push(part);
        }
    }

    pub(super) fn parts(&mut self) -> impl Iterator<Item = Part<'a>> + use<'a> {
        self.first_part
            .take()
            .into_iter()
            .chain(std::mem::take(&mut self.more_parts))
    }
}

/// The levels of a chunk [`Flat::read_in_place`] walks, each writing into the [`Flat`].
enum InPlace<'f, 'a> {
    /// The chunk object.
    Chunk(&'f mut Flat<'a>),
    /// `candidates`: the first is read in place, the rest are read as [`Candidate`]s
    /// (so they fail where a `Chunk` would) and dropped.
    Candidates(&'f mut Flat<'a>),
    /// The first candidate.
    Candidate(&'f mut Flat<'a>),
    /// Its `content`, which may be `null`.
    Content(&'f mut Flat<'a>),
    /// Its `parts`.
    Parts(&'f mut Flat<'a>),
}

/// Fails the in-place reading (the message is never shown: the caller reads again).
fn decline<E: serde::de::Error>() -> E {
    E::custom("not the usual chunk shape")
}

/// Marks a known key seen; a repeated one declines, as a derived struct rejects it.
fn first_time<E: serde::de::Error>(seen: &mut u8, key: u8) -> Result<(), E> {
    if *seen & key != 0 {
        return Err(decline());
    }
    *seen |= key;
    Ok(())
}

impl<'de: 'a, 'a> DeserializeSeed<'de> for InPlace<'_, 'a> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        match self {
            Self::Chunk(_) | Self::Candidate(_) => deserializer.deserialize_map(self),
            Self::Candidates(_) | Self::Parts(_) => deserializer.deserialize_seq(self),
            Self::Content(_) => deserializer.deserialize_option(self),
        }
    }
}

impl<'de: 'a, 'a> Visitor<'de> for InPlace<'_, 'a> {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("the usual Gemini chunk")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = 0u8;
        // Keys are borrowed: one with an escape fails here and is left to `Chunk`.
        match self {
            Self::Chunk(flat) => {
                while let Some(key) = map.next_key::<&'de str>()? {
                    match key {
                        "candidates" => {
                            first_time(&mut seen, 1)?;
                            map.next_value_seed(InPlace::Candidates(flat))?;
                        }
                        "usageMetadata" => {
                            first_time(&mut seen, 2)?;
                            flat.usage_metadata = map.next_value()?;
                        }
                        "modelVersion" => {
                            first_time(&mut seen, 4)?;
                            flat.model_version =
                                map.next_value::<Option<Borrowed<'a>>>()?.map(|text| text.0);
                        }
                        "responseId" => {
                            first_time(&mut seen, 8)?;
                            flat.response_id =
                                map.next_value::<Option<Borrowed<'a>>>()?.map(|text| text.0);
                        }
                        "promptFeedback" => {
                            first_time(&mut seen, 16)?;
                            flat.prompt_feedback = map.next_value()?;
                        }
                        "error" => {
                            first_time(&mut seen, 32)?;
                            flat.error = map.next_value()?;
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
            }
            Self::Candidate(flat) => {
                while let Some(key) = map.next_key::<&'de str>()? {
                    match key {
                        "content" => {
                            first_time(&mut seen, 1)?;
                            map.next_value_seed(InPlace::Content(flat))?;
                        }
                        "finishReason" => {
                            first_time(&mut seen, 2)?;
                            flat.finish_reason =
                                map.next_value::<Option<Borrowed<'a>>>()?.map(|text| text.0);
                        }
                        "finishMessage" => {
                            first_time(&mut seen, 4)?;
                            flat.finish_message =
                                map.next_value::<Option<Borrowed<'a>>>()?.map(|text| text.0);
                        }
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
            }
            Self::Content(flat) => {
                while let Some(key) = map.next_key::<&'de str>()? {
                    if key == "parts" {
                        first_time(&mut seen, 1)?;
                        map.next_value_seed(InPlace::Parts(flat))?;
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            Self::Candidates(_) | Self::Parts(_) => return Err(decline()),
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        match self {
            Self::Candidates(flat) => {
                if seq.next_element_seed(InPlace::Candidate(flat))?.is_some() {
                    while seq.next_element::<Candidate<'a>>()?.is_some() {}
                }
            }
            Self::Parts(flat) => {
                while let Some(part) = seq.next_element()? {
                    flat.push_part(part);
                }
            }
            _ => return Err(decline()),
        }
        Ok(())
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<(), E> {
        match self {
            Self::Content(_) => Ok(()),
            _ => Err(decline()),
        }
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        match self {
            Self::Content(_) => deserializer.deserialize_map(self),
            _ => Err(decline()),
        }
    }
}
