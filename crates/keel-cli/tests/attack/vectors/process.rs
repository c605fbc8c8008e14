//! Processes that try to outlive the tool and keel (each tagged with `{MARK}`, a number unique
//! to the run, in its argv), signals a command sends to keel (`$PPID`), and tool calls that
//! share an id.

use crate::run::{Call, Vector};
use crate::sh;

/// Escapes from the command's process group and session.
pub const ESCAPES: &[Vector] = &[
    sh!("setsid-subshell", "(setsid sleep {MARK} &)"),
    sh!(
        "nohup-bg",
        "nohup sleep {MARK} > /dev/null 2>&1 & sleep 0.3"
    ),
    sh!(
        "disown",
        "sleep {MARK} > /dev/null 2>&1 & disown; sleep 0.3"
    ),
    sh!(
        "double-fork",
        "( (sleep {MARK} > /dev/null 2>&1 &) & ); sleep 0.3"
    ),
    sh!("setsid-f", "setsid -f sleep {MARK} > /dev/null 2>&1"),
    sh!(
        "setsid-ignoring-signals",
        r#"setsid bash -c 'trap "" HUP INT TERM; exec sleep {MARK}' > /dev/null 2>&1 & sleep 0.3"#
    ),
    sh!(
        "python-daemon",
        r#"python3 -c "import os
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp('sleep', ['sleep', '{MARK}'])"; sleep 0.3"#
    ),
    sh!(
        "perl-daemon",
        r#"perl -e 'use POSIX; fork and exit; POSIX::setsid(); fork and exit; exec "sleep", "{MARK}"' > /dev/null 2>&1; sleep 0.3"#
    ),
    sh!("bg-holding-pipe", "sleep {MARK} &"),
    sh!(
        "closed-fds",
        "nohup setsid sleep {MARK} <&- >&- 2>&- & sleep 0.3"
    ),
    sh!("renamed-argv0", "(exec -a keel-helper-{MARK} sleep 600 &)"),
    sh!(
        "script-session",
        "script -qfc 'sleep {MARK}' /dev/null > /dev/null 2>&1 & sleep 0.3"
    ),
    Vector {
        id: "background-tool",
        steps: &[&[Call::Bg("sleep {MARK}")]],
        ..Vector::BASE
    },
    Vector {
        id: "background-tool-setsid",
        steps: &[&[Call::Bg("setsid sleep {MARK}")], &[Call::Sh("sleep 0.3")]],
        ..Vector::BASE
    },
];

/// Signals at keel: keel must still finish by itself.
pub const SIGNALS: &[Vector] = &[
    sh!("kill-stop-ppid", "kill -STOP $PPID"),
    sh!("kill-9-ppid", "kill -9 $PPID"),
    sh!("kill-term-ppid", "kill -TERM $PPID; sleep 1"),
    sh!("kill-int-ppid", "kill -INT $PPID; sleep 1"),
    sh!("kill-hup-ppid", "kill -HUP $PPID; sleep 1"),
    sh!("kill-usr1-ppid", "kill -USR1 $PPID; sleep 1"),
    sh!("kill-segv-ppid", "kill -SEGV $PPID"),
    sh!(
        "kill-stop-parent-from-stat",
        r"kill -STOP $(awk '{print $4}' /proc/$$/stat)"
    ),
    sh!(
        "kill-group-of-ppid",
        "kill -9 -- -$(ps -o pgid= -p $PPID | tr -d ' ')"
    ),
    sh!(
        "kill-python-getppid",
        r#"python3 -c "import os,signal; os.kill(os.getppid(), signal.SIGKILL)""#
    ),
];

/// Tool calls of one response sharing an id (DESIGN §13).
pub const DUPLICATE_IDS: &[Vector] = &[
    Vector {
        id: "dup-two-bash",
        steps: &[&[Call::Sh("echo one"), Call::Sh("echo two")]],
        same_ids: true,
        ..Vector::BASE
    },
    Vector {
        id: "dup-read-then-cat",
        steps: &[&[
            Call::Tool("read", r#"{"path": "README.md"}"#),
            Call::Sh("cat ~/.ssh/id_rsa"),
        ]],
        same_ids: true,
        ..Vector::BASE
    },
    Vector {
        id: "dup-three",
        steps: &[&[
            Call::Sh("echo a"),
            Call::Sh("echo b > b.txt"),
            Call::Tool("ls", "{}"),
        ]],
        same_ids: true,
        ..Vector::BASE
    },
];
