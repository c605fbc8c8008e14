//! Slash commands an editor offers in its prompt box (`available_commands_update`): keel
//! acp's own, run here instead of the model (each answers with a message and ends the
//! prompt), then the runtime's extension commands (skills, command files, MCP prompts,
//! `/mcp`), which run through the contract. An own command wins a name both offer.

use std::sync::Arc;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AvailableCommand, AvailableCommandInput, ContentBlock, ContentChunk, SessionUpdate, StopReason,
    TextContent, UnstructuredCommandInput,
};
use agent_client_protocol::{Client, Error};

use keel_protocol::CommandInfo;
use keel_protocol::ops;
use keel_runtime::notice::short_count;
use keel_runtime::{BuiltinCommand, ContractExt, Surface};

use crate::session::{Offer, Session, rpc_error};

/// keel's own commands an editor is offered, as the runtime's catalog words them.
fn own() -> impl Iterator<Item = &'static BuiltinCommand> {
    keel_runtime::BUILTIN_COMMANDS
        .iter()
        .filter(|command| command.surfaces.contains(&Surface::Acp))
}

/// The own command `name` (or an alias of it) names.
pub fn builtin(name: &str) -> Option<&'static BuiltinCommand> {
    keel_runtime::builtin_command(name).filter(|command| command.surfaces.contains(&Surface::Acp))
}

/// Whether `name` is one of keel acp's own commands.
pub fn is_builtin(name: &str) -> bool {
    builtin(name).is_some()
}

/// A hint for people, or none for a command without arguments.
fn hint(command: &BuiltinCommand) -> Option<&'static str> {
    (!command.args.is_empty()).then_some(command.args)
}

fn command(name: &str, description: &str, hint: Option<&str>) -> AvailableCommand {
    let command = AvailableCommand::new(name, description);
    match hint {
        Some(hint) => command.input(AvailableCommandInput::Unstructured(
            UnstructuredCommandInput::new(hint),
        )),
        None => command,
    }
}

/// The extension commands keel acp's own do not shadow.
fn extension_commands(extensions: Vec<CommandInfo>) -> impl Iterator<Item = CommandInfo> {
    extensions.into_iter().filter(|c| !is_builtin(&c.name))
}

/// The commands as `available_commands_update` lists them: keel acp's own, then
/// `extensions`'.
pub fn available(extensions: Vec<CommandInfo>) -> Vec<AvailableCommand> {
    let own = own().map(|c| command(c.name, c.description, hint(c)));
    let theirs = extension_commands(extensions)
        .map(|c| command(&c.name, &c.description, c.argument_hint.as_deref()));
    own.chain(theirs).collect()
}

/// The runtime's extension commands now; none when it cannot say (the editor still gets
/// keel acp's own).
async fn extensions(session: &Session) -> Vec<CommandInfo> {
    match session.runtime.request(ops::ListCommands {}).await {
        Ok(commands) => commands,
        Err(error) => {
            tracing::warn!(session = %session.id, %error, "cannot list the extensions' commands");
            Vec::new()
        }
    }
}

/// Offers the session's commands to the editor.
pub async fn offer(session: &Session, connection: &ConnectionTo<Client>, offer: Offer) {
    let commands = available(extensions(session).await);
    session.offer_commands(connection, commands, offer);
}

/// The answer to a command nobody offers.
pub fn unknown(name: &str) -> String {
    format!("Unknown command `/{name}`; `/help` lists keel's commands.")
}

/// Sends `text` as the agent's answer.
pub fn reply(session: &Session, connection: &ConnectionTo<Client>, text: String) {
    session.send(
        connection,
        SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::Text(TextContent::new(
            text,
        )))),
    );
}

/// Runs keel acp's own `/name args`; the reply goes to the editor as an answer.
pub async fn run(
    session: &Arc<Session>,
    connection: &ConnectionTo<Client>,
    name: &str,
    args: &str,
) -> Result<StopReason, Error> {
    let runtime = &session.runtime;
    let id = session.id.clone();
    // An alias (`/cost`, `/clear`) runs what its command does.
    let name = builtin(name).map_or(name, |command| command.name);
    let text = match name {
        "help" => {
            let mut text = String::from("keel's commands:\n");
            for c in own() {
                match hint(c) {
                    Some(hint) => {
                        text.push_str(&format!("- `/{} {hint}`: {}\n", c.name, c.description))
                    }
                    None => text.push_str(&format!("- `/{}`: {}\n", c.name, c.description)),
                }
            }
            let theirs: Vec<CommandInfo> = extension_commands(extensions(session).await).collect();
            if !theirs.is_empty() {
                text.push_str("\nFrom extensions (skills, command files, MCP servers):\n");
                for c in theirs {
                    match &c.argument_hint {
                        Some(hint) => {
                            text.push_str(&format!("- `/{} {hint}`: {}\n", c.name, c.description))
                        }
                        None => text.push_str(&format!("- `/{}`: {}\n", c.name, c.description)),
                    }
                }
            }
            text
        }
        "new" => {
            runtime
                .request(ops::RewindSession {
                    session_id: id,
                    revision: 0,
                })
                .await
                .map_err(|e| rpc_error(&e))?;
            "Started over: the conversation is empty. Earlier messages stay recoverable with `keel sessions rewind`.".into()
        }
        "model" if args.is_empty() => {
            let current = session.model();
            let mut text = format!("Model: `{current}`. Switch with `/model provider/model`");
            if !session.models.is_empty() {
                text.push_str(":\n");
                for model in &session.models {
                    let mark = if *model == current { " (current)" } else { "" };
                    text.push_str(&format!("- `{model}`{mark}\n"));
                }
            } else {
                text.push('.');
            }
            text
        }
        "model" => {
            runtime
                .request(ops::UpdateSession {
                    session_id: id,
                    title: None,
                    model: Some(args.to_owned()),
                    mode: None,
                    thinking: None,
                })
                .await
                .map_err(|e| rpc_error(&e))?;
            format!("Model switched to `{}`.", session.model())
        }
        "status" => {
            let record = runtime
                .request(ops::GetSession { session_id: id })
                .await
                .map_err(|e| rpc_error(&e))?;
            let sandbox = &session.sandbox;
            format!(
                "Session `{}` ({})\n- folder: `{}`\n- model: `{}`\n- mode: `{}`\n- sandbox: {}\n- messages: {}, revision {}",
                record.id,
                if record.title.is_empty() {
                    "untitled"
                } else {
                    &record.title
                },
                session.cwd.display(),
                session.model(),
                session.mode(),
                sandbox,
                record.length,
                record.revision,
            )
        }
        "usage" => {
            let usage = session.totals().usage;
            format!(
                "This session: {} tokens ({} input, {} cache read, {} cache write, {} output of which {} reasoning), ${:.4}.",
                short_count(usage.total_tokens()),
                short_count(usage.input),
                short_count(usage.cache_read),
                short_count(usage.cache_write),
                short_count(usage.output),
                short_count(usage.reasoning),
                usage.cost.total
            )
        }
        "context" => {
            let report = runtime
                .request(ops::ContextReport { session_id: id })
                .await
                .map_err(|e| rpc_error(&e))?;
            let window = u64::from(report.window);
            let share = |tokens: u64| {
                if window > 0 {
                    format!(" ({:.0}%)", tokens as f64 * 100.0 / window as f64)
                } else {
                    String::new()
                }
            };
            let mut text = match session.totals().context.filter(|(used, _)| *used > 0) {
                Some((used, _)) => format!(
                    "The last request used {} of {} tokens{}.\n",
                    short_count(used),
                    short_count(window),
                    share(used)
                ),
                _ => "No request was sent in this session yet.\n".into(),
            };
            let about = if report.measured { "" } else { "about " };
            text.push_str(&format!(
                "The next request carries {about}{} tokens{}:",
                short_count(report.total()),
                share(report.total())
            ));
            for part in report.parts.iter().filter(|part| part.tokens > 0) {
                text.push_str(&format!("\n- {}: {}", part.label, short_count(part.tokens)));
            }
            text.push_str(&format!("\nWindow: {} tokens", short_count(window)));
            if let Some(at) = report.compact_at {
                text.push_str(&format!("; compaction starts at {}", short_count(at)));
            }
            if let Some(limit) = report.limit {
                text.push_str(&format!("; input limit {}", short_count(limit)));
            }
            text.push('.');
            if report.compactions > 0 {
                text.push_str(&format!(
                    "\nCompacted {} time{}; the summaries are about {} tokens in all.",
                    report.compactions,
                    if report.compactions == 1 { "" } else { "s" },
                    short_count(report.summary_tokens)
                ));
            }
            text
        }
        "compact" => {
            let instructions = (!args.is_empty()).then(|| args.to_owned());
            match runtime
                .request(ops::Compact {
                    session_id: id,
                    instructions,
                })
                .await
                .map_err(|e| rpc_error(&e))?
            {
                Some(revision) => {
                    format!("Compacted the conversation into a summary (revision {revision}).")
                }
                None => "Nothing to compact yet.".into(),
            }
        }
        other => unknown(other),
    };
    reply(session, connection, text);
    Ok(StopReason::EndTurn)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The editor is offered the catalog's words, and aliases reach their command.
    #[test]
    fn the_catalog_is_what_an_editor_is_offered() {
        let offered = available(Vec::new());
        let names: Vec<String> = offered.iter().map(|c| c.name.clone()).collect();
        for name in [
            "help", "new", "model", "status", "context", "usage", "compact",
        ] {
            assert!(names.iter().any(|n| n == name), "/{name} in {names:?}");
        }
        assert_eq!(builtin("cost").map(|c| c.name), Some("usage"));
        assert_eq!(builtin("clear").map(|c| c.name), Some("new"));
        assert!(
            builtin("diff").is_none(),
            "a TUI command is not an editor's"
        );
        for name in &names {
            assert!(keel_runtime::is_reserved(name), "/{name}");
        }
    }
}
