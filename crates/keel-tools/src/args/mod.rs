//! Tool arguments: one Rust type gives both the JSON Schema the model is sent (and the loop
//! validates against) and the parser the tool runs, so the two cannot disagree.
//!
//! A bound the schema states comes from a type here whose `Deserialize` checks the same
//! bound: [`Int`] for integer ranges, [`NonEmpty`] for `minLength`/`minItems`. An optional
//! field is spelled `#[serde(default, deserialize_with = "present")] Option<T>`, so `null`
//! is refused as its schema refuses it (the schema states the value's type, not "or null").
//! Defaults are stated in the descriptions, as the parser applies them.
//!
//! schemars writes more than providers accept, so [`schema`] trims its output to the subset
//! that OpenAI and Gemini function declarations both take: no `$schema`, `title`, `$defs`,
//! `default`, `format`, `const` or `oneOf`, a single `type` per schema, and string enums as
//! `enum`. The trade-off: per-variant descriptions of an enum are dropped (a tool's
//! description explains its modes instead).

use std::borrow::Cow;
use std::fmt;

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{self, Deserialize, DeserializeOwned, Deserializer, Unexpected, Visitor};
use serde_json::{Map, Value};

use strict::Strict;

mod strict;

#[cfg(test)]
mod consistency_tests;
#[cfg(test)]
mod schemas_tests;

/// The `MAX` of an [`Int`] that has no upper bound.
pub const UNBOUNDED: u64 = u64::MAX;

/// The arguments schema of `T`, trimmed to what every provider accepts.
pub fn schema<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|settings| {
            settings.meta_schema = None;
            settings.inline_subschemas = true;
        })
        .into_generator();
    let mut value = generator.into_root_schema_for::<T>().to_value();
    if let Value::Object(root) = &mut value {
        // The tool's own description is what the model reads about the whole call.
        root.remove("description");
        // A tool without arguments still lists none: some providers require the key.
        root.entry("properties")
            .or_insert_with(|| Value::Object(Map::new()));
    }
    tidy(&mut value);
    value
}

/// Arguments parsed into `T`, read as strictly as its schema reads them (see [`Strict`]); the
/// error is serde's, naming the field and what was expected.
pub fn parse<T: DeserializeOwned>(arguments: Value) -> Result<T, serde_json::Error> {
    T::deserialize(Strict(arguments))
}

/// A call's arguments parsed into `T` ([`parse`]), or the tool error the model reads.
pub fn arguments<T: DeserializeOwned>(arguments: Value) -> Result<T, keel_agent::ToolError> {
    parse(arguments).map_err(|e| keel_agent::ToolError::new(format!("Invalid arguments: {e}")))
}

/// For `#[serde(deserialize_with)]` on an optional field: a present value must be a `T`
/// (never `null`); a missing one is `None` through `#[serde(default)]`.
pub fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// Removes from one schema and all its subschemas what providers reject or ignore. It walks
/// only subschema positions, so a property that happens to be named `title` or `default`
/// stays.
fn tidy(schema: &mut Value) {
    let Value::Object(object) = schema else {
        return;
    };
    // `$defs` is left for the tests to flag: with subschemas inlined only a recursive type
    // would produce one, and no provider here follows its `$ref`s.
    for key in ["$schema", "title", "default"] {
        object.remove(key);
    }
    drop_null(object);
    enum_from_consts(object);
    if matches!(
        object.get("type").and_then(Value::as_str),
        Some("integer" | "number")
    ) {
        // schemars names the Rust type (`uint`, `int64`); JSON Schema defines no such formats
        // and Gemini refuses them on numbers.
        object.remove("format");
    }
    if let Some(Value::Object(properties)) = object.get_mut("properties") {
        properties.values_mut().for_each(tidy);
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(sub) = object.get_mut(key) {
            tidy(sub);
        }
    }
    for key in ["anyOf", "allOf", "oneOf", "prefixItems"] {
        if let Some(Value::Array(subs)) = object.get_mut(key) {
            subs.iter_mut().for_each(tidy);
        }
    }
}

/// `type: ["x", "null"]` becomes `type: "x"`, and `null` leaves an `enum`: optional fields
/// are left out, never sent as `null` (see [`present`]).
fn drop_null(object: &mut Map<String, Value>) {
    if let Some(Value::Array(types)) = object.get_mut("type") {
        types.retain(|t| t != "null");
        if let [only] = types.as_slice() {
            let only = only.clone();
            object.insert("type".to_owned(), only);
        }
    }
    if let Some(Value::Array(values)) = object.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
}

/// `oneOf: [{const: "a", description}, …]` (what schemars writes for an enum whose variants
/// have doc comments) becomes `type: string, enum: ["a", …]`.
fn enum_from_consts(object: &mut Map<String, Value>) {
    let Some(Value::Array(branches)) = object.get("oneOf") else {
        return;
    };
    let values: Option<Vec<Value>> = branches
        .iter()
        .map(|branch| branch.get("const").filter(|c| c.is_string()).cloned())
        .collect();
    if let Some(values) = values {
        object.remove("oneOf");
        object.insert("type".to_owned(), Value::from("string"));
        object.insert("enum".to_owned(), Value::Array(values));
    }
}

/// An integer in `MIN..=MAX` (`MAX` = [`UNBOUNDED`] for none); its schema states the same
/// range. A number with a zero fraction (`2.0`) counts, as JSON Schema's `integer` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Int<const MIN: u64, const MAX: u64>(u64);

impl<const MIN: u64, const MAX: u64> Int<MIN, MAX> {
    /// The value.
    pub fn get(self) -> u64 {
        self.0
    }

    /// The value as a `usize`, saturating (only an unbounded value can exceed one).
    pub fn usize(self) -> usize {
        usize::try_from(self.0).unwrap_or(usize::MAX)
    }

    fn accept<E: de::Error>(value: u64, unexpected: Unexpected<'_>) -> Result<Self, E> {
        if (MIN..=MAX).contains(&value) {
            Ok(Self(value))
        } else {
            Err(E::invalid_value(unexpected, &IntVisitor::<MIN, MAX>))
        }
    }
}

struct IntVisitor<const MIN: u64, const MAX: u64>;

impl<const MIN: u64, const MAX: u64> Visitor<'_> for IntVisitor<MIN, MAX> {
    type Value = Int<MIN, MAX>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if MAX == UNBOUNDED {
            write!(f, "an integer of at least {MIN}")
        } else {
            write!(f, "an integer from {MIN} to {MAX}")
        }
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Self::Value, E> {
        Int::accept(value, Unexpected::Unsigned(value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Self::Value, E> {
        match u64::try_from(value) {
            Ok(value) => self.visit_u64(value),
            Err(_) => Err(E::invalid_value(Unexpected::Signed(value), &self)),
        }
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Self::Value, E> {
        let unexpected = Unexpected::Float(value);
        if !value.is_finite() || value.fract() != 0.0 {
            return Err(E::invalid_type(unexpected, &self));
        }
        // Only an integral float at or past 2^64 saturates, and only an unbounded range
        // (a line offset, a page offset) can take it.
        if value < MIN as f64 || (MAX != UNBOUNDED && value > MAX as f64) {
            return Err(E::invalid_value(unexpected, &self));
        }
        Int::accept(value as u64, unexpected)
    }
}

impl<'de, const MIN: u64, const MAX: u64> Deserialize<'de> for Int<MIN, MAX> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(IntVisitor::<MIN, MAX>)
    }
}

impl<const MIN: u64, const MAX: u64> JsonSchema for Int<MIN, MAX> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        format!("Int_{MIN}_{MAX}").into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let mut schema = json_schema!({"type": "integer", "minimum": MIN});
        if MAX != UNBOUNDED {
            schema.insert("maximum".to_owned(), MAX.into());
        }
        schema
    }
}

/// A value that may be empty in Rust but not in a tool's arguments.
pub trait Emptiable {
    /// The JSON Schema keyword that bounds its length (`minLength`, `minItems`).
    const MIN_KEYWORD: &'static str;
    /// What a parse error says was expected.
    const EXPECTED: &'static str;
    /// Whether it is empty.
    fn is_empty(&self) -> bool;
}

impl Emptiable for String {
    const MIN_KEYWORD: &'static str = "minLength";
    const EXPECTED: &'static str = "a non-empty string";
    fn is_empty(&self) -> bool {
        String::is_empty(self)
    }
}

impl<T> Emptiable for Vec<T> {
    const MIN_KEYWORD: &'static str = "minItems";
    const EXPECTED: &'static str = "a non-empty array";
    fn is_empty(&self) -> bool {
        Vec::is_empty(self)
    }
}

/// A non-empty string or array; its schema states `minLength: 1` or `minItems: 1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NonEmpty<T>(T);

impl<T> NonEmpty<T> {
    /// The value.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> std::ops::Deref for NonEmpty<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<'de, T: Deserialize<'de> + Emptiable> Deserialize<'de> for NonEmpty<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = T::deserialize(deserializer)?;
        if value.is_empty() {
            return Err(de::Error::invalid_length(0, &T::EXPECTED));
        }
        Ok(Self(value))
    }
}

impl<T: JsonSchema + Emptiable> JsonSchema for NonEmpty<T> {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        format!("NonEmpty_{}", T::schema_name()).into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let mut schema = T::json_schema(generator);
        schema.insert(T::MIN_KEYWORD.to_owned(), 1.into());
        schema
    }
}
