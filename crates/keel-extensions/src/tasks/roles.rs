//! The roles a task runs in, each with a ceiling on its tools: `explore` (read-only tools,
//! commands under the read-only sandbox), `worker` (everything but starting tasks),
//! `verifier` (read-only, no web, ends with a verdict), and custom agents from
//! `$KEEL_HOME/agents/`, the project's `.claude/agents/` and `.keel/agents/` (Claude Code's
//! format: frontmatter `name`, `description`, `tools`, `model`; the body is the agent's
//! instructions).
//!
//! A role only narrows: a child session runs in its parent's permission mode, so no agent
//! file (a cloned repository can plant one) gives the model more than the session has. An
//! agent that lists no tool that writes runs its commands read-only too.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use keel_runtime::tasks::{Ceiling, TASK_TOOLS};

use crate::discovery::frontmatter::{self, Want};
use crate::discovery::{self, Kind, Opened, Problem, Root, Scope};

/// Tools that only read (what `explore` and `verifier` get).
const READ_ONLY_TOOLS: &[&str] = &["read", "grep", "glob", "ls", "bash"];

/// Tools that change files: an agent without any runs its commands read-only.
const WRITING_TOOLS: &[&str] = &["write", "edit"];

/// Most agent files loaded.
pub const MAX_AGENTS: usize = 200;

/// The line a verifier ends its answer with.
pub const VERDICT_PREFIX: &str = "VERDICT:";

/// A role a task can run in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Role {
    /// `explore`, `worker`, `verifier`, or the agent's name.
    pub name: String,
    /// One line for the model's list.
    pub description: String,
    /// Its tools.
    pub ceiling: Ceiling,
    /// Commands run under the read-only sandbox.
    pub read_only: bool,
    /// What the child is told it is.
    pub instructions: String,
    /// Its model, when it names one (`inherit` or nothing: the parent's).
    pub model: Option<String>,
    /// Its file, for a custom agent.
    pub path: Option<PathBuf>,
}

fn only(tools: &[&str]) -> Ceiling {
    Ceiling::Only(tools.iter().map(|t| (*t).to_owned()).collect())
}

/// The three built-in roles.
pub fn builtin() -> Vec<Role> {
    vec![
        Role {
            name: "explore".into(),
            description: "investigates read-only (read, grep, glob, ls, read-only commands) \
                          and reports what it found with paths and lines"
                .into(),
            ceiling: only(READ_ONLY_TOOLS),
            read_only: true,
            instructions: "You are an explore task working for another agent. Investigate \
                read-only: you cannot change files, and commands run in a read-only sandbox. \
                Answer with what you found, citing paths and line numbers, concisely: your \
                final answer is all the other agent receives."
                .into(),
            model: None,
            path: None,
        },
        Role {
            name: "worker".into(),
            description: "does a self-contained piece of work with every tool except starting \
                          tasks, and reports what it changed"
                .into(),
            ceiling: Ceiling::AllExcept(TASK_TOOLS.iter().map(|t| (*t).to_owned()).collect()),
            read_only: false,
            instructions: "You are a worker task working for another agent. Do the assigned \
                piece of work completely, check it, and end with what you changed (files) and \
                how you verified it: your final answer is all the other agent receives."
                .into(),
            model: None,
            path: None,
        },
        Role {
            name: "verifier".into(),
            description: "checks a claim or a change read-only and returns a verdict with \
                          evidence"
                .into(),
            ceiling: only(READ_ONLY_TOOLS),
            read_only: true,
            instructions: format!(
                "You are a verifier task working for another agent. Check the claim or work \
                 you are given, read-only (commands run in a read-only sandbox; you have no \
                 web access). Do not trust the claim: find evidence (files and lines, command \
                 output). End your answer with one line `{VERDICT_PREFIX} PASS` or \
                 `{VERDICT_PREFIX} FAIL`, after the evidence."
            ),
            model: None,
            path: None,
        },
    ]
}

/// The verdict a verifier's answer ends with: `pass`, `fail`, or `none` when it gave none.
pub fn verdict(answer: &str) -> &'static str {
    let last = answer
        .lines()
        .rev()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or_default();
    let Some(rest) = last
        .trim_start_matches(['*', '`', '#', ' '])
        .strip_prefix(VERDICT_PREFIX)
    else {
        return "none";
    };
    match rest
        .trim()
        .trim_matches(['*', '`', '.'])
        .to_ascii_uppercase()
        .as_str()
    {
        "PASS" => "pass",
        "FAIL" => "fail",
        _ => "none",
    }
}

/// The agent roots in override order: the project's, then the user's (`~/.claude/agents/`,
/// `$KEEL_HOME/agents/`), which win.
pub fn roots(
    keel_home: Option<&Path>,
    project: Option<&keel_runtime::settings::Project>,
) -> Vec<Root> {
    discovery::roots_in(
        keel_home,
        discovery::claude_home().as_deref(),
        project,
        "agents",
    )
}

/// What agent discovery found.
#[derive(Debug, Default)]
pub struct Agents {
    /// The roles: the built-in ones, then custom agents by name (a custom agent may not
    /// take a built-in role's name).
    pub roles: Vec<Role>,
    /// Files that could not be loaded.
    pub problems: Vec<Problem>,
}

/// The built-in roles and the agents under `roots` (one folder level: `name.md`).
pub fn discover(roots: &[Root]) -> Agents {
    let mut out = Agents {
        roles: builtin(),
        problems: Vec::new(),
    };
    let mut custom: BTreeMap<String, Role> = BTreeMap::new();
    // Where each custom agent came from, to report a user's agent shadowing a project's.
    let mut from: BTreeMap<String, (PathBuf, Scope)> = BTreeMap::new();
    let mut read = 0usize;
    for root in roots {
        let open = match discovery::open(root) {
            Opened::Missing => continue,
            Opened::Broken(problem) => {
                out.problems.push(problem);
                continue;
            }
            Opened::Ready(open) => open,
        };
        let listing = match discovery::list(&open.dir) {
            Ok(listing) => listing,
            Err(reason) => {
                out.problems.push(Problem::new(&open.dir, reason));
                continue;
            }
        };
        if listing.truncated {
            out.problems.push(discovery::truncated(&open.dir));
        }
        for entry in &listing.entries {
            if Path::new(&entry.name).extension() != Some(OsStr::new("md")) {
                continue;
            }
            let resolved = match open.follow(&entry.path) {
                Ok(Some(resolved)) if resolved.kind == Kind::File => resolved,
                Ok(_) => continue,
                Err(reason) => {
                    out.problems.push(Problem::new(&entry.path, reason));
                    continue;
                }
            };
            if read == MAX_AGENTS {
                out.problems.push(Problem::new(
                    &open.dir,
                    format!("more than {MAX_AGENTS} agents; the rest were not loaded"),
                ));
                break;
            }
            read += 1;
            match load(&resolved.path, &entry.name) {
                Ok(role) if out.roles.iter().any(|r| r.name == role.name) => {
                    out.problems.push(Problem::new(
                        &entry.path,
                        format!("takes the built-in role's name `{}`", role.name),
                    ));
                }
                Ok(role) => {
                    if let Some((earlier, scope)) = from.get(&role.name)
                        && (*scope, root.scope) == (Scope::Project, Scope::User)
                    {
                        out.problems.push(Problem::new(
                            &resolved.path,
                            discovery::replaced("agent", &role.name, root.scope, earlier, *scope),
                        ));
                    }
                    from.insert(role.name.clone(), (resolved.path.clone(), root.scope));
                    custom.insert(role.name.clone(), role);
                }
                Err(reason) => out.problems.push(Problem::new(&entry.path, reason)),
            }
        }
    }
    out.roles.extend(custom.into_values());
    out
}

/// Whether `name` can name an agent.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

/// keel's name for a tool an agent file lists (Claude Code's `Read`, `WebFetch`, … too).
fn keel_tool_name(name: &str) -> String {
    match name {
        "Bash" => "bash".into(),
        "Read" => "read".into(),
        "Write" => "write".into(),
        "Edit" | "MultiEdit" => "edit".into(),
        "Grep" => "grep".into(),
        "Glob" => "glob".into(),
        "LS" => "ls".into(),
        "WebFetch" => "web_fetch".into(),
        "TodoWrite" => "todowrite".into(),
        other => other.to_owned(),
    }
}

fn load(path: &Path, file_name: &OsStr) -> Result<Role, discovery::Defect> {
    let text = discovery::read_text(path)?;
    let split = frontmatter::split(&text)?;
    let fields = match split.header {
        Some(header) => frontmatter::fields(
            header,
            &[
                ("name", Want::Text),
                ("description", Want::Text),
                ("tools", Want::Text),
                ("model", Want::Text),
            ],
        )?,
        None => frontmatter::Fields::new(),
    };
    let stem = Path::new(file_name)
        .file_stem()
        .and_then(OsStr::to_str)
        .unwrap_or_default();
    let name = fields.get("name").map_or(stem, |n| n.trim()).to_owned();
    if !valid_name(&name) {
        return Err(discovery::Defect::AgentName(name));
    }
    let instructions = discovery::trim_body(split.body);
    if instructions.is_empty() {
        return Err(discovery::Defect::NoInstructions);
    }
    let description = fields
        .get("description")
        .map(|d| keel_tools::output::one_line(d, 200))
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| format!("custom agent {name}"));
    let tools: Option<Vec<String>> = fields.get("tools").map(|list| {
        list.split([',', ' '])
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(keel_tool_name)
            .filter(|t| !TASK_TOOLS.contains(&t.as_str()))
            .collect()
    });
    let (ceiling, read_only) = match tools {
        Some(tools) => {
            let writes = tools.iter().any(|t| WRITING_TOOLS.contains(&t.as_str()));
            (Ceiling::Only(tools), !writes)
        }
        None => (
            Ceiling::AllExcept(TASK_TOOLS.iter().map(|t| (*t).to_owned()).collect()),
            false,
        ),
    };
    let model = fields
        .get("model")
        .map(|m| m.trim().to_owned())
        .filter(|m| !m.is_empty() && m != "inherit");
    Ok(Role {
        name,
        description,
        ceiling,
        read_only,
        instructions,
        model,
        path: Some(path.to_owned()),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn verdicts_are_read_from_the_last_line_only() {
        assert_eq!(verdict("evidence…\n\nVERDICT: PASS\n"), "pass");
        assert_eq!(verdict("**VERDICT: fail.**"), "fail");
        assert_eq!(verdict("VERDICT: PASS\nbut then more"), "none");
        assert_eq!(verdict(""), "none");
    }

    #[test]
    fn agents_load_with_claude_code_tool_names_and_never_get_task_tools() {
        let dir = tempfile::tempdir().unwrap();
        let agents = dir.path().join(".keel/agents");
        std::fs::create_dir_all(&agents).unwrap();
        std::fs::write(
            agents.join("reviewer.md"),
            "---\nname: reviewer\ndescription: reviews diffs\ntools: Read, Grep, Bash, task\nmodel: inherit\n---\nReview the change.\n",
        )
        .unwrap();
        std::fs::write(agents.join("explore.md"), "---\n---\nshadow\n").unwrap();
        std::fs::write(agents.join("empty.md"), "---\nname: empty\n---\n").unwrap();
        std::fs::write(agents.join("fixer.md"), "Fix what you are given.\n").unwrap();
        let found = discover(&[Root {
            dir: agents.clone(),
            scope: Scope::Project,
            project: None,
        }]);
        let names: Vec<&str> = found.roles.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            ["explore", "worker", "verifier", "fixer", "reviewer"]
        );
        let reviewer = found.roles.iter().find(|r| r.name == "reviewer").unwrap();
        assert_eq!(
            reviewer.ceiling,
            Ceiling::Only(vec!["read".into(), "grep".into(), "bash".into()])
        );
        assert!(reviewer.read_only);
        assert_eq!(reviewer.model, None);
        let fixer = found.roles.iter().find(|r| r.name == "fixer").unwrap();
        assert!(!fixer.read_only);
        assert!(!fixer.ceiling.allows("task") || TASK_TOOLS.contains(&"task"));
        let problems: Vec<String> = found.problems.iter().map(|p| p.reason.clone()).collect();
        assert_eq!(problems.len(), 2, "{problems:?}");
    }
}
