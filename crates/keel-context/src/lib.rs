//! Context management on the runtime's SPI (DESIGN §12): the measurer, the budget, the usage
//! anchor, the tool-result archiver, checkpoint compaction and overflow recovery (`host.context`).
//! It must not import keel-mcp (its sibling on the SPI), keel-extensions, keel-tui, keel-acp or
//! keel-cli.
#![forbid(unsafe_code)]

pub mod anchor;
pub mod archive;
pub mod checkpoint;
pub mod compact;
pub mod manager;

/// The measurer and the budget live with the model's limits, below the runtime, so the
/// turn view and the lean request use the same numbers as the manager.
pub use keel_llm::{budget, measure};

/// Id of the context manager (host-owned).
pub const CONTEXT: &str = "host.context";

pub use budget::Budget;
pub use manager::{ContextCompactor, ContextManager};
pub use measure::{MeasureCache, Size};
