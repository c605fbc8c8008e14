//! Questions from outside the model (an MCP server's form) asked through the contract: an
//! event, an answer checked against the form, one resolution however it ends, and no one
//! asked where no front end asks.

use std::sync::Arc;

use async_trait::async_trait;
use keel_agent::{AgentTool, ToolCallContext, ToolError, ToolNature, ToolOutput};
use keel_llm::scripted::{ScriptedProvider, ScriptedResponse};
use keel_protocol::{
    Ask, Field, FieldKind, Form, Question, QuestionAnswer, SessionEventBody, ToolDefinition,
    TurnOutcome, ops,
};
use keel_runtime::extension::{Extension, ExtensionApi, ExtensionError, HostControl};
use keel_runtime::{ContractExt, RuntimeError};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::harness::{Harness, Setup, ended};

/// A tool that asks the user for a name through the host, as the MCP extension does for a
/// server, and returns what it got.
struct AskTool {
    control: HostControl,
    definition: ToolDefinition,
}

#[async_trait]
impl AgentTool for AskTool {
    fn nature(&self) -> ToolNature {
        ToolNature::SessionOnly
    }

    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn execute(
        &self,
        _arguments: serde_json::Value,
        context: ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        let session = context.turn.as_ref().map(|t| t.session_id.clone());
        let Some(session) = session else {
            return Err(ToolError::new("no turn"));
        };
        let question = Question {
            id: String::new(),
            server: "tracker".into(),
            tool_call_id: Some(context.tool_call_id.clone()),
            message: "Your name?".into(),
            ask: Ask::Form(Form {
                fields: vec![Field {
                    name: "name".into(),
                    title: None,
                    description: None,
                    required: true,
                    kind: FieldKind::Text {
                        min_length: Some(2),
                        max_length: None,
                        format: None,
                    },
                    default: None,
                }],
            }),
        };
        Ok(match self.control.ask(&session, question).await {
            Ok(answer) => ToolOutput::text(serde_json::to_string(&answer).unwrap_or_default()),
            Err(no_one) => ToolOutput::text(format!("no one: {no_one}")),
        })
    }
}

/// Mounts [`AskTool`] with the control its init is handed.
struct Asking;

impl Extension for Asking {
    fn id(&self) -> &str {
        "asking"
    }

    fn init(&self, api: &ExtensionApi) -> Result<(), ExtensionError> {
        api.register_tool(Arc::new(AskTool {
            control: api.host().control.clone(),
            definition: ToolDefinition {
                name: "ask_user".into(),
                description: "asks the user for a name".into(),
                parameters: json!({"type": "object"}),
            },
        }))
    }
}

async fn harness(provider: &Arc<ScriptedProvider>, interactive: bool) -> Harness {
    let mut setup = Setup::scripted(provider);
    setup.interactive = interactive;
    setup.extensions = vec![Arc::new(Asking)];
    Harness::start(setup).await
}

fn question_of(body: &SessionEventBody) -> Option<Question> {
    match body {
        SessionEventBody::QuestionAsked { question, .. } => Some(question.clone()),
        _ => None,
    }
}

fn resolution(body: &SessionEventBody) -> Option<(String, String)> {
    match body {
        SessionEventBody::QuestionResolved {
            question_id,
            outcome,
            ..
        } => Some((question_id.clone(), outcome.clone())),
        _ => None,
    }
}

fn accept(value: serde_json::Value) -> QuestionAnswer {
    QuestionAnswer::Accept {
        content: value.as_object().cloned().unwrap(),
        opened: false,
    }
}

#[tokio::test]
async fn an_answer_that_fits_the_form_reaches_the_asker_and_one_that_does_not_is_refused() {
    let provider = Arc::new(ScriptedProvider::with_responses([
        ScriptedResponse::tool_call("c1", "ask_user", json!({})),
        ScriptedResponse::text("thanks"),
    ]));
    let h = harness(&provider, true).await;
    let session = h.session().await;
    let mut events = h.watch(&session).await;
    let turn = h.submit(&session, "ask me").await;
    let asked = events.until(|b| question_of(b).is_some()).await;
    let question = question_of(&asked.body).unwrap();
    assert_eq!(question.server, "tracker");
    assert_eq!(
        question.tool_call_id.as_ref().map(|c| c.as_str()),
        Some("c1")
    );
    let answer = |answer: QuestionAnswer| ops::AnswerQuestion {
        session_id: session.clone(),
        question_id: question.id.clone(),
        answer,
    };
    for bad in [
        json!({"name": "A"}),
        json!({}),
        json!({"name": "Ada", "admin": true}),
    ] {
        let refused = h
            .runtime
            .request(answer(accept(bad.clone())))
            .await
            .unwrap_err();
        assert!(
            matches!(refused, RuntimeError::QuestionRefused { .. }),
            "{bad}: {refused}"
        );
        assert_eq!(refused.code(), "question_refused");
    }
    h.runtime
        .request(answer(accept(json!({"name": "Ada"}))))
        .await
        .unwrap();
    let resolved = events.until(|b| resolution(b).is_some()).await;
    assert_eq!(
        resolution(&resolved.body),
        Some((question.id.clone(), "accepted".into()))
    );
    let report = ended(turn).await;
    assert_eq!(report.outcome, TurnOutcome::Completed);
    let said = provider
        .requests()
        .last()
        .map(|r| format!("{:?}", r.messages))
        .unwrap();
    assert!(said.contains(r#"\"name\":\"Ada\""#), "{said}");
    // Answered once: a second answer finds nothing waiting.
    let again = h.runtime.request(answer(QuestionAnswer::Decline)).await;
    assert!(matches!(again, Err(RuntimeError::QuestionRefused { .. })));
    events.rest().await;
}

#[tokio::test]
async fn an_abort_ends_a_waiting_question_as_cancelled() {
    let provider = Arc::new(ScriptedProvider::with_responses([
        ScriptedResponse::tool_call("c1", "ask_user", json!({})),
        ScriptedResponse::text("unused"),
    ]));
    let h = harness(&provider, true).await;
    let session = h.session().await;
    let mut events = h.watch(&session).await;
    let turn = h.submit(&session, "ask me").await;
    let asked = events.until(|b| question_of(b).is_some()).await;
    let question = question_of(&asked.body).unwrap();
    assert!(h.abort(&session).await);
    let resolved = events.until(|b| resolution(b).is_some()).await;
    assert_eq!(
        resolution(&resolved.body),
        Some((question.id.clone(), "cancelled".into()))
    );
    ended(turn).await;
    let late = h
        .runtime
        .request(ops::AnswerQuestion {
            session_id: session.clone(),
            question_id: question.id,
            answer: accept(json!({"name": "Ada"})),
        })
        .await;
    assert!(matches!(late, Err(RuntimeError::QuestionRefused { .. })));
}

#[tokio::test]
async fn no_one_is_asked_where_no_front_end_asks() {
    let provider = Arc::new(ScriptedProvider::with_responses([
        ScriptedResponse::tool_call("c1", "ask_user", json!({})),
        ScriptedResponse::text("done"),
    ]));
    let h = harness(&provider, false).await;
    let session = h.session().await;
    let mut events = h.watch(&session).await;
    let turn = h.submit(&session, "ask me").await;
    ended(turn).await;
    events.rest().await;
    assert!(
        !events.seen.iter().any(|e| question_of(&e.body).is_some()),
        "no question event"
    );
    let said = provider
        .requests()
        .last()
        .map(|r| format!("{:?}", r.messages))
        .unwrap();
    assert!(
        said.contains("no one: no one can answer in this run"),
        "{said}"
    );
}
