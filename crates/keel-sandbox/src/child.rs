//! The sandbox's steps inside the command's own process, between fork and exec.
//!
//! Everything here runs in a child forked from a multi-threaded keel, so it may only make
//! system calls on data prepared before the fork: no allocation, no locks, no formatting.
//! A failing step writes its name and errno to a diagnostics pipe (read by keel to say
//! which step failed) and returns the errno, which the standard library hands back to
//! `spawn`.
//!
//! With namespaces the process (the *keeper*) enters a new user, mount and pid namespace
//! (and network namespace when the mode forbids network), masks credential locations,
//! makes control files read-only, then starts the command as pid 1 of the new pid
//! namespace and waits for it. When pid 1 ends, the kernel kills everything left in the
//! namespace, so no process of the command outlives it; both the keeper and pid 1 die with
//! their parent (`PR_SET_PDEATHSIG`), so nothing outlives keel either. Pid 1 mounts a
//! private `/proc` (keel's pid and environment are not in it), applies Landlock last (which
//! also forbids any further mount) and executes bash itself.
//!
//! Pid 1 is started the way `posix_spawn` starts a program: sharing the keeper's memory on
//! a stack of its own while the keeper waits (`CLONE_VM | CLONE_VFORK`), so keel's page
//! tables are not copied a second time. That is why it executes bash from an argument and
//! environment list built before the fork ([`ExecPlan`]) instead of returning to the
//! standard library.
#![expect(
    unsafe_code,
    reason = "namespaces, mounts and fork between fork and exec have no safe wrappers"
)]

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd as _, OwnedFd};

/// What the keeper sets up in the namespaces.
#[derive(Debug)]
pub(crate) struct Namespaces {
    /// A new network namespace: no interface but a down loopback.
    pub network: bool,
    /// `/proc/self/uid_map` and `gid_map` contents (the same ids inside as outside).
    pub uid_map: Vec<u8>,
    /// See `uid_map`.
    pub gid_map: Vec<u8>,
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
#[derive(Debug)]
pub(crate) struct PrivateTmp {
    /// The folder.
    pub folder: CString,
    /// What must stay visible under `/tmp`, bound into the folder first: `(source, place
    /// inside the folder)`.
    pub keep: Vec<(CString, CString)>,
}

/// Everything the child needs, built before the fork.
#[derive(Debug)]
pub(crate) struct ChildPlan {
    /// keel's pid: if the child's parent is no longer keel, keel is gone.
    pub parent: libc::pid_t,
    /// `None`: Landlock only, in the command's own process.
    pub namespaces: Option<Namespaces>,
    /// The Landlock ruleset's descriptor, applied last (raw system calls: nothing of the
    /// landlock crate runs after the fork).
    pub ruleset: Option<OwnedFd>,
    /// Write end of the diagnostics pipe.
    pub diag: Option<OwnedFd>,
    /// What pid 1 executes (with namespaces).
    pub exec: ExecPlan,
    /// The stack pid 1 starts on.
    pub stack: Vec<u8>,
}

/// A program, its arguments and its environment as the `execve` call wants them.
#[derive(Debug)]
pub(crate) struct ExecPlan {
    program: CString,
    _strings: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
}

// SAFETY: the pointers point into `_strings`, whose heap buffers never move and live as
// long as the plan; the plan is only read, by one process at a time.
#[expect(unsafe_code, reason = "raw pointer arrays for execve")]
unsafe impl Send for ExecPlan {}
// SAFETY: as above; nothing writes through the pointers.
#[expect(unsafe_code, reason = "raw pointer arrays for execve")]
unsafe impl Sync for ExecPlan {}

impl ExecPlan {
    /// `program` with `args` (the first is the program's name) and `vars`.
    pub(crate) fn new(
        program: &[u8],
        args: &[&[u8]],
        vars: &[(String, String)],
    ) -> io::Result<Self> {
        let nul = |_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "a NUL byte in the command or its environment",
            )
        };
        let program = CString::new(program).map_err(nul)?;
        let mut strings = Vec::with_capacity(args.len() + vars.len());
        for arg in args {
            strings.push(CString::new(*arg).map_err(nul)?);
        }
        for (key, value) in vars {
            strings.push(CString::new(format!("{key}={value}")).map_err(nul)?);
        }
        let pointers: Vec<*const libc::c_char> = strings.iter().map(|s| s.as_ptr()).collect();
        let (args_ptrs, vars_ptrs) = pointers.split_at(args.len());
        let mut argv = args_ptrs.to_vec();
        argv.push(std::ptr::null());
        let mut envp = vars_ptrs.to_vec();
        envp.push(std::ptr::null());
        Ok(Self {
            program,
            _strings: strings,
            argv,
            envp,
        })
    }

    /// Nothing to execute (Landlock only: the standard library executes the command).
    pub(crate) fn none() -> Self {
        Self {
            program: CString::default(),
            _strings: Vec::new(),
            argv: vec![std::ptr::null()],
            envp: vec![std::ptr::null()],
        }
    }
}

/// Size of pid 1's stack: its steps are a few system calls and Landlock's.
pub(crate) const STACK_SIZE: usize = 256 * 1024;

/// Mount attributes for `mount_setattr` (linux/mount.h).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 0x0000_0001;

impl ChildPlan {
    /// Runs in the child after fork. Returns in the process that goes on to exec the
    /// command; the keeper never returns.
    pub(crate) fn run(&mut self) -> io::Result<()> {
        let diag = self.diag.as_ref().map_or(-1, |fd| fd.as_raw_fd());
        let ruleset = self.ruleset.as_ref().map_or(-1, |fd| fd.as_raw_fd());
        die_with_parent(self.parent, diag)?;
        // A session of its own: no controlling terminal, so no command can type into or
        // read from the user's terminal (`/dev/tty`, `TIOCSTI`); the session's id is its
        // process group, which keel kills whole.
        // SAFETY: setsid takes no arguments.
        if unsafe { libc::setsid() } < 0 {
            return Err(fail(diag, b"start a session of its own", errno()));
        }
        let Some(ns) = &self.namespaces else {
            // Without a user namespace a command of root's keeps root's capabilities in
            // the real system, some of which reach past Landlock (modules, raw devices,
            // mounts, opening files by handle, other users' files): none are kept.
            drop_capabilities();
            close_inherited();
            return restrict(ruleset, diag);
        };
        enter(ns, diag)?;
        // The keeper holds the write end; pid 1 closes its copy and sees the pipe hang up
        // if the keeper (and so keel) is already gone when it asks to die with it.
        let mut alive = [-1i32; 2];
        // SAFETY: pipe2 fills the two-element array.
        if unsafe { libc::pipe2(alive.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(fail(diag, b"create a pipe", errno()));
        }
        let mut pid_one = PidOne {
            diag,
            private_proc: ns.private_proc,
            ruleset,
            exec: &self.exec,
            alive,
        };
        let top = self.stack.as_mut_ptr_range().end;
        // The stack grows down from a 16-byte aligned top.
        let top = top.wrapping_sub(top as usize % 16);
        // SAFETY: pid 1 runs `start_pid_one` on its own stack inside this process's memory
        // while this process is suspended (CLONE_VFORK) until it executes bash or exits;
        // `pid_one` and the stack outlive that.
        let pid = unsafe {
            libc::clone(
                start_pid_one,
                top.cast(),
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                (&raw mut pid_one).cast(),
            )
        };
        if pid < 0 {
            return Err(fail(diag, b"start the command", errno()));
        }
        keep(pid, alive[1])
    }
}

/// What pid 1 needs, in the keeper's memory.
struct PidOne<'a> {
    diag: i32,
    private_proc: bool,
    ruleset: i32,
    exec: &'a ExecPlan,
    /// The keeper-alive pipe: read end, write end.
    alive: [i32; 2],
}

/// Pid 1 of the new namespace: its own `/proc`, Landlock, then bash. Never returns on
/// success; on failure the step is on the diagnostics pipe and the exit code is 127.
extern "C" fn start_pid_one(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the keeper's `PidOne`, alive while the keeper waits for this exec.
    let pid_one = unsafe { &mut *arg.cast::<PidOne<'_>>() };
    let diag = pid_one.diag;
    let ready = (|| {
        // Its parent, the keeper, is outside the namespace, so `getppid` says 0: whether
        // the keeper still lives is told by the pipe it holds open.
        die_with_parent(0, diag)?;
        // SAFETY: closing this process's copy of the write end, then polling the read end.
        let gone = unsafe {
            libc::close(pid_one.alive[1]);
            let mut poll = libc::pollfd {
                fd: pid_one.alive[0],
                events: libc::POLLIN,
                revents: 0,
            };
            libc::poll(&raw mut poll, 1, 0) > 0 && poll.revents & libc::POLLHUP != 0
        };
        if gone {
            return Err(fail(diag, b"start: keel is gone", libc::ESRCH));
        }
        if pid_one.private_proc {
            let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
            mount(c"proc", c"/proc", c"proc", flags, diag, b"mount /proc")?;
        }
        close_inherited();
        drop_capabilities();
        restrict(pid_one.ruleset, diag)
    })();
    if ready.is_ok() {
        let exec = pid_one.exec;
        // SAFETY: null-terminated arrays of C strings that live in the keeper's memory.
        unsafe {
            libc::execve(
                exec.program.as_ptr(),
                exec.argv.as_ptr(),
                exec.envp.as_ptr(),
            );
        }
        fail(diag, b"execute bash", errno());
    }
    // SAFETY: ends this process without running anything of the keeper's.
    unsafe { libc::_exit(127) }
}

/// Applies the Landlock ruleset `fd` (with `no_new_privs`, which Landlock requires of an
/// unprivileged caller and which keeps setuid programs from gaining anything). A plan
/// without a ruleset is the namespace probe's; every command's plan has one.
fn restrict(fd: i32, diag: i32) -> io::Result<()> {
    if fd < 0 {
        return Ok(());
    }
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
fn close_inherited() {
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
fn die_with_parent(expected: libc::pid_t, diag: i32) -> io::Result<()> {
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
fn drop_capabilities() {
    let bits = libc::SECBIT_NOROOT
        | libc::SECBIT_NOROOT_LOCKED
        | libc::SECBIT_NO_SETUID_FIXUP
        | libc::SECBIT_NO_SETUID_FIXUP_LOCKED
        | libc::SECBIT_NO_CAP_AMBIENT_RAISE
        | libc::SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED
        | libc::SECBIT_KEEP_CAPS_LOCKED;
    // SAFETY: prctl and capset with integer arguments and a header and data this function
    // owns.
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
        #[repr(C)]
        struct Header {
            version: u32,
            pid: i32,
        }
        #[repr(C)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        let mut header = Header {
            version: 0x2008_0522,
            pid: 0,
        };
        let data = [
            Data {
                effective: 0,
                permitted: 0,
                inheritable: 0,
            },
            Data {
                effective: 0,
                permitted: 0,
                inheritable: 0,
            },
        ];
        libc::syscall(libc::SYS_capset, &raw mut header, data.as_ptr());
    }
}

/// Enters the namespaces and arranges the mounts.
fn enter(ns: &Namespaces, diag: i32) -> io::Result<()> {
    let mut flags = libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWPID;
    if ns.network {
        flags |= libc::CLONE_NEWNET;
    }
    // SAFETY: unshare with flags only.
    if unsafe { libc::unshare(flags) } != 0 {
        return Err(fail(diag, b"create the namespaces", errno()));
    }
    // Without `deny`, an unprivileged process may not write its gid map.
    match write_file(c"/proc/self/setgroups", b"deny") {
        Ok(()) => {}
        Err(e) if e == libc::ENOENT => {}
        Err(e) => return Err(fail(diag, b"write /proc/self/setgroups", e)),
    }
    write_file(c"/proc/self/uid_map", &ns.uid_map)
        .map_err(|e| fail(diag, b"write /proc/self/uid_map", e))?;
    write_file(c"/proc/self/gid_map", &ns.gid_map)
        .map_err(|e| fail(diag, b"write /proc/self/gid_map", e))?;
    // Nothing mounted here may reach keel's own namespace.
    mount_raw(None, c"/", None, libc::MS_REC | libc::MS_PRIVATE, None)
        .map_err(|e| fail(diag, b"make the mounts private", e))?;
    let hide = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    for dir in &ns.mask_dirs {
        match mount_raw(
            Some(c"tmpfs"),
            dir,
            Some(c"tmpfs"),
            hide,
            Some(c"mode=0,size=4k"),
        ) {
            Ok(()) => {}
            // Gone since it was listed: nothing left to hide.
            Err(e) if e == libc::ENOENT => {}
            Err(e) => return Err(fail(diag, b"hide a credential folder", e)),
        }
    }
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

/// The keeper: waits for pid 1 and ends as it ended (the same exit code, or the same
/// signal). Never returns. `alive` is the one descriptor it keeps (`-1`: none).
pub(crate) fn keep(pid: libc::pid_t, alive: i32) -> ! {
    // Output, the exec-error pipe and the diagnostics pipe belong to the command: holding
    // them here would keep keel waiting for an end of output after the command ended. Only
    // the write end of the keeper-alive pipe stays.
    close_all_but(alive);
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
fn close_all_but(keep: i32) {
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
fn fail(diag: i32, step: &[u8], errno: i32) -> io::Error {
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
