//! The registration API an extension gets during its `init`, and what it collects.

use std::sync::{Arc, Mutex, PoisonError};

use keel_agent::ToolRef;

use super::{ExtensionError, ExtensionEvent, Hook, ReminderProvider, SessionChangeHook, TurnScope};
use crate::settings::Config;

/// Builds tools for a turn; called at every assembly.
pub type ToolFactory = Arc<dyn Fn(&TurnScope) -> Vec<ToolRef> + Send + Sync>;

/// Builds prompt text for a turn; `None` adds nothing.
pub type PromptFn = Arc<dyn Fn(&TurnScope) -> Option<String> + Send + Sync>;

/// Builds a handler bound to one turn.
pub type HookFactory = Arc<dyn Fn(&TurnScope) -> Hook + Send + Sync>;

/// A contributed tool.
#[derive(Clone)]
pub(crate) enum ToolSource {
    Static(ToolRef),
    Factory(ToolFactory),
}

/// Contributed prompt text.
#[derive(Clone)]
pub(crate) enum PromptSource {
    Static(String),
    Dynamic(PromptFn),
}

impl PromptSource {
    pub(crate) fn render(&self, scope: &TurnScope) -> Option<String> {
        match self {
            Self::Static(text) => Some(text.clone()),
            Self::Dynamic(build) => build(scope),
        }
        .filter(|text| !text.trim().is_empty())
    }
}

/// A contributed handler.
#[derive(Clone)]
pub(crate) enum HookSource {
    /// The same handler for every turn (bound to each turn by an adapter).
    Shared(Hook),
    /// A handler built for each turn.
    PerTurn(ExtensionEvent, HookFactory),
}

/// Everything one extension registered.
#[derive(Clone, Default)]
pub(crate) struct Contributions {
    pub(crate) tools: Vec<ToolSource>,
    pub(crate) system_prompt: Vec<PromptSource>,
    pub(crate) user_prefix: Vec<PromptSource>,
    pub(crate) reminders: Vec<(i32, Arc<dyn ReminderProvider>)>,
    pub(crate) system_reminders: Vec<Arc<dyn ReminderProvider>>,
    pub(crate) hooks: Vec<HookSource>,
    pub(crate) session_hooks: Vec<Arc<dyn SessionChangeHook>>,
    pub(crate) commands: Vec<Arc<dyn super::CommandSource>>,
    pub(crate) trusted_code: Vec<keel_tools::protect::TrustedPath>,
}

struct Window {
    extension: String,
    open: bool,
    contributions: Contributions,
}

/// What an extension may call during `init`. Cloning it does not extend the window: once
/// `init` returned, every call on any clone is an [`ExtensionError::OutsideInit`].
#[derive(Clone)]
pub struct ExtensionApi {
    window: Arc<Mutex<Window>>,
    config: Arc<Config>,
    host: Arc<super::HostInfo>,
}

impl ExtensionApi {
    pub(crate) fn open(extension: &str, config: Arc<Config>, host: Arc<super::HostInfo>) -> Self {
        Self {
            window: Arc::new(Mutex::new(Window {
                extension: extension.to_owned(),
                open: true,
                contributions: Contributions::default(),
            })),
            config,
            host,
        }
    }

    /// Where the runtime works: its folder, keel's home, whether the user trusts the
    /// project for this run.
    pub fn host(&self) -> &super::HostInfo {
        &self.host
    }

    /// The runtime's configuration, read once here: an extension that needs a setting
    /// takes it during `init`.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Closes the window and hands over what was registered.
    pub(crate) fn close(&self) -> Contributions {
        let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
        window.open = false;
        std::mem::take(&mut window.contributions)
    }

    fn with(
        &self,
        what: &'static str,
        add: impl FnOnce(&mut Contributions),
    ) -> Result<(), ExtensionError> {
        let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
        if !window.open {
            return Err(ExtensionError::OutsideInit {
                extension: window.extension.clone(),
                what,
            });
        }
        add(&mut window.contributions);
        Ok(())
    }

    /// The id of the extension being initialised.
    pub fn extension_id(&self) -> String {
        self.window
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extension
            .clone()
    }

    /// Adds a tool offered to every turn.
    pub fn register_tool(&self, tool: ToolRef) -> Result<(), ExtensionError> {
        self.with("register a tool", |c| {
            c.tools.push(ToolSource::Static(tool))
        })
    }

    /// Adds a factory whose tools are offered to each turn it is asked for.
    pub fn register_tool_factory(&self, factory: ToolFactory) -> Result<(), ExtensionError> {
        self.with("register a tool factory", |c| {
            c.tools.push(ToolSource::Factory(factory));
        })
    }

    /// Adds text to the system prompt.
    pub fn contribute_system_prompt(&self, text: impl Into<String>) -> Result<(), ExtensionError> {
        let text = text.into();
        self.with("contribute to the system prompt", |c| {
            c.system_prompt.push(PromptSource::Static(text));
        })
    }

    /// Adds system-prompt text computed for each turn.
    pub fn contribute_system_prompt_fn(&self, build: PromptFn) -> Result<(), ExtensionError> {
        self.with("contribute to the system prompt", |c| {
            c.system_prompt.push(PromptSource::Dynamic(build));
        })
    }

    /// Adds text placed before the user's input in a turn's prompt.
    pub fn contribute_user_prompt_prefix(
        &self,
        text: impl Into<String>,
    ) -> Result<(), ExtensionError> {
        let text = text.into();
        self.with("contribute a user prompt prefix", |c| {
            c.user_prefix.push(PromptSource::Static(text));
        })
    }

    /// Adds a user-prompt prefix computed for each turn.
    pub fn contribute_user_prompt_prefix_fn(&self, build: PromptFn) -> Result<(), ExtensionError> {
        self.with("contribute a user prompt prefix", |c| {
            c.user_prefix.push(PromptSource::Dynamic(build));
        })
    }

    /// Adds a reminder provider; a turn's reminders are ordered by priority, highest first.
    pub fn register_reminder_provider(
        &self,
        priority: i32,
        provider: Arc<dyn ReminderProvider>,
    ) -> Result<(), ExtensionError> {
        self.with("register a reminder provider", |c| {
            c.reminders.push((priority, provider));
        })
    }

    /// Adds a provider of text for the host's one reminder block; the block's providers run
    /// in registration order.
    pub fn register_system_reminder(
        &self,
        provider: Arc<dyn ReminderProvider>,
    ) -> Result<(), ExtensionError> {
        self.with("register a system reminder", |c| {
            c.system_reminders.push(provider);
        })
    }

    /// Hears about a session's rewinds, compactions and deletion.
    pub fn on_session_change(
        &self,
        hook: Arc<dyn SessionChangeHook>,
    ) -> Result<(), ExtensionError> {
        self.with("register a session change handler", |c| {
            c.session_hooks.push(hook);
        })
    }

    /// Offers slash commands (a skill, a custom command, an MCP prompt, `/mcp`); the
    /// source is asked for its list whenever a front end asks, so it may change.
    pub fn register_commands(
        &self,
        source: Arc<dyn super::CommandSource>,
    ) -> Result<(), ExtensionError> {
        self.with("register commands", |c| c.commands.push(source))
    }

    /// Declares files and folders that commands this extension runs on the user's trust
    /// (a hook's script, an MCP server's program) run: they become control files of every
    /// session, which the model may not change short of `full` ([`keel_tools::protect`]).
    pub fn protect_trusted_code(
        &self,
        paths: Vec<keel_tools::protect::TrustedPath>,
    ) -> Result<(), ExtensionError> {
        self.with("protect trusted code", |c| c.trusted_code.extend(paths))
    }

    /// Handles an event with `hook` in every turn.
    pub fn on(&self, hook: Hook) -> Result<(), ExtensionError> {
        self.with("register a handler", |c| {
            c.hooks.push(HookSource::Shared(hook))
        })
    }

    /// Handles `event` with a handler built for each turn, bound to that turn's scope.
    pub fn on_each_turn(
        &self,
        event: ExtensionEvent,
        factory: HookFactory,
    ) -> Result<(), ExtensionError> {
        self.with("register a handler", |c| {
            c.hooks.push(HookSource::PerTurn(event, factory));
        })
    }
}
