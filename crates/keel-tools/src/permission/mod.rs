//! The permission gate: a host-owned `before_tool_call` step that decides, for every tool
//! call, whether it runs, asks the user, or is denied (issue 4 §3, DESIGN §13 "before a tool
//! runs").
//!
//! A call is turned into what it really does ([`shell`] parses commands, expands them as bash
//! would, unwraps wrappers and follows nested scripts; [`paths`](self) resolves symlinks before
//! `..`), then judged by the user's rules ([`rules`]), the mode's fixed profile
//! ([`gate::Mode`]), the protected control files ([`crate::protect`]) and a built-in danger
//! list ([`danger`], with `envvars` for variables that load code). [`hook::PermissionHook`]
//! plugs the result into the runner.
//!
//! Trade-off: the gate judges what it can see and treats what it cannot (unknown variables,
//! code produced at run time) as the worst case. Code it cannot read at all (scripts, inline
//! interpreter code, unknown programs) is left to the kernel sandbox in `auto`, asked about
//! when the sandbox is off, and denied in `plan`. That costs some extra questions; it never
//! lets a wrapper, a link or a substitution carry a call past a check.

pub mod danger;
pub mod gate;
pub mod hook;
mod paths;
pub mod rules;

/// The shell analyser and what commands do, from keel-shell.
pub use keel_shell::{effects, envvars, shell};

pub use effects::CommandClass;
pub(crate) use effects::git_key_runs_program;
pub use gate::{AskRequest, Decision, DecisionKind, Denial, DenySource, Mode, PermissionGate};
pub use hook::{
    Approval, ApprovalRequest, Approver, DEFAULT_APPROVAL_TIMEOUT, PermissionHook, Presumption,
};
pub use paths::real_path;
pub use rules::{
    Action, Effect, Matcher, PathPattern, Rule, RuleError, RuleOrigin, RuleSet, Scope, keel_home,
};
