//! The slash-command catalog: data (name, aliases, description, argument hint, whether it
//! may run while a turn does, who carries it out), so later features add entries instead
//! of code paths, and a fuzzy filter for the popup. Extensions' commands (skills, custom
//! commands, MCP prompts, `/mcp`) come from the runtime and are replaced wholesale each
//! time it lists them; a built-in keeps its name when an extension offers the same one.

use std::borrow::Cow;

use keel_protocol::CommandInfo;
use nucleo_matcher::pattern::{CaseMatching, Normalization, Pattern};
use nucleo_matcher::{Config, Matcher, Utf32Str};

/// One command of the catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// Its name, without the slash.
    pub name: Cow<'static, str>,
    /// Other names it answers to.
    pub aliases: &'static [&'static str],
    /// What it does, one line.
    pub description: Cow<'static, str>,
    /// Its arguments, for the popup.
    pub args: Cow<'static, str>,
    /// Whether it may run while a turn runs.
    pub while_running: bool,
    /// Who carries it out.
    pub origin: Origin,
}

/// Who carries a command out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The TUI itself.
    Builtin,
    /// An extension, through the runtime (`Op::RunCommand`).
    Extension {
        /// Where it comes from: `skill`, `command`, `mcp`, or an extension's id.
        source: String,
        /// What it is expected to do.
        expect: Expect,
    },
}

/// What an extension's command is expected to do. The contract does not say before it
/// runs, so it is judged from the source: skills, custom commands, MCP prompts
/// (`server:prompt`) and plan approval are prompts; the runtime's answer decides in the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Start a turn with its expansion: shown as the user's message at once, and not
    /// offered while a turn runs (the runtime would refuse it).
    Turn,
    /// Answer with text (`/mcp`): may run while a turn does.
    Answer,
}

impl Command {
    /// An extension's command as the catalog holds it.
    pub fn from_info(info: CommandInfo) -> Self {
        // `plan`'s `/approve-plan` starts the turn that carries the plan out.
        let prompt = matches!(info.source.as_str(), "skill" | "command" | "plan")
            || (info.source == "mcp" && info.name.contains(':'));
        let expect = if prompt { Expect::Turn } else { Expect::Answer };
        Self {
            name: info.name.into(),
            aliases: &[],
            description: info.description.into(),
            args: info.argument_hint.unwrap_or_default().into(),
            while_running: expect == Expect::Answer,
            origin: Origin::Extension {
                source: info.source,
                expect,
            },
        }
    }

    /// Where it comes from, for people: `None` for a built-in.
    pub fn source(&self) -> Option<&str> {
        match &self.origin {
            Origin::Builtin => None,
            Origin::Extension { source, .. } => Some(source),
        }
    }

    /// Whether it needs arguments (its hint names a `<required>` one): picking it in the
    /// popup completes it instead of running it.
    pub fn needs_args(&self) -> bool {
        self.args.contains('<')
    }
}

/// keel's own commands the TUI offers, as the runtime's catalog words them.
pub fn builtin() -> Vec<Command> {
    keel_runtime::BUILTIN_COMMANDS
        .iter()
        .filter(|command| command.surfaces.contains(&keel_runtime::Surface::Tui))
        .map(|command| Command {
            name: Cow::Borrowed(command.name),
            aliases: command.aliases,
            description: Cow::Borrowed(command.description),
            args: Cow::Borrowed(command.args),
            while_running: command.while_running,
            origin: Origin::Builtin,
        })
        .collect()
}

/// The catalog in force: the built-ins plus what features register.
#[derive(Debug, Clone)]
pub struct Catalog {
    commands: Vec<Command>,
}

impl Default for Catalog {
    fn default() -> Self {
        Self {
            commands: builtin(),
        }
    }
}

/// A command of that name exists already.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("/{0} exists already")]
pub struct NameTaken(pub String);

impl Catalog {
    /// Adds a command (a later feature's `/tasks`, …); a name already taken is refused.
    pub fn register(&mut self, command: Command) -> Result<(), NameTaken> {
        if self.find(&command.name).is_some() {
            return Err(NameTaken(command.name.into_owned()));
        }
        self.commands.push(command);
        Ok(())
    }

    /// Replaces the extensions' commands with those the runtime offers now. Built-ins keep
    /// their names; a name that could not be typed as `/name` is left out.
    pub fn set_extensions(&mut self, offered: Vec<CommandInfo>) {
        self.commands
            .retain(|command| command.origin == Origin::Builtin);
        for info in offered {
            let typeable = !info.name.is_empty()
                && !info.name.contains('/')
                && !info.name.contains(char::is_whitespace);
            if typeable && self.find(&info.name).is_none() {
                self.commands.push(Command::from_info(info));
            }
        }
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
                let best = std::iter::once(c.name.as_ref())
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

    /// Issue 27: keel's own names are one list, kept in the runtime, that no skill or custom
    /// command may take; every command of the TUI's is on it.
    #[test]
    fn every_builtin_name_is_reserved_in_the_runtime() {
        for command in builtin() {
            assert!(
                keel_runtime::is_reserved(&command.name),
                "/{}",
                command.name
            );
            for alias in command.aliases {
                assert!(keel_runtime::is_reserved(alias), "/{alias}");
            }
        }
    }

    #[test]
    fn filters_fuzzily_with_prefixes_first() {
        let catalog = Catalog::default();
        let names: Vec<&str> = catalog
            .filter("co")
            .iter()
            .map(|c| c.name.as_ref())
            .collect();
        // `/cost` is the usage command's alias: a prefix match too.
        assert_eq!(&names[..4], ["compact", "usage", "context", "copy"]);
        assert_eq!(
            catalog.filter("rsm")[0].name,
            "sessions",
            "matches the alias resume"
        );
        assert_eq!(catalog.find("clear").unwrap().name, "new");
        assert!(catalog.filter("zzzz").is_empty());
    }

    fn cmd(name: &'static str, description: &'static str) -> Command {
        Command {
            name: Cow::Borrowed(name),
            aliases: &[],
            description: Cow::Borrowed(description),
            args: Cow::Borrowed(""),
            while_running: true,
            origin: Origin::Builtin,
        }
    }

    #[test]
    fn later_features_register_commands() {
        let mut catalog = Catalog::default();
        catalog.register(cmd("bookmarks", "Saved places")).unwrap();
        assert_eq!(catalog.filter("bookm")[0].name, "bookmarks");
        assert!(
            catalog.register(cmd("tasks", "")).is_err(),
            "a built-in already"
        );
        assert!(catalog.register(cmd("help", "")).is_err());
    }

    fn info(name: &str, source: &str, hint: Option<&str>) -> CommandInfo {
        CommandInfo {
            name: name.into(),
            description: format!("the {name} command"),
            argument_hint: hint.map(Into::into),
            source: source.into(),
        }
    }

    #[test]
    fn extension_commands_join_and_built_ins_keep_their_names() {
        let mut catalog = Catalog::default();
        catalog.set_extensions(vec![
            info("review", "command", Some("<file>")),
            info("help", "skill", None),
            info("clear", "skill", None),
            info("mcp", "mcp", Some("[reload]")),
            info("github:issue", "mcp", None),
            info("two words", "command", None),
        ]);
        let review = catalog.find("review").unwrap();
        assert_eq!(
            review,
            &Command {
                name: "review".into(),
                aliases: &[],
                description: "the review command".into(),
                args: "<file>".into(),
                while_running: false,
                origin: Origin::Extension {
                    source: "command".into(),
                    expect: Expect::Turn,
                },
            }
        );
        assert!(review.needs_args());
        assert_eq!(catalog.find("help").unwrap().origin, Origin::Builtin);
        assert_eq!(
            catalog.find("clear").unwrap().name,
            "new",
            "aliases win too"
        );
        let mcp = catalog.find("mcp").unwrap();
        assert!(mcp.while_running, "/mcp answers with text");
        assert!(!mcp.needs_args());
        assert!(!catalog.find("github:issue").unwrap().while_running);
        assert!(catalog.find("two words").is_none());
        assert_eq!(catalog.filter("rev")[0].name, "review");

        // A later listing replaces the earlier one.
        catalog.set_extensions(vec![info("deploy", "command", None)]);
        assert!(catalog.find("review").is_none());
        assert_eq!(catalog.find("deploy").unwrap().source(), Some("command"));
        assert_eq!(catalog.all().len(), builtin().len() + 1);
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
