//! The gate as the host's `before_tool_call` step: allow, block with a tagged reason, or ask
//! an [`Approver`] (the TUI, an editor over ACP) and remember "always" answers.
//!
//! Trade-off: with no approver (headless runs) every ask is a denial whose text says why, so a
//! scripted run never hangs on a question nobody can answer. An approver that does not answer
//! within [`DEFAULT_APPROVAL_TIMEOUT`] is taken as a denial, below the runner's own hook
//! timeout so the model reads a clear reason instead of a hook failure.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keel_agent::runner::BeforeToolCallHook;
use keel_agent::{BlockSource, HookError, ToolGate, TurnContext};
use keel_protocol::{ToolCall, ToolCallId};

use super::gate::{AskRequest, Decision, DenySource, PermissionGate};
use super::rules::Scope;

/// How long an approval may take before it counts as a denial (just under
/// `keel_agent::DEFAULT_HOOK_TIMEOUT`, 120 s, which bounds every hook).
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(115);

/// What the user answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Approval {
    /// Run this call only.
    AllowOnce,
    /// Run it and allow this scope for the rest of the session.
    AllowAlways(Scope),
    /// Do not run it; an optional message for the model.
    Deny(Option<String>),
    /// Do not run it, nor anything else this scope covers, for the rest of the session
    /// (and, with a rule file, later ones).
    DenyAlways(Scope),
}

/// A question for the user about one call.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    /// The call's id.
    pub tool_call_id: ToolCallId,
    /// The tool.
    pub tool: String,
    /// What the call does, in one line.
    pub summary: String,
    /// Why it needs approval.
    pub reasons: Vec<String>,
    /// Flagged by the danger list; "always allow" is not offered.
    pub safety: bool,
    /// "Always allow" choices, narrowest first.
    pub scopes: Vec<Scope>,
    /// The call's arguments, whole (the summary is cut to a line).
    pub arguments: serde_json::Value,
    /// What the call would change, as its tool computed it.
    pub preview: Option<keel_protocol::ToolPreview>,
}

/// Asks a person; implemented by interactive front ends.
#[async_trait]
pub trait Approver: Send + Sync {
    /// The user's answer to one request.
    async fn approve(&self, request: ApprovalRequest) -> Approval;
}

/// The permission gate as a `before_tool_call` hook.
#[derive(Clone)]
pub struct PermissionHook {
    gate: Arc<PermissionGate>,
    approver: Option<Arc<dyn Approver>>,
    approval_timeout: Duration,
    /// Where "always" answers are saved (`$KEEL_HOME/permissions.yaml`).
    rules_file: Option<(std::path::PathBuf, Option<std::path::PathBuf>)>,
    /// What the user's hooks said of calls about to be judged, by call id.
    presumed: Arc<std::sync::Mutex<std::collections::HashMap<String, Presumption>>>,
}

/// What a user hook (the user's own code, or a project's the user trusts) said of a call
/// before the gate judges it. It can spare a question or add one, never lift a denial.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Presumption {
    /// Run it without asking when the gate would ask (not when the danger list asks).
    Allow(String),
    /// Ask the user even when the gate would allow it; headless, that is a denial.
    Ask(String),
}

impl std::fmt::Debug for PermissionHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PermissionHook")
            .field("gate", &self.gate)
            .field("interactive", &self.approver.is_some())
            .field("approval_timeout", &self.approval_timeout)
            .finish()
    }
}

impl PermissionHook {
    /// A hook for runs with no one to ask: asks become denials.
    pub fn headless(gate: Arc<PermissionGate>) -> Self {
        Self {
            gate,
            approver: None,
            approval_timeout: DEFAULT_APPROVAL_TIMEOUT,
            rules_file: None,
            presumed: Arc::default(),
        }
    }

    /// Records what a user hook said of call `call_id`, for its judgement.
    pub fn presume(&self, call_id: &str, presumption: Presumption) {
        self.presumed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(call_id.to_owned(), presumption);
    }

    /// A hook that asks `approver`.
    pub fn interactive(gate: Arc<PermissionGate>, approver: Arc<dyn Approver>) -> Self {
        Self {
            gate,
            approver: Some(approver),
            approval_timeout: DEFAULT_APPROVAL_TIMEOUT,
            rules_file: None,
            presumed: Arc::default(),
        }
    }

    /// Saves "always" answers as allow rules in `path` (`home` resolves `~` in it), so
    /// later sessions keep them.
    pub fn with_rules_file(
        mut self,
        path: std::path::PathBuf,
        home: Option<std::path::PathBuf>,
    ) -> Self {
        self.rules_file = Some((path, home));
        self
    }

    /// Changes how long an approval may take.
    pub fn with_approval_timeout(mut self, timeout: Duration) -> Self {
        self.approval_timeout = timeout;
        self
    }

    /// The gate.
    pub fn gate(&self) -> &Arc<PermissionGate> {
        &self.gate
    }

    /// The verdict for one call.
    pub async fn judge(&self, call: &ToolCall) -> ToolGate {
        let decision = self.gate.check(&call.name, &call.arguments);
        let presumed = self
            .presumed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(call.id.as_str());
        let request = match (decision, presumed) {
            (Decision::Deny(denial), _) => return block(denial.to_string()),
            (Decision::Allow, Some(Presumption::Ask(reason))) => AskRequest {
                tool: call.name.clone(),
                summary: format!("{} {}", call.name, call.arguments),
                reasons: vec![format!("a hook asks: {reason}")],
                safety: false,
                scopes: Vec::new(),
            },
            (Decision::Allow, _) => return ToolGate::Allow,
            (Decision::Ask(request), Some(Presumption::Allow(_))) if !request.safety => {
                return ToolGate::Allow;
            }
            (Decision::Ask(request), _) => request,
        };
        let Some(approver) = &self.approver else {
            return block(request.headless_denial().to_string());
        };
        let AskRequest {
            tool,
            summary,
            reasons,
            safety,
            scopes,
        } = request;
        let preview = match self.gate.tool(&call.name) {
            Some(tool) => tool.preview(&call.id, &call.arguments).await,
            None => None,
        };
        let question = ApprovalRequest {
            preview,
            arguments: call.arguments.clone(),
            tool_call_id: call.id.clone(),
            tool,
            summary,
            reasons: reasons.clone(),
            safety,
            scopes,
        };
        match tokio::time::timeout(self.approval_timeout, approver.approve(question)).await {
            Ok(Approval::AllowOnce) => ToolGate::Allow,
            Ok(Approval::AllowAlways(scope)) => {
                if !safety {
                    self.gate.allow_scope(&scope);
                    if scope.saved
                        && let Some((path, home)) = &self.rules_file
                        && let Err(error) =
                            super::rules::append_allow(path, &scope.matchers, home.as_deref())
                    {
                        // The session keeps the rule; only later sessions lose it.
                        tracing::warn!(%error, "cannot save the always-allow rule");
                    }
                }
                ToolGate::Allow
            }
            Ok(Approval::DenyAlways(scope)) => {
                self.gate.deny_scope(&scope);
                if scope.saved
                    && let Some((path, home)) = &self.rules_file
                    && let Err(error) = super::rules::append_rules(
                        path,
                        super::rules::Effect::Deny,
                        &scope.matchers,
                        home.as_deref(),
                    )
                {
                    tracing::warn!(%error, "cannot save the always-reject rule");
                }
                block(format!(
                    "{} the user declined this call and every call like it ({})",
                    DenySource::User.tag(),
                    scope.label
                ))
            }
            Ok(Approval::Deny(message)) => {
                let reason = match message.filter(|m| !m.trim().is_empty()) {
                    Some(message) => format!("{} {message}", DenySource::User.tag()),
                    None => format!("{} the user declined this call", DenySource::User.tag()),
                };
                block(reason)
            }
            Err(_) => block(format!(
                "{} no answer within {} s: {}",
                DenySource::ApprovalNeeded.tag(),
                self.approval_timeout.as_secs(),
                reasons.join("; ")
            )),
        }
    }
}

fn block(reason: String) -> ToolGate {
    ToolGate::Block {
        reason,
        source: BlockSource::Permission,
    }
}

#[async_trait]
impl BeforeToolCallHook for PermissionHook {
    async fn before_tool_call(
        &self,
        turn: &TurnContext,
        call: &ToolCall,
    ) -> Result<ToolGate, HookError> {
        let gate = self.judge(call).await;
        if let ToolGate::Block { reason, .. } = &gate {
            tracing::info!(session = %turn.session_id, turn = %turn.turn_id, tool = %call.name, %reason, "tool call blocked by the permission gate");
        }
        Ok(gate)
    }
}
