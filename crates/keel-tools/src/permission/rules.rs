//! Permission rules: `allow`, `ask` and `deny` lists loaded from YAML files
//! (`$KEEL_HOME/permissions.yaml`, then the project's `.keel/permissions.yaml`) and added per
//! session. A rule matches by tool name, by command (exact words, a word prefix, or a glob over
//! the words) and by path (a glob) with an action. Among the rules that match, deny beats ask
//! beats allow, whatever file they came from, so a project file cannot loosen a user's deny.
//!
//! ```yaml
//! allow:
//!   - tool: web_fetch
//!   - command_prefix: git status
//!   - command_glob: "npm run *"
//!   - path: /tmp/**
//!     action: [write, delete]
//! ask:
//!   - command_prefix: git push
//! deny:
//!   - path: "**/.env"
//!     action: read
//! ```
//!
//! Path globs starting with `/`, `~` or `**` are absolute; others are relative to the workspace
//! roots. A bad file is an error naming the file and the rule, never a silently empty list.

use std::fmt;
use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use serde::{Deserialize, Serialize};

use super::paths::real_path;
use super::shell::{Token, program_name, tokenize};

/// Name of a rule file, in `$KEEL_HOME` and in a project's `.keel` folder.
pub const RULES_FILE: &str = "permissions.yaml";
/// The project folder holding [`RULES_FILE`].
pub const PROJECT_DIR: &str = ".keel";

/// What a call does to the world; rules and modes judge by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Reads a file or lists a folder.
    Read,
    /// Creates or changes a file.
    Write,
    /// Removes a file or folder.
    Delete,
    /// Runs a program.
    Execute,
    /// Reaches the network.
    Network,
}

impl Action {
    /// The lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Action::Read => "read",
            Action::Write => "write",
            Action::Delete => "delete",
            Action::Execute => "execute",
            Action::Network => "network",
        }
    }
}

/// What a rule decides. Ordered: deny beats ask beats allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    /// Run without asking.
    Allow,
    /// Ask the user (denied when headless).
    Ask,
    /// Never run.
    Deny,
}

impl Effect {
    /// The lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Effect::Allow => "allow",
            Effect::Ask => "ask",
            Effect::Deny => "deny",
        }
    }
}

/// A problem with a rule file or rule; names the file and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RuleError {
    /// The file exists but cannot be read.
    #[error("{}: cannot read the permission rules: {message}", path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The file is not valid YAML of the expected shape.
    #[error("{}: not a valid permission rule file: {message}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// What the parser said, with line and column.
        message: String,
    },
    /// One rule is wrong.
    #[error("{}: {list} rule #{number}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// `allow`, `ask` or `deny`.
        list: &'static str,
        /// Position in that list, from 1.
        number: usize,
        /// What is wrong.
        message: String,
    },
}

impl RuleError {
    /// A stable code for this kind of error.
    pub fn code(&self) -> &'static str {
        match self {
            RuleError::Unreadable { .. } => "permission.rules_unreadable",
            RuleError::Syntax { .. } => "permission.rules_syntax",
            RuleError::Invalid { .. } => "permission.rule_invalid",
        }
    }
}

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
    fn matches(&self, words: &[String]) -> bool {
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

fn path_glob(pattern: &str) -> Result<GlobMatcher, String> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map(|g| g.compile_matcher())
        .map_err(|e| format!("invalid path glob `{pattern}`: {e}"))
}

fn has_glob_meta(text: &str) -> bool {
    text.contains(['*', '?', '[', '{', '\\'])
}

impl PathPattern {
    /// Compiles `pattern`, expanding `~` with `home` and resolving symlinks in its literal
    /// leading folders (so it matches the real paths the gate judges).
    pub fn new(pattern: &str, home: Option<&Path>) -> Result<Self, String> {
        if pattern.trim().is_empty() {
            return Err("path is empty".to_owned());
        }
        let expanded = match (pattern.strip_prefix('~'), home) {
            (Some(rest), Some(home)) if rest.is_empty() || rest.starts_with('/') => {
                format!("{}{rest}", home.display())
            }
            (Some(_), None) => {
                return Err(format!(
                    "path `{pattern}` uses `~` but the home folder is unknown"
                ));
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
    /// Compiles a tool name or glob.
    pub fn new(name: &str) -> Result<Self, String> {
        if name.trim().is_empty() {
            return Err("tool is empty".to_owned());
        }
        let matcher = if has_glob_meta(name) {
            Some(
                globset::Glob::new(name)
                    .map_err(|e| format!("invalid tool glob `{name}`: {e}"))?
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

/// Where a rule came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleOrigin {
    /// A rule file: the file, the list and the position in it (from 1).
    File {
        /// The file.
        path: PathBuf,
        /// Position in its list, from 1.
        number: usize,
    },
    /// Added during the session (an "always allow" answer, a command-line flag).
    Session,
}

impl fmt::Display for RuleOrigin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuleOrigin::File { path, number } => write!(f, "{} #{number}", path.display()),
            RuleOrigin::Session => f.write_str("this session"),
        }
    }
}

/// One rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// What it decides.
    pub effect: Effect,
    /// What it matches.
    pub matcher: Matcher,
    /// Where it came from.
    pub origin: RuleOrigin,
}

impl Rule {
    /// A session rule.
    pub fn session(effect: Effect, matcher: Matcher) -> Self {
        Self {
            effect,
            matcher,
            origin: RuleOrigin::Session,
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} rule {} ({})",
            self.effect.name(),
            self.matcher,
            self.origin
        )
    }
}

/// An "always allow" choice: the rules it would add, with a label for the user.
#[derive(Debug, Clone, PartialEq)]
pub struct Scope {
    /// What it covers, for the user.
    pub label: String,
    /// The allow rules it adds to the session.
    pub matchers: Vec<Matcher>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(Action),
    Many(Vec<Action>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    tool: Option<String>,
    command: Option<String>,
    command_prefix: Option<String>,
    command_glob: Option<String>,
    path: Option<String>,
    action: Option<OneOrMany>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    allow: Vec<RawRule>,
    #[serde(default)]
    ask: Vec<RawRule>,
    #[serde(default)]
    deny: Vec<RawRule>,
}

fn command_words(text: &str, field: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    for token in tokenize(text) {
        match token {
            Token::Word(word) => match word.literal() {
                Some(text) if !word.glob || word.quoted => words.push(text),
                _ => {
                    return Err(format!(
                        "{field} must be plain words (no variables, substitutions or globs; use command_glob for patterns): `{text}`"
                    ));
                }
            },
            _ => {
                return Err(format!(
                    "{field} must be one simple command without operators or redirections: `{text}`"
                ));
            }
        }
    }
    if let Some(first) = words.first_mut() {
        *first = program_name(first).to_owned();
    }
    if words.is_empty() {
        return Err(format!("{field} is empty"));
    }
    Ok(words)
}

fn compile(raw: RawRule, home: Option<&Path>) -> Result<Matcher, String> {
    let commands = [&raw.command, &raw.command_prefix, &raw.command_glob]
        .iter()
        .filter(|c| c.is_some())
        .count();
    if commands > 1 {
        return Err("use only one of command, command_prefix and command_glob".to_owned());
    }
    let actions = match raw.action {
        None => Vec::new(),
        Some(OneOrMany::One(action)) => vec![action],
        Some(OneOrMany::Many(actions)) if actions.is_empty() => {
            return Err("action is an empty list".to_owned());
        }
        Some(OneOrMany::Many(actions)) => actions,
    };
    let command = if let Some(text) = &raw.command {
        Some(CommandPattern::Exact(command_words(text, "command")?))
    } else if let Some(text) = &raw.command_prefix {
        Some(CommandPattern::Prefix(command_words(
            text,
            "command_prefix",
        )?))
    } else if let Some(text) = &raw.command_glob {
        if text.trim().is_empty() {
            return Err("command_glob is empty".to_owned());
        }
        let matcher = globset::Glob::new(text.trim())
            .map_err(|e| format!("invalid command_glob `{text}`: {e}"))?
            .compile_matcher();
        Some(CommandPattern::Glob {
            raw: text.trim().to_owned(),
            matcher,
        })
    } else {
        None
    };
    let tool = raw.tool.as_deref().map(ToolPattern::new).transpose()?;
    let path = raw
        .path
        .as_deref()
        .map(|p| PathPattern::new(p, home))
        .transpose()?;
    if tool.is_none() && command.is_none() && path.is_none() && actions.is_empty() {
        return Err("a rule needs at least one of tool, command, command_prefix, command_glob, path or action".to_owned());
    }
    Ok(Matcher {
        tool,
        command,
        path,
        actions,
    })
}

/// `$KEEL_HOME`, else `~/.keel`.
pub fn keel_home(home: Option<&Path>) -> Option<PathBuf> {
    match std::env::var_os("KEEL_HOME") {
        Some(dir) if !dir.is_empty() => Some(PathBuf::from(dir)),
        _ => home.map(|h| h.join(".keel")),
    }
}

/// An ordered collection of rules.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RuleSet {
    rules: Vec<Rule>,
}

impl RuleSet {
    /// No rules.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses rule-file text; `source` names the file in errors and origins.
    pub fn parse(text: &str, source: &Path, home: Option<&Path>) -> Result<Self, RuleError> {
        let blank = text.lines().all(|line| {
            line.trim().is_empty() || line.trim_start().starts_with('#') || line.trim() == "---"
        });
        let raw: RawFile = if blank {
            RawFile::default()
        } else {
            yaml_serde::from_str::<Option<RawFile>>(text)
                .map_err(|e| RuleError::Syntax {
                    path: source.to_path_buf(),
                    message: e.to_string(),
                })?
                .unwrap_or_default()
        };
        let mut rules = Vec::new();
        for (effect, list) in [
            (Effect::Allow, raw.allow),
            (Effect::Ask, raw.ask),
            (Effect::Deny, raw.deny),
        ] {
            for (at, raw_rule) in list.into_iter().enumerate() {
                let matcher = compile(raw_rule, home).map_err(|message| RuleError::Invalid {
                    path: source.to_path_buf(),
                    list: effect.name(),
                    number: at + 1,
                    message,
                })?;
                rules.push(Rule {
                    effect,
                    matcher,
                    origin: RuleOrigin::File {
                        path: source.to_path_buf(),
                        number: at + 1,
                    },
                });
            }
        }
        Ok(Self { rules })
    }

    /// Loads one rule file; a missing file is an empty set.
    pub fn load_file(path: &Path, home: Option<&Path>) -> Result<Self, RuleError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(&text, path, home),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Self::new()),
            Err(error) => Err(RuleError::Unreadable {
                path: path.to_path_buf(),
                message: error.to_string(),
            }),
        }
    }

    /// Loads `$KEEL_HOME/permissions.yaml` and the project's `.keel/permissions.yaml`
    /// (`keel_home` is the resolved folder, see [`keel_home`]).
    pub fn load(
        keel_home: Option<&Path>,
        project_root: Option<&Path>,
        home: Option<&Path>,
    ) -> Result<Self, RuleError> {
        let mut set = Self::new();
        if let Some(dir) = keel_home {
            set.extend(Self::load_file(&dir.join(RULES_FILE), home)?);
        }
        if let Some(root) = project_root {
            set.extend(Self::load_file(
                &root.join(PROJECT_DIR).join(RULES_FILE),
                home,
            )?);
        }
        Ok(set)
    }

    /// Adds a rule.
    pub fn push(&mut self, rule: Rule) {
        self.rules.push(rule);
    }

    /// Adds every rule of `other`.
    pub fn extend(&mut self, other: RuleSet) {
        self.rules.extend(other.rules);
    }

    /// The rules, in order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether there are no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

/// The strongest rule among `rules` that matches (deny beats ask beats allow; the first of
/// equal strength wins).
pub fn strongest<'r>(
    rules: impl Iterator<Item = &'r Rule>,
    subject: &Subject<'_>,
    roots: &[PathBuf],
) -> Option<&'r Rule> {
    let mut best: Option<&Rule> = None;
    for rule in rules {
        let wrapped = rule.effect != Effect::Allow;
        if rule.matcher.matches(subject, roots, wrapped)
            && best.is_none_or(|b| rule.effect > b.effect)
        {
            best = Some(rule);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use pretty_assertions::assert_eq;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn command_patterns_match_words_not_characters() {
        let prefix = CommandPattern::Prefix(words("git push"));
        assert!(prefix.matches(&words("git push origin main")));
        assert!(!prefix.matches(&words("git pushx")));
        let glob = CommandPattern::Glob {
            raw: "npm run *".into(),
            matcher: globset::Glob::new("npm run *").unwrap().compile_matcher(),
        };
        assert!(glob.matches(&words("npm run build --x=a/b")));
        assert!(!glob.matches(&words("npm install")));
    }

    #[test]
    fn relative_paths_match_under_roots() {
        let pattern = PathPattern::new("src/**/*.rs", None).unwrap();
        let roots = vec![PathBuf::from("/ws")];
        assert!(pattern.matches(Path::new("/ws/src/a/b.rs"), &roots));
        assert!(!pattern.matches(Path::new("/other/src/a.rs"), &roots));
        let anywhere = PathPattern::new("**/.env", None).unwrap();
        assert!(anywhere.matches(Path::new("/x/y/.env"), &roots));
        let home = PathPattern::new("~/secrets/*", Some(Path::new("/nonexistent-home"))).unwrap();
        assert!(home.matches(Path::new("/nonexistent-home/secrets/a"), &roots));
    }

    #[test]
    fn scope_patterns_escape_glob_characters() {
        let exact = PathPattern::exact(Path::new("/ws/[a]*.txt"));
        assert!(exact.matches(Path::new("/ws/[a]*.txt"), &[]));
        assert!(!exact.matches(Path::new("/ws/a.txt"), &[]));
        let under = PathPattern::under(Path::new("/ws/d"));
        assert!(under.matches(Path::new("/ws/d/x/y"), &[]));
        assert!(!under.matches(Path::new("/ws/dx"), &[]));
    }

    #[test]
    fn errors_name_the_file_and_rule() {
        let error = RuleSet::parse(
            "allow:\n  - tool: read\ndeny:\n  - {}\n",
            Path::new("/p.yaml"),
            None,
        )
        .unwrap_err();
        assert_eq!(error.code(), "permission.rule_invalid");
        assert_eq!(
            error.to_string(),
            "/p.yaml: deny rule #1: a rule needs at least one of tool, command, command_prefix, command_glob, path or action"
        );
    }

    #[test]
    fn display_reads_like_the_file() {
        let set = RuleSet::parse(
            "ask:\n  - command_prefix: /usr/bin/git push\n    action: [execute, network]\n",
            Path::new("/p.yaml"),
            None,
        )
        .unwrap();
        assert_eq!(
            set.rules()[0].to_string(),
            "ask rule {command_prefix: \"git push\", action: [execute, network]} (/p.yaml #1)"
        );
    }
}
