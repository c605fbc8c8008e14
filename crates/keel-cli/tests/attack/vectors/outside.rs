//! Writes outside the workspace: to the canary folder `{OUT}` (a sibling of the workspace,
//! not under a temp folder) and to the fake `HOME`, through every path form, link, program
//! and tool.

use crate::run::{Call, Vector};
use crate::{sh, tool};

/// Writes through the shell.
pub const SHELL: &[Vector] = &[
    sh!("touch", "touch {OUT}/p"),
    sh!("touch-brace", "touch {{OUT}/p,a}"),
    sh!("touch-existing", "touch {OUT}/target.txt"),
    sh!("touch-date", "touch -d 2001-01-01 {OUT}/run.sh"),
    sh!("echo-redirect", "echo x > {OUT}/p"),
    sh!("echo-append", "echo x >> {OUT}/target.txt"),
    sh!("clobber", "printf x >| {OUT}/target.txt"),
    sh!("symlink-dir-then-write", "ln -s {OUT} l && echo x > l/p"),
    sh!(
        "symlink-dotdot-write",
        "echo x > lnk/../p",
        setup "ln -s {OUT}/dir lnk"
    ),
    sh!("symlink-in-repo-write", "echo x > out/p", setup "ln -s {OUT} out"),
    sh!(
        "symlink-file-append",
        "echo x >> t.txt",
        setup "ln -s {OUT}/target.txt t.txt"
    ),
    sh!("hardlink-append", "ln {OUT}/target.txt hl && echo x >> hl"),
    sh!("hardlink-truncate", "ln {OUT}/target.txt hl && : > hl"),
    sh!(
        "hardlink-python",
        r#"ln {OUT}/target.txt hl && python3 -c "open('hl','a').write('x')""#
    ),
    sh!("dotdot-write", "echo x > ../outside/p"),
    sh!("cd-dotdot-touch", "cd .. && touch outside/p"),
    sh!("proc-self-root-write", "echo x > /proc/self/root{OUT}/p"),
    sh!(
        "proc-self-cwd-dotdot-write",
        "echo x > /proc/self/cwd/../outside/p"
    ),
    sh!("cp-into", "cp README.md {OUT}/"),
    sh!("cp-over", "cp README.md {OUT}/target.txt"),
    sh!("mv-in", "mv {OUT}/target.txt ."),
    sh!("mv-out", "mv README.md {OUT}/drop/"),
    sh!("rm", "rm -f {OUT}/target.txt"),
    sh!("rm-rf-dir", "rm -rf {OUT}/dir"),
    sh!("chmod", "chmod 777 {OUT}/target.txt"),
    sh!("mkdir", "mkdir {OUT}/newdir"),
    sh!("mkfifo", "mkfifo {OUT}/fifo"),
    sh!("ln-s-into", "ln -s /etc/hostname {OUT}/link"),
    sh!("truncate", "truncate -s 0 {OUT}/target.txt"),
    sh!("tee", "echo x | tee {OUT}/p"),
    sh!("install", "install -m 644 README.md {OUT}/p"),
    sh!("dd-of", "echo x | dd of={OUT}/target.txt status=none"),
    sh!("split", "split -b 4 README.md {OUT}/part-"),
    sh!("tar-x-C", "tar cf t.tar README.md && tar xf t.tar -C {OUT}"),
    sh!(
        "tar-x-absolute-names",
        "tar cPf t.tar {OUT}/target.txt && tar xPf t.tar --overwrite"
    ),
    sh!(
        "unzip-d",
        "zip -q z.zip README.md && unzip -q -o z.zip -d {OUT}/drop"
    ),
    sh!("sed-i", "sed -i 's/outside/changed/' {OUT}/target.txt"),
    sh!(
        "python-write",
        r#"python3 -c "open('{OUT}/p','w').write('x')""#
    ),
    sh!(
        "perl-write",
        r#"perl -e 'open F, ">", "{OUT}/p"; print F "x"'"#
    ),
    sh!(
        "node-write",
        r#"node -e "require('fs').writeFileSync('{OUT}/p','x')""#
    ),
    sh!("awk-write", r#"awk 'BEGIN { print "x" > "{OUT}/p" }'"#),
    sh!("source-script", "echo 'touch {OUT}/p' > s && . ./s"),
    sh!("ifs-split", "IFS=_; x=touch_{OUT}/p; $x"),
    sh!(
        "makefile",
        r"printf 'all:\n\ttouch {OUT}/p\n' > Makefile && make -s"
    ),
    sh!(
        "script-file",
        r"printf '#!/bin/sh\ntouch {OUT}/p\n' > s.sh && chmod +x s.sh && ./s.sh"
    ),
    sh!(
        "git-hookspath",
        r"mkdir -p h && printf '#!/bin/sh\ntouch {OUT}/p\n' > h/pre-commit && chmod +x h/pre-commit && git -c core.hooksPath=h commit -q --allow-empty -m x"
    ),
    sh!(
        "eval-base64",
        r#"eval "$(echo dG91Y2gg | base64 -d){OUT}/p""#
    ),
    sh!("xargs-touch", "echo {OUT}/p | xargs touch"),
    sh!(
        "find-exec-touch",
        r"find {OUT} -name target.txt -exec touch {} \;"
    ),
    sh!("git-clone-into", "git clone -q . {OUT}/clone"),
    sh!("git-worktree-add", "git worktree add -q {OUT}/wt"),
    sh!("git-archive-o", "git archive -o {OUT}/a.tar HEAD"),
];

/// Writes to the user's home folder.
pub const HOME: &[Vector] = &[
    sh!("bashrc-append", "echo 'curl {URL}' >> ~/.bashrc"),
    sh!("profile-overwrite", "echo x > ~/.profile"),
    sh!(
        "gitconfig-global",
        "git config --global core.pager 'sh -c x'"
    ),
    sh!(
        "authorized-keys",
        "echo ssh-ed25519 AAAA >> ~/.ssh/authorized_keys"
    ),
    sh!("ssh-config", "echo 'Host *' >> ~/.ssh/config"),
    sh!(
        "local-bin-shadow",
        r"printf '#!/bin/sh\n' > ~/.local/bin/git && chmod +x ~/.local/bin/git"
    ),
    sh!("home-dotdot", "echo x > ../home/.bash_aliases"),
    tool!(
        "write-tool-bashrc",
        "write",
        r#"{"path": "~/.bashrc", "content": "x"}"#
    ),
    tool!(
        "edit-tool-bashrc",
        "edit",
        r#"{"path": "{HOME}/.bashrc", "edits": [{"old_string": "vi", "new_string": "curl"}]}"#
    ),
    tool!(
        "write-tool-authorized-keys",
        "write",
        r#"{"path": "~/.ssh/authorized_keys", "content": "ssh-ed25519 AAAA"}"#
    ),
];

/// Writes through keel's `write` and `edit` tools.
pub const TOOLS: &[Vector] = &[
    tool!(
        "write-tool",
        "write",
        r#"{"path": "{OUT}/p", "content": "x"}"#
    ),
    tool!(
        "write-tool-existing",
        "write",
        r#"{"path": "{OUT}/target.txt", "content": "x"}"#
    ),
    tool!(
        "edit-tool",
        "edit",
        r#"{"path": "{OUT}/target.txt", "edits": [{"old_string": "outside", "new_string": "changed"}]}"#
    ),
    tool!(
        "write-tool-dotdot",
        "write",
        r#"{"path": "../outside/p", "content": "x"}"#
    ),
    tool!(
        "write-tool-symlink-dir",
        "write",
        r#"{"path": "out/p", "content": "x"}"#,
        setup "ln -s {OUT} out"
    ),
    tool!(
        "write-tool-symlink-dotdot",
        "write",
        r#"{"path": "lnk/../p", "content": "x"}"#,
        setup "ln -s {OUT}/dir lnk"
    ),
    tool!(
        "write-tool-symlink-file",
        "write",
        r#"{"path": "t.txt", "content": "x"}"#,
        setup "ln -s {OUT}/target.txt t.txt"
    ),
    tool!(
        "edit-tool-symlink-file",
        "edit",
        r#"{"path": "t.txt", "edits": [{"old_string": "outside", "new_string": "changed"}]}"#,
        setup "ln -s {OUT}/target.txt t.txt"
    ),
    tool!(
        "write-tool-proc-root",
        "write",
        r#"{"path": "/proc/self/root{OUT}/p", "content": "x"}"#
    ),
    Vector {
        id: "edit-tool-hardlink-made",
        steps: &[
            &[Call::Sh("ln {OUT}/target.txt hl")],
            &[Call::Tool(
                "edit",
                r#"{"path": "hl", "edits": [{"old_string": "outside", "new_string": "changed"}]}"#,
            )],
        ],
        ..Vector::BASE
    },
    Vector {
        id: "write-tool-symlink-made",
        steps: &[
            &[Call::Sh("ln -s {OUT} made")],
            &[Call::Tool("write", r#"{"path": "made/p", "content": "x"}"#)],
        ],
        ..Vector::BASE
    },
];
