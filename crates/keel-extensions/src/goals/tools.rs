//! The model's three goal tools. `create_goal` sets a goal when none is in force,
//! `get_goal` reads it, and `update_goal` only proposes an end: `complete` is settled by the
//! host's verification, `blocked` by the blocker rule (DESIGN §"Goals").
//!
//! The model may create a goal only where there is none or the last one is complete: a
//! paused, blocked or budget-limited goal is the user's to resume or clear, so a model
//! cannot escape a breaker or a budget by starting over.

use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use keel_agent::{
    AgentTool, ExecutionMode, ToolCallContext, ToolError, ToolNature, ToolOutput, ToolRef,
};
use keel_protocol::ToolDefinition;
use keel_tools::args::{self, Int};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::book::Book;
use super::breakers::{BLOCKER_TURNS, BlockerOutcome, NOT_MET_LIMIT, VerdictOutcome};
use super::state::{Goal, Limits, NewGoal, Status, Verification};
use super::turn::Tally;
use super::verification::{self, Claim, Verifier};
use super::{GoalError, tokens_of};

/// Name of the tool that sets a goal.
pub const CREATE_GOAL: &str = "create_goal";
/// Name of the tool that reads the goal.
pub const GET_GOAL: &str = "get_goal";
/// Name of the tool that proposes the goal's end.
pub const UPDATE_GOAL: &str = "update_goal";

static CREATE: LazyLock<ToolDefinition> = LazyLock::new(|| ToolDefinition {
    name: CREATE_GOAL.into(),
    description: "Set a goal for this session: keel keeps starting turns toward it while it \
        is active and under its limits, until you settle it with update_goal. Refused while \
        another goal is in force."
        .into(),
    parameters: args::schema::<CreateArgs>(),
});

static GET: LazyLock<ToolDefinition> = LazyLock::new(|| ToolDefinition {
    name: GET_GOAL.into(),
    description: "Read this session's goal: objective, status, what it spent and its limits, \
        and the last verification's verdict."
        .into(),
    parameters: args::schema::<NoArgs>(),
});

static UPDATE: LazyLock<ToolDefinition> = LazyLock::new(|| ToolDefinition {
    name: UPDATE_GOAL.into(),
    description: "Propose the end of the active goal. status \"complete\" with evidence: \
        the host verifies it, and the goal stays active if the evidence does not prove it. \
        status \"blocked\" with a reason: a safety blocker ends the goal at once; any other \
        must stay the same over 3 goal turns before the goal is blocked."
        .into(),
    parameters: args::schema::<UpdateArgs>(),
});

/// The goal tools for one turn.
pub(crate) fn tools(book: &Arc<Book>, tally: &Arc<Tally>) -> Vec<ToolRef> {
    let tool = |kind| {
        Arc::new(GoalTool {
            kind,
            book: book.clone(),
            tally: tally.clone(),
        }) as ToolRef
    };
    vec![tool(Kind::Create), tool(Kind::Get), tool(Kind::Update)]
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Create,
    Get,
    Update,
}

struct GoalTool {
    kind: Kind,
    book: Arc<Book>,
    tally: Arc<Tally>,
}

/// The arguments of `create_goal`; its doc comments are the descriptions the model reads.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct CreateArgs {
    /// What must be true when the goal is met: concrete and checkable
    objective: String,
    /// Tokens the goal may spend over all its turns (optional; never above the user's limit)
    #[serde(default, deserialize_with = "args::present")]
    token_budget: Option<Int<1, { args::UNBOUNDED }>>,
    /// Most turns toward the goal (optional; never above the user's limit)
    #[serde(default, deserialize_with = "args::present")]
    max_turns: Option<Int<1, { u32::MAX as u64 }>>,
    /// Most seconds its turns may run (optional)
    #[serde(default, deserialize_with = "args::present")]
    max_active_seconds: Option<Int<1, { args::UNBOUNDED }>>,
    /// How the host checks a completion (default evaluator)
    #[serde(default, deserialize_with = "args::present")]
    #[schemars(with = "Verification")]
    verification: Option<Verification>,
}

/// `get_goal` takes nothing.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct NoArgs {}

/// The end `update_goal` proposes.
#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Proposed {
    Complete,
    Blocked,
}

/// The arguments of `update_goal`; its doc comments are the descriptions the model reads.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct UpdateArgs {
    /// complete or blocked
    status: Proposed,
    /// For complete: what proves the objective is met (commands run and their output, files changed)
    #[serde(default, deserialize_with = "args::present")]
    evidence: Option<String>,
    /// For blocked: what stops you
    #[serde(default, deserialize_with = "args::present")]
    reason: Option<String>,
    /// For blocked: going on would be unsafe (default false)
    #[serde(default, deserialize_with = "args::present")]
    safety: Option<bool>,
}

fn failed(error: GoalError) -> ToolError {
    ToolError::new(error.to_string())
}

/// A tool's answer: text for the model, the goal for front ends.
fn answer(text: String, goal: Option<&Goal>) -> ToolOutput {
    ToolOutput {
        details: goal.map(Goal::details),
        ..ToolOutput::text(text)
    }
}

#[async_trait]
impl AgentTool for GoalTool {
    fn nature(&self) -> ToolNature {
        match self.kind {
            // A goal starts turns on its own: in ask and plan modes the user says yes to it.
            Kind::Create => ToolNature::StartsWork,
            // Reading the goal, and proposing its end (which the host verifies).
            Kind::Get | Kind::Update => ToolNature::SessionOnly,
        }
    }

    fn definition(&self) -> &ToolDefinition {
        match self.kind {
            Kind::Create => &CREATE,
            Kind::Get => &GET,
            Kind::Update => &UPDATE,
        }
    }

    fn execution_mode(&self) -> ExecutionMode {
        match self.kind {
            Kind::Get => ExecutionMode::Parallel,
            Kind::Create | Kind::Update => ExecutionMode::Sequential,
        }
    }

    async fn execute(
        &self,
        arguments: Value,
        context: ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        match self.kind {
            Kind::Create => self.create(args::arguments(arguments)?).await,
            Kind::Get => {
                let NoArgs {} = args::arguments(arguments)?;
                let goal = self
                    .book
                    .load(&self.tally.scope.session_id)
                    .await
                    .map_err(failed)?;
                Ok(match &goal {
                    Some(goal) => answer(goal.describe(), Some(goal)),
                    None => answer("No goal is set for this session.".into(), None),
                })
            }
            Kind::Update => {
                let args: UpdateArgs = args::arguments(arguments)?;
                match args.status {
                    Proposed::Complete => {
                        self.complete(args.evidence.unwrap_or_default(), context.cancel)
                            .await
                    }
                    Proposed::Blocked => {
                        self.blocked(
                            args.reason.unwrap_or_default(),
                            args.safety.unwrap_or(false),
                        )
                        .await
                    }
                }
            }
        }
    }
}

impl GoalTool {
    async fn create(&self, args: CreateArgs) -> Result<ToolOutput, ToolError> {
        let goal = Goal::create(NewGoal {
            objective: args.objective,
            // The model may only tighten what the user configured.
            limits: Limits {
                token_budget: args.token_budget.map(Int::get),
                max_turns: args
                    .max_turns
                    .map(|n| u32::try_from(n.get()).unwrap_or(u32::MAX)),
                max_active_seconds: args.max_active_seconds.map(Int::get),
            }
            .within(self.book.defaults()),
            verification: args.verification,
        })
        .map_err(failed)?;
        let scope = &self.tally.scope;
        let (created, ()) = self
            .book
            .update(&scope.session_id, move |current| match current {
                Some(existing) if existing.status != Status::Complete => {
                    Err(GoalError::InForce(existing.status))
                }
                _ => Ok((Some(goal), ())),
            })
            .await
            .map_err(failed)?;
        let Some(goal) = created else {
            return Err(failed(GoalError::NoGoal));
        };
        self.tally.touch();
        self.book
            .announce(&scope.session_id, Some(&scope.events), &goal);
        Ok(answer(
            format!(
                "Goal set. keel starts the next turn for it when this one ends, while it is \
                 active and under its limits.\n{}",
                goal.describe()
            ),
            Some(&goal),
        ))
    }

    /// The active goal, or why there is none to update.
    async fn active(&self) -> Result<Goal, ToolError> {
        match self.book.load(&self.tally.scope.session_id).await {
            Ok(Some(goal)) if goal.is_active() => Ok(goal),
            Ok(Some(goal)) => Err(failed(GoalError::NotActive(goal.status))),
            Ok(None) => Err(failed(GoalError::NoGoal)),
            Err(error) => Err(failed(error)),
        }
    }

    /// Applies `change` to the active goal pinned by `pin` (the one the call began with; a
    /// goal replaced or settled meanwhile is not touched) and tells front ends.
    async fn settle<T, F>(&self, pin: String, change: F) -> Result<(Goal, T), ToolError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Goal) -> T + Send + 'static,
    {
        let scope = &self.tally.scope;
        let (settled, outcome) = self
            .book
            .update(&scope.session_id, move |current| match current {
                Some(mut goal) if goal.is_active() && goal.objective_sha256 == pin => {
                    let outcome = change(&mut goal);
                    Ok((Some(goal), outcome))
                }
                Some(goal) => Err(GoalError::NotActive(goal.status)),
                None => Err(GoalError::NoGoal),
            })
            .await
            .map_err(failed)?;
        self.tally.touch();
        let goal = settled.ok_or_else(|| failed(GoalError::NoGoal))?;
        self.book
            .announce(&scope.session_id, Some(&scope.events), &goal);
        Ok((goal, outcome))
    }

    async fn complete(
        &self,
        evidence: String,
        cancel: CancellationToken,
    ) -> Result<ToolOutput, ToolError> {
        if evidence.trim().is_empty() {
            return Err(ToolError::new(
                "status \"complete\" needs `evidence` that proves the objective is met",
            ));
        }
        let goal = self.active().await?;
        let scope = &self.tally.scope;
        let verifier = Verifier {
            model: scope
                .stream
                .clone()
                .map(|stream| (stream, scope.spec.clone())),
            tasks: self
                .book
                .runtime()
                .map(|runtime| (runtime, scope.session_id.clone())),
            cancel,
        };
        let transcript = self.tally.transcript();
        let checked = verification::verify(
            goal.verification,
            &Claim {
                objective: &goal.objective,
                evidence: &evidence,
                transcript: &transcript,
            },
            &verifier,
        )
        .await;
        self.tally.add_tokens(tokens_of(&checked.usage));
        let note = checked.note;
        let (goal, outcome) = self
            .settle(goal.objective_sha256, move |goal| {
                if let Some(note) = note {
                    goal.note = Some(note.into());
                }
                goal.record_verdict(checked.verdict)
            })
            .await?;
        let said = goal
            .last_verdict
            .as_ref()
            .map(|v| v.evidence.clone())
            .unwrap_or_default();
        let text = match outcome {
            VerdictOutcome::Complete => format!(
                "The goal is complete (checked: {}). {said}\nEnd with a short summary for the user.",
                goal.verification.as_str()
            ),
            VerdictOutcome::NotMet(streak) => format!(
                "Not accepted: the verifier found the goal not met. It said: {said}\nThe goal \
                 stays active ({streak} of {NOT_MET_LIMIT} failed checks before it pauses). \
                 Keep working, then call update_goal again with evidence that proves it."
            ),
            VerdictOutcome::Paused => format!(
                "Not accepted: the verifier found the goal not met. It said: {said}\nThat was \
                 the {NOT_MET_LIMIT}th failed check in a row: the goal is paused until the user \
                 resumes it. Stop and summarise where things stand."
            ),
        };
        Ok(answer(text, Some(&goal)))
    }

    async fn blocked(&self, reason: String, safety: bool) -> Result<ToolOutput, ToolError> {
        if reason.trim().is_empty() {
            return Err(ToolError::new("status \"blocked\" needs a `reason`"));
        }
        let goal = self.active().await?;
        let (goal, outcome) = self
            .settle(goal.objective_sha256, move |goal| {
                goal.record_blocker(&reason, safety)
            })
            .await?;
        let text = match outcome {
            BlockerOutcome::Blocked => {
                "The goal is blocked; keel starts no more turns for it. Tell the user what stops you."
                    .to_owned()
            }
            BlockerOutcome::Counted(turns) => {
                self.tally.reported_blocker();
                format!(
                    "Blocker noted ({turns} of {BLOCKER_TURNS} goal turns). The goal stays \
                     active: try another way around it. If the same blocker stands over \
                     {BLOCKER_TURNS} goal turns in a row, the goal is blocked."
                )
            }
        };
        Ok(answer(text, Some(&goal)))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The schemas derived from the argument types are the hand-written ones they replaced.
    #[test]
    fn the_goal_tools_schemas_are_derived_from_their_argument_types() {
        pretty_assertions::assert_eq!(
            CREATE.parameters,
            json!({
                "type": "object",
                "properties": {
                    "objective": {"type": "string", "description": "What must be true when the goal is met: concrete and checkable"},
                    "token_budget": {"type": "integer", "minimum": 1, "description": "Tokens the goal may spend over all its turns (optional; never above the user's limit)"},
                    "max_turns": {"type": "integer", "minimum": 1, "maximum": u32::MAX, "description": "Most turns toward the goal (optional; never above the user's limit)"},
                    "max_active_seconds": {"type": "integer", "minimum": 1, "description": "Most seconds its turns may run (optional)"},
                    "verification": {"type": "string", "enum": ["none", "evaluator", "subagent"], "description": "How the host checks a completion (default evaluator)"}
                },
                "required": ["objective"],
                "additionalProperties": false
            })
        );
        pretty_assertions::assert_eq!(
            GET.parameters,
            json!({"type": "object", "properties": {}, "additionalProperties": false})
        );
        pretty_assertions::assert_eq!(
            UPDATE.parameters,
            json!({
                "type": "object",
                "properties": {
                    "status": {"type": "string", "enum": ["complete", "blocked"], "description": "complete or blocked"},
                    "evidence": {"type": "string", "description": "For complete: what proves the objective is met (commands run and their output, files changed)"},
                    "reason": {"type": "string", "description": "For blocked: what stops you"},
                    "safety": {"type": "boolean", "description": "For blocked: going on would be unsafe (default false)"}
                },
                "required": ["status"],
                "additionalProperties": false
            })
        );
    }

    #[test]
    fn a_goal_argument_out_of_its_bounds_is_refused_by_name() {
        let error = args::arguments::<CreateArgs>(json!({"objective": "x", "max_turns": 0}))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.contains("1"), "{error}");
        let error = args::arguments::<UpdateArgs>(json!({"status": "done"})).err();
        assert!(error.is_some_and(|e| e.to_string().contains("unknown variant `done`")));
    }
}
