//! keel's agent loop, the `Agent` shell around it, and the turn runner with its hooks and
//! event bridge (DESIGN §1, §2). It knows models, not storage or tools' internals.
//! It imports only keel-protocol and keel-llm, and must not import keel-store, keel-tools,
//! keel-runtime, keel-context, keel-mcp, keel-extensions, keel-tui, keel-acp or keel-cli.
#![forbid(unsafe_code)]

mod agent;
mod emit;
mod error;
mod guard;
mod hooks;
mod options;
mod projection;
mod run;
pub mod runner;
mod tool;
mod tools_table;
mod turn_context;

pub use agent::{Agent, SubscriptionId, WeakAgent};
pub use emit::{AgentSubscriber, FnSubscriber};
pub use error::AgentError;
pub use hooks::{
    BlockSource, Boundary, CallAction, ContextPlan, HookError, LoopHooks, NoHooks, RequestFrame,
    ResponseDecision, StepSummary, ToolGate,
};
pub use options::{
    AgentOptions, ApiKeySource, DEFAULT_ABORT_GRACE, DEFAULT_HOOK_TIMEOUT, GeneratedIds,
    MessageIdSource, QueueMode,
};
pub use projection::{DEFAULT_MIN_IMAGE_BYTES, project_all};
pub use run::STOPPED_BY_HOOK;
pub use tool::{
    AgentTool, ExecutionMode, OUTPUT_UPDATE, ToolCallContext, ToolError, ToolNature, ToolOutput,
    ToolRef, ToolUpdates,
};
pub use tools_table::ToolAdditions;
pub use turn_context::TurnContext;
