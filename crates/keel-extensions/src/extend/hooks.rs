//! User hooks on the runtime's events: `hooks:` in keel's configuration, and a trusted
//! project's `.keel/settings.json` and `.claude/settings.json`, run by the engine of
//! [`crate::hooks`] with Claude Code's JSON on stdin.
//!
//! | hook | where it runs |
//! | --- | --- |
//! | PreToolUse | `before_tool_call`: block, deny, ask/allow (told to the permission gate, which still decides), changed input |
//! | PostToolUse | `after_tool_call` of a call that succeeded: a block or context reaches the model with the result |
//! | UserPromptSubmit | `turn_start`: a block refuses the turn before anything is stored; context joins the first request |
//! | Stop | `on_step_end` of an answer with no tool call: a block makes the model go on (three times a turn at most) |
//! | SessionStart, SessionEnd, PreCompact, Notification | session changes: opened, closed, a manual compaction, a permission question |

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use keel_agent::runner::{
    AfterToolCallHook, BeforeLlmAction, BeforeLlmCallHook, BeforeToolCallHook, LlmCallView,
    StepEndHook, StepQueue,
};
use keel_agent::{BlockSource, HookError, StepSummary, ToolGate, ToolOutput, TurnContext};
use keel_protocol::{ContentBlock, Message, SessionId, ToolCall, TurnId, UserMessage};
use keel_runtime::extension::{
    Extension, ExtensionApi, ExtensionError, ExtensionEvent, Hook, SessionChange,
    SessionChangeHook, TurnScope, TurnStartHook,
};
use keel_runtime::settings::trust::TrustStore;
use keel_tools::permission::{Mode, Presumption};
use keel_tools::protect::trusted::shown;
use keel_tools::protect::{CommandLine, Reach, TrustedPath};
use serde_json::{Value, json};

use crate::hooks::{
    self, Common, CompactTrigger, Decision, EndReason, Environment, EventData, HookSettings,
    Outcome, PermissionMode, SessionSource,
};

/// Id of the user hooks extension.
pub const ID: &str = "hooks";
/// How many times a turn's Stop hooks may make the model go on.
const MAX_STOP_BLOCKS: u32 = 3;
/// The project files whose `hooks` keel reads, from the project's root.
pub const PROJECT_FILES: &[&str] = &[".claude/settings.json", ".keel/settings.json"];

/// User hooks.
#[derive(Default)]
pub struct UserHooks;

struct State {
    settings: HookSettings,
    env: Environment,
    cwd: PathBuf,
    /// The runtime, for the history the transcript hooks read is written from.
    control: keel_runtime::extension::HostControl,
    /// Problems of the settings, and projects' hook files not trusted, told once.
    warnings: Mutex<Vec<String>>,
    /// Context hooks gave (SessionStart, UserPromptSubmit), for the session's next
    /// request.
    context: Mutex<HashMap<SessionId, Vec<String>>>,
    /// Stop blocks per turn.
    stops: Mutex<HashMap<TurnId, u32>>,
    /// Events for people, until a turn can report them.
    reports: Mutex<Vec<String>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The hook settings of a runtime: the configuration's, then each project file's when
/// the user trusts the project; problems and untrusted files as warnings; and what the hooks
/// that will run reach in the project (protected while they are trusted).
pub fn settings(
    config: &keel_runtime::settings::Config,
    host: &keel_runtime::extension::HostInfo,
) -> (HookSettings, Vec<String>, Vec<TrustedPath>) {
    let mut warnings = Vec::new();
    let mut protect = Vec::new();
    let mut all = config
        .hooks
        .as_ref()
        .map(HookSettings::from_value)
        .unwrap_or_default();
    warnings.extend(all.problems().iter().map(|p| format!("hooks: {p}")));
    let user_file = host.keel_home.as_ref().map_or_else(
        || "your configuration".to_owned(),
        |h| {
            h.join(keel_runtime::settings::FILE_NAME)
                .display()
                .to_string()
        },
    );
    protect.extend(trusted_paths(&all, host, &user_file));
    for (file, found) in project_files(host, &mut warnings) {
        if !trusted(host, &file) {
            warnings.push(format!(
                "{} has hooks keel did not run: the project is not trusted. Run `keel trust` to trust the file as it is now, or pass --trust-project-mcp.",
                file.display()
            ));
            continue;
        }
        warnings.extend(
            found
                .problems()
                .iter()
                .map(|p| format!("{}: {p}", file.display())),
        );
        protect.extend(trusted_paths(&found, host, &file.display().to_string()));
        all = hooks::merge(all, found);
    }
    (all, warnings, protect)
}

/// The project's hook files that hold hooks (at the project's root, the user's own),
/// with their hooks; files that cannot be used are warnings.
fn project_files(
    host: &keel_runtime::extension::HostInfo,
    warnings: &mut Vec<String>,
) -> Vec<(PathBuf, HookSettings)> {
    let mut out = Vec::new();
    for name in PROJECT_FILES {
        let file = match host.project.file(name) {
            Ok(Some(file)) => file,
            Ok(None) => continue,
            Err(why) => {
                warnings.push(why.to_string());
                continue;
            }
        };
        let Ok(text) = keel_tools::files::read_regular(&file) else {
            continue;
        };
        let value: Value = match serde_json::from_str(&text) {
            Ok(value) => value,
            Err(error) => {
                warnings.push(format!("{}: not JSON ({error})", file.display()));
                continue;
            }
        };
        let Some(hooks) = value.get("hooks") else {
            continue;
        };
        let found = HookSettings::from_value(hooks);
        if !found.is_empty() {
            out.push((file, found));
        }
    }
    out
}

/// What the hooks of `settings` (from `origin`) run in the project.
fn trusted_paths(
    settings: &HookSettings,
    host: &keel_runtime::extension::HostInfo,
    origin: &str,
) -> Vec<TrustedPath> {
    let mut out = Vec::new();
    for command in settings.commands() {
        let why = format!("the trusted hook `{}` ({origin}) runs", shown(command));
        out.extend(reach(command, host).trusted_paths(&why));
    }
    out
}

/// What one hook command reaches in the project ([`keel_tools::protect::trusted`]), read
/// as the hook runs: in the working folder, with `CLAUDE_PROJECT_DIR` set.
pub fn reach(command: &str, host: &keel_runtime::extension::HostInfo) -> Reach {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut vars = std::collections::HashMap::new();
    vars.insert(
        "CLAUDE_PROJECT_DIR".to_owned(),
        host.project.root.display().to_string(),
    );
    if let Some(home) = &home {
        vars.insert("HOME".to_owned(), home.display().to_string());
    }
    let shell = keel_tools::permission::shell::ShellEnv { home, vars };
    keel_tools::protect::reach(
        CommandLine::Shell(command),
        &host.cwd,
        &[host.project.root.clone(), host.cwd.clone()],
        &shell,
    )
}

/// The project's hook files that hold hooks the user has not trusted, and what trusting
/// each would let run.
pub fn untrusted(host: &keel_runtime::extension::HostInfo) -> Vec<(PathBuf, Reach)> {
    project_files(host, &mut Vec::new())
        .into_iter()
        .filter(|(file, _)| !trusted(host, file))
        .map(|(file, found)| {
            let mut all = Reach::default();
            for command in found.commands() {
                all.merge(reach(command, host));
            }
            (file, all)
        })
        .collect()
}

fn trusted(host: &keel_runtime::extension::HostInfo, file: &Path) -> bool {
    host.trust_project_mcp
        || keel_mcp::user_trusts_projects(host.keel_home.as_deref())
        || TrustStore::open(host.keel_home.as_deref()).is_ok_and(|s| s.is_trusted(file))
}

impl Extension for UserHooks {
    fn id(&self) -> &str {
        ID
    }

    fn description(&self) -> Option<&str> {
        Some("user hooks in Claude Code's format")
    }

    fn init(&self, api: &ExtensionApi) -> Result<(), ExtensionError> {
        let config = api.config();
        let host = api.host();
        let (settings, warnings, protect) = settings(config, host);
        // What the hooks run stays out of the model's reach while they are trusted.
        api.protect_trusted_code(protect)?;
        if settings.is_empty() && warnings.is_empty() {
            return Ok(());
        }
        let root = host.project.root.clone();
        let state = Arc::new(State {
            settings,
            env: Environment {
                vars: keel_mcp::server_env(config),
                project_dir: root,
            },
            cwd: host.cwd.clone(),
            control: host.control.clone(),
            warnings: Mutex::new(warnings),
            context: Mutex::new(HashMap::new()),
            stops: Mutex::new(HashMap::new()),
            reports: Mutex::new(Vec::new()),
        });
        let each = |event: ExtensionEvent| {
            let state = state.clone();
            api.on_each_turn(
                event,
                Arc::new(move |scope: &TurnScope| {
                    let turn = Arc::new(TurnHooks {
                        state: state.clone(),
                        scope: scope.clone(),
                    });
                    match event {
                        ExtensionEvent::BeforeToolCall => Hook::BeforeToolCall(turn),
                        ExtensionEvent::AfterToolCall => Hook::AfterToolCall(turn),
                        ExtensionEvent::OnStepEnd => Hook::OnStepEnd(turn),
                        _ => Hook::BeforeLlmCall(turn),
                    }
                }),
            )
        };
        each(ExtensionEvent::BeforeToolCall)?;
        each(ExtensionEvent::AfterToolCall)?;
        each(ExtensionEvent::OnStepEnd)?;
        each(ExtensionEvent::BeforeLlmCall)?;
        api.on(Hook::TurnStart(Arc::new(PromptHooks {
            state: state.clone(),
        })))?;
        api.on_session_change(Arc::new(SessionHooks { state }))?;
        Ok(())
    }
}

impl State {
    fn common(&self, session: &str, mode: Option<Mode>, transcript: Option<PathBuf>) -> Common {
        Common {
            session_id: session.to_owned(),
            transcript_path: transcript,
            cwd: self.cwd.clone(),
            permission_mode: match mode {
                Some(Mode::Plan) => PermissionMode::Plan,
                Some(Mode::Auto) => PermissionMode::AcceptEdits,
                Some(Mode::Full) => PermissionMode::BypassPermissions,
                _ => PermissionMode::Default,
            },
        }
    }

    /// The session's history written as Claude Code's transcript for the hook about to run
    /// (only hooks cause it to be written); `None` when it cannot be.
    async fn transcript(&self, session: &str) -> Option<PathBuf> {
        let runtime = self.control.runtime()?;
        let id = SessionId::new(session);
        let entries = self
            .control
            .request(keel_protocol::ops::GetMessages {
                session_id: id.clone(),
                revision: None,
            })
            .await
            .ok()?;
        let messages: Vec<keel_protocol::Message> =
            entries.into_iter().map(|entry| entry.message).collect();
        let path = runtime.session_dir(&id).join(hooks::transcript::FILE_NAME);
        let cwd = self.cwd.clone();
        let written = path.clone();
        let session = session.to_owned();
        tokio::task::spawn_blocking(move || {
            hooks::transcript::write(&written, &messages, &session, &cwd)
        })
        .await
        .ok()?
        .ok()?;
        Some(path)
    }

    async fn run(&self, session: &str, mode: Option<Mode>, event: EventData) -> Outcome {
        if !self.settings.has(event.event()) {
            return Outcome::default();
        }
        let transcript = self.transcript(session).await;
        let outcome = hooks::run(
            &self.settings,
            &event,
            &self.common(session, mode, transcript),
            &self.env,
        )
        .await;
        let mut reports = lock(&self.reports);
        reports.extend(outcome.reports.iter().map(ToString::to_string));
        reports.extend(outcome.system_messages.iter().cloned());
        outcome
    }

    /// Tells the turn what happened to hooks since the last report.
    fn flush(&self, scope: &TurnScope) {
        for warning in std::mem::take(&mut *lock(&self.warnings)) {
            scope.emit(ID, "warning", json!({"text": warning}));
        }
        for report in std::mem::take(&mut *lock(&self.reports)) {
            scope.emit(ID, "report", json!({"text": report}));
        }
    }
}

fn mode_of(scope: &TurnScope) -> Option<Mode> {
    scope.host.as_ref().map(|services| services.gate.mode())
}

/// A turn's hooks.
struct TurnHooks {
    state: Arc<State>,
    scope: TurnScope,
}

#[async_trait]
impl BeforeToolCallHook for TurnHooks {
    async fn before_tool_call(
        &self,
        turn: &TurnContext,
        call: &ToolCall,
    ) -> Result<ToolGate, HookError> {
        let outcome = self
            .state
            .run(
                turn.session_id.as_str(),
                mode_of(&self.scope),
                EventData::PreToolUse {
                    tool: call.name.clone(),
                    input: call.arguments.clone(),
                    tool_use_id: call.id.to_string(),
                },
            )
            .await;
        self.state.flush(&self.scope);
        if let Some(reason) = outcome.block {
            return Ok(ToolGate::Block {
                reason: format!("a PreToolUse hook blocked the call: {reason}"),
                source: BlockSource::Hook,
            });
        }
        match outcome.permission {
            Some((Decision::Deny, reason)) => {
                return Ok(ToolGate::Block {
                    reason: format!("a PreToolUse hook denied the call: {reason}"),
                    source: BlockSource::Hook,
                });
            }
            Some((Decision::Allow, reason)) => self.presume(call, Presumption::Allow(reason)),
            Some((Decision::Ask, reason)) => self.presume(call, Presumption::Ask(reason)),
            None => {}
        }
        Ok(match outcome.updated_input {
            Some(arguments) if arguments != call.arguments => ToolGate::Rewrite { arguments },
            _ => ToolGate::Allow,
        })
    }
}

impl TurnHooks {
    fn presume(&self, call: &ToolCall, presumption: Presumption) {
        if let Some(services) = &self.scope.host {
            services.permission.presume(call.id.as_str(), presumption);
        }
    }
}

#[async_trait]
impl AfterToolCallHook for TurnHooks {
    async fn after_tool_call(
        &self,
        turn: &TurnContext,
        call: &ToolCall,
        mut output: ToolOutput,
    ) -> Result<ToolOutput, HookError> {
        if output.is_error {
            return Ok(output);
        }
        let text: String = output
            .content
            .iter()
            .filter_map(ContentBlock::as_text)
            .collect::<Vec<_>>()
            .join("\n");
        let outcome = self
            .state
            .run(
                turn.session_id.as_str(),
                mode_of(&self.scope),
                EventData::PostToolUse {
                    tool: call.name.clone(),
                    input: call.arguments.clone(),
                    tool_use_id: call.id.to_string(),
                    response: json!({"output": text, "details": output.details}),
                },
            )
            .await;
        self.state.flush(&self.scope);
        if let Some(reason) = outcome.block {
            output
                .content
                .push(ContentBlock::text(format!("PostToolUse hook: {reason}")));
        }
        for context in outcome.context {
            output.content.push(ContentBlock::text(context));
        }
        Ok(output)
    }
}

#[async_trait]
impl StepEndHook for TurnHooks {
    async fn on_step_end(
        &self,
        turn: &TurnContext,
        step: &StepSummary,
        queue: &StepQueue,
    ) -> Result<(), HookError> {
        let final_answer = match step.message.as_deref() {
            Some(Message::Assistant(message)) => {
                !message.has_tool_calls() && message.stop_reason == keel_protocol::StopReason::Stop
            }
            _ => false,
        };
        if !final_answer {
            return Ok(());
        }
        let blocks = lock(&self.state.stops)
            .get(&turn.turn_id)
            .copied()
            .unwrap_or(0);
        if blocks >= MAX_STOP_BLOCKS {
            lock(&self.state.stops).remove(&turn.turn_id);
            return Ok(());
        }
        let outcome = self
            .state
            .run(
                turn.session_id.as_str(),
                mode_of(&self.scope),
                EventData::Stop {
                    stop_hook_active: blocks > 0,
                },
            )
            .await;
        self.state.flush(&self.scope);
        let Some(reason) = outcome.block else {
            // The turn ends here: its count goes with it.
            lock(&self.state.stops).remove(&turn.turn_id);
            return Ok(());
        };
        lock(&self.state.stops).insert(turn.turn_id.clone(), blocks + 1);
        queue.steer(Message::User(UserMessage::hidden_text(format!(
            "A Stop hook asks you to go on: {reason}"
        ))));
        Ok(())
    }
}

#[async_trait]
impl BeforeLlmCallHook for TurnHooks {
    async fn before_llm_call(&self, view: &LlmCallView<'_>) -> Result<BeforeLlmAction, HookError> {
        self.state.flush(&self.scope);
        let context = lock(&self.state.context).remove(&self.scope.session_id);
        match context {
            Some(parts) if !parts.is_empty() && view.calls_made == 0 => {
                Ok(BeforeLlmAction::AppendMessage(Box::new(Message::User(
                    UserMessage::hidden_text(format!(
                        "<hook-context>\n{}\n</hook-context>",
                        keel_runtime::tags::defuse(&parts.join("\n\n"))
                    )),
                ))))
            }
            Some(parts) => {
                // Not the turn's first request: keep it for the next turn's.
                lock(&self.state.context).insert(self.scope.session_id.clone(), parts);
                Ok(BeforeLlmAction::Continue)
            }
            None => Ok(BeforeLlmAction::Continue),
        }
    }
}

/// UserPromptSubmit, before the turn runs.
struct PromptHooks {
    state: Arc<State>,
}

#[async_trait]
impl TurnStartHook for PromptHooks {
    async fn turn_start(&self, scope: &TurnScope) -> Result<(), HookError> {
        let Some(prompt) = scope.prompt.clone() else {
            return Ok(());
        };
        let outcome = self
            .state
            .run(
                scope.session_id.as_str(),
                mode_of(scope),
                EventData::UserPromptSubmit { prompt },
            )
            .await;
        self.state.flush(scope);
        if let Some(reason) = outcome.block.or(outcome.stop) {
            return Err(HookError {
                message: format!("a UserPromptSubmit hook blocked the prompt: {reason}"),
            });
        }
        if !outcome.context.is_empty() {
            lock(&self.state.context)
                .entry(scope.session_id.clone())
                .or_default()
                .extend(outcome.context);
        }
        Ok(())
    }
}

/// SessionStart, SessionEnd, PreCompact and Notification.
struct SessionHooks {
    state: Arc<State>,
}

#[async_trait]
impl SessionChangeHook for SessionHooks {
    async fn session_changed(
        &self,
        session: &SessionId,
        _dir: Option<&Path>,
        change: &SessionChange,
    ) -> Result<(), HookError> {
        let event = match change {
            SessionChange::Opened { resumed } => EventData::SessionStart {
                source: if *resumed {
                    SessionSource::Resume
                } else {
                    SessionSource::Startup
                },
            },
            SessionChange::Closed => EventData::SessionEnd {
                reason: EndReason::Other,
            },
            SessionChange::Compacting {
                manual,
                instructions,
            } => EventData::PreCompact {
                trigger: if *manual {
                    CompactTrigger::Manual
                } else {
                    CompactTrigger::Auto
                },
                custom_instructions: instructions.clone().unwrap_or_default(),
            },
            SessionChange::Attention { message } => EventData::Notification {
                message: message.clone(),
                title: None,
                notification_type: "permission_prompt".to_owned(),
            },
            _ => return Ok(()),
        };
        let starting = matches!(event, EventData::SessionStart { .. });
        let outcome = self.state.run(session.as_str(), None, event).await;
        if starting && !outcome.context.is_empty() {
            lock(&self.state.context)
                .entry(session.clone())
                .or_default()
                .extend(outcome.context);
        }
        Ok(())
    }
}
