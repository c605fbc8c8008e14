//! Wire JSON of messages already sent, reused by later requests.
//!
//! Every request carries the whole conversation, so without reuse each step re-encodes (and
//! re-escapes) everything said so far, a cost that grows with the session. History messages
//! are shared `Arc`s that never change, so their encoding is remembered per message, keyed by
//! the `Arc`'s address; the cache holds a clone of the `Arc`, so an address cannot be reused
//! by another message while its entry lives. Entries whose message nothing else holds any
//! more are dropped after each request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use keel_protocol::{Message, ToolDefinition};
use serde::Serialize;
use serde_json::Value;

use super::Spliced;

/// Most bytes of encoded JSON kept; past it, new messages are encoded without being kept.
pub const ENCODE_CACHE_MAX_BYTES: usize = 64 * 1024 * 1024;

/// One message's wire items, each already serialized JSON (shared, never copied again).
pub type Encoded = Arc<[Bytes]>;

struct Entry {
    message: Arc<Message>,
    items: Encoded,
    bytes: usize,
}

#[derive(Default)]
struct Entries {
    by_address: HashMap<usize, Entry>,
    bytes: usize,
}

/// Encoded messages of one provider, shared by its requests, and its last tool set.
#[derive(Default)]
pub struct EncodeCache {
    entries: Mutex<Entries>,
    tools: Mutex<Option<(Arc<[ToolDefinition]>, Bytes)>>,
}

impl std::fmt::Debug for EncodeCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("EncodeCache")
            .field("messages", &entries.by_address.len())
            .field("bytes", &entries.bytes)
            .finish()
    }
}

impl EncodeCache {
    /// The wire items of `message`: remembered ones, else `encode`'s, serialized and kept.
    pub fn items(&self, message: &Arc<Message>, encode: impl FnOnce() -> Vec<Value>) -> Encoded {
        let address = Arc::as_ptr(message) as usize;
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = entries.by_address.get(&address) {
            return Arc::clone(&entry.items);
        }
        let items: Encoded = encode().iter().map(to_json).collect();
        let bytes = items.iter().map(|item| item.len()).sum::<usize>();
        if entries.bytes + bytes <= ENCODE_CACHE_MAX_BYTES {
            entries.bytes += bytes;
            entries.by_address.insert(
                address,
                Entry {
                    message: Arc::clone(message),
                    items: Arc::clone(&items),
                    bytes,
                },
            );
        }
        items
    }

    /// The wire JSON of a tool set: remembered while requests carry the same set (the same
    /// `Arc`, which a turn shares between its requests), else `encode`'s, serialized and kept.
    /// The schemas are the largest fixed part of every request.
    pub fn tools(
        &self,
        tools: &Arc<[ToolDefinition]>,
        encode: impl FnOnce(&[ToolDefinition]) -> Value,
    ) -> Bytes {
        let mut kept = self.tools.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((set, json)) = kept.as_ref()
            && Arc::ptr_eq(set, tools)
        {
            return json.clone();
        }
        let json = to_json(&encode(tools));
        *kept = Some((Arc::clone(tools), json.clone()));
        json
    }

    /// Drops the entries of messages nothing but the cache holds any more.
    pub fn forget_dropped(&self) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let mut freed = 0;
        entries.by_address.retain(|_, entry| {
            let live = Arc::strong_count(&entry.message) > 1;
            if !live {
                freed += entry.bytes;
            }
            live
        });
        entries.bytes -= freed;
    }

    /// How many messages are remembered.
    pub fn len(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .by_address
            .len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `value` as compact JSON. Serializing a `Value` cannot fail (its keys are strings).
pub fn to_json(value: &impl Serialize) -> Bytes {
    Bytes::from(serde_json::to_vec(value).unwrap_or_else(|_| b"null".to_vec()))
}

/// A JSON object body with one array member given as pre-serialized items, as the chunks to
/// send in order: the pre-serialized members (the tool set) first, then the array, then the
/// rest of `body` (an object without those keys). That order is the stable prefix of
/// DESIGN §12: what stays the same from request to request (tools, then the conversation so
/// far) comes before what changes (the newest messages, then options such as `max_tokens`).
/// The items are shared, not copied, so a long conversation costs no new memory.
pub fn splice_chunks(spliced: &Spliced, body: &Value) -> serde_json::Result<Vec<Bytes>> {
    const COMMA: Bytes = Bytes::from_static(b",");
    let rest = serde_json::to_vec(body)?;
    let mut chunks = Vec::with_capacity(spliced.items.len() * 2 + 2 * spliced.members.len() + 2);
    let mut head = b"{".to_vec();
    for (key, value) in &spliced.members {
        serde_json::to_writer(&mut head, key)?;
        head.push(b':');
        chunks.push(Bytes::from(std::mem::take(&mut head)));
        chunks.push(value.clone());
        head.push(b',');
    }
    serde_json::to_writer(&mut head, spliced.key)?;
    head.extend_from_slice(b":[");
    chunks.push(Bytes::from(head));
    for (index, item) in spliced.items.iter().enumerate() {
        if index > 0 && !spliced.joined {
            chunks.push(COMMA);
        }
        chunks.push(item.clone());
    }
    let mut tail = b"]".to_vec();
    // `rest` is `{}` or `{"k":…}`: continue the object after its brace.
    if rest.len() > 2 {
        tail.push(b',');
    }
    tail.extend_from_slice(rest.get(1..).unwrap_or(b"}"));
    chunks.push(Bytes::from(tail));
    Ok(chunks)
}

/// [`splice_chunks`] joined into one buffer.
pub fn splice(spliced: &Spliced, body: &Value) -> serde_json::Result<Vec<u8>> {
    Ok(splice_chunks(spliced, body)?.concat())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn a_message_is_encoded_once_while_something_holds_it() {
        let cache = EncodeCache::default();
        let message = Arc::new(Message::user_text("hello \"world\""));
        let mut calls = 0;
        let mut encode = || {
            calls += 1;
            vec![json!({"content": "hello \"world\"", "role": "user"})]
        };
        let first = cache.items(&message, &mut encode);
        let second = cache.items(&message, &mut encode);
        assert_eq!(calls, 1);
        assert_eq!(
            &first[0][..],
            br#"{"content":"hello \"world\"","role":"user"}"#
        );
        assert!(Arc::ptr_eq(&first, &second));
        cache.forget_dropped();
        assert_eq!(cache.len(), 1, "still held by the caller");
        drop(message);
        cache.forget_dropped();
        assert!(cache.is_empty());
    }

    fn spliced(items: Vec<Bytes>, members: Vec<(&'static str, Bytes)>) -> Spliced {
        Spliced {
            key: "messages",
            items,
            members,
            joined: false,
        }
    }

    #[test]
    fn splicing_gives_the_same_object_as_serializing_it_whole() {
        let items: Vec<Bytes> = vec![to_json(&json!({"a": 1})), to_json(&json!("x"))];
        let rest = json!({"model": "m", "stream": true});
        let bytes = splice(&spliced(items.clone(), vec![]), &rest).unwrap();
        let parsed: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            parsed,
            json!({"messages": [{"a": 1}, "x"], "model": "m", "stream": true})
        );
        let tools = vec![("tools", to_json(&json!([{"name": "t"}])))];
        let bytes = splice(&spliced(items, tools.clone()), &rest).unwrap();
        let parsed: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(
            parsed,
            json!({"messages": [{"a": 1}, "x"], "tools": [{"name": "t"}], "model": "m", "stream": true})
        );
        let alone = splice(&spliced(vec![], vec![]), &json!({})).unwrap();
        assert_eq!(alone, br#"{"messages":[]}"#);
        let alone = splice(&spliced(vec![], tools), &json!({})).unwrap();
        // The tools come first: they repeat in every request, the newest messages do not.
        assert_eq!(alone, br#"{"tools":[{"name":"t"}],"messages":[]}"#);
    }

    #[test]
    fn a_tool_set_is_encoded_once_while_requests_carry_it() {
        let cache = EncodeCache::default();
        let set: Arc<[ToolDefinition]> = Arc::from(vec![ToolDefinition {
            name: "read".into(),
            description: "reads".into(),
            parameters: json!({"type": "object"}),
        }]);
        let calls = std::cell::Cell::new(0);
        let encode = |tools: &[ToolDefinition]| {
            calls.set(calls.get() + 1);
            json!(
                tools
                    .iter()
                    .map(|tool| tool.name.clone())
                    .collect::<Vec<_>>()
            )
        };
        let first = cache.tools(&set, encode);
        let again = cache.tools(&set, encode);
        assert_eq!((calls.get(), &first[..]), (1, &br#"["read"]"#[..]));
        assert_eq!(first, again);
        // Another set, even with equal content, is encoded afresh.
        let other: Arc<[ToolDefinition]> = Arc::from(set.to_vec());
        cache.tools(&other, encode);
        assert_eq!(calls.get(), 2);
    }
}
