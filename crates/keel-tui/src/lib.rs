//! keel's interactive terminal front end (DESIGN §15): app state from session events and keys,
//! rendering, and the terminal loop. It submits operations through the conversation contract,
//! renders session events, and keeps no engine logic and no timers that guess state.
//! It imports only keel-protocol and keel-runtime.
#![forbid(unsafe_code)]

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
pub mod outside;
pub mod prompts;
pub mod question;
pub mod render;
mod signal;
pub mod slash;
pub mod term;
pub mod visible;
pub mod wrap;

pub use app::{App, Info};
pub use term::{Ended, Launch, TuiError, run};
