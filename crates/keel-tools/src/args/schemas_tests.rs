//! The argument schema of every built-in tool, written out in full, so a change to what the
//! model is sent shows in review. They are the hand-written schemas the tools had before
//! they were derived from the argument types; the only change is the two descriptions
//! `todowrite`'s items gained.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::ToolEnv;
use crate::env::MAX_BASH_TIMEOUT;
use crate::search::{GLOB_MAX_LIMIT, GREP_MAX_CONTEXT, GREP_MAX_LIMIT};

fn expected() -> Vec<(&'static str, Value)> {
    vec![
        (
            "grep",
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Regular expression to search for."},
                    "path": {"type": "string", "description": "File or folder to search; default the working folder."},
                    "glob": {"type": "string", "description": "Only search files matching this glob, e.g. `*.rs` or `src/**/*.{ts,tsx}`; `!` excludes."},
                    "type": {"type": "string", "description": "Only search files of this ripgrep type, e.g. rust, py, js, ts, go, md."},
                    "output_mode": {"type": "string", "enum": ["files_with_matches", "content", "count"], "description": "What to report; default files_with_matches."},
                    "case_insensitive": {"type": "boolean", "description": "Ignore case; default false."},
                    "context": {"type": "integer", "minimum": 0, "maximum": GREP_MAX_CONTEXT, "description": "Lines of context around each match (content mode)."},
                    "before": {"type": "integer", "minimum": 0, "maximum": GREP_MAX_CONTEXT, "description": "Lines of context before each match (content mode); overrides context."},
                    "after": {"type": "integer", "minimum": 0, "maximum": GREP_MAX_CONTEXT, "description": "Lines of context after each match (content mode); overrides context."},
                    "multiline": {"type": "boolean", "description": "Let matches span lines (`.` then matches newlines too); slower."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": GREP_MAX_LIMIT, "description": "Files (or matching lines in content mode) per page."},
                    "offset": {"type": "integer", "minimum": 0, "description": "Files (or matching lines in content mode) to skip, to read the next page."}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        ),
        (
            "glob",
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Glob pattern, e.g. `**/*.rs` or `src/**/*.{ts,tsx}`."},
                    "path": {"type": "string", "description": "Folder to search; default the working folder."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": GLOB_MAX_LIMIT, "description": "Most files to list."}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        ),
        (
            "ls",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Folder to list; default the working folder."},
                    "ignore": {"type": "array", "items": {"type": "string"}, "description": "Glob patterns of entry names to leave out."}
                },
                "additionalProperties": false
            }),
        ),
        (
            "read",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path, absolute or relative to the working folder"},
                    "offset": {"type": "integer", "minimum": 1, "description": "First line to return (1-based)"},
                    "limit": {"type": "integer", "minimum": 1, "description": "Lines to return"}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        ),
        (
            "write",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path, absolute or relative to the working folder"},
                    "content": {"type": "string", "description": "The whole new content"}
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        ),
        (
            "edit",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path, absolute or relative to the working folder"},
                    "edits": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "properties": {
                                "old_string": {"type": "string", "description": "Exact text to replace"},
                                "new_string": {"type": "string", "description": "Replacement text"},
                                "replace_all": {"type": "boolean", "description": "Replace every occurrence"}
                            },
                            "required": ["old_string", "new_string"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["path", "edits"],
                "additionalProperties": false
            }),
        ),
        (
            "bash",
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The command line"},
                    "description": {"type": "string", "description": "What the command does, in a few words"},
                    "timeout": {"type": "integer", "minimum": 1, "maximum": MAX_BASH_TIMEOUT.as_millis() as u64,
                                "description": "Timeout in milliseconds"},
                    "run_in_background": {"type": "boolean", "description": "Start it and return at once"}
                },
                "required": ["command"],
                "additionalProperties": false
            }),
        ),
        (
            "todowrite",
            json!({
                "type": "object",
                "properties": {
                    "todos": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "content": {"type": "string", "minLength": 1, "description": "What to do"},
                                "status": {"type": "string", "enum": ["pending", "in_progress", "completed"],
                                           "description": "pending, in_progress (at most one item at a time) or completed"}
                            },
                            "required": ["content", "status"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["todos"],
                "additionalProperties": false
            }),
        ),
        (
            "web_fetch",
            json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string", "description": "http:// or https:// URL"},
                    "method": {"type": "string", "enum": ["GET", "HEAD"]}
                },
                "required": ["url"],
                "additionalProperties": false
            }),
        ),
    ]
}

#[test]
fn every_builtin_schema_is_as_written_here() {
    let tools = crate::builtin_tools(Arc::new(ToolEnv::new("/tmp")));
    let actual: Vec<(&str, Value)> = tools
        .iter()
        .map(|tool| {
            let definition = tool.definition();
            (definition.name.as_str(), definition.parameters.clone())
        })
        .collect();
    assert_eq!(actual, expected());
}

#[test]
fn a_definition_is_built_once_and_shared_by_every_instance() {
    let env = Arc::new(ToolEnv::new("/tmp"));
    let first = crate::builtin_tools(Arc::clone(&env));
    let second = crate::builtin_tools(env);
    for (a, b) in first.iter().zip(&second) {
        assert!(
            std::ptr::eq(a.definition(), b.definition()),
            "{} built its definition again",
            a.definition().name
        );
    }
}
