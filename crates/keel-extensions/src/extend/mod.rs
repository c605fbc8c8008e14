//! The user's own extensions, in the files they already wrote for Claude Code: skills and
//! custom commands (this file) and user hooks ([`hooks`]), each an extension on the SPI.
//!
//! Skills are read at each turn's assembly: the turn's `skill` tool and its system-prompt
//! listing hold that snapshot, so a skill edited mid-turn changes the next turn only.

pub mod hooks;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use keel_agent::HookError;
use keel_protocol::{CommandInfo, SessionId, TurnId};
use keel_runtime::extension::{
    CommandError, CommandSource, Expansion, Extension, ExtensionApi, ExtensionError, Hook,
    TurnScope, TurnStartHook,
};
use serde_json::json;

use crate::{commands, skills};

/// Id of the skills extension.
pub const SKILLS: &str = "skills";
/// Id of the custom commands extension.
pub const COMMANDS: &str = "commands";

/// Problems of the user's files, each reported once per runtime.
#[derive(Default)]
pub(crate) struct Reported {
    seen: Mutex<BTreeSet<String>>,
}

impl Reported {
    /// Emits each of `problems` not emitted before as `extension`'s `problem` event.
    pub(crate) fn report(&self, scope: &TurnScope, extension: &str, problems: Vec<String>) {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        for problem in problems {
            if seen.insert(problem.clone()) {
                scope.emit(extension, "problem", json!({"text": problem}));
            }
        }
    }
}

struct Catalog {
    keel_home: Option<PathBuf>,
    project: keel_runtime::settings::Project,
    budget: usize,
    /// The last turn's snapshot, so its tool and its listing agree.
    last: Mutex<Option<(TurnId, Arc<skills::Discovered>)>>,
    reported: Reported,
}

impl Catalog {
    fn discover(&self) -> skills::Discovered {
        skills::discover(&skills::roots(
            self.keel_home.as_deref(),
            Some(&self.project),
        ))
    }

    fn for_turn(&self, turn: &TurnId) -> Arc<skills::Discovered> {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((id, found)) = last.as_ref()
            && id == turn
        {
            return found.clone();
        }
        let found = Arc::new(self.discover());
        *last = Some((turn.clone(), found.clone()));
        found
    }

    fn problems(found: &skills::Discovered) -> Vec<String> {
        found
            .problems
            .iter()
            .map(ToString::to_string)
            .chain(found.notes.iter().map(ToString::to_string))
            .collect()
    }
}

/// `SKILL.md` skills: listed in the system prompt, loaded by the `skill` tool, and each a
/// slash command.
#[derive(Default)]
pub struct Skills;

impl Extension for Skills {
    fn id(&self) -> &str {
        SKILLS
    }

    fn description(&self) -> Option<&str> {
        Some("skills (SKILL.md folders): listed for the model, loaded with the skill tool")
    }

    fn init(&self, api: &ExtensionApi) -> Result<(), ExtensionError> {
        let config = &api.config().skills;
        if !config.enabled {
            return Ok(());
        }
        let host = api.host();
        let catalog = Arc::new(Catalog {
            keel_home: host.keel_home.clone(),
            project: host.project.clone(),
            budget: config.listing_budget,
            last: Mutex::new(None),
            reported: Reported::default(),
        });
        let tools = catalog.clone();
        api.register_tool_factory(Arc::new(move |scope: &TurnScope| {
            let found = tools.for_turn(&scope.turn_id);
            if found.skills.is_empty() {
                return Vec::new();
            }
            vec![skills::skill_tool(found.skills.clone().into())]
        }))?;
        let listing = catalog.clone();
        api.contribute_system_prompt_fn(Arc::new(move |scope: &TurnScope| {
            let found = listing.for_turn(&scope.turn_id);
            skills::listing(&found.skills, listing.budget)
        }))?;
        api.on(Hook::TurnStart(Arc::new(ReportSkillProblems {
            catalog: catalog.clone(),
        })))?;
        api.register_commands(Arc::new(SkillCommands { catalog }))?;
        Ok(())
    }
}

/// A broken skill is reported (once) when a turn that read it starts, with its path.
struct ReportSkillProblems {
    catalog: Arc<Catalog>,
}

#[async_trait]
impl TurnStartHook for ReportSkillProblems {
    async fn turn_start(&self, scope: &TurnScope) -> Result<(), HookError> {
        let found = self.catalog.for_turn(&scope.turn_id);
        self.catalog
            .reported
            .report(scope, SKILLS, Catalog::problems(&found));
        Ok(())
    }
}

struct SkillCommands {
    catalog: Arc<Catalog>,
}

#[async_trait]
impl CommandSource for SkillCommands {
    fn commands(&self) -> Vec<CommandInfo> {
        self.catalog
            .discover()
            .skills
            .into_iter()
            .map(|skill| CommandInfo {
                name: skill.name,
                description: skill.description,
                argument_hint: None,
                source: "skill".to_owned(),
            })
            .collect()
    }

    async fn run(
        &self,
        _session: &SessionId,
        name: &str,
        arguments: &str,
    ) -> Option<Result<Expansion, CommandError>> {
        let found = self.catalog.discover();
        let skill = found.skills.iter().find(|s| s.name == name)?;
        Some(Ok(Expansion::Prompt(format!(
            "Use the skill `{}`:\n\n{}",
            skill.name,
            skills::load_with_arguments(skill, arguments)
        ))))
    }
}

/// Custom slash commands: Markdown files in `$KEEL_HOME/commands/`, `.claude/commands/` and
/// `.keel/commands/`.
#[derive(Default)]
pub struct Commands;

struct CommandFiles {
    keel_home: Option<PathBuf>,
    project: keel_runtime::settings::Project,
    reported: Reported,
}

impl CommandFiles {
    fn discover(&self) -> commands::Discovered {
        commands::discover(&commands::roots(
            self.keel_home.as_deref(),
            Some(&self.project),
        ))
    }
}

impl Extension for Commands {
    fn id(&self) -> &str {
        COMMANDS
    }

    fn description(&self) -> Option<&str> {
        Some("custom slash commands (Markdown prompt files)")
    }

    fn init(&self, api: &ExtensionApi) -> Result<(), ExtensionError> {
        let host = api.host();
        let files = Arc::new(CommandFiles {
            keel_home: host.keel_home.clone(),
            project: host.project.clone(),
            reported: Reported::default(),
        });
        api.register_commands(files.clone())?;
        api.on(Hook::TurnStart(Arc::new(ReportCommandProblems { files })))?;
        Ok(())
    }
}

/// A broken command file is reported (once) at the next turn, with its path.
struct ReportCommandProblems {
    files: Arc<CommandFiles>,
}

#[async_trait]
impl TurnStartHook for ReportCommandProblems {
    async fn turn_start(&self, scope: &TurnScope) -> Result<(), HookError> {
        let found = self.files.discover();
        let problems = found
            .problems
            .iter()
            .map(ToString::to_string)
            .chain(found.notes.iter().map(ToString::to_string))
            .collect();
        self.files.reported.report(scope, COMMANDS, problems);
        Ok(())
    }
}

#[async_trait]
impl CommandSource for CommandFiles {
    fn commands(&self) -> Vec<CommandInfo> {
        self.discover()
            .commands
            .into_iter()
            .map(|command| CommandInfo {
                name: command.name,
                description: command.description,
                argument_hint: command.argument_hint,
                source: "command".to_owned(),
            })
            .collect()
    }

    async fn run(
        &self,
        _session: &SessionId,
        name: &str,
        arguments: &str,
    ) -> Option<Result<Expansion, CommandError>> {
        let found = self.discover();
        let command = found.commands.iter().find(|c| c.name == name)?;
        Some(Ok(Expansion::Prompt(commands::expand(
            &command.body,
            arguments,
        ))))
    }
}

/// A project file that would run code on the user's machine (MCP servers, hooks) and
/// that the user has not trusted yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Untrusted {
    /// The file.
    pub file: PathBuf,
    /// What it would run, for the question.
    pub what: String,
    /// The project files its commands run: the model may not change them while the file is
    /// trusted.
    pub protects: Vec<PathBuf>,
    /// Its commands that run any code of the project (a build tool, a package script),
    /// which no protection covers: the question says so, naming each.
    pub any_code: Vec<String>,
}

/// The project files of `host`'s folder that need the user's trust before keel runs
/// what they define, for a front end that asks.
pub fn untrusted(
    config: &keel_runtime::settings::Config,
    host: &keel_runtime::extension::HostInfo,
) -> Vec<Untrusted> {
    let mut found = Vec::new();
    if let Some(project) = keel_mcp::untrusted_project(config, host) {
        found.push(Untrusted {
            file: project.file,
            what: format!("MCP server(s) {}", project.servers.join(", ")),
            protects: project.reach.paths,
            any_code: project.reach.any_code,
        });
    }
    found.extend(
        hooks::untrusted(host)
            .into_iter()
            .map(|(file, reach)| Untrusted {
                file,
                what: "hooks (commands run at keel's events)".to_owned(),
                protects: reach.paths,
                any_code: reach.any_code,
            }),
    );
    found
}
