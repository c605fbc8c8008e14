//! Where keel keeps sessions, and opening that store privately.
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

use keel_store::StoreError;
/// How the store is opened, and the handle a runtime starts on.
pub use keel_store::{Durability, Execution, OpenOptions, Store};

use crate::error::RuntimeError;
use crate::settings::keel_home;

/// File name of the session database inside `$KEEL_HOME`.
pub const DB_FILE_NAME: &str = "sessions.db";

/// Mode of `KEEL_HOME` and of the folders keel creates for sessions.
pub const PRIVATE_DIR_MODE: u32 = 0o700;

/// The variable naming another session database.
pub const SESSIONS_DB_VARIABLE: &str = "KEEL_SESSIONS_DB";

/// The session database's path: `KEEL_SESSIONS_DB`, else `$KEEL_HOME/sessions.db`.
pub fn db_path() -> Result<PathBuf, RuntimeError> {
    if let Some(path) = std::env::var_os(SESSIONS_DB_VARIABLE).filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let home = keel_home().ok_or_else(|| {
        RuntimeError::Usage("cannot find the session database: set KEEL_HOME (or HOME)".into())
    })?;
    Ok(home.join(DB_FILE_NAME))
}

/// The database path when it was moved out of `$KEEL_HOME` (its files must then be hidden
/// from commands explicitly); `None` when it is in `$KEEL_HOME`, which is hidden already.
pub fn db_outside_home() -> Option<PathBuf> {
    std::env::var_os(SESSIONS_DB_VARIABLE)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// Opens (creating when needed) the session database with `options`.
pub async fn open(options: OpenOptions) -> Result<Store, RuntimeError> {
    let path = db_path()?;
    if let Some(home) = keel_home().filter(|home| home.is_dir()) {
        make_private_dir(&home);
    }
    // Only folders that do not exist yet are created (0700); an existing one the user chose
    // for KEEL_SESSIONS_DB is left as it is.
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_private_dirs(parent)?;
    }
    Store::open(&path, options).await.map_err(|error| {
        // The store's own message names the file when it is at fault.
        match error {
            StoreError::DatabaseCorrupt { .. } | StoreError::File { .. } => error.into(),
            other => RuntimeError::StoreAt {
                path: path.clone(),
                source: other,
            },
        }
    })
}

/// Creates `dir` and any missing folders above it, each 0700 from the start.
fn create_private_dirs(dir: &Path) -> Result<(), RuntimeError> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(PRIVATE_DIR_MODE)
        .create(dir)
        .map_err(|e| RuntimeError::Usage(format!("cannot create {}: {e}", dir.display())))
}

/// Removes group and other access from keel's own folder. Never the home folder or `/`,
/// whatever `KEEL_HOME` says: those are not keel's to change. A folder keel may not change
/// (another user's) is left alone rather than stopping the run.
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
        tracing::warn!("cannot make {} private (chmod 700): {error}", dir.display());
    }
}

/// The folder that holds the session folders: `sessions/` beside the session database
/// `db` (`$KEEL_HOME/sessions` by default).
pub fn sessions_dir(db: &Path) -> PathBuf {
    let parent = db
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    std::path::absolute(&parent)
        .unwrap_or(parent)
        .join(SESSIONS_DIR)
}

/// Name of the folder of session folders.
pub const SESSIONS_DIR: &str = "sessions";

/// A session's own folder (artifacts, the session report) beside the database `db`. It is
/// not created here; whoever writes in it creates it private.
pub fn session_dir(db: &Path, session: &keel_protocol::SessionId) -> PathBuf {
    sessions_dir(db).join(session.as_str())
}

/// Removes a deleted session's folder; a folder that is not there is no error. Only a real
/// folder is removed (never what a link points to).
pub fn remove_session_dir(
    db: &Path,
    session: &keel_protocol::SessionId,
) -> Result<(), RuntimeError> {
    let dir = session_dir(db, session);
    let removed = match std::fs::symlink_metadata(&dir) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(&dir),
        Ok(_) => std::fs::remove_file(&dir),
        Err(_) => Ok(()),
    };
    removed.map_err(|e| RuntimeError::Usage(format!("cannot remove {}: {e}", dir.display())))
}

/// Creates (0700, each missing folder too) a folder keel keeps session files in, refusing
/// one that is a link or open to others: keel writes there what the model saw.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(PRIVATE_DIR_MODE)
        .create(dir)?;
    let meta = std::fs::symlink_metadata(dir)?;
    // The folder must be this user's.
    if !meta.is_dir() || meta.mode() & 0o077 != 0 || meta.uid() != keel_tools::env::own_uid() {
        return Err(std::io::Error::other(format!(
            "{} is not a private folder of this user's (a folder, mode 700)",
            dir.display()
        )));
    }
    Ok(())
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
