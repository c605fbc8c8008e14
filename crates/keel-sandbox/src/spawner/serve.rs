//! The spawner process: it holds a user namespace and starts each command keel asks for
//! as pid 1 of a new pid and mount namespace within it.
//!
//! It is single-threaded and small, and each command starts as a clone of it that shares
//! its memory until it executes (like `vfork`), so nothing is copied.
//! It reads requests from its socket, starts the command (waiting, like `vfork`, until the
//! command executed or failed), replies, and writes each command's wait status to the
//! pipe keel gave with it when the command ends. When keel's end of the socket closes
//! (keel is gone) it kills its commands and exits; each command also dies with it
//! (`PR_SET_PDEATHSIG`), so nothing it started outlives keel.
#![expect(
    unsafe_code,
    reason = "clone with new namespaces, poll, waitpid and pidfd_open have no safe wrappers"
)]

use std::io;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};

use crate::child::{ExecPlan, Start, close_all_but, errno, start_command};
use crate::mounts::{Namespaces, enter_user, id_maps};
use crate::spawner::wire;

/// A command that runs: its pid, a pidfd to watch it, the pipe its status goes to.
struct Running {
    pid: libc::pid_t,
    pidfd: OwnedFd,
    status: OwnedFd,
}

/// Serves requests on the socket `sock` until keel is gone; never returns. Call in a
/// process of its own (exec'd or forked), with no other thread.
pub(crate) fn serve(sock: RawFd) -> ! {
    // Nothing of the program it was started from stays open, and its standard streams
    // are the null device (a command's come with each request).
    close_all_but(sock);
    null_streams();
    // SAFETY: prctl with a NUL-terminated name; chdir to a valid C string (the spawner
    // keeps no folder of the user's busy; commands enter theirs).
    unsafe {
        libc::prctl(libc::PR_SET_NAME, c"keel-spawner".as_ptr(), 0, 0, 0);
        libc::chdir(c"/".as_ptr());
    }
    let ready = prepare();
    let alive = match ready {
        Ok(alive) => {
            let _ = wire::send(sock, &wire::reply(0, own_pid(), &[]), &[]);
            crate::pages::release_clean_pages();
            alive
        }
        Err((code, diag)) => {
            refuse(sock, code, &diag);
            exit(1)
        }
    };
    let mut running: Vec<Running> = Vec::new();
    let mut stack = Stack::default();
    loop {
        let mut polled = Vec::with_capacity(running.len() + 1);
        polled.push(libc::pollfd {
            fd: sock,
            events: libc::POLLIN,
            revents: 0,
        });
        polled.extend(running.iter().map(|r| libc::pollfd {
            fd: r.pidfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }));
        let count = libc::nfds_t::try_from(polled.len()).unwrap_or(0);
        // SAFETY: polling descriptors this process holds, in a live array.
        if unsafe { libc::poll(polled.as_mut_ptr(), count, -1) } < 0 {
            if errno() == libc::EINTR {
                continue;
            }
            shut_down(&running);
        }
        let ended: Vec<usize> = polled
            .iter()
            .skip(1)
            .enumerate()
            .filter(|(_, p)| p.revents != 0)
            .map(|(i, _)| i)
            .collect();
        for i in ended.into_iter().rev() {
            if running.get(i).is_some_and(reap) {
                running.swap_remove(i);
            }
        }
        if polled.first().is_some_and(|p| p.revents != 0) {
            match read_request(sock) {
                Ok(Some((body, fds))) => match wire::decode(&body) {
                    Some(wire::Request::Spawn(ns, exec)) => {
                        if let Some(command) = start(&ns, &exec, fds, alive, &mut stack, sock) {
                            running.push(command);
                        }
                    }
                    Some(wire::Request::Network(port)) => network(port, sock),
                    None => refuse(sock, libc::EINVAL, MALFORMED),
                },
                // keel is gone (or said something no keel says): so are its commands.
                Ok(None) | Err(_) => shut_down(&running),
            }
        }
    }
}

/// Enters the user namespace and makes the spawner unreachable; returns the
/// spawner-alive pipe.
fn prepare() -> Result<[RawFd; 2], (i32, Vec<u8>)> {
    let (maps, diag) = (id_maps(), Diagnostics::new());
    let Some(mut diag) = diag else {
        return Err((errno(), b"create a pipe\x00".to_vec()));
    };
    enter_user(0, &maps.0, &maps.1, diag.write_end())
        .map_err(|e| (e.raw_os_error().unwrap_or(libc::EIO), diag.read()))?;
    // Only now: a process that cannot be dumped may not write its own id maps. From here
    // no process of the user's may `ptrace` it or read its memory, commands included.
    // SAFETY: prctl with integer arguments.
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    }
    // What each command would drop at exec, dropped once for all of them: they inherit it.
    crate::child::lock_capabilities();
    // Commands hold its read end: they see it hang up when the spawner is gone.
    let mut alive = [-1i32; 2];
    // SAFETY: pipe2 fills the two-element array.
    if unsafe { libc::pipe2(alive.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err((errno(), b"create a pipe\x00".to_vec()));
    }
    Ok(alive)
}

/// Reads one request: its body and the descriptors that came with it. `None`: the end.
fn read_request(sock: RawFd) -> io::Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
    let mut fds = Vec::new();
    let mut head = [0u8; 4];
    let at_end = |e: &io::Error| e.kind() == io::ErrorKind::UnexpectedEof;
    match wire::fill(sock, &mut head, &mut fds) {
        Err(e) if at_end(&e) => return Ok(None),
        other => other?,
    }
    let len = usize::try_from(u32::from_le_bytes(head)).unwrap_or(usize::MAX);
    if len > wire::MAX_REQUEST {
        return Ok(None);
    }
    let mut body = vec![0u8; len];
    match wire::fill(sock, &mut body, &mut fds) {
        Err(e) if at_end(&e) => return Ok(None),
        other => other?,
    }
    Ok(Some((body, fds)))
}

/// What the spawner answers to a request no keel sends: the step and `EINVAL`.
const MALFORMED: &[u8] = b"read the request\x0022";

/// Answers a request with the errno and the failed step.
fn refuse(sock: RawFd, code: i32, step: &[u8]) {
    let _ = wire::send(sock, &wire::reply(code, 0, step), &[]);
}

/// Starts the command a request asks for and replies; what runs is returned.
fn start(
    ns: &Namespaces,
    exec: &ExecPlan,
    fds: Vec<OwnedFd>,
    alive: [RawFd; 2],
    stack: &mut Stack,
    sock: RawFd,
) -> Option<Running> {
    let refuse = |code: i32, step: &[u8]| {
        refuse(sock, code, step);
        None
    };
    let mut fds = fds.into_iter();
    let (Some(status), Some(stdin), Some(stdout), Some(stderr), Some(ruleset)) =
        (fds.next(), fds.next(), fds.next(), fds.next(), fds.next())
    else {
        return refuse(libc::EINVAL, MALFORMED);
    };
    let network = if ns.join_network { fds.next() } else { None };
    if ns.join_network && network.is_none() {
        return refuse(libc::EINVAL, MALFORMED);
    }
    let Some(mut diag) = Diagnostics::new() else {
        return refuse(errno(), b"create a pipe\x00");
    };
    let plan = Start {
        ns,
        exec,
        network: network.as_ref().map_or(-1, |fd| fd.as_raw_fd()),
        streams: [stdin.as_raw_fd(), stdout.as_raw_fd(), stderr.as_raw_fd()],
        ruleset: ruleset.as_raw_fd(),
        alive,
        diag: diag.write_end(),
    };
    let mut flags = libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_VFORK;
    if ns.network {
        flags |= libc::CLONE_NEWNET;
    }
    let Some(stack) = stack.top() else {
        return refuse(libc::ENOMEM, b"make the command's stack\x00");
    };
    // SAFETY: the child shares the spawner's memory (nothing is copied) but runs on a
    // stack of its own, and the spawner, single-threaded, sleeps (CLONE_VFORK) until the
    // child executed or exited, so nothing else runs in that memory meanwhile. The child
    // only runs `start_command`, which makes system calls on the plan and writes nothing
    // but its own stack; `plan` outlives the call.
    let pid = unsafe {
        libc::clone(
            enter_command,
            stack,
            flags | libc::CLONE_VM | libc::SIGCHLD,
            (&raw const plan).cast_mut().cast(),
        )
    };
    let code = errno();
    diag.close_write_end();
    let pid = libc::pid_t::try_from(pid).unwrap_or(-1);
    if pid < 0 {
        return refuse(code, b"create the namespaces\x00");
    }
    let failed = diag.read();
    if !failed.is_empty() {
        wait_for(pid);
        return refuse(libc::EIO, &failed);
    }
    // SAFETY: pidfd_open on the spawner's own child, which is not reaped yet.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0u32) };
    let Ok(pidfd) = RawFd::try_from(pidfd) else {
        return refuse(errno(), b"watch the command\x00");
    };
    if pidfd < 0 {
        let code = errno();
        // SAFETY: killing and reaping the spawner's own child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        wait_for(pid);
        return refuse(code, b"watch the command\x00");
    }
    // SAFETY: the kernel just created this descriptor for this process.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    let _ = crate::sys::set_nonblocking(std::os::fd::AsFd::as_fd(&status));
    let _ = wire::send(sock, &wire::reply(0, pid, &[]), &[pidfd.as_raw_fd()]);
    Some(Running { pid, pidfd, status })
}

/// Where a command's first process starts, on its own stack in the spawner's memory.
extern "C" fn enter_command(plan: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `start` passes a pointer to a `Start` that lives until the child executed
    // or exited (the spawner sleeps until then).
    let plan = unsafe { &*plan.cast::<Start<'_>>() };
    start_command(plan)
}

/// The stack a command's first process runs on until it executes, made once and used by
/// one command at a time (the spawner waits for each to execute before the next).
#[derive(Default)]
struct Stack {
    base: Option<std::ptr::NonNull<libc::c_void>>,
}

impl Stack {
    /// Its size; the steps before exec need a few KiB.
    const SIZE: usize = 256 * 1024;
    /// Its lowest page, left unmapped so an overflow faults instead of writing the heap.
    const GUARD: usize = 4096;

    /// The top of the stack (stacks grow down), mapped at the first call.
    fn top(&mut self) -> Option<*mut libc::c_void> {
        if self.base.is_none() {
            // SAFETY: a new private anonymous mapping; nothing else refers to it.
            let base = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    Self::SIZE,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                    -1,
                    0,
                )
            };
            if base == libc::MAP_FAILED {
                return None;
            }
            // SAFETY: the lowest page of the mapping just made.
            if unsafe { libc::mprotect(base, Self::GUARD, libc::PROT_NONE) } != 0 {
                // SAFETY: unmapping the mapping just made.
                unsafe { libc::munmap(base, Self::SIZE) };
                return None;
            }
            self.base = std::ptr::NonNull::new(base);
        }
        let base = self.base?.as_ptr().cast::<u8>();
        // SAFETY: one past the end of the mapping, which is where a stack starts.
        Some(unsafe { base.add(Self::SIZE) }.cast())
    }
}

/// Makes a network namespace (in a short-lived copy of the spawner: a process cannot leave
/// one it entered) with loopback up and a socket listening on `127.0.0.1:port`, and sends
/// keel the socket and the namespace.
fn network(port: u16, sock: RawFd) {
    let (ours, theirs) = match std::os::unix::net::UnixStream::pair() {
        Ok(pair) => pair,
        Err(e) => {
            let code = e.raw_os_error().unwrap_or(libc::EIO);
            return refuse(sock, code, b"create a socket\x00");
        }
    };
    // SAFETY: fork of this single-threaded process; the copy makes the namespace, sends
    // two descriptors and exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = match make_network(port) {
            Ok((listener, namespace)) => {
                let fds = [listener.as_raw_fd(), namespace.as_raw_fd()];
                let sent = wire::send(theirs.as_raw_fd(), &wire::reply(0, 0, &[]), &fds);
                i32::from(sent.is_err())
            }
            Err((code, step)) => {
                refuse(theirs.as_raw_fd(), code, step);
                1
            }
        };
        exit(code)
    }
    drop(theirs);
    if pid < 0 {
        return refuse(sock, errno(), b"create the network namespace\x00");
    }
    let answer = wire::read_reply(ours.as_raw_fd());
    wait_for(pid);
    match answer {
        Ok(reply) if reply.errno == 0 && reply.fds.len() == 2 => {
            let raw: Vec<RawFd> = reply.fds.iter().map(|fd| fd.as_raw_fd()).collect();
            let _ = wire::send(sock, &wire::reply(0, 0, &[]), &raw);
        }
        Ok(reply) if reply.errno != 0 => refuse(sock, reply.errno, &reply.diag),
        _ => refuse(sock, libc::EIO, b"create the network namespace\x005"),
    }
}

/// In the copy: a new network namespace, loopback up, the listening socket.
fn make_network(port: u16) -> Result<(OwnedFd, OwnedFd), (i32, &'static [u8])> {
    // SAFETY: unshare with a flag only.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err((errno(), b"create the network namespace\x00"));
    }
    loopback_up().map_err(|code| (code, b"bring the loopback up\x00".as_slice()))?;
    let listener =
        std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port)).map_err(|e| {
            (
                e.raw_os_error().unwrap_or(libc::EIO),
                b"listen for the proxy\x00".as_slice(),
            )
        })?;
    let namespace = std::fs::File::open("/proc/self/ns/net").map_err(|e| {
        (
            e.raw_os_error().unwrap_or(libc::EIO),
            b"open the network namespace\x00".as_slice(),
        )
    })?;
    Ok((listener.into(), namespace.into()))
}

/// Sets the `lo` interface up.
fn loopback_up() -> Result<(), i32> {
    // SAFETY: a datagram socket for the interface ioctls, closed below; the request
    // struct is zeroed and named "lo".
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(errno());
        }
        let fd = OwnedFd::from_raw_fd(fd);
        let mut request: libc::ifreq = std::mem::zeroed();
        for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo") {
            *slot = *byte as libc::c_char;
        }
        if libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFFLAGS, &raw mut request) < 0 {
            return Err(errno());
        }
        request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        if libc::ioctl(fd.as_raw_fd(), libc::SIOCSIFFLAGS, &raw const request) < 0 {
            return Err(errno());
        }
    }
    Ok(())
}

/// Reaps a command that ended and tells keel its wait status; whether it was reaped.
fn reap(command: &Running) -> bool {
    let mut status = 0;
    // SAFETY: waitpid on the spawner's own child with a valid status pointer.
    let got = unsafe { libc::waitpid(command.pid, &raw mut status, libc::WNOHANG) };
    if got != command.pid {
        return got < 0 && errno() == libc::ECHILD;
    }
    let bytes = status.to_le_bytes();
    // SAFETY: writing a stack buffer to the pipe keel reads (room for it: nothing else is
    // ever written there).
    unsafe {
        libc::write(
            command.status.as_raw_fd(),
            bytes.as_ptr().cast(),
            bytes.len(),
        );
    }
    true
}

/// Waits for the spawner's child `pid` to end.
fn wait_for(pid: libc::pid_t) {
    let mut status = 0;
    // SAFETY: waitpid on the spawner's own child.
    while unsafe { libc::waitpid(pid, &raw mut status, 0) } < 0 && errno() == libc::EINTR {}
}

/// keel is gone: every command goes too, then the spawner.
fn shut_down(running: &[Running]) -> ! {
    for command in running {
        // SAFETY: its own children, not reaped yet, so the pids are theirs.
        unsafe { libc::kill(command.pid, libc::SIGKILL) };
    }
    exit(0)
}

fn exit(code: i32) -> ! {
    // SAFETY: ends the process without unwinding into whatever started it.
    unsafe { libc::_exit(code) }
}

fn own_pid() -> i32 {
    // SAFETY: getpid takes no arguments.
    unsafe { libc::getpid() }
}

/// Standard input, output and error on the null device.
fn null_streams() {
    // SAFETY: opening the null device and moving it onto the three standard descriptors.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for target in 0..3 {
                if null != target {
                    libc::dup2(null, target);
                }
            }
            if null > 2 {
                libc::close(null);
            }
        }
    }
}

/// A pipe a failing step writes `STEP\0ERRNO` to.
struct Diagnostics {
    read: std::io::PipeReader,
    write: Option<std::io::PipeWriter>,
}

impl Diagnostics {
    fn new() -> Option<Self> {
        let (read, write) = std::io::pipe().ok()?;
        Some(Self {
            read,
            write: Some(write),
        })
    }

    fn write_end(&self) -> RawFd {
        self.write.as_ref().map_or(-1, |fd| fd.as_raw_fd())
    }

    fn close_write_end(&mut self) {
        self.write = None;
    }

    /// What was written (the write end is closed first, so this ends).
    fn read(&mut self) -> Vec<u8> {
        self.close_write_end();
        let mut bytes = Vec::new();
        let _ = io::Read::read_to_end(&mut io::Read::take(&self.read, 4096), &mut bytes);
        bytes
    }
}
