//! Strict reading of JSON objects into typed views, shared with the Responses decoder.
//!
//! Views are filled in place, field by field: a derived reader returns each nested struct by
//! value, and copying those up through its layers cost more than the parse. A repeated field
//! replaces the earlier one, as in a `Value`; a nested object must be an object, never an
//! array of its fields. It knows nothing of chunks or events (it reads any [`Fields`] view),
//! which is why it is a module of its own.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// A JSON string, borrowed from the event unless it had escapes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::api) struct Str<'a>(pub(in crate::api) Cow<'a, str>);

impl<'a> Str<'a> {
    /// The string `value` holds, if it is one.
    pub(in crate::api) fn lenient(value: Option<&'a Value>) -> Option<Self> {
        value
            .and_then(Value::as_str)
            .map(|text| Self(Cow::Borrowed(text)))
    }
}

impl Deref for Str<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> Visitor<'de> for Visit {
            type Value = Str<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }

            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Borrowed(text)))
            }

            fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(text.to_owned())))
            }

            fn visit_string<E>(self, text: String) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(text)))
            }
        }
        deserializer.deserialize_str(Visit)
    }
}

/// A field that holds either a string or an array of objects (Mistral's `content`, which
/// is a list of typed parts where other servers send a string).
#[derive(Debug)]
pub(in crate::api) enum TextOr<'a, T> {
    /// A plain string.
    Text(Cow<'a, str>),
    /// An array of objects, each read as a `T`.
    Items(Vec<T>),
}

impl<'a, T> TextOr<'a, T> {
    /// The string or array `value` holds, each array element read by `item`; anything
    /// else counts as absent.
    pub(in crate::api) fn lenient(
        value: Option<&'a Value>,
        item: impl Fn(&'a Value) -> T,
    ) -> Option<Self> {
        match value? {
            Value::String(text) => Some(Self::Text(Cow::Borrowed(text))),
            Value::Array(items) => Some(Self::Items(items.iter().map(item).collect())),
            _ => None,
        }
    }
}

impl<'de: 'a, 'a, T: Fields<'de>> Deserialize<'de> for TextOr<'a, T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visit<'a, T>(PhantomData<(&'a (), T)>);
        impl<'de: 'a, 'a, T: Fields<'de>> Visitor<'de> for Visit<'a, T> {
            type Value = TextOr<'a, T>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or an array of objects")
            }

            fn visit_borrowed_str<E>(self, text: &'de str) -> Result<Self::Value, E> {
                Ok(TextOr::Text(Cow::Borrowed(text)))
            }

            fn visit_str<E>(self, text: &str) -> Result<Self::Value, E> {
                Ok(TextOr::Text(Cow::Owned(text.to_owned())))
            }

            fn visit_string<E>(self, text: String) -> Result<Self::Value, E> {
                Ok(TextOr::Text(Cow::Owned(text)))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::new();
                loop {
                    let mut item = T::default();
                    if seq.next_element_seed(Place(&mut item))?.is_none() {
                        return Ok(TextOr::Items(items));
                    }
                    items.push(item);
                }
            }
        }
        deserializer.deserialize_any(Visit(PhantomData))
    }
}

/// A view read from a JSON object in place, one field at a time.
pub(in crate::api) trait Fields<'de>: Default {
    /// Reads the value of field `key` from `map`, or skips it if the view has no such field.
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error>;
}

/// `data` read strictly as a `T`, or `None` when it is anything else (not JSON, not an
/// object, a field of an unexpected type).
pub(in crate::api) fn read_object<'a, T: Fields<'a>>(data: &'a str) -> Option<T> {
    let mut view = T::default();
    let mut deserializer = serde_json::Deserializer::from_str(data);
    Place(&mut view).deserialize(&mut deserializer).ok()?;
    deserializer.end().ok()?;
    Some(view)
}

/// The value of a field a view does not read.
pub(in crate::api) fn skip<'de, A: MapAccess<'de>>(map: &mut A) -> Result<(), A::Error> {
    map.next_value::<IgnoredAny>().map(drop)
}

/// A `JSON` value that is present and not `null`, borrowed.
pub(in crate::api) fn non_null(value: Option<&Value>) -> Option<Cow<'_, Value>> {
    value.filter(|v| !v.is_null()).map(Cow::Borrowed)
}

/// Reads an object into the view it holds.
struct Place<'s, T>(&'s mut T);

impl<'de, T: Fields<'de>> DeserializeSeed<'de> for Place<'_, T> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, T: Fields<'de>> Visitor<'de> for Place<'_, T> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<Str<'de>>()? {
            self.0.field(&key, &mut map)?;
        }
        Ok(())
    }
}

/// An optional object field: `null` reads as `None`.
pub(in crate::api) struct Object<'s, T>(pub(in crate::api) &'s mut Option<T>);

impl<'de, T: Fields<'de>> DeserializeSeed<'de> for Object<'_, T> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de, T: Fields<'de>> Visitor<'de> for Object<'_, T> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object or null")
    }

    fn visit_none<E>(self) -> Result<(), E> {
        *self.0 = None;
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        Place(self.0.insert(T::default())).deserialize(deserializer)
    }
}

/// An optional array of objects: `null` reads as `None`.
pub(super) struct Objects<'s, T>(pub(super) &'s mut Option<Vec<T>>);

impl<'de, T: Fields<'de>> DeserializeSeed<'de> for Objects<'_, T> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de, T: Fields<'de>> Visitor<'de> for Objects<'_, T> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of objects or null")
    }

    fn visit_none<E>(self) -> Result<(), E> {
        *self.0 = None;
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let list = self.0.insert(Vec::new());
        loop {
            let mut item = T::default();
            if seq.next_element_seed(Place(&mut item))?.is_none() {
                return Ok(());
            }
            list.push(item);
        }
    }
}

/// The first object of an optional array (the other elements are checked to be JSON and
/// dropped): `null` and `[]` read as `None`.
pub(super) struct FirstObject<'s, T>(pub(super) &'s mut Option<T>);

impl<'de, T: Fields<'de>> DeserializeSeed<'de> for FirstObject<'_, T> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de, T: Fields<'de>> Visitor<'de> for FirstObject<'_, T> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of objects or null")
    }

    fn visit_none<E>(self) -> Result<(), E> {
        *self.0 = None;
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let first = self.0.insert(T::default());
        if seq.next_element_seed(Place(first))?.is_none() {
            *self.0 = None;
        }
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(())
    }
}
