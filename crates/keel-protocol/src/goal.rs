//! A session's goal and a submitted plan, as front ends see them.

use serde::{Deserialize, Serialize};

/// The longest objective a goal may have, in bytes.
pub const GOAL_OBJECTIVE_MAX_BYTES: usize = 8 * 1024;

/// Where a goal stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GoalStatus {
    /// Turns keep coming until it is settled.
    Active,
    /// A breaker or the user paused it.
    Paused,
    /// It used up a token, turn or time limit.
    BudgetLimited,
    /// The model reported it cannot go on.
    Blocked,
    /// The host verified it done.
    Complete,
    /// It was removed.
    Cleared,
}

impl GoalStatus {
    /// The status as written in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Paused => "paused",
            Self::BudgetLimited => "budget_limited",
            Self::Blocked => "blocked",
            Self::Complete => "complete",
            Self::Cleared => "cleared",
        }
    }
}

impl std::fmt::Display for GoalStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A plan submitted for review in plan mode (`exit_plan_mode` froze it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanInfo {
    /// The plan as frozen.
    pub text: String,
    /// The session's plan file.
    pub path: String,
    /// The frozen copy the approval carries out.
    pub frozen_path: String,
}

/// A session's goal after a change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoalInfo {
    /// What was asked for.
    pub objective: String,
    /// Where it stands.
    pub status: GoalStatus,
    /// Why it has this status, when a breaker, a limit, the model or the user set it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// One line for a banner: status, objective, tokens and turns against their limits
    /// (empty once cleared).
    pub banner: String,
    /// The whole goal as the goals extension keeps it (limits, counters, verdicts), for
    /// tools that want every number.
    #[serde(default)]
    pub record: serde_json::Value,
}
