//! keel's model layer: the `StreamFn` seam, the four wire APIs, SSE parsing, HTTP transport,
//! timeouts and retry, the provider registry, pricing, and the scripted test provider.
//! It imports only keel-protocol, and must not import keel-agent, keel-store, keel-tools,
//! keel-runtime, keel-context, keel-mcp, keel-extensions, keel-tui, keel-acp or keel-cli.
#![forbid(unsafe_code)]

pub mod api;
mod assemble;
pub mod budget;
pub mod errors;
mod http;
pub mod local;
pub mod measure;
mod model;
pub mod prepare;
pub mod registry;
mod request;
pub mod retry;
pub mod scripted;
pub mod sse;
mod stream_fn;
mod usage;
mod wrappers;

pub use assemble::{AssembleError, AssistantBuilder};
pub use http::{ClientError, HttpProvider, client_builder, http_client, http_client_for};
pub use model::{Api, Capabilities, Compat, ModelEntry, Prices};
pub use request::{CacheRetention, LlmRequest, ModelSpec, RequestOptions, ThinkingLevel};
pub use stream_fn::{EventStream, StreamFn, collect, error_stream, message_stream};
pub use usage::cost;
pub use wrappers::{StreamSettings, compose_stream_fn};
