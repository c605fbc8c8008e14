//! The database's own files are private to their user: the database is created 0600 before
//! SQLite opens it, and existing ones (with their write-ahead log and shared-memory index)
//! lose any group and other bits on every open.
//!
//! Creating the file ourselves closes the window in which SQLite would create it with the
//! process umask (usually 0644) and a reader could open it before a later chmod. SQLite gives
//! the `-wal`, `-shm` and `-journal` files it creates the mode of the database file, so they
//! are born 0600 too; the ones left by an older keel are tightened here. Only these files are
//! touched, never the folder they are in: that may be a folder the user chose.
//!
//! Syncing the write-ahead log lives here too: it is the one file operation on the log that
//! SQLite does not do for us (under `synchronous=NORMAL` it syncs only at checkpoints).

use std::fs::{OpenOptions, Permissions};
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use crate::error::{Result, StoreError};

/// Mode of a database file keel creates.
pub const DB_FILE_MODE: u32 = 0o600;

/// The permission bits group and other users must not have on a database file.
const NOT_PRIVATE: u32 = 0o077;

/// Files SQLite keeps beside the database.
const SIDE_FILES: [&str; 3] = ["-wal", "-shm", "-journal"];

/// SQLite's names that are not files: an in-memory database and a temporary one.
pub(crate) fn is_special(path: &Path) -> bool {
    path.as_os_str().is_empty() || path.as_os_str() == ":memory:"
}

/// The write-ahead log of the database at `path`.
fn wal_path(path: &Path) -> PathBuf {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    PathBuf::from(wal)
}

/// Syncs the database's write-ahead log to disk; nothing to do when there is none (nothing
/// written since the last checkpoint removed it, or a database that is not a file).
pub(crate) fn sync_wal(path: &Path) -> Result<()> {
    if is_special(path) {
        return Ok(());
    }
    let wal = wal_path(path);
    let synced = OpenOptions::new()
        .write(true)
        .open(&wal)
        .and_then(|file| file.sync_data());
    match synced {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(StoreError::Sync { path: wal, source }),
    }
}

/// Creates the database file private when it does not exist yet, and makes it and its
/// side files private when they do.
pub(crate) fn make_private(path: &Path) -> Result<()> {
    // `create_new` leaves an existing file alone (one another process may be creating right
    // now, or one this user may only read).
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(DB_FILE_MODE)
        .open(path)
    {
        Ok(_) => {}
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => tighten(path)?,
        Err(source) => {
            return Err(StoreError::File {
                path: path.to_path_buf(),
                source,
            });
        }
    }
    for suffix in SIDE_FILES {
        let mut side = path.as_os_str().to_owned();
        side.push(suffix);
        tighten(&PathBuf::from(side))?;
    }
    Ok(())
}

/// Removes group and other bits from `path` if it exists.
fn tighten(path: &Path) -> Result<()> {
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(StoreError::File {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let mode = meta.permissions().mode();
    if mode & NOT_PRIVATE == 0 {
        return Ok(());
    }
    match std::fs::set_permissions(path, Permissions::from_mode(mode & 0o7777 & !NOT_PRIVATE)) {
        Ok(()) => Ok(()),
        // Another user's file (a shared database): not ours to change, and SQLite decides
        // whether this process may use it.
        Err(error) if error.kind() == std::io::ErrorKind::PermissionDenied => {
            tracing::warn!(path = %path.display(), %error, "cannot make the database file private");
            Ok(())
        }
        Err(source) => Err(StoreError::File {
            path: path.to_path_buf(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_new_database_is_created_private_and_old_files_are_tightened() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("new.db");
        make_private(&db).unwrap();
        assert_eq!(mode(&db), 0o600);

        let old = dir.path().join("old.db");
        let wal = dir.path().join("old.db-wal");
        let shm = dir.path().join("old.db-shm");
        for (file, bits) in [(&old, 0o644), (&wal, 0o664), (&shm, 0o640)] {
            std::fs::write(file, b"").unwrap();
            std::fs::set_permissions(file, Permissions::from_mode(bits)).unwrap();
        }
        make_private(&old).unwrap();
        assert_eq!((mode(&old), mode(&wal), mode(&shm)), (0o600, 0o600, 0o600));
        // A stricter mode stays as it is, and the folder is not touched.
        std::fs::set_permissions(&old, Permissions::from_mode(0o400)).unwrap();
        std::fs::set_permissions(dir.path(), Permissions::from_mode(0o755)).unwrap();
        make_private(&old).unwrap();
        assert_eq!((mode(&old), mode(dir.path())), (0o400, 0o755));
    }

    #[test]
    fn syncing_a_missing_log_or_a_memory_database_is_nothing_to_do() {
        let dir = tempfile::tempdir().unwrap();
        sync_wal(&dir.path().join("never-written.db")).unwrap();
        sync_wal(Path::new(":memory:")).unwrap();
    }

    #[test]
    fn a_log_that_cannot_be_synced_is_named_in_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("k.db");
        std::fs::write(dir.path().join("k.db-wal"), b"log").unwrap();
        sync_wal(&db).unwrap();
        // A directory where the log should be cannot be opened for writing.
        let odd = dir.path().join("odd.db");
        std::fs::create_dir(dir.path().join("odd.db-wal")).unwrap();
        let error = sync_wal(&odd).unwrap_err();
        assert_eq!(error.code(), "store_sync");
        assert!(!error.is_retryable());
        assert!(error.to_string().contains("odd.db-wal"), "{error}");
    }
}
