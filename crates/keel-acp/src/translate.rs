//! A session's events, as the runtime's turn view produced them, turned into ACP
//! `session/update`s: text and reasoning chunks (each character sent once), tool calls and
//! their updates, the plan, usage, mode and title changes, and notices (a background task's
//! start and end among them, `tasks.rs`). Pure state over events, so it is tested without a
//! connection.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, Cost, CurrentModeUpdate, Notice, NoticeSeverity, Plan,
    SessionInfoUpdate, SessionUpdate, TextContent, ToolCall, ToolCallContent,
    ToolCallStatus as AcpStatus, ToolCallUpdate, ToolCallUpdateFields, UsageUpdate,
};
use keel_protocol::{
    Item, ItemBody, ItemEvent, ItemKind, PermissionRequest, SessionEventBody, ToolCallStatus,
};
use keel_runtime::notice::{self, Severity};

use crate::tasks::TaskNotices;
use crate::tools;

/// Folds one session's events into ACP updates.
#[derive(Debug)]
pub struct Translator {
    cwd: PathBuf,
    /// Whether the client shows `notice` updates; otherwise notices are thought lines.
    notices: bool,
    /// Bytes of each open text item already sent (this turn's items).
    sent: HashMap<Arc<str>, usize>,
    /// Tool calls the editor already has a `tool_call` for, with the status it was told
    /// last: a status only moves forward.
    calls: HashMap<String, AcpStatus>,
    /// The call each of this turn's tool call items is about, by item id.
    items: HashMap<Arc<str>, String>,
    /// The newest output of each running call, shown as its content while it runs.
    outputs: HashMap<String, String>,
    /// What the session cost so far, in US dollars.
    cost: f64,
    /// The session's tasks, as announced.
    tasks: TaskNotices,
    title: Option<String>,
    mode: Option<keel_protocol::PermissionMode>,
    /// The status of the session's goal the editor was last told.
    goal: Option<keel_protocol::GoalStatus>,
}

fn chunk(text: impl Into<String>) -> ContentChunk {
    ContentChunk::new(ContentBlock::Text(TextContent::new(text)))
}

fn acp_status(status: ToolCallStatus) -> AcpStatus {
    match status {
        ToolCallStatus::Completed => AcpStatus::Completed,
        ToolCallStatus::Pending => AcpStatus::Pending,
        ToolCallStatus::InProgress => AcpStatus::InProgress,
        _ => AcpStatus::Failed,
    }
}

impl Translator {
    /// A translator for a session working in `cwd`; `notices`: the client takes `notice`
    /// updates.
    pub fn new(cwd: PathBuf, notices: bool) -> Self {
        Self {
            cwd,
            notices,
            sent: HashMap::new(),
            calls: HashMap::new(),
            items: HashMap::new(),
            outputs: HashMap::new(),
            cost: 0.0,
            tasks: TaskNotices::default(),
            title: None,
            mode: None,
            goal: None,
        }
    }

    /// A notice when the session's goal changes status: the goal's banner line (status,
    /// objective, tokens, turns) and why. Per-turn counts alone are not worth a line.
    fn goal_notice(&mut self, goal: &keel_protocol::GoalInfo) -> Option<SessionUpdate> {
        use keel_protocol::GoalStatus;
        if self.goal == Some(goal.status) {
            return None;
        }
        self.goal = Some(goal.status);
        let mut text = if goal.banner.is_empty() {
            format!("goal {}", goal.status)
        } else {
            goal.banner.clone()
        };
        if let Some(reason) = &goal.reason {
            text.push_str(&format!(" — {reason}"));
        }
        let severity = match goal.status {
            GoalStatus::Blocked => Severity::Error,
            GoalStatus::Paused | GoalStatus::BudgetLimited => Severity::Warn,
            _ => Severity::Info,
        };
        self.notice(severity, text)
    }

    /// Starts the cost count from what stored history already cost.
    pub fn add_cost(&mut self, dollars: f64) {
        self.cost += dollars;
    }

    /// Remembers the title and mode the editor was told at open, so only changes are sent.
    pub fn know(&mut self, title: &str, mode: keel_protocol::PermissionMode) {
        self.title = Some(title.to_owned());
        self.mode = Some(mode);
    }

    /// A notice, as the client can show it; `None` for news (an info notice) a client
    /// without notices has no place for.
    pub fn notice(&self, severity: Severity, text: String) -> Option<SessionUpdate> {
        if !self.notices && severity == Severity::Info {
            return None;
        }
        Some(self.told(severity, text))
    }

    /// A notice the user must see whatever the client shows: a `notice` update, else a
    /// line of the answer marked as keel's (never the model's thinking).
    pub fn told(&self, severity: Severity, text: String) -> SessionUpdate {
        if self.notices {
            let severity = match severity {
                Severity::Info => NoticeSeverity::Info,
                Severity::Warn => NoticeSeverity::Warning,
                Severity::Error => NoticeSeverity::Error,
            };
            SessionUpdate::Notice(Notice::new(severity, text))
        } else {
            // Never as the model's thinking: said in the answer, marked as keel's.
            SessionUpdate::AgentMessageChunk(chunk(format!("\n\n> keel: {text}\n\n")))
        }
    }

    /// The updates one event makes.
    pub fn apply(&mut self, body: &SessionEventBody) -> Vec<SessionUpdate> {
        let mut out = Vec::new();
        match body {
            SessionEventBody::TurnStarted { .. } => {
                self.sent.clear();
                self.calls.clear();
                self.items.clear();
            }
            SessionEventBody::Item { event, .. } => self.item(event, &mut out),
            SessionEventBody::PermissionRequested { request, .. } => {
                if let Some(update) = self.pending_call(request) {
                    out.push(update);
                }
            }
            SessionEventBody::Retry {
                attempt,
                max_retries,
                delay_ms,
                failure,
                ..
            // A retry is news of the moment: it has no place in the answer.
            } if self.notices => out.extend(self.notice(
                Severity::Warn,
                notice::retry(&failure.message, *attempt, *max_retries, *delay_ms),
            )),
            SessionEventBody::Goal { goal, .. } => out.extend(self.goal_notice(goal)),
            // A plan submitted for review (plan mode) is what the turn answers: the editor
            // shows it as the agent's message, then how to go on.
            SessionEventBody::PlanReady { plan, .. } => {
                out.push(SessionUpdate::AgentMessageChunk(chunk(format!(
                    "\n\n{}\n",
                    plan.text.trim_end()
                ))));
                out.push(self.told(Severity::Info, notice::PLAN_READY.to_owned()));
            }
            SessionEventBody::Extension {
                notice: Some(notice),
                ..
            } => out.extend(self.notice(notice.level, notice.text.clone())),
            SessionEventBody::Task { task } => {
                if let Some((severity, text)) = self.tasks.changed(task) {
                    // A task outlives the prompt that started it: always told.
                    out.push(self.told(severity, text));
                }
            }
            SessionEventBody::Failure { failure, .. } => out.push(self.told(
                Severity::Error,
                format!("{} ({})", failure.message, failure.code),
            )),
            SessionEventBody::Usage {
                usage,
                context_window,
                input_limit,
                compact_at,
                ..
            } => {
                self.cost += usage.cost.total;
                let used = usage.input + usage.cache_read + usage.cache_write + usage.output;
                let mut update = UsageUpdate::new(used, u64::from(*context_window));
                // ACP's usage has the window only; the budget in use rides in `_meta`.
                if let serde_json::Value::Object(meta) = serde_json::json!({
                    "keel": {"inputLimit": input_limit, "compactAt": compact_at}
                }) {
                    update = update.meta(meta);
                }
                if self.cost > 0.0 {
                    update = update.cost(Cost::new(self.cost, "USD"));
                }
                out.push(SessionUpdate::UsageUpdate(update));
            }
            SessionEventBody::SessionUpdated { title, mode, .. } => {
                if self.title.as_deref() != Some(title.as_str()) {
                    self.title = Some(title.clone());
                    out.push(SessionUpdate::SessionInfoUpdate(
                        SessionInfoUpdate::new().title(title.clone()),
                    ));
                }
                if let Some(mode) = *mode
                    && self.mode != Some(mode)
                {
                    self.mode = Some(mode);
                    out.push(SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(
                        mode.name(),
                    )));
                }
            }
            _ => {}
        }
        out
    }

    /// Whether the editor has a `tool_call` for `id`.
    fn announced(&self, id: &str) -> bool {
        self.calls.contains_key(id)
    }

    /// `status`, if it moves the call forward (pending, in progress, then an end); the
    /// editor is never told a call went back.
    fn forward(&mut self, id: &str, status: AcpStatus) -> Option<AcpStatus> {
        let rank = |s: AcpStatus| match s {
            AcpStatus::Pending => 0,
            AcpStatus::InProgress => 1,
            _ => 2,
        };
        let told = self
            .calls
            .entry(id.to_owned())
            .or_insert(AcpStatus::Pending);
        (rank(status) > rank(*told)).then(|| {
            *told = status;
            status
        })
    }

    /// The call a permission question is about is `pending` (ACP's "awaiting approval"):
    /// the question shows what the call would change. The runtime reports a call's
    /// admission only after its question, so the call moves on only from there.
    fn pending_call(&mut self, request: &PermissionRequest) -> Option<SessionUpdate> {
        let id = request.tool_call_id.to_string();
        let preview = request.preview.as_ref().map(tools::preview);
        if !self.announced(&id) {
            self.calls.insert(id.clone(), AcpStatus::Pending);
            let mut call = if request.arguments.is_null() {
                ToolCall::new(id, request.summary.clone())
            } else {
                ToolCall::new(id, tools::title(&request.tool, &request.arguments))
                    .locations(tools::locations(
                        &request.tool,
                        &request.arguments,
                        &self.cwd,
                    ))
                    .raw_input(request.arguments.clone())
            };
            if let Some((content, locations)) = preview {
                call = call.content(content).locations(locations);
            }
            return Some(SessionUpdate::ToolCall(
                call.kind(tools::kind(&request.tool))
                    .status(AcpStatus::Pending),
            ));
        }
        let (content, locations) = preview?;
        Some(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            id,
            ToolCallUpdateFields::new()
                .content(content)
                .locations(locations),
        )))
    }

    fn text(&mut self, item: &Item, kind: ItemKind, full: &str, out: &mut Vec<SessionUpdate>) {
        let sent = self.sent.entry(item.id.clone()).or_insert(0);
        if let Some(rest) = full.get(*sent..)
            && !rest.is_empty()
        {
            *sent = full.len();
            out.push(text_update(kind, rest));
        }
    }

    fn item(&mut self, event: &ItemEvent, out: &mut Vec<SessionUpdate>) {
        match event {
            ItemEvent::Started { item } | ItemEvent::Completed { item } => {
                let completed = matches!(event, ItemEvent::Completed { .. });
                match &item.body {
                    ItemBody::AgentMessage { text } => {
                        self.text(item, ItemKind::AgentMessage, text, out);
                        if completed {
                            self.sent.remove(&item.id);
                        }
                    }
                    ItemBody::Reasoning { text } => {
                        self.text(item, ItemKind::Reasoning, text, out);
                        if completed {
                            self.sent.remove(&item.id);
                        }
                    }
                    ItemBody::ToolCall {
                        call_id,
                        tool_name,
                        arguments,
                        result,
                        status,
                        details,
                    } => {
                        let id = call_id.to_string();
                        self.items.insert(item.id.clone(), id.clone());
                        if completed {
                            self.ended_call(
                                id,
                                tool_name,
                                arguments,
                                result.as_deref().unwrap_or_default(),
                                *status,
                                details.as_ref(),
                                out,
                            );
                        } else {
                            self.started_call(id, tool_name, arguments, *status, out);
                        }
                    }
                    _ => {}
                }
            }
            ItemEvent::Status { item_id, status } => {
                // The item's id is not the call's: find the call by the item it started.
                if let Some(id) = self.items.get(item_id).cloned()
                    && let Some(status) = self.forward(&id, acp_status(*status))
                {
                    out.push(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                        id,
                        ToolCallUpdateFields::new().status(status),
                    )));
                }
            }
            ItemEvent::Updated {
                item_id,
                kind: ItemKind::ToolCall,
                delta,
            } => {
                // A running call's output: its content shows the last of it, replaced as
                // more comes (an editor terminal, where there is one, shows it instead).
                if let Some(id) = self.items.get(item_id).cloned()
                    && self
                        .calls
                        .get(&id)
                        .is_some_and(|status| *status == AcpStatus::InProgress)
                {
                    let output = self.outputs.entry(id.clone()).or_default();
                    output.push_str(delta);
                    let tail = tools::output_tail(output);
                    let shown = tail.to_owned();
                    if tail.len() < output.len() {
                        output.drain(..output.len() - tail.len());
                    }
                    out.push(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                        id,
                        ToolCallUpdateFields::new().content(vec![ToolCallContent::from(
                            ContentBlock::Text(TextContent::new(shown)),
                        )]),
                    )));
                }
            }
            ItemEvent::Updated {
                item_id,
                kind,
                delta,
            } => {
                if delta.is_empty() {
                    return;
                }
                *self.sent.entry(item_id.clone()).or_insert(0) += delta.len();
                out.push(text_update(*kind, delta));
            }
            _ => {}
        }
    }
}

impl Translator {
    /// A call's item began: pending (proposed, maybe about to be asked about) or already
    /// running.
    fn started_call(
        &mut self,
        id: String,
        tool_name: &str,
        arguments: &serde_json::Value,
        status: ToolCallStatus,
        out: &mut Vec<SessionUpdate>,
    ) {
        let title = tools::title(tool_name, arguments);
        let locations = tools::locations(tool_name, arguments, &self.cwd);
        let status = acp_status(status);
        if !self.announced(&id) {
            self.calls.insert(id.clone(), status);
            out.push(SessionUpdate::ToolCall(
                ToolCall::new(id, title)
                    .kind(tools::kind(tool_name))
                    .status(status)
                    .locations(locations)
                    .raw_input(arguments.clone()),
            ));
            return;
        }
        // Its question came first: the call's own fields, and its status if that moves on.
        let mut fields = ToolCallUpdateFields::new()
            .title(title)
            .kind(tools::kind(tool_name))
            .locations(locations)
            .raw_input(arguments.clone());
        if let Some(status) = self.forward(&id, status) {
            fields = fields.status(status);
        }
        out.push(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            id, fields,
        )));
    }

    /// A call ended (ran, failed, or was refused before it ran).
    #[allow(clippy::too_many_arguments)]
    fn ended_call(
        &mut self,
        id: String,
        tool_name: &str,
        arguments: &serde_json::Value,
        result: &str,
        status: ToolCallStatus,
        details: Option<&serde_json::Value>,
        out: &mut Vec<SessionUpdate>,
    ) {
        let failed = status != ToolCallStatus::Completed;
        self.outputs.remove(&id);
        if !self.announced(&id) {
            // Ended without having been shown (blocked before it ran).
            self.calls.insert(id.clone(), acp_status(status));
            out.push(SessionUpdate::ToolCall(tools::ended_call(
                &id, tool_name, arguments, result, details, failed, &self.cwd,
            )));
        } else if self.forward(&id, acp_status(status)).is_some() {
            let fields = ToolCallUpdateFields::new()
                .status(acp_status(status))
                .title(tools::title(tool_name, arguments))
                .content(tools::content(
                    tool_name, arguments, result, failed, &self.cwd,
                ))
                .raw_output(tools::raw_output(result, details));
            out.push(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                id, fields,
            )));
        }
        if tool_name == "todowrite"
            && !failed
            && let Some(entries) = tools::plan(details, arguments)
        {
            out.push(SessionUpdate::Plan(Plan::new(entries)));
        }
    }
}

/// A chunk of answer or reasoning text.
pub fn text_update(kind: ItemKind, text: &str) -> SessionUpdate {
    match kind {
        ItemKind::Reasoning => SessionUpdate::AgentThoughtChunk(chunk(text)),
        _ => SessionUpdate::AgentMessageChunk(chunk(text)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use keel_protocol::{ToolCallId, TurnId};
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn turn() -> TurnId {
        TurnId::from("t-1")
    }

    fn item_event(event: ItemEvent) -> SessionEventBody {
        SessionEventBody::Item {
            turn_id: turn(),
            event,
        }
    }

    fn asked(id: &str, call: &str, arguments: serde_json::Value) -> SessionEventBody {
        SessionEventBody::PermissionRequested {
            turn_id: turn(),
            request: PermissionRequest {
                id: id.into(),
                tool_call_id: ToolCallId::from(call),
                tool: "bash".into(),
                summary: "run a command".into(),
                reasons: vec![],
                safety: false,
                scopes: vec![],
                rules: vec![],
                arguments,
                preview: None,
            },
        }
    }

    fn kinds(updates: &[SessionUpdate]) -> Vec<String> {
        updates
            .iter()
            .map(|u| {
                serde_json::to_value(u).unwrap()["sessionUpdate"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    }

    #[test]
    fn streamed_text_is_sent_once_and_a_completion_adds_only_what_is_missing() {
        let mut t = Translator::new("/w".into(), true);
        let id: Arc<str> = Arc::from("item_0");
        let started = t.apply(&item_event(ItemEvent::Started {
            item: Item {
                id: id.clone(),
                body: ItemBody::AgentMessage {
                    text: String::new(),
                },
            },
        }));
        assert!(started.is_empty());
        let delta = t.apply(&item_event(ItemEvent::Updated {
            item_id: id.clone(),
            kind: ItemKind::AgentMessage,
            delta: "Hel".into(),
        }));
        assert_eq!(delta, vec![SessionUpdate::AgentMessageChunk(chunk("Hel"))]);
        let done = t.apply(&item_event(ItemEvent::Completed {
            item: Item {
                id,
                body: ItemBody::AgentMessage {
                    text: "Hello".into(),
                },
            },
        }));
        assert_eq!(done, vec![SessionUpdate::AgentMessageChunk(chunk("lo"))]);
    }

    #[test]
    fn a_call_asked_about_is_pending_then_updated() {
        let mut t = Translator::new("/w".into(), false);
        let asked = t.apply(&asked("p-1", "c-1", serde_json::Value::Null));
        assert_eq!(kinds(&asked), vec!["tool_call"]);
        assert!(matches!(
            &asked[0],
            SessionUpdate::ToolCall(call) if call.status == AcpStatus::Pending
        ));
        let body = |result: Option<String>, status| ItemBody::ToolCall {
            call_id: ToolCallId::from("c-1"),
            tool_name: "bash".into(),
            arguments: json!({"command": "rm -rf build"}),
            result,
            status,
            details: None,
        };
        let started = t.apply(&item_event(ItemEvent::Started {
            item: Item {
                id: Arc::from("item_1"),
                body: body(None, ToolCallStatus::InProgress),
            },
        }));
        assert_eq!(kinds(&started), vec!["tool_call_update"]);
        let ended = t.apply(&item_event(ItemEvent::Completed {
            item: Item {
                id: Arc::from("item_1"),
                body: body(Some("gone".into()), ToolCallStatus::Completed),
            },
        }));
        let value = serde_json::to_value(&ended[0]).unwrap();
        assert_eq!(value["status"], json!("completed"));
        assert_eq!(value["title"], json!("Run `rm -rf build`"));
        assert_eq!(value["rawOutput"], json!({"output": "gone"}));
    }

    fn status_of(updates: &[SessionUpdate]) -> Vec<String> {
        updates
            .iter()
            .map(|u| {
                serde_json::to_value(u).unwrap()["status"]
                    .as_str()
                    // ACP leaves out the default status, pending.
                    .unwrap_or("pending")
                    .to_owned()
            })
            .collect()
    }

    #[test]
    fn a_call_moves_from_pending_through_its_question_to_its_end_and_never_back() {
        let mut t = Translator::new("/w".into(), true);
        let body = |result: Option<String>, status| ItemBody::ToolCall {
            call_id: ToolCallId::from("c-9"),
            tool_name: "bash".into(),
            arguments: json!({"command": "make"}),
            result,
            status,
            details: None,
        };
        let mut out = t.apply(&item_event(ItemEvent::Started {
            item: Item {
                id: Arc::from("item_0"),
                body: body(None, ToolCallStatus::Pending),
            },
        }));
        assert_eq!(kinds(&out), vec!["tool_call"]);
        // The question adds nothing for a command (no preview) and does not move it.
        assert!(
            t.apply(&asked("p-9", "c-9", json!({"command": "make"})))
                .is_empty()
        );
        assert!(
            t.apply(&SessionEventBody::PermissionResolved {
                turn_id: turn(),
                request_id: "p-9".into(),
                allowed: true,
            })
            .is_empty()
        );
        out.extend(t.apply(&item_event(ItemEvent::Status {
            item_id: Arc::from("item_0"),
            status: ToolCallStatus::InProgress,
        })));
        out.extend(t.apply(&item_event(ItemEvent::Completed {
            item: Item {
                id: Arc::from("item_0"),
                body: body(Some("built".into()), ToolCallStatus::Completed),
            },
        })));
        // Anything late (a repeated admission, a stray question) cannot move it back.
        out.extend(t.apply(&item_event(ItemEvent::Status {
            item_id: Arc::from("item_0"),
            status: ToolCallStatus::InProgress,
        })));
        out.extend(t.apply(&asked("p-10", "c-9", serde_json::Value::Null)));
        assert_eq!(status_of(&out), vec!["pending", "in_progress", "completed"]);
    }

    #[test]
    fn a_call_asked_before_it_started_goes_in_progress_once() {
        let mut t = Translator::new("/w".into(), true);
        let mut out = t.apply(&asked("p-3", "c-3", json!({"command": "make"})));
        out.extend(t.apply(&SessionEventBody::PermissionResolved {
            turn_id: turn(),
            request_id: "p-3".into(),
            allowed: true,
        }));
        out.extend(t.apply(&item_event(ItemEvent::Started {
            item: Item {
                id: Arc::from("item_0"),
                body: ItemBody::ToolCall {
                    call_id: ToolCallId::from("c-3"),
                    tool_name: "bash".into(),
                    arguments: json!({"command": "make"}),
                    result: None,
                    status: ToolCallStatus::InProgress,
                    details: None,
                },
            },
        })));
        assert_eq!(status_of(&out), vec!["pending", "in_progress"]);
    }

    #[test]
    fn todos_make_a_plan_and_notices_never_pass_for_thinking() {
        let mut t = Translator::new("/w".into(), false);
        let done = t.apply(&item_event(ItemEvent::Completed {
            item: Item {
                id: Arc::from("item_0"),
                body: ItemBody::ToolCall {
                    call_id: ToolCallId::from("c-2"),
                    tool_name: "todowrite".into(),
                    arguments: json!({}),
                    result: Some("ok".into()),
                    status: ToolCallStatus::Completed,
                    details: Some(json!({"todos": [{"content": "a", "status": "pending"}]})),
                },
            },
        }));
        assert_eq!(kinds(&done), vec!["tool_call", "plan"]);
        let notice = t.apply(&SessionEventBody::Extension {
            turn_id: None,
            extension: "runaway-guard".into(),
            kind: "repeated_action".into(),
            details: json!({}),
            notice: keel_runtime::notice::for_event("runaway-guard", "repeated_action", &json!({})),
        });
        assert_eq!(
            notice,
            vec![SessionUpdate::AgentMessageChunk(chunk(
                "\n\n> keel: runaway guard: repeated action\n\n"
            ))]
        );
    }

    #[test]
    fn a_plan_for_review_is_the_agents_message_and_a_notice() {
        let mut t = Translator::new("/w".into(), true);
        let updates = t.apply(&SessionEventBody::PlanReady {
            turn_id: turn(),
            plan: keel_protocol::PlanInfo {
                text: "## Summary\nCache it.\n".into(),
                path: "/k/plans/s.md".into(),
                frozen_path: "/k/plans/s.1.md".into(),
            },
        });
        assert_eq!(kinds(&updates), vec!["agent_message_chunk", "notice"]);
        assert_eq!(
            updates[0],
            SessionUpdate::AgentMessageChunk(chunk("\n\n## Summary\nCache it.\n"))
        );
    }

    #[test]
    fn a_goal_is_one_notice_per_status() {
        let mut t = Translator::new("/w".into(), false);
        let goal =
            |status: keel_protocol::GoalStatus, reason: Option<&str>| SessionEventBody::Goal {
                turn_id: None,
                goal: keel_protocol::GoalInfo {
                    objective: "ship it".into(),
                    status,
                    reason: reason.map(str::to_owned),
                    banner: format!("goal {status}: ship it · 1.0k tokens · turn 1"),
                    record: serde_json::Value::Null,
                },
            };
        use keel_protocol::GoalStatus::{Active, Paused};
        // News (a goal at work) has no place in a client without notices; a pause does.
        assert_eq!(t.apply(&goal(Active, None)), vec![]);
        assert_eq!(t.apply(&goal(Active, None)), vec![]);
        assert_eq!(
            t.apply(&goal(Paused, Some("3 identical replies"))),
            vec![SessionUpdate::AgentMessageChunk(chunk(
                "\n\n> keel: goal paused: ship it · 1.0k tokens · turn 1 — 3 identical replies\n\n"
            ))]
        );
    }

    proptest::proptest! {
        /// However the text was streamed, and however much of it streamed before the item
        /// completed, the editor receives exactly the final text, once.
        #[test]
        fn chunks_add_up_to_the_final_text_exactly_once(
            text in "[a-zé漢 \\n]{0,60}",
            cuts in proptest::collection::vec(0usize..60, 0..8),
            streamed in 0usize..9,
        ) {
            let mut t = Translator::new("/w".into(), true);
            let id: Arc<str> = Arc::from("item_0");
            let mut bounds: Vec<usize> = cuts
                .into_iter()
                .map(|c| c.min(text.len()))
                .filter(|c| text.is_char_boundary(*c))
                .collect();
            bounds.push(0);
            bounds.push(text.len());
            bounds.sort_unstable();
            bounds.dedup();
            let mut out = t.apply(&item_event(ItemEvent::Started {
                item: Item {
                    id: id.clone(),
                    body: ItemBody::AgentMessage { text: String::new() },
                },
            }));
            for window in bounds.windows(2).take(streamed) {
                out.extend(t.apply(&item_event(ItemEvent::Updated {
                    item_id: id.clone(),
                    kind: ItemKind::AgentMessage,
                    delta: text[window[0]..window[1]].to_owned(),
                })));
            }
            out.extend(t.apply(&item_event(ItemEvent::Completed {
                item: Item {
                    id,
                    body: ItemBody::AgentMessage { text: text.clone() },
                },
            })));
            let sent: String = out
                .iter()
                .map(|u| match u {
                    SessionUpdate::AgentMessageChunk(chunk) => match &chunk.content {
                        ContentBlock::Text(t) => t.text.clone(),
                        _ => String::new(),
                    },
                    _ => String::new(),
                })
                .collect();
            proptest::prop_assert_eq!(sent, text);
        }
    }
}
