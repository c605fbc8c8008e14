//! The conversation contract, driven only through typed operations against the scripted
//! model: steering and follow-ups, aborts at every stage, concurrent sessions, permission
//! answers, the queue, and the deferred contract.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod events;
mod harness;
mod history_ops;
mod ingress;
mod mentions;
mod permissions;
mod queries;
mod questions;
mod quiet;
mod sessions;
mod shell;
