//! The harness's own extensions (DESIGN §4, §6–§9), each on the runtime's extension SPI and
//! none wired into the loop:
//!
//! - `reminders`: what the model is told at the start of a turn (identity, unfinished todos,
//!   a project without instructions, credential-like variables the shell sees, reminders the
//!   session was left) and during it (the time a `--timeout` leaves, the todo cadence), with
//!   a reminder dropped when it would push the request past the input limit;
//! - `runaway-guard`: notices the model going round in circles and reminds it once;
//! - `terminal-recovery`: an empty final answer after successful tools gets one more chance;
//! - `source-references`: fetched pages get host-made markers, and answers cite them;
//! - `plan`: plan mode's workflow (the per-turn rules, `exit_plan_mode`, `/approve-plan`);
//! - `host.output-budget` (host-owned): a result larger than the budget is archived as an
//!   artifact, the model gets head, tail and a receipt;
//! - `host.session-report` (host-owned): `llm-call.json` and a call log, enough to rebuild
//!   any request byte for byte.
//!
//! Two loaders of the user's own prompt files, in Claude Code's formats, for the runtime to
//! wire in: [`skills`] (instructions the model loads by name through the `skill` tool) and
//! [`commands`] (custom slash commands); [`discovery`] holds what they share.
//! User hooks ([`hooks`]), Claude Code's settings and protocol, are an engine the host
//! calls at its events; they are not an extension of the SPI.
//!
//! The feedback bundle ([`feedback`]) and the request rebuild ([`report::replay`]) serve
//! `keel feedback` and `keel sessions replay-request`.

pub mod budget;
pub mod commands;
pub mod discovery;
pub mod extend;
pub mod feedback;
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
        ProfileEntry::on(Arc::new(extend::Skills)),
        ProfileEntry::on(Arc::new(extend::Commands)),
        ProfileEntry::on(Arc::new(extend::hooks::UserHooks)),
        ProfileEntry::on(Arc::new(plan::PlanMode)),
        ProfileEntry::on(Arc::new(keel_mcp::McpExtension::default())),
        ProfileEntry::on(Arc::new(tasks::TasksExtension)),
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
