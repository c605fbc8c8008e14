//! Programs keel runs for others (MCP servers) are contained: each is pid 1 of a pid
//! namespace of its own (inside a user namespace with the same ids), so when it ends, or
//! keel does, the kernel ends everything it started, a `setsid` daemon included. A waiter
//! left in keel's namespace is the process keel holds: it dies with keel
//! (`PR_SET_PDEATHSIG`), pid 1 dies with it, and its exit status is pid 1's.
//!
//! Nothing else changes for the program: the same files, network and environment. It
//! shares no namespace with the model's commands, whose private `/proc` does not show it,
//! so a command cannot read its environment.
#![expect(
    unsafe_code,
    reason = "unshare, fork and waitpid have no safe wrappers in std"
)]

use std::io;

use crate::child::{keep, write_file};

/// Makes `cmd` run contained, or says why this system does not allow it (it then only dies
/// with keel: what it starts may not).
pub fn contain(cmd: &mut tokio::process::Command) -> Result<(), String> {
    if let Err(why) = &crate::support().namespaces {
        return Err(format!("user namespaces are unavailable ({why})"));
    }
    let uid = crate::sys::own_uid();
    let gid = crate::sys::own_gid();
    let uid_map = format!("{uid} {uid} 1\n").into_bytes();
    let gid_map = format!("{gid} {gid} 1\n").into_bytes();
    // SAFETY: the closure runs between fork and exec and only makes system calls on data
    // prepared before the fork; it allocates nothing.
    unsafe {
        cmd.pre_exec(move || enter(&uid_map, &gid_map));
    }
    Ok(())
}

fn die_with_parent() -> io::Result<()> {
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// In the forked child: the namespaces, then pid 1 goes on to exec while this process
/// stays behind as the waiter.
fn enter(uid_map: &[u8], gid_map: &[u8]) -> io::Result<()> {
    die_with_parent()?;
    // SAFETY: unshare with flags only.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWPID) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // Without `deny`, an unprivileged process may not write its gid map.
    match write_file(c"/proc/self/setgroups", b"deny") {
        Ok(()) => {}
        Err(e) if e == libc::ENOENT => {}
        Err(e) => return Err(io::Error::from_raw_os_error(e)),
    }
    write_file(c"/proc/self/uid_map", uid_map).map_err(io::Error::from_raw_os_error)?;
    write_file(c"/proc/self/gid_map", gid_map).map_err(io::Error::from_raw_os_error)?;
    // SAFETY: fork in a single-threaded child; both sides only make system calls.
    match unsafe { libc::fork() } {
        pid if pid < 0 => Err(io::Error::last_os_error()),
        // Pid 1 of the new namespace: it dies with the waiter, and execs the program.
        0 => die_with_parent(),
        // The waiter holds no descriptor: the program's pipes, and spawn's own error pipe,
        // close when the program's side does.
        pid => keep(pid),
    }
}
