//! The reminders at the start of a turn (DESIGN §4), each a provider of text for the host's
//! one reminder block. A provider says nothing when its data is incomplete.

use std::path::Path;

use keel_runtime::extension::{Criticality, ReminderData, ReminderProvider};
use keel_tools::todo::TodoStatus;

use crate::text::{defuse, latest_todos, today};

/// Rounds between two reminders of unfinished todos (DESIGN §4).
pub const TODO_EVERY_ROUNDS: u64 = 5;

/// Most variable names the secret-environment hint lists.
const MAX_SECRET_NAMES: usize = 24;

/// Who the model is and where: in full on a session's first round, short afterwards.
pub struct Identity;

impl ReminderProvider for Identity {
    fn id(&self) -> &str {
        "identity"
    }

    fn reminder(&self, data: &ReminderData<'_>) -> Option<String> {
        let scope = data.scope;
        if data.round <= 1 {
            Some(format!(
                "You are keel, working for the user in session {} (round {}). Working folder: {}. \
                 Model: {}. Today is {} (UTC).",
                scope.session_id,
                data.round,
                defuse(&scope.cwd.display().to_string()),
                scope.model,
                today()
            ))
        } else {
            Some(format!(
                "keel, session {}, round {}; today is {}.",
                scope.session_id,
                data.round,
                today()
            ))
        }
    }
}

/// Unfinished todos, at most every [`TODO_EVERY_ROUNDS`] rounds.
pub struct TodoCompletion;

impl ReminderProvider for TodoCompletion {
    fn id(&self) -> &str {
        "todo-completion"
    }

    fn criticality(&self) -> Criticality {
        Criticality::Critical
    }

    fn reminder(&self, data: &ReminderData<'_>) -> Option<String> {
        if data
            .last_fired()
            .is_some_and(|last| data.round < last + TODO_EVERY_ROUNDS)
        {
            return None;
        }
        let todos = latest_todos(data.history)?;
        let open: Vec<_> = todos
            .iter()
            .filter(|t| t.status != TodoStatus::Completed)
            .collect();
        if open.is_empty() {
            return None;
        }
        let mut text = format!(
            "Your todo list has {} unfinished item{}:",
            open.len(),
            if open.len() == 1 { "" } else { "s" }
        );
        for todo in open {
            let mark = match todo.status {
                TodoStatus::InProgress => "in progress",
                _ => "pending",
            };
            text.push_str(&format!("\n- [{mark}] {}", defuse(&todo.content)));
        }
        text.push_str(
            "\nIf this request continues that work, keep the list current with todowrite; if it \
             does not, finish or drop those items.",
        );
        Some(text)
    }
}

/// A project without agent instructions: suggest writing some, on the first round.
pub struct ColdStart;

impl ReminderProvider for ColdStart {
    fn id(&self) -> &str {
        "cold-start"
    }

    fn reminder(&self, data: &ReminderData<'_>) -> Option<String> {
        if data.round > 1 || has_instructions(&data.scope.cwd) {
            return None;
        }
        Some(
            "This project has no AGENTS.md (or CLAUDE.md) telling coding agents how to build, \
             test and find their way around it. Once you have learned that, offer to write one; \
             do not create it unasked."
                .into(),
        )
    }
}

/// Whether the project holds `AGENTS.md` or `CLAUDE.md` from its root down to `cwd`.
fn has_instructions(cwd: &Path) -> bool {
    let root = keel_runtime::settings::instructions::project_root(cwd);
    cwd.ancestors()
        .take_while(|dir| dir.starts_with(&root))
        .any(|dir| dir.join("AGENTS.md").is_file() || dir.join("CLAUDE.md").is_file())
}

/// The names, never the values, of credential-like variables the shell would see, on the
/// first round.
pub struct SecretEnvironment;

impl ReminderProvider for SecretEnvironment {
    fn id(&self) -> &str {
        "secret-environment"
    }

    fn reminder(&self, data: &ReminderData<'_>) -> Option<String> {
        if data.round > 1 {
            return None;
        }
        let names = visible_secret_names(data)?;
        if names.is_empty() {
            return None;
        }
        let more = names.len().saturating_sub(MAX_SECRET_NAMES);
        let mut list = names
            .iter()
            .take(MAX_SECRET_NAMES)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        if more > 0 {
            list.push_str(&format!(" and {more} more"));
        }
        Some(format!(
            "Commands you run can see these credential-like environment variables: {}. Use \
             them only by name (\"$NAME\"); never print, echo or write their values anywhere.",
            defuse(&list)
        ))
    }
}

/// The credential-like variables left after the shell's cleaning, by name.
fn visible_secret_names(data: &ReminderData<'_>) -> Option<Vec<String>> {
    use keel_tools::bash::envclean;
    let env = &data.scope.host.as_ref()?.env;
    let (kept, _) = envclean::command_env(env).ok()?;
    let mut names: Vec<String> = kept
        .into_iter()
        .filter(|(name, value)| {
            envclean::looks_secret(name) || envclean::looks_like_credential(value)
        })
        .map(|(name, _)| name)
        .collect();
    names.sort();
    names.dedup();
    Some(names)
}

/// Reminders the session was left (an interrupted turn, a finished task), delivered once.
pub struct PendingSessionReminders;

impl ReminderProvider for PendingSessionReminders {
    fn id(&self) -> &str {
        "session-reminders"
    }

    fn criticality(&self) -> Criticality {
        Criticality::Critical
    }

    fn reminder(&self, data: &ReminderData<'_>) -> Option<String> {
        let pending = data.pending;
        let first = pending.first()?;
        for reminder in pending {
            data.deliver(&reminder.id);
        }
        if pending.len() == 1 {
            return Some(defuse(first.text.trim()));
        }
        let mut text = String::from("Reminders left for this session:");
        for reminder in pending {
            text.push_str(&format!("\n- {}", defuse(reminder.text.trim())));
        }
        Some(text)
    }
}
