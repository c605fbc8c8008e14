//! The mounts of a sandboxed command's own mount namespace: credential locations hidden,
//! the session's private `/tmp`, everything read-only but the folders the mode lets it
//! write, terminals of its own, control files pinned and read-only, a `/proc` of its own.
//!
//! Like everything between fork and exec, these steps only make system calls on data
//! built before: no allocation, no locks.
#![expect(
    unsafe_code,
    reason = "mount, unshare and mount_setattr have no safe wrappers"
)]

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};

use crate::child::{errno, fail, write_file};

/// What a command's namespaces hold: the mounts laid in its own mount namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Namespaces {
    /// A new network namespace: no interface but a down loopback.
    pub network: bool,
    /// Enter the session's own network namespace (its descriptor comes with the request).
    pub join_network: bool,
    /// Existing folders hidden under an empty read-only tmpfs.
    pub mask_dirs: Vec<CString>,
    /// Existing files (and sockets) hidden behind `/dev/null`.
    pub mask_files: Vec<CString>,
    /// Folders bound onto themselves so they cannot be renamed or removed.
    pub pinned: Vec<CString>,
    /// Files and folders made read-only.
    pub read_only: Vec<CString>,
    /// The folders a command may write; everything else is mounted read-only, which also
    /// stops what Landlock does not govern outside them (file modes, owners and times).
    pub writable: Vec<CString>,
    /// The command's folder, entered again once the mounts are made: the folder entered
    /// before them is the one under them.
    pub cwd: CString,
    /// The session's private temp folder, mounted over `/tmp`.
    pub private_tmp: Option<PrivateTmp>,
    /// Mount a `/proc` of the new pid namespace.
    pub private_proc: bool,
    /// Mount a terminal file system of its own over `/dev/pts`, so the user's terminals
    /// cannot be read (keystrokes) or written; the command can still make terminals.
    pub private_pts: bool,
}

/// The session's private temp folder as the command's `/tmp`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PrivateTmp {
    /// The folder.
    pub folder: CString,
    /// What must stay visible under `/tmp`, bound into the folder first: `(source, place
    /// inside the folder)`.
    pub keep: Vec<(CString, CString)>,
}

/// Mount attributes for `mount_setattr` (linux/mount.h).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 0x0000_0001;

/// Enters a new user namespace (plus `others`, more `CLONE_NEW*` flags) in which this
/// process keeps its ids (`uid_map`, `gid_map`: `"ID ID 1\n"`) and gains the capabilities
/// to lay mounts.
pub(crate) fn enter_user(
    others: libc::c_int,
    uid_map: &[u8],
    gid_map: &[u8],
    diag: i32,
) -> io::Result<()> {
    // SAFETY: unshare with flags only.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | others) } != 0 {
        return Err(fail(diag, b"create the namespaces", errno()));
    }
    // Without `deny`, an unprivileged process may not write its gid map.
    match write_file(c"/proc/self/setgroups", b"deny") {
        Ok(()) => {}
        Err(e) if e == libc::ENOENT => {}
        Err(e) => return Err(fail(diag, b"write /proc/self/setgroups", e)),
    }
    write_file(c"/proc/self/uid_map", uid_map)
        .map_err(|e| fail(diag, b"write /proc/self/uid_map", e))?;
    write_file(c"/proc/self/gid_map", gid_map)
        .map_err(|e| fail(diag, b"write /proc/self/gid_map", e))?;
    Ok(())
}

/// The `uid_map` and `gid_map` lines that keep this process's ids in a user namespace.
pub(crate) fn id_maps() -> (Vec<u8>, Vec<u8>) {
    let (uid, gid) = (crate::sys::own_uid(), crate::sys::own_gid());
    (
        format!("{uid} {uid} 1\n").into_bytes(),
        format!("{gid} {gid} 1\n").into_bytes(),
    )
}

/// Lays the command's mounts, in a mount namespace of its own (entered already), and
/// enters its folder.
pub(crate) fn lay(ns: &Namespaces, diag: i32) -> io::Result<()> {
    // Nothing mounted here may reach keel's own namespace.
    mount_raw(None, c"/", None, libc::MS_REC | libc::MS_PRIVATE, None)
        .map_err(|e| fail(diag, b"make the mounts private", e))?;
    let hide = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    // One empty file system hides the first folder; the others get a copy of that mount
    // (a new file system costs several times what a copy does). The copy is made from a
    // descriptor: its path may be covered by a later mask.
    let mut empty: Option<OwnedFd> = None;
    for dir in &ns.mask_dirs {
        let laid = match &empty {
            Some(first) => copy_mount(first, dir),
            None => mount_raw(
                Some(c"tmpfs"),
                dir,
                Some(c"tmpfs"),
                hide,
                Some(c"mode=0,size=4k"),
            )
            .and_then(|()| {
                empty = Some(open_path(dir)?);
                Ok(())
            }),
        };
        match laid {
            Ok(()) => {}
            // Gone since it was listed: nothing left to hide.
            Err(e) if e == libc::ENOENT => {}
            Err(e) => return Err(fail(diag, b"hide a credential folder", e)),
        }
    }
    drop(empty);
    for file in &ns.mask_files {
        match mount_raw(Some(c"/dev/null"), file, None, libc::MS_BIND, None) {
            Ok(()) => {}
            Err(e) if e == libc::ENOENT => {}
            Err(e) => return Err(fail(diag, b"hide a credential file", e)),
        }
    }
    if let Some(PrivateTmp {
        folder: private,
        keep,
    }) = &ns.private_tmp
    {
        for (source, inside) in keep {
            mount_raw(
                Some(source),
                inside,
                None,
                libc::MS_BIND | libc::MS_REC,
                None,
            )
            .map_err(|e| fail(diag, b"keep a folder visible in the private /tmp", e))?;
        }
        mount_raw(
            Some(private),
            c"/tmp",
            None,
            libc::MS_BIND | libc::MS_REC,
            None,
        )
        .map_err(|e| fail(diag, b"mount the private /tmp", e))?;
    }
    read_only_elsewhere(&ns.writable, diag)?;
    if ns.private_pts {
        private_terminals(diag)?;
    }
    for dir in &ns.pinned {
        match mount_raw(Some(dir), dir, None, libc::MS_BIND, None) {
            Ok(()) => {}
            Err(e) if e == libc::ENOENT => {}
            Err(e) => return Err(fail(diag, b"pin a control folder", e)),
        }
    }
    for path in &ns.read_only {
        match mount_raw(Some(path), path, None, libc::MS_BIND | libc::MS_REC, None) {
            Ok(()) => {}
            Err(e) if e == libc::ENOENT => continue,
            Err(e) => return Err(fail(diag, b"protect a control file", e)),
        }
        set_read_only(path, true).map_err(|e| fail(diag, b"make a control file read-only", e))?;
    }
    // SAFETY: chdir to a valid C string.
    if unsafe { libc::chdir(ns.cwd.as_ptr()) } != 0 {
        return Err(fail(diag, b"enter the working folder", errno()));
    }
    Ok(())
}

/// Opens `path` for reference only (`O_PATH`), close-on-exec.
fn open_path(path: &CStr) -> Result<OwnedFd, i32> {
    // SAFETY: open with a valid C string.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    owned(fd.into())
}

/// The descriptor a system call returned, or its errno.
fn owned(fd: libc::c_long) -> Result<OwnedFd, i32> {
    match i32::try_from(fd) {
        // SAFETY: the kernel just created this descriptor for this process.
        Ok(fd) if fd >= 0 => Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
        _ => Err(errno()),
    }
}

/// Mounts a copy of the mount `source` (a descriptor of its root) on `target`.
fn copy_mount(source: &OwnedFd, target: &CStr) -> Result<(), i32> {
    let clone = libc::OPEN_TREE_CLONE | libc::OPEN_TREE_CLOEXEC | libc::AT_EMPTY_PATH as u32;
    // SAFETY: open_tree on a descriptor this process holds, with an empty path.
    let tree = owned(unsafe {
        libc::syscall(libc::SYS_open_tree, source.as_raw_fd(), c"".as_ptr(), clone)
    })?;
    // SAFETY: move_mount of the detached copy onto a valid C string path.
    let moved = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_FDCWD,
            target.as_ptr(),
            libc::MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    if moved != 0 { Err(errno()) } else { Ok(()) }
}

/// Makes every mount read-only but the `writable` folders (each bound onto itself first, so
/// it is a mount of its own). Device nodes stay usable on a read-only mount.
fn read_only_elsewhere(writable: &[CString], diag: i32) -> io::Result<()> {
    for dir in writable {
        match mount_raw(Some(dir), dir, None, libc::MS_BIND | libc::MS_REC, None) {
            Ok(()) | Err(libc::ENOENT) => {}
            Err(e) => return Err(fail(diag, b"bind a writable folder", e)),
        }
    }
    set_read_only(c"/", true).map_err(|e| fail(diag, b"make the file system read-only", e))?;
    for dir in writable {
        match set_read_only(dir, false) {
            Ok(()) | Err(libc::ENOENT) => {}
            Err(e) => return Err(fail(diag, b"keep a writable folder writable", e)),
        }
    }
    Ok(())
}

/// Sets (or clears) the read-only attribute of the mount at `path` and every mount below.
fn set_read_only(path: &CStr, read_only: bool) -> Result<(), i32> {
    let attr = MountAttr {
        attr_set: if read_only { MOUNT_ATTR_RDONLY } else { 0 },
        attr_clr: if read_only { 0 } else { MOUNT_ATTR_RDONLY },
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: the path is a valid C string and the attribute struct outlives the call.
    let done = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::AT_RECURSIVE as libc::c_uint,
            &raw const attr,
            size_of::<MountAttr>(),
        )
    };
    if done == 0 { Ok(()) } else { Err(errno()) }
}

/// A new instance of the terminal file system over `/dev/pts` with its own `ptmx`;
/// where the kernel refuses one, an empty read-only folder instead.
fn private_terminals(diag: i32) -> io::Result<()> {
    let flags = libc::MS_NOSUID | libc::MS_NOEXEC;
    let fresh = mount_raw(
        Some(c"devpts"),
        c"/dev/pts",
        Some(c"devpts"),
        flags,
        Some(c"newinstance,ptmxmode=0666,mode=0620"),
    );
    match fresh {
        Ok(()) => {
            // Terminals opened through /dev/ptmx must come from the new instance.
            match mount_raw(
                Some(c"/dev/pts/ptmx"),
                c"/dev/ptmx",
                None,
                libc::MS_BIND,
                None,
            ) {
                Ok(()) | Err(libc::ENOENT) => Ok(()),
                Err(e) => Err(fail(diag, b"bind the new /dev/ptmx", e)),
            }
        }
        Err(_) => {
            let hide = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
            match mount_raw(
                Some(c"tmpfs"),
                c"/dev/pts",
                Some(c"tmpfs"),
                hide,
                Some(c"mode=0755,size=4k"),
            ) {
                Ok(()) | Err(libc::ENOENT) => Ok(()),
                Err(e) => Err(fail(diag, b"hide the terminals", e)),
            }
        }
    }
}

/// Mounts a `/proc` of the pid namespace this process's children start in.
pub(crate) fn mount_proc(diag: i32) -> io::Result<()> {
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    mount(c"proc", c"/proc", c"proc", flags, diag, b"mount /proc")
}

fn mount(
    source: &CStr,
    target: &CStr,
    fstype: &CStr,
    flags: libc::c_ulong,
    diag: i32,
    step: &[u8],
) -> io::Result<()> {
    mount_raw(Some(source), target, Some(fstype), flags, None).map_err(|e| fail(diag, step, e))
}

fn mount_raw(
    source: Option<&std::ffi::CStr>,
    target: &std::ffi::CStr,
    fstype: Option<&std::ffi::CStr>,
    flags: libc::c_ulong,
    data: Option<&std::ffi::CStr>,
) -> Result<(), i32> {
    let ptr = |s: Option<&std::ffi::CStr>| s.map_or(std::ptr::null(), std::ffi::CStr::as_ptr);
    // SAFETY: every pointer is null or a valid C string that outlives the call.
    let done = unsafe {
        libc::mount(
            ptr(source),
            target.as_ptr(),
            ptr(fstype),
            flags,
            ptr(data).cast(),
        )
    };
    if done == 0 { Ok(()) } else { Err(errno()) }
}
