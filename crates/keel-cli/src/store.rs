//! Where keel keeps sessions, and the store errors a user can fix by typing something else.
//!
//! Sessions live in `$KEEL_HOME/sessions.db`; `KEEL_SESSIONS_DB` names another file, so tests
//! and scripts can keep their sessions apart without moving the configuration.

use std::path::PathBuf;

use anyhow::Context as _;
use keel_store::{Durability, Store, StoreError};

use crate::config;

/// File name of the session database inside `$KEEL_HOME`.
pub const DB_FILE_NAME: &str = "sessions.db";

/// The session database's path: `KEEL_SESSIONS_DB`, else `$KEEL_HOME/sessions.db`.
pub fn db_path() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("KEEL_SESSIONS_DB").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let home =
        config::keel_home().context("cannot find the session database: set KEEL_HOME (or HOME)")?;
    Ok(home.join(DB_FILE_NAME))
}

/// Opens (creating when needed) the session database; `durable` syncs every commit to disk
/// (SQLite `synchronous=FULL`) instead of only at checkpoints.
pub async fn open(durable: bool) -> anyhow::Result<Store> {
    let path = db_path()?;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    let durability = if durable {
        Durability::Full
    } else {
        Durability::Normal
    };
    Store::open(&path, durability)
        .await
        .with_context(|| format!("cannot open the session database {}", path.display()))
}

/// Flushes the session database's write-ahead log to disk (one fsync), so what this
/// process committed survives a power cut and not only a crash. Closing the database does
/// not checkpoint the log (that would copy the whole session on every run), so this is how a
/// finished run makes its history durable.
pub fn sync_log() -> anyhow::Result<()> {
    let mut wal = db_path()?.into_os_string();
    wal.push("-wal");
    match std::fs::OpenOptions::new().write(true).open(&wal) {
        Ok(file) => file
            .sync_data()
            .with_context(|| format!("cannot sync {}", PathBuf::from(&wal).display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot open {}", PathBuf::from(&wal).display())),
    }
}

/// Whether a store error is about what the user typed (an unknown, ambiguous or too short id,
/// a revision that does not exist) rather than a failure of the store.
pub fn is_usage_error(error: &StoreError) -> bool {
    matches!(
        error,
        StoreError::NotFound { .. } | StoreError::Ambiguous { .. } | StoreError::PrefixTooShort(_)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrong_ids_are_usage_errors_and_failures_are_not() {
        let ambiguous = StoreError::Ambiguous {
            prefix: "s-ab".into(),
            candidates: vec!["s-ab1".into(), "s-ab2".into()],
        };
        assert!(is_usage_error(&ambiguous));
        assert!(is_usage_error(&StoreError::PrefixTooShort("ab".into())));
        assert!(!is_usage_error(&StoreError::Worker("gone".into())));
    }
}
