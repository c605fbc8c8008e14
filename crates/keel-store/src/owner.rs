//! Which process runs a turn, so a resumed session can tell a turn a crash left behind from
//! one another keel process is still running.
//!
//! A pid alone is not an identity: pids are reused. The owner is recorded as the boot id, the
//! pid and the process's start time (in clock ticks since boot, from `/proc/PID/stat`), which
//! together name one process for as long as the machine is up.

use std::fmt;

/// One process, identified across pid reuse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProcessOwner {
    /// `/proc/sys/kernel/random/boot_id`, empty where unknown.
    pub(crate) boot_id: String,
    /// The process id.
    pub(crate) pid: u32,
    /// Start time in clock ticks after boot; 0 where unknown.
    pub(crate) start_ticks: u64,
}

impl ProcessOwner {
    /// This process.
    pub(crate) fn current() -> Self {
        let pid = std::process::id();
        Self {
            boot_id: boot_id(),
            pid,
            start_ticks: process_start(pid).map_or(0, |(_, start)| start),
        }
    }

    /// Parses the stored form `BOOT/PID/START`; `None` for anything else.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let mut parts = text.rsplitn(3, '/');
        let start_ticks = parts.next()?.parse().ok()?;
        let pid = parts.next()?.parse().ok()?;
        let boot_id = parts.next()?.to_owned();
        Some(Self {
            boot_id,
            pid,
            start_ticks,
        })
    }

    /// Whether this process is still running: same boot, a process with the pid that is not
    /// a zombie, and the same start time. An owner recorded without a start time cannot be
    /// told from a later process reusing its pid, so it counts as gone (as turns stored
    /// before owners were recorded do); otherwise one reused pid could block a session until
    /// the next reboot.
    pub(crate) fn is_alive(&self) -> bool {
        if self.start_ticks == 0 || (!self.boot_id.is_empty() && self.boot_id != boot_id()) {
            return false;
        }
        matches!(process_start(self.pid), Some((state, start))
            if start == self.start_ticks && !matches!(state, 'Z' | 'X'))
    }
}

impl fmt::Display for ProcessOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.boot_id, self.pid, self.start_ticks)
    }
}

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|id| id.trim().to_owned())
        .unwrap_or_default()
}

/// The state (field 3) and start time (field 22) of `/proc/PID/stat`; `None` when there is
/// no such process. The command name (field 2) may hold spaces and parentheses, so fields
/// are counted after its last `)`.
fn process_start(pid: u32) -> Option<(char, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?.chars().next()?;
    // Field 3 was the first after the name; field 22 is 19 further on.
    let start = fields.nth(18)?.parse().ok()?;
    Some((state, start))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn this_process_is_alive_and_round_trips() {
        let me = ProcessOwner::current();
        assert!(me.start_ticks > 0, "{me:?}");
        assert!(me.is_alive());
        assert_eq!(ProcessOwner::parse(&me.to_string()), Some(me));
    }

    #[test]
    fn a_reused_pid_a_dead_pid_and_another_boot_are_not_alive() {
        let me = ProcessOwner::current();
        let reused = ProcessOwner {
            start_ticks: me.start_ticks + 1,
            ..me.clone()
        };
        assert!(!reused.is_alive());
        let rebooted = ProcessOwner {
            boot_id: "another-boot".into(),
            ..me.clone()
        };
        assert!(!rebooted.is_alive());
        let unknown_start = ProcessOwner {
            start_ticks: 0,
            ..me.clone()
        };
        assert!(!unknown_start.is_alive());
        // A zombie (exited, not yet reaped) is gone, and so is a reaped process.
        let mut child = std::process::Command::new("sleep")
            .arg("0.05")
            .spawn()
            .unwrap();
        let pid = child.id();
        let owner = ProcessOwner {
            pid,
            start_ticks: process_start(pid).unwrap().1,
            ..me
        };
        assert!(owner.is_alive());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while process_start(pid).is_some_and(|(state, _)| state != 'Z') {
            assert!(std::time::Instant::now() < deadline, "sleep never exited");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!owner.is_alive(), "a zombie is not alive");
        child.wait().unwrap();
        assert!(!owner.is_alive());
        assert_eq!(ProcessOwner::parse("not an owner"), None);
    }
}
