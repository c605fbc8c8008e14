//! The tool-result archiver (DESIGN §12): older large tool outputs leave the context.
//!
//! Planning reads the history and changes nothing: candidates are tool results outside the
//! most recent rounds, of at least the minimum size, of tools that are not control tools,
//! and not already archived, taken oldest first. Applying the plan turns each into a
//! receipt, still writing nothing: with a `read` tool, the receipt names an artifact that
//! holds the output whole (the one the output budget already wrote, or one [`save`] writes
//! once the receipts are admitted); without, it says the output was cut (a destructive
//! trim, head and tail kept). Every other message stays the same shared value, so what was
//! measured or encoded of it before is reused.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_protocol::{ContentBlock, Message, ToolResultMessage};
use keel_tools::Artifact;
use keel_tools::output::{human_bytes, private_file};
use serde_json::json;

use crate::measure::{MeasureCache, Size, message_size};

/// Tools whose results steer the work itself; they are never archived.
pub const CONTROL_TOOLS: &[&str] = &[
    "todowrite",
    "todo_write",
    "update_plan",
    "exit_plan_mode",
    "plan",
    "create_goal",
    "update_goal",
    "get_goal",
    "goal",
    "ask_user",
    "ask_user_question",
    "request_user_input",
];

/// The archiver's settings (`context.archive`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchiveConfig {
    /// Tool output kept inline outside the protected rounds once archiving starts (bytes).
    pub inline: u64,
    /// Tool output outside the protected rounds that starts archiving (bytes).
    pub water_mark: u64,
    /// Least saving that makes archiving at the water mark worth a new prompt prefix.
    pub min_saving: u64,
    /// Smallest output worth archiving (bytes).
    pub min_candidate: u64,
    /// Most recent rounds (an answer with tool calls and its results) never touched.
    pub protected_rounds: usize,
    /// Most tokens those rounds may hold: past it the older ones lose their protection, so
    /// a small window's room is not all spent on recent output (the newest round always
    /// keeps it).
    pub protected_tokens: u64,
}

impl Default for ArchiveConfig {
    fn default() -> Self {
        Self {
            inline: 64 * 1024,
            water_mark: 256 * 1024,
            min_saving: 256 * 1024,
            min_candidate: 2 * 1024,
            protected_rounds: 5,
            protected_tokens: u64::MAX,
        }
    }
}

/// What the plan should achieve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Goal {
    /// Bring the unprotected output down to the inline size, when it passed the water mark
    /// and the saving is worth it.
    WaterMark,
    /// Save at least this much (the request is over its budget by it); every candidate if
    /// needed.
    Save(Size),
}

/// A plan: which history messages become receipts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// History indexes, oldest first.
    pub indexes: Vec<usize>,
    /// Their summed size now.
    pub size: Size,
}

impl Plan {
    /// Whether the plan archives nothing.
    pub fn is_empty(&self) -> bool {
        self.indexes.is_empty()
    }
}

/// The text bytes of a tool result (what archiving removes).
fn output_bytes(result: &ToolResultMessage) -> u64 {
    result
        .content
        .iter()
        .filter_map(ContentBlock::as_text)
        .map(|t| t.len() as u64)
        .sum()
}

/// Whether a result is a receipt already.
fn is_archived(result: &ToolResultMessage) -> bool {
    result
        .details
        .as_ref()
        .is_some_and(|d| d.get("archived").is_some())
}

/// The index of the first message of the protected rounds: the `rounds`-th newest answer
/// that made tool calls (everything from it on is protected).
pub fn protected_from(history: &[Arc<Message>], rounds: usize) -> usize {
    if rounds == 0 {
        return history.len();
    }
    let mut seen = 0;
    for (i, message) in history.iter().enumerate().rev() {
        if message.as_assistant().is_some_and(|a| a.has_tool_calls()) {
            seen += 1;
            if seen == rounds {
                return i;
            }
        }
    }
    0
}

/// Where the protected rounds start: the configured number of newest rounds, fewer when
/// they hold more than `protected_tokens`, never fewer than one.
pub fn protected_start(
    history: &[Arc<Message>],
    cache: &MeasureCache,
    config: &ArchiveConfig,
) -> usize {
    let end = protected_from(history, config.protected_rounds);
    if config.protected_rounds == 0 || config.protected_tokens == u64::MAX {
        return end;
    }
    let newest = protected_from(history, 1);
    let mut start = newest;
    let mut held: u64 = history[newest..].iter().map(|m| cache.size(m).tokens).sum();
    for i in (end..newest).rev() {
        held += cache.size(&history[i]).tokens;
        if held > config.protected_tokens {
            break;
        }
        if history[i]
            .as_assistant()
            .is_some_and(|a| a.has_tool_calls())
        {
            start = i;
        }
    }
    start
}

/// Plans archiving for `history` (nothing changes).
pub fn plan(
    history: &[Arc<Message>],
    cache: &MeasureCache,
    config: &ArchiveConfig,
    goal: Goal,
) -> Plan {
    let end = protected_start(history, cache, config);
    let candidates: Vec<(usize, u64)> = history[..end]
        .iter()
        .enumerate()
        .filter_map(|(i, message)| {
            let result = message.as_tool_result()?;
            let bytes = output_bytes(result);
            (bytes >= config.min_candidate
                && !is_archived(result)
                && !CONTROL_TOOLS.contains(&result.tool_name.as_str()))
            .then_some((i, bytes))
        })
        .collect();
    let mut out = Plan::default();
    match goal {
        Goal::WaterMark => {
            let unprotected: u64 = candidates.iter().map(|(_, b)| b).sum();
            if unprotected < config.water_mark {
                return out;
            }
            let mut left = unprotected;
            for (i, bytes) in candidates {
                if left <= config.inline {
                    break;
                }
                left -= bytes;
                out.indexes.push(i);
                out.size += cache.size(&history[i]);
            }
            if out.size.bytes < config.min_saving {
                return Plan::default();
            }
        }
        Goal::Save(needed) => {
            // What a receipt leaves of each output, so the plan counts savings, not sizes.
            let receipt = Size::new(200, 800);
            let mut saved = Size::default();
            for (i, _) in candidates {
                if saved.tokens >= needed.tokens && saved.bytes >= needed.bytes {
                    break;
                }
                let size = cache.size(&history[i]);
                out.indexes.push(i);
                out.size += size;
                saved += Size::new(
                    size.tokens.saturating_sub(receipt.tokens),
                    size.bytes.saturating_sub(receipt.bytes),
                );
            }
        }
    }
    out
}

/// Where archived outputs go: the session's artifacts folder, when `read` can open it.
#[derive(Debug, Clone)]
pub enum Store {
    /// Write (or reuse) artifacts here; the receipt says how to `read` them.
    Artifacts(PathBuf),
    /// No `read` tool: the output is cut, head and tail kept.
    Trim,
}

/// Bytes of the head and of the tail a trim receipt keeps.
const TRIM_KEEP: usize = 512;
/// Bytes of the head an archive receipt shows.
const PREVIEW: usize = 256;

/// A receipt for `result`, stored the way `store` says, and the artifact still to be
/// written for it, if any.
fn receipt(
    result: &ToolResultMessage,
    store: &Store,
    index: usize,
) -> (ToolResultMessage, Option<PathBuf>) {
    let text: String = result
        .content
        .iter()
        .filter_map(ContentBlock::as_text)
        .collect();
    let bytes = text.len() as u64;
    let mut write = None;
    let (shown, archived) = match store {
        Store::Artifacts(dir) => {
            let artifact = match result.details.as_ref().and_then(Artifact::from_details) {
                // The output budget saved the whole output already.
                Some(artifact) if artifact.path.starts_with(dir) => artifact,
                _ => {
                    let path = artifact_path(dir, result, index);
                    write = Some(path.clone());
                    Artifact {
                        path,
                        bytes,
                        saved: bytes,
                    }
                }
            };
            let shown = format!(
                "[keel: this older output of `{}` ({}) was archived to keep the context small. \
                 It begins:]\n{}\n[… read the whole output with `read` at {} ({} bytes)]",
                result.tool_name,
                human_bytes(artifact.bytes.max(bytes)),
                &text[..text.floor_char_boundary(PREVIEW)],
                artifact.path.display(),
                artifact.saved,
            );
            let details = json!({"path": artifact.path, "bytes": artifact.bytes.max(bytes)});
            (shown, details)
        }
        Store::Trim => {
            let shown = format!(
                "{}\n[keel: {} of this older output of `{}` were removed to keep the context \
                 small; they cannot be read back]\n{}",
                &text[..text.floor_char_boundary(TRIM_KEEP)],
                human_bytes(bytes.saturating_sub(2 * TRIM_KEEP as u64)),
                result.tool_name,
                &text[text.ceil_char_boundary(text.len().saturating_sub(TRIM_KEEP))..],
            );
            (shown, json!({"trimmed": true, "bytes": bytes}))
        }
    };
    let mut details = match &result.details {
        Some(serde_json::Value::Object(map)) => map.clone(),
        Some(other) => {
            let mut map = serde_json::Map::new();
            map.insert("original".into(), other.clone());
            map
        }
        None => serde_json::Map::new(),
    };
    details.insert("archived".into(), archived);
    let images = result
        .content
        .iter()
        .filter(|b| matches!(b, ContentBlock::Image(_)))
        .cloned();
    let receipt = ToolResultMessage {
        tool_call_id: result.tool_call_id.clone(),
        tool_name: result.tool_name.clone(),
        content: std::iter::once(ContentBlock::text(shown))
            .chain(images)
            .collect(),
        details: Some(serde_json::Value::Object(details)),
        is_error: result.is_error,
        timestamp: result.timestamp,
    };
    (receipt, write)
}

/// Where a new artifact of `result` (at history `index`) goes. The index keeps names apart
/// when two ids clean up to the same characters.
fn artifact_path(dir: &Path, result: &ToolResultMessage, index: usize) -> PathBuf {
    let safe: String = result
        .tool_call_id
        .as_str()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .take(48)
        .collect();
    let name: String = result
        .tool_name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(32)
        .collect();
    dir.join(format!(
        "archived-{name}-{safe}-{index}-{}.txt",
        keel_protocol::now_ms()
    ))
}

/// What applying a plan made.
#[derive(Debug, Clone)]
pub struct Applied {
    /// The new history.
    pub history: Vec<Arc<Message>>,
    /// Size of the archived outputs before.
    pub before: Size,
    /// Size of their receipts.
    pub after: Size,
    /// Artifacts the receipts name that [`save`] must write: history index and path.
    pub writes: Vec<(usize, PathBuf)>,
}

/// Applies `plan` to `history`, writing nothing: the planned results become receipts,
/// nothing else changes. The receipts can be judged before [`save`] writes what they name.
pub fn apply(history: &[Arc<Message>], plan: &Plan, store: &Store) -> Applied {
    let mut out = history.to_vec();
    let mut before = Size::default();
    let mut after = Size::default();
    let mut writes = Vec::new();
    for &i in &plan.indexes {
        let Some(Message::ToolResult(result)) = history.get(i).map(|m| &**m) else {
            continue;
        };
        let (receipt, write) = receipt(result, store, i);
        let replaced = Message::ToolResult(receipt);
        before += message_size(&history[i]);
        after += message_size(&replaced);
        out[i] = Arc::new(replaced);
        writes.extend(write.map(|path| (i, path)));
    }
    Applied {
        history: out,
        before,
        after,
        writes,
    }
}

/// Writes the artifacts `writes` names, each with the text of the original `history`
/// message it archives.
pub fn save(history: &[Arc<Message>], writes: &[(usize, PathBuf)]) -> std::io::Result<()> {
    for (index, path) in writes {
        let Some(result) = history.get(*index).and_then(|m| m.as_tool_result()) else {
            continue;
        };
        let mut file = private_file(path)?;
        for text in result.content.iter().filter_map(ContentBlock::as_text) {
            file.write_all(text.as_bytes())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{AssistantMessage, StopReason, ToolCall};

    fn round(id: usize, tool: &str, bytes: usize) -> Vec<Arc<Message>> {
        let mut call = AssistantMessage::from_text("");
        call.content = vec![ContentBlock::ToolCall(ToolCall {
            id: format!("c{id}").into(),
            name: tool.into(),
            arguments: json!({}),
        })];
        call.stop_reason = StopReason::ToolUse;
        let result = ToolResultMessage {
            tool_call_id: format!("c{id}").into(),
            tool_name: tool.into(),
            content: vec![ContentBlock::text("x".repeat(bytes))],
            details: None,
            is_error: false,
            timestamp: 0,
        };
        vec![
            Arc::new(Message::Assistant(call)),
            Arc::new(Message::ToolResult(result)),
        ]
    }

    fn history() -> Vec<Arc<Message>> {
        let mut history = vec![Arc::new(Message::user_text("go"))];
        for i in 0..60 {
            let tool = if i % 7 == 3 { "todowrite" } else { "bash" };
            history.extend(round(i, tool, 8 * 1024));
        }
        history
    }

    #[test]
    fn the_plan_is_deterministic_and_spares_recent_rounds_and_control_tools() {
        let history = history();
        let cache = MeasureCache::default();
        let config = ArchiveConfig::default();
        let first = plan(&history, &cache, &config, Goal::WaterMark);
        let second = plan(&history, &MeasureCache::default(), &config, Goal::WaterMark);
        assert_eq!(first, second);
        assert!(!first.is_empty());
        let protected = protected_from(&history, 5);
        for &i in &first.indexes {
            assert!(i < protected);
            let result = history[i].as_tool_result().unwrap();
            assert_ne!(result.tool_name, "todowrite");
        }
        // Oldest first, stopping once what is left unprotected fits the inline size.
        assert!(first.indexes.windows(2).all(|w| w[0] < w[1]));
        let unprotected_left: u64 = history[..protected]
            .iter()
            .enumerate()
            .filter(|(i, m)| {
                !first.indexes.contains(i)
                    && m.as_tool_result().is_some_and(|r| r.tool_name == "bash")
            })
            .map(|(_, m)| output_bytes(m.as_tool_result().unwrap()))
            .sum();
        assert!(unprotected_left <= config.inline);
    }

    #[test]
    fn below_the_water_mark_nothing_is_planned() {
        let mut history = vec![Arc::new(Message::user_text("go"))];
        for i in 0..10 {
            history.extend(round(i, "bash", 8 * 1024));
        }
        let plan = plan(
            &history,
            &MeasureCache::default(),
            &ArchiveConfig::default(),
            Goal::WaterMark,
        );
        assert!(plan.is_empty());
    }

    #[test]
    fn receipts_replace_only_planned_results_and_name_their_artifact() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let artifacts = dir.path().join("artifacts");
        let history = history();
        let cache = MeasureCache::default();
        let plan = plan(&history, &cache, &ArchiveConfig::default(), Goal::WaterMark);
        let applied = apply(&history, &plan, &Store::Artifacts(artifacts.clone()));
        assert!(!artifacts.exists(), "applying writes nothing");
        assert_eq!(applied.writes.len(), plan.indexes.len());
        save(&history, &applied.writes).unwrap();
        assert!(applied.after.bytes < applied.before.bytes);
        for (i, (old, new)) in history.iter().zip(&applied.history).enumerate() {
            if plan.indexes.contains(&i) {
                let receipt = new.as_tool_result().unwrap();
                let path = receipt.details.as_ref().unwrap()["archived"]["path"]
                    .as_str()
                    .unwrap()
                    .to_owned();
                assert_eq!(
                    std::fs::read_to_string(&path).unwrap(),
                    "x".repeat(8 * 1024)
                );
                assert!(receipt.text().contains(&path));
                assert_eq!(
                    receipt.tool_call_id,
                    old.as_tool_result().unwrap().tool_call_id
                );
            } else {
                assert!(
                    Arc::ptr_eq(old, new),
                    "message {i} must stay the same value"
                );
            }
        }
        // A second plan finds nothing new to archive in what is left.
        let again = plan_again(&applied.history);
        assert!(again.is_empty());
    }

    fn plan_again(history: &[Arc<Message>]) -> Plan {
        plan(
            history,
            &MeasureCache::default(),
            &ArchiveConfig::default(),
            Goal::WaterMark,
        )
    }

    #[test]
    fn without_read_the_receipt_is_a_trim() {
        let history = history();
        let plan = plan(
            &history,
            &MeasureCache::default(),
            &ArchiveConfig::default(),
            Goal::Save(Size::new(1, 1)),
        );
        assert_eq!(plan.indexes.len(), 1);
        let applied = apply(&history, &plan, &Store::Trim);
        assert!(applied.writes.is_empty());
        let text = applied.history[plan.indexes[0]]
            .as_tool_result()
            .unwrap()
            .text();
        assert!(text.contains("cannot be read back"), "{text}");
        assert!(text.len() < 2 * 1024);
    }
}
