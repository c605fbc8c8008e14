//! The host's built-in extensions and the default profile.
//!
//! The built-in tools and the permission gate are extensions like any other, mounted last
//! and never replaceable: `host.tools` (files, search, shell) and `host.permission` (the gate
//! on every call). `todo` and `web-fetch` are ordinary extensions of the default profile, so
//! a user can switch them off (`extensions: {disabled: [web-fetch]}` leaves the model no
//! network tool).

use std::sync::Arc;

use keel_agent::ToolRef;

use crate::extension::{
    Extension, ExtensionApi, ExtensionError, ExtensionEvent, Hook, Overlay, Profile, ProfileEntry,
    TurnScope,
};
use crate::settings::ExtensionsConfig;

/// Id of the built-in tools extension.
pub const HOST_TOOLS: &str = "host.tools";
/// Id of the permission gate extension.
pub const HOST_PERMISSION: &str = "host.permission";
/// Id of the todo list extension.
pub const TODO: &str = "todo";
/// Id of the web fetch extension.
pub const WEB_FETCH: &str = "web-fetch";

/// Built-in tools that belong to optional extensions instead of `host.tools`.
const OPTIONAL_TOOLS: &[(&str, &str)] = &[(TODO, "todowrite"), (WEB_FETCH, "web_fetch")];

/// The session's built-in tools selected by `keep`.
fn session_tools(scope: &TurnScope, keep: impl Fn(&str) -> bool) -> Vec<ToolRef> {
    let Some(host) = &scope.host else {
        return Vec::new();
    };
    host.builtin_tools()
        .iter()
        .filter(|t| keep(&t.definition().name))
        .cloned()
        .collect()
}

struct HostTools;

impl Extension for HostTools {
    fn id(&self) -> &str {
        HOST_TOOLS
    }

    fn description(&self) -> Option<&str> {
        Some("read, write, edit, bash, grep, glob and ls over the working folder")
    }

    fn init(&self, api: &ExtensionApi) -> Result<(), ExtensionError> {
        api.register_tool_factory(Arc::new(|scope| {
            session_tools(scope, |name| {
                !OPTIONAL_TOOLS.iter().any(|(_, tool)| *tool == name)
            })
        }))
    }
}

struct OptionalTool {
    id: &'static str,
    tool: &'static str,
    description: &'static str,
}

impl Extension for OptionalTool {
    fn id(&self) -> &str {
        self.id
    }

    fn description(&self) -> Option<&str> {
        Some(self.description)
    }

    fn init(&self, api: &ExtensionApi) -> Result<(), ExtensionError> {
        let tool = self.tool;
        api.register_tool_factory(Arc::new(move |scope| {
            session_tools(scope, |name| name == tool)
        }))
    }
}

struct HostPermission;

impl Extension for HostPermission {
    fn id(&self) -> &str {
        HOST_PERMISSION
    }

    fn description(&self) -> Option<&str> {
        Some("the permission gate on every tool call")
    }

    fn init(&self, api: &ExtensionApi) -> Result<(), ExtensionError> {
        api.on_each_turn(
            ExtensionEvent::BeforeToolCall,
            Arc::new(|scope| match &scope.host {
                Some(host) => Hook::BeforeToolCall(host.permission.clone()),
                // Without a host there is no gate to consult: refuse every call.
                None => Hook::BeforeToolCall(Arc::new(NoGate)),
            }),
        )
    }
}

/// Blocks every call: a turn assembled without host services has no permission gate.
struct NoGate;

#[async_trait::async_trait]
impl keel_agent::runner::BeforeToolCallHook for NoGate {
    async fn before_tool_call(
        &self,
        _turn: &keel_agent::TurnContext,
        _call: &keel_protocol::ToolCall,
    ) -> Result<keel_agent::ToolGate, keel_agent::HookError> {
        Ok(keel_agent::ToolGate::Block {
            reason: "no permission gate is set up for this turn".into(),
            source: keel_agent::BlockSource::Permission,
        })
    }
}

/// The host's built-in extensions, in mounting order.
pub fn host_builtins() -> Vec<Arc<dyn Extension>> {
    vec![Arc::new(HostTools), Arc::new(HostPermission)]
}

/// The configurable extensions keel ships, each on by default.
pub fn catalog() -> Vec<ProfileEntry> {
    vec![
        ProfileEntry::on(Arc::new(OptionalTool {
            id: TODO,
            tool: "todowrite",
            description: "a todo list the model keeps for multi-step work",
        })),
        ProfileEntry::on(Arc::new(OptionalTool {
            id: WEB_FETCH,
            tool: "web_fetch",
            description: "fetches a public web page as markdown",
        })),
    ]
}

/// The default profile with `extra` extensions (before the host's) and `host_extra` host
/// extensions (after keel's own built-ins, never switched off), overlaid by the
/// configuration: `enabled` switches on, `disabled` switches off and wins.
pub fn profile(
    config: &ExtensionsConfig,
    extra: Vec<ProfileEntry>,
    host_extra: Vec<Arc<dyn Extension>>,
) -> Result<Profile, ExtensionError> {
    let mut entries = catalog();
    entries.extend(extra);
    let overlays: Vec<Overlay> = config
        .enabled
        .iter()
        .map(|id| Overlay::Enable(id.clone()))
        .chain(
            config
                .disabled
                .iter()
                .map(|id| Overlay::Disable(id.clone())),
        )
        .collect();
    let mut host = host_builtins();
    host.extend(host_extra);
    Profile::new(entries, host)?.overlay(&overlays, "the `extensions` configuration")
}
