//! The database's own files are private to their user: the database is created 0600 before
//! SQLite opens it, and existing ones (with their write-ahead log and shared-memory index)
//! lose any group and other bits on every open.
//!
//! Creating the file ourselves closes the window in which SQLite would create it with the
//! process umask (usually 0644) and a reader could open it before a later chmod. SQLite gives
//! the `-wal`, `-shm` and `-journal` files it creates the mode of the database file, so they
//! are born 0600 too; the ones left by an older keel are tightened here. Only these files are
//! touched, never the folder they are in: that may be a folder the user chose.

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
}
