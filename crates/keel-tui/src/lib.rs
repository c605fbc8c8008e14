//! keel's interactive terminal front end (SPEC §15): an inline viewport above the
//! terminal's own scrollback (or the alternate screen with `--fullscreen`), driven only
//! through the runtime's conversation contract: it submits operations and renders the
//! session's events, and holds no engine logic.

pub mod app;
pub mod cells;
pub mod composer;
pub mod diff;
pub mod files;
pub mod goal;
pub mod highlight;
pub mod keys;
pub mod markdown;
pub mod notices;
pub mod render;
mod signal;
pub mod slash;
pub mod term;
pub mod wrap;

pub use app::{App, Info};
pub use term::{Ended, Launch, TuiError, run};
