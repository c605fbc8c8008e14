//! The async face of what extensions keep per session (`sql/state.rs`): named values and
//! the reminders waiting for a session's next turn.

use keel_protocol::{SessionId, TurnId};

use crate::error::Result;
use crate::model::{SessionRecord, SessionReminder};
use crate::sql::{self, Unreadable};
use crate::store::Store;

impl Store {
    /// The session's value under `key`, when one is stored.
    pub async fn session_state(
        &self,
        session: &SessionId,
        key: &str,
    ) -> Result<Option<serde_json::Value>> {
        let session = session.clone();
        let key = key.to_owned();
        self.call(move |conn| sql::get_state(conn, session.as_str(), &key))
            .await
    }

    /// Stores `value` under `key` for the session.
    pub async fn set_session_state(
        &self,
        session: &SessionId,
        key: &str,
        value: serde_json::Value,
    ) -> Result<()> {
        let session = session.clone();
        let key = key.to_owned();
        self.call(move |conn| sql::set_state(conn, session.as_str(), &key, &value))
            .await
    }

    /// Replaces the session's value under `key` with what `update` makes of it (`None` when
    /// there is none), in one transaction, and returns it. `update` runs where the store's
    /// work runs and says `Err` for a value it cannot read, which changes nothing.
    pub async fn update_session_state<F>(
        &self,
        session: &SessionId,
        key: &str,
        update: F,
    ) -> Result<serde_json::Value>
    where
        F: FnOnce(Option<serde_json::Value>) -> std::result::Result<serde_json::Value, Unreadable>
            + Send
            + 'static,
    {
        let session = session.clone();
        let key = key.to_owned();
        self.call(move |conn| sql::update_state(conn, session.as_str(), &key, Box::new(update)))
            .await
    }

    /// What a turn's reminder round starts from, in one transaction: the session's value
    /// under `key` replaced by what `update` makes of it, and the reminders waiting for the
    /// session's next turn.
    pub async fn reminder_round<F>(
        &self,
        session: &SessionId,
        key: &str,
        update: F,
    ) -> Result<(serde_json::Value, Vec<SessionReminder>)>
    where
        F: FnOnce(Option<serde_json::Value>) -> std::result::Result<serde_json::Value, Unreadable>
            + Send
            + 'static,
    {
        let session = session.clone();
        let key = key.to_owned();
        self.call(move |conn| sql::reminder_round(conn, session.as_str(), &key, Box::new(update)))
            .await
    }

    /// Adds one to the session's counter under `key` and returns the new value (1 the
    /// first time).
    pub async fn bump_session_counter(&self, session: &SessionId, key: &str) -> Result<u64> {
        let value = self
            .update_session_state(session, key, |current| match current {
                None => Ok(serde_json::json!(1)),
                Some(value) => value
                    .as_u64()
                    .map(|n| serde_json::json!(n.saturating_add(1)))
                    .ok_or_else(|| format!("the counter is not a number: {value}").into()),
            })
            .await?;
        Ok(value.as_u64().unwrap_or_default())
    }

    /// Leaves a reminder for the session's next turn.
    pub async fn add_session_reminder(
        &self,
        session: &SessionId,
        source: &str,
        text: &str,
    ) -> Result<SessionReminder> {
        let session = session.clone();
        let source = source.to_owned();
        let text = text.to_owned();
        self.call(move |conn| sql::add_reminder(conn, session.as_str(), &source, &text))
            .await
    }

    /// The reminders waiting for the session's next turn, oldest first.
    pub async fn session_reminders(&self, session: &SessionId) -> Result<Vec<SessionReminder>> {
        let session = session.clone();
        self.call(move |conn| sql::session_reminders(conn, session.as_str()))
            .await
    }

    /// Claims for `turn` those of `ids` that are waiting reminders of the session (the
    /// ones its prompt carries); returns the ids claimed.
    pub async fn claim_session_reminders(
        &self,
        session: &SessionId,
        turn: &TurnId,
        ids: &[String],
    ) -> Result<Vec<String>> {
        let session = session.clone();
        let turn = turn.clone();
        let ids = ids.to_vec();
        self.call(move |conn| sql::claim_reminders(conn, session.as_str(), &turn, &ids))
            .await
    }

    /// Acknowledges what `turn` claimed, once the prompt carrying it is committed.
    pub async fn acknowledge_session_reminders(&self, turn: &TurnId) -> Result<u64> {
        let turn = turn.clone();
        self.call(move |conn| sql::acknowledge_reminders(conn, &turn))
            .await
    }

    /// Returns what `turn` claimed to waiting (its prompt was never committed).
    pub async fn release_session_reminders(&self, turn: &TurnId) -> Result<u64> {
        let turn = turn.clone();
        self.call(move |conn| sql::release_reminders(conn, &turn))
            .await
    }

    /// The sessions whose parent is `parent` (task sessions), oldest first.
    pub async fn child_sessions(&self, parent: &SessionId) -> Result<Vec<SessionRecord>> {
        let parent = parent.clone();
        self.call(move |conn| sql::child_sessions(conn, parent.as_str()))
            .await
    }
}
