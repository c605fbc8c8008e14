//! Which process runs a turn, so a resumed session can tell a turn a crash left behind from
//! one another keel process is still running.
//!
//! A pid alone is not an identity: pids are reused. The owner is recorded as the boot id, the
//! pid and the process's start time (in clock ticks since boot, from `/proc/PID/stat`), which
//! together name one process for as long as the machine is up.

use std::fmt;

/// One process, identified across pid reuse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessOwner {
    /// `/proc/sys/kernel/random/boot_id`, empty where unknown.
    pub boot_id: String,
    /// The process id.
    pub pid: u32,
    /// Start time in clock ticks after boot; 0 where unknown.
    pub start_ticks: u64,
}

impl ProcessOwner {
    /// This process.
    pub fn current() -> Self {
        let pid = std::process::id();
        Self {
            boot_id: boot_id(),
            pid,
            start_ticks: start_ticks(pid).unwrap_or(0),
        }
    }

    /// Parses the stored form `BOOT/PID/START`; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
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

    /// Whether this process is still running: same boot, and the pid's start time matches.
    /// Without `/proc` (or with an unknown start time) a live pid counts as alive, which errs
    /// on the side of not closing another process's turn.
    pub fn is_alive(&self) -> bool {
        if !self.boot_id.is_empty() && self.boot_id != boot_id() {
            return false;
        }
        match start_ticks(self.pid) {
            Some(start) => self.start_ticks == 0 || start == self.start_ticks,
            None => false,
        }
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

/// Field 22 of `/proc/PID/stat`; `None` when there is no such process. The command name
/// (field 2) may hold spaces and parentheses, so fields are counted after its last `)`.
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    // After the name come field 3 (state) onwards; field 22 is the 20th of them.
    after_name.split_whitespace().nth(19)?.parse().ok()
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
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let dead = ProcessOwner {
            pid,
            start_ticks: start_ticks(pid).unwrap_or(1),
            ..me
        };
        child.wait().unwrap();
        assert!(!dead.is_alive());
        assert_eq!(ProcessOwner::parse("not an owner"), None);
    }
}
