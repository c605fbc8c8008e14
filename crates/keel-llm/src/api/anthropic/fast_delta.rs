//! The fast path for `content_block_delta`, nearly every event of a stream.
//!
//! A borrowing reader whose only allocation is the delta's own text. It is serde plumbing
//! with one duty, to accept only what [`WireEvent`] would read the same way (a property test
//! holds it to that), so it sits apart from both that reading and the decoder.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::MapAccessDeserializer;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::wire::WireDelta;
#[cfg(doc)]
use super::wire::WireEvent;

/// A `content_block_delta` read with its strings borrowed from the event data.
///
/// Unknown keys are refused rather than skipped: `WireEvent` buffers every value it reads
/// under serde_json's nesting limit, while skipping has no limit, so skipping could accept
/// a deeply nested value `WireEvent` rejects. Anthropic's deltas carry no other keys.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FastDelta<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    index: u64,
    #[serde(borrow)]
    delta: Object<FastDeltaBody<'a>>,
}

/// The `delta` of a [`FastDelta`]: which field is required depends on `kind`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FastDeltaBody<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow, deserialize_with = "borrowed")]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "borrowed")]
    thinking: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "borrowed")]
    signature: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "borrowed")]
    partial_json: Option<Cow<'a, str>>,
}

impl FastDelta<'_> {
    /// Reads `data` as a `content_block_delta` of a known kind, or `None` to leave it to
    /// [`WireEvent`] (another event, or one this reading might take differently).
    pub(super) fn read(data: &str) -> Option<(u64, WireDelta)> {
        let Object(event) = serde_json::from_str::<Object<FastDelta<'_>>>(data).ok()?;
        if event.kind != "content_block_delta" {
            return None;
        }
        let Object(body) = event.delta;
        // `WireEvent` requires the kind's own field (a missing one is an error there).
        let delta = match &*body.kind {
            "text_delta" => WireDelta::TextDelta {
                text: body.text?.into_owned(),
            },
            "thinking_delta" => WireDelta::ThinkingDelta {
                thinking: body.thinking?.into_owned(),
            },
            "signature_delta" => WireDelta::SignatureDelta {
                signature: body.signature?.into_owned(),
            },
            "input_json_delta" => WireDelta::InputJsonDelta {
                partial_json: body.partial_json?.into_owned(),
            },
            _ => return None,
        };
        Some((event.index, delta))
    }
}

/// An optional string, borrowed from the data when it has no escapes. (A plain
/// `Option<Cow<str>>` field always copies: serde borrows only a bare `Cow` field.)
fn borrowed<'de: 'a, 'a, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Cow<'a, str>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(transparent)]
    struct Borrowed<'a>(#[serde(borrow)] Cow<'a, str>);

    Ok(Option::<Borrowed<'a>>::deserialize(deserializer)?.map(|text| text.0))
}

/// A struct read from a JSON object only. A derived struct also reads an array of its
/// fields in order, which `WireEvent` reads differently (the tag first, then the variant's
/// own fields), so the fast read refuses arrays and leaves them to it.
#[derive(Debug)]
struct Object<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectVisitor<T>(PhantomData<T>);

        impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectVisitor<T> {
            type Value = Object<T>;

            fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
                formatter.write_str("an object")
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Object<T>, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map)).map(Object)
            }
        }

        deserializer.deserialize_map(ObjectVisitor(PhantomData))
    }
}
