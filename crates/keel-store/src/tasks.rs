//! The async face of background tasks (`sql/tasks.rs`).

use std::collections::HashSet;

use keel_protocol::{SessionId, TaskInfo, TaskStatus, TurnId};

use crate::error::Result;
use crate::model::{NewTask, TaskOutput};
use crate::sql;
use crate::store::Store;

impl Store {
    /// Records a new task, `queued`, executed by this process.
    pub async fn insert_task(&self, new: NewTask) -> Result<TaskInfo> {
        self.call(move |conn| sql::insert_task(conn, &new)).await
    }

    /// One task.
    pub async fn task(&self, id: &str) -> Result<TaskInfo> {
        let id = id.to_owned();
        self.call(move |conn| sql::get_task(conn, &id)).await
    }

    /// The tasks `session` started, oldest first.
    pub async fn tasks(&self, session: &SessionId) -> Result<Vec<TaskInfo>> {
        let session = session.clone();
        self.call(move |conn| sql::list_tasks(conn, session.as_str()))
            .await
    }

    /// The tasks `session` started as they stand, for listings: an unended task whose
    /// process is gone reads as `lost` (nothing is written; see `settle_lost_tasks`).
    pub async fn tasks_as_they_stand(&self, session: &SessionId) -> Result<Vec<TaskInfo>> {
        let session = session.clone();
        self.call(move |conn| sql::list_tasks_as_they_stand(conn, session.as_str()))
            .await
    }

    /// The task a child session works for, when it is one.
    pub async fn task_of_child(&self, child: &SessionId) -> Result<Option<TaskInfo>> {
        let child = child.clone();
        self.call(move |conn| sql::task_of_child(conn, child.as_str()))
            .await
    }

    /// Moves a task to `status`; `None` when it had ended already (and stays ended).
    pub async fn set_task_status(
        &self,
        id: &str,
        status: TaskStatus,
        error: Option<String>,
    ) -> Result<Option<TaskInfo>> {
        let id = id.to_owned();
        self.call(move |conn| sql::set_task_status(conn, &id, status, error.as_deref()))
            .await
    }

    /// Keeps the task's progress output and final answer as they are now.
    pub async fn set_task_output(&self, id: &str, output: TaskOutput) -> Result<()> {
        let id = id.to_owned();
        self.call(move |conn| sql::set_task_output(conn, &id, &output.output, &output.final_text))
            .await
    }

    /// The task's progress output and final answer.
    pub async fn task_output(&self, id: &str) -> Result<TaskOutput> {
        let id = id.to_owned();
        self.call(move |conn| sql::task_output(conn, &id)).await
    }

    /// Records that the task's completion notice reached its parent.
    pub async fn mark_task_delivered(&self, id: &str) -> Result<TaskInfo> {
        let id = id.to_owned();
        self.call(move |conn| sql::mark_task_delivered(conn, &id))
            .await
    }

    /// Confirms, after `turn` was committed, that it read the results of `ids`.
    pub async fn consume_tasks(&self, ids: Vec<String>, turn: &TurnId) -> Result<Vec<TaskInfo>> {
        let turn = turn.clone();
        self.call(move |conn| sql::consume_tasks(conn, &ids, turn.as_str()))
            .await
    }

    /// Settles as `lost` every unended task of `session` no live executor runs (`live`: the
    /// tasks this process runs).
    pub async fn settle_lost_tasks(
        &self,
        session: &SessionId,
        live: HashSet<String>,
    ) -> Result<Vec<TaskInfo>> {
        let session = session.clone();
        self.call(move |conn| sql::settle_lost_tasks(conn, session.as_str(), &live))
            .await
    }
}
