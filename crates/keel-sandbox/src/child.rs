//! The sandbox's steps inside a command's own process, between fork and exec.
//!
//! These run in a child forked from a bigger program, so they only make system calls on
//! data prepared before the fork: no allocation, no locks, no formatting. A failing step
//! writes its name and errno to a diagnostics pipe (read to say which step failed) and
//! returns the errno.
//!
//! Two ways in:
//! - With namespaces, the spawner (see [`crate::spawner`]) starts each command as pid 1 of
//!   a new pid and mount namespace ([`start_command`]): the command lays its mounts, mounts
//!   a `/proc` of its own, drops every capability (the spawner locked the rest for all of
//!   them), applies Landlock and executes.
//! - Without them, keel's own forked child applies Landlock alone ([`ChildPlan`]) and the
//!   standard library executes the command.
#![expect(
    unsafe_code,
    reason = "namespaces, mounts and fork between fork and exec have no safe wrappers"
)]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd as _, OwnedFd};

use crate::mounts::{Namespaces, lay, mount_proc};

/// What keel's forked child does when namespaces are unavailable: Landlock alone.
#[derive(Debug)]
pub(crate) struct ChildPlan {
    /// keel's pid: if the child's parent is no longer keel, keel is gone.
    pub parent: libc::pid_t,
    /// The Landlock ruleset's descriptor, applied last (raw system calls: nothing of the
    /// landlock crate runs after the fork).
    pub ruleset: OwnedFd,
    /// Write end of the diagnostics pipe.
    pub diag: Option<OwnedFd>,
}

impl ChildPlan {
    /// Runs in the child after fork, before the standard library executes the command.
    pub(crate) fn run(&mut self) -> io::Result<()> {
        let diag = self.diag.as_ref().map_or(-1, |fd| fd.as_raw_fd());
        let ruleset = self.ruleset.as_raw_fd();
        die_with_parent(self.parent, diag)?;
        own_session(diag)?;
        // Without a user namespace a command of root's keeps root's capabilities in the real
        // system, some of which reach past Landlock (modules, raw devices, mounts, opening
        // files by handle, other users' files): none are kept.
        drop_capabilities();
        close_inherited();
        restrict(ruleset, diag)
    }
}

/// A session of its own: no controlling terminal, so no command can type into or read from
/// the user's terminal (`/dev/tty`, `TIOCSTI`); the session's id is its process group,
/// which keel kills whole.
fn own_session(diag: i32) -> io::Result<()> {
    // SAFETY: setsid takes no arguments.
    if unsafe { libc::setsid() } < 0 {
        return Err(fail(diag, b"start a session of its own", errno()));
    }
    Ok(())
}

/// A program, its arguments and its environment as the `execve` call wants them.
#[derive(Debug)]
pub(crate) struct ExecPlan {
    program: CString,
    args: Vec<CString>,
    vars: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
}

// SAFETY: the pointers point into `args` and `vars`, whose heap buffers never move and live
// as long as the plan; the plan is only read, by one process at a time.
#[expect(unsafe_code, reason = "raw pointer arrays for execve")]
unsafe impl Send for ExecPlan {}
// SAFETY: as above; nothing writes through the pointers.
#[expect(unsafe_code, reason = "raw pointer arrays for execve")]
unsafe impl Sync for ExecPlan {}

impl ExecPlan {
    /// `program` with `args` (the first is the program's name) and `vars` (`NAME=value`).
    pub(crate) fn new(program: CString, args: Vec<CString>, vars: Vec<CString>) -> Self {
        let pointers = |list: &[CString]| {
            list.iter()
                .map(|s| s.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect::<Vec<_>>()
        };
        let argv = pointers(&args);
        let envp = pointers(&vars);
        Self {
            program,
            args,
            vars,
            argv,
            envp,
        }
    }

    /// The program, its arguments and its variables.
    pub(crate) fn parts(&self) -> (&CString, &[CString], &[CString]) {
        (&self.program, &self.args, &self.vars)
    }

    /// Executes the plan; returns only when that failed.
    fn exec(&self) {
        // SAFETY: null-terminated arrays of C strings that live as long as the plan.
        unsafe {
            libc::execve(
                self.program.as_ptr(),
                self.argv.as_ptr(),
                self.envp.as_ptr(),
            );
        }
    }
}

/// What a sandboxed command's first process needs, in the spawner's memory (copied into
/// the child by the clone).
pub(crate) struct Start<'a> {
    /// Its mounts.
    pub ns: &'a Namespaces,
    /// What it executes.
    pub exec: &'a ExecPlan,
    /// Descriptors for its standard input, output and error.
    pub streams: [i32; 3],
    /// The session's network namespace to enter (`-1`: none).
    pub network: i32,
    /// The Landlock ruleset.
    pub ruleset: i32,
    /// The spawner-alive pipe: read end, write end (the spawner holds the write end).
    pub alive: [i32; 2],
    /// Where a failed step is reported.
    pub diag: i32,
}

/// Pid 1 of a command's new pid and mount namespace: its mounts, its own `/proc`, no
/// capabilities, Landlock, then the command. Never returns: on failure the step is on
/// the diagnostics pipe and the exit code is 127.
pub(crate) fn start_command(start: &Start<'_>) -> ! {
    let diag = start.diag;
    let ready = (|| {
        // Its parent, the spawner, is outside the namespace, so `getppid` says 0: whether
        // the spawner still lives is told by the pipe it holds open.
        die_with_parent(0, diag)?;
        // SAFETY: closing this process's copy of the write end, then polling the read end.
        let gone = unsafe {
            libc::close(start.alive[1]);
            let mut poll = libc::pollfd {
                fd: start.alive[0],
                events: libc::POLLIN,
                revents: 0,
            };
            libc::poll(&raw mut poll, 1, 0) > 0 && poll.revents & libc::POLLHUP != 0
        };
        if gone {
            return Err(fail(diag, b"start: keel is gone", libc::ESRCH));
        }
        own_session(diag)?;
        // SAFETY: setns with a namespace descriptor this process holds.
        if start.network >= 0 && unsafe { libc::setns(start.network, libc::CLONE_NEWNET) } != 0 {
            return Err(fail(diag, b"enter the session's network", errno()));
        }
        for (target, fd) in start.streams.iter().enumerate() {
            let target = i32::try_from(target).unwrap_or(0);
            // SAFETY: dup2 between descriptors this process holds.
            if unsafe { libc::dup2(*fd, target) } < 0 {
                return Err(fail(diag, b"connect the standard streams", errno()));
            }
        }
        lay(start.ns, diag)?;
        if start.ns.private_proc {
            mount_proc(diag)?;
        }
        close_inherited();
        // The rest was taken once by the spawner, and inherited.
        clear_capabilities();
        restrict(start.ruleset, diag)
    })();
    if ready.is_ok() {
        start.exec.exec();
        fail(diag, b"execute the command", errno());
    }
    // SAFETY: ends this process without running anything of the spawner's.
    unsafe { libc::_exit(127) }
}

/// The namespace probe's steps, in keel's forked child: every namespace and every kind
/// of mount a command's sandbox makes, in one process (a `/proc` mounted after the pid
/// namespace was made shows the namespace its children would start in).
pub(crate) fn probe_steps(
    parent: libc::pid_t,
    maps: &(Vec<u8>, Vec<u8>),
    ns: &Namespaces,
    diag: i32,
) -> io::Result<()> {
    die_with_parent(parent, diag)?;
    let mut others = libc::CLONE_NEWNS | libc::CLONE_NEWPID;
    if ns.network {
        others |= libc::CLONE_NEWNET;
    }
    crate::mounts::enter_user(others, &maps.0, &maps.1, diag)?;
    lay(ns, diag)?;
    if !ns.private_proc {
        return Ok(());
    }
    // A `/proc` shows the pid namespace of the process that mounts it: pid 1 of the new
    // one tries, as a command's pid 1 does.
    // SAFETY: fork in this single-threaded child; the copy makes system calls and exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = if mount_proc(diag).is_ok() { 0 } else { 127 };
        // SAFETY: ends the copy without running anything of keel's.
        unsafe { libc::_exit(code) }
    }
    if pid < 0 {
        return Err(fail(diag, b"start the command", errno()));
    }
    let mut status = 0;
    // SAFETY: waiting for this process's own child.
    while unsafe { libc::waitpid(pid, &raw mut status, 0) } < 0 && errno() == libc::EINTR {}
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(libc::EPERM))
    }
}

/// Applies the Landlock ruleset `fd` (with `no_new_privs`, which Landlock requires of an
/// unprivileged caller and which keeps setuid programs from gaining anything).
pub(crate) fn restrict(fd: i32, diag: i32) -> io::Result<()> {
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(fail(diag, b"set no_new_privs", errno()));
    }
    // SAFETY: the ruleset descriptor stays open until exec (it is close-on-exec).
    if unsafe { libc::syscall(libc::SYS_landlock_restrict_self, fd, 0u32) } != 0 {
        return Err(fail(diag, b"apply the Landlock rules", errno()));
    }
    Ok(())
}

/// Marks every descriptor above stderr close-on-exec: descriptors keel inherited without
/// that flag must not reach the command, and the diagnostics pipe must stay open until the
/// exec succeeds.
pub(crate) fn close_inherited() {
    // SAFETY: close_range with flags only changes this process's descriptor table.
    let done = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if done != 0 {
        // An older kernel or a filter: set the flag one descriptor at a time.
        for fd in 3..open_limit() {
            // SAFETY: fcntl on a descriptor number; unused numbers fail harmlessly.
            unsafe {
                libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            }
        }
    }
}

/// The highest descriptor number worth visiting when `close_range` is unavailable.
fn open_limit() -> i32 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) } == 0 {
        i32::try_from(limit.rlim_cur.min(65_536)).unwrap_or(1024)
    } else {
        1024
    }
}

/// Dies with the parent; `expected` is the parent's pid as seen here (0 across a pid
/// namespace, where the check is skipped).
pub(crate) fn die_with_parent(expected: libc::pid_t, diag: i32) -> io::Result<()> {
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) } != 0 {
        return Err(fail(diag, b"ask to die with keel", errno()));
    }
    // The parent may have died before the request: then nobody would ever kill us.
    // SAFETY: getppid has no arguments.
    if expected != 0 && unsafe { libc::getppid() } != expected {
        return Err(fail(diag, b"start: keel is gone", libc::ESRCH));
    }
    Ok(())
}

/// Highest capability number the kernel may know (linux/capability.h: 40 today).
const LAST_CAPABILITY: libc::c_ulong = 63;

/// Takes every capability away from the command for good: none now, none from any later
/// exec (root included: `SECBIT_NOROOT`, locked), none from setuid programs, none
/// ambient. In a user namespace root keeps every capability across exec, and with them a
/// command could undo its own mounts (`mount_setattr`) or clone a tree without them
/// (`open_tree`), which Landlock does not stop; without one, root's capabilities reach past
/// Landlock (modules, raw devices, other users' files). Steps refused for lack of the right
/// (an ordinary user has none of these capabilities anyway) leave nothing to undo.
pub(crate) fn drop_capabilities() {
    lock_capabilities();
    clear_capabilities();
}

/// The part of [`drop_capabilities`] that only matters at exec and is inherited: the
/// secure bits, no ambient capabilities, an empty bounding set. The spawner takes it once
/// (it never executes anything, and it keeps the capabilities it has to lay mounts), so
/// each command it starts inherits it and only clears its own set.
pub(crate) fn lock_capabilities() {
    let bits = libc::SECBIT_NOROOT
        | libc::SECBIT_NOROOT_LOCKED
        | libc::SECBIT_NO_SETUID_FIXUP
        | libc::SECBIT_NO_SETUID_FIXUP_LOCKED
        | libc::SECBIT_NO_CAP_AMBIENT_RAISE
        | libc::SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED
        | libc::SECBIT_KEEP_CAPS_LOCKED;
    // SAFETY: prctl with integer arguments.
    unsafe {
        libc::prctl(libc::PR_SET_SECUREBITS, bits as libc::c_ulong, 0, 0, 0);
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
        for cap in 0..=LAST_CAPABILITY {
            libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
        }
    }
}

/// Empties this process's effective, permitted and inheritable capabilities.
pub(crate) fn clear_capabilities() {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut header = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let none = Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    };
    let data = [none, none];
    // SAFETY: capset with a header and data this function owns.
    unsafe {
        libc::syscall(libc::SYS_capset, &raw mut header, data.as_ptr());
    }
}

/// The waiter of a contained program: waits for its pid 1 and ends as it ended (the same
/// exit code, or the same signal). Never returns.
pub(crate) fn keep(pid: libc::pid_t) -> ! {
    // The program's pipes and spawn's error pipe belong to it: holding them here would keep
    // keel waiting for an end of output after it ended.
    close_all_but(-1);
    let mut status = 0;
    loop {
        // SAFETY: waitpid on our own child with a valid status pointer.
        let got = unsafe { libc::waitpid(pid, &raw mut status, 0) };
        if got == pid {
            break;
        }
        if got < 0 && errno() != libc::EINTR {
            // SAFETY: _exit ends this process without running anything else.
            unsafe { libc::_exit(125) };
        }
    }
    if libc::WIFSIGNALED(status) {
        let signal = libc::WTERMSIG(status);
        // SAFETY: restoring the default action and raising the signal in this process;
        // if it does not end it (a signal whose default is to be ignored), exit below.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&raw mut set);
            libc::sigaddset(&raw mut set, signal);
            libc::sigprocmask(libc::SIG_UNBLOCK, &raw const set, std::ptr::null_mut());
            libc::raise(signal);
            libc::_exit(128 + signal)
        }
    }
    // SAFETY: as above.
    unsafe { libc::_exit(libc::WEXITSTATUS(status)) }
}

/// Closes every descriptor but `keep`.
pub(crate) fn close_all_but(keep: i32) {
    let keep = u32::try_from(keep).unwrap_or(u32::MAX);
    let ranges: [(u32, u32); 2] = [
        (0, keep.saturating_sub(1)),
        (keep.saturating_add(1), u32::MAX),
    ];
    for (first, last) in ranges {
        if first > last || (first == 0 && keep == 0) {
            continue;
        }
        // SAFETY: closing descriptors this process owns; nothing here uses them afterwards.
        let done = unsafe { libc::syscall(libc::SYS_close_range, first, last, 0u32) };
        if done != 0 {
            let last = i32::try_from(last).unwrap_or(i32::MAX).min(open_limit());
            for fd in i32::try_from(first).unwrap_or(i32::MAX)..=last {
                // SAFETY: as above; unused numbers fail harmlessly.
                unsafe {
                    libc::close(fd);
                }
            }
        }
    }
}

pub(crate) fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// Writes `bytes` to an existing file in one `write`.
pub(crate) fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> Result<(), i32> {
    // SAFETY: a valid C string; the descriptor is closed below.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: writing a valid buffer to the descriptor just opened.
    let written = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
    let error = errno();
    // SAFETY: closing the descriptor opened above.
    unsafe { libc::close(fd) };
    if usize::try_from(written).ok() == Some(bytes.len()) {
        Ok(())
    } else {
        Err(error)
    }
}

/// Reports a failed step on the diagnostics pipe as `STEP\0ERRNO`, without allocating,
/// and returns the error for `spawn`.
pub(crate) fn fail(diag: i32, step: &[u8], errno: i32) -> io::Error {
    if diag >= 0 {
        let mut buf = [0u8; 160];
        let step = step.get(..step.len().min(120)).unwrap_or(step);
        let mut len = 0;
        for (slot, byte) in buf.iter_mut().zip(step) {
            *slot = *byte;
            len += 1;
        }
        if let Some(slot) = buf.get_mut(len) {
            *slot = 0;
            len += 1;
        }
        let mut digits = [0u8; 12];
        let mut n = errno.unsigned_abs();
        let mut count = 0;
        loop {
            if let Some(slot) = digits.get_mut(count) {
                *slot = b'0' + (n % 10) as u8;
            }
            count += 1;
            n /= 10;
            if n == 0 || count >= digits.len() {
                break;
            }
        }
        for i in (0..count).rev() {
            if let (Some(slot), Some(digit)) = (buf.get_mut(len), digits.get(i)) {
                *slot = *digit;
                len += 1;
            }
        }
        // SAFETY: writing a stack buffer to the pipe's write end.
        unsafe { libc::write(diag, buf.as_ptr().cast(), len) };
    }
    io::Error::from_raw_os_error(errno)
}

/// Reads what a failed child wrote on the diagnostics pipe: the step and its errno.
pub(crate) fn read_diagnostic(bytes: &[u8]) -> Option<(String, io::Error)> {
    let split = bytes.iter().position(|b| *b == 0)?;
    let step = String::from_utf8_lossy(bytes.get(..split)?).into_owned();
    let code: i32 = std::str::from_utf8(bytes.get(split + 1..)?)
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some((step, io::Error::from_raw_os_error(code)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_step_reads_back_with_its_errno() {
        let (reader, writer) = std::io::pipe().unwrap();
        let writer = OwnedFd::from(writer);
        let error = fail(writer.as_raw_fd(), b"hide a credential folder", libc::EPERM);
        assert_eq!(error.raw_os_error(), Some(libc::EPERM));
        drop(writer);
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut &reader, &mut bytes).unwrap();
        let (step, error) = read_diagnostic(&bytes).unwrap();
        assert_eq!(step, "hide a credential folder");
        assert_eq!(error.raw_os_error(), Some(libc::EPERM));
    }
}
