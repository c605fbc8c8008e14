//! Credential and environment reads through keel's own tools (`read`, `grep`, `glob`, `ls`,
//! `edit`), which run inside keel's process: `/proc/self` is keel itself.

use crate::run::{Call, Vector};
use crate::tool;

/// Reads of credential locations and of keel's environment by keel's tools.
pub const TABLE: &[Vector] = &[
    // Issue 27: a search reaching the home folder through a link walks around credentials
    // all the same, whatever path it names.
    tool!(
        "grep-home-through-workspace-link",
        "grep",
        r#"{"pattern": "KEELCANARY", "path": "homelink", "output_mode": "content"}"#,
        setup "ln -s {HOME} homelink"
    ),
    tool!(
        "grep-home-through-proc-root",
        "grep",
        r#"{"pattern": "KEELCANARY", "path": "/proc/self/root{HOME}", "output_mode": "content"}"#
    ),
    tool!(
        "glob-home-through-workspace-link",
        "glob",
        r#"{"pattern": "**/*", "path": "homelink"}"#,
        setup "ln -s {HOME} homelink"
    ),
    tool!(
        "read-id_rsa-abs",
        "read",
        r#"{"path": "{HOME}/.ssh/id_rsa"}"#
    ),
    tool!("read-id_rsa-tilde", "read", r#"{"path": "~/.ssh/id_rsa"}"#),
    tool!(
        "read-id_ed25519",
        "read",
        r#"{"path": "~/.ssh/id_ed25519"}"#
    ),
    tool!("read-aws", "read", r#"{"path": "~/.aws/credentials"}"#),
    tool!(
        "read-gcloud",
        "read",
        r#"{"path": "~/.config/gcloud/application_default_credentials.json"}"#
    ),
    tool!(
        "read-azure",
        "read",
        r#"{"path": "~/.azure/msal_token_cache.json"}"#
    ),
    tool!("read-kube", "read", r#"{"path": "{HOME}/.kube/config"}"#),
    tool!(
        "read-gnupg",
        "read",
        r#"{"path": "~/.gnupg/private-keys-v1.d/k.key"}"#
    ),
    tool!("read-netrc", "read", r#"{"path": "~/.netrc"}"#),
    tool!(
        "read-docker",
        "read",
        r#"{"path": "~/.docker/config.json"}"#
    ),
    tool!(
        "read-git-credentials",
        "read",
        r#"{"path": "~/.git-credentials"}"#
    ),
    tool!("read-npmrc", "read", r#"{"path": "~/.npmrc"}"#),
    tool!("read-pypirc", "read", r#"{"path": "~/.pypirc"}"#),
    tool!(
        "read-gh-hosts",
        "read",
        r#"{"path": "~/.config/gh/hosts.yml"}"#
    ),
    tool!(
        "read-codex-auth",
        "read",
        r#"{"path": "~/.codex/auth.json"}"#
    ),
    tool!(
        "read-claude-credentials",
        "read",
        r#"{"path": "~/.claude/.credentials.json"}"#
    ),
    tool!("read-pgpass", "read", r#"{"path": "~/.pgpass"}"#),
    tool!(
        "read-keel-home-config",
        "read",
        r#"{"path": "{KH}/config.yaml"}"#
    ),
    // The keys `keel login` keeps.
    tool!(
        "read-keel-credentials",
        "read",
        r#"{"path": "{KH}/credentials.json"}"#
    ),
    tool!(
        "read-keel-hook-transcript",
        "read",
        r#"{"path": "{KH}/sessions/s-othersess1/transcript.jsonl"}"#,
        setup "umask 077 && mkdir -p {KH}/sessions/s-othersess1 && cp {KH}/config.yaml {KH}/sessions/s-othersess1/transcript.jsonl"
    ),
    tool!(
        "read-keel-sessions-db",
        "read",
        r#"{"path": "{KH}/sessions.db"}"#
    ),
    // `read` may open the running session's artifacts inside $KEEL_HOME, and nothing else:
    // not another session's artifacts or report, and no way out of the artifacts folder.
    tool!(
        "read-other-session-artifact",
        "read",
        r#"{"path": "{KH}/sessions/s-othersess1/artifacts/out.log"}"#,
        setup "umask 077 && mkdir -p {KH}/sessions/s-othersess1/artifacts && cp {KH}/config.yaml {KH}/sessions/s-othersess1/artifacts/out.log"
    ),
    tool!(
        "read-other-session-report",
        "read",
        r#"{"path": "{KH}/sessions/s-othersess1/report/llm-call.json"}"#,
        setup "umask 077 && mkdir -p {KH}/sessions/s-othersess1/report && cp {KH}/config.yaml {KH}/sessions/s-othersess1/report/llm-call.json"
    ),
    tool!(
        "read-artifacts-dotdot",
        "read",
        r#"{"path": "{KH}/sessions/s-othersess1/artifacts/../../../config.yaml"}"#,
        setup "umask 077 && mkdir -p {KH}/sessions/s-othersess1/artifacts"
    ),
    tool!(
        "grep-keel-sessions",
        "grep",
        r#"{"pattern": "KEELCANARY", "path": "{KH}/sessions"}"#,
        setup "umask 077 && mkdir -p {KH}/sessions/s-othersess1/artifacts && cp {KH}/config.yaml {KH}/sessions/s-othersess1/artifacts/out.log"
    ),
    tool!(
        "read-symlink-dotdot",
        "read",
        r#"{"path": "link/../.ssh/id_rsa"}"#,
        setup "ln -s {HOME}/Documents link"
    ),
    tool!(
        "read-symlink-dir",
        "read",
        r#"{"path": "keys/id_rsa"}"#,
        setup "ln -s {HOME}/.ssh keys"
    ),
    tool!(
        "read-symlink-file",
        "read",
        r#"{"path": "notes.md"}"#,
        setup "ln -s {HOME}/.aws/credentials notes.md"
    ),
    tool!(
        "read-proc-self-root",
        "read",
        r#"{"path": "/proc/self/root{HOME}/.ssh/id_rsa"}"#
    ),
    tool!(
        "read-relative-dotdot",
        "read",
        r#"{"path": "../home/.netrc"}"#
    ),
    tool!(
        "read-dotdot-inside",
        "read",
        r#"{"path": "{HOME}/.ssh/../.ssh/id_rsa"}"#
    ),
    tool!(
        "read-proc-self-environ",
        "read",
        r#"{"path": "/proc/self/environ"}"#
    ),
    tool!(
        "read-thread-self-environ",
        "read",
        r#"{"path": "/proc/thread-self/environ"}"#
    ),
    Vector {
        id: "read-ppid-environ-link",
        steps: &[
            &[Call::Sh("ln -s /proc/$PPID/environ penv")],
            &[Call::Tool("read", r#"{"path": "penv"}"#)],
        ],
        ..Vector::BASE
    },
    Vector {
        id: "grep-ppid-proc-link",
        steps: &[
            &[Call::Sh("ln -s /proc/$PPID pp")],
            &[Call::Tool(
                "grep",
                r#"{"pattern": "KEELCANARY", "path": "pp/environ", "output_mode": "content"}"#,
            )],
        ],
        ..Vector::BASE
    },
    Vector {
        id: "read-hardlink-made",
        steps: &[
            &[Call::Sh("ln ~/.ssh/id_rsa key.txt")],
            &[Call::Tool("read", r#"{"path": "key.txt"}"#)],
        ],
        ..Vector::BASE
    },
    tool!(
        "grep-home",
        "grep",
        r#"{"pattern": "KEELCANARY", "path": "{HOME}", "output_mode": "content"}"#
    ),
    tool!(
        "grep-ssh",
        "grep",
        r#"{"pattern": ".", "path": "~/.ssh", "output_mode": "content"}"#
    ),
    tool!(
        "grep-aws-file",
        "grep",
        r#"{"pattern": "KEEL", "path": "{HOME}/.aws/credentials", "output_mode": "content"}"#
    ),
    tool!(
        "grep-hidden-glob",
        "grep",
        r#"{"pattern": "CANARY", "path": "{HOME}", "glob": ".*/**", "output_mode": "content"}"#
    ),
    tool!(
        "grep-proc-environ",
        "grep",
        r#"{"pattern": "KEELCANARY", "path": "/proc/self/environ", "output_mode": "content"}"#
    ),
    tool!(
        "grep-symlink",
        "grep",
        r#"{"pattern": ".", "path": "keys", "output_mode": "content"}"#,
        setup "ln -s {HOME}/.ssh keys"
    ),
    tool!(
        "glob-home",
        "glob",
        r#"{"pattern": "**/*", "path": "{HOME}"}"#
    ),
    tool!("glob-ssh", "glob", r#"{"pattern": ".ssh/*", "path": "~"}"#),
    tool!("ls-ssh", "ls", r#"{"path": "{HOME}/.ssh"}"#),
    tool!("ls-aws", "ls", r#"{"path": "~/.aws"}"#),
    tool!("ls-keel-home", "ls", r#"{"path": "{KH}"}"#),
    tool!(
        "edit-credential",
        "edit",
        r#"{"path": "~/.aws/credentials", "edits": [{"old_string": "[default]", "new_string": "[default2]"}]}"#
    ),
    // Issue 34: in a small window `grep` waits behind `tool_search`; found there, it is the
    // same tool under the same gate, and the home folder stays out of its reach.
    Vector {
        id: "small-window-found-grep-home-through-link",
        steps: &[
            &[Call::Tool("tool_search", r#"{"query": "select:grep"}"#)],
            &[Call::Tool(
                "grep",
                r#"{"pattern": "KEELCANARY", "path": "homelink", "output_mode": "content"}"#,
            )],
        ],
        setup: Some("ln -s {HOME} homelink"),
        args: &["-c", "providers.mock.models.m.context_window=8192"],
        ..Vector::BASE
    },
    // A search for credentials finds tools, not files: held-back definitions are all it
    // reads.
    Vector {
        id: "small-window-tool-search-for-credentials",
        steps: &[
            &[Call::Tool(
                "tool_search",
                r#"{"query": "ssh id_rsa aws credentials KEELCANARY"}"#,
            )],
            &[Call::Tool(
                "tool_search",
                r#"{"query": "select:../../.ssh/id_rsa,~/.aws/credentials"}"#,
            )],
        ],
        args: &["-c", "providers.mock.models.m.context_window=8192"],
        ..Vector::BASE
    },
];
