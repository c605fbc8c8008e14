//! Behaviour tests of context management.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod budget;
mod history;
