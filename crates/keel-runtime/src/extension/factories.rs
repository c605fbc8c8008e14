//! Extensions without hand-written `init`: a builder and one-line helpers for tool-only,
//! hook-only, prompt-only, reminder-only and combined extensions.

use std::sync::Arc;

use keel_agent::ToolRef;

use super::api::{Contributions, HookFactory, HookSource, PromptSource, ToolSource};
use super::{
    Extension, ExtensionApi, ExtensionError, ExtensionEvent, Hook, PromptFn, ReminderProvider,
    ToolFactory,
};

/// Builds an extension from its contributions.
pub struct ExtensionBuilder {
    id: String,
    description: Option<String>,
    contributions: Contributions,
}

impl ExtensionBuilder {
    /// An extension with this id and nothing in it yet.
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            description: None,
            contributions: Contributions::default(),
        }
    }

    /// Its description.
    #[must_use]
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }

    /// Adds a tool.
    #[must_use]
    pub fn tool(mut self, tool: ToolRef) -> Self {
        self.contributions.tools.push(ToolSource::Static(tool));
        self
    }

    /// Adds a tool factory.
    #[must_use]
    pub fn tool_factory(mut self, factory: ToolFactory) -> Self {
        self.contributions.tools.push(ToolSource::Factory(factory));
        self
    }

    /// Adds system-prompt text.
    #[must_use]
    pub fn system_prompt(mut self, text: impl Into<String>) -> Self {
        self.contributions
            .system_prompt
            .push(PromptSource::Static(text.into()));
        self
    }

    /// Adds system-prompt text computed per turn.
    #[must_use]
    pub fn system_prompt_fn(mut self, build: PromptFn) -> Self {
        self.contributions
            .system_prompt
            .push(PromptSource::Dynamic(build));
        self
    }

    /// Adds a user-prompt prefix.
    #[must_use]
    pub fn user_prompt_prefix(mut self, text: impl Into<String>) -> Self {
        self.contributions
            .user_prefix
            .push(PromptSource::Static(text.into()));
        self
    }

    /// Adds a reminder provider.
    #[must_use]
    pub fn reminder(mut self, priority: i32, provider: Arc<dyn ReminderProvider>) -> Self {
        self.contributions.reminders.push((priority, provider));
        self
    }

    /// Adds a provider of text for the host's reminder block.
    #[must_use]
    pub fn system_reminder(mut self, provider: Arc<dyn ReminderProvider>) -> Self {
        self.contributions.system_reminders.push(provider);
        self
    }

    /// Adds a handler shared by every turn.
    #[must_use]
    pub fn hook(mut self, hook: Hook) -> Self {
        self.contributions.hooks.push(HookSource::Shared(hook));
        self
    }

    /// Adds a handler built for each turn.
    #[must_use]
    pub fn hook_per_turn(mut self, event: ExtensionEvent, factory: HookFactory) -> Self {
        self.contributions
            .hooks
            .push(HookSource::PerTurn(event, factory));
        self
    }

    /// The extension.
    pub fn build(self) -> Arc<dyn Extension> {
        Arc::new(Built {
            id: self.id,
            description: self.description,
            contributions: self.contributions,
        })
    }
}

struct Built {
    id: String,
    description: Option<String>,
    contributions: Contributions,
}

impl Extension for Built {
    fn id(&self) -> &str {
        &self.id
    }

    fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    fn init(&self, api: &ExtensionApi) -> Result<(), ExtensionError> {
        let c = &self.contributions;
        for tool in &c.tools {
            match tool {
                ToolSource::Static(tool) => api.register_tool(tool.clone())?,
                ToolSource::Factory(factory) => api.register_tool_factory(factory.clone())?,
            }
        }
        for part in &c.system_prompt {
            match part {
                PromptSource::Static(text) => api.contribute_system_prompt(text.clone())?,
                PromptSource::Dynamic(build) => api.contribute_system_prompt_fn(build.clone())?,
            }
        }
        for part in &c.user_prefix {
            match part {
                PromptSource::Static(text) => api.contribute_user_prompt_prefix(text.clone())?,
                PromptSource::Dynamic(build) => {
                    api.contribute_user_prompt_prefix_fn(build.clone())?;
                }
            }
        }
        for (priority, provider) in &c.reminders {
            api.register_reminder_provider(*priority, provider.clone())?;
        }
        for provider in &c.system_reminders {
            api.register_system_reminder(provider.clone())?;
        }
        for hook in &c.session_hooks {
            api.on_session_change(hook.clone())?;
        }
        for source in &c.commands {
            api.register_commands(source.clone())?;
        }
        for hook in &c.hooks {
            match hook {
                HookSource::Shared(hook) => api.on(hook.clone())?,
                HookSource::PerTurn(event, factory) => api.on_each_turn(*event, factory.clone())?,
            }
        }
        Ok(())
    }
}

/// An extension that only contributes tools.
pub fn tool_extension(id: impl Into<String>, tools: Vec<ToolRef>) -> Arc<dyn Extension> {
    tools
        .into_iter()
        .fold(ExtensionBuilder::new(id), ExtensionBuilder::tool)
        .build()
}

/// An extension that only handles events.
pub fn hook_extension(id: impl Into<String>, hooks: Vec<Hook>) -> Arc<dyn Extension> {
    hooks
        .into_iter()
        .fold(ExtensionBuilder::new(id), ExtensionBuilder::hook)
        .build()
}

/// An extension that only adds prompt text: to the system prompt, before the user's input,
/// or both.
pub fn prompt_extension(
    id: impl Into<String>,
    system: Option<String>,
    user_prefix: Option<String>,
) -> Arc<dyn Extension> {
    let mut builder = ExtensionBuilder::new(id);
    if let Some(text) = system {
        builder = builder.system_prompt(text);
    }
    if let Some(text) = user_prefix {
        builder = builder.user_prompt_prefix(text);
    }
    builder.build()
}

/// An extension that only provides reminders.
pub fn reminder_extension(
    id: impl Into<String>,
    priority: i32,
    provider: Arc<dyn ReminderProvider>,
) -> Arc<dyn Extension> {
    ExtensionBuilder::new(id)
        .reminder(priority, provider)
        .build()
}
