//! The replay registry: recognises retried commits (DESIGN §13).
//!
//! A retry carries the same session id and operation id. Its semantic fingerprint, SHA-256 over
//! the canonical JSON (sorted keys, no whitespace) of what the operation says, tells a true retry
//! (same content: hand back the earlier receipt, write nothing) from a reused id (different
//! content: conflict). The registry is in-process and bounded by entries and bytes, oldest out
//! first; behind it the `commits` table still knows every operation id, so an evicted or
//! pre-restart retry is recognised too, only more slowly.

use std::collections::{HashMap, VecDeque};

use keel_protocol::SessionId;
use sha2::{Digest, Sha256};

use crate::error::Result;
use crate::model::{CommitReceipt, CommitRequest};

/// Most operations remembered (DESIGN §13, issue 5).
pub const REPLAY_MAX_ENTRIES: usize = 2_048;
/// Most bytes of operation content remembered (DESIGN §13, issue 5).
pub const REPLAY_MAX_BYTES: usize = 64 * 1024 * 1024;

/// The fingerprint of a request and the size of its canonical form.
pub fn fingerprint(request: &CommitRequest) -> Result<(String, usize)> {
    let content = serde_json::json!({
        "turn_id": request.turn_id,
        "expected_revision": request.expected_revision,
        "op": request.op,
    });
    // Hashed as it is written: a commit carries whole messages, and a copy of their
    // canonical text would only be hashed and dropped.
    let mut sink = HashSink {
        hasher: Sha256::new(),
        bytes: 0,
    };
    keel_protocol::canonical::write(&content, &mut sink)?;
    let digest = sink.hasher.finalize();
    let mut hex = String::with_capacity(64);
    for byte in digest.iter() {
        hex.push(char::from(HEX[usize::from(byte >> 4)]));
        hex.push(char::from(HEX[usize::from(byte & 15)]));
    }
    Ok((hex, sink.bytes))
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Feeds what is written to SHA-256, counting the bytes.
struct HashSink {
    hasher: Sha256,
    bytes: usize,
}

impl std::io::Write for HashSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.hasher.update(buf);
        self.bytes += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What the registry says about a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replay {
    /// Never seen: run it.
    New,
    /// Seen with the same content: return this receipt.
    Same(CommitReceipt),
    /// Seen with other content: conflict.
    Different,
}

struct Remembered {
    fingerprint: String,
    receipt: CommitReceipt,
    bytes: usize,
}

/// Bounded map from (session id, operation id) to the fingerprint and receipt of its commit.
#[derive(Default)]
pub struct ReplayRegistry {
    entries: HashMap<(SessionId, String), Remembered>,
    order: VecDeque<(SessionId, String)>,
    bytes: usize,
}

impl ReplayRegistry {
    /// Looks a request up.
    pub fn check(&self, session: &SessionId, operation: &str, fingerprint: &str) -> Replay {
        match self.entries.get(&(session.clone(), operation.to_owned())) {
            None => Replay::New,
            Some(seen) if seen.fingerprint == fingerprint => Replay::Same(seen.receipt.clone()),
            Some(_) => Replay::Different,
        }
    }

    /// Remembers a committed request, evicting the oldest beyond the bounds.
    pub fn remember(&mut self, fingerprint: String, bytes: usize, receipt: CommitReceipt) {
        let key = (receipt.session_id.clone(), receipt.operation_id.clone());
        let bytes = bytes + fingerprint.len() + key.1.len();
        if let Some(old) = self.entries.insert(
            key.clone(),
            Remembered {
                fingerprint,
                receipt,
                bytes,
            },
        ) {
            self.bytes -= old.bytes;
            self.order.retain(|k| *k != key);
        }
        self.bytes += bytes;
        self.order.push_back(key);
        while self.entries.len() > REPLAY_MAX_ENTRIES || self.bytes > REPLAY_MAX_BYTES {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some(old) = self.entries.remove(&oldest) {
                self.bytes -= old.bytes;
            }
        }
    }

    /// Operations remembered.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes accounted.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CommitKind;

    fn receipt(operation: &str) -> CommitReceipt {
        CommitReceipt {
            session_id: SessionId::new("s-1"),
            operation_id: operation.into(),
            kind: CommitKind::Append,
            revision: 1,
            epoch: 0,
            length: 1,
            written: 1,
        }
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_level() {
        let value = serde_json::json!({"b": [{"z": 1, "a": 2.5}], "a": "x", "q\"": null});
        let mut out = Vec::new();
        keel_protocol::canonical::write(&value, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"a":"x","b":[{"a":2.5,"z":1}],"q\"":null}"#
        );
    }

    /// The hash covers exactly the canonical text, so fingerprints stored by earlier
    /// versions (which hashed a copy of that text) still match.
    #[test]
    fn the_fingerprint_is_the_hash_of_the_canonical_text() {
        let request = CommitRequest {
            session_id: SessionId::new("s-1"),
            operation_id: "op".into(),
            turn_id: None,
            expected_revision: Some(3),
            op: crate::model::HistoryOp::Rewind { to_revision: 2 },
        };
        let (print, bytes) = fingerprint(&request).unwrap();
        let text =
            r#"{"expected_revision":3,"op":{"kind":"rewind","to_revision":2},"turn_id":null}"#;
        let digest = Sha256::digest(text.as_bytes());
        let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
        assert_eq!((print, bytes), (hex, text.len()));
    }

    #[test]
    fn the_oldest_entry_goes_first_when_full() {
        let session = SessionId::new("s-1");
        let mut registry = ReplayRegistry::default();
        for n in 0..REPLAY_MAX_ENTRIES + 3 {
            registry.remember(format!("f{n}"), 10, receipt(&format!("op{n}")));
        }
        assert_eq!(registry.len(), REPLAY_MAX_ENTRIES);
        assert_eq!(registry.check(&session, "op0", "f0"), Replay::New);
        assert_eq!(
            registry.check(&session, "op3", "f3"),
            Replay::Same(receipt("op3"))
        );
        assert_eq!(registry.check(&session, "op3", "other"), Replay::Different);
    }

    #[test]
    fn bytes_bound_evicts_too() {
        let mut registry = ReplayRegistry::default();
        registry.remember("a".into(), REPLAY_MAX_BYTES / 2, receipt("op1"));
        registry.remember("b".into(), REPLAY_MAX_BYTES / 2, receipt("op2"));
        assert_eq!(registry.len(), 1);
        assert!(registry.bytes() <= REPLAY_MAX_BYTES);
    }
}
