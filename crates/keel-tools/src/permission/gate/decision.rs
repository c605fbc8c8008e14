//! The gate's verdict types: the permission [`Mode`], a [`Decision`] with its [`AskRequest`]
//! or [`Denial`], and who denied. Plain data the hook, the host and the front ends read,
//! separate from the judgement that produces it.

use std::fmt;

use crate::permission::rules::Scope;

/// The permission mode (the protocol's one type).
pub use keel_protocol::PermissionMode as Mode;

/// Who or what denied a call; the tag starts the message the model gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DenySource {
    /// The user answered no.
    User,
    /// A deny rule matched.
    Rule,
    /// The danger list, in a run with no one to ask.
    Safety,
    /// The mode's profile (`plan` is read-only).
    Mode,
    /// A write or delete of a protected control file (keel's own configuration, git's
    /// configuration and hooks), which only the user or `full` mode may make.
    Protected,
    /// An ask in a run with no one to ask.
    ApprovalNeeded,
}

impl DenySource {
    /// The fixed tag that starts a denial message.
    pub fn tag(self) -> &'static str {
        match self {
            DenySource::User => "[denied by user]",
            DenySource::Rule => "[denied by rule]",
            DenySource::Safety => "[denied by safety]",
            DenySource::Mode => "[denied by mode]",
            DenySource::Protected => "[denied: protected file]",
            DenySource::ApprovalNeeded => "[denied: approval needed]",
        }
    }
}

/// A denial: its source and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// Who denied.
    pub source: DenySource,
    /// Why, for the model.
    pub reason: String,
}

impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.source.tag(), self.reason)
    }
}

/// A call that needs the user's approval.
#[derive(Debug, Clone, PartialEq)]
pub struct AskRequest {
    /// The tool.
    pub tool: String,
    /// What the call does, in one line.
    pub summary: String,
    /// Why it needs approval.
    pub reasons: Vec<String>,
    /// The danger list asked: only "allow once" makes sense.
    pub safety: bool,
    /// "Always allow" choices, narrowest first; empty when only "allow once" is offered.
    pub scopes: Vec<Scope>,
}

/// The gate's verdict on one call.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Run it.
    Allow,
    /// Ask the user first.
    Ask(AskRequest),
    /// Do not run it.
    Deny(Denial),
}

/// The kind of a decision, for tests and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DecisionKind {
    /// Runs.
    Allow,
    /// Asks (mode or rule).
    Ask,
    /// Asks because of the danger list.
    Safety,
    /// Denied.
    Deny,
}

impl Decision {
    /// The kind.
    pub fn kind(&self) -> DecisionKind {
        match self {
            Decision::Allow => DecisionKind::Allow,
            Decision::Ask(request) if request.safety => DecisionKind::Safety,
            Decision::Ask(_) => DecisionKind::Ask,
            Decision::Deny(_) => DecisionKind::Deny,
        }
    }

    /// The decision for a run with no one to ask: an ask becomes a denial with its reasons.
    pub fn headless(self) -> Decision {
        match self {
            Decision::Ask(request) => Decision::Deny(request.headless_denial()),
            other => other,
        }
    }
}

impl AskRequest {
    /// The denial given instead of this question when no one can answer it.
    pub fn headless_denial(&self) -> Denial {
        Denial {
            source: if self.safety {
                DenySource::Safety
            } else {
                DenySource::ApprovalNeeded
            },
            reason: format!(
                "{} (no one can approve it in this run)",
                self.reasons.join("; ")
            ),
        }
    }
}
