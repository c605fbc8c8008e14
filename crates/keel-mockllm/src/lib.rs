//! `keel-mockllm`: a scripted model server for tests and benchmarks.
//!
//! It serves the four wire APIs keel speaks (Anthropic Messages, OpenAI Chat Completions
//! and Responses, Google Generative AI) on 127.0.0.1 from a JSON script, records every
//! request, shapes a scripted shell command into a call of whichever shell-like tool the
//! client declared, and injects faults: 429 with `retry-after`, 500, 529, 400, a reset
//! connection, a truncated body, malformed JSON, a stall. It also generates the long
//! benchmark workload.

pub mod encode;
pub mod script;
mod server;

pub use script::{Fault, Response, Script, ToolCall, Usage, workload};
pub use server::{MockServer, RecordedRequest, RequestTiming, ServerOptions};
