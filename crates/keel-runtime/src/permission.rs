//! Permission requests as session events, and their answers.
//!
//! An interactive front end's gate asks through [`SessionApprover`]: the request becomes a
//! `permission_requested` event and waits for an answer operation. The answer is accepted
//! only while the request's turn is still running and not cancelled (DESIGN §13: the user may
//! cancel while an approval is pending); a cancellation answers every pending request with
//! a denial at once.

use std::sync::{PoisonError, Weak};

use async_trait::async_trait;
use keel_protocol::{PermissionAnswer, PermissionRequest, SessionEventBody, SessionId};
use keel_tools::permission::{Approval, ApprovalRequest, Approver, Scope};
use tokio::sync::oneshot;

use crate::error::RuntimeError;
use crate::runtime::Slot;

/// A request waiting for the user.
pub(crate) struct Pending {
    scopes: Vec<Scope>,
    answer: oneshot::Sender<Approval>,
}

/// Asks the user of one session through its event stream.
pub(crate) struct SessionApprover {
    slot: Weak<Slot>,
    registry: crate::extension::Registry,
}

impl SessionApprover {
    pub(crate) fn new(slot: Weak<Slot>, registry: crate::extension::Registry) -> Self {
        Self { slot, registry }
    }
}

/// What the model is told when the turn was cancelled while its approval was pending.
const CANCELLED: &str = "the turn was cancelled while this call waited for approval";

#[async_trait]
impl Approver for SessionApprover {
    async fn approve(&self, request: ApprovalRequest) -> Approval {
        let Some(slot) = self.slot.upgrade() else {
            return Approval::Deny(Some("the session was closed".into()));
        };
        let Some(turn) = slot.running() else {
            return Approval::Deny(Some("no turn is running".into()));
        };
        let id = keel_store::new_id("p-");
        let (tx, rx) = oneshot::channel();
        turn.permissions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                id.clone(),
                Pending {
                    scopes: request.scopes.clone(),
                    answer: tx,
                },
            );
        self.registry.attention(
            &slot.id,
            format!("keel needs your permission to use {}", request.tool),
        );
        slot.emit(SessionEventBody::PermissionRequested {
            turn_id: turn.turn_id.clone(),
            request: PermissionRequest {
                id: id.clone(),
                tool_call_id: request.tool_call_id.clone(),
                tool: request.tool.clone(),
                summary: request.summary.clone(),
                reasons: request.reasons.clone(),
                arguments: request.arguments.clone(),
                preview: request.preview.clone(),
                safety: request.safety,
                scopes: request.scopes.iter().map(|s| s.label.clone()).collect(),
                // A scope that is not saved shows no rule: the front ends say it lasts the
                // session and is written nowhere.
                rules: request
                    .scopes
                    .iter()
                    .map(|s| {
                        if !s.saved {
                            return String::new();
                        }
                        s.matchers
                            .iter()
                            .map(keel_tools::permission::rules::Matcher::to_rule_text)
                            .collect::<Vec<_>>()
                            .join("\n")
                    })
                    .collect(),
            },
        });
        slot.hub.drained();
        let approval = tokio::select! {
            answer = rx => answer.unwrap_or_else(|_| Approval::Deny(Some(CANCELLED.into()))),
            () = turn.cancel.cancelled() => Approval::Deny(Some(CANCELLED.into())),
        };
        // Whatever ended the wait, the request is no longer answerable.
        turn.permissions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
        slot.emit(SessionEventBody::PermissionResolved {
            turn_id: turn.turn_id.clone(),
            request_id: id,
            allowed: !matches!(approval, Approval::Deny(_)),
        });
        approval
    }
}

impl crate::turns::Turns {
    /// Answers a pending permission request of the session's running turn.
    pub(crate) fn answer_permission(
        &self,
        session: &SessionId,
        request: &str,
        answer: PermissionAnswer,
    ) -> Result<(), RuntimeError> {
        let slot = self.runtime.slot(session)?;
        let refused = |reason: &str| RuntimeError::PermissionRefused {
            request: request.to_owned(),
            reason: reason.to_owned(),
        };
        let Some(turn) = slot.running() else {
            return Err(refused("no turn of the session is running"));
        };
        if turn.cancel.is_cancelled() {
            return Err(refused("its turn was cancelled"));
        }
        let mut pending = turn
            .permissions
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let approval = {
            let Some(waiting) = pending.get(request) else {
                return Err(refused(
                    "it is not pending in the running turn (answered already, or its turn ended)",
                ));
            };
            match answer {
                PermissionAnswer::AllowOnce => Approval::AllowOnce,
                PermissionAnswer::AllowAlways { scope } => match waiting.scopes.get(scope) {
                    Some(chosen) => Approval::AllowAlways(chosen.clone()),
                    None => {
                        return Err(RuntimeError::NoSuchScope {
                            request: request.to_owned(),
                            scope,
                        });
                    }
                },
                PermissionAnswer::DenyAlways { scope } => match waiting.scopes.get(scope) {
                    Some(chosen) => Approval::DenyAlways(chosen.clone()),
                    None => {
                        return Err(RuntimeError::NoSuchScope {
                            request: request.to_owned(),
                            scope,
                        });
                    }
                },
                PermissionAnswer::Deny { reason } => Approval::Deny(reason),
            }
        };
        let Some(waiting) = pending.remove(request) else {
            return Err(refused("it was answered meanwhile"));
        };
        waiting
            .answer
            .send(approval)
            .map_err(|_| refused("its turn stopped waiting"))
    }
}
