//! The slash-command catalog: data (name, aliases, description, argument hint, whether it
//! may run while a turn does), so later features add entries instead of code paths, and a
//! fuzzy filter for the popup.

use nucleo_matcher::pattern::{CaseMatching, Normalization, Pattern};
use nucleo_matcher::{Config, Matcher, Utf32Str};

/// One command of the catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// Its name, without the slash.
    pub name: &'static str,
    /// Other names it answers to.
    pub aliases: &'static [&'static str],
    /// What it does, one line.
    pub description: &'static str,
    /// Its arguments, for the popup.
    pub args: &'static str,
    /// Whether it may run while a turn runs.
    pub while_running: bool,
}

const fn cmd(
    name: &'static str,
    aliases: &'static [&'static str],
    description: &'static str,
    args: &'static str,
    while_running: bool,
) -> Command {
    Command {
        name,
        aliases,
        description,
        args,
        while_running,
    }
}

/// The built-in commands.
pub const BUILTIN: &[Command] = &[
    cmd("help", &[], "Show commands and keys", "", true),
    cmd("new", &["clear"], "Start a new session", "", false),
    cmd(
        "sessions",
        &["resume"],
        "Search, resume, rename or delete sessions",
        "[filter]",
        false,
    ),
    cmd(
        "model",
        &[],
        "Choose the model for the next turns",
        "[filter]",
        true,
    ),
    cmd(
        "permission",
        &[],
        "Set the permission mode",
        "[ask|auto|full|plan]",
        true,
    ),
    cmd(
        "thinking",
        &[],
        "Set how much the model reasons",
        "[off|minimal|low|medium|high|default]",
        true,
    ),
    cmd(
        "sandbox",
        &[],
        "Show or set where commands may write",
        "[read-only|workspace-write|danger-full-access]",
        false,
    ),
    cmd(
        "plan",
        &[],
        "Plan mode: investigate read-only and write a plan",
        "[on|off]",
        true,
    ),
    cmd(
        "compact",
        &[],
        "Summarise the conversation to free context",
        "[instructions]",
        false,
    ),
    cmd("status", &[], "Session, model, modes and folder", "", true),
    cmd("usage", &[], "Tokens and cost of this session", "", true),
    cmd("context", &[], "What fills the context window", "", true),
    cmd("diff", &[], "The working tree's git diff", "", true),
    cmd(
        "export",
        &[],
        "Write the conversation to a Markdown file",
        "[path.md]",
        true,
    ),
    cmd(
        "copy",
        &[],
        "Copy the last answer to the clipboard",
        "",
        true,
    ),
    cmd("fork", &[], "Continue in a copy of this session", "", false),
    cmd(
        "rewind",
        &[],
        "Go back to an earlier message (in a fork)",
        "",
        false,
    ),
    cmd("rename", &[], "Rename this session", "<title>", true),
    cmd("retry", &[], "Ask the last message again", "", false),
    cmd("queue", &[], "Edit or cancel queued messages", "", true),
    cmd(
        "init",
        &[],
        "Ask the model to write AGENTS.md for this project",
        "",
        false,
    ),
    cmd("quit", &["exit"], "Leave keel", "", true),
];

/// The catalog in force: the built-ins plus what features register.
#[derive(Debug, Clone)]
pub struct Catalog {
    commands: Vec<Command>,
}

impl Default for Catalog {
    fn default() -> Self {
        Self {
            commands: BUILTIN.to_vec(),
        }
    }
}

impl Catalog {
    /// Adds a command (a later feature's `/tasks`, `/mcp`, …); a name already taken is
    /// refused.
    pub fn register(&mut self, command: Command) -> Result<(), String> {
        if self.find(command.name).is_some() {
            return Err(format!("/{} exists already", command.name));
        }
        self.commands.push(command);
        Ok(())
    }

    /// Every command.
    pub fn all(&self) -> &[Command] {
        &self.commands
    }

    /// The command called `name` (or aliased so).
    pub fn find(&self, name: &str) -> Option<&Command> {
        self.commands
            .iter()
            .find(|c| c.name == name || c.aliases.contains(&name))
    }

    /// Commands matching `query` fuzzily, best first (all of them for an empty query).
    pub fn filter(&self, query: &str) -> Vec<&Command> {
        if query.is_empty() {
            return self.commands.iter().collect();
        }
        let mut matcher = Matcher::new(Config::DEFAULT);
        let pattern = Pattern::parse(query, CaseMatching::Ignore, Normalization::Smart);
        let mut buf = Vec::new();
        let mut scored: Vec<(u32, usize, &Command)> = self
            .commands
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let best = std::iter::once(c.name)
                    .chain(c.aliases.iter().copied())
                    .filter_map(|name| {
                        let bonus = if name.starts_with(query) { 1000 } else { 0 };
                        pattern
                            .score(Utf32Str::new(name, &mut buf), &mut matcher)
                            .map(|s| s + bonus)
                    })
                    .max()?;
                Some((best, i, c))
            })
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        scored.into_iter().map(|(_, _, c)| c).collect()
    }
}

/// A typed command line: `/name rest`.
pub fn parse(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix('/')?;
    let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    if name.is_empty() || name.contains('/') {
        return None;
    }
    Some((name, args.trim()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn filters_fuzzily_with_prefixes_first() {
        let catalog = Catalog::default();
        let names: Vec<&str> = catalog.filter("co").iter().map(|c| c.name).collect();
        assert_eq!(&names[..3], ["compact", "context", "copy"]);
        assert_eq!(
            catalog.filter("rsm")[0].name,
            "sessions",
            "matches the alias resume"
        );
        assert_eq!(catalog.find("clear").unwrap().name, "new");
        assert!(catalog.filter("zzzz").is_empty());
    }

    #[test]
    fn later_features_register_commands() {
        let mut catalog = Catalog::default();
        catalog
            .register(cmd("tasks", &[], "Background tasks", "", true))
            .unwrap();
        assert_eq!(catalog.filter("task")[0].name, "tasks");
        assert!(catalog.register(cmd("help", &[], "", "", true)).is_err());
    }

    #[test]
    fn parses_command_lines() {
        assert_eq!(
            parse("/compact keep the API"),
            Some(("compact", "keep the API"))
        );
        assert_eq!(parse("/help"), Some(("help", "")));
        assert_eq!(parse("/usr/bin/ls"), None);
        assert_eq!(parse("hello"), None);
    }
}
