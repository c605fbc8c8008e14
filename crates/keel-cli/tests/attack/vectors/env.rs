//! Environment leaks: the command's own environment (the default `scrub` must have removed
//! every known key and the provider's key), keel's environment and memory through `/proc`
//! (`$PPID` is keel), and, with `strict`, credential-shaped values under innocent names.

use crate::run::Vector;
use crate::sh;

/// Reads of the command's environment and of keel's, in the default cleaning mode.
pub const TABLE: &[Vector] = &[
    sh!("env", "env"),
    sh!("printenv", "printenv"),
    sh!("set", "set"),
    sh!("export-p", "export -p"),
    sh!("declare-x", "declare -x"),
    sh!(
        "echo-vars",
        r#"echo "$MOCK_API_KEY $ANTHROPIC_API_KEY $OPENAI_API_KEY $GITHUB_TOKEN $AWS_SECRET_ACCESS_KEY""#
    ),
    sh!(
        "indirect-names",
        r#"for v in $(compgen -v); do echo "$v=${!v}"; done"#
    ),
    sh!(
        "python-environ",
        r#"python3 -c "import os; print(dict(os.environ))""#
    ),
    sh!(
        "perl-env",
        r#"perl -e 'print "$_=$ENV{$_}\n" for keys %ENV'"#
    ),
    sh!("node-env", r#"node -e "console.log(process.env)""#),
    sh!("env-to-file", "env > e.txt; cat e.txt"),
    sh!(
        "proc-self-environ",
        "cat /proc/self/environ | tr '\\0' '\\n'"
    ),
    sh!("proc-ppid-environ", "cat /proc/$PPID/environ"),
    sh!(
        "proc-ppid-environ-tr",
        r"tr '\0' '\n' < /proc/$PPID/environ"
    ),
    sh!("proc-ppid-strings", "strings /proc/$PPID/environ"),
    sh!("proc-ppid-xargs0", "xargs -0 -n1 < /proc/$PPID/environ"),
    sh!(
        "proc-ppid-task-environ",
        r"cat /proc/$PPID/task/*/environ | tr '\0' '\n'"
    ),
    sh!(
        "proc-ppid-environ-cp",
        r"cp /proc/$PPID/environ e && tr '\0' '\n' < e"
    ),
    sh!(
        "proc-ppid-via-root",
        r"tr '\0' '\n' < /proc/self/root/proc/$PPID/environ"
    ),
    sh!(
        "proc-parent-from-stat",
        r#"p=$(awk '{print $4}' /proc/$$/stat); tr '\0' '\n' < /proc/$p/environ"#
    ),
    sh!(
        "proc-all-environ",
        r#"for f in /proc/[0-9]*/environ; do tr '\0' '\n' < "$f"; done 2>/dev/null | grep -a KEELCANARY"#
    ),
    sh!(
        "proc-ancestors-environ",
        r#"p=$PPID; for i in 1 2; do tr '\0' '\n' < /proc/$p/environ; p=$(awk '{print $4}' /proc/$p/stat); done 2>/dev/null | grep -a KEELCANARY"#
    ),
    sh!("ps-eww", "ps eww -p $PPID"),
    sh!("ps-ef-e", "ps -ef e | grep -a KEELCANARY"),
    sh!("proc-ppid-cmdline", r"tr '\0' ' ' < /proc/$PPID/cmdline"),
    sh!(
        "proc-ppid-mem-python",
        r#"python3 - $PPID <<'EOF'
import re, sys
pid = sys.argv[1]
found = set()
for line in open(f"/proc/{pid}/maps"):
    fields = line.split()
    start, end = (int(x, 16) for x in fields[0].split("-"))
    if "r" not in fields[1] or end - start > 64 << 20:
        continue
    try:
        with open(f"/proc/{pid}/mem", "rb") as mem:
            mem.seek(start)
            data = mem.read(end - start)
    except OSError:
        continue
    found.update(re.findall(rb"KEELCANARY-[A-Za-z_]+-[0-9a-f]{12}", data))
print(b"\n".join(sorted(found)).decode())
EOF"#
    ),
    UNKNOWN_MODE,
    sh!(
        "proc-ppid-mem-dd-stack",
        r"r=$(grep '\[stack\]' /proc/$PPID/maps | cut -d' ' -f1); s=$((16#${r%-*})); e=$((16#${r#*-})); dd if=/proc/$PPID/mem bs=4096 skip=$((s/4096)) count=$(((e-s)/4096)) status=none | strings | grep KEELCANARY"
    ),
];

/// An unknown cleaning mode must be an error, never a silent `off`.
pub const UNKNOWN_MODE: Vector = Vector {
    id: "unknown-sanitize-mode",
    steps: &[&[crate::run::Call::Sh("env")]],
    env: &[("KEEL_BASH_ENV_SANITIZE", "sometimes")],
    refused: Some((3, "KEEL_BASH_ENV_SANITIZE=sometimes")),
    ..Vector::BASE
};

/// With `KEEL_BASH_ENV_SANITIZE=strict`: `STRIPE_SK=sk_live_…` and `DATABASE_URL` with a
/// password must be gone too.
pub const STRICT: &[Vector] = &[
    sh!("strict-env", "env", strict),
    sh!("strict-printenv", "printenv STRIPE_SK DATABASE_URL", strict),
    sh!("strict-set", "set", strict),
    sh!(
        "strict-echo",
        r#"echo "$STRIPE_SK $DATABASE_URL $MOCK_API_KEY""#,
        strict
    ),
    sh!(
        "strict-python-environ",
        r#"python3 -c "import os; print(dict(os.environ))""#,
        strict
    ),
    sh!(
        "strict-proc-self-environ",
        r"tr '\0' '\n' < /proc/self/environ",
        strict
    ),
    sh!(
        "strict-proc-ppid-environ",
        r"tr '\0' '\n' < /proc/$PPID/environ",
        strict
    ),
    sh!("strict-ps-eww", "ps eww -p $PPID", strict),
];
