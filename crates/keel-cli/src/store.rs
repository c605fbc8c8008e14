//! Where keel keeps sessions, and the store errors a user can fix by typing something else.
//!
//! Sessions live in `$KEEL_HOME/sessions.db`; `KEEL_SESSIONS_DB` names another file, so tests
//! and scripts can keep their sessions apart without moving the configuration.
//!
//! Stored sessions hold whatever the model and its tools saw, so they are private to their
//! user: `KEEL_HOME` and every folder keel creates for them are 0700 (created so, and an
//! existing `KEEL_HOME` is tightened), and keel-store keeps the database files 0600. A folder
//! the user chose for `KEEL_SESSIONS_DB` is the user's business and is never changed.

use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use keel_store::{Durability, Execution, OpenOptions, Store, StoreError};

use crate::config;

/// File name of the session database inside `$KEEL_HOME`.
pub const DB_FILE_NAME: &str = "sessions.db";

/// Mode of `KEEL_HOME` and of the folders keel creates for sessions.
pub const PRIVATE_DIR_MODE: u32 = 0o700;

/// The session database's path: `KEEL_SESSIONS_DB`, else `$KEEL_HOME/sessions.db`.
pub fn db_path() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("KEEL_SESSIONS_DB").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let home =
        config::keel_home().context("cannot find the session database: set KEEL_HOME (or HOME)")?;
    Ok(home.join(DB_FILE_NAME))
}

/// Opens (creating when needed) the session database; [`Durability::Full`] syncs every commit
/// to disk (SQLite `synchronous=FULL`) instead of only at checkpoints.
///
/// The SQLite work runs in place: every CLI command is one-shot on a current-thread runtime
/// that waits for each store call with nothing else to do, so a writer thread would only add
/// two thread wake-ups per call.
pub async fn open(durability: Durability) -> anyhow::Result<Store> {
    let path = db_path()?;
    if let Some(home) = config::keel_home().filter(|home| home.is_dir()) {
        make_private_dir(&home);
    }
    // Only folders that do not exist yet are created (0700); an existing one the user chose
    // for KEEL_SESSIONS_DB is left as it is.
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_private_dirs(parent)?;
    }
    let options = OpenOptions {
        durability,
        execution: Execution::InPlace,
    };
    Store::open(&path, options).await.map_err(|error| {
        // The store's own message names the file when it is at fault.
        let named = matches!(
            error,
            StoreError::DatabaseCorrupt { .. } | StoreError::File { .. }
        );
        let error = anyhow::Error::new(error);
        if named {
            error
        } else {
            error.context(format!(
                "cannot open the session database {}",
                path.display()
            ))
        }
    })
}

/// Creates `dir` and any missing folders above it, each 0700 from the start.
fn create_private_dirs(dir: &Path) -> anyhow::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(PRIVATE_DIR_MODE)
        .create(dir)
        .with_context(|| format!("cannot create {}", dir.display()))
}

/// Removes group and other access from keel's own folder. Never the home folder or `/`,
/// whatever `KEEL_HOME` says: those are not keel's to change. A folder keel may not change
/// (another user's) is reported and left alone rather than stopping the run.
fn make_private_dir(dir: &Path) {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    if dir.parent().is_none() || home.as_deref() == Some(dir) {
        return;
    }
    let tightened = std::fs::metadata(dir).and_then(|meta| {
        let mode = meta.permissions().mode();
        if mode & 0o077 == 0 {
            return Ok(());
        }
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode & 0o7777 & !0o077))
    });
    if let Err(error) = tightened {
        eprintln!(
            "keel: warning: cannot make {} private (chmod 700): {error}",
            dir.display()
        );
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
