//! Each operation's own reply type. [`Operation`] ties an operation type to what it answers,
//! so `request` returns exactly that; [`Reply`] is the same answer tagged by operation, for
//! callers that send operations as values (a queue of [`Op`]s, a forwarding contract).

use keel_protocol::{CommandInfo, ContextReport, QueueEntry, SessionExport, TaskInfo, ops};
use keel_store::{SessionRecord, StoredEntry};

use crate::runtime::Opened;
use crate::turn::TurnHandle;

/// What `Enqueue` answers: the queued input, and the turn it started when none was running.
#[derive(Debug)]
pub struct Queued {
    /// The input.
    pub entry: QueueEntry,
    /// The turn started for it.
    pub turn: Option<TurnHandle>,
}

/// What `RunCommand` answers.
#[derive(Debug)]
pub enum CommandOutcome {
    /// A prompt command started this turn.
    Turn(TurnHandle),
    /// The command's answer for the user; no turn started.
    Text(String),
}

/// An operation with its reply type.
pub trait Operation: Into<keel_protocol::Op> + Send {
    /// What the runtime answers it with.
    type Reply: Send;
    /// The reply, when `reply` is this operation's (it always is for the runtime's own);
    /// else the operation it answers.
    fn take(reply: Reply) -> Result<Self::Reply, &'static str>;
}

macro_rules! replies {
    ($($(#[$doc:meta])* $name:ident => $reply:ty,)*) => {
        /// An operation's reply, tagged by the operation it answers.
        #[derive(Debug)]
        #[non_exhaustive]
        pub enum Reply {
            $($(#[$doc])* $name($reply),)*
        }

        impl Reply {
            /// The operation this answers, as its `Op` variant is named.
            pub fn operation(&self) -> &'static str {
                match self {
                    $(Self::$name(_) => stringify!($name),)*
                }
            }
        }

        $(impl Operation for ops::$name {
            type Reply = $reply;
            fn take(reply: Reply) -> Result<$reply, &'static str> {
                match reply {
                    Reply::$name(value) => Ok(value),
                    other => Err(other.operation()),
                }
            }
        })*
    };
}

replies! {
    /// Sessions, newest first.
    ListSessions => Vec<SessionRecord>,
    /// The session's record.
    GetSession => SessionRecord,
    /// History.
    GetMessages => Vec<StoredEntry>,
    /// Committed revisions, oldest first.
    ListRevisions => Vec<u64>,
    /// The slash commands extensions offer.
    ListCommands => Vec<CommandInfo>,
    /// Mentions besides files, by source.
    ListMentions => Vec<keel_protocol::MentionInfo>,
    /// The session's tasks, oldest first.
    ListTasks => Vec<TaskInfo>,
    /// The transcript, secrets masked.
    ExportSession => SessionExport,
    /// What fills the context window.
    ContextReport => ContextReport,
    /// The waiting inputs.
    ListQueue => Vec<QueueEntry>,
    /// The opened session.
    OpenSession => Opened,
    /// The changed record.
    UpdateSession => SessionRecord,
    /// The new session's record.
    ForkSession => SessionRecord,
    /// The new head revision.
    RewindSession => u64,
    /// The turn asking the message again.
    Retry => TurnHandle,
    /// The text taken back; `None` when there was nothing to take back.
    TakeBack => Option<String>,
    /// Asked (the title changes when the answer comes).
    TitleSession => (),
    /// Deleted.
    DeleteSession => (),
    /// Closed.
    CloseSession => (),
    /// The started turn.
    Submit => TurnHandle,
    /// The started turn.
    RunShell => TurnHandle,
    /// A turn or an answer.
    RunCommand => CommandOutcome,
    /// Handed over.
    Attach => (),
    /// The queued input and the turn it started.
    Enqueue => Queued,
    /// The queue after the edit.
    EditQueued => Vec<QueueEntry>,
    /// The queue after the withdrawal.
    CancelQueued => Vec<QueueEntry>,
    /// The queue in its new order.
    ReorderQueue => Vec<QueueEntry>,
    /// Whether a turn was running.
    Abort => bool,
    /// The started turn.
    Dispatch => TurnHandle,
    /// Whether the task was running.
    StopTask => bool,
    /// Delivered.
    AnswerPermission => (),
    /// Delivered.
    AnswerQuestion => (),
    /// The new revision; `None` when there was nothing to compact.
    Compact => Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_operation_takes_only_its_own_reply() {
        assert_eq!(ops::Abort::take(Reply::Abort(true)), Ok(true));
        assert_eq!(ops::Abort::take(Reply::StopTask(true)), Err("StopTask"));
        assert_eq!(
            ops::Compact::take(Reply::ListRevisions(vec![1])),
            Err("ListRevisions")
        );
    }
}
