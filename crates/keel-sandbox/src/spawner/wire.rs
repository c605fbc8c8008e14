//! What keel and the spawner say to each other over their socket.
//!
//! A request is a command's whole plan: its mounts ([`Namespaces`]) and what it executes
//! ([`ExecPlan`]), framed by its length, with the command's descriptors attached (the pipe
//! its exit status goes to, its three standard streams, its Landlock ruleset). A reply is
//! the command's pid with a pidfd attached, or the errno and the step that failed.

use std::ffi::CString;
use std::io;
use std::os::fd::{FromRawFd as _, OwnedFd, RawFd};

use crate::child::ExecPlan;
use crate::mounts::{Namespaces, PrivateTmp};

/// Bumped whenever the layout changes (keel and its spawner are always the same build,
/// but a spawner exec'd from a binary replaced on disk may not be).
const VERSION: u32 = 2;
/// The most a request may hold (arguments and environment included).
pub(crate) const MAX_REQUEST: usize = 16 << 20;
/// The most descriptors a message carries.
pub(crate) const MAX_FDS: usize = 8;

const NEW_NETWORK: u32 = 1;
const PRIVATE_PROC: u32 = 2;
const PRIVATE_PTS: u32 = 4;
const PRIVATE_TMP: u32 = 8;
const JOIN_NETWORK: u32 = 16;

/// A request to start a command.
const SPAWN: u32 = 1;
/// A request to make a network namespace with a listening proxy socket in it.
const NETWORK: u32 = 2;

/// What keel asks the spawner for.
pub(crate) enum Request {
    /// Start a command: its mounts and what it executes.
    Spawn(Box<Namespaces>, ExecPlan),
    /// Make a network namespace with loopback up and a socket listening on this port of
    /// `127.0.0.1`.
    Network(u16),
}

/// A request for a network namespace, framed.
pub(crate) fn encode_network(port: u16) -> Vec<u8> {
    let mut out = Writer(vec![0; 4]);
    out.u32(VERSION);
    out.u32(NETWORK);
    out.u32(u32::from(port));
    out.framed()
}

/// A command's plan as one framed message (the length first).
pub(crate) fn encode(ns: &Namespaces, exec: &ExecPlan) -> Vec<u8> {
    let mut out = Writer(vec![0; 4]);
    let mut flags = 0;
    for (on, bit) in [
        (ns.network, NEW_NETWORK),
        (ns.private_proc, PRIVATE_PROC),
        (ns.private_pts, PRIVATE_PTS),
        (ns.private_tmp.is_some(), PRIVATE_TMP),
        (ns.join_network, JOIN_NETWORK),
    ] {
        if on {
            flags |= bit;
        }
    }
    out.u32(VERSION);
    out.u32(SPAWN);
    out.u32(flags);
    for list in [
        &ns.mask_dirs,
        &ns.mask_files,
        &ns.pinned,
        &ns.read_only,
        &ns.writable,
    ] {
        out.list(list);
    }
    out.bytes(ns.cwd.as_bytes());
    if let Some(tmp) = &ns.private_tmp {
        out.bytes(tmp.folder.as_bytes());
        out.u32(u32::try_from(tmp.keep.len()).unwrap_or(u32::MAX));
        for (source, inside) in &tmp.keep {
            out.bytes(source.as_bytes());
            out.bytes(inside.as_bytes());
        }
    }
    let (program, args, vars) = exec.parts();
    out.bytes(program.as_bytes());
    out.list(args);
    out.list(vars);
    out.framed()
}

/// A request's body back; `None` when it is malformed.
pub(crate) fn decode(body: &[u8]) -> Option<Request> {
    let mut r = Reader(body);
    if r.u32()? != VERSION {
        return None;
    }
    match r.u32()? {
        SPAWN => decode_spawn(r),
        NETWORK => {
            let port = u16::try_from(r.u32()?).ok()?;
            r.0.is_empty().then_some(Request::Network(port))
        }
        _ => None,
    }
}

fn decode_spawn(mut r: Reader<'_>) -> Option<Request> {
    let flags = r.u32()?;
    let mask_dirs = r.list()?;
    let mask_files = r.list()?;
    let pinned = r.list()?;
    let read_only = r.list()?;
    let writable = r.list()?;
    let cwd = r.string()?;
    let private_tmp = if flags & PRIVATE_TMP != 0 {
        let folder = r.string()?;
        let count = r.u32()?;
        let mut keep = Vec::new();
        for _ in 0..count {
            keep.push((r.string()?, r.string()?));
        }
        Some(PrivateTmp { folder, keep })
    } else {
        None
    };
    let program = r.string()?;
    let args = r.list()?;
    let vars = r.list()?;
    if !r.0.is_empty() {
        return None;
    }
    let ns = Namespaces {
        network: flags & NEW_NETWORK != 0,
        join_network: flags & JOIN_NETWORK != 0,
        mask_dirs,
        mask_files,
        pinned,
        read_only,
        writable,
        cwd,
        private_tmp,
        private_proc: flags & PRIVATE_PROC != 0,
        private_pts: flags & PRIVATE_PTS != 0,
    };
    Some(Request::Spawn(
        Box::new(ns),
        ExecPlan::new(program, args, vars),
    ))
}

/// A reply: `errno` 0 and the pid (a pidfd attached), or the errno and the failed step as
/// the diagnostics pipe spells it.
pub(crate) fn reply(errno: i32, pid: i32, diag: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(12 + diag.len());
    out.extend_from_slice(&errno.to_le_bytes());
    out.extend_from_slice(&pid.to_le_bytes());
    out.extend_from_slice(&u32::try_from(diag.len()).unwrap_or(0).to_le_bytes());
    out.extend_from_slice(diag);
    out
}

/// The size of a reply's fixed part.
const REPLY_HEAD: usize = 12;

/// A reply as read: the errno (0: done), the pid, the failed step's `STEP\0ERRNO` bytes
/// and the descriptors that came with it.
pub(crate) struct Reply {
    pub errno: i32,
    pub pid: i32,
    pub diag: Vec<u8>,
    pub fds: Vec<OwnedFd>,
}

/// Reads one reply from the socket `sock`.
pub(crate) fn read_reply(sock: RawFd) -> io::Result<Reply> {
    let mut fds = Vec::new();
    let mut head = [0u8; REPLY_HEAD];
    fill(sock, &mut head, &mut fds)?;
    let mut r = Reader(&head);
    let malformed = || io::Error::other("the spawner's answer is malformed");
    let errno = i32::from_le_bytes(
        r.take(4)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(malformed)?,
    );
    let pid = i32::from_le_bytes(
        r.take(4)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(malformed)?,
    );
    let len = r
        .u32()
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| *n <= 4096)
        .ok_or_else(malformed)?;
    let mut diag = vec![0u8; len];
    fill(sock, &mut diag, &mut fds)?;
    Ok(Reply {
        errno,
        pid,
        diag,
        fds,
    })
}

/// Reads exactly `buf.len()` bytes from the socket `sock`, keeping the descriptors that
/// come with them; the end of the stream first is `UnexpectedEof`.
pub(crate) fn fill(sock: RawFd, buf: &mut [u8], fds: &mut Vec<OwnedFd>) -> io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        let n = recv(sock, buf.get_mut(got..).unwrap_or(&mut []), fds)?;
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        got += n;
    }
    Ok(())
}

struct Writer(Vec<u8>);

impl Writer {
    /// The message with its length in front.
    fn framed(mut self) -> Vec<u8> {
        let body = u32::try_from(self.0.len() - 4).unwrap_or(u32::MAX);
        if let Some(head) = self.0.get_mut(..4) {
            head.copy_from_slice(&body.to_le_bytes());
        }
        self.0
    }

    fn u32(&mut self, value: u32) {
        self.0.extend_from_slice(&value.to_le_bytes());
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.u32(u32::try_from(bytes.len()).unwrap_or(u32::MAX));
        self.0.extend_from_slice(bytes);
    }

    fn list(&mut self, list: &[CString]) {
        self.u32(u32::try_from(list.len()).unwrap_or(u32::MAX));
        for item in list {
            self.bytes(item.as_bytes());
        }
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn string(&mut self) -> Option<CString> {
        let len = usize::try_from(self.u32()?).ok()?;
        CString::new(self.take(len)?).ok()
    }

    fn list(&mut self) -> Option<Vec<CString>> {
        let count = usize::try_from(self.u32()?).ok()?;
        // Each item takes at least its length: a count past the bytes left is malformed.
        if count > self.0.len() / 4 {
            return None;
        }
        (0..count).map(|_| self.string()).collect()
    }
}

/// Sends `bytes` on the socket `sock`, with `fds` attached to the first part.
#[expect(
    unsafe_code,
    reason = "sendmsg with SCM_RIGHTS has no safe wrapper in std"
)]
pub(crate) fn send(sock: RawFd, bytes: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let mut sent = 0usize;
    while sent < bytes.len() {
        let rest = bytes.get(sent..).unwrap_or(&[]);
        let mut iov = libc::iovec {
            iov_base: rest.as_ptr().cast_mut().cast(),
            iov_len: rest.len(),
        };
        let fd_bytes = u32::try_from(std::mem::size_of_val(fds)).unwrap_or(0);
        // u64 words keep the control buffer aligned for `cmsghdr`.
        // SAFETY: CMSG_SPACE is arithmetic.
        let space = unsafe { libc::CMSG_SPACE(fd_bytes) } as usize;
        let mut control = vec![0u64; space.div_ceil(8)];
        // SAFETY: a zeroed msghdr is valid; every pointer set below outlives the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        if sent == 0 && !fds.is_empty() {
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = space as _;
            // SAFETY: the control buffer has room for one header and `fds`.
            unsafe {
                let cmsg = libc::CMSG_FIRSTHDR(&raw const msg);
                (*cmsg).cmsg_level = libc::SOL_SOCKET;
                (*cmsg).cmsg_type = libc::SCM_RIGHTS;
                (*cmsg).cmsg_len = libc::CMSG_LEN(fd_bytes) as _;
                std::ptr::copy_nonoverlapping(
                    fds.as_ptr(),
                    libc::CMSG_DATA(cmsg).cast::<RawFd>(),
                    fds.len(),
                );
            }
        }
        // SAFETY: the message points at live buffers.
        let n = unsafe { libc::sendmsg(sock, &raw const msg, libc::MSG_NOSIGNAL) };
        if n < 0 {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        }
        sent += usize::try_from(n).unwrap_or(0);
    }
    Ok(())
}

/// Reads what is there (at most `buf.len()` bytes) from the socket `sock`, keeping the
/// descriptors that came with it (close-on-exec) in `fds`; 0 is the end.
#[expect(
    unsafe_code,
    reason = "recvmsg with SCM_RIGHTS has no safe wrapper in std"
)]
pub(crate) fn recv(sock: RawFd, buf: &mut [u8], fds: &mut Vec<OwnedFd>) -> io::Result<usize> {
    let fd_bytes = u32::try_from(MAX_FDS * size_of::<RawFd>()).unwrap_or(0);
    // SAFETY: CMSG_SPACE is arithmetic.
    let space = unsafe { libc::CMSG_SPACE(fd_bytes) } as usize;
    let mut control = vec![0u64; space.div_ceil(8)];
    loop {
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: a zeroed msghdr is valid; every pointer set below outlives the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &raw mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        // SAFETY: the message points at live buffers of the sizes given.
        let n = unsafe { libc::recvmsg(sock, &raw mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        }
        // SAFETY: walking the control messages the kernel wrote into `control`; each
        // SCM_RIGHTS payload holds descriptors now owned by this process.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&raw const msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                    let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                    let header = libc::CMSG_LEN(0) as usize;
                    let count =
                        ((*cmsg).cmsg_len as usize).saturating_sub(header) / size_of::<RawFd>();
                    for i in 0..count {
                        fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                    }
                }
                cmsg = libc::CMSG_NXTHDR(&raw const msg, cmsg);
            }
        }
        return Ok(usize::try_from(n).unwrap_or(0));
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd as _;

    use super::*;

    fn c(s: &str) -> CString {
        CString::new(s).unwrap()
    }

    fn plan() -> (Namespaces, ExecPlan) {
        let ns = Namespaces {
            network: true,
            join_network: false,
            mask_dirs: vec![c("/root/.ssh")],
            mask_files: vec![c("/tmp/sock"), c("/root/.npmrc")],
            pinned: vec![c("/w/.git")],
            read_only: vec![c("/w/.keel/config.toml")],
            writable: vec![c("/w"), c("/tmp")],
            cwd: c("/w"),
            private_tmp: Some(PrivateTmp {
                folder: c("/tmp/keel-session-1"),
                keep: vec![(c("/tmp/ws"), c("/tmp/keel-session-1/ws"))],
            }),
            private_proc: true,
            private_pts: false,
        };
        let exec = ExecPlan::new(
            c("/usr/bin/bash"),
            vec![c("/usr/bin/bash"), c("-c"), c("echo hi")],
            vec![c("PATH=/usr/bin"), c("TMPDIR=/tmp")],
        );
        (ns, exec)
    }

    #[test]
    fn a_plan_reads_back_as_it_was_written() {
        let (ns, exec) = plan();
        let message = encode(&ns, &exec);
        let len = u32::from_le_bytes(message[..4].try_into().unwrap()) as usize;
        assert_eq!(len, message.len() - 4);
        let Some(Request::Spawn(back, exec_back)) = decode(&message[4..]) else {
            panic!("not a spawn request");
        };
        assert_eq!(*back, ns);
        assert_eq!(exec_back.parts(), exec.parts());
    }

    #[test]
    fn a_cut_or_padded_request_is_refused() {
        let (ns, exec) = plan();
        let message = encode(&ns, &exec);
        for end in 4..message.len() {
            assert!(decode(&message[4..end]).is_none(), "cut at {end}");
        }
        let mut padded = message[4..].to_vec();
        padded.push(0);
        assert!(decode(&padded).is_none());
    }

    #[test]
    fn a_network_request_reads_back() {
        let message = encode_network(3128);
        assert!(matches!(
            decode(&message[4..]),
            Some(Request::Network(3128))
        ));
        assert!(decode(&message[4..message.len() - 1]).is_none());
    }

    #[test]
    fn a_reply_reads_back_with_its_descriptor() {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let (pipe, _) = std::io::pipe().unwrap();
        let bytes = reply(13, 42, b"mount /proc\x0013");
        send(theirs.as_raw_fd(), &bytes, &[pipe.as_raw_fd()]).unwrap();
        let back = read_reply(ours.as_raw_fd()).unwrap();
        assert_eq!((back.errno, back.pid), (13, 42));
        assert_eq!(back.diag, b"mount /proc\x0013");
        assert_eq!(back.fds.len(), 1);
        drop(theirs);
        assert_eq!(
            read_reply(ours.as_raw_fd()).err().map(|e| e.kind()),
            Some(io::ErrorKind::UnexpectedEof)
        );
    }
}
