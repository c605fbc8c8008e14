//! The typed views of a Chat Completions chunk: what the decoder reads from one.
//!
//! Each view has its two readings side by side, the strict one (filled in place by
//! [`super::reader`]) and the lenient one (from a [`Value`]), so a reader can check field by
//! field that they agree; the decoder sees only the views.

use std::borrow::Cow;
use std::fmt;

use serde::de::value::MapAccessDeserializer;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::reader::{Fields, FirstObject, Object, Objects, Str, TextOr, non_null, skip};

/// A chunk as the decoder reads it.
#[derive(Debug, Default)]
pub(super) struct Chunk<'a> {
    pub(super) id: Option<Str<'a>>,
    pub(super) model: Option<Str<'a>>,
    /// A mid-stream error (never `null`).
    pub(super) error: Option<Cow<'a, Value>>,
    pub(super) usage: Option<Cow<'a, Value>>,
    /// The first choice; the others are ignored.
    pub(super) choice: Option<Choice<'a>>,
}

#[derive(Debug, Default)]
pub(super) struct Choice<'a> {
    pub(super) delta: Option<Delta<'a>>,
    pub(super) finish_reason: Option<Str<'a>>,
}

#[derive(Debug, Default)]
pub(super) struct Delta<'a> {
    pub(super) content: Option<Content<'a>>,
    pub(super) reasoning_content: Option<Str<'a>>,
    pub(super) reasoning: Option<Str<'a>>,
    pub(super) reasoning_details: Option<Vec<TextItem<'a>>>,
    pub(super) tool_calls: Option<Vec<Fragment<'a>>>,
    /// The legacy single call.
    pub(super) function_call: Option<Function<'a>>,
}

/// A delta's `content`: a string, or (Mistral's Magistral models) a list of typed parts.
pub(super) type Content<'a> = TextOr<'a, ContentPart<'a>>;

/// One part of a `content` list: `{"type": "text", "text": …}`, `{"type": "thinking",
/// "thinking": …}` or a kind the decoder skips.
#[derive(Debug, Default)]
pub(super) struct ContentPart<'a> {
    pub(super) kind: Option<Str<'a>>,
    pub(super) text: Option<Str<'a>>,
    /// A thinking part's reasoning: a string, or a list of text items.
    pub(super) thinking: Option<TextOr<'a, TextItem<'a>>>,
}

/// An item with a `type` and a `text`: one of `reasoning_details`, or a text item inside a
/// thinking part.
#[derive(Debug, Default)]
pub(super) struct TextItem<'a> {
    pub(super) kind: Option<Str<'a>>,
    pub(super) text: Option<Str<'a>>,
}

/// One entry of `tool_calls`.
#[derive(Debug, Default)]
pub(super) struct Fragment<'a> {
    pub(super) index: Option<u64>,
    pub(super) id: Option<Str<'a>>,
    pub(super) function: Option<Function<'a>>,
}

#[derive(Debug, Default)]
pub(super) struct Function<'a> {
    pub(super) name: Option<Str<'a>>,
    pub(super) arguments: Option<Arguments<'a>>,
}

/// Tool-call arguments as they arrived.
#[derive(Debug)]
pub(super) enum Arguments<'a> {
    /// A piece of the JSON text.
    Text(Cow<'a, str>),
    /// A server that sends the arguments as an object sends them whole: the object as JSON
    /// text.
    Object(String),
}

impl Arguments<'_> {
    pub(super) fn as_str(&self) -> &str {
        match self {
            Self::Text(text) => text,
            Self::Object(text) => text,
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Arguments<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> Visitor<'de> for Visit {
            type Value = Arguments<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or an object")
            }

            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(Arguments::Text(Cow::Borrowed(text)))
            }

            fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
                Ok(Arguments::Text(Cow::Owned(text.to_owned())))
            }

            fn visit_string<E>(self, text: String) -> Result<Self::Value, E> {
                Ok(Arguments::Text(Cow::Owned(text)))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let object = Value::deserialize(MapAccessDeserializer::new(map))?;
                Ok(Arguments::Object(object.to_string()))
            }
        }
        deserializer.deserialize_any(Visit)
    }
}

impl<'de: 'a, 'a> Fields<'de> for Chunk<'a> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "id" => self.id = map.next_value()?,
            "model" => self.model = map.next_value()?,
            "error" => self.error = map.next_value()?,
            "usage" => self.usage = map.next_value()?,
            "choices" => map.next_value_seed(FirstObject(&mut self.choice))?,
            _ => skip(map)?,
        }
        Ok(())
    }
}

impl<'de: 'a, 'a> Fields<'de> for Choice<'a> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "delta" => map.next_value_seed(Object(&mut self.delta))?,
            "finish_reason" => self.finish_reason = map.next_value()?,
            _ => skip(map)?,
        }
        Ok(())
    }
}

impl<'de: 'a, 'a> Fields<'de> for Delta<'a> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "content" => self.content = map.next_value()?,
            "reasoning_content" => self.reasoning_content = map.next_value()?,
            "reasoning" => self.reasoning = map.next_value()?,
            "reasoning_details" => map.next_value_seed(Objects(&mut self.reasoning_details))?,
            "tool_calls" => map.next_value_seed(Objects(&mut self.tool_calls))?,
            "function_call" => map.next_value_seed(Object(&mut self.function_call))?,
            _ => skip(map)?,
        }
        Ok(())
    }
}

impl<'de: 'a, 'a> Fields<'de> for ContentPart<'a> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "type" => self.kind = map.next_value()?,
            "text" => self.text = map.next_value()?,
            "thinking" => self.thinking = map.next_value()?,
            _ => skip(map)?,
        }
        Ok(())
    }
}

impl<'de: 'a, 'a> Fields<'de> for TextItem<'a> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "type" => self.kind = map.next_value()?,
            "text" => self.text = map.next_value()?,
            _ => skip(map)?,
        }
        Ok(())
    }
}

impl<'de: 'a, 'a> Fields<'de> for Fragment<'a> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "index" => self.index = map.next_value()?,
            "id" => self.id = map.next_value()?,
            "function" => map.next_value_seed(Object(&mut self.function))?,
            _ => skip(map)?,
        }
        Ok(())
    }
}

impl<'de: 'a, 'a> Fields<'de> for Function<'a> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "name" => self.name = map.next_value()?,
            "arguments" => self.arguments = map.next_value()?,
            _ => skip(map)?,
        }
        Ok(())
    }
}

// The lenient views of a chunk read as a JSON value: a field of an unexpected type counts as
// absent, as does a `null` one.

impl<'a> Chunk<'a> {
    pub(super) fn lenient(chunk: &'a Value) -> Self {
        Self {
            id: Str::lenient(chunk.get("id")),
            model: Str::lenient(chunk.get("model")),
            error: non_null(chunk.get("error")),
            usage: non_null(chunk.get("usage")),
            choice: chunk
                .get("choices")
                .and_then(Value::as_array)
                .and_then(|choices| choices.first())
                .map(Choice::lenient),
        }
    }
}

impl<'a> Choice<'a> {
    fn lenient(choice: &'a Value) -> Self {
        Self {
            delta: choice.get("delta").map(Delta::lenient),
            finish_reason: Str::lenient(choice.get("finish_reason")),
        }
    }
}

impl<'a> Delta<'a> {
    fn lenient(delta: &'a Value) -> Self {
        let list = |name: &str| delta.get(name).and_then(Value::as_array);
        Self {
            content: TextOr::lenient(delta.get("content"), ContentPart::lenient),
            reasoning_content: Str::lenient(delta.get("reasoning_content")),
            reasoning: Str::lenient(delta.get("reasoning")),
            reasoning_details: list("reasoning_details")
                .map(|items| items.iter().map(TextItem::lenient).collect()),
            tool_calls: list("tool_calls")
                .map(|fragments| fragments.iter().map(Fragment::lenient).collect()),
            function_call: delta
                .get("function_call")
                .filter(|f| f.is_object())
                .map(Function::lenient),
        }
    }
}

impl<'a> ContentPart<'a> {
    fn lenient(part: &'a Value) -> Self {
        Self {
            kind: Str::lenient(part.get("type")),
            text: Str::lenient(part.get("text")),
            thinking: TextOr::lenient(part.get("thinking"), TextItem::lenient),
        }
    }
}

impl<'a> TextItem<'a> {
    fn lenient(item: &'a Value) -> Self {
        Self {
            kind: Str::lenient(item.get("type")),
            text: Str::lenient(item.get("text")),
        }
    }
}

impl<'a> Fragment<'a> {
    fn lenient(fragment: &'a Value) -> Self {
        Self {
            index: fragment.get("index").and_then(Value::as_u64),
            id: Str::lenient(fragment.get("id")),
            function: fragment.get("function").map(Function::lenient),
        }
    }
}

impl<'a> Function<'a> {
    fn lenient(function: &'a Value) -> Self {
        Self {
            name: Str::lenient(function.get("name")),
            arguments: match function.get("arguments") {
                Some(Value::String(text)) => Some(Arguments::Text(Cow::Borrowed(text))),
                Some(value @ Value::Object(_)) => Some(Arguments::Object(value.to_string())),
                _ => None,
            },
        }
    }
}
