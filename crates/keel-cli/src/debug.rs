//! `keel debug`: looking inside what keel did. `replay-guard` runs the runaway guard over a
//! stored session and prints, for each step of each turn, the signals it raised and how
//! far each had run, and where it would have observed or reminded.

use std::io::Write as _;
use std::sync::Arc;

use anyhow::Context as _;
use keel_protocol::{Message, TurnId};

use crate::errors::runtime_error;

/// Arguments of `keel debug`.
#[derive(Debug, clap::Args)]
pub struct DebugArgs {
    #[command(subcommand)]
    command: DebugCommand,
}

#[derive(Debug, clap::Subcommand)]
enum DebugCommand {
    /// Replay the runaway guard over a stored session: each step's signals and counts.
    ReplayGuard {
        /// Session id or unique prefix.
        session: String,
        /// Reminder threshold (at least 3, the default).
        #[arg(long, value_name = "N")]
        threshold: Option<u32>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `keel debug …`.
pub async fn run(args: DebugArgs) -> anyhow::Result<()> {
    let DebugCommand::ReplayGuard {
        session,
        threshold,
        json,
    } = args.command;
    let store = keel_runtime::storage::open(keel_store::OpenOptions {
        durability: keel_store::Durability::Normal,
        execution: keel_store::Execution::InPlace,
    })
    .await
    .map_err(runtime_error)?;
    let id = store.resolve_session(&session).await?;
    let threshold = threshold.unwrap_or(keel_runtime::settings::harness::GUARD_MIN_THRESHOLD);
    let turns = turns_of(&store, &id).await?;
    let replayed = keel_extensions::guard::replay::replay(&turns, threshold)
        .context("no randomness for the guard's key")?;
    let out = if json {
        serde_json::to_string_pretty(&replayed)? + "\n"
    } else {
        text(&replayed, threshold.max(3))
    };
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
        .context("cannot write to standard output")
}

/// The session's history split by the turn that committed each message.
async fn turns_of(
    store: &keel_store::Store,
    id: &keel_protocol::SessionId,
) -> anyhow::Result<Vec<(Option<String>, Vec<Arc<Message>>)>> {
    let commits = store.commit_turns(id).await?;
    let turn_of = |revision: u64| -> Option<TurnId> {
        commits
            .iter()
            .find(|(r, _)| *r == revision)
            .and_then(|(_, t)| t.clone())
    };
    let mut turns: Vec<(Option<String>, Vec<Arc<Message>>)> = Vec::new();
    for entry in store.history(id).await? {
        let turn = turn_of(entry.revision).map(|t| t.to_string());
        match turns.last_mut() {
            Some((last, messages)) if *last == turn => messages.push(Arc::new(entry.message)),
            _ => turns.push((turn, vec![Arc::new(entry.message)])),
        }
    }
    Ok(turns)
}

fn text(turns: &[keel_extensions::guard::replay::ReplayedTurn], threshold: u32) -> String {
    let mut out = format!("runaway guard replay (reminder threshold {threshold})\n");
    for turn in turns {
        out.push_str(&format!(
            "\nturn {}: {} steps with tool calls\n",
            turn.turn_id.as_deref().unwrap_or("(outside a turn)"),
            turn.steps.len()
        ));
        for step in &turn.steps {
            let signals: Vec<String> = step
                .verdict
                .counts
                .iter()
                .map(|c| format!("{}={}", c.signal.name(), c.count))
                .collect();
            let mut line = format!(
                "  step {:>3}  {}{}  {}",
                step.step,
                step.tools.join(","),
                if step.errors > 0 {
                    format!(" ({} failed)", step.errors)
                } else {
                    String::new()
                },
                if signals.is_empty() {
                    "-".to_owned()
                } else {
                    signals.join(" ")
                }
            );
            if !step.verdict.observed.is_empty() {
                let observed: Vec<&str> = step
                    .verdict
                    .observed
                    .iter()
                    .map(|c| c.signal.name())
                    .collect();
                line.push_str(&format!("  observe: {}", observed.join(",")));
            }
            if let Some(remind) = &step.verdict.remind {
                line.push_str(&format!("  REMIND: {}", remind.signal.name()));
            }
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}
