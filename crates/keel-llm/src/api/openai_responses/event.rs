//! The typed view of one Responses stream event, with its strict and lenient readings.
//!
//! The strict reading fills the view in place through the reader shared with Chat
//! Completions; the lenient one views a [`Value`] for the odd event the strict reading
//! refuses. Both sit side by side here so a reader can check field by field that they agree.

use std::borrow::Cow;

use serde::de::MapAccess;
use serde_json::Value;

use crate::api::openai_completions::{Fields, Object, Str, non_null, skip};

/// An event as the decoder reads it.
#[derive(Debug, Default)]
pub(super) struct Event<'a> {
    pub(super) kind: Option<Str<'a>>,
    pub(super) output_index: Option<u64>,
    pub(super) summary_index: Option<u64>,
    pub(super) delta: Option<Str<'a>>,
    pub(super) arguments: Option<Str<'a>>,
    pub(super) item: Option<Cow<'a, Value>>,
    pub(super) response: Option<Response<'a>>,
    /// What an `error` event's error is read from: its `error` object, else the event itself.
    pub(super) error: Option<Cow<'a, Value>>,
}

#[derive(Debug, Default)]
pub(super) struct Response<'a> {
    pub(super) id: Option<Str<'a>>,
    pub(super) model: Option<Str<'a>>,
    pub(super) usage: Option<Cow<'a, Value>>,
    pub(super) error: Option<Cow<'a, Value>>,
    pub(super) incomplete_details: Option<IncompleteDetails<'a>>,
}

#[derive(Debug, Default)]
pub(super) struct IncompleteDetails<'a> {
    pub(super) reason: Option<Str<'a>>,
}

impl<'de: 'a, 'a> Fields<'de> for Event<'a> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "type" => self.kind = map.next_value()?,
            "output_index" => self.output_index = map.next_value()?,
            "summary_index" => self.summary_index = map.next_value()?,
            "delta" => self.delta = map.next_value()?,
            "arguments" => self.arguments = map.next_value()?,
            "item" => self.item = map.next_value()?,
            "response" => map.next_value_seed(Object(&mut self.response))?,
            "error" => self.error = map.next_value()?,
            _ => skip(map)?,
        }
        Ok(())
    }
}

impl<'de: 'a, 'a> Fields<'de> for Response<'a> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "id" => self.id = map.next_value()?,
            "model" => self.model = map.next_value()?,
            "usage" => self.usage = map.next_value()?,
            "error" => self.error = map.next_value()?,
            "incomplete_details" => map.next_value_seed(Object(&mut self.incomplete_details))?,
            _ => skip(map)?,
        }
        Ok(())
    }
}

impl<'de: 'a, 'a> Fields<'de> for IncompleteDetails<'a> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "reason" => self.reason = map.next_value()?,
            _ => skip(map)?,
        }
        Ok(())
    }
}

impl<'a> Event<'a> {
    /// Whether the strict reading has all the event's handling needs: an `error` event
    /// without an `error` object is its own error object, which only the lenient view has.
    pub(super) fn is_whole(&self, sse_kind: &str) -> bool {
        self.kind.as_deref().unwrap_or(sse_kind) != "error"
            || self.error.as_deref().is_some_and(Value::is_object)
    }

    /// The event read from a JSON value, a field of an unexpected type (or `null`) counted
    /// as absent.
    pub(super) fn lenient(event: &'a Value) -> Self {
        Self {
            kind: Str::lenient(event.get("type")),
            output_index: event.get("output_index").and_then(Value::as_u64),
            summary_index: event.get("summary_index").and_then(Value::as_u64),
            delta: Str::lenient(event.get("delta")),
            arguments: Str::lenient(event.get("arguments")),
            item: non_null(event.get("item")),
            response: event.get("response").map(Response::lenient),
            error: Some(Cow::Borrowed(
                event
                    .get("error")
                    .filter(|e| e.is_object())
                    .unwrap_or(event),
            )),
        }
    }
}

impl<'a> Response<'a> {
    fn lenient(response: &'a Value) -> Self {
        Self {
            id: Str::lenient(response.get("id")),
            model: Str::lenient(response.get("model")),
            usage: non_null(response.get("usage")),
            error: non_null(response.get("error")),
            incomplete_details: response.get("incomplete_details").map(|details| {
                IncompleteDetails {
                    reason: Str::lenient(details.get("reason")),
                }
            }),
        }
    }
}
