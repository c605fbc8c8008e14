//! What a command's namespaces hide: credential locations (and keel's home), the local
//! sockets of the user's session that would let a command act outside the sandbox, the
//! user's terminals; and which control files they make read-only.
//!
//! Sockets are found by a bounded walk of the usual places (`/tmp`, `/run`, `/dev/shm`)
//! each time, so one created after keel started (a new tmux server) is hidden too (a
//! folder whose times did not change is not read again); a few read-only services (name
//! resolution, the journal) stay reachable.

use std::collections::HashMap;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::mounts::{Namespaces, PrivateTmp};
use crate::prepare::c_path;
use crate::process::Program;
use crate::support::NamespaceSupport;
use crate::sys::own_uid;
use crate::{Policy, SandboxError};

/// Places that hold the sockets of users' sessions as a whole (D-Bus, Wayland, agents,
/// X servers), hidden whole; sockets elsewhere are found by [`sockets`].
const SESSION_SOCKETS: &[&str] = &[
    "/run/user",
    "/var/run/user",
    "/var/run/docker.sock",
    "/run/docker.sock",
    "/run/podman/podman.sock",
    "/tmp/.X11-unix",
];

/// Where sockets are looked for, and how deep.
/// (`/tmp` is walked only when it cannot be the session's own; see [`private_tmp`].)
const SOCKET_PLACES: &[(&str, usize)] =
    &[("/tmp", 3), ("/run", 4), ("/var/run", 4), ("/dev/shm", 2)];

/// Sockets of read-only system services that stay reachable (name and user lookups, the
/// journal).
const SERVICE_SOCKETS: &[&str] = &[
    "/run/systemd/resolve/",
    "/run/systemd/userdb/",
    "/run/systemd/journal/",
    "/run/nscd/",
];

/// Variables of the user's session that name a control socket (a terminal multiplexer, an
/// editor's server, an agent, a bus), wherever it lies: `(name, how to read the path)`.
const SOCKET_VARIABLES: &[(&str, SocketValue)] = &[
    ("TMUX", SocketValue::FirstField),
    ("SSH_AUTH_SOCK", SocketValue::Path),
    ("GPG_AGENT_INFO", SocketValue::FirstField),
    ("DBUS_SESSION_BUS_ADDRESS", SocketValue::UnixAddress),
    ("NVIM", SocketValue::Path),
    ("NVIM_LISTEN_ADDRESS", SocketValue::Path),
    ("EMACS_SOCKET_NAME", SocketValue::Path),
    ("VSCODE_IPC_HOOK_CLI", SocketValue::Path),
    ("VSCODE_IPC_HOOK", SocketValue::Path),
    ("KITTY_LISTEN_ON", SocketValue::UnixAddress),
    ("WEZTERM_UNIX_SOCKET", SocketValue::Path),
    ("ALACRITTY_SOCKET", SocketValue::Path),
    ("PULSE_SERVER", SocketValue::UnixAddress),
    ("WAYLAND_DISPLAY", SocketValue::Path),
];

/// How a variable spells its socket.
#[derive(Debug, Clone, Copy)]
enum SocketValue {
    /// The whole value is the path.
    Path,
    /// The path, then `,` or `:` and more (`TMUX=/tmp/tmux-0/default,123,0`).
    FirstField,
    /// `unix:path=/run/…` or `unix:/run/…`, maybe with more `,key=value` parts.
    UnixAddress,
}

/// The socket paths the session's variables name (absolute ones only).
fn named_sockets(vars: &[(String, String)]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for (name, how) in SOCKET_VARIABLES {
        let Some((_, value)) = vars.iter().find(|(k, _)| k == name) else {
            continue;
        };
        let path = match how {
            SocketValue::Path => value.as_str(),
            SocketValue::FirstField => value.split([',', ':']).next().unwrap_or(""),
            SocketValue::UnixAddress => value
                .split(';')
                .filter_map(|address| address.strip_prefix("unix:"))
                .find_map(|rest| {
                    rest.split(',')
                        .find_map(|part| part.strip_prefix("path="))
                        .or_else(|| rest.starts_with('/').then_some(rest))
                })
                .unwrap_or(""),
        };
        let path = Path::new(path.trim());
        if path.is_absolute() {
            out.push(path.to_path_buf());
        }
    }
    if let Some((_, dir)) = vars.iter().find(|(k, _)| k == "TMUX_TMPDIR") {
        out.push(Path::new(dir).join(format!("tmux-{}", own_uid())));
    }
    out
}

/// Most directory entries looked at to find sockets (a bound on the work per command).
const MAX_SOCKET_WALK: usize = 4096;

/// The sockets under [`SOCKET_PLACES`], except the services' and those under `keep` (the
/// workspace and the session's temp folder hold the command's own).
pub(crate) fn sockets(keep: &[&Path], tmp_is_private: bool) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut budget = MAX_SOCKET_WALK;
    for (place, depth) in SOCKET_PLACES {
        if tmp_is_private && *place == "/tmp" {
            continue;
        }
        let place = Path::new(place);
        // `/var/run` is usually a link to `/run`: walk it once.
        if std::fs::symlink_metadata(place).is_ok_and(|m| m.file_type().is_symlink()) {
            continue;
        }
        walk_sockets(place, *depth, keep, &mut budget, &mut found);
    }
    found
}

fn walk_sockets(
    dir: &Path,
    depth: usize,
    keep: &[&Path],
    budget: &mut usize,
    found: &mut Vec<PathBuf>,
) {
    if depth == 0 || keep.iter().any(|k| dir.starts_with(k)) {
        return;
    }
    let Some(listing) = listing(dir) else {
        return;
    };
    for (path, kind) in listing.iter() {
        if *budget == 0 {
            return;
        }
        *budget -= 1;
        match kind {
            Kind::Socket => {
                let service = SERVICE_SOCKETS
                    .iter()
                    .any(|s| path.to_string_lossy().starts_with(s));
                if !service && !keep.iter().any(|k| path.starts_with(k)) {
                    found.push(path.clone());
                }
            }
            Kind::Dir => walk_sockets(path, depth - 1, keep, budget, found),
        }
    }
}

/// What a walk for sockets wants of a folder's entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Socket,
    Dir,
}

/// A folder's sockets and subfolders as last read, and the folder's state then.
#[derive(Debug)]
struct Listing {
    /// Device, inode, change time and modification time (seconds, nanoseconds).
    stamp: (u64, u64, i64, i64, i64, i64),
    entries: Arc<Vec<(PathBuf, Kind)>>,
}

/// Folders read by earlier walks: each command looks at every folder again, but rereads
/// only those that changed (adding, removing or renaming an entry changes the folder's
/// times, and its change time cannot be set back by a program).
static LISTINGS: LazyLock<Mutex<HashMap<PathBuf, Listing>>> = LazyLock::new(Mutex::default);

/// Most folders remembered.
const MAX_LISTINGS: usize = 1024;

/// A listing younger than this may miss a change made in the same clock tick as the read
/// (file times are coarse): it is read again until it is older.
const SETTLED: Duration = Duration::from_secs(2);

/// The sockets and subfolders of `dir`, from memory when the folder has not changed.
fn listing(dir: &Path) -> Option<Arc<Vec<(PathBuf, Kind)>>> {
    let meta = std::fs::metadata(dir).ok()?;
    if !meta.is_dir() {
        return None;
    }
    let stamp = (
        meta.dev(),
        meta.ino(),
        meta.ctime(),
        meta.ctime_nsec(),
        meta.mtime(),
        meta.mtime_nsec(),
    );
    let mut memory = LISTINGS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(known) = memory.get(dir)
        && known.stamp == stamp
    {
        return Some(Arc::clone(&known.entries));
    }
    let read_at = SystemTime::now();
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_socket() {
            entries.push((entry.path(), Kind::Socket));
        } else if kind.is_dir() {
            entries.push((entry.path(), Kind::Dir));
        }
    }
    let entries = Arc::new(entries);
    let time = |secs: i64, nanos: i64| {
        UNIX_EPOCH
            + Duration::new(
                u64::try_from(secs).unwrap_or(0),
                u32::try_from(nanos).unwrap_or(0),
            )
    };
    let changed = time(meta.ctime(), meta.ctime_nsec()).max(time(meta.mtime(), meta.mtime_nsec()));
    let settled = read_at
        .duration_since(changed)
        .is_ok_and(|age| age >= SETTLED);
    if settled {
        if memory.len() >= MAX_LISTINGS {
            memory.clear();
        }
        memory.insert(
            dir.to_path_buf(),
            Listing {
                stamp,
                entries: Arc::clone(&entries),
            },
        );
    } else {
        memory.remove(dir);
    }
    Some(entries)
}

/// The credential locations that exist, as real paths (and as written, when a link leads
/// elsewhere: a mount over the link's path hides its target).
pub(crate) fn existing_credentials(locations: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for location in locations {
        // Most locations do not exist: one look says so, where resolving the path would
        // read every link on the way.
        if std::fs::symlink_metadata(location).is_err() {
            continue;
        }
        let Ok(real) = std::fs::canonicalize(location) else {
            continue;
        };
        for path in [real, location.clone()] {
            if !out.contains(&path) {
                out.push(path);
            }
        }
    }
    out
}

pub(crate) fn namespaces(
    support: &NamespaceSupport,
    network: bool,
    credentials: &[PathBuf],
    writable: &[PathBuf],
    policy: &Policy,
    program: &Program,
) -> Result<Namespaces, SandboxError> {
    let mut mask_dirs = Vec::new();
    let mut mask_files = Vec::new();
    let mut hide = |path: &Path| -> Result<(), SandboxError> {
        let Ok(meta) = std::fs::metadata(path) else {
            return Ok(());
        };
        let c = c_path(path)?;
        if meta.is_dir() {
            if !mask_dirs.contains(&c) {
                mask_dirs.push(c);
            }
        } else if !mask_files.contains(&c) {
            mask_files.push(c);
        }
        Ok(())
    };
    for location in credentials {
        hide(location)?;
    }
    for socket in SESSION_SOCKETS {
        hide(Path::new(socket))?;
    }
    let mut keep: Vec<&Path> = policy.roots.iter().map(PathBuf::as_path).collect();
    keep.push(&policy.tmp);
    let private = private_tmp(policy)?;
    for socket in sockets(&keep, private.is_some()) {
        hide(&socket)?;
    }
    for socket in named_sockets(&program.env) {
        if !keep.iter().any(|k| socket.starts_with(k)) {
            hide(&socket)?;
        }
    }

    let (mut pinned, mut read_only) = (Vec::new(), Vec::new());
    for path in &policy.pinned {
        pinned.push(c_path(path)?);
    }
    for path in &policy.read_only {
        read_only.push(c_path(path)?);
    }
    Ok(Namespaces {
        network,
        join_network: policy.private_network.is_some() && !network,
        mask_dirs,
        mask_files,
        pinned,
        read_only,
        private_proc: support.private_proc,
        private_pts: true,
        cwd: c_path(&program.cwd)?,
        private_tmp: private,
        writable: writable
            .iter()
            .filter(|dir| dir.is_dir())
            .map(|dir| c_path(dir))
            .collect::<Result<_, _>>()?,
    })
}

/// Whether `/tmp` can be the session's own folder for a command: not when a workspace
/// root is `/tmp` itself or holds it.
pub(crate) fn tmp_can_be_private(roots: &[PathBuf]) -> bool {
    !roots.iter().any(|root| Path::new("/tmp").starts_with(root))
}

/// The session's private temp folder mounted over `/tmp` (so every socket and file other
/// programs keep there is out of reach in one step), with the workspace roots and keel's
/// saved outputs that lie under `/tmp` bound into it at their own paths first.
fn private_tmp(policy: &Policy) -> Result<Option<PrivateTmp>, SandboxError> {
    if !tmp_can_be_private(&policy.roots) || !policy.tmp.starts_with("/tmp") {
        return Ok(None);
    }
    let mut keep = Vec::new();
    let visible = policy
        .roots
        .iter()
        .map(PathBuf::as_path)
        .chain(std::iter::once(policy.output_dir.as_path()));
    for source in visible {
        let Ok(rest) = source.strip_prefix("/tmp") else {
            continue;
        };
        if source.starts_with(&policy.tmp) || !source.is_dir() {
            continue;
        }
        let inside = policy.tmp.join(rest);
        std::fs::create_dir_all(&inside).map_err(|e| {
            SandboxError::Rules(format!("cannot prepare {}: {e}", inside.display()))
        })?;
        keep.push((c_path(source)?, c_path(&inside)?));
    }
    Ok(Some(PrivateTmp {
        folder: c_path(&policy.tmp)?,
        keep,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remembered(dir: &Path) -> bool {
        LISTINGS.lock().unwrap().contains_key(dir)
    }

    #[test]
    fn a_folder_is_read_again_when_it_changes_and_only_remembered_once_settled() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("sockets");
        std::fs::create_dir(&dir).unwrap();
        std::fs::create_dir(dir.join("sub")).unwrap();
        // Just changed: read, not remembered (a change in the same tick would be missed).
        assert_eq!(listing(&dir).unwrap().len(), 1);
        assert!(!remembered(&dir));
        std::thread::sleep(SETTLED + Duration::from_millis(100));
        assert_eq!(listing(&dir).unwrap().len(), 1);
        assert!(remembered(&dir));
        // A socket made since: the folder's times changed, so it is read again.
        let _socket = std::os::unix::net::UnixListener::bind(dir.join("late.sock")).unwrap();
        let entries = listing(&dir).unwrap();
        assert!(
            entries
                .iter()
                .any(|(p, k)| p.ends_with("late.sock") && *k == Kind::Socket),
            "{entries:?}"
        );
        assert!(!remembered(&dir));
    }

    #[test]
    fn session_variables_name_their_sockets() {
        let vars: Vec<(String, String)> = [
            ("TMUX", "/tmp/tmux-1000/default,4242,0"),
            (
                "DBUS_SESSION_BUS_ADDRESS",
                "unix:path=/run/user/1000/bus,guid=abc",
            ),
            ("KITTY_LISTEN_ON", "unix:/tmp/kitty-sock"),
            ("SSH_AUTH_SOCK", "/tmp/ssh-x/agent.1"),
            ("NVIM", "relative-is-ignored"),
            ("PATH", "/usr/bin"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        assert_eq!(
            named_sockets(&vars),
            vec![
                PathBuf::from("/tmp/tmux-1000/default"),
                PathBuf::from("/tmp/ssh-x/agent.1"),
                PathBuf::from("/run/user/1000/bus"),
                PathBuf::from("/tmp/kitty-sock"),
            ]
        );
    }
}
