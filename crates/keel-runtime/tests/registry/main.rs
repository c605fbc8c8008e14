//! Every rule of the extension registry (DESIGN §3) and capability leases (§10), failure
//! paths included, against the registry alone (no model, no store).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod rules;
mod support;
