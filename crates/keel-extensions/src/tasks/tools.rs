//! The task tools the model uses (SPEC §14): `task` starts a child session in a role and
//! waits for it or lets it run in the background, `task_append` steers a running task or
//! follows up an ended one, `task_query` lists this session's tasks, `task_output` reads a
//! task's progress and, once it ended, its result, and `task_stop` stops one.
//!
//! Results come back as `<task_result task_id=… session_id=…>` with the status and the
//! child's final answer; a closing tag inside the answer is defused so a child cannot end
//! the wrapper early and speak as the host.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keel_agent::{
    AgentTool, ExecutionMode, ToolCallContext, ToolError, ToolNature, ToolOutput, ToolRef,
};
use keel_protocol::{SessionId, TaskInfo, TaskStatus, ToolDefinition, TurnId};
use keel_runtime::HostControl;
use keel_runtime::tasks::{OutputRead, TaskSpec, Tasks};
use keel_tools::args::{self, Int};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::roles::{self, Role};

/// Names of the five tools.
pub const TOOL_NAMES: [&str; 5] = [
    "task",
    "task_append",
    "task_query",
    "task_output",
    "task_stop",
];

/// Longest `wait_ms` (the 30 s).
const MAX_WAIT_MS: u64 = 30_000;

/// What every tool of one turn shares.
#[derive(Clone)]
pub(super) struct Bound {
    pub(super) control: HostControl,
    pub(super) session: SessionId,
    pub(super) turn: TurnId,
    pub(super) roles: Arc<[Role]>,
}

impl Bound {
    fn tasks(&self) -> Result<Tasks, ToolError> {
        self.control
            .tasks()
            .ok_or_else(|| ToolError::new("the runtime has stopped"))
    }

    /// The task `id` if it is one of this session's.
    async fn own(&self, tasks: &Tasks, id: &str) -> Result<TaskInfo, ToolError> {
        match tasks.get(id).await {
            Ok(task) if task.session_id == self.session => Ok(task),
            Ok(_) | Err(_) => Err(ToolError::new(format!(
                "no task `{id}` in this session; task_query lists them"
            ))),
        }
    }
}

/// The arguments of `task`; the doc comments are the descriptions the model reads.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TaskArgs {
    /// What it is for, in 3 to 8 words
    description: String,
    /// The whole task: goal, context, what to return
    prompt: String,
    /// The role
    agent: String,
    /// Another model as provider/model (optional)
    #[serde(default, deserialize_with = "args::present")]
    model: Option<String>,
    /// Return at once and let it run (default false)
    #[serde(default)]
    background: bool,
}

/// The arguments of `task_append`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AppendArgs {
    /// The task's id (task-…)
    task_id: String,
    /// What to tell it
    message: String,
}

/// The arguments of `task_query`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct QueryArgs {
    /// The task's id (task-…)
    #[serde(default, deserialize_with = "args::present")]
    task_id: Option<String>,
    /// Only tasks in this status
    #[serde(default, deserialize_with = "args::present")]
    status: Option<String>,
}

/// The arguments of `task_output`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct OutputArgs {
    /// The task's id (task-…)
    task_id: String,
    /// Byte offset to read from
    #[serde(default, deserialize_with = "args::present")]
    offset: Option<Int<0, { args::UNBOUNDED }>>,
    /// How long to wait for news
    #[serde(default, deserialize_with = "args::present")]
    wait_ms: Option<Int<0, MAX_WAIT_MS>>,
}

/// The arguments of `task_stop`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct StopArgs {
    /// The task's id (task-…)
    task_id: String,
}

/// `schema` with the string property `key` limited to `values`, known only at run time
/// (the session's roles, the task statuses).
fn with_enum(mut schema: Value, key: &str, values: &[&str]) -> Value {
    if let Some(property) = schema
        .get_mut("properties")
        .and_then(|p| p.get_mut(key))
        .and_then(Value::as_object_mut)
    {
        property.insert("enum".into(), json!(values));
    }
    schema
}

/// `text` without surrounding blanks, which must leave something.
fn nonblank<'a>(text: &'a str, key: &str) -> Result<&'a str, ToolError> {
    Some(text.trim())
        .filter(|text| !text.is_empty())
        .ok_or_else(|| ToolError::new(format!("`{key}` must be a non-empty string")))
}

/// `text` with the wrapper's closing tag defused.
fn defuse(text: &str) -> String {
    text.replace("</task_result", "<\\/task_result")
}

/// An ended task's result, wrapped.
pub fn task_result(task: &TaskInfo, final_text: &str) -> String {
    let session = task.child_session_id.as_ref().map_or("", SessionId::as_str);
    let mut attributes = format!(
        "task_id=\"{}\" session_id=\"{}\" agent=\"{}\" status=\"{}\"",
        task.id, session, task.agent, task.status
    );
    if task.agent == "verifier" {
        attributes.push_str(&format!(" verdict=\"{}\"", roles::verdict(final_text)));
    }
    let mut body = defuse(final_text.trim());
    if let Some(error) = &task.error
        && task.status != TaskStatus::Succeeded
    {
        if !body.is_empty() {
            body.push_str("\n\n");
        }
        body.push_str(&format!("({})", defuse(error)));
    }
    format!("<task_result {attributes}>\n{body}\n</task_result>")
}

fn summary(task: &TaskInfo) -> String {
    let mut line = format!(
        "{} [{}] {} \"{}\"",
        task.id, task.status, task.agent, task.description
    );
    if task.background {
        line.push_str(" (background)");
    }
    if task.status.is_terminal() {
        line.push_str(if task.consumed_ms.is_some() {
            " result read"
        } else {
            " result not read"
        });
    }
    line
}

fn details(task: &TaskInfo) -> Option<Value> {
    serde_json::to_value(task)
        .ok()
        .map(|task| json!({ "task": task }))
}

fn definition(name: &str, description: String, parameters: Value) -> ToolDefinition {
    ToolDefinition {
        name: name.into(),
        description,
        parameters,
    }
}

/// The five tools for one turn of `bound.session`.
pub(super) fn tools(bound: &Bound) -> Vec<ToolRef> {
    let role_names: Vec<&str> = bound.roles.iter().map(|r| r.name.as_str()).collect();
    let role_list: String = bound
        .roles
        .iter()
        .map(|r| format!("\n- {}: {}", r.name, r.description))
        .collect();
    let statuses: Vec<&str> = TaskStatus::ALL.iter().map(|s| s.as_str()).collect();
    vec![
        Arc::new(TaskTool {
            bound: bound.clone(),
            definition: definition(
                "task",
                format!(
                    "Hand a self-contained piece of work to a task: a fresh agent session in \
                     a role, without this conversation's history (put everything it needs in \
                     the prompt). Several tasks can run at once. With background false (the \
                     default) the call waits and returns the result; with background true it \
                     returns at once, you are told when the task ends, and task_output reads \
                     its result. Roles:{role_list}"
                ),
                with_enum(args::schema::<TaskArgs>(), "agent", &role_names),
            ),
        }) as ToolRef,
        Arc::new(AppendTool {
            bound: bound.clone(),
            definition: definition(
                "task_append",
                "Send more instructions to a running task (it sees them before its next \
                 step), or follow up an ended one: a new task in the same session, which \
                 keeps what it did."
                    .into(),
                args::schema::<AppendArgs>(),
            ),
        }),
        Arc::new(QueryTool {
            bound: bound.clone(),
            definition: definition(
                "task_query",
                "List this session's tasks with their status, or one task by id.".into(),
                with_enum(args::schema::<QueryArgs>(), "status", &statuses),
            ),
        }),
        Arc::new(OutputTool {
            bound: bound.clone(),
            definition: definition(
                "task_output",
                "Read a task's progress from a byte offset (default: where your last read \
                 stopped), waiting up to wait_ms (at most 30000) for news while it runs. \
                 Once the task has ended, reading to the end returns its result."
                    .into(),
                args::schema::<OutputArgs>(),
            ),
        }),
        Arc::new(StopTool {
            bound: bound.clone(),
            definition: definition(
                "task_stop",
                "Stop a running or queued task.".into(),
                args::schema::<StopArgs>(),
            ),
        }),
    ]
}

struct TaskTool {
    bound: Bound,
    definition: ToolDefinition,
}

#[async_trait]
impl AgentTool for TaskTool {
    fn nature(&self) -> ToolNature {
        // The task's own calls pass its own gate; starting it reaches nothing.
        ToolNature::SessionOnly
    }

    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn execution_mode(&self) -> ExecutionMode {
        // Starting tasks side by side is the point: several foreground tasks in one batch
        // run at once.
        ExecutionMode::Parallel
    }

    async fn execute(
        &self,
        arguments: Value,
        context: ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        let args: TaskArgs = args::arguments(arguments)?;
        let description = nonblank(&args.description, "description")?;
        let prompt = nonblank(&args.prompt, "prompt")?;
        let agent = nonblank(&args.agent, "agent")?;
        let Some(role) = self.bound.roles.iter().find(|r| r.name == agent) else {
            let names: Vec<&str> = self.bound.roles.iter().map(|r| r.name.as_str()).collect();
            return Err(ToolError::new(format!(
                "no role `{agent}`; use one of: {}",
                names.join(", ")
            )));
        };
        let model = match args.model.as_deref().map(str::trim) {
            Some("") | Some("inherit") | None => role.model.clone(),
            Some(model) => Some(model.to_owned()),
        };
        let background = args.background;
        let tasks = self.bound.tasks()?;
        let spec = TaskSpec {
            description: description.to_owned(),
            prompt: prompt.to_owned(),
            agent: role.name.clone(),
            model,
            background,
            ceiling: role.ceiling.clone(),
            read_only: role.read_only,
            instructions: Some(role.instructions.clone()),
        };
        let task = tasks
            .spawn(&self.bound.session, spec)
            .await
            .map_err(|e| ToolError::new(format!("cannot start the task: {e}")))?;
        if background {
            return Ok(ToolOutput {
                details: details(&task),
                ..ToolOutput::text(format!(
                    "Started {} ({}) in the background. You will be told when it ends; \
                     task_output reads its progress and result.",
                    task.id, task.agent
                ))
            });
        }
        let ended = tasks
            .wait(&task.id, &context.cancel)
            .await
            .map_err(|e| ToolError::new(e.to_string()))?;
        let read = tasks
            .output(
                &ended.id,
                Some(u64::MAX),
                Duration::ZERO,
                Some(&self.bound.turn),
            )
            .await
            .map_err(|e| ToolError::new(e.to_string()))?;
        let text = task_result(&read.task, read.result.as_deref().unwrap_or_default());
        Ok(ToolOutput {
            details: details(&read.task),
            is_error: read.task.status != TaskStatus::Succeeded,
            ..ToolOutput::text(text)
        })
    }
}

struct AppendTool {
    bound: Bound,
    definition: ToolDefinition,
}

#[async_trait]
impl AgentTool for AppendTool {
    fn nature(&self) -> ToolNature {
        ToolNature::SessionOnly
    }

    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn execute(
        &self,
        arguments: Value,
        _context: ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        let args: AppendArgs = args::arguments(arguments)?;
        let id = nonblank(&args.task_id, "task_id")?;
        let message = nonblank(&args.message, "message")?;
        let tasks = self.bound.tasks()?;
        let before = self.bound.own(&tasks, id).await?;
        let task = tasks
            .append(&self.bound.session, id, message.to_owned())
            .await
            .map_err(|e| ToolError::new(e.to_string()))?;
        let text = if task.id == before.id {
            format!("Sent to {id}; it sees the message before its next step.")
        } else {
            format!(
                "{id} had ended: started the follow-up {} in the same session{}.",
                task.id,
                if task.background {
                    " in the background"
                } else {
                    ""
                }
            )
        };
        Ok(ToolOutput {
            details: details(&task),
            ..ToolOutput::text(text)
        })
    }
}

struct QueryTool {
    bound: Bound,
    definition: ToolDefinition,
}

#[async_trait]
impl AgentTool for QueryTool {
    fn nature(&self) -> ToolNature {
        ToolNature::SessionOnly
    }

    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn execution_mode(&self) -> ExecutionMode {
        ExecutionMode::Parallel
    }

    async fn execute(
        &self,
        arguments: Value,
        _context: ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        let args: QueryArgs = args::arguments(arguments)?;
        let tasks = self.bound.tasks()?;
        if let Some(id) = args.task_id.as_deref() {
            let task = self.bound.own(&tasks, id).await?;
            return Ok(ToolOutput {
                details: details(&task),
                ..ToolOutput::text(summary(&task))
            });
        }
        let status = match args.status.as_deref() {
            Some(text) => Some(TaskStatus::parse(text).ok_or_else(|| {
                ToolError::new(format!("`status` must be a task status, not `{text}`"))
            })?),
            None => None,
        };
        let list = tasks
            .list(&self.bound.session)
            .await
            .map_err(|e| ToolError::new(e.to_string()))?;
        let lines: Vec<String> = list
            .iter()
            .filter(|t| status.is_none_or(|s| t.status == s))
            .map(summary)
            .collect();
        let text = if lines.is_empty() {
            "No tasks.".to_owned()
        } else {
            lines.join("\n")
        };
        Ok(ToolOutput {
            details: Some(json!({ "tasks": list })),
            ..ToolOutput::text(text)
        })
    }
}

struct OutputTool {
    bound: Bound,
    definition: ToolDefinition,
}

fn render(read: &OutputRead) -> String {
    let task = &read.task;
    let mut text = format!(
        "{} ({}) is {}; progress bytes {}..{} of {}.",
        task.id, task.agent, task.status, read.offset, read.next_offset, read.total
    );
    if read.text.is_empty() {
        text.push_str("\n(no new progress)");
    } else {
        text.push_str(&format!("\n<progress>\n{}</progress>", read.text));
    }
    match &read.result {
        Some(result) => {
            text.push('\n');
            text.push_str(&task_result(task, result));
        }
        None if task.status.is_terminal() => text.push_str(&format!(
            "\nMore progress follows; read on from offset {} for the result.",
            read.next_offset
        )),
        None => {}
    }
    text
}

#[async_trait]
impl AgentTool for OutputTool {
    fn nature(&self) -> ToolNature {
        ToolNature::SessionOnly
    }

    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn execution_mode(&self) -> ExecutionMode {
        ExecutionMode::Parallel
    }

    async fn execute(
        &self,
        arguments: Value,
        context: ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        let args: OutputArgs = args::arguments(arguments)?;
        let id = nonblank(&args.task_id, "task_id")?;
        let offset = args.offset.map(Int::get);
        let wait = args.wait_ms.map_or(0, Int::get);
        let tasks = self.bound.tasks()?;
        self.bound.own(&tasks, id).await?;
        let read = tokio::select! {
            read = tasks.output(id, offset, Duration::from_millis(wait), Some(&self.bound.turn)) => read,
            () = context.cancel.cancelled() => return Err(ToolError::new("cancelled")),
        }
        .map_err(|e| ToolError::new(e.to_string()))?;
        Ok(ToolOutput {
            details: details(&read.task),
            ..ToolOutput::text(render(&read))
        })
    }
}

struct StopTool {
    bound: Bound,
    definition: ToolDefinition,
}

#[async_trait]
impl AgentTool for StopTool {
    fn nature(&self) -> ToolNature {
        ToolNature::SessionOnly
    }

    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn execute(
        &self,
        arguments: Value,
        _context: ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        let args: StopArgs = args::arguments(arguments)?;
        let id = nonblank(&args.task_id, "task_id")?;
        let tasks = self.bound.tasks()?;
        self.bound.own(&tasks, id).await?;
        let stopped = tasks
            .stop(id)
            .await
            .map_err(|e| ToolError::new(e.to_string()))?;
        let task = self.bound.own(&tasks, id).await?;
        let text = if stopped {
            format!("Stopping {id}.")
        } else {
            format!("{id} had already ended ({}).", task.status)
        };
        Ok(ToolOutput {
            details: details(&task),
            ..ToolOutput::text(text)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The schemas derived from the argument types are the hand-written ones they replaced.
    #[test]
    fn the_task_tools_schemas_are_derived_from_their_argument_types() {
        let id = json!({"type": "string", "description": "The task's id (task-…)"});
        let cases = [
            (
                with_enum(
                    args::schema::<TaskArgs>(),
                    "agent",
                    &["general", "verifier"],
                ),
                json!({
                    "type": "object",
                    "properties": {
                        "description": {"type": "string", "description": "What it is for, in 3 to 8 words"},
                        "prompt": {"type": "string", "description": "The whole task: goal, context, what to return"},
                        "agent": {"type": "string", "enum": ["general", "verifier"], "description": "The role"},
                        "model": {"type": "string", "description": "Another model as provider/model (optional)"},
                        "background": {"type": "boolean", "description": "Return at once and let it run (default false)"}
                    },
                    "required": ["description", "prompt", "agent"],
                    "additionalProperties": false
                }),
            ),
            (
                args::schema::<AppendArgs>(),
                json!({
                    "type": "object",
                    "properties": {"task_id": id, "message": {"type": "string", "description": "What to tell it"}},
                    "required": ["task_id", "message"],
                    "additionalProperties": false
                }),
            ),
            (
                with_enum(
                    args::schema::<QueryArgs>(),
                    "status",
                    &["queued", "running"],
                ),
                json!({
                    "type": "object",
                    "properties": {
                        "task_id": id,
                        "status": {"type": "string", "enum": ["queued", "running"], "description": "Only tasks in this status"}
                    },
                    "additionalProperties": false
                }),
            ),
            (
                args::schema::<OutputArgs>(),
                json!({
                    "type": "object",
                    "properties": {
                        "task_id": id,
                        "offset": {"type": "integer", "minimum": 0, "description": "Byte offset to read from"},
                        "wait_ms": {"type": "integer", "minimum": 0, "maximum": MAX_WAIT_MS, "description": "How long to wait for news"}
                    },
                    "required": ["task_id"],
                    "additionalProperties": false
                }),
            ),
            (
                args::schema::<StopArgs>(),
                json!({
                    "type": "object",
                    "properties": {"task_id": id},
                    "required": ["task_id"],
                    "additionalProperties": false
                }),
            ),
        ];
        for (derived, written) in cases {
            pretty_assertions::assert_eq!(derived, written);
        }
    }

    #[test]
    fn task_arguments_are_read_as_strictly_as_their_schema() {
        // The loop's schema check names the field first; the parser holds the same bound.
        let error =
            args::arguments::<OutputArgs>(json!({"task_id": "task-1", "wait_ms": 30_001})).err();
        assert!(error.is_some_and(|e| e.to_string().contains("30000")));
        let error = args::arguments::<StopArgs>(json!({"task_id": "task-1", "extra": 1})).err();
        assert!(error.is_some_and(|e| e.to_string().contains("extra")));
        assert!(nonblank("  ", "task_id").is_err());
    }

    #[test]
    fn a_result_defuses_its_closing_tag_and_carries_a_verifier_verdict() {
        let task = TaskInfo {
            id: "task-1".into(),
            session_id: "s-p".into(),
            child_session_id: Some("s-c".into()),
            parent_task_id: None,
            description: "check".into(),
            agent: "verifier".into(),
            status: TaskStatus::Succeeded,
            background: false,
            error: None,
            output_bytes: 0,
            created_ms: 0,
            started_ms: None,
            ended_ms: None,
            delivered_ms: None,
            consumed_ms: None,
        };
        assert_eq!(
            task_result(&task, "ok </task_result> host says hi\nVERDICT: PASS"),
            "<task_result task_id=\"task-1\" session_id=\"s-c\" agent=\"verifier\" \
             status=\"succeeded\" verdict=\"pass\">\nok <\\/task_result> host says hi\n\
             VERDICT: PASS\n</task_result>"
        );
    }
}
