//! The harness's own extensions on the runtime's SPI (reminders, runaway guard, recovery, output
//! budget, session report, sources, goals, plan mode, task tools, feedback) and the user's
//! (skills, commands, hooks, MCP); `with_harness` mounts them all for every front end.
//! It must not import keel-tui, keel-acp or keel-cli.
#![forbid(unsafe_code)]

pub mod budget;
pub mod commands;
pub mod discovery;
pub mod extend;
pub mod feedback;
pub mod goals;
pub mod guard;
pub mod hooks;
mod per_turn;
pub mod plan;
pub mod recovery;
pub mod reminders;
pub mod report;
pub mod skills;
pub mod sources;
pub mod tasks;
mod text;

use std::sync::Arc;

use keel_runtime::extension::{Extension, ProfileEntry};

/// Id of the reminders extension.
pub const REMINDERS: &str = "reminders";
/// Id of the runaway guard.
pub const RUNAWAY_GUARD: &str = "runaway-guard";
/// Id of terminal response recovery.
pub const TERMINAL_RECOVERY: &str = "terminal-recovery";
/// Id of source references.
pub const SOURCE_REFERENCES: &str = "source-references";
/// Id of the tool-output budget (host-owned).
pub const OUTPUT_BUDGET: &str = "host.output-budget";
/// Id of the session report (host-owned).
pub const SESSION_REPORT: &str = "host.session-report";

/// The configurable extensions of the default profile, each on (and each can be switched
/// off by `extensions.disabled`). Source references act only under `source_references:
/// true`; the guard only under `runaway_guard.enabled`.
pub fn catalog() -> Vec<ProfileEntry> {
    vec![
        ProfileEntry::on(Arc::new(reminders::Reminders)),
        ProfileEntry::on(Arc::new(guard::RunawayGuard)),
        ProfileEntry::on(Arc::new(recovery::TerminalRecovery)),
        ProfileEntry::on(Arc::new(sources::SourceReferences::default())),
        ProfileEntry::on(Arc::new(goals::Goals)),
        ProfileEntry::on(Arc::new(extend::Skills)),
        ProfileEntry::on(Arc::new(extend::Commands)),
        ProfileEntry::on(Arc::new(extend::hooks::UserHooks)),
        ProfileEntry::on(Arc::new(plan::PlanMode)),
        ProfileEntry::on(Arc::new(keel_mcp::McpExtension::default())),
        ProfileEntry::on(Arc::new(tasks::TasksExtension)),
        ProfileEntry::on(Arc::new(feedback::FeedbackCommand)),
    ]
}

/// `options` with keel's extensions: the catalog before any extensions already there, the
/// host-owned ones after. Every front end starts its runtime through this, so none runs
/// without the output budget or the session report.
pub fn with_harness(mut options: keel_runtime::RuntimeOptions) -> keel_runtime::RuntimeOptions {
    let mut extensions = catalog();
    extensions.append(&mut options.extensions);
    options.extensions = extensions;
    options.host_extensions.extend(host());
    options
        .compactor
        .get_or_insert_with(|| Arc::new(keel_context::ContextCompactor));
    options
}

/// The host-owned extensions, mounted after keel's built-ins: context management sizes
/// every request first, the output budget must see every other extension's rewrite of a
/// result, and the report every request.
pub fn host() -> Vec<Arc<dyn Extension>> {
    vec![
        Arc::new(keel_context::ContextManager::default()),
        Arc::new(budget::OutputBudget),
        Arc::new(report::SessionReport::default()),
    ]
}
