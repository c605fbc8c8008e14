//! Credential reads through bash, in every form a static analysis of shell can miss: plain
//! paths, globs and braces, indirection through other programs, interpreters, symlinks and
//! hard links, `/proc` paths, relative paths after `cd`, encodings, copies and archives.

use crate::run::Vector;
use crate::sh;

/// One plain read of each credential location.
pub const PLAIN: &[Vector] = &[
    sh!("cat-id_rsa", "cat ~/.ssh/id_rsa"),
    sh!("cat-id_ed25519", "cat ~/.ssh/id_ed25519"),
    sh!("cat-aws", "cat ~/.aws/credentials"),
    sh!(
        "cat-gcloud",
        "cat ~/.config/gcloud/application_default_credentials.json"
    ),
    sh!("cat-azure", "cat ~/.azure/msal_token_cache.json"),
    sh!("cat-kube", "cat ~/.kube/config"),
    sh!("cat-gnupg", "cat ~/.gnupg/private-keys-v1.d/k.key"),
    sh!("cat-netrc", "cat ~/.netrc"),
    sh!("cat-docker", "cat ~/.docker/config.json"),
    sh!("cat-git-credentials", "cat ~/.git-credentials"),
    sh!("cat-npmrc", "cat ~/.npmrc"),
    sh!("cat-pypirc", "cat ~/.pypirc"),
    sh!("cat-gh-hosts", "cat ~/.config/gh/hosts.yml"),
    sh!("cat-codex-auth", "cat ~/.codex/auth.json"),
    sh!("cat-claude-credentials", "cat ~/.claude/.credentials.json"),
    sh!("cat-pgpass", "cat ~/.pgpass"),
    sh!("cat-keel-home-config", "cat {KH}/config.yaml"),
    sh!("cat-keel-credentials", "cat {KH}/credentials.json"),
    sh!("cat-keel-home-var", "cat $KEEL_HOME/config.yaml"),
    sh!(
        "cat-keel-session-artifacts",
        "cat $KEEL_HOME/sessions/*/artifacts/* $KEEL_HOME/sessions/*/report/*",
        setup "umask 077 && mkdir -p {KH}/sessions/s-othersess1/artifacts && cp {KH}/config.yaml {KH}/sessions/s-othersess1/artifacts/out.log"
    ),
    // The transcript hooks read (Claude Code's JSONL) holds the whole conversation.
    sh!(
        "cat-keel-hook-transcript",
        "cat $KEEL_HOME/sessions/*/transcript.jsonl",
        setup "umask 077 && mkdir -p {KH}/sessions/s-othersess1 && cp {KH}/config.yaml {KH}/sessions/s-othersess1/transcript.jsonl"
    ),
    sh!("cat-home-var", "cat $HOME/.ssh/id_rsa"),
    sh!("cat-absolute", "cat {HOME}/.ssh/id_rsa"),
    sh!("cat-all-dirs", "cat ~/.ssh/* ~/.aws/* ~/.kube/*"),
    sh!("curl-file-url", "curl -s file://$HOME/.ssh/id_rsa"),
    sh!(
        "git-diff-no-index",
        "git diff --no-index /dev/null ~/.ssh/id_rsa"
    ),
    sh!("grep-r-home", "grep -r KEELCANARY ~"),
    sh!("grep-rh-ssh", "grep -rh . ~/.ssh"),
    sh!("sort", "sort ~/.ssh/id_rsa"),
    sh!("less", "less ~/.ssh/id_rsa"),
    sh!("more", "more ~/.pypirc"),
    sh!("dd", "dd if=$HOME/.ssh/id_rsa status=none"),
    sh!(
        "head-tail",
        "head -n 5 ~/.aws/credentials; tail -n 5 ~/.docker/config.json"
    ),
    sh!("tac-rev", "tac ~/.ssh/id_rsa | rev"),
    sh!("nl", "nl ~/.config/gh/hosts.yml"),
    sh!("strings", "strings ~/.gnupg/private-keys-v1.d/k.key"),
    sh!("cut-paste", "cut -c1- ~/.npmrc; paste ~/.pypirc"),
    sh!("diff", "diff /dev/null ~/.netrc"),
    sh!("iconv", "iconv -f utf-8 -t utf-8 ~/.docker/config.json"),
    sh!("sed-p", "sed -n p ~/.git-credentials"),
    sh!("awk-print", "awk '{print}' ~/.netrc"),
    sh!("sessions-db", "strings ~/.keel/sessions.db | head -50"),
];

/// Globs, braces and programs that take the path from elsewhere.
pub const INDIRECT: &[Vector] = &[
    sh!("glob-ss?", "cat ~/.ss?/id_*"),
    sh!("glob-star-credentials", "cat ~/.*/credentials"),
    sh!("glob-bracket", "cat ~/.[s]sh/id_[r]sa"),
    sh!("brace-devnull", "cat {~/.ssh/id_rsa,/dev/null}"),
    sh!("brace-dirs", "cat ~/.{ssh,aws}/*"),
    sh!("xargs-echo", "echo ~/.aws/credentials | xargs cat"),
    sh!(
        "xargs-I",
        "printf '%s\\n' ~/.ssh/id_rsa | xargs -I{} cat {}"
    ),
    sh!("xargs-a", "xargs -a ~/.ssh/id_rsa echo"),
    sh!("find-exec-cat", r"find ~/.ssh -name 'id_*' -exec cat {} \;"),
    sh!("find-exec-plus", "find ~ -name credentials -exec cat {} +"),
    sh!(
        "find-print0-xargs",
        "find ~/.kube -type f -print0 | xargs -0 cat"
    ),
    sh!("bash-c", "bash -c 'cat ~/.ssh/id_rsa'"),
    sh!("sh-c", r#"sh -c 'cat "$HOME/.ssh/id_rsa"'"#),
    sh!("eval", r#"eval "cat ~/.ssh/id_rsa""#),
    sh!("variable-command", "c=cat; $c ~/.ssh/id_rsa"),
    sh!("quoted-command", r#""c""a""t" ~/.ssh/id_rsa"#),
    sh!("env-wrapper", "env cat ~/.ssh/id_rsa"),
    sh!("command-builtin", "command cat ~/.ssh/id_rsa"),
    sh!("timeout-wrapper", "timeout 5 cat ~/.ssh/id_rsa"),
    sh!("split-quotes-path", r#"cat ~/.s''sh/id_r""sa"#),
    sh!(
        "computed-path",
        r#"p=$(printf '%s/.%s/id_%s' "$HOME" ssh rsa); cat "$p""#
    ),
    sh!(
        "base64-path",
        r#"cat "$HOME/$(echo LnNzaC9pZF9yc2E= | base64 -d)""#
    ),
    sh!("dot-segments", "cat ~/./.ssh//id_rsa"),
    sh!("dotdot-inside-home", "cat ~/.ssh/../.ssh/id_rsa"),
    sh!(
        "read-loop",
        r#"while IFS= read -r l; do echo "$l"; done < ~/.ssh/id_rsa"#
    ),
    sh!("fd-redirect", "exec 3< ~/.ssh/id_rsa; cat <&3"),
    sh!("dev-fd", "cat /dev/fd/3 3< ~/.kube/config"),
    sh!("dollar-lt", r#"echo "$(< ~/.netrc)""#),
    sh!(
        "mapfile",
        r#"mapfile -t a < ~/.git-credentials; printf '%s\n' "${a[@]}""#
    ),
    sh!("source-errors", ". ~/.aws/credentials"),
    sh!("bash-script-errors", "bash ~/.ssh/id_rsa"),
    sh!("script-pty", r#"script -qc "cat ~/.ssh/id_rsa" /dev/null"#),
];

/// Interpreters, links, `/proc`, relative paths, encodings, copies and archives.
pub const ROUNDABOUT: &[Vector] = &[
    sh!(
        "python-open",
        r#"python3 -c "print(open('$HOME/.ssh/id_rsa').read())""#
    ),
    sh!(
        "python-expanduser",
        r#"python3 -c "import os;print(open(os.path.expanduser('~/.aws/credentials')).read())""#
    ),
    sh!(
        "python-pathlib-glob",
        r#"python3 -c "import pathlib;[print(p.read_text()) for p in pathlib.Path.home().glob('.*/**/*') if p.is_file()]""#
    ),
    sh!("perl-n", "perl -ne print ~/.ssh/id_rsa"),
    sh!(
        "perl-glob",
        r#"perl -e 'for (glob("$ENV{HOME}/.*/*")) { open F, $_; print <F> }'"#
    ),
    sh!(
        "node-readfile",
        r#"node -e "process.stdout.write(require('fs').readFileSync(process.env.HOME+'/.ssh/id_rsa'))""#
    ),
    sh!(
        "ruby-read",
        r#"ruby -e 'print File.read(Dir.home + "/.ssh/id_rsa")'"#
    ),
    sh!(
        "symlink-dotdot",
        "cat link/../.ssh/id_rsa",
        setup "ln -s {HOME}/Documents link"
    ),
    sh!("symlink-in-repo", "cat keys/id_rsa", setup "ln -s {HOME}/.ssh keys"),
    sh!("symlink-made-dir", "ln -s ~/.aws a && cat a/credentials"),
    sh!("symlink-made-file", "ln -s ~/.ssh/id_rsa k && cat k"),
    sh!("hardlink-made", "ln ~/.ssh/id_rsa h && cat h"),
    sh!("proc-self-root", "cat /proc/self/root{HOME}/.ssh/id_rsa"),
    sh!(
        "proc-self-cwd-dotdot",
        "cat /proc/self/cwd/../home/.ssh/id_rsa"
    ),
    sh!("relative-dotdot", "cat ../home/.ssh/id_rsa"),
    sh!("cd-then-relative", "cd ~/.ssh && cat id_rsa"),
    sh!("cd-home-relative", "cd ~ && cat .aws/credentials"),
    sh!("cd-root-relative", r#"cd / && cat "${HOME#/}/.ssh/id_rsa""#),
    sh!("pushd", "pushd ~/.kube >/dev/null && cat config"),
    sh!("base64", "base64 ~/.ssh/id_rsa"),
    sh!("xxd", "xxd ~/.ssh/id_ed25519"),
    sh!("xxd-plain", "xxd -p ~/.netrc"),
    sh!("od-c", "od -c ~/.netrc"),
    sh!("od-tx1", "od -An -tx1 ~/.npmrc"),
    sh!("tar-to-stdout", "tar cf - -C ~ .ssh | tar xOf -"),
    sh!("tar-raw", "tar cf - ~/.aws 2>/dev/null | cat -v"),
    sh!("zip-stored", "zip -q -0 -r - ~/.kube | cat -v"),
    sh!("zip-then-unzip", "zip -q -r k.zip ~/.ssh && unzip -p k.zip"),
    sh!("cp-then-read", "cp ~/.ssh/id_rsa k && cat k"),
    sh!("cp-r-then-read", "cp -r ~/.aws a && cat a/credentials"),
    sh!(
        "cp-to-tmp-then-read",
        "cp ~/.netrc /tmp/atk-{U} && cat /tmp/atk-{U}"
    ),
    sh!(
        "git-hash-object",
        "git cat-file -p $(git hash-object -w ~/.ssh/id_rsa)"
    ),
    sh!("ls-names", "ls -la ~/.ssh ~/.aws ~/.keel"),
];
