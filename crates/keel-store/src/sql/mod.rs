//! Synchronous SQL over one connection, split by what it keeps: sessions, canonical history
//! and its commits, forks and rewinds, and the input queue. Nothing here is async; `store.rs`
//! decides which thread runs it (see `execution.rs`). Each write is one `IMMEDIATE`
//! transaction, so a killed process leaves either the whole change or none of it.

mod branch;
mod commit;
#[cfg(test)]
mod commit_tests;
mod history;
mod inputs;
mod sessions;
mod state;
mod tasks;

pub(crate) use branch::fork;
pub(crate) use commit::{Applied, apply, verify};
pub(crate) use history::{commit_revisions, commit_turns, read_history};
pub(crate) use inputs::{
    acknowledge_claim, acknowledge_inputs, cancel_input, claim_inputs, edit_input, enqueue_input,
    queued_inputs, release_claim, release_turn_claims, reorder_inputs, requeue_turn_claims,
};
pub(crate) use sessions::{
    child_sessions, create_session, delete_session, get_session, latest_top_session, list_sessions,
    resolve_session, set_model, set_title,
};
pub use state::Unreadable;
pub(crate) use state::{
    acknowledge_reminders, add_reminder, claim_reminders, get_state, release_reminders,
    reminder_round, session_reminders, set_state, update_state,
};

pub(crate) use tasks::{
    consume_tasks, get_task, insert_task, list_tasks, list_tasks_as_they_stand,
    mark_task_delivered, set_task_output, set_task_status, settle_lost_tasks, task_of_child,
    task_output,
};

/// A revision or count as SQLite stores it (saturating: no value here comes near the limit).
pub(crate) fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// A stored revision or count; a negative one (never written) reads as 0.
pub(crate) fn uint(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}
