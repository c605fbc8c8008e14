//! `/goal`, the user's handle on a session's goal:
//!
//! - `/goal` shows it;
//! - `/goal OBJECTIVE` sets (or replaces) it and starts its first turn; options may come
//!   first: `/goal budget=50K turns=20 seconds=30m verify=evaluator OBJECTIVE`;
//! - `/goal budget=50K` (and `turns=`, `seconds=`, `verify=`) alone change the goal in force;
//! - `/goal pause`, `/goal resume` (starts the next turn), `/goal clear`.
//!
//! A command that would start a turn while one runs only changes the goal: the running
//! turn's end continues it.

use std::sync::Arc;

use async_trait::async_trait;
use keel_protocol::{CommandInfo, SessionId};
use keel_runtime::extension::{CommandError, CommandSource, Expansion};

use super::GoalError;
use super::book::Book;
use super::prompts;
use super::state::{Goal, NewGoal, Verification};

/// The command's name, typed as `/goal`.
pub const COMMAND: &str = "goal";

/// One change an option asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Setting {
    Budget(u64),
    Turns(u32),
    Seconds(u64),
    Verify(Verification),
}

/// What `/goal ARGUMENTS` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Request {
    Show,
    Pause,
    Resume,
    Clear,
    /// Options alone: change the goal in force.
    Change(Vec<Setting>),
    /// Options and an objective: a new goal.
    Create(Vec<Setting>, String),
}

/// A token count: `50000`, `50K`, `1.5M` (the protocol's one parser).
pub use keel_protocol::parse_token_count as parse_tokens;

/// Seconds: `90`, `90s`, `30m`, `2h`.
fn parse_seconds(text: &str) -> Option<u64> {
    let text = text.trim();
    let (number, scale) = match text.char_indices().last()? {
        (at, 's') => (&text[..at], 1),
        (at, 'm') => (&text[..at], 60),
        (at, 'h') => (&text[..at], 3_600),
        _ => (text, 1),
    };
    number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .filter(|n| *n > 0)
}

/// An option `/goal` does not take as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{word}`: {hint}")]
struct BadSetting {
    /// The option as typed.
    word: String,
    /// What it takes.
    hint: &'static str,
}

/// One `key=value` option, `None` when `word` is not one (it starts the objective).
fn setting(word: &str) -> Option<Result<Setting, BadSetting>> {
    let (key, value) = word.split_once('=')?;
    let bad = |hint: &'static str| {
        Err(BadSetting {
            word: word.to_owned(),
            hint,
        })
    };
    Some(match key {
        "budget" => parse_tokens(value)
            .map(Setting::Budget)
            .map_or_else(|| bad("use a token count such as 50000, 50K or 1.5M"), Ok),
        "turns" => value
            .parse::<u32>()
            .ok()
            .filter(|n| *n > 0)
            .map(Setting::Turns)
            .map_or_else(|| bad("use a number of turns above zero"), Ok),
        "seconds" => parse_seconds(value)
            .map(Setting::Seconds)
            .map_or_else(|| bad("use seconds such as 600, 90s, 30m or 2h"), Ok),
        "verify" => Verification::parse(value)
            .map(Setting::Verify)
            .map_or_else(|| bad("use none, evaluator or subagent"), Ok),
        _ => return None,
    })
}

fn parse(arguments: &str) -> Result<Request, BadSetting> {
    let arguments = arguments.trim();
    match arguments {
        "" => return Ok(Request::Show),
        "pause" => return Ok(Request::Pause),
        "resume" => return Ok(Request::Resume),
        "clear" => return Ok(Request::Clear),
        _ => {}
    }
    let mut settings = Vec::new();
    let mut rest = arguments;
    while let Some(word) = rest.split_whitespace().next() {
        let Some(parsed) = setting(word) else {
            break;
        };
        settings.push(parsed?);
        rest = rest.trim_start()[word.len()..].trim_start();
    }
    if rest.is_empty() {
        Ok(Request::Change(settings))
    } else {
        Ok(Request::Create(settings, rest.to_owned()))
    }
}

fn apply(goal: &mut Goal, settings: &[Setting]) -> Result<(), GoalError> {
    for setting in settings {
        match *setting {
            Setting::Budget(tokens) => goal.set_budget(tokens)?,
            Setting::Turns(turns) => goal.limits.max_turns = Some(turns),
            Setting::Seconds(seconds) => goal.limits.max_active_seconds = Some(seconds),
            Setting::Verify(mode) => goal.verification = mode,
        }
    }
    Ok(())
}

/// The `/goal` command.
pub(crate) struct GoalCommand {
    pub(crate) book: Arc<Book>,
}

#[async_trait]
impl CommandSource for GoalCommand {
    fn commands(&self) -> Vec<CommandInfo> {
        vec![CommandInfo {
            name: COMMAND.to_owned(),
            description: "set, show, pause, resume or clear the session's goal".to_owned(),
            argument_hint: Some("[objective | pause | resume | clear | budget=50K]".to_owned()),
            source: super::GOALS.to_owned(),
        }]
    }

    async fn run(
        &self,
        session: &SessionId,
        name: &str,
        arguments: &str,
    ) -> Option<Result<Expansion, CommandError>> {
        if name != COMMAND {
            return None;
        }
        Some(self.goal(session, arguments).await)
    }
}

impl GoalCommand {
    async fn goal(&self, session: &SessionId, arguments: &str) -> Result<Expansion, CommandError> {
        let request = parse(arguments).map_err(|e| CommandError::Usage(e.to_string()))?;
        let text = CommandError::failed;
        match request {
            Request::Show => Ok(Expansion::Reply(
                match self.book.load(session).await.map_err(text)? {
                    Some(goal) => goal.describe(),
                    None => "No goal is set. `/goal OBJECTIVE` sets one.".to_owned(),
                },
            )),
            Request::Clear => {
                let (_, before) = self
                    .book
                    .update(session, |current| Ok((None, current)))
                    .await
                    .map_err(text)?;
                match before {
                    Some(goal) => {
                        self.book.announce_cleared(session, &goal.objective);
                        Ok(Expansion::Reply("Goal cleared.".to_owned()))
                    }
                    None => Ok(Expansion::Reply("No goal was set.".to_owned())),
                }
            }
            Request::Pause => {
                let goal = self.change(session, Goal::pause).await.map_err(text)?;
                Ok(Expansion::Reply(format!(
                    "Goal paused; `/goal resume` goes on.\n{}",
                    goal.describe()
                )))
            }
            Request::Resume => {
                let goal = self.change(session, Goal::resume).await.map_err(text)?;
                Ok(self.start(session, &goal, prompts::continuation(&goal)))
            }
            Request::Change(settings) => {
                let goal = self
                    .change(session, move |goal| apply(goal, &settings))
                    .await
                    .map_err(text)?;
                Ok(Expansion::Reply(goal.describe()))
            }
            Request::Create(settings, objective) => {
                let mut goal = Goal::create(NewGoal {
                    objective,
                    limits: self.book.defaults(),
                    verification: None,
                })
                .map_err(text)?;
                apply(&mut goal, &settings).map_err(text)?;
                let new = goal.clone();
                self.book
                    .update(session, move |_| Ok((Some(new), ())))
                    .await
                    .map_err(text)?;
                self.book.announce(session, None, &goal);
                Ok(self.start(session, &goal, prompts::first_turn(&goal)))
            }
        }
    }

    /// Changes the goal in force with `change` and tells front ends.
    async fn change<F>(&self, session: &SessionId, change: F) -> Result<Goal, GoalError>
    where
        F: FnOnce(&mut Goal) -> Result<(), GoalError> + Send + 'static,
    {
        let (goal, ()) = self
            .book
            .update(session, move |current| {
                let mut goal = current.ok_or(GoalError::NoGoal)?;
                change(&mut goal)?;
                Ok((Some(goal), ()))
            })
            .await?;
        let goal = goal.ok_or(GoalError::NoGoal)?;
        self.book.announce(session, None, &goal);
        Ok(goal)
    }

    /// A turn with `prompt` for the goal, or, while a turn runs, a reply saying that turn's
    /// end goes on.
    fn start(&self, session: &SessionId, goal: &Goal, prompt: String) -> Expansion {
        if self.book.is_busy(session) {
            Expansion::Reply(format!(
                "{}\nA turn is running: the goal goes on when it ends.",
                goal.describe()
            ))
        } else {
            self.book.starting(session);
            Expansion::Prompt(prompt)
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn token_counts_take_k_and_m() {
        assert_eq!(parse_tokens("50K"), Some(50_000));
        assert_eq!(parse_tokens("50k"), Some(50_000));
        assert_eq!(parse_tokens("1.5M"), Some(1_500_000));
        assert_eq!(parse_tokens("12345"), Some(12_345));
        for bad in ["", "K", "0", "-5K", "5G", "1e9", "0.0001K"] {
            assert_eq!(parse_tokens(bad), None, "{bad}");
        }
    }

    #[test]
    fn arguments_read_as_requests() {
        assert_eq!(parse(""), Ok(Request::Show));
        assert_eq!(parse(" pause "), Ok(Request::Pause));
        assert_eq!(parse("resume"), Ok(Request::Resume));
        assert_eq!(parse("clear"), Ok(Request::Clear));
        assert_eq!(
            parse("budget=50K"),
            Ok(Request::Change(vec![Setting::Budget(50_000)]))
        );
        assert_eq!(
            parse("budget=2k turns=3 seconds=5m verify=none fix the tests now"),
            Ok(Request::Create(
                vec![
                    Setting::Budget(2_000),
                    Setting::Turns(3),
                    Setting::Seconds(300),
                    Setting::Verify(Verification::None)
                ],
                "fix the tests now".into()
            ))
        );
        assert_eq!(
            parse("pause the build when x=1"),
            Ok(Request::Create(
                Vec::new(),
                "pause the build when x=1".into()
            ))
        );
        assert!(
            parse("budget=lots fix it")
                .unwrap_err()
                .to_string()
                .contains("budget=lots")
        );
        assert!(parse("verify=maybe").is_err());
    }
}
