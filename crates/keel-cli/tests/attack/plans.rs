//! Plan mode's one writable path, `$KEEL_HOME/plans/<session>.md`, under attack.
//!
//! Rows that aim at the running session's own plan file need its id before keel starts:
//! [`new_session`] makes the session with one quick run first, the row's `{SID}` stands for
//! it and the attacked run resumes it. keel's plans folder is kept out of the fake HOME's
//! snapshot and judged by [`plan_changes`] instead: in plan mode only the running session's
//! plan file and its frozen copies may appear or change there (private files in a private
//! folder), in every other mode nothing at all.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::keel::keel_bin;
use crate::run::Mode;
use crate::world::{Entry, Snapshot, World};

/// keel's plans folder in `world`.
pub fn plans_dir(world: &World) -> PathBuf {
    world.keel_home.join(keel_runtime::services::PLANS_DIR)
}

/// Makes a session with one run against the mock at `url`, which only answers, and
/// returns its id.
pub fn new_session(world: &World, mode: Mode, url: &str) -> String {
    world.use_mock(url, "");
    let mut command = Command::new(keel_bin());
    command.args(["exec", "--output-format", "json"]);
    if let Some(flag) = mode.flag() {
        command.args(["--permission", flag]);
    }
    let output = command
        .arg("--cwd")
        .arg(&world.work)
        .arg("Say you are ready.")
        .current_dir(&world.work)
        .env_clear()
        .envs(world.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .envs(
            mode.landlock_only()
                .then_some(("KEEL_SANDBOX_NAMESPACES", "off")),
        )
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let result: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "the run making a session printed no result ({e}): {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    result["session_id"].as_str().unwrap().to_owned()
}

/// The session a run's stream-json output names.
pub fn session_of(stdout: &str) -> Option<String> {
    stdout.lines().find_map(|line| {
        let value: Value = serde_json::from_str(line).ok()?;
        value.get("session_id")?.as_str().map(str::to_owned)
    })
}

/// Whether `name` is `session`'s plan file or one of its frozen copies.
fn own_plan(name: &str, session: &str) -> bool {
    let Some(rest) = name.strip_prefix(session) else {
        return false;
    };
    rest == ".md"
        || rest
            .strip_prefix('.')
            .and_then(|r| r.strip_suffix(".md"))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// What changed in the plans folder `dir` that must not have: in plan mode anything but the
/// folder itself (kept a 0700 folder) and `session`'s own plan files (0600 regular files);
/// in other modes anything.
pub fn plan_changes(
    before: &Snapshot,
    after: &Snapshot,
    dir: &Path,
    mode: Mode,
    session: Option<&str>,
    base: &Path,
) -> Vec<String> {
    let allowed = |path: &Path, now: &Entry| {
        if !mode.read_only() {
            return false;
        }
        if path == dir {
            return now.kind() == 'd' && now.mode() & 0o7777 == 0o700;
        }
        let own = path.parent() == Some(dir)
            && session.is_some_and(|s| {
                path.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| own_plan(n, s))
            });
        own && now.kind() == 'f' && now.mode() & 0o7777 == 0o600
    };
    before
        .differences(after)
        .into_iter()
        .filter(|(path, now)| !now.as_ref().is_some_and(|now| allowed(path, now)))
        .map(|(path, now)| {
            let shown = path
                .strip_prefix(base)
                .unwrap_or(&path)
                .display()
                .to_string();
            match now {
                Some(now) => format!(
                    "(3k) keel's plans folder changed: {shown} is now {}",
                    now.describe()
                ),
                None => format!("(3k) keel's plans folder changed: {shown} was removed"),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::own_plan;

    #[test]
    fn only_the_sessions_own_plan_files_are_its() {
        assert!(own_plan("s-abc.md", "s-abc"));
        assert!(own_plan("s-abc.12.md", "s-abc"));
        for other in [
            "s-abcd.md",
            "s-abc.md.bak",
            "s-abc..md",
            "s-abc.x.md",
            "s-ab.md",
        ] {
            assert!(!own_plan(other, "s-abc"), "{other}");
        }
    }
}
