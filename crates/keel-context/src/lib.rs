//! Context management (DESIGN §12): keep every request within the model's window and
//! lose nothing that matters.
//!
//! - [`measure`]: estimated tokens and serialised bytes of messages, system prompt and tools;
//! - [`budget`]: the input limit L, the compaction start T, byte limits, `max_tokens`;
//! - [`anchor`]: the provider's own count of the last request, bound to what it measured;
//! - [`archive`]: older large tool outputs become receipts naming their artifact;
//! - [`checkpoint`] and [`compact`]: the eight-section summary that replaces the history;
//! - [`manager`]: `host.context`, which runs all of it before every model call, recovers
//!   from a provider's overflow rejection, and the `compact` operation's strategy.

pub mod anchor;
pub mod archive;
pub mod budget;
pub mod checkpoint;
pub mod compact;
pub mod manager;
pub mod measure;

/// Id of the context manager (host-owned).
pub const CONTEXT: &str = "host.context";

pub use budget::Budget;
pub use manager::{ContextCompactor, ContextManager};
pub use measure::{MeasureCache, Size};
