//! `edit`: exact string replacements in a file, all or nothing, with a unified diff.
//!
//! Each edit's `old_string` must match exactly once (or `replace_all`). When it matches
//! nowhere, a fallback compares whole lines with trailing whitespace ignored and curly quotes
//! read as straight ones, because models often reproduce a line with those two differences;
//! the fallback must also find exactly one place.

use std::path::PathBuf;
use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use keel_agent::{AgentTool, ToolCallContext, ToolError, ToolNature, ToolOutput};
use keel_protocol::{ContentBlock, ToolCallId, ToolDefinition, ToolPreview};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::preview::{self, Held, Shown};
use super::{BOM, TextStyle, ensure_regular, io_message, pinned, plain, read_pinned};
use crate::args::{self, NonEmpty};
use crate::env::ToolEnv;
use crate::output::head_tail;

// No doc comment: it would become the items' description, which the field docs cover.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EditSpec {
    /// Exact text to replace
    old_string: String,
    /// Replacement text
    new_string: String,
    /// Replace every occurrence
    #[serde(default)]
    replace_all: bool,
}

/// The arguments of `edit`; its doc comments are the descriptions the model reads.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    /// File path, absolute or relative to the working folder
    path: String,
    edits: NonEmpty<Vec<EditSpec>>,
}

static DEFINITION: LazyLock<ToolDefinition> = LazyLock::new(|| ToolDefinition {
    name: "edit".into(),
    description:
        "Replace text in an existing file. Each edit replaces `old_string` with `new_string`; \
        `old_string` must match exactly once unless `replace_all` is true (include enough \
        surrounding lines to make it unique). Edits apply in order; if any fails, none is \
        written. The result is a unified diff."
            .into(),
    parameters: args::schema::<Args>(),
});

/// The `edit` tool.
pub struct Edit {
    env: Arc<ToolEnv>,
    shown: Arc<Shown>,
}

impl Edit {
    /// An edit tool over `env`.
    pub fn new(env: Arc<ToolEnv>) -> Self {
        Self {
            env,
            shown: Arc::default(),
        }
    }
}

#[async_trait]
impl AgentTool for Edit {
    fn nature(&self) -> ToolNature {
        ToolNature::WritesFile { path: "path" }
    }

    fn definition(&self) -> &ToolDefinition {
        &DEFINITION
    }

    fn mutated_path(&self, arguments: &serde_json::Value) -> Option<PathBuf> {
        arguments
            .get("path")
            .and_then(|p| p.as_str())
            .map(|p| self.env.resolve(p))
    }

    async fn preview(
        &self,
        call: &ToolCallId,
        arguments: &serde_json::Value,
    ) -> Option<ToolPreview> {
        let args: Args = serde_json::from_value(arguments.clone()).ok()?;
        // A missing file cannot be edited: the call fails when run.
        let (path, original) = preview::starting_text(&self.env, &args.path).await?;
        let original = original?;
        // An edit that cannot apply fails when run; its question shows the call alone.
        let text = std::str::from_utf8(&original).ok()?;
        let (after, _) = apply(&path, text, &args.edits).ok()?;
        self.shown.remember(call, Some(&original));
        Some(preview::file(&path, Some(text), &after))
    }

    async fn execute(
        &self,
        arguments: serde_json::Value,
        context: ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        let args: Args = args::arguments(arguments)?;
        let path = pinned::resolve(&self.env, &self.env.resolve(&args.path), true)?;
        let held = Held {
            shown: self.shown.clone(),
            call: context.tool_call_id,
        };
        // The plan file is keel's, in keel's home: always the disk, never an editor's buffer.
        if let Some(editor) = super::in_editor(&self.env, &path)
            && let Some(_hold) = crate::bash::quiet::editor_hold(&self.env).await
        {
            // Checked again now that no command can run until the editor is done.
            let path = pinned::resolve(&self.env, &self.env.resolve(&args.path), true)?;
            return edit_in_editor(&editor, path, &args.edits, &held).await;
        }
        tokio::task::spawn_blocking(move || edit(path, &args.edits, &held))
            .await
            .map_err(|e| ToolError::new(format!("edit failed: {e}")))?
    }
}

/// Largest diff shown to the model; the full diff stays in the details.
const MAX_DIFF: usize = 32 * 1024;

fn edit(path: PathBuf, edits: &[EditSpec], held: &Held) -> Result<ToolOutput, ToolError> {
    match ensure_regular(&path) {
        Ok(true) => {}
        Ok(false) => {
            return Err(ToolError::new(format!(
                "Cannot edit {}: no such file or folder.",
                path.display()
            )));
        }
        Err(problem) => return Err(problem.into()),
    }
    let bytes = read_pinned(&path).map_err(|e| ToolError::new(io_message("edit", &path, &e)))?;
    held.check(&path, Some(&bytes))?;
    let original = String::from_utf8(bytes).map_err(|_| {
        ToolError::new(format!(
            "{} is not valid UTF-8 text; it cannot be edited as text.",
            path.display()
        ))
    })?;
    let (text, output) = apply(&path, &original, edits)?;
    // An existing file keeps its mode; the mode given is never used.
    pinned::write(&path, text.as_bytes(), 0o600)
        .map_err(|e| ToolError::new(io_message("write", &path, &e)))?;
    Ok(output)
}

/// The edit through the editor: it gives the text (unsaved changes included) and takes the
/// result.
async fn edit_in_editor(
    editor: &super::editor::Editor,
    path: PathBuf,
    edits: &[EditSpec],
    held: &Held,
) -> Result<ToolOutput, ToolError> {
    if let Err(problem) = ensure_regular(&path) {
        return Err(problem.into());
    }
    let before = super::editor::identity(&path)?;
    let original = editor.0.read_text(&path).await.map_err(|e| {
        ToolError::new(format!("Cannot read {} in the editor: {e}", path.display()))
    })?;
    super::editor::recheck(&path, before)?;
    held.check(&path, Some(original.as_bytes()))?;
    let (text, output) = apply(&path, &original, edits)?;
    editor.0.write_text(&path, &text).await.map_err(|e| {
        ToolError::new(format!(
            "Cannot write {} in the editor: {e}",
            path.display()
        ))
    })?;
    super::editor::recheck(&path, None)?;
    Ok(output)
}

/// The edited text (BOM included) and what the tool reports, or why the edits do not apply.
fn apply(
    path: &std::path::Path,
    original: &str,
    edits: &[EditSpec],
) -> Result<(String, ToolOutput), ToolError> {
    let style = TextStyle::of(original);
    let bom = if style.bom { BOM } else { "" };
    // Edit the raw text: lines keep their own endings, only the edited text takes the
    // file's usual one.
    let before = original.strip_prefix(BOM).unwrap_or(original).to_owned();
    let line_style = TextStyle {
        crlf: style.crlf,
        bom: false,
    };
    let mut text = before.clone();
    let mut replacements = 0usize;
    let mut fuzzy = Vec::new();
    for (n, spec) in edits.iter().enumerate() {
        let which = if edits.len() > 1 {
            format!("Edit {}: ", n + 1)
        } else {
            String::new()
        };
        let old = line_style.apply(&plain(&spec.old_string));
        let new = line_style.apply(&plain(&spec.new_string));
        if old.is_empty() {
            return Err(ToolError::new(format!(
                "{which}old_string is empty; to create a file use `write`."
            )));
        }
        if old == new {
            return Err(ToolError::new(format!(
                "{which}old_string and new_string are the same; nothing would change."
            )));
        }
        let count = text.matches(&old).count();
        match count {
            0 => match fuzzy_replace(&text, &old, &new) {
                Ok(replaced) => {
                    text = replaced;
                    replacements += 1;
                    fuzzy.push(n + 1);
                }
                Err(problem) => {
                    return Err(ToolError::new(format!(
                        "{which}old_string was not found in {}{problem}. Read the file again and copy the text exactly.",
                        path.display()
                    )));
                }
            },
            1 => {
                text = text.replacen(&old, &new, 1);
                replacements += 1;
            }
            _ if spec.replace_all => {
                text = text.replace(&old, &new);
                replacements += count;
            }
            _ => {
                return Err(ToolError::new(format!(
                    "{which}old_string matches {count} times in {} (at lines {}); include more surrounding text to make it unique, or set replace_all.",
                    path.display(),
                    match_lines(&text, &old)
                )));
            }
        }
    }
    let shown = path.display().to_string();
    let (old_plain, new_plain) = (plain(&before), plain(&text));
    let diff = similar::TextDiff::from_lines(&old_plain, &new_plain)
        .unified_diff()
        .context_radius(3)
        .header(&shown, &shown)
        .to_string();
    let mut summary = format!(
        "Edited {} ({replacements} replacement{}).",
        path.display(),
        if replacements == 1 { "" } else { "s" }
    );
    if !fuzzy.is_empty() {
        summary.push_str(&format!(
            " Edit(s) {fuzzy:?} matched only after normalising whitespace and quote style."
        ));
    }
    let (diff_shown, _) = head_tail(&diff, MAX_DIFF);
    let output = ToolOutput {
        content: vec![ContentBlock::text(format!("{summary}\n\n{diff_shown}"))],
        details: Some(
            json!({"path": path, "replacements": replacements, "diff": diff, "fuzzy": fuzzy}),
        ),
        ..ToolOutput::default()
    };
    Ok((format!("{bom}{text}"), output))
}

/// Line numbers (1-based) where `needle` starts, for the "matches several times" message.
fn match_lines(text: &str, needle: &str) -> String {
    let starts: Vec<String> = text
        .match_indices(needle)
        .take(10)
        .map(|(at, _)| (text[..at].matches('\n').count() + 1).to_string())
        .collect();
    starts.join(", ")
}

fn normalize_line(line: &str) -> String {
    let quotes: String = line
        .chars()
        .map(|c| match c {
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{2032}' => '\'',
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{2033}' => '"',
            other => other,
        })
        .collect();
    // Whitespace differences (indentation width, tabs, trailing spaces, CR) do not count.
    quotes.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The fallback: find the one run of whole lines equal to `old`'s lines after
/// normalisation and replace it with `new`.
/// Why a whitespace-blind match did not replace anything; said after "was not found".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum NoMatch {
    /// Nothing matches.
    #[error("")]
    Missing,
    /// More than one place matches.
    #[error(" (ignoring whitespace and quote style it matches {0} places, so it is ambiguous)")]
    Ambiguous(usize),
}

fn fuzzy_replace(text: &str, old: &str, new: &str) -> Result<String, NoMatch> {
    let wanted: Vec<String> = old
        .trim_end_matches(['\n', '\r'])
        .split('\n')
        .map(normalize_line)
        .collect();
    let lines: Vec<&str> = text.split('\n').collect();
    let normalized: Vec<String> = lines.iter().map(|l| normalize_line(l)).collect();
    let hits: Vec<usize> = (0..normalized.len().saturating_sub(wanted.len() - 1))
        .filter(|&i| normalized[i..i + wanted.len()] == wanted[..])
        .collect();
    match hits.as_slice() {
        [start] => {
            let end = start + wanted.len();
            let mut out: Vec<String> = lines[..*start].iter().map(|l| (*l).to_owned()).collect();
            let mut replacement = new.strip_suffix('\n').unwrap_or(new).to_owned();
            // The last replaced line keeps its own CR when the file's line had one.
            if lines[end - 1].ends_with('\r') && !replacement.ends_with('\r') {
                replacement.push('\r');
            }
            out.push(replacement);
            out.extend(lines[end..].iter().map(|l| (*l).to_owned()));
            Ok(out.join("\n"))
        }
        [] => Err(NoMatch::Missing),
        several => Err(NoMatch::Ambiguous(several.len())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fuzzy_matching_ignores_trailing_spaces_and_quote_style() {
        let text = "fn a() {\n\tsay(\u{201C}hi\u{201D});   \n}\n";
        let out = fuzzy_replace(text, "    say(\"hi\");\n", "    say(\"bye\");\n").unwrap();
        assert_eq!(out, "fn a() {\n    say(\"bye\");\n}\n");
        assert_eq!(
            fuzzy_replace("a\nb\na\n", "a", "c"),
            Err(NoMatch::Ambiguous(2))
        );
    }
}
