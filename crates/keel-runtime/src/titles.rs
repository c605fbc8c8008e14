//! Model-written session titles: once a session's first turn ended, a front end may ask for
//! a short title (`TitleSession`). One small call, off every turn's path; the first-line
//! title stays when the call fails, when the user chose a title, or offline.

use std::sync::Arc;
use std::time::Duration;

use keel_llm::{LlmRequest, RequestOptions};
use keel_protocol::{Message, SessionId, StopReason};
use tokio_util::sync::CancellationToken;

use crate::error::RuntimeError;
use crate::lifecycle::{SessionUpdate, Sessions};
use crate::sessions::title_of;

/// Most tokens the title call may write.
const TITLE_TOKENS: u32 = 32;
/// How long the title call may take.
const TITLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest model-written title kept, in characters.
const TITLE_CHARS: usize = 60;
/// How much of the prompt and of the answer the call is shown, in characters.
const SHOWN_CHARS: usize = 2_000;

/// The title call's instructions. Its opening marks the call for the scripted provider
/// (`keel_llm::scripted::TITLE_REQUEST`) and keel's mock model server
/// (`keel_mockllm::TITLE_REQUEST`), which answer it apart from a test's script.
const SYSTEM: &str = "You name conversations between a programmer and a coding assistant. \
Reply with a title of at most six words that says what the programmer wants done, in the \
language they wrote in. No quotes, no ending punctuation, nothing but the title.";

impl Sessions {
    /// Starts the title call for `session` (open in this runtime); the title changes when
    /// the answer comes.
    pub(crate) fn title_by_model(&self, session: &SessionId) -> Result<(), RuntimeError> {
        let slot = self.runtime.slot(session)?;
        let (model, title) = {
            let state = slot.lock();
            (state.model.clone(), state.record.title.clone())
        };
        let stream =
            keel_llm::compose_stream_fn(model.stream.clone(), &self.runtime.inner.runner.stream);
        let sessions = self.clone();
        let session = session.clone();
        tokio::spawn(async move {
            let Ok(history) = sessions.runtime.inner.store.history(&session).await else {
                return;
            };
            let messages = history.iter().map(|e| &e.message);
            let Some((prompt, answer)) = first_exchange(messages) else {
                return;
            };
            // A title the user chose (or one already written) stays.
            if title != title_of(&prompt) {
                return;
            }
            let request = LlmRequest {
                model: Arc::new(model.spec.clone()),
                system_prompt: Arc::from(SYSTEM),
                messages: Arc::new(vec![Arc::new(Message::user_text(format!(
                    "The programmer wrote:\n{}\n\nThe assistant answered:\n{}",
                    clip(&prompt),
                    clip(&answer)
                )))]),
                tools: Arc::from(Vec::new()),
                options: RequestOptions {
                    max_tokens: Some(TITLE_TOKENS),
                    ..RequestOptions::default()
                },
            };
            let cancel = CancellationToken::new();
            let asked = keel_llm::collect(stream.as_ref(), request, cancel.clone());
            let Ok(answer) = tokio::time::timeout(TITLE_TIMEOUT, asked).await else {
                cancel.cancel();
                return;
            };
            if matches!(answer.stop_reason, StopReason::Error | StopReason::Aborted) {
                return;
            }
            let Some(written) = clean(&answer.text()) else {
                return;
            };
            // The user may have renamed it meanwhile.
            let Ok(slot) = sessions.runtime.slot(&session) else {
                return;
            };
            if slot.lock().record.title != title {
                return;
            }
            let update = SessionUpdate {
                title: Some(written),
                ..SessionUpdate::default()
            };
            if let Err(error) = sessions.update_session(&session, update).await {
                tracing::warn!(%session, %error, "cannot store the written title");
            }
        });
        Ok(())
    }
}

/// The first prompt the user typed and the first answer to it.
fn first_exchange<'a>(
    mut messages: impl Iterator<Item = &'a Message> + Clone,
) -> Option<(String, String)> {
    let prompt = messages.clone().find_map(|m| match m {
        Message::User(user) if !user.hidden => Some(user.joined_text()),
        _ => None,
    })?;
    let answer = messages
        .find_map(|m| {
            m.as_assistant()
                .map(keel_protocol::AssistantMessage::text)
                .filter(|t| !t.trim().is_empty())
        })
        .unwrap_or_default();
    Some((prompt, answer))
}

fn clip(text: &str) -> String {
    let mut clipped: String = text.chars().take(SHOWN_CHARS).collect();
    if text.chars().count() > SHOWN_CHARS {
        clipped.push('…');
    }
    clipped
}

/// The model's answer as a title: its first line, without quotes, marks or an ending
/// stop; `None` when nothing is left.
fn clean(answer: &str) -> Option<String> {
    let line = answer.lines().map(str::trim).find(|l| !l.is_empty())?;
    let line = line
        .trim_start_matches(['#', '*', '-', ' '])
        .trim_start_matches("Title:")
        .trim_start_matches("title:")
        .trim()
        .trim_matches(['"', '\'', '`', '*', '“', '”'])
        .trim_end_matches(['.', '!', ' '])
        .trim();
    let visible: String = line
        .chars()
        .filter(|c| crate::sessions::titled(*c))
        .collect();
    let title: String = visible.chars().take(TITLE_CHARS).collect();
    (!title.trim().is_empty()).then(|| title.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_instructions_open_as_the_test_models_expect() {
        assert!(SYSTEM.starts_with(keel_llm::scripted::TITLE_REQUEST));
    }

    #[test]
    fn a_written_title_is_one_clean_line() {
        assert_eq!(
            clean("\"Fix the failing parser test.\"\nmore").as_deref(),
            Some("Fix the failing parser test")
        );
        assert_eq!(
            clean("## Title: Add CSV export").as_deref(),
            Some("Add CSV export")
        );
        assert_eq!(clean("  \n\"\"\n").as_deref(), None);
        assert_eq!(clean("a\u{1b}[31mb\u{202E}c").as_deref(), Some("a[31mbc"));
        assert_eq!(
            clean(&"x".repeat(200)).map(|t| t.chars().count()),
            Some(TITLE_CHARS)
        );
    }
}
