//! Claude Code's tool rules (`Bash(npm run test:*)`, `Edit(src/**)`, `Read`,
//! `mcp__github__create_issue`) as keel rules, for `--allowedTools` and `--disallowedTools`:
//! scripts written for `claude -p` keep working.

use std::path::Path;

use super::Action;
use super::file::command_words;
use super::matcher::{CommandPattern, Matcher, PathPattern, RuleProblem, ToolPattern};

/// A problem with one rule as Claude Code writes it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{spec}`: {problem}")]
pub struct SpecError {
    /// The rule as given.
    pub spec: String,
    /// What is wrong.
    pub problem: String,
}

/// The rules in `list`: separated by commas or spaces outside parentheses, so both
/// `"Bash(git log:*),Read"` and `"Bash(git diff *) Edit"` hold two.
pub fn split_specs(list: &str) -> Vec<String> {
    let mut specs = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    for c in list.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth == 0 && (c == ',' || c.is_whitespace()) {
            if !current.trim().is_empty() {
                specs.push(current.trim().to_owned());
            }
            current.clear();
        } else {
            current.push(c);
        }
    }
    if !current.trim().is_empty() {
        specs.push(current.trim().to_owned());
    }
    specs
}

/// One rule as Claude Code writes it, as a keel matcher. `Tool` matches the tool;
/// `Bash(cmd)` the exact command, `Bash(cmd:*)` commands starting with those words, and a
/// pattern with `*` elsewhere is a glob over the words; `Read(glob)`, `Grep`, `Glob`, `LS`
/// match reads of those paths, `Edit(glob)`, `Write(glob)`, `MultiEdit(glob)` writes. Paths:
/// `//abs` is absolute, `~/…` under the home folder, anything else relative to the workspace.
pub fn from_claude(spec: &str, home: Option<&Path>) -> Result<Matcher, SpecError> {
    let error = |problem: String| SpecError {
        spec: spec.to_owned(),
        problem,
    };
    let (name, pattern) = match spec.split_once('(') {
        Some((name, rest)) => {
            let inner = rest
                .strip_suffix(')')
                .ok_or_else(|| error("the pattern's `)` is missing".into()))?;
            (name.trim(), Some(inner.trim()))
        }
        None => (spec.trim(), None),
    };
    if name.is_empty() {
        return Err(error("no tool is named".into()));
    }
    let problem = |p: RuleProblem| error(p.to_string());
    let tool = keel_name(name);
    // A word that names no tool is most likely a prompt the flag swallowed
    // (`--allowedTools Read fix the bug`): refused, never a rule that matches nothing.
    if !(KNOWN_TOOLS.contains(&tool.as_str()) || tool.starts_with("mcp__") || tool.contains('*')) {
        return Err(error(format!(
            "keel has no tool `{name}` (its tools: {}; MCP tools are mcp__SERVER__TOOL). If it \
             is the prompt, put the prompt before the flag or after `--`",
            KNOWN_TOOLS.join(", ")
        )));
    }
    let Some(pattern) = pattern.filter(|p| !p.is_empty() && *p != "*") else {
        // `mcp__server` is every tool of the server, as in Claude Code.
        let tool = match tool.strip_prefix("mcp__") {
            Some(server) if !server.contains("__") && !server.contains('*') => {
                format!("mcp__{server}__*")
            }
            _ => tool,
        };
        let tool = ToolPattern::new(&tool).map_err(problem)?;
        return Ok(Matcher {
            tool: Some(tool),
            ..Matcher::default()
        });
    };
    match tool.as_str() {
        "bash" => {
            let command = if let Some(prefix) = pattern.strip_suffix(":*") {
                CommandPattern::Prefix(command_words(prefix, "Bash(…:*)").map_err(problem)?)
            } else if pattern.contains('*') {
                let matcher = globset::Glob::new(pattern)
                    .map_err(|e| error(format!("not a glob: {e}")))?
                    .compile_matcher();
                CommandPattern::Glob {
                    raw: pattern.to_owned(),
                    matcher,
                }
            } else {
                CommandPattern::Exact(command_words(pattern, "Bash(…)").map_err(problem)?)
            };
            Ok(Matcher {
                tool: Some(ToolPattern::new("bash").map_err(problem)?),
                command: Some(command),
                ..Matcher::default()
            })
        }
        "read" | "grep" | "glob" | "ls" | "edit" | "write" => {
            let action = if matches!(tool.as_str(), "edit" | "write") {
                Action::Write
            } else {
                Action::Read
            };
            // Anchored as Claude Code anchors them: `//` absolute, `~/` home, anything else
            // (`**/*.rs` too) under the workspace, never the whole machine.
            let path = match pattern.strip_prefix("//") {
                Some(absolute) => format!("/{absolute}"),
                None if pattern.starts_with('~') => pattern.to_owned(),
                None => {
                    let relative = pattern
                        .strip_prefix("./")
                        .or_else(|| pattern.strip_prefix('/'))
                        .unwrap_or(pattern);
                    format!("./{relative}")
                }
            };
            Ok(Matcher {
                path: Some(PathPattern::new(&path, home).map_err(problem)?),
                actions: vec![action],
                ..Matcher::default()
            })
        }
        other => Err(error(format!(
            "keel matches `{other}` by its name only; patterns are for Bash, Read, Grep, Glob, LS, Edit and Write"
        ))),
    }
}

/// The tools keel's built-ins and extensions offer, by the names rules match.
const KNOWN_TOOLS: &[&str] = &[
    "bash",
    "read",
    "write",
    "edit",
    "grep",
    "glob",
    "ls",
    "web_fetch",
    "todowrite",
    "skill",
    "exit_plan_mode",
    "create_goal",
    "get_goal",
    "update_goal",
    "task",
    "task_append",
    "task_query",
    "task_output",
    "task_stop",
    "tool_search",
];

/// keel's name of a tool Claude Code names (keel's own names and MCP tools stay as they are).
fn keel_name(name: &str) -> String {
    match name {
        "Bash" => "bash",
        "Read" => "read",
        "Write" => "write",
        "Edit" | "MultiEdit" | "NotebookEdit" => "edit",
        "Grep" => "grep",
        "Glob" => "glob",
        "LS" => "ls",
        "WebFetch" => "web_fetch",
        "TodoWrite" => "todowrite",
        "Task" | "Agent" => "task",
        "ExitPlanMode" => "exit_plan_mode",
        other => other,
    }
    .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn matcher(spec: &str) -> Matcher {
        from_claude(spec, Some(Path::new("/home/u"))).unwrap()
    }

    #[test]
    fn lists_split_outside_parentheses() {
        assert_eq!(
            split_specs("Bash(git log:*),Read  Edit(src/a b.rs), mcp__gh__issue"),
            [
                "Bash(git log:*)",
                "Read",
                "Edit(src/a b.rs)",
                "mcp__gh__issue"
            ]
        );
        assert!(split_specs(" , ").is_empty());
    }

    #[test]
    fn claude_rules_become_keel_matchers() {
        let words = |w: &[&str]| w.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(matcher("Read").tool.unwrap().as_str(), "read");
        assert_eq!(matcher("WebFetch").tool.unwrap().as_str(), "web_fetch");
        assert_eq!(matcher("mcp__gh__*").tool.unwrap().as_str(), "mcp__gh__*");
        assert_eq!(matcher("mcp__gh").tool.unwrap().as_str(), "mcp__gh__*");
        assert_eq!(
            matcher("mcp__gh__issue").tool.unwrap().as_str(),
            "mcp__gh__issue"
        );
        assert_eq!(matcher("Bash(*)").tool.unwrap().as_str(), "bash");
        let prefix = matcher("Bash(npm run test:*)");
        assert_eq!(
            prefix.command,
            Some(CommandPattern::Prefix(words(&["npm", "run", "test"])))
        );
        let exact = matcher("Bash(git status)");
        assert_eq!(
            exact.command,
            Some(CommandPattern::Exact(words(&["git", "status"])))
        );
        let glob = matcher("Bash(git diff *)");
        assert!(
            glob.command
                .unwrap()
                .matches(&words(&["git", "diff", "HEAD~1"]))
        );
        let edit = matcher("Edit(src/**)");
        assert_eq!(edit.actions, [Action::Write]);
        let roots = [PathBuf::from("/ws")];
        assert!(
            edit.path
                .as_ref()
                .unwrap()
                .matches(Path::new("/ws/src/a.rs"), &roots)
        );
        assert!(
            !edit
                .path
                .unwrap()
                .matches(Path::new("/ws/docs/a.md"), &roots)
        );
        // A pattern that starts with `**` stays inside the workspace.
        let anywhere = matcher("Edit(**/*.rs)");
        let path = anywhere.path.unwrap();
        assert!(path.matches(Path::new("/ws/src/deep/a.rs"), &roots));
        assert!(!path.matches(Path::new("/home/u/.cargo/registry/x/build.rs"), &roots));
        let absolute = matcher("Read(//etc/**)");
        assert!(
            absolute
                .path
                .unwrap()
                .matches(Path::new("/etc/passwd"), &roots)
        );
        let home = matcher("Read(~/.ssh/**)");
        assert!(
            home.path
                .unwrap()
                .matches(Path::new("/home/u/.ssh/id_rsa"), &roots)
        );
    }

    #[test]
    fn a_bad_rule_is_named() {
        for bad in [
            "Bash(git log",
            "(x)",
            "WebFetch(domain:example.com)",
            "Bash(ls | wc:*)",
            "fix",
        ] {
            let error = from_claude(bad, None).unwrap_err();
            assert_eq!(error.spec, bad);
        }
    }
}
