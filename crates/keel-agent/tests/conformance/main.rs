//! Conformance suite for the agent loop, the Agent shell and the turn runner.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs, dead_code)]

mod abort;
mod additions;
mod batch;
mod exits;
mod props;
mod robustness;
mod runner;
mod runner_hooks;
mod runner_support;
mod steering;
mod support;
