//! A session's goal as the store keeps it (one JSON value under [`STATE_KEY`] in the
//! session's key/value state), and how it reads for people and front ends.
//!
//! The objective is pinned by its SHA-256: nothing after creation may change it, and a
//! stored goal whose text no longer matches its pin is refused rather than continued, so a
//! damaged or edited row can never steer turns toward something the user did not ask for.
//! A cleared goal is stored as `null` (the store has no removal), which reads as no goal.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::GoalError;
use crate::report::files::sha256_hex;

/// The session-state key the goal lives under.
pub const STATE_KEY: &str = "goal";

/// Longest objective accepted: a goal is a sentence or a short brief, not a document.
pub const MAX_OBJECTIVE_BYTES: usize = keel_protocol::GOAL_OBJECTIVE_MAX_BYTES;

/// Longest objective shown in a banner line.
const BANNER_OBJECTIVE_CHARS: usize = 60;

/// Where a goal stands (the protocol's one type; a stored goal is never `cleared`: a
/// cleared goal is removed).
pub use keel_protocol::GoalStatus as Status;

/// How the host checks a completion the model proposes.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Verification {
    /// The model's word is taken.
    None,
    /// One model call must find the completion proven by the evidence.
    #[default]
    Evaluator,
    /// A read-only verifier task without web tools checks the work.
    Subagent,
}

impl Verification {
    /// The mode as stored and typed.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Evaluator => "evaluator",
            Self::Subagent => "subagent",
        }
    }

    /// Reads `none`, `evaluator` or `subagent`.
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim() {
            "none" => Some(Self::None),
            "evaluator" => Some(Self::Evaluator),
            "subagent" => Some(Self::Subagent),
            _ => None,
        }
    }
}

/// What a goal may spend; `None` is no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Limits {
    /// Tokens over the goal's turns (see [`super::tokens_of`]).
    #[serde(default)]
    pub token_budget: Option<u64>,
    /// Turns that ran toward the goal.
    #[serde(default)]
    pub max_turns: Option<u32>,
    /// Seconds the goal's turns ran.
    #[serde(default)]
    pub max_active_seconds: Option<u64>,
}

impl Limits {
    /// The default limits of a goal: `goals.max_turns` and `goals.max_tokens`.
    pub fn defaults(config: &keel_runtime::settings::extend::GoalsConfig) -> Self {
        Self {
            token_budget: Some(config.max_tokens),
            max_turns: Some(config.max_turns),
            max_active_seconds: None,
        }
    }

    /// These limits, none above `ceiling`: what the model may ask for, which only tightens
    /// what the user configured.
    pub fn within(self, ceiling: Self) -> Self {
        fn least<T: Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        }
        Self {
            token_budget: least(self.token_budget, ceiling.token_budget),
            max_turns: least(self.max_turns, ceiling.max_turns),
            max_active_seconds: least(self.max_active_seconds, ceiling.max_active_seconds),
        }
    }
}

/// The same blocker reported in consecutive goal turns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockerStreak {
    /// SHA-256 of the reason, trimmed.
    pub reason_sha256: String,
    /// The reason as last reported.
    pub reason: String,
    /// Goal turns in a row that reported it.
    pub turns: u32,
    /// The goal turn (1-based) that last reported it.
    pub last_turn: u32,
}

/// What the goal has used, and the breakers' streaks.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Counters {
    /// Tokens over the goal's turns and its verifications.
    pub tokens_used: u64,
    /// Turns that ran toward the goal.
    pub goal_turns: u32,
    /// Milliseconds those turns ran.
    pub active_ms: u64,
    /// Verifications in a row that found the goal not met.
    pub not_met_streak: u32,
    /// Completed goal turns in a row that ended with the same reply.
    pub identical_replies: u32,
    /// SHA-256 of the last goal turn's final reply.
    pub last_reply_sha256: Option<String>,
    /// The blocker being reported, if any.
    pub blocker: Option<BlockerStreak>,
}

/// The host's judgement of a proposed completion.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// Whether the objective was found met.
    pub met: bool,
    /// Why: the verifier's evidence or reason.
    pub evidence: String,
    /// Who judged.
    pub by: Verification,
}

/// A session's goal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Goal {
    /// What the user (or the model, through `create_goal`) asked for.
    pub objective: String,
    /// Hex SHA-256 of `objective`, fixed at creation.
    pub objective_sha256: String,
    /// Where it stands.
    pub status: Status,
    /// How completions are checked.
    #[serde(default)]
    pub verification: Verification,
    /// What it may spend.
    #[serde(flatten)]
    pub limits: Limits,
    /// What it spent, and the breakers' streaks.
    #[serde(default)]
    pub counters: Counters,
    /// The last verification's verdict.
    #[serde(default)]
    pub last_verdict: Option<Verdict>,
    /// Why it has its status, when a breaker, a limit or the user set it.
    #[serde(default)]
    pub reason: Option<String>,
    /// Something the user should know about how it is checked.
    #[serde(default)]
    pub note: Option<String>,
    /// When it was created, ms since the epoch.
    pub created_ms: i64,
}

/// What a new goal is made from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NewGoal {
    /// The objective.
    pub objective: String,
    /// Its limits.
    pub limits: Limits,
    /// How completions are checked (default: the evaluator).
    pub verification: Option<Verification>,
}

impl Goal {
    /// A new active goal, or why `new` cannot be one.
    pub fn create(new: NewGoal) -> Result<Self, GoalError> {
        let objective = new.objective.trim().to_owned();
        if objective.is_empty() {
            return Err(GoalError::Invalid("the objective is empty".into()));
        }
        if objective.len() > MAX_OBJECTIVE_BYTES {
            return Err(GoalError::Invalid(format!(
                "the objective is {} bytes, over the limit of {MAX_OBJECTIVE_BYTES}",
                objective.len()
            )));
        }
        if new.limits.token_budget == Some(0)
            || new.limits.max_turns == Some(0)
            || new.limits.max_active_seconds == Some(0)
        {
            return Err(GoalError::Invalid("a limit of zero leaves no turn".into()));
        }
        Ok(Self {
            objective_sha256: sha256_hex(objective.as_bytes()),
            objective,
            status: Status::Active,
            verification: new.verification.unwrap_or_default(),
            limits: new.limits,
            counters: Counters::default(),
            last_verdict: None,
            reason: None,
            note: None,
            created_ms: keel_protocol::now_ms(),
        })
    }

    /// The goal stored as `value` (`None` or `null`: no goal), checked against its pin.
    pub fn from_stored(value: Option<Value>) -> Result<Option<Self>, GoalError> {
        let Some(value) = value.filter(|v| !v.is_null()) else {
            return Ok(None);
        };
        let goal: Self = serde_json::from_value(value)
            .map_err(|e| GoalError::Damaged(format!("the stored goal cannot be read: {e}")))?;
        if sha256_hex(goal.objective.as_bytes()) != goal.objective_sha256 {
            return Err(GoalError::Damaged(
                "the stored objective does not match its SHA-256 pin".into(),
            ));
        }
        Ok(Some(goal))
    }

    /// The goal as stored.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Whether finished turns still lead to new ones.
    pub fn is_active(&self) -> bool {
        self.status == Status::Active
    }

    /// Tokens left under the budget, if it has one.
    pub fn tokens_left(&self) -> Option<u64> {
        self.limits
            .token_budget
            .map(|budget| budget.saturating_sub(self.counters.tokens_used))
    }

    /// One line for a banner: status, objective, tokens, turns.
    pub fn banner(&self) -> String {
        let first = self.objective.lines().next().unwrap_or_default();
        let mut objective: String = first.chars().take(BANNER_OBJECTIVE_CHARS).collect();
        if objective.len() < self.objective.len() {
            objective.push('…');
        }
        let count = keel_runtime::notice::short_count;
        let tokens = match self.limits.token_budget {
            Some(budget) => format!(
                "{}/{} tokens",
                count(self.counters.tokens_used),
                count(budget)
            ),
            None => format!("{} tokens", count(self.counters.tokens_used)),
        };
        let turns = match self.limits.max_turns {
            Some(max) => format!("turn {}/{max}", self.counters.goal_turns),
            None => format!("turn {}", self.counters.goal_turns),
        };
        format!(
            "goal {}: {objective} · {tokens} · {turns}",
            self.status.as_str().replace('_', " ")
        )
    }

    /// The `goal_updated` event's details: the whole goal, its banner and what is left.
    pub fn details(&self) -> Value {
        let mut value = self.to_value();
        if let Value::Object(map) = &mut value {
            map.insert("banner".into(), json!(self.banner()));
            map.insert("tokens_left".into(), json!(self.tokens_left()));
            map.insert(
                "active_seconds".into(),
                json!(self.counters.active_ms / 1000),
            );
        }
        value
    }

    /// The goal as front ends see it: its status typed, its banner, and the whole record.
    pub fn info(&self) -> keel_protocol::GoalInfo {
        keel_protocol::GoalInfo {
            objective: self.objective.clone(),
            status: self.status,
            reason: self.reason.clone(),
            banner: self.banner(),
            record: self.details(),
        }
    }

    /// What `/goal` and `get_goal` show.
    pub fn describe(&self) -> String {
        let mut lines = vec![
            format!("Goal ({}): {}", self.status.as_str(), self.objective),
            format!("  objective sha256: {}", self.objective_sha256),
            format!(
                "  tokens: {}{}",
                self.counters.tokens_used,
                self.limits
                    .token_budget
                    .map(|b| format!(" of {b}"))
                    .unwrap_or_default()
            ),
            format!(
                "  turns: {}{}",
                self.counters.goal_turns,
                self.limits
                    .max_turns
                    .map(|m| format!(" of {m}"))
                    .unwrap_or_default()
            ),
            format!(
                "  active seconds: {}{}",
                self.counters.active_ms / 1000,
                self.limits
                    .max_active_seconds
                    .map(|m| format!(" of {m}"))
                    .unwrap_or_default()
            ),
            format!("  verification: {}", self.verification.as_str()),
        ];
        if let Some(verdict) = &self.last_verdict {
            lines.push(format!(
                "  last check: {} ({})",
                if verdict.met { "met" } else { "not met" },
                verdict.evidence
            ));
        }
        if let Some(reason) = &self.reason {
            lines.push(format!("  why: {reason}"));
        }
        if let Some(note) = &self.note {
            lines.push(format!("  note: {note}"));
        }
        lines.join("\n")
    }
}

/// The `goal_updated` details of a cleared goal: front ends drop their banner.
pub fn cleared(objective: &str) -> keel_protocol::GoalInfo {
    keel_protocol::GoalInfo {
        objective: objective.to_owned(),
        status: keel_protocol::GoalStatus::Cleared,
        reason: None,
        banner: String::new(),
        record: json!({"status": "cleared", "objective": objective}),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use pretty_assertions::assert_eq;

    use super::*;

    fn goal() -> Goal {
        Goal::create(NewGoal {
            objective: "  make the tests pass  ".into(),
            limits: Limits {
                token_budget: Some(50_000),
                max_turns: Some(10),
                max_active_seconds: None,
            },
            verification: None,
        })
        .unwrap()
    }

    #[test]
    fn a_stored_goal_reads_back_and_its_pin_holds() {
        let goal = goal();
        assert_eq!(goal.objective, "make the tests pass");
        assert_eq!(goal.verification, Verification::Evaluator);
        let back = Goal::from_stored(Some(goal.to_value())).unwrap().unwrap();
        assert_eq!(back, goal);
        assert_eq!(Goal::from_stored(None).unwrap(), None);
        assert_eq!(Goal::from_stored(Some(Value::Null)).unwrap(), None);
    }

    #[test]
    fn an_objective_edited_behind_the_pin_is_refused() {
        let mut value = goal().to_value();
        value["objective"] = json!("delete the repository");
        let error = Goal::from_stored(Some(value)).unwrap_err();
        assert_eq!(error.code(), "goal_damaged");
    }

    #[test]
    fn objectives_and_limits_are_checked() {
        let make = |objective: &str, limits| {
            Goal::create(NewGoal {
                objective: objective.into(),
                limits,
                verification: None,
            })
        };
        assert!(make(" ", Limits::default()).is_err());
        assert!(make(&"x".repeat(MAX_OBJECTIVE_BYTES + 1), Limits::default()).is_err());
        let zero = Limits {
            max_turns: Some(0),
            ..Limits::default()
        };
        assert!(make("x", zero).is_err());
    }

    #[test]
    fn defaults_bound_what_the_model_asks() {
        let defaults = Limits::defaults(&Default::default());
        assert_eq!(defaults.max_turns, Some(20));
        assert_eq!(defaults.token_budget, Some(500_000));
        let model = Limits {
            token_budget: Some(u64::MAX),
            max_turns: Some(3),
            max_active_seconds: Some(60),
        };
        let capped = model.within(defaults);
        assert_eq!(capped.token_budget, Some(500_000));
        assert_eq!(capped.max_turns, Some(3));
        assert_eq!(capped.max_active_seconds, Some(60));
        assert_eq!(Limits::default().within(defaults), defaults);
    }

    #[test]
    fn the_banner_says_status_tokens_and_turns() {
        let mut goal = goal();
        goal.counters.tokens_used = 12_345;
        goal.counters.goal_turns = 3;
        assert_eq!(
            goal.banner(),
            "goal active: make the tests pass · 12.3k/50.0k tokens · turn 3/10"
        );
        goal.status = Status::BudgetLimited;
        goal.limits = Limits::default();
        assert_eq!(
            goal.banner(),
            "goal budget limited: make the tests pass · 12.3k tokens · turn 3"
        );
        assert_eq!(goal.details()["tokens_left"], Value::Null);
    }
}
