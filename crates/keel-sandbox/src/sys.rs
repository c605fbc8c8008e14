//! Safe forms of the few system calls keel needs that std does not wrap.
#![expect(
    unsafe_code,
    reason = "getuid, getgid, fcntl and poll have no safe wrappers in std, nor tokio a safe way to watch a borrowed descriptor"
)]

use std::os::fd::{AsRawFd as _, BorrowedFd};

/// The user keel runs as: whose files keel's own folders and outputs must be.
pub fn own_uid() -> u32 {
    // SAFETY: getuid takes no arguments and cannot fail.
    unsafe { libc::getuid() }
}

/// The group keel runs as.
pub fn own_gid() -> u32 {
    // SAFETY: getgid takes no arguments and cannot fail.
    unsafe { libc::getgid() }
}

/// Makes reads and writes on `fd` return at once instead of waiting.
pub fn set_nonblocking(fd: BorrowedFd<'_>) -> std::io::Result<()> {
    // SAFETY: fcntl on a descriptor the caller lends for the call.
    let flags = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    // SAFETY: as above.
    if flags < 0
        || unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0
    {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whether standard output is already closed: a pipe whose reader is gone, a hung-up
/// terminal. Nothing written there could be read.
pub fn stdout_is_closed() -> bool {
    let mut stdout = libc::pollfd {
        fd: libc::STDOUT_FILENO,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one initialised pollfd and a count of one; a zero timeout never blocks, and
    // poll only writes `revents`.
    let ready = unsafe { libc::poll(&raw mut stdout, 1, 0) };
    ready == 1 && stdout.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0
}

/// Resolves when standard output reports an error (the pipe's reader is gone); never, for
/// a standard output that cannot be watched (a regular file is never closed under us).
pub async fn stdout_closed() {
    use tokio::io::Interest;
    use tokio::io::unix::AsyncFd;
    // SAFETY: descriptor 1 stays open for the whole process (nothing in keel closes it)
    // and `Stdout::as_raw_fd` always returns 1; the AsyncFd is dropped with this future.
    let registered = unsafe { AsyncFd::register_with_interest(std::io::stdout(), Interest::ERROR) };
    match registered {
        Ok(stdout) => {
            if stdout.ready(Interest::ERROR).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
        Err(_) => std::future::pending::<()>().await,
    }
}
