//! What a rule looks at and how it matches: command patterns over words (exact, prefix,
//! glob), path globs resolved to real paths (absolute, or relative to the workspace roots),
//! tool names or globs, and the [`Matcher`] that combines them against a [`Subject`].
//! Separate from the rule list so matching can be read and tested on its own.

use std::fmt;
use std::path::{Path, PathBuf};

/// What is wrong with one permission rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleProblem {
    /// A field is empty.
    #[error("{0} is empty")]
    Empty(&'static str),
    /// A glob does not compile.
    #[error("invalid {what} `{pattern}`: {reason}")]
    Glob {
        /// Which glob (`path glob`, `tool glob`, `command_glob`).
        what: &'static str,
        /// As written.
        pattern: String,
        /// The compiler's reason.
        reason: String,
    },
    /// A path starts with `~` and the home folder is unknown.
    #[error("path `{0}` uses `~` but the home folder is unknown")]
    NoHome(String),
    /// A command holds more than plain words.
    #[error(
        "{field} must be plain words (no variables, substitutions or globs; use command_glob for \
         patterns): `{text}`"
    )]
    NotPlain {
        /// `command` or `command_prefix`.
        field: &'static str,
        /// As written.
        text: String,
    },
    /// A command is more than one simple command.
    #[error("{field} must be one simple command without operators or redirections: `{text}`")]
    NotSimple {
        /// `command` or `command_prefix`.
        field: &'static str,
        /// As written.
        text: String,
    },
    /// More than one command field.
    #[error("use only one of command, command_prefix and command_glob")]
    SeveralCommands,
    /// `action: []`.
    #[error("action is an empty list")]
    NoActions,
    /// Nothing to match.
    #[error(
        "a rule needs at least one of tool, command, command_prefix, command_glob, path or action"
    )]
    Nothing,
}

use globset::{GlobBuilder, GlobMatcher};

use super::Action;
use crate::permission::paths::real_path;

/// How a rule matches commands.
#[derive(Debug, Clone)]
pub enum CommandPattern {
    /// These exact words (program by base name).
    Exact(Vec<String>),
    /// Commands whose words start with these.
    Prefix(Vec<String>),
    /// A glob over the words joined by single spaces (`*` crosses `/`).
    Glob {
        /// The glob as written.
        raw: String,
        /// The compiled glob.
        matcher: GlobMatcher,
    },
}

impl CommandPattern {
    pub(super) fn matches(&self, words: &[String]) -> bool {
        match self {
            CommandPattern::Exact(expected) => words == expected.as_slice(),
            CommandPattern::Prefix(prefix) => words.starts_with(prefix),
            CommandPattern::Glob { matcher, .. } => matcher.is_match(words.join(" ")),
        }
    }
}

impl PartialEq for CommandPattern {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (CommandPattern::Exact(a), CommandPattern::Exact(b)) => a == b,
            (CommandPattern::Prefix(a), CommandPattern::Prefix(b)) => a == b,
            (CommandPattern::Glob { raw: a, .. }, CommandPattern::Glob { raw: b, .. }) => a == b,
            _ => false,
        }
    }
}

/// A path glob: absolute, or relative to the workspace roots.
#[derive(Debug, Clone)]
pub struct PathPattern {
    raw: String,
    relative: bool,
    matcher: Option<GlobMatcher>,
}

impl PartialEq for PathPattern {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw && self.relative == other.relative
    }
}

fn path_glob(pattern: &str) -> Result<GlobMatcher, RuleProblem> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| RuleProblem::Glob {
            what: "path glob",
            pattern: pattern.to_owned(),
            reason: e.to_string(),
        })
}

fn has_glob_meta(text: &str) -> bool {
    text.contains(['*', '?', '[', '{', '\\'])
}

impl PathPattern {
    /// Compiles `pattern`, expanding `~` with `home` and resolving symlinks in its literal
    /// leading folders (so it matches the real paths the gate judges).
    pub fn new(pattern: &str, home: Option<&Path>) -> Result<Self, RuleProblem> {
        if pattern.trim().is_empty() {
            return Err(RuleProblem::Empty("path"));
        }
        let expanded = match (pattern.strip_prefix('~'), home) {
            (Some(rest), Some(home)) if rest.is_empty() || rest.starts_with('/') => {
                format!("{}{rest}", home.display())
            }
            (Some(_), None) => {
                return Err(RuleProblem::NoHome(pattern.to_owned()));
            }
            _ => pattern.to_owned(),
        };
        if expanded.starts_with("**") {
            return Ok(Self {
                matcher: Some(path_glob(&expanded)?),
                raw: pattern.to_owned(),
                relative: false,
            });
        }
        if !expanded.starts_with('/') {
            return Ok(Self {
                matcher: Some(path_glob(expanded.trim_start_matches("./"))?),
                raw: pattern.to_owned(),
                relative: true,
            });
        }
        let parts: Vec<&str> = expanded.split('/').collect();
        let literal = parts.iter().take_while(|p| !has_glob_meta(p)).count();
        let prefix = parts.get(..literal).unwrap_or(&[]).join("/");
        let real = real_path(Path::new(if prefix.is_empty() { "/" } else { &prefix }));
        let mut joined = globset::escape(&real.to_string_lossy());
        for part in parts.get(literal..).unwrap_or(&[]) {
            if !joined.ends_with('/') {
                joined.push('/');
            }
            joined.push_str(part);
        }
        if expanded.ends_with('/') && !joined.ends_with('/') {
            joined.push('/');
        }
        Ok(Self {
            matcher: Some(path_glob(&joined)?),
            raw: pattern.to_owned(),
            relative: false,
        })
    }

    /// A pattern for exactly this (real, absolute) path.
    pub fn exact(path: &Path) -> Self {
        let raw = globset::escape(&path.to_string_lossy());
        Self::from_escaped(raw, path.display().to_string())
    }

    /// A pattern for everything under this (real, absolute) folder.
    pub fn under(dir: &Path) -> Self {
        let escaped = globset::escape(&dir.to_string_lossy());
        let glob = if escaped.ends_with('/') {
            format!("{escaped}**")
        } else {
            format!("{escaped}/**")
        };
        Self::from_escaped(glob, format!("{}/**", dir.display()))
    }

    fn from_escaped(glob: String, raw: String) -> Self {
        Self {
            raw,
            relative: false,
            // An escaped literal always compiles; if it ever did not, the pattern matches nothing.
            matcher: path_glob(&glob).ok(),
        }
    }

    /// Whether the pattern matches `path` (real, absolute).
    pub fn matches(&self, path: &Path, roots: &[PathBuf]) -> bool {
        let Some(matcher) = &self.matcher else {
            return false;
        };
        if self.relative {
            roots
                .iter()
                .filter_map(|root| path.strip_prefix(root).ok())
                .any(|rel| matcher.is_match(rel))
        } else {
            matcher.is_match(path)
        }
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.raw
    }
}

/// A tool name, or a glob over tool names (`mcp__*`).
#[derive(Debug, Clone)]
pub struct ToolPattern {
    raw: String,
    matcher: Option<GlobMatcher>,
}

impl PartialEq for ToolPattern {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw
    }
}

impl ToolPattern {
    /// The name or glob as written.
    pub fn as_str(&self) -> &str {
        &self.raw
    }

    /// Compiles a tool name or glob.
    pub fn new(name: &str) -> Result<Self, RuleProblem> {
        if name.trim().is_empty() {
            return Err(RuleProblem::Empty("tool"));
        }
        let matcher = if has_glob_meta(name) {
            Some(
                globset::Glob::new(name)
                    .map_err(|e| RuleProblem::Glob {
                        what: "tool glob",
                        pattern: name.to_owned(),
                        reason: e.to_string(),
                    })?
                    .compile_matcher(),
            )
        } else {
            None
        };
        Ok(Self {
            raw: name.to_owned(),
            matcher,
        })
    }

    fn matches(&self, tool: &str) -> bool {
        match &self.matcher {
            Some(matcher) => matcher.is_match(tool),
            None => self.raw == tool,
        }
    }
}

/// What a rule looks at; every field given must match.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Matcher {
    /// The tool name.
    pub tool: Option<ToolPattern>,
    /// The command a shell call runs (after unwrapping wrappers).
    pub command: Option<CommandPattern>,
    /// The path a file action touches.
    pub path: Option<PathPattern>,
    /// The actions; empty means any.
    pub actions: Vec<Action>,
}

/// What a rule is matched against: one thing a call does.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    /// The tool called.
    pub tool: &'a str,
    /// The action, or `None` for the call as a whole.
    pub action: Option<Action>,
    /// The command's words, when the action comes from a shell command.
    pub command: Option<&'a [String]>,
    /// The same command with its wrappers (`sudo …`, `timeout 5 …`).
    pub wrapped: &'a [Vec<String>],
    /// The real path touched, when known.
    pub path: Option<&'a Path>,
}

impl Matcher {
    /// Matches every call of the tool with exactly this name.
    pub fn tool(name: &str) -> Self {
        Self {
            // Exact, never a glob, and never absent: an empty name must not match every tool.
            tool: Some(ToolPattern {
                raw: name.to_owned(),
                matcher: None,
            }),
            ..Self::default()
        }
    }

    /// Matches shell commands with exactly these words.
    pub fn exact_command(words: Vec<String>) -> Self {
        Self {
            command: Some(CommandPattern::Exact(words)),
            ..Self::default()
        }
    }

    /// Matches shell commands starting with these words.
    pub fn command_prefix(words: Vec<String>) -> Self {
        Self {
            command: Some(CommandPattern::Prefix(words)),
            ..Self::default()
        }
    }

    /// Matches an action on paths.
    pub fn path(pattern: PathPattern, action: Action) -> Self {
        Self {
            path: Some(pattern),
            actions: vec![action],
            ..Self::default()
        }
    }

    /// Whether the matcher applies; `wrapped` also tries the command with its wrappers
    /// (used for deny and ask, so `deny: sudo` catches `sudo rm`).
    pub fn matches(&self, subject: &Subject<'_>, roots: &[PathBuf], wrapped: bool) -> bool {
        if let Some(tool) = &self.tool
            && !tool.matches(subject.tool)
        {
            return false;
        }
        if !self.actions.is_empty() && !subject.action.is_some_and(|a| self.actions.contains(&a)) {
            return false;
        }
        if (self.command.is_some() || self.path.is_some() || !self.actions.is_empty())
            && subject.action.is_none()
        {
            return false;
        }
        if let Some(pattern) = &self.command {
            let Some(words) = subject.command else {
                return false;
            };
            let hit = pattern.matches(words)
                || (wrapped && subject.wrapped.iter().any(|w| pattern.matches(w)));
            if !hit {
                return false;
            }
        }
        if let Some(pattern) = &self.path {
            let Some(path) = subject.path else {
                return false;
            };
            if !pattern.matches(path, roots) {
                return false;
            }
        }
        true
    }
}

fn quote(words: &[String]) -> String {
    words.join(" ")
}

impl fmt::Display for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(tool) = &self.tool {
            parts.push(format!("tool: {}", tool.raw));
        }
        match &self.command {
            Some(CommandPattern::Exact(words)) => {
                parts.push(format!("command: \"{}\"", quote(words)))
            }
            Some(CommandPattern::Prefix(words)) => {
                parts.push(format!("command_prefix: \"{}\"", quote(words)))
            }
            Some(CommandPattern::Glob { raw, .. }) => {
                parts.push(format!("command_glob: \"{raw}\""))
            }
            None => {}
        }
        if let Some(path) = &self.path {
            parts.push(format!("path: \"{}\"", path.raw));
        }
        match self.actions.as_slice() {
            [] => {}
            [one] => parts.push(format!("action: {}", one.name())),
            many => parts.push(format!(
                "action: [{}]",
                many.iter().map(|a| a.name()).collect::<Vec<_>>().join(", ")
            )),
        }
        write!(f, "{{{}}}", parts.join(", "))
    }
}
