//! The harness's extensions on the real runtime, each trigger reproduced with the scripted
//! model and the request that follows checked.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod budget;
mod feedback;
mod guard;
mod harness;
mod hooks;
mod mcp;
mod plan;
mod recovery;
mod reminders;
mod report;
mod sources;
mod tasks;
