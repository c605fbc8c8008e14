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
//!
//! The pieces: `matcher` holds the patterns a rule matches with, `file` the YAML shape and
//! how a file is read and compiled into rules; this file holds the rules themselves and the
//! precedence among them ([`strongest`]).

mod claude;
mod file;
mod matcher;

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use claude::{SpecError, from_claude, split_specs};
pub use file::{append_allow, append_rules};
pub use matcher::{CommandPattern, Matcher, PathPattern, RuleProblem, Subject, ToolPattern};

/// Name of a rule file, in `$KEEL_HOME` and in a project's `.keel` folder.
pub const RULES_FILE: &str = "permissions.yaml";
/// The project folder holding [`RULES_FILE`].
pub const PROJECT_DIR: &str = ".keel";

pub use keel_shell::Action;

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
    #[error("{}: {list} rule #{number}: {problem}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// `allow`, `ask` or `deny`.
        list: &'static str,
        /// Position in that list, from 1.
        number: usize,
        /// What is wrong.
        problem: RuleProblem,
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
    /// Whether its rules are also saved for later sessions (`permissions.yaml`); a scope
    /// that is not lasts this session only.
    pub saved: bool,
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
