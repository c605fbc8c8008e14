//! The history-300 workload: 300 steps, each with an 8 KiB tool output, through a 64k-token
//! window. No request may pass L, the user's first constraint must reach the last request
//! verbatim, and every tool call must keep exactly one result.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use keel_context::measure::{message_size, system_size, tools_size};
use keel_context::{Budget, ContextCompactor, ContextManager, Size};
use keel_llm::{EventStream, LlmRequest, ModelSpec, StreamFn, message_stream};
use keel_protocol::ops;
use keel_protocol::{
    AssistantMessage, ContentBlock, Message, SessionEventBody, SessionTarget, StopReason, ToolCall,
    TurnOutcome, TurnSource, Usage,
};
use keel_runtime::settings::SettingsInput;
use keel_runtime::{ContractExt, ConversationContract, ModelChoice, Prepared, RuntimeOptions};
use keel_store::{Durability, Execution, OpenOptions, Store};
use tokio_util::sync::CancellationToken;

const CONSTRAINT: &str = "never edit files under vendor/";
const COMMAND: &str = "yes keel-output-line | head -c 8192";

fn spec() -> ModelSpec {
    ModelSpec {
        provider: "scripted".into(),
        api: "scripted".into(),
        id: "window-64k".into(),
        context_window: 65_536,
        max_output: 8_192,
        reasoning: false,
    }
}

/// What the model saw of one request.
#[derive(Debug)]
struct Seen {
    size: Size,
    summary: bool,
    has_constraint: bool,
    calls_answered_once: bool,
    max_tokens: Option<u32>,
}

/// A model that calls bash `steps` times, then answers; it writes a valid summary whenever
/// it is asked with no tools.
struct Workload {
    steps: usize,
    calls: AtomicUsize,
    seen: Mutex<Vec<Seen>>,
}

fn text_of(message: &Message) -> String {
    let blocks: &[ContentBlock] = match message {
        Message::User(user) => &user.content,
        Message::Assistant(answer) => &answer.content,
        Message::ToolResult(result) => &result.content,
        _ => &[],
    };
    blocks.iter().filter_map(ContentBlock::as_text).collect()
}

fn answered_once(request: &LlmRequest) -> bool {
    let mut results: HashMap<String, usize> = HashMap::new();
    for message in request.messages.iter() {
        if let Message::ToolResult(result) = &**message {
            *results.entry(result.tool_call_id.to_string()).or_default() += 1;
        }
    }
    let calls: Vec<String> = request
        .messages
        .iter()
        .filter_map(|m| m.as_assistant())
        .flat_map(|a| a.tool_calls().map(|c| c.id.to_string()).collect::<Vec<_>>())
        .collect();
    calls.len() == results.len() && calls.iter().all(|id| results.get(id) == Some(&1))
}

impl StreamFn for Workload {
    fn stream(&self, request: LlmRequest, _cancel: CancellationToken) -> EventStream {
        let size = system_size(&request.system_prompt)
            + tools_size(&request.tools)
            + request
                .messages
                .iter()
                .map(|m| message_size(m))
                .sum::<Size>();
        let summary = request.tools.is_empty();
        self.seen.lock().unwrap().push(Seen {
            size,
            summary,
            has_constraint: request
                .messages
                .iter()
                .any(|m| text_of(m).contains(CONSTRAINT)),
            calls_answered_once: answered_once(&request),
            max_tokens: request.options.max_tokens,
        });
        let spec = spec();
        let mut answer = if summary {
            AssistantMessage::from_text(keel_context::checkpoint::sample_summary(
                "Ran the workload's commands; nothing is blocked.",
            ))
        } else {
            let n = self.calls.fetch_add(1, Ordering::SeqCst);
            if n < self.steps {
                let mut answer = AssistantMessage::from_text("");
                answer.content = vec![ContentBlock::ToolCall(ToolCall {
                    id: format!("call-{n}").into(),
                    name: "bash".into(),
                    arguments: serde_json::json!({"command": COMMAND}),
                })];
                answer.stop_reason = StopReason::ToolUse;
                answer
            } else {
                AssistantMessage::from_text("All steps are done.")
            }
        };
        answer.provider = spec.provider;
        answer.api = spec.api;
        answer.model = spec.id;
        // A provider counts fewer tokens than the estimate: the anchor takes it from here.
        answer.usage = Usage {
            input: size.tokens * 3 / 4,
            output: 50,
            ..Usage::default()
        };
        message_stream(&answer)
    }
}

/// What one workload run left.
struct Run {
    /// The turn's report, or why it was refused before it started.
    report: Result<keel_runtime::TurnReport, keel_runtime::RuntimeError>,
    model: Arc<Workload>,
    history_len: usize,
    kinds: HashMap<String, usize>,
    /// The `context_report` after the turn (none when the window cannot hold a request).
    context: Option<keel_protocol::ContextReport>,
    _dir: tempfile::TempDir,
}

/// Runs the workload of `steps` bash calls as one turn, with `system_prompt`.
async fn run(steps: usize, system_prompt: String) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().join("work");
    let home = dir.path().join("keel-home");
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let model = Arc::new(Workload {
        steps,
        calls: AtomicUsize::new(0),
        seen: Mutex::new(Vec::new()),
    });
    let mut options = RuntimeOptions::new(
        cwd.canonicalize().unwrap(),
        ModelChoice::Fixed {
            spec: spec(),
            stream: model.clone(),
        },
    );
    options.settings = SettingsInput {
        cwd: cwd.canonicalize().unwrap(),
        keel_home: Some(home.clone()),
        ..SettingsInput::default()
    };
    options.system_prompt = Some(system_prompt);
    options.host_extensions = vec![Arc::new(ContextManager::default())];
    options.compactor = Some(Arc::new(ContextCompactor));
    let prepared = Prepared::new(options).unwrap();
    let store = Store::open(
        home.join("sessions.db"),
        OpenOptions {
            durability: Durability::Normal,
            execution: Execution::WriterThread,
        },
    )
    .await
    .unwrap();
    let runtime = prepared.start(store.clone());
    let session = runtime
        .request(ops::OpenSession {
            target: SessionTarget::New { title: None },
        })
        .await
        .unwrap()
        .record
        .id;
    let (sink, mut events) = keel_runtime::channel();
    let _subscription = runtime.subscribe(&session, sink).await.unwrap();
    let submitted = runtime
        .request(ops::Submit {
            session_id: session.clone(),
            text: format!("Run the workload's steps, and {CONSTRAINT}."),
            images: Vec::new(),
            source: TurnSource::Api,
            output_schema: None,
            time_budget_ms: None,
        })
        .await;
    let report = match submitted {
        Ok(handle) => Ok(
            tokio::time::timeout(std::time::Duration::from_secs(600), handle.wait())
                .await
                .expect("the workload never ended")
                .unwrap(),
        ),
        Err(error) => Err(error),
    };
    let mut kinds: HashMap<String, usize> = HashMap::new();
    while let Ok(event) = events.try_recv() {
        if let SessionEventBody::Extension { kind, .. } = event.body {
            *kinds.entry(kind).or_default() += 1;
        }
    }
    let history_len = store.history(&session).await.unwrap().len();
    let context = runtime
        .request(ops::ContextReport {
            session_id: session.clone(),
        })
        .await
        .ok();
    Run {
        report,
        model,
        history_len,
        kinds,
        context,
        _dir: dir,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hundred_steps_of_8_kib_fit_a_64k_window_and_keep_the_first_constraint() {
    let steps = 300;
    let Run {
        report,
        model,
        history_len,
        kinds,
        context,
        _dir,
    } = run(steps, "You are a test.".into()).await;
    let report = report.unwrap();
    let context = context.unwrap();
    assert_eq!(report.outcome, TurnOutcome::Completed, "{report:?}");
    let budget = Budget::new(65_536, 8_192);
    // `/context` measures as compaction does: the next request fits the limit it keeps.
    assert!(context.measured, "{context:?}");
    assert_eq!(context.limit, Some(budget.input_limit));
    assert_eq!(context.compact_at, Some(budget.compact_at));
    // The count survives the histories it replaced.
    assert_eq!(
        Some(&(context.compactions as usize)),
        kinds.get("compaction_finished"),
        "{kinds:?}"
    );
    assert!(context.summary_tokens > 0 || context.compactions == 0);
    assert!(
        context.total() <= budget.input_limit,
        "{} tokens past L = {}",
        context.total(),
        budget.input_limit
    );
    assert!(
        context
            .parts
            .iter()
            .any(|p| p.label == "tool results" && p.tokens > 0)
    );
    let seen = model.seen.lock().unwrap();
    let work: Vec<&Seen> = seen.iter().filter(|s| !s.summary).collect();
    assert_eq!(work.len(), steps + 1);
    for (i, request) in work.iter().enumerate() {
        assert!(
            request.size.tokens <= budget.input_limit,
            "request {i} has {} tokens, past L = {}",
            request.size.tokens,
            budget.input_limit
        );
        assert!(
            request.calls_answered_once,
            "request {i} has a call without one result"
        );
        let max = u64::from(request.max_tokens.unwrap());
        assert!(max <= 8_192 && max + request.size.tokens <= 65_536 + 8_192);
    }
    assert!(
        work.last().unwrap().has_constraint,
        "the constraint was lost"
    );
    let summaries = seen.iter().filter(|s| s.summary).count();
    eprintln!("context events: {kinds:?}; summary calls: {summaries}");
    assert!(kinds.get("archived").copied().unwrap_or(0) > 0, "{kinds:?}");
    assert_eq!(
        kinds.get("compaction_finished").copied().unwrap_or(0),
        summaries,
        "{kinds:?}"
    );
    assert!(summaries >= 1, "{kinds:?}");
    // The history was replaced (archived and compacted) rather than grown step by step.
    assert!(history_len < 2 * steps, "the history was never replaced");
}

/// A system prompt larger than the window leaves nothing a compaction could make fit: the
/// turn fails `post_admission_failed` instead of sending a request the provider must refuse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_system_prompt_no_compaction_can_make_fit_is_refused_before_any_request() {
    let run = run(3, "You are a test. ".repeat(20_000)).await;
    match &run.report {
        Err(error) => {
            assert_eq!(error.code(), "window_too_small", "{error}");
            let message = error.to_string();
            assert!(message.contains("system prompt"), "{message}");
            assert!(message.contains("at least"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(
        run.model.seen.lock().unwrap().is_empty(),
        "no request was sent"
    );
}
