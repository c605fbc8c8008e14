//! Background tasks on the real runtime (SPEC §14): children routed to their own scripts by a
//! tag in their prompt, the parent's script played in order (and "noted" for any turn a late
//! notice starts), and what the store and the parent's history hold afterwards.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use keel_llm::scripted::{ScriptedProvider, ScriptedResponse};
use keel_llm::{EventStream, LlmRequest, StreamFn};
use keel_protocol::ops;
use keel_protocol::{Message, SessionId, TaskInfo, TaskStatus};
use keel_runtime::ContractExt;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::harness::{Harness, Setup, text_of};

/// Sends each request to the script whose tag its user messages carry, else the parent's;
/// the parent answers "noted" once its script is spent.
/// Adds to the parent's script from what a request shows (ids the test cannot know before).
type React = Box<dyn FnMut(&LlmRequest) -> Vec<ScriptedResponse> + Send>;

#[derive(Default)]
struct Router {
    parent: ScriptedProvider,
    children: Mutex<Vec<(String, ScriptedProvider)>>,
    spare: ScriptedProvider,
    react: Mutex<Option<React>>,
    /// When set, a child's first answer waits for this, so a test can act while it runs.
    hold: Mutex<Option<Arc<tokio::sync::Notify>>>,
    /// Told whenever a child asks.
    child_asked: Mutex<Option<Arc<tokio::sync::Notify>>>,
    /// When set, the parent's first request after its `task` call waits for `child_asked`,
    /// so what the parent does next reaches a child whose first request is out.
    parent_waits: Mutex<Option<Arc<tokio::sync::Notify>>>,
}

impl Router {
    fn child(&self, tag: &str, responses: Vec<ScriptedResponse>) -> ScriptedProvider {
        let provider = ScriptedProvider::with_responses(responses);
        self.children
            .lock()
            .unwrap()
            .push((tag.to_owned(), provider.clone()));
        provider
    }
}

fn user_text(request: &LlmRequest) -> String {
    request
        .messages
        .iter()
        .filter(|m| matches!(m.as_ref(), Message::User(_)))
        .map(|m| text_of(m))
        .collect::<Vec<_>>()
        .join("\n")
}

impl StreamFn for Router {
    fn stream(&self, request: LlmRequest, cancel: CancellationToken) -> EventStream {
        let text = user_text(&request);
        if let Some(react) = self.react.lock().unwrap().as_mut() {
            for response in react(&request) {
                self.parent.push(response);
            }
        }
        let child = self
            .children
            .lock()
            .unwrap()
            .iter()
            .find(|(tag, _)| text.contains(tag.as_str()))
            .map(|(_, provider)| provider.clone());
        let asked = |request: &LlmRequest| {
            request.messages.iter().any(
                |m| matches!(m.as_ref(), Message::ToolResult(result) if result.tool_name == "task"),
            )
        };
        match child {
            Some(provider) => {
                if let Some(asked) = self.child_asked.lock().unwrap().as_ref() {
                    asked.notify_one();
                }
                match self.hold.lock().unwrap().take() {
                    Some(hold) => Box::pin(
                        futures::stream::once(async move {
                            hold.notified().await;
                            provider.stream(request, cancel)
                        })
                        .flatten(),
                    ),
                    None => provider.stream(request, cancel),
                }
            }
            None if self.parent.remaining() > 0 => {
                let wait = if asked(&request) {
                    self.parent_waits.lock().unwrap().take()
                } else {
                    None
                };
                match wait {
                    Some(child_asked) => {
                        let parent = self.parent.clone();
                        Box::pin(
                            futures::stream::once(async move {
                                child_asked.notified().await;
                                parent.stream(request, cancel)
                            })
                            .flatten(),
                        )
                    }
                    None => self.parent.stream(request, cancel),
                }
            }
            None => {
                self.spare.push(ScriptedResponse::text("noted"));
                self.spare.stream(request, cancel)
            }
        }
    }
}

async fn start(router: &Arc<Router>, overrides: &[&str]) -> Harness {
    let mut setup = Setup::new(Vec::new());
    setup.stream = Some(router.clone());
    for o in overrides {
        setup = setup.set(o);
    }
    Harness::start(setup).await
}

fn task_call(id: &str, agent: &str, tag: &str, background: bool) -> ScriptedResponse {
    ScriptedResponse::tool_call(
        id,
        "task",
        json!({"description": format!("look {}", tag.trim_start_matches('#')), "prompt": format!("Do {tag}."), "agent": agent, "background": background}),
    )
}

/// Waits until no task of the session runs and no turn of it is running or about to start.
async fn settle(h: &Harness, session: &SessionId) {
    let control = h.runtime.control();
    let tasks = control.tasks().expect("the runtime runs");
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            tasks.settled(session).await;
            tokio::time::sleep(Duration::from_millis(50)).await;
            let queue = h.store.queued_inputs(session).await.unwrap();
            if !control.is_busy(session) && !tasks.running(session) && queue.is_empty() {
                return;
            }
        }
    })
    .await
    .expect("the session never settled");
}

async fn tasks(h: &Harness, session: &SessionId) -> Vec<TaskInfo> {
    h.runtime
        .request(ops::ListTasks {
            session_id: session.clone(),
        })
        .await
        .unwrap()
}

async fn history_text(h: &Harness, session: &SessionId) -> String {
    h.store
        .history(session)
        .await
        .unwrap()
        .iter()
        .map(|e| text_of(&e.message))
        .collect::<Vec<_>>()
        .join("\n")
}

fn id_of(tasks: &[TaskInfo], description: &str) -> String {
    tasks
        .iter()
        .find(|t| t.description == description)
        .unwrap_or_else(|| panic!("no task {description}: {tasks:?}"))
        .id
        .clone()
}

/// Two explore tasks and a worker in the background, polled and read: each result reaches
/// the parent's history exactly once and is consumed once the turn is committed.
#[tokio::test]
async fn a_parent_reads_three_background_tasks_each_once() {
    let router = Arc::new(Router::default());
    router.child(
        "#A",
        vec![ScriptedResponse::text(
            "A found the parser in src/parse.rs:10",
        )],
    );
    router.child("#B", vec![ScriptedResponse::text("B found no tests")]);
    router.child(
        "#C",
        vec![
            ScriptedResponse::tool_call(
                "w1",
                "write",
                json!({"path": "notes.txt", "content": "hi\n"}),
            ),
            ScriptedResponse::text("C wrote notes.txt"),
        ],
    );
    let h = start(&router, &[]).await;
    let session = h.session().await;
    router.parent.push(
        task_call("t1", "explore", "#A", true)
            .with_tool_call("t2", "task", json!({"description": "look B", "prompt": "Do #B.", "agent": "explore", "background": true}))
            .with_tool_call("t3", "task", json!({"description": "look C", "prompt": "Do #C.", "agent": "worker", "background": true})),
    );
    router
        .parent
        .push(ScriptedResponse::tool_call("q1", "task_query", json!({})));
    // The ids are only known once the tasks exist: the reads follow the listing.
    // The ids are only known once the tasks exist: the reads follow the listing, and a read
    // that brought progress but no result is read on.
    let mut listed = false;
    let mut finished = false;
    *router.react.lock().unwrap() = Some(Box::new(move |request: &LlmRequest| {
        if !listed
            && let Some(listing) = request.messages.iter().find_map(|m| match m.as_ref() {
                Message::ToolResult(result) if result.tool_name == "task_query" => Some(text_of(m)),
                _ => None,
            })
        {
            listed = true;
            let mut reads = ScriptedResponse::new();
            for line in listing.lines() {
                let id = line.split_whitespace().next().unwrap();
                reads = reads.with_tool_call(
                    &format!("o0-{id}"),
                    "task_output",
                    json!({"task_id": id, "wait_ms": 30000}),
                );
            }
            return vec![reads];
        }
        let last_answer = request
            .messages
            .iter()
            .rposition(|m| matches!(m.as_ref(), Message::Assistant(_)))
            .unwrap_or(0);
        let unread: Vec<String> = request.messages[last_answer..]
            .iter()
            .filter_map(|m| match m.as_ref() {
                Message::ToolResult(result) if result.tool_name == "task_output" => {
                    let text = text_of(m);
                    (!text.contains("<task_result"))
                        .then(|| text.split_whitespace().next().unwrap().to_owned())
                }
                _ => None,
            })
            .collect();
        let outputs = request.messages[last_answer..]
            .iter()
            .any(|m| matches!(m.as_ref(), Message::ToolResult(r) if r.tool_name == "task_output"));
        if !unread.is_empty() {
            let mut again = ScriptedResponse::new();
            for id in &unread {
                again = again.with_tool_call(
                    &format!("o{}-{id}", request.messages.len()),
                    "task_output",
                    json!({"task_id": id, "wait_ms": 30000}),
                );
            }
            return vec![again];
        }
        if outputs && listed && !finished {
            finished = true;
            return vec![ScriptedResponse::text("all three are in")];
        }
        Vec::new()
    }));
    let (report, _) = h.turn(&session, "explore the repo").await;
    // A notice that came as the answer ended continues the turn ("noted").
    assert_eq!(report.recorded, keel_protocol::TurnOutcome::Completed);
    settle(&h, &session).await;
    let list = tasks(&h, &session).await;
    assert_eq!(list.len(), 3);
    let history = history_text(&h, &session).await;
    for task in &list {
        assert_eq!(task.status, TaskStatus::Succeeded, "{task:?}");
        assert!(task.consumed_ms.is_some(), "{task:?}");
        let opening = format!("<task_result task_id=\"{}\"", task.id);
        assert_eq!(history.matches(&opening).count(), 1, "{history}");
    }
    assert!(history.contains("A found the parser in src/parse.rs:10"));
    assert_eq!(history.matches("all three are in").count(), 1, "{history}");
    assert!(h.home.parent().unwrap().join("work/notes.txt").exists());
    // Every child is a session of its own under the parent, with none of its history.
    let children = h.store.child_sessions(&session).await.unwrap();
    assert_eq!(children.len(), 3);
    for child in children {
        let text = history_text(&h, &child.id).await;
        assert!(!text.contains("explore the repo"), "{text}");
    }
}

/// An explore task gets read-only tools only: its `write` is refused and writes nothing.
#[tokio::test]
async fn an_explore_task_cannot_write() {
    let router = Arc::new(Router::default());
    let child = router.child(
        "#RO",
        vec![
            ScriptedResponse::tool_call(
                "w1",
                "write",
                json!({"path": "pwned.txt", "content": "x"}),
            ),
            ScriptedResponse::text("could not write"),
        ],
    );
    router.parent.push(task_call("t1", "explore", "#RO", false));
    router.parent.push(ScriptedResponse::text("ok"));
    let h = start(&router, &[]).await;
    let session = h.session().await;
    let (report, _) = h.turn(&session, "try").await;
    assert_eq!(report.final_text(), "ok");
    let requests = child.requests();
    let mut offered: Vec<String> = requests[0].tools.iter().map(|t| t.name.clone()).collect();
    offered.sort();
    assert_eq!(offered, ["bash", "glob", "grep", "ls", "read"]);
    let refusal = text_of(requests[1].messages.last().unwrap());
    assert!(refusal.contains("write"), "{refusal}");
    assert!(!h.home.parent().unwrap().join("work/pwned.txt").exists());
    // The role's instructions reach the child; the parent's tools list has the task tools.
    assert!(requests[0].system_prompt.contains("explore task"));
    let parent_tools: Vec<String> = router.parent.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    for name in keel_extensions::tasks::TOOL_NAMES {
        assert!(parent_tools.iter().any(|t| t == name), "{parent_tools:?}");
    }
}

/// A result read in a turn that then fails is not consumed, and the next turn is reminded
/// of it; a completed turn that reads it consumes it, and the reminder stops.
#[tokio::test]
async fn consumption_waits_for_a_completed_committed_turn() {
    let router = Arc::new(Router::default());
    router.child("#K", vec![ScriptedResponse::text("K result")]);
    router.parent.push(task_call("t1", "explore", "#K", false));
    router.parent.push(ScriptedResponse::error(
        keel_protocol::ErrorCode::InvalidRequest,
        "the provider refused",
    ));
    let h = start(&router, &[]).await;
    let session = h.session().await;
    let (report, _) = h.turn(&session, "first").await;
    assert!(
        matches!(report.recorded, keel_protocol::TurnOutcome::Failed { .. }),
        "{:?}",
        report.recorded
    );
    let list = tasks(&h, &session).await;
    assert_eq!(list[0].status, TaskStatus::Succeeded);
    assert_eq!(list[0].consumed_ms, None, "read in a failed turn: {list:?}");
    let id = list[0].id.clone();
    router.parent.push(ScriptedResponse::tool_call(
        "o1",
        "task_output",
        json!({"task_id": id}),
    ));
    router.parent.push(ScriptedResponse::text("used"));
    let before = router.parent.requests().len();
    let (report, _) = h.turn(&session, "second").await;
    assert_eq!(report.final_text(), "used");
    let reminded = user_text(&router.parent.requests()[before]);
    assert!(
        reminded.contains(&format!("- {id} \"look K\" (explore): succeeded")),
        "{reminded}"
    );
    let list = tasks(&h, &session).await;
    assert!(list[0].consumed_ms.is_some(), "{list:?}");
    router.parent.push(ScriptedResponse::text("third"));
    let before = router.parent.requests().len();
    h.turn(&session, "third").await;
    let text = user_text(&router.parent.requests()[before]);
    assert_eq!(
        text.matches("have not been read").count(),
        1,
        "only turn 2's: {text}"
    );
}

/// A task that ends after its parent's turn starts a turn of the parent with the notice;
/// a completion notice alone consumes nothing.
#[tokio::test]
async fn a_late_task_starts_a_parent_turn_with_its_notice() {
    let router = Arc::new(Router::default());
    router.child(
        "#L",
        vec![ScriptedResponse::text("L done").first_delay(Duration::from_millis(300))],
    );
    router.parent.push(task_call("t1", "explore", "#L", true));
    router.parent.push(ScriptedResponse::text("started it"));
    let h = start(&router, &[]).await;
    let session = h.session().await;
    let (report, _) = h.turn(&session, "go").await;
    assert_eq!(report.final_text(), "started it");
    settle(&h, &session).await;
    let requests = router.parent.requests();
    let last = router.spare.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(last.len(), 1, "one turn for the notice");
    let notice = user_text(&last[0]);
    let list = tasks(&h, &session).await;
    assert!(
        notice.contains(&format!(
            "<task_notice task_id=\"{}\" status=\"succeeded\"",
            list[0].id
        )),
        "{notice}"
    );
    assert!(list[0].delivered_ms.is_some());
    assert_eq!(list[0].consumed_ms, None, "a notice is no read");
}

/// With one slot, the second task waits `queued` until the first ends; a stopped task is
/// canceled and says so.
#[tokio::test]
async fn the_limit_queues_tasks_and_a_stopped_task_is_canceled() {
    let router = Arc::new(Router::default());
    router.child("#S1", vec![ScriptedResponse::text("one").hang_after(0)]);
    router.child("#S2", vec![ScriptedResponse::text("two")]);
    let h = start(&router, &["tasks.max_concurrent=1"]).await;
    let session = h.session().await;
    // One after the other, so the first surely holds the one slot.
    router.parent.push(task_call("t1", "explore", "#S1", true));
    router.parent.push(ScriptedResponse::tool_call(
        "t2",
        "task",
        json!({"description": "look S2", "prompt": "Do #S2.", "agent": "explore", "background": true}),
    ));
    router.parent.push(ScriptedResponse::text("both started"));
    h.turn(&session, "go").await;
    let list = tasks(&h, &session).await;
    let second = list.iter().find(|t| t.description == "look S2").unwrap();
    assert_eq!(second.status, TaskStatus::Queued, "{list:?}");
    let first = id_of(&list, "look S1");
    assert!(
        h.runtime
            .request(ops::StopTask {
                task_id: first.clone()
            })
            .await
            .unwrap()
    );
    settle(&h, &session).await;
    let list = tasks(&h, &session).await;
    let one = list.iter().find(|t| t.id == first).unwrap();
    let two = list.iter().find(|t| t.description == "look S2").unwrap();
    assert_eq!(one.status, TaskStatus::Canceled, "{one:?}");
    assert_eq!(two.status, TaskStatus::Succeeded, "{two:?}");
    assert!(two.started_ms.unwrap() >= one.ended_ms.unwrap(), "{list:?}");
    assert!(
        !h.runtime
            .request(ops::StopTask { task_id: first })
            .await
            .unwrap()
    );
}

/// A task this process no longer executes is settled `lost` when its parent's tasks are
/// listed, and the parent's next turn is told.
#[tokio::test]
async fn a_task_without_an_executor_is_lost_and_the_parent_told() {
    let router = Arc::new(Router::default());
    let h = start(&router, &[]).await;
    let session = h.session().await;
    h.store
        .insert_task(keel_store::NewTask {
            id: "task-orphan".into(),
            session_id: session.clone(),
            child_session_id: None,
            parent_task_id: None,
            description: "an orphan".into(),
            agent: "worker".into(),
            background: true,
        })
        .await
        .unwrap();
    let list = tasks(&h, &session).await;
    assert_eq!(list[0].status, TaskStatus::Lost);
    router.parent.push(ScriptedResponse::text("sorry"));
    h.turn(&session, "where is it").await;
    let text = user_text(&router.parent.requests()[0]);
    assert!(
        text.contains("Task task-orphan \"an orphan\" (worker) was lost"),
        "{text}"
    );
}

/// Closing a session stops its tasks; "the latest session" is never a task's child.
#[tokio::test]
async fn closing_stops_tasks_and_the_latest_session_is_never_a_child() {
    let router = Arc::new(Router::default());
    router.child("#Z", vec![ScriptedResponse::text("never").hang_after(0)]);
    router.parent.push(task_call("t1", "explore", "#Z", true));
    router.parent.push(ScriptedResponse::text("started"));
    let h = start(&router, &[]).await;
    let session = h.session().await;
    h.turn(&session, "go").await;
    let list = tasks(&h, &session).await;
    assert_eq!(list[0].status, TaskStatus::Running, "{list:?}");
    h.runtime
        .request(ops::CloseSession {
            session_id: session.clone(),
        })
        .await
        .unwrap();
    let task = h.store.task(&list[0].id).await.unwrap();
    assert_eq!(task.status, TaskStatus::Canceled, "{task:?}");
    let opened = h
        .runtime
        .request(ops::OpenSession {
            target: keel_protocol::SessionTarget::Latest,
        })
        .await
        .unwrap();
    assert_eq!(opened.record.id, session);
}

/// `task_append` steers a running task: its child answers the message before the task ends,
/// and the task's result is its last answer.
#[tokio::test]
async fn task_append_steers_a_running_task() {
    let router = Arc::new(Router::default());
    let child = router.child(
        "#T",
        vec![
            // Held until the parent's append is accepted, so the steer always lands mid-task.
            ScriptedResponse::text("first look"),
            ScriptedResponse::text("also checked X"),
        ],
    );
    router.parent.push(task_call("t1", "explore", "#T", true));
    let hold = Arc::new(tokio::sync::Notify::new());
    *router.hold.lock().unwrap() = Some(hold.clone());
    // The append must reach a child whose first request is out, not join that request.
    let child_asked = Arc::new(tokio::sync::Notify::new());
    *router.child_asked.lock().unwrap() = Some(child_asked.clone());
    *router.parent_waits.lock().unwrap() = Some(child_asked);
    let mut step = 0;
    *router.react.lock().unwrap() = Some(Box::new(move |request: &LlmRequest| {
        let appended = request.messages.iter().any(|m| {
            matches!(m.as_ref(), Message::ToolResult(result) if result.tool_name == "task_append")
        });
        if appended {
            hold.notify_one();
        }
        let started = request.messages.iter().find_map(|m| match m.as_ref() {
            Message::ToolResult(result) if result.tool_name == "task" => Some(text_of(m)),
            _ => None,
        });
        let Some(started) = started.filter(|_| step == 0) else {
            return Vec::new();
        };
        step += 1;
        let id = started.split_whitespace().nth(1).unwrap().to_owned();
        vec![
            ScriptedResponse::tool_call(
                "a1",
                "task_append",
                json!({"task_id": id, "message": "Also check X."}),
            ),
            ScriptedResponse::tool_call(
                "o1",
                "task_output",
                json!({"task_id": id, "wait_ms": 30000}),
            ),
            ScriptedResponse::text("done"),
        ]
    }));
    let h = start(&router, &[]).await;
    let session = h.session().await;
    h.turn(&session, "go").await;
    settle(&h, &session).await;
    let list = tasks(&h, &session).await;
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0].status, TaskStatus::Succeeded);
    let steered = user_text(&child.requests()[1]);
    assert!(steered.contains("Also check X."), "{steered}");
    let history = history_text(&h, &session).await;
    assert!(
        history.contains("also checked X\n</task_result>"),
        "{history}"
    );
}

/// In plan mode the parent may still explore through tasks: the child runs in plan mode too,
/// reads, and cannot write even as a worker.
#[tokio::test]
async fn plan_mode_explores_through_tasks_that_cannot_write() {
    let router = Arc::new(Router::default());
    let explore = router.child(
        "#P1",
        vec![
            ScriptedResponse::tool_call("r1", "ls", json!({"path": "."})),
            ScriptedResponse::text("nothing here"),
        ],
    );
    let worker = router.child(
        "#P2",
        vec![
            ScriptedResponse::tool_call("w1", "write", json!({"path": "x.txt", "content": "x"})),
            ScriptedResponse::text("tried"),
        ],
    );
    router
        .parent
        .push(task_call("t1", "explore", "#P1", false).with_tool_call(
            "t2",
            "task",
            json!({"description": "write P2", "prompt": "Do #P2.", "agent": "worker"}),
        ));
    router.parent.push(ScriptedResponse::text("planned"));
    let h = start(&router, &["permission=plan"]).await;
    let session = h.session().await;
    let (report, _) = h.turn(&session, "plan it").await;
    assert_eq!(report.final_text(), "planned");
    assert_eq!(explore.requests().len(), 2);
    let refused = text_of(worker.requests()[1].messages.last().unwrap());
    assert!(refused.contains("plan mode"), "{refused}");
    assert!(!h.home.parent().unwrap().join("work/x.txt").exists());
    let list = tasks(&h, &session).await;
    assert!(
        list.iter().all(|t| t.status == TaskStatus::Succeeded),
        "{list:?}"
    );
}
