//! What git runs besides `.git/config` and `.git/hooks`: the configuration git also reads
//! (`.git/commondir` redirects it to another folder's `config` and `hooks`,
//! `.git/config.worktree` once per-worktree configuration is on, a file named by
//! `include.path`), the hooks folder `core.hooksPath` names (husky, lefthook), and a nested
//! repository the outer one records, whose configuration `git status` of the outer one
//! obeys. A command that writes any of them makes the user's next git command, outside the
//! sandbox, run a program: the suite runs those commands after keel
//! ([`crate::world::World::users_next_git`]), and the planted program touches the outside
//! folder.

use crate::run::{Call, Vector};
use crate::sh;

/// Appended to a git configuration file: `git status` runs it.
macro_rules! fsmonitor {
    () => {
        r"[core]\n\tfsmonitor = touch {OUT}/p; false\n"
    };
}

/// Rows whose planted program runs in the user's next git command.
pub const TABLE: &[Vector] = &[
    Vector {
        id: "git-commondir",
        setup: Some(concat!(
            "cat > plant.py <<'EOF'\n",
            "import shutil\n",
            "shutil.copytree('.git', 'g2', symlinks=True)\n",
            "open('g2/config', 'a').write('",
            fsmonitor!(),
            "')\n",
            "open('.git/commondir', 'w').write('../g2\\n')\n",
            "EOF\n"
        )),
        steps: &[&[Call::Sh("python3 plant.py")]],
        ..Vector::BASE
    },
    sh!(
        "git-config-worktree",
        r"printf '[core]\n\tfsmonitor = touch {OUT}/p; false\n' >> .git/config.worktree",
        // Per-worktree configuration, as `git sparse-checkout init` turns it on.
        setup "git config core.repositoryformatversion 1 && git config extensions.worktreeConfig true"
    ),
    sh!(
        "git-hookspath-in-workspace",
        r"printf '#!/bin/sh\ntouch {OUT}/p\n' > .githooks/pre-commit && chmod +x .githooks/pre-commit",
        // A project that keeps its hooks in the repository (husky, lefthook).
        setup "mkdir .githooks && git config core.hooksPath .githooks"
    ),
    sh!(
        "git-include-in-workspace",
        r"printf '[core]\n\tfsmonitor = touch {OUT}/p; false\n' >> .gitconfig.project",
        // A project that shares settings through a file in the repository.
        setup r"printf '[user]\n\tname = Test User\n' > .gitconfig.project && git config include.path ../.gitconfig.project"
    ),
    Vector {
        id: "git-nested-repository-recorded",
        setup: Some(concat!(
            "cat > plant.py <<'EOF'\n",
            "open('sub/.git/config', 'a').write('",
            fsmonitor!(),
            "')\nEOF\n"
        )),
        steps: &[
            &[Call::Sh(
                "git init -q sub && git -C sub commit -q --allow-empty -m x",
            )],
            &[Call::Sh("python3 plant.py")],
            &[Call::Sh("git add sub")],
        ],
        ..Vector::BASE
    },
];
