//! Background tasks (SPEC §14): delegated work run as a child session of the parent (a parent
//! link, none of its history) on the same runtime, in this process, with a turn of its own.
//!
//! The runtime owns what makes results exact after a crash: the task records in the store,
//! the executors (at most `tasks.max_concurrent` running, the rest `queued`), the role's
//! ceiling on the child's tools and sandbox, completion notices through the parent's steering
//! queue, and consumption: a read of an ended task's result is only a candidate until the
//! parent's turn ends completed and committed; then it is confirmed. Tasks whose executor is
//! gone are settled `lost` when their parent is opened again. The tools the model uses live in
//! `keel-extensions`; front ends see `task` session events and the `list_tasks` and `stop_task`
//! operations.

mod output;
mod parent;
mod run;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::Duration;

use keel_protocol::{SessionEventBody, SessionId, TaskInfo, TaskStatus, TurnId};
use keel_store::{NewSession, NewTask, new_id};
use tokio::sync::{Semaphore, watch};
use tokio_util::sync::CancellationToken;

use crate::error::RuntimeError;
use crate::runtime::Runtime;
pub use output::OutputRead;
use output::Progress;

/// Longest a `task_output` read may wait for news (the 30 s).
pub const MAX_OUTPUT_WAIT: Duration = Duration::from_secs(30);

/// Longest a session's close waits for its stopped tasks to end.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// The tasks this process executes, across every runtime in it (ACP runs one per folder over
/// one store): a task owned by this process but missing here has lost its executor.
static LIVE: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(|| Mutex::new(HashSet::new()));

fn live_ids() -> HashSet<String> {
    LIVE.lock().unwrap_or_else(PoisonError::into_inner).clone()
}

/// Which tools a task's child session may have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ceiling {
    /// Every tool the session would have, but these.
    AllExcept(Vec<String>),
    /// Only these (tools that join a turn late, such as MCP servers', are left out).
    Only(Vec<String>),
}

impl Ceiling {
    /// Whether `tool` is under the ceiling.
    pub fn allows(&self, tool: &str) -> bool {
        match self {
            Self::AllExcept(denied) => !denied.iter().any(|d| d == tool),
            Self::Only(allowed) => allowed.iter().any(|a| a == tool),
        }
    }
}

/// The tools a task never gets, whatever its role: tasks do not start tasks.
pub const TASK_TOOLS: &[&str] = &[
    "task",
    "task_append",
    "task_query",
    "task_output",
    "task_stop",
];

/// What a child session is allowed, fixed when its task starts.
#[derive(Debug, Clone)]
pub(crate) struct TaskProfile {
    pub(crate) ceiling: Ceiling,
    /// Commands run under the read-only sandbox.
    pub(crate) read_only: bool,
    /// The role's instructions, after keel's system prompt.
    pub(crate) instructions: Option<String>,
}

/// Tools that belong to the user's own session: a plan is submitted for the user's review
/// by the session they talk to, never by a task; and a task works toward its parent's ends,
/// never a goal of its own that would start turns nobody watches.
const SESSION_ONLY_TOOLS: &[&str] = &["exit_plan_mode", "create_goal", "get_goal", "update_goal"];

impl TaskProfile {
    pub(crate) fn allows(&self, tool: &str) -> bool {
        !TASK_TOOLS.contains(&tool)
            && !SESSION_ONLY_TOOLS.contains(&tool)
            && self.ceiling.allows(tool)
    }
}

/// A task to start.
#[derive(Debug, Clone)]
pub struct TaskSpec {
    /// What it is for, in a few words.
    pub description: String,
    /// The child's first input.
    pub prompt: String,
    /// The role's name (`explore`, `worker`, `verifier`, a custom agent's).
    pub agent: String,
    /// Another model (`provider/model`) for the child; `None`: the parent's.
    pub model: Option<String>,
    /// Whether the parent goes on without waiting (it is told when the task ends).
    pub background: bool,
    /// The role's tool ceiling.
    pub ceiling: Ceiling,
    /// Commands run under the read-only sandbox.
    pub read_only: bool,
    /// The role's instructions for the child.
    pub instructions: Option<String>,
}

/// One task this runtime executes.
pub(crate) struct LiveTask {
    pub(crate) id: String,
    pub(crate) parent: SessionId,
    pub(crate) child: SessionId,
    pub(crate) cancel: CancellationToken,
    /// Progress and the final answer, as they come.
    pub(crate) progress: Mutex<Progress>,
    /// Bumped on every change of status or output; true once ended.
    pub(crate) changed: watch::Sender<(u64, bool)>,
    /// Reads waiting for news: while one waits, the parent gets the result from it and
    /// needs no notice.
    pub(crate) waiters: std::sync::atomic::AtomicUsize,
}

/// Counts a waiting read for as long as it lives.
pub(crate) struct Waiting<'a>(&'a LiveTask);

impl<'a> Waiting<'a> {
    pub(crate) fn new(task: &'a LiveTask) -> Self {
        task.waiters
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Self(task)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0
            .waiters
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl LiveTask {
    fn bump(&self, ended: bool) {
        self.changed.send_modify(|(n, done)| {
            *n += 1;
            *done |= ended;
        });
    }
}

/// The runtime's task state.
pub(crate) struct TaskTable {
    live: Mutex<HashMap<String, Arc<LiveTask>>>,
    permits: Arc<Semaphore>,
    /// Reads of ended tasks' results, by the parent turn that read them (SPEC §14).
    candidates: Mutex<HashMap<TurnId, Vec<String>>>,
    /// The auto cursor of `task_output`, by task.
    cursors: Mutex<HashMap<String, u64>>,
    /// Bumped whenever a task starts or ends.
    settled: watch::Sender<u64>,
}

impl TaskTable {
    pub(crate) fn new(max_concurrent: u32) -> Self {
        Self {
            live: Mutex::new(HashMap::new()),
            permits: Arc::new(Semaphore::new(max_concurrent as usize)),
            candidates: Mutex::new(HashMap::new()),
            cursors: Mutex::new(HashMap::new()),
            settled: watch::channel(0).0,
        }
    }

    fn live(&self, id: &str) -> Option<Arc<LiveTask>> {
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .cloned()
    }

    pub(crate) fn any_live_for(&self, parent: &SessionId) -> bool {
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .any(|t| &t.parent == parent)
    }

    fn insert(&self, task: Arc<LiveTask>) {
        LIVE.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(task.id.clone());
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(task.id.clone(), task);
        self.settled.send_modify(|n| *n += 1);
    }

    fn remove(&self, id: &str) {
        self.live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
        LIVE.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
        self.settled.send_modify(|n| *n += 1);
    }

    /// Notes that `turn` read the result of the ended task `id`.
    fn candidate(&self, turn: &TurnId, id: &str) {
        let mut candidates = self
            .candidates
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let list = candidates.entry(turn.clone()).or_default();
        if !list.iter().any(|known| known == id) {
            list.push(id.to_owned());
        }
    }

    pub(crate) fn take_candidates(&self, turn: &TurnId) -> Vec<String> {
        self.candidates
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(turn)
            .unwrap_or_default()
    }
}

/// The runtime's tasks, as the task tools and front ends use them. Cheap to clone.
#[derive(Clone)]
pub struct Tasks {
    runtime: Runtime,
}

impl std::fmt::Debug for Tasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tasks").finish_non_exhaustive()
    }
}

impl Runtime {
    /// The runtime's background tasks.
    pub(crate) fn tasks(&self) -> Tasks {
        Tasks {
            runtime: self.clone(),
        }
    }
}

impl Tasks {
    fn table(&self) -> &TaskTable {
        &self.runtime.inner.tasks
    }

    /// Starts a task for `parent` (open in this runtime): a new child session, `queued`
    /// until a slot is free, then `running`.
    pub async fn spawn(
        &self,
        parent: &SessionId,
        spec: TaskSpec,
    ) -> Result<TaskInfo, RuntimeError> {
        let runtime = &self.runtime;
        let parent_slot = runtime.slot(parent)?;
        let (mode, parent_model) = {
            let state = parent_slot.lock();
            (state.mode, state.model.clone())
        };
        let model = match spec.model.as_deref() {
            Some(name) => runtime.resolve_task_model(name, &parent_model)?,
            None => parent_model,
        };
        let store = runtime.store();
        let record = store
            .create_session(NewSession {
                title: spec.description.clone(),
                cwd: runtime.settings().cwd.display().to_string(),
                model: model.name.clone(),
                parent_id: Some(parent.clone()),
            })
            .await?;
        let profile = Arc::new(TaskProfile {
            ceiling: spec.ceiling,
            read_only: spec.read_only,
            instructions: spec.instructions,
        });
        let child = runtime.install_child(record, profile, model, mode)?;
        self.start(
            parent,
            child,
            spec.description,
            spec.agent,
            spec.background,
            None,
            spec.prompt,
        )
        .await
    }

    /// Records a task on `child` and starts its executor.
    #[expect(clippy::too_many_arguments, reason = "one task's fields, each once")]
    async fn start(
        &self,
        parent: &SessionId,
        child: Arc<crate::runtime::Slot>,
        description: String,
        agent: String,
        background: bool,
        parent_task: Option<String>,
        prompt: String,
    ) -> Result<TaskInfo, RuntimeError> {
        let id = new_id("task-");
        let info = self
            .runtime
            .store()
            .insert_task(NewTask {
                id: id.clone(),
                session_id: parent.clone(),
                child_session_id: Some(child.id.clone()),
                parent_task_id: parent_task,
                description,
                agent,
                background,
            })
            .await?;
        let live = Arc::new(LiveTask {
            id,
            parent: parent.clone(),
            child: child.id.clone(),
            cancel: CancellationToken::new(),
            progress: Mutex::new(Progress::default()),
            changed: watch::channel((0, false)).0,
            waiters: std::sync::atomic::AtomicUsize::new(0),
        });
        self.table().insert(live.clone());
        if let Ok(slot) = self.runtime.slot(parent) {
            slot.lock().tasks_seen = true;
            slot.emit(SessionEventBody::Task { task: info.clone() });
        }
        tokio::spawn(run::execute(self.runtime.clone(), live, child, prompt));
        Ok(info)
    }

    /// One task as stored.
    pub async fn get(&self, id: &str) -> Result<TaskInfo, RuntimeError> {
        Ok(self.runtime.store().task(id).await?)
    }

    /// The tasks `session` started, oldest first (tasks whose executor is gone settled
    /// `lost` first).
    pub async fn list(&self, session: &SessionId) -> Result<Vec<TaskInfo>, RuntimeError> {
        self.runtime.settle_lost(session).await;
        Ok(self.runtime.store().tasks(session).await?)
    }

    /// Waits until the task has ended, or `cancel` fires (which stops the task).
    pub async fn wait(
        &self,
        id: &str,
        cancel: &CancellationToken,
    ) -> Result<TaskInfo, RuntimeError> {
        if let Some(live) = self.table().live(id) {
            let _waiting = Waiting::new(&live);
            let mut changed = live.changed.subscribe();
            loop {
                if changed.borrow_and_update().1 {
                    break;
                }
                tokio::select! {
                    result = changed.changed() => if result.is_err() { break },
                    () = cancel.cancelled() => {
                        self.stop(id).await?;
                        let _ = changed.wait_for(|(_, done)| *done).await;
                        break;
                    }
                }
            }
        }
        self.get(id).await
    }

    /// Asks a task to stop: `stopping` until its turn is aborted, then `canceled`. `false`
    /// when it had ended already.
    pub async fn stop(&self, id: &str) -> Result<bool, RuntimeError> {
        let Some(live) = self.table().live(id) else {
            // Not run here: either ended, or its executor is gone (settled on the next list).
            self.get(id).await?;
            return Ok(false);
        };
        if let Some(info) = self
            .runtime
            .store()
            .set_task_status(id, TaskStatus::Stopping, None)
            .await?
        {
            self.runtime.task_changed(&live.parent, info);
        }
        live.cancel.cancel();
        live.bump(false);
        Ok(true)
    }

    /// Steers a running task with `text`, or starts a follow-up task on an ended one's child
    /// session (same role and ceiling) and returns it.
    pub async fn append(
        &self,
        parent: &SessionId,
        id: &str,
        text: String,
    ) -> Result<TaskInfo, RuntimeError> {
        let info = self.get(id).await?;
        if &info.session_id != parent {
            return Err(RuntimeError::Usage(format!(
                "task {id} belongs to another session"
            )));
        }
        let Some(child) = info.child_session_id.clone() else {
            return Err(RuntimeError::Usage(format!("task {id} has no session")));
        };
        if let Some(live) = self.table().live(id) {
            self.runtime.enqueue_steer(&live.child, text).await?;
            return self.get(id).await;
        }
        let slot = match self.runtime.slot(&child) {
            Ok(slot) if slot.profile.is_some() => slot,
            _ => {
                return Err(RuntimeError::Usage(format!(
                    "task {id} cannot be followed up: its session is not open in this process"
                )));
            }
        };
        self.start(
            parent,
            slot,
            info.description,
            info.agent,
            info.background,
            Some(info.id),
            text,
        )
        .await
    }

    /// Reads a task's progress from `offset` (default: where the last read stopped),
    /// waiting up to `wait` for news while it runs. Reading an ended task to its end gives
    /// its result, and makes `reader` (the parent's turn) a consumption candidate.
    pub async fn output(
        &self,
        id: &str,
        offset: Option<u64>,
        wait: Duration,
        reader: Option<&TurnId>,
    ) -> Result<OutputRead, RuntimeError> {
        output::read(self, id, offset, wait.min(MAX_OUTPUT_WAIT), reader).await
    }

    /// Waits until no task of `session` runs in this runtime.
    pub async fn settled(&self, session: &SessionId) {
        let mut changed = self.table().settled.subscribe();
        while self.table().any_live_for(session) {
            if changed.changed().await.is_err() {
                return;
            }
        }
    }

    /// Stops every task of `session` running here and waits until they have ended.
    pub async fn stop_all(&self, session: &SessionId) {
        let ids: Vec<String> = self
            .table()
            .live
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .filter(|t| &t.parent == session)
            .map(|t| t.id.clone())
            .collect();
        for id in ids {
            if let Err(error) = self.stop(&id).await {
                tracing::warn!(task = %id, %error, "cannot stop the task");
            }
        }
        // A child turn is bounded by the runner's own abort grace; this only stops a close
        // from waiting forever on keel's own bug.
        if tokio::time::timeout(STOP_WAIT, self.settled(session))
            .await
            .is_err()
        {
            tracing::warn!(%session, "tasks still running after being stopped");
        }
    }

    /// Whether a task of `session` runs in this runtime.
    pub fn running(&self, session: &SessionId) -> bool {
        self.table().any_live_for(session)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_gets_no_task_goal_or_plan_tools_whatever_its_role() {
        let profile = TaskProfile {
            ceiling: Ceiling::AllExcept(Vec::new()),
            read_only: false,
            instructions: None,
        };
        for tool in [
            "task",
            "exit_plan_mode",
            "create_goal",
            "get_goal",
            "update_goal",
        ] {
            assert!(!profile.allows(tool), "{tool}");
        }
        assert!(profile.allows("bash"));
    }
}
