//! keel's sandbox and process control.
//!
//! Every program keel starts goes through [`spawn`]: a [`Program`] (what to run) and a
//! [`Confinement`] (how far it is held in) go in, a [`Child`] comes out, which keel waits
//! for and whose whole process tree it can kill. How a child is made stays inside this
//! crate, so it can change without touching a caller.
//!
//! - [`Confinement::Group`]: a process group of its own (hooks, commands with full access).
//! - [`Confinement::Contained`]: pid 1 of a pid namespace of its own that dies with keel,
//!   so nothing it starts outlives it (MCP servers: they hold secrets, so they never share
//!   the namespaces of the model's commands).
//! - [`Confinement::Sandbox`]: the model's commands, under a [`Policy`]: namespaces that hide
//!   credentials, sockets and keel itself, read-only control files, a private `/tmp`, and
//!   Landlock for writes and the network.
//!
//! It also gives a process's start-up pages back once it is under way
//! ([`release_clean_pages`]).
//!
//! This is the one crate of keel with `unsafe` code (every other crate forbids it, and
//! `scripts/check-doors` checks that they do): system calls std has no safe wrapper for, and the steps a child takes
//! between fork and exec.

mod child;
mod contain;
mod masks;
mod mounts;
mod pages;
mod policy;
mod prepare;
mod process;
mod rules;
mod spawner;
mod support;
pub mod sys;

pub use pages::release_clean_pages;
pub use policy::{NetworkNamespace, Policy, SandboxError};
pub use prepare::command_tmp;
pub use process::{Child, Confinement, Program, SpawnError, Stream, Tree, TreeGuard, spawn};
pub use spawner::{private_network, spawner_entry, spawner_pid};
pub use support::{
    NamespaceSupport, Support, make_undumpable, namespaces_setting, probed, support,
};

/// The variable that turns the namespace layer off (`off`), for machines where it
/// misbehaves; the default is `auto`. Turning it off never loosens `read-only`, which then
/// refuses to run.
pub const NAMESPACES_VARIABLE: &str = "KEEL_SANDBOX_NAMESPACES";
