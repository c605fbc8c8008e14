//! Processes: finding what a vector left running, signalling keel, and the private network
//! namespace the suite runs in.
//!
//! Every run's keel, mock server and listener live in a network namespace of their own with
//! only loopback, made by the test thread (namespaces belong to a thread, and children take
//! their creator's), so no vector and no regression can send a packet off the machine: the
//! `web_fetch` to 169.254.169.254 vector in particular.

use std::path::Path;
use std::time::{Duration, Instant};

/// A process seen in `/proc`.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Its pid.
    pub pid: i32,
    /// Its command line, arguments joined by spaces.
    pub cmdline: String,
}

/// Processes (other than this one) whose command line holds `mark` or whose working folder
/// lies under `root`.
pub fn find(mark: &str, root: Option<&Path>) -> Vec<Seen> {
    let me = std::process::id() as i32;
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<i32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline"))
            .map(|raw| {
                String::from_utf8_lossy(&raw)
                    .replace('\0', " ")
                    .trim()
                    .to_owned()
            })
            .unwrap_or_default();
        let in_root = root.is_some_and(|root| {
            std::fs::read_link(entry.path().join("cwd")).is_ok_and(|cwd| cwd.starts_with(root))
        });
        if cmdline.contains(mark) || in_root {
            out.push(Seen { pid, cmdline });
        }
    }
    out
}

/// Processes whose command line holds `mark`.
pub fn with_mark(mark: &str) -> Vec<Seen> {
    find(mark, None)
}

/// Processes left behind: those [`find`] still sees after a short grace (a process being
/// killed may linger a moment). Every one found is killed.
pub fn leftovers(mark: &str, root: &Path) -> Vec<Seen> {
    let deadline = Instant::now() + Duration::from_millis(600);
    let mut found = find(mark, Some(root));
    while !found.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        found = find(mark, Some(root));
    }
    for seen in &found {
        signal(seen.pid, libc::SIGKILL);
    }
    found
}

/// Sends `signal` to `pid`.
pub fn signal(pid: i32, signal: i32) {
    #[expect(unsafe_code, reason = "kill(2) has no safe wrapper in std")]
    // SAFETY: kill only sends a signal; a stale pid at worst returns ESRCH.
    unsafe {
        libc::kill(pid, signal);
    }
}

/// Whether `pid` is stopped (state `T` in `/proc/<pid>/stat`).
pub fn is_stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let after = stat.rfind(')')?;
            stat[after + 1..].trim_start().chars().next()
        })
        .is_some_and(|state| state == 'T' || state == 't')
}

/// Moves the calling thread into a new network namespace with loopback up, once per thread.
/// Returns why it could not, if it could not.
pub fn private_network() -> Result<(), String> {
    thread_local! {
        static DONE: std::cell::RefCell<Option<Result<(), String>>> =
            const { std::cell::RefCell::new(None) };
    }
    DONE.with(|done| {
        done.borrow_mut()
            .get_or_insert_with(|| {
                #[expect(unsafe_code, reason = "unshare(2) has no safe wrapper in std")]
                // SAFETY: unshare takes a flag word and changes only this thread's namespace.
                let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
                if rc != 0 {
                    return Err(format!(
                        "unshare(CLONE_NEWNET): {}",
                        std::io::Error::last_os_error()
                    ));
                }
                let up = std::process::Command::new("ip")
                    .args(["link", "set", "lo", "up"])
                    .output()
                    .map_err(|e| format!("ip link set lo up: {e}"))?;
                if !up.status.success() {
                    return Err(format!(
                        "ip link set lo up: {}",
                        String::from_utf8_lossy(&up.stderr)
                    ));
                }
                Ok(())
            })
            .clone()
    })
}
