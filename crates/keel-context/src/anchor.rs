//! The usage anchor (DESIGN §12): the provider's own count of the last request, from the
//! usage its answer reported, plus the estimated growth since, decides when to compact.
//!
//! An anchor counts only while everything it was measured under still holds: the session,
//! provider, API, model, the system prompt's and tools' fingerprints, the history epoch (a
//! replacement starts a new one) and the anchored message itself at its place in history.
//! Any change drops it and the local estimate decides alone. The anchor only triggers;
//! whether a smaller history fits is judged on fresh estimates.

use std::sync::{Arc, Weak};

use keel_protocol::{Message, StopReason};
use sha2::{Digest, Sha256};

use crate::measure::MeasureCache;

/// What an anchor was measured under.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AnchorKey {
    /// The session.
    pub session: String,
    /// Provider name.
    pub provider: String,
    /// Wire API.
    pub api: String,
    /// Model id.
    pub model: String,
    /// SHA-256 of the system prompt (first 16 bytes).
    pub system: [u8; 16],
    /// SHA-256 of the tool definitions' JSON (first 16 bytes).
    pub tools: [u8; 16],
    /// The session's history epoch in this process.
    pub epoch: u64,
}

/// The first 16 bytes of `text`'s SHA-256.
pub fn fingerprint(text: &[u8]) -> [u8; 16] {
    let digest = Sha256::digest(text);
    let mut out = [0u8; 16];
    out.copy_from_slice(&digest[..16]);
    out
}

/// An anchored usage report.
#[derive(Debug, Clone)]
pub struct UsageAnchor {
    /// What it was measured under.
    pub key: AnchorKey,
    /// Where the anchored answer sits in history.
    pub index: usize,
    /// The anchored answer.
    pub message: Weak<Message>,
    /// Tokens the provider counted for its request and answer.
    pub tokens: u64,
}

/// The newest answer in `history` whose usage can anchor: a finished (not failed or
/// aborted) answer of `provider`/`api`/`model` that reported tokens. Its count is the
/// request's input (cached or not) and the answer's output without hidden reasoning.
pub fn eligible(
    history: &[Arc<Message>],
    provider: &str,
    api: &str,
    model: &str,
) -> Option<(usize, u64)> {
    history.iter().enumerate().rev().find_map(|(i, message)| {
        let answer = message.as_assistant()?;
        if matches!(answer.stop_reason, StopReason::Error | StopReason::Aborted) {
            return None;
        }
        let usage = answer.usage;
        // Reasoning the provider does not get back is not part of the next request.
        let output = usage.output.saturating_sub(usage.reasoning);
        let tokens = usage.input + usage.cache_read + usage.cache_write + output;
        (tokens > 0 && answer.provider == provider && answer.api == api && answer.model == model)
            .then_some((i, tokens))
    })
}

impl UsageAnchor {
    /// Whether this anchor still holds for `key` over `history`: every bound field equal,
    /// and the anchored answer still at its place.
    pub fn holds(&self, key: &AnchorKey, history: &[Arc<Message>]) -> bool {
        self.key == *key
            && history.get(self.index).is_some_and(|m| {
                self.message
                    .upgrade()
                    .is_some_and(|anchored| Arc::ptr_eq(&anchored, m))
            })
    }

    /// The anchored count plus the estimated growth since the anchored answer; `None` when
    /// the anchor no longer holds.
    pub fn estimate(
        &self,
        key: &AnchorKey,
        history: &[Arc<Message>],
        cache: &MeasureCache,
    ) -> Option<u64> {
        if !self.holds(key, history) {
            return None;
        }
        let growth = cache.total(history.get(self.index + 1..).unwrap_or(&[]));
        Some(self.tokens.saturating_add(growth.tokens))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{AssistantMessage, Usage};

    fn key() -> AnchorKey {
        AnchorKey {
            session: "s-1".into(),
            provider: "p".into(),
            api: "a".into(),
            model: "m".into(),
            system: fingerprint(b"system"),
            tools: fingerprint(b"[]"),
            epoch: 0,
        }
    }

    fn answer(tokens: u64) -> Arc<Message> {
        let mut message = AssistantMessage::from_text("ok");
        message.provider = "p".into();
        message.api = "a".into();
        message.model = "m".into();
        message.usage = Usage {
            input: tokens,
            ..Usage::default()
        };
        Arc::new(Message::Assistant(message))
    }

    #[test]
    fn every_bound_field_changing_forces_a_recheck() {
        let history = vec![Arc::new(Message::user_text("hi")), answer(5_000)];
        let (index, tokens) = eligible(&history, "p", "a", "m").unwrap();
        let anchor = UsageAnchor {
            key: key(),
            index,
            message: Arc::downgrade(&history[index]),
            tokens,
        };
        let cache = MeasureCache::default();
        assert_eq!(anchor.estimate(&key(), &history, &cache), Some(5_000));
        type Change = Box<dyn Fn(&mut AnchorKey)>;
        let changes: Vec<(&str, Change)> = vec![
            ("session", Box::new(|k| k.session = "s-2".into())),
            ("provider", Box::new(|k| k.provider = "q".into())),
            ("api", Box::new(|k| k.api = "b".into())),
            ("model", Box::new(|k| k.model = "n".into())),
            ("system", Box::new(|k| k.system = fingerprint(b"other"))),
            ("tools", Box::new(|k| k.tools = fingerprint(b"[{}]"))),
            ("epoch", Box::new(|k| k.epoch = 1)),
        ];
        for (field, change) in changes {
            let mut changed = key();
            change(&mut changed);
            assert_eq!(anchor.estimate(&changed, &history, &cache), None, "{field}");
        }
        // The anchored message replaced at its place (same length, other message).
        let mut replaced = history.clone();
        replaced[1] = answer(5_000);
        assert_eq!(anchor.estimate(&key(), &replaced, &cache), None, "message");
        // Growth after the anchor is added.
        let mut grown = history.clone();
        grown.push(Arc::new(Message::user_text("more")));
        assert!(anchor.estimate(&key(), &grown, &cache).unwrap() > 5_000);
    }

    #[test]
    fn failed_answers_and_other_models_do_not_anchor() {
        let mut failed = AssistantMessage::from_text("");
        failed.stop_reason = StopReason::Error;
        failed.usage.input = 9;
        let history = vec![answer(100), Arc::new(Message::Assistant(failed))];
        assert_eq!(eligible(&history, "p", "a", "m"), Some((0, 100)));
        assert_eq!(eligible(&history, "p", "a", "other"), None);
    }
}
