//! keel's agent loop and the `Agent` shell around it (DESIGN §1), with the seams a host
//! uses to steer it.
//!
//! The loop streams a model response, runs the tool calls it asked for, feeds the results
//! back, and repeats until the model is done. It is built so it cannot wedge: every hook,
//! subscriber and tool runs behind a guard (panics caught, time bounded, abort honoured),
//! and every tool call always ends with exactly one result.

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
    AgentTool, ExecutionMode, ToolCallContext, ToolError, ToolOutput, ToolRef, ToolUpdates,
};
pub use tools_table::ToolAdditions;
pub use turn_context::TurnContext;
