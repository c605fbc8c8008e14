//! The attack suite of issue 9: the real `keel exec` binary, driven by a scripted model
//! (`keel-mockllm` on loopback) through hostile tool calls, once per permission mode (`ask`,
//! `auto`, `plan`) with the default sandbox; the credential and environment tables also in
//! `full`, where control files may change but credentials must stay hidden.
//!
//! Every run gets a fresh world: a fake `HOME` full of canary credentials, canary variables
//! in keel's environment, a canary folder outside the workspace (not under a temp folder), a
//! fresh git workspace and a loopback listener that records every byte. Whatever keel does
//! with a vector (runs it, refuses it, fails closed because the kernel lacks a mechanism),
//! the run must leak no canary to the model, to keel's output or to the listener, change
//! nothing outside the workspace nor any protected control file inside it, leave no
//! process behind, and leave nothing that runs when the user next uses git in the workspace
//! or reads their terminal ([`check::check`] and [`run::run_in`] list the assertions).
//!
//! Vectors are rows of data in `vectors/`, one table per class; `cases.rs` turns each table
//! into one test per mode so nextest spreads them over the cores. `escape.rs` holds the
//! scenarios that are not one run: the two-run escape through project files, a project file
//! linked to one trusted elsewhere, and the processes that must die with keel.
//!
//! `KEEL_ATTACK_BIN` runs the suite against another keel binary; `KEEL_ATTACK_ONLY=id,id`
//! runs only those rows; `KEEL_ATTACK_KEEP=1` keeps every run's folder for inspection.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod canary;
mod cases;
mod check;
mod escape;
mod keel;
mod listener;
mod plans;
mod procs;
mod run;
mod vectors;
mod world;
