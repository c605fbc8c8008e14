//! keel's tool names and arguments as Claude Code's hook scripts expect them, and back.
//!
//! Scripts written for Claude Code test `tool_name == "Edit"` and read
//! `tool_input.file_path`; keel's tools are `edit` with `path` and a list of `edits`. The
//! hook input carries both spellings (Claude Code's added, keel's kept) so scripts of either
//! world work. An `updatedInput` comes back in whichever spelling the script edited and is
//! turned into arguments keel's tools accept (they refuse unknown fields): a field counts as
//! edited under keel's name when it differs from the original call, and then keel's name
//! wins; otherwise Claude Code's spelling is taken, since a Claude Code script edits only
//! that one and echoes keel's unchanged.

use std::path::Path;

use serde_json::{Map, Value};

/// keel's argument names that Claude Code spells differently, per keel tool.
fn aliases(keel_tool: &str) -> &'static [(&'static str, &'static str)] {
    match keel_tool {
        "read" | "write" | "edit" => &[("path", "file_path")],
        // Only the options whose meaning is the same in both tools.
        "grep" => &[
            ("case_insensitive", "-i"),
            ("context", "-C"),
            ("before", "-B"),
            ("after", "-A"),
        ],
        _ => &[],
    }
}

/// The single-edit fields of Claude Code's `Edit`, which keel keeps in `edits`.
const EDIT_FIELDS: [&str; 3] = ["old_string", "new_string", "replace_all"];

/// The name Claude Code gives keel's tool `keel`; other tools (MCP, skills) keep theirs.
pub fn claude_tool_name(keel: &str) -> &str {
    match keel {
        "bash" => "Bash",
        "read" => "Read",
        "write" => "Write",
        "edit" => "Edit",
        "grep" => "Grep",
        "glob" => "Glob",
        "ls" => "LS",
        "web_fetch" => "WebFetch",
        "todowrite" => "TodoWrite",
        other => other,
    }
}

/// keel's arguments `args` with Claude Code's field names added (`file_path`; for an edit
/// with exactly one change also `old_string`, `new_string`, `replace_all`).
pub fn to_claude_input(keel_tool: &str, args: &Value) -> Value {
    let Value::Object(keel) = args else {
        return args.clone();
    };
    let mut out = keel.clone();
    for (keel_name, claude_name) in aliases(keel_tool) {
        if let Some(value) = keel.get(*keel_name) {
            out.entry(*claude_name).or_insert_with(|| value.clone());
        }
    }
    if keel_tool == "edit"
        && let Some(Value::Object(edit)) = single_edit(keel)
    {
        for field in EDIT_FIELDS {
            let value = edit.get(field).cloned();
            // `replace_all` is optional in keel and always present in Claude Code.
            let value = value.or_else(|| (field == "replace_all").then_some(Value::Bool(false)));
            if let Some(value) = value {
                out.entry(field).or_insert(value);
            }
        }
    }
    Value::Object(out)
}

/// [`to_claude_input`] with a relative `file_path` made absolute against `cwd`, as Claude
/// Code's always is (keel's own `path` stays as the model wrote it).
pub(super) fn to_claude_input_in(keel_tool: &str, args: &Value, cwd: &Path) -> Value {
    let mut input = to_claude_input(keel_tool, args);
    if let Some(Value::String(path)) = input.get_mut("file_path")
        && Path::new(path.as_str()).is_relative()
    {
        *path = cwd.join(path.as_str()).to_string_lossy().into_owned();
    }
    input
}

/// The arguments for keel's tool from a hook's `updatedInput` (which replaces the call's
/// input whole, as in Claude Code): Claude Code's fields turned back into keel's, keel's
/// names winning when the script changed them from `original`.
pub fn from_claude_input(keel_tool: &str, original: &Value, updated: &Value) -> Value {
    let Value::Object(updated) = updated else {
        return updated.clone();
    };
    let empty = Map::new();
    let original = original.as_object().unwrap_or(&empty);
    let mut out = updated.clone();
    for (keel_name, claude_name) in aliases(keel_tool) {
        if let Some(value) = out.remove(*claude_name)
            && !edited(&out, original, keel_name)
        {
            out.insert((*keel_name).to_owned(), value);
        }
    }
    if keel_tool == "edit" {
        let flat: Vec<(&str, Value)> = EDIT_FIELDS
            .into_iter()
            .filter_map(|field| out.remove(field).map(|value| (field, value)))
            .collect();
        if !flat.is_empty() && !edited(&out, original, "edits") {
            // Fields the script left out come from the call's one edit, if it had one.
            let mut edit = match single_edit(&out) {
                Some(Value::Object(edit)) => edit.clone(),
                _ => Map::new(),
            };
            for (field, value) in flat {
                edit.insert(field.to_owned(), value);
            }
            out.insert("edits".to_owned(), Value::Array(vec![Value::Object(edit)]));
        }
    }
    Value::Object(out)
}

/// Whether `updated` has `field` with another value than `original` had.
fn edited(updated: &Map<String, Value>, original: &Map<String, Value>, field: &str) -> bool {
    updated
        .get(field)
        .is_some_and(|value| original.get(field) != Some(value))
}

/// The only element of `edits`, when there is exactly one.
fn single_edit(args: &Map<String, Value>) -> Option<&Value> {
    match args.get("edits")?.as_array()?.as_slice() {
        [one] => Some(one),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    #[test]
    fn keel_names_become_claude_codes() {
        let pairs = [
            ("bash", "Bash"),
            ("read", "Read"),
            ("write", "Write"),
            ("edit", "Edit"),
            ("grep", "Grep"),
            ("glob", "Glob"),
            ("ls", "LS"),
            ("web_fetch", "WebFetch"),
            ("todowrite", "TodoWrite"),
            ("mcp__github__create_issue", "mcp__github__create_issue"),
            ("skill", "skill"),
        ];
        for (keel, claude) in pairs {
            assert_eq!(claude_tool_name(keel), claude);
        }
    }

    #[test]
    fn file_tools_gain_file_path() {
        let args = json!({"path": "src/a.rs", "offset": 3});
        assert_eq!(
            to_claude_input("read", &args),
            json!({"path": "src/a.rs", "file_path": "src/a.rs", "offset": 3})
        );
        assert_eq!(
            to_claude_input_in(
                "write",
                &json!({"path": "a.txt", "content": "x"}),
                "/p".as_ref()
            ),
            json!({"path": "a.txt", "file_path": "/p/a.txt", "content": "x"})
        );
        assert_eq!(
            to_claude_input_in("read", &json!({"path": "/abs"}), "/p".as_ref())["file_path"],
            "/abs"
        );
        let bash = json!({"command": "ls", "description": "list", "timeout": 5000});
        assert_eq!(to_claude_input("bash", &bash), bash);
    }

    #[test]
    fn an_edit_with_one_change_is_flattened_and_keeps_its_list() {
        let args = json!({"path": "a.rs", "edits": [{"old_string": "a", "new_string": "b"}]});
        assert_eq!(
            to_claude_input("edit", &args),
            json!({
                "path": "a.rs",
                "file_path": "a.rs",
                "edits": [{"old_string": "a", "new_string": "b"}],
                "old_string": "a",
                "new_string": "b",
                "replace_all": false
            })
        );
        let two = json!({"path": "a.rs", "edits": [
            {"old_string": "a", "new_string": "b"},
            {"old_string": "c", "new_string": "d", "replace_all": true}
        ]});
        let mut expected = two.clone();
        expected["file_path"] = json!("a.rs");
        assert_eq!(to_claude_input("edit", &two), expected);
    }

    #[test]
    fn grep_gains_claudes_flags() {
        let args = json!({"pattern": "x", "case_insensitive": true, "after": 2});
        assert_eq!(
            to_claude_input("grep", &args),
            json!({"pattern": "x", "case_insensitive": true, "-i": true, "after": 2, "-A": 2})
        );
    }

    #[test]
    fn a_claude_script_editing_file_path_moves_the_call() {
        let original = json!({"path": "a.rs", "content": "x"});
        let mut updated = to_claude_input("write", &original);
        updated["file_path"] = json!("/tmp/b.rs");
        assert_eq!(
            from_claude_input("write", &original, &updated),
            json!({"path": "/tmp/b.rs", "content": "x"})
        );
        // A script that writes Claude Code's fields only.
        let only_claude = json!({"file_path": "/tmp/c.rs", "content": "y"});
        assert_eq!(
            from_claude_input("write", &original, &only_claude),
            json!({"path": "/tmp/c.rs", "content": "y"})
        );
    }

    #[test]
    fn keels_own_name_wins_when_the_script_changed_it() {
        let original = json!({"path": "a.rs"});
        let updated = json!({"path": "keel.rs", "file_path": "claude.rs"});
        assert_eq!(
            from_claude_input("read", &original, &updated),
            json!({"path": "keel.rs"})
        );
    }

    #[test]
    fn an_edited_single_edit_returns_as_the_list() {
        let original = json!({"path": "a.rs", "edits": [{"old_string": "a", "new_string": "b"}]});
        let mut updated = to_claude_input("edit", &original);
        updated["new_string"] = json!("B");
        assert_eq!(
            from_claude_input("edit", &original, &updated),
            json!({"path": "a.rs", "edits": [
                {"old_string": "a", "new_string": "B", "replace_all": false}
            ]})
        );
        // Claude Code's shape alone.
        let claude = json!({"file_path": "/x", "old_string": "p", "new_string": "q"});
        assert_eq!(
            from_claude_input("edit", &original, &claude),
            json!({"path": "/x", "edits": [{"old_string": "p", "new_string": "q"}]})
        );
        // A keel-aware script that rewrote the list keeps its list.
        let mut keel = to_claude_input("edit", &original);
        keel["edits"] =
            json!([{"old_string": "a", "new_string": "c"}, {"old_string": "d", "new_string": "e"}]);
        assert_eq!(
            from_claude_input("edit", &original, &keel),
            json!({"path": "a.rs", "edits": [
                {"old_string": "a", "new_string": "c"},
                {"old_string": "d", "new_string": "e"}
            ]})
        );
    }

    #[test]
    fn other_tools_and_shapes_pass_through() {
        let args = json!({"command": "ls -la"});
        assert_eq!(from_claude_input("bash", &args, &args), args);
        assert_eq!(
            from_claude_input("edit", &args, &json!("text")),
            json!("text")
        );
        let grep = json!({"pattern": "x", "-i": true, "-n": true});
        assert_eq!(
            from_claude_input("grep", &json!({"pattern": "x"}), &grep),
            json!({"pattern": "x", "case_insensitive": true, "-n": true})
        );
    }
}
