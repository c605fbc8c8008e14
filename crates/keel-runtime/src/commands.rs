//! Extensions' slash commands as the contract offers them: one list for every front end,
//! and running one (a prompt command starts a turn with its expansion); and the names of
//! keel's own commands, which no skill or custom command may take.

use keel_protocol::{CommandInfo, SessionId, TurnSource};

use crate::contract::Reply;
use crate::extension::Expansion;
use crate::{Runtime, RuntimeError, TurnOptions};

/// The names of keel's own commands, in every front end (the TUI's, `keel acp`'s, and
/// those keel's built-in extensions offer: `/approve-plan`, `/goal`, `/mcp`). A skill or
/// custom command of one of these names is reported and not mounted: a file the model or a
/// cloned repository wrote must not change what the user's `/approve-plan` does.
pub const RESERVED_COMMANDS: &[&str] = &[
    "help",
    "new",
    "clear",
    "sessions",
    "resume",
    "model",
    "permission",
    "thinking",
    "sandbox",
    "plan",
    "approve-plan",
    "compact",
    "status",
    "usage",
    "context",
    "diff",
    "export",
    "copy",
    "fork",
    "rewind",
    "rename",
    "retry",
    "queue",
    "tasks",
    "init",
    "goal",
    "mcp",
    "quit",
    "exit",
];

/// Whether `name` (without the slash) is one of keel's own commands, in any case (a
/// `/Approve-Plan` beside the real one would only mislead in a command list).
pub fn is_reserved(name: &str) -> bool {
    let name = name.trim_start_matches('/');
    RESERVED_COMMANDS
        .iter()
        .any(|reserved| reserved.eq_ignore_ascii_case(name))
}

impl Runtime {
    /// The commands extensions offer now, by name; when two offer the same name, the
    /// extension mounted first keeps it.
    pub fn commands(&self) -> Vec<CommandInfo> {
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
    pub async fn run_command(
        &self,
        session: &SessionId,
        name: &str,
        arguments: &str,
    ) -> Result<Reply, RuntimeError> {
        let name = name.trim_start_matches('/');
        for source in self.inner.registry.command_sources() {
            let Some(result) = source.run(session, name, arguments).await else {
                continue;
            };
            return match result {
                Ok(Expansion::Reply(text)) => Ok(Reply::Text(text)),
                Ok(Expansion::Prompt(text)) => Ok(Reply::Turn(
                    self.submit_with_images(
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
    pub async fn attach(
        &self,
        session: &SessionId,
        kind: &str,
        value: &serde_json::Value,
    ) -> Result<(), RuntimeError> {
        for source in self.inner.registry.command_sources() {
            match source.attach(session, kind, value).await {
                None => continue,
                Some(Ok(())) => return Ok(()),
                Some(Err(reason)) => return Err(RuntimeError::Usage(format!("{kind}: {reason}"))),
            }
        }
        Err(RuntimeError::Unsupported(format!(
            "no extension takes `{kind}` for a session"
        )))
    }
}
