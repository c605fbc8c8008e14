//! Slash commands: keel's own, in one catalog every front end renders (names, aliases,
//! arguments, descriptions, where each is offered), and the extensions' as the contract
//! offers them, with running one (a prompt command starts a turn with its expansion). No
//! skill or custom command may take one of keel's own names.

use keel_protocol::{CommandInfo, SessionId, TurnSource};

use crate::extension::Expansion;
use crate::reply::CommandOutcome;
use crate::{Runtime, RuntimeError, TurnOptions};

/// Where one of keel's own commands is offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// The terminal UI.
    Tui,
    /// An editor through `keel acp`.
    Acp,
}

/// One of keel's own slash commands: what every front end lists, in the same words. Each
/// front end carries out the ones offered on its surface (through operations).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinCommand {
    /// The name, without the slash.
    pub name: &'static str,
    /// Other names it answers to (what users type in other agents: `/cost`, `/clear`).
    pub aliases: &'static [&'static str],
    /// Its arguments, for people (`<title>` is required, `[filter]` optional).
    pub args: &'static str,
    /// What it does, one line.
    pub description: &'static str,
    /// Whether it may run while a turn runs.
    pub while_running: bool,
    /// Where it is offered.
    pub surfaces: &'static [Surface],
}

const BOTH: &[Surface] = &[Surface::Tui, Surface::Acp];
const TUI: &[Surface] = &[Surface::Tui];

const fn builtin(
    name: &'static str,
    aliases: &'static [&'static str],
    args: &'static str,
    description: &'static str,
    while_running: bool,
    surfaces: &'static [Surface],
) -> BuiltinCommand {
    BuiltinCommand {
        name,
        aliases,
        args,
        description,
        while_running,
        surfaces,
    }
}

/// keel's own commands, in the order `/help` lists them.
pub const BUILTIN_COMMANDS: &[BuiltinCommand] = &[
    builtin("help", &[], "", "List keel's commands", true, BOTH),
    builtin(
        "new",
        &["clear"],
        "",
        "Start a new conversation (the old one stays in the session list)",
        false,
        BOTH,
    ),
    builtin(
        "sessions",
        &["resume"],
        "[filter]",
        "Search, resume, rename or delete sessions",
        false,
        TUI,
    ),
    builtin(
        "model",
        &[],
        "[provider/model]",
        "Show the models, or choose one for the next turns",
        true,
        BOTH,
    ),
    builtin(
        "permission",
        &["permissions"],
        "[ask|auto|full|plan]",
        "Set the permission mode",
        true,
        TUI,
    ),
    builtin(
        "thinking",
        &[],
        "[off|minimal|low|medium|high|default]",
        "Set how much the model reasons",
        true,
        TUI,
    ),
    builtin(
        "sandbox",
        &[],
        "[read-only|workspace-write|danger-full-access]",
        "Show where commands may write",
        false,
        TUI,
    ),
    builtin(
        "plan",
        &[],
        "[on|off]",
        "Plan mode: investigate read-only and write a plan",
        true,
        TUI,
    ),
    builtin(
        "compact",
        &[],
        "[instructions]",
        "Summarise the conversation to free context",
        false,
        BOTH,
    ),
    builtin(
        "status",
        &[],
        "",
        "The session, its folder, model, modes and sandbox",
        true,
        BOTH,
    ),
    builtin(
        "usage",
        &["cost"],
        "",
        "Tokens and cost of this session",
        true,
        BOTH,
    ),
    builtin(
        "context",
        &[],
        "",
        "What fills the model's context window",
        true,
        BOTH,
    ),
    builtin("diff", &[], "", "The working tree's git diff", true, TUI),
    builtin(
        "export",
        &[],
        "[path.md]",
        "Write the conversation to a Markdown file, secrets masked",
        true,
        TUI,
    ),
    builtin(
        "copy",
        &[],
        "",
        "Copy the last answer to the clipboard",
        true,
        TUI,
    ),
    builtin(
        "fork",
        &[],
        "",
        "Continue in a copy of this session",
        false,
        TUI,
    ),
    builtin(
        "rewind",
        &[],
        "",
        "Go back to an earlier message (in a fork)",
        false,
        TUI,
    ),
    builtin("rename", &[], "<title>", "Rename this session", true, TUI),
    builtin("retry", &[], "", "Ask the last message again", false, TUI),
    builtin(
        "queue",
        &[],
        "",
        "Edit or cancel queued messages",
        true,
        TUI,
    ),
    builtin(
        "tasks",
        &[],
        "",
        "This session's background tasks: details, stop one",
        true,
        TUI,
    ),
    builtin(
        "init",
        &[],
        "",
        "Ask the model to write AGENTS.md for this project",
        false,
        TUI,
    ),
    builtin("quit", &["exit"], "", "Leave keel", true, TUI),
];

/// Commands keel's built-in extensions offer (`/approve-plan`, `/goal`, `/mcp`): reserved
/// like the front ends' own.
const EXTENSION_COMMANDS: &[&str] = &["approve-plan", "goal", "mcp"];

/// The built-in command `name` (or an alias of it) names, in any case.
pub fn builtin_command(name: &str) -> Option<&'static BuiltinCommand> {
    let name = name.trim_start_matches('/');
    BUILTIN_COMMANDS.iter().find(|command| {
        command.name.eq_ignore_ascii_case(name)
            || command.aliases.iter().any(|a| a.eq_ignore_ascii_case(name))
    })
}

/// Whether `name` (without the slash) is one of keel's own commands, in any front end, in
/// any case. A skill or custom command of one of these names is reported and not mounted:
/// a file the model or a cloned repository wrote must not change what the user's
/// `/approve-plan` does, and a `/Approve-Plan` beside the real one would only mislead.
pub fn is_reserved(name: &str) -> bool {
    builtin_command(name).is_some()
        || EXTENSION_COMMANDS
            .iter()
            .any(|reserved| reserved.eq_ignore_ascii_case(name.trim_start_matches('/')))
}

impl Runtime {
    /// The commands extensions offer now, by name; when two offer the same name, the
    /// extension mounted first keeps it.
    pub(crate) fn commands(&self) -> Vec<CommandInfo> {
        let mut seen = std::collections::HashSet::new();
        let mut all: Vec<CommandInfo> = self
            .inner
            .registry
            .command_sources()
            .iter()
            .flat_map(|source| source.commands())
            .filter(|command| seen.insert(command.name.clone()))
            .collect();
        all.sort_by(|a, b| a.name.cmp(&b.name));
        all
    }

    /// Runs `/name arguments` for `session`: a prompt starts a turn, a reply is returned.
    /// What besides files `session`'s prompts can name with `@`, from every source.
    pub(crate) async fn mentions(
        &self,
        session: &SessionId,
    ) -> Result<Vec<keel_protocol::MentionInfo>, RuntimeError> {
        self.slot(session)?;
        let mut all = Vec::new();
        for source in self.inner.registry.command_sources() {
            all.extend(source.mentions(session).await);
        }
        Ok(all)
    }

    pub(crate) async fn run_command(
        &self,
        session: &SessionId,
        name: &str,
        arguments: &str,
    ) -> Result<CommandOutcome, RuntimeError> {
        let name = name.trim_start_matches('/');
        for source in self.inner.registry.command_sources() {
            let Some(result) = source.run(session, name, arguments).await else {
                continue;
            };
            return match result {
                Ok(Expansion::Reply(text)) => Ok(CommandOutcome::Text(text)),
                Ok(Expansion::Prompt(text)) => Ok(CommandOutcome::Turn(
                    self.turns()
                        .submit_with_images(
                            session,
                            text,
                            Vec::new(),
                            TurnSource::Api,
                            TurnOptions::default(),
                        )
                        .await?,
                )),
                Err(reason) => Err(RuntimeError::Command {
                    name: name.to_owned(),
                    reason,
                }),
            };
        }
        Err(RuntimeError::UnknownCommand(name.to_owned()))
    }

    /// Hands `value` (`kind`) to the extension that takes it for `session`.
    pub(crate) async fn attach(
        &self,
        session: &SessionId,
        kind: &str,
        value: &serde_json::Value,
    ) -> Result<(), RuntimeError> {
        for source in self.inner.registry.command_sources() {
            match source.attach(session, kind, value).await {
                None => continue,
                Some(Ok(())) => return Ok(()),
                Some(Err(reason)) => {
                    return Err(RuntimeError::Usage(format!("{kind}: {reason}")));
                }
            }
        }
        Err(RuntimeError::Unsupported(format!(
            "no extension takes `{kind}` for a session"
        )))
    }
}
