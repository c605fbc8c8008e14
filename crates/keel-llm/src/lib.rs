//! keel's model layer.
//!
//! The agent loop talks to every model through one [`StreamFn`]: a request goes in, a stream
//! of unified [`keel_protocol::StreamEvent`]s comes out, always ending in exactly one
//! terminal event. Failures are events, not `Err`s, so a consumer has one path to handle.
//! This crate also holds the [`AssistantBuilder`] that folds events into a message, the
//! option wrappers composed around a provider, and the [`scripted`] provider every test uses.

pub mod api;
mod assemble;
pub mod errors;
mod http;
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
pub use http::{ClientError, HttpProvider, http_client, http_client_for};
pub use model::{Api, Capabilities, Compat, ModelEntry, Prices};
pub use request::{CacheRetention, LlmRequest, ModelSpec, RequestOptions, ThinkingLevel};
pub use stream_fn::{EventStream, StreamFn, collect, error_stream, message_stream};
pub use usage::cost;
pub use wrappers::{StreamSettings, compose_stream_fn};
