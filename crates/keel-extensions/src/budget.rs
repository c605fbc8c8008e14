//! The tool-output budget (host-owned): a tool result larger than the inline limit
//! (`output_budget.inline_kib`, 64 KiB) is stored whole as an artifact in the session's
//! folder, and the model gets its head, its tail and a receipt naming the artifact, its
//! true size and how to page it with `read`. Source markers in the result are kept whole.
//!
//! Tools that stream (bash) already wrote their artifact as the output arrived, so nothing
//! large ever sat in memory; this reports those and archives the rest. It is mounted after
//! every configurable extension so it judges each result as they left it.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use keel_agent::runner::AfterToolCallHook;
use keel_agent::{HookError, ToolOutput, TurnContext};
use keel_protocol::{ContentBlock, ToolCall};
use keel_runtime::extension::{
    Extension, ExtensionApi, ExtensionError, ExtensionEvent, Hook, TurnScope,
};
use keel_tools::{Artifact, OutputLimits};
use serde_json::json;

use crate::OUTPUT_BUDGET;
use crate::sources::is_marker;
use crate::text::{cut, tail};

/// The output budget extension.
pub struct OutputBudget;

impl Extension for OutputBudget {
    fn id(&self) -> &str {
        OUTPUT_BUDGET
    }

    fn description(&self) -> Option<&str> {
        Some("archives tool output larger than the budget and shows its head and tail")
    }

    fn init(&self, api: &ExtensionApi) -> Result<(), ExtensionError> {
        let limits = api.config().output_budget.limits().unwrap_or_default();
        api.on_each_turn(
            ExtensionEvent::AfterToolCall,
            Arc::new(move |scope: &TurnScope| {
                Hook::AfterToolCall(Arc::new(TurnBudget {
                    scope: scope.clone(),
                    limits,
                }))
            }),
        )
    }
}

struct TurnBudget {
    scope: TurnScope,
    limits: OutputLimits,
}

impl TurnBudget {
    /// Where this session's artifacts go.
    fn dir(&self) -> Option<PathBuf> {
        match &self.scope.host {
            Some(host) => Some(host.env.artifact_dir().to_path_buf()),
            None => self
                .scope
                .session_dir
                .as_ref()
                .map(|dir| dir.join(keel_runtime::services::ARTIFACTS_DIR)),
        }
    }

    /// Whether `call` reads a page of an artifact: archiving that page again would send the
    /// model round in circles (with an inline limit below `read`'s page size).
    fn pages_an_artifact(&self, call: &ToolCall, dir: &Path) -> bool {
        call.name == "read"
            && call
                .arguments
                .get("path")
                .and_then(|p| p.as_str())
                .is_some_and(|p| keel_tools::env::normalize(Path::new(p)).starts_with(dir))
    }

    fn archived(&self, call: &ToolCall, artifact: &Artifact) {
        self.scope.emit(
            OUTPUT_BUDGET,
            "archived",
            json!({"tool": call.name, "tool_call_id": call.id, "path": artifact.path,
                   "bytes": artifact.bytes, "saved": artifact.saved}),
        );
    }
}

#[async_trait]
impl AfterToolCallHook for TurnBudget {
    async fn after_tool_call(
        &self,
        _turn: &TurnContext,
        call: &ToolCall,
        output: ToolOutput,
    ) -> Result<ToolOutput, HookError> {
        let Some(dir) = self.dir() else {
            return Ok(output);
        };
        let size: usize = output
            .content
            .iter()
            .filter(|b| !is_marker(b))
            .filter_map(ContentBlock::as_text)
            .map(str::len)
            .sum();
        if let Some(artifact) = output.details.as_ref().and_then(Artifact::from_details)
            && artifact.path.starts_with(&dir)
            && size <= self.limits.inline
        {
            // Streamed to this session's artifacts by the tool itself (bash), and within
            // the budget; a claim of an artifact elsewhere, or with more text than the
            // budget allows, is judged like any result.
            self.archived(call, &artifact);
            return Ok(output);
        }
        if size <= self.limits.inline || self.pages_an_artifact(call, &dir) {
            return Ok(output);
        }
        let text = archived_text(&output);
        let limits = self.limits;
        match archive(&dir, call, &text, limits) {
            Ok(artifact) => {
                self.archived(call, &artifact);
                let shown = format!(
                    "{}\n\n{}\n\n{}",
                    cut(&text, limits.head),
                    artifact.receipt(limits.head + limits.tail),
                    tail(&text, limits.tail)
                );
                Ok(rebuild(output, shown, Some(&artifact)))
            }
            Err(error) => {
                // The model still must not get it all: keep head and tail, say why.
                self.scope.emit(
                    OUTPUT_BUDGET,
                    "archive_failed",
                    json!({"tool": call.name, "tool_call_id": call.id, "error": error.to_string()}),
                );
                let shown = format!(
                    "{}\n\n[keel: output too large: {} in all, {} omitted; it could not be saved ({error})]\n\n{}",
                    cut(&text, limits.head),
                    keel_tools::output::human_bytes(size as u64),
                    keel_tools::output::human_bytes(
                        size.saturating_sub(limits.head + limits.tail) as u64
                    ),
                    tail(&text, limits.tail)
                );
                Ok(rebuild(output, shown, None))
            }
        }
    }
}

/// A file name for `call`'s artifact: the tool, the call id's safe characters, a stamp.
fn artifact_name(call: &ToolCall) -> String {
    let safe = |s: &str| -> String {
        s.chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .take(48)
            .collect()
    };
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{}-{}-{stamp}.txt",
        safe(&call.name),
        safe(call.id.as_str())
    )
}

/// The text an archive keeps: every text block but the source markers.
fn archived_text(output: &ToolOutput) -> String {
    output
        .content
        .iter()
        .filter(|b| !is_marker(b))
        .filter_map(ContentBlock::as_text)
        .collect()
}

/// Writes `text` (up to the artifact cap) to a new artifact for `call` in `dir`.
fn archive(
    dir: &Path,
    call: &ToolCall,
    text: &str,
    limits: OutputLimits,
) -> std::io::Result<Artifact> {
    let path = dir.join(artifact_name(call));
    let room = limits.room_in(dir).map_err(std::io::Error::other)?;
    let mut file = keel_tools::output::private_file(&path)?;
    let cap = usize::try_from(room).unwrap_or(usize::MAX);
    let saved = cut(text, cap);
    file.write_all(saved.as_bytes())?;
    Ok(Artifact {
        path,
        bytes: text.len() as u64,
        saved: saved.len() as u64,
    })
}

/// The output with its text replaced by `shown`, images and source markers kept, and the
/// artifact named in its details.
fn rebuild(mut output: ToolOutput, shown: String, artifact: Option<&Artifact>) -> ToolOutput {
    let kept: Vec<ContentBlock> = output
        .content
        .drain(..)
        .filter(|b| is_marker(b) || matches!(b, ContentBlock::Image(_)))
        .collect();
    output.content = std::iter::once(ContentBlock::text(shown))
        .chain(kept)
        .collect();
    if let Some(artifact) = artifact {
        let details = output.details.get_or_insert_with(|| json!({}));
        match details {
            serde_json::Value::Object(map) => {
                map.insert("artifact".into(), artifact.details());
            }
            other => {
                *other = json!({"original": other.clone(), "artifact": artifact.details()});
            }
        }
    }
    output
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_large_output_becomes_head_receipt_tail_with_markers_kept() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let artifacts = dir.path().join("artifacts");
        let body = format!("HEAD{}TAIL", "x".repeat(200 * 1024));
        let marker = crate::sources::new_marker("S1", "https://example.com/", None).unwrap();
        let output = ToolOutput {
            content: vec![ContentBlock::text(body.clone()), marker.clone()],
            details: Some(json!({"url": "https://example.com/"})),
            ..ToolOutput::default()
        };
        let call = ToolCall {
            id: "call/../1".into(),
            name: "web_fetch".into(),
            arguments: json!({}),
        };
        let budget = TurnBudget {
            scope: keel_runtime::extension::TurnScope {
                session_dir: Some(dir.path().to_path_buf()),
                ..keel_runtime::extension::TurnScope::detached("s-1".into(), "t-1".into())
            },
            limits: OutputLimits::default(),
        };
        let turn = TurnContext {
            session_id: "s-1".into(),
            turn_id: "t-1".into(),
        };
        let shown = budget.after_tool_call(&turn, &call, output).await.unwrap();
        let artifact = Artifact::from_details(shown.details.as_ref().unwrap()).unwrap();
        assert_eq!(std::fs::read_to_string(&artifact.path).unwrap(), body);
        assert_eq!(artifact.path.parent().unwrap(), artifacts);
        assert!(!artifact.path.to_string_lossy().contains(".."));
        let text = shown.content[0].as_text().unwrap();
        assert!(text.starts_with("HEAD") && text.ends_with("TAIL"));
        assert!(
            text.contains("200.0 KiB in all"),
            "{}",
            &text[16 * 1024..16 * 1024 + 300]
        );
        assert!(text.len() < 33 * 1024 + 500);
        assert_eq!(shown.content[1], marker);
        assert_eq!(
            shown.details.unwrap()["artifact"]["bytes"],
            json!(body.len())
        );
    }
}
