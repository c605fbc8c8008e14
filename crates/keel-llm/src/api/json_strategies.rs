//! Property-test strategies for JSON text with odd shapes, shared by the chat-completions and
//! Responses decoder tests: the fast readers must agree with the general path on all of it.

use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;
use serde_json::Value;

/// A JSON string.
pub(super) fn quoted(text: &str) -> String {
    Value::from(text).to_string()
}

/// `typed` most of the time, sometimes a value of another type.
pub(super) fn loosely(typed: BoxedStrategy<String>) -> BoxedStrategy<String> {
    let other = prop::sample::select(vec![
        "null", "-1", "1.5", "true", "\"s\"", "[]", "[{}]", "{}",
    ]);
    prop_oneof![6 => typed, 1 => other.prop_map(str::to_owned)].boxed()
}

/// An object of up to five of `fields` (so some repeat), plus the unknown member `noise`.
pub(super) fn object_with(
    fields: Vec<(&'static str, BoxedStrategy<String>)>,
    noise: &'static str,
) -> BoxedStrategy<String> {
    let mut members: Vec<BoxedStrategy<String>> = fields
        .into_iter()
        .map(|(key, value)| {
            loosely(value)
                .prop_map(move |value| format!("{}:{value}", quoted(key)))
                .boxed()
        })
        .collect();
    members.push(Just(noise.to_owned()).boxed());
    prop::collection::vec(prop::strategy::Union::new(members), 0..6)
        .prop_map(|members| format!("{{{}}}", members.join(",")))
        .boxed()
}

/// An array of up to two `item`s, each sometimes of another type.
pub(super) fn array(item: BoxedStrategy<String>) -> BoxedStrategy<String> {
    prop::collection::vec(loosely(item), 0..3)
        .prop_map(|items| format!("[{}]", items.join(",")))
        .boxed()
}
