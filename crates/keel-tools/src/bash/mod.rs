//! `bash`: run a shell command in its own process group, bounded in time and output.
//!
//! No stdin; stdout and stderr share one pipe so their order is kept. The whole process
//! group is killed on timeout or abort, so nothing is left running. Output past the budget
//! (64 KiB by default) keeps its head and tail and is streamed whole to an artifact in the
//! session's folder, named in the result with its true size. A non-zero
//! exit is an error result, except a lone `grep`/`rg`/`git grep` exiting 1, which only means
//! "no match". The environment is cleaned ([`envclean`]) and, unless full access was chosen,
//! the command runs in the sandbox ([`keel_sandbox`]), which also starts it and kills its
//! whole tree.

mod capture;
mod control;
pub mod envclean;
pub mod live;
mod network;
pub mod quiet;
mod restore;
mod stream;

use std::collections::HashMap;
use std::io::Write as _;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use keel_agent::{AgentTool, ToolCallContext, ToolError, ToolNature, ToolOutput};
use keel_protocol::{ContentBlock, ToolDefinition};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tokio::io::AsyncReadExt as _;

use crate::args::{self, Int, present};
use crate::env::{DEFAULT_BASH_TIMEOUT, MAX_BASH_TIMEOUT, SandboxMode, ToolEnv};
use crate::protect::ControlSet;
use capture::{Collected, private_file};
use keel_sandbox::{self as sandbox, Confinement, Policy, Program, Stream, Tree, TreeGuard};
/// Most of a background command's output kept in its file (the temp folder may be memory).
const BACKGROUND_CAP: usize = 64 * 1024 * 1024;
/// How long to keep reading after the command exited, for output its children still write.
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(2);

/// The longest timeout a call may ask for, in milliseconds.
const MAX_TIMEOUT_MS: u64 = MAX_BASH_TIMEOUT.as_millis() as u64;

/// The arguments of `bash`; its doc comments are the descriptions the model reads.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Args {
    /// The command line
    command: String,
    /// What the command does, in a few words
    #[serde(default, deserialize_with = "present")]
    #[expect(
        dead_code,
        reason = "accepted because models like to say what a command does; nothing uses it yet"
    )]
    description: Option<String>,
    /// Timeout in milliseconds
    #[serde(default, deserialize_with = "present")]
    timeout: Option<Int<1, MAX_TIMEOUT_MS>>,
    /// Start it and return at once
    #[serde(default)]
    run_in_background: bool,
}

static DEFINITION: LazyLock<ToolDefinition> = LazyLock::new(|| ToolDefinition {
    name: "bash".into(),
    description: format!(
        "Run a shell command with bash in the working folder. No input is available (stdin is closed). \
         Default timeout {} s, at most {} s (`timeout` in milliseconds). Long output keeps its \
         beginning and end, and the whole output is saved to a file named in the result, which the \
         read tool can page. A non-zero exit code is reported as an error. `run_in_background` starts \
         the command and returns at once with the file its output goes to.",
        DEFAULT_BASH_TIMEOUT.as_secs(),
        MAX_BASH_TIMEOUT.as_secs(),
    ),
    parameters: args::schema::<Args>(),
});

struct Background {
    tree: Tree,
    output: PathBuf,
    exit: Arc<Mutex<Option<i32>>>,
    /// Control files as they were when it started, checked while and after it runs.
    control: Option<Arc<ControlSet>>,
    /// Control files kept to put back after it, when no mount protects them.
    kept: Option<Arc<restore::Saved>>,
}

/// A command ready to start.
struct Launch {
    program: Program,
    confinement: Confinement,
    reader: std::io::PipeReader,
    removed: Vec<String>,
    control: Option<Arc<ControlSet>>,
    /// Control files kept to put back afterwards, when no mount protects them.
    saved: Option<restore::Saved>,
    /// The session's proxy and its refusals' mark at the start, when the command uses it.
    proxy: Option<(Arc<crate::netproxy::Proxy>, u64)>,
}

/// The `bash` tool.
pub struct Bash {
    env: Arc<ToolEnv>,
    reported_removed: AtomicBool,
    background: Mutex<HashMap<String, Background>>,
    next_background: AtomicUsize,
    /// The last `PATH` and the bash found on it (see [`Bash::bash_for`]).
    found_bash: Mutex<Option<(String, PathBuf)>>,
    /// The session's private temp folder (`TMPDIR` of sandboxed commands), made on first
    /// use and removed with the tool.
    tmp: std::sync::OnceLock<tempfile::TempDir>,
    reported_degraded: AtomicBool,
    /// What is protected from commands, resolved on first use.
    protection: std::sync::OnceLock<crate::protect::Protection>,
    /// The session's network namespace and proxy, made on first use (`None`: they could
    /// not be made, and commands get no network).
    network: std::sync::OnceLock<Option<network::SessionNetwork>>,
}

impl Bash {
    /// A bash tool over `env`.
    pub fn new(env: Arc<ToolEnv>) -> Self {
        Self {
            env,
            reported_removed: AtomicBool::new(false),
            background: Mutex::new(HashMap::new()),
            next_background: AtomicUsize::new(1),
            found_bash: Mutex::new(None),
            tmp: std::sync::OnceLock::new(),
            reported_degraded: AtomicBool::new(false),
            protection: std::sync::OnceLock::new(),
            network: std::sync::OnceLock::new(),
        }
    }

    /// The session's private temp folder, made (0700, random name) on first use. The
    /// name carries keel's pid, so folders of keel processes that were killed are found
    /// and removed then.
    fn private_tmp(&self) -> Result<&std::path::Path, ToolError> {
        use std::os::unix::fs::PermissionsExt as _;
        if let Some(dir) = self.tmp.get() {
            return Ok(dir.path());
        }
        let base = crate::env::temp_base();
        remove_dead_session_folders(&base);
        let made = tempfile::Builder::new()
            .prefix(&format!("keel-session-{}-", std::process::id()))
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(base)
            .map_err(|e| ToolError::new(format!("cannot create the private temp folder: {e}")))?;
        // Another call may have won the race; either folder is private.
        let dir = self.tmp.get_or_init(|| made);
        Ok(dir.path())
    }

    /// [`bash_path`], remembered per `PATH` as a shell remembers where its commands are: the
    /// search costs a `stat` per folder before bash's (nine on a typical `PATH`, about
    /// 50 µs), the check that the remembered one is still there costs one.
    fn bash_for(&self, vars: &[(String, String)]) -> PathBuf {
        let path = vars
            .iter()
            .find(|(key, _)| key == "PATH")
            .map_or("", |(_, value)| value.as_str());
        let mut found = self
            .found_bash
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((on, bash)) = found.as_ref()
            && on == path
            && is_executable(bash)
        {
            return bash.clone();
        }
        let bash = bash_path(vars);
        *found = Some((path.to_owned(), bash.clone()));
        bash
    }

    fn prepare(&self, command: &str) -> Result<Launch, ToolError> {
        let (mut vars, removed) =
            envclean::command_env(&self.env).map_err(|e| ToolError::new(e.to_string()))?;
        let control = self.env.protect_control.then(|| {
            let protection = self
                .protection
                .get_or_init(|| crate::protect::Protection::of(&self.env));
            Arc::new(ControlSet::scan(protection))
        });
        let sandboxed = self.env.sandbox != SandboxMode::DangerFullAccess;
        // Without namespaces nothing mounts the control files read-only: keep them to put
        // them back after the command.
        let mounted = sandboxed && sandbox::support().namespaces.is_ok();
        let saved = match &control {
            Some(set) if !mounted => Some(restore::save(set)),
            _ => None,
        };
        let mut confinement = Confinement::Group;
        let mut proxy = None;
        if sandboxed {
            let (block_network, private_network) = match network::access(&self.env, &self.network) {
                network::Access::Host => (false, None),
                network::Access::Blocked => (true, None),
                network::Access::Proxied(session) => {
                    network::use_proxy(&mut vars);
                    proxy = Some((session.proxy.clone(), session.proxy.mark()));
                    (false, Some(session.namespace.clone()))
                }
            };
            let tmp = self.private_tmp()?.to_path_buf();
            let told = sandbox::command_tmp(self.env.sandbox, &self.env.roots, &tmp);
            vars.retain(|(k, _)| !matches!(k.as_str(), "TMPDIR" | "TMP" | "TEMP"));
            for key in ["TMPDIR", "TMP", "TEMP"] {
                vars.push((key.to_owned(), told.to_string_lossy().into_owned()));
            }
            let (pinned, read_only) = control
                .as_deref()
                .map(|set| (set.pinned.clone(), set.read_only.clone()))
                .unwrap_or_default();
            confinement = Confinement::Sandbox(Policy {
                mode: self.env.sandbox,
                block_network,
                roots: self.env.roots.clone(),
                tmp,
                credentials: self.env.credentials(),
                output_dir: self.env.output_dir.clone(),
                pinned,
                read_only,
                private_network,
            });
        }
        let (reader, writer) =
            std::io::pipe().map_err(|e| ToolError::new(format!("cannot create a pipe: {e}")))?;
        let writer2 = writer
            .try_clone()
            .map_err(|e| ToolError::new(format!("cannot create a pipe: {e}")))?;
        let program = Program::new(self.bash_for(&vars), &self.env.cwd)
            .args(["-c", command])
            .env(vars)
            .streams(Stream::Null, writer.into(), writer2.into());
        Ok(Launch {
            program,
            confinement,
            reader,
            removed,
            control,
            saved,
            proxy,
        })
    }

    /// Starts a command; the pipe's write ends are keel's no more, so the reader sees the
    /// end of output once the command's processes are gone.
    fn start(program: Program, confinement: &Confinement) -> Result<sandbox::Child, ToolError> {
        sandbox::spawn(program, confinement).map_err(|e| ToolError::new(e.to_string()))
    }

    /// The notes owed to the model once per session: weaker sandbox, removed variables.
    fn notes(&self, removed: &[String]) -> Vec<String> {
        let mut notes = Vec::new();
        if self.env.sandbox != SandboxMode::DangerFullAccess
            && !self.reported_degraded.swap(true, Ordering::SeqCst)
            && let Some(note) = sandbox::support().degraded(self.env.sandbox)
        {
            notes.push(format!("[keel: {note}]"));
        }
        if let Some(note) = self.removed_note(removed) {
            notes.push(note);
        }
        notes
    }

    /// Moves aside control files created by background commands since they started.
    fn check_background_control(&self) -> Vec<String> {
        let sets: Vec<Arc<ControlSet>> = self
            .background
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .filter(|b| {
                b.exit
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .is_none()
            })
            .filter_map(|b| b.control.clone())
            .collect();
        sets.iter()
            .filter_map(|set| control::quarantine_new(set))
            .collect()
    }

    fn removed_note(&self, removed: &[String]) -> Option<String> {
        if removed.is_empty() || self.reported_removed.swap(true, Ordering::SeqCst) {
            return None;
        }
        Some(format!(
            "Removed from the command's environment (names only): {}.",
            removed.join(", ")
        ))
    }

    async fn run_background(&self, command: &str) -> Result<ToolOutput, ToolError> {
        let Launch {
            program,
            confinement,
            reader,
            removed,
            control,
            saved: kept,
            proxy,
        } = self.prepare(command)?;
        let kept = kept.map(Arc::new);
        let n = self.next_background.fetch_add(1, Ordering::SeqCst);
        let id = format!("bg-{n}");
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let output = self
            .env
            .output_dir
            .join(format!("bash-{}-{stamp}-{id}.log", std::process::id()));
        let file = private_file(&output)
            .map_err(|e| ToolError::new(format!("cannot create {}: {e}", output.display())))?;
        let alive = quiet::Running::start().await;
        let mut child = Self::start(program, &confinement).inspect_err(|_| {
            // Nothing ran: no log to leave behind.
            let _ = std::fs::remove_file(&output);
        })?;
        let tree = child.tree();
        let guard = TreeGuard::new(tree);
        let exit = Arc::new(Mutex::new(None));
        let mut pipe = receiver(reader)?;
        let recorded = exit.clone();
        let watched = control.clone();
        let kept_here = kept.clone();
        // A background command's output goes to the temp folder, often memory: a smaller cap.
        let cap = usize::try_from(self.env.output.max_artifact)
            .unwrap_or(usize::MAX)
            .min(BACKGROUND_CAP);
        let held = self.env.background.hold();
        tokio::spawn(async move {
            let _held = held;
            let kept = kept_here;
            // Counted until its whole process group is gone with the guard (dropped first).
            let _alive = alive;
            let _guard = guard;
            let mut file = file;
            let mut saved = 0usize;
            let mut cut = false;
            let mut buf = vec![0u8; 16 * 1024];
            while let Ok(n) = pipe.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                // Past the cap the output is still drained, so the command never blocks.
                if !cut {
                    let room = cap - saved;
                    let part = &buf[..n.min(room)];
                    if file.write_all(part).is_ok() {
                        saved += part.len();
                        if part.len() < n {
                            let _ = file.write_all(capture::cut_marker(cap as u64).as_bytes());
                            cut = true;
                        }
                    }
                }
            }
            let code = child.wait().await.ok().and_then(|s| s.code()).unwrap_or(-1);
            let refused = proxy.and_then(|(proxy, mark)| {
                crate::netproxy::refusal_note(&proxy.refused_since(mark))
            });
            let notes = kept
                .as_deref()
                .and_then(restore::restore)
                .into_iter()
                .chain(watched.as_deref().and_then(control::quarantine_new))
                .chain(refused);
            for note in notes {
                tracing::warn!(%note, "a note on a background command that ended");
                let _ = writeln!(file, "\n{note}");
            }
            *recorded.lock().unwrap_or_else(PoisonError::into_inner) = Some(code);
        });
        self.background
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                id.clone(),
                Background {
                    tree,
                    output: output.clone(),
                    exit,
                    control,
                    kept,
                },
            );
        let pgid = tree.id();
        let mut text = format!(
            "Started in the background as {id} (process group {pgid}). Its output is written to {}; read that file to follow it.",
            output.display()
        );
        for note in self.notes(&removed) {
            text.push_str(&format!("\n{note}"));
        }
        Ok(ToolOutput {
            content: vec![ContentBlock::text(text)],
            details: Some(json!({"background_id": id, "pgid": pgid, "output_file": output})),
            ..ToolOutput::default()
        })
    }
}

impl Drop for Bash {
    fn drop(&mut self) {
        // Background commands belong to the session: nothing outlives the tool.
        let tasks = self
            .background
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        for task in tasks.values() {
            let running = task
                .exit
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_none();
            if running {
                task.tree.kill();
                // It ends with keel: what it changed among the control files is undone now,
                // as it would have been when it ended by itself.
                let notes = task
                    .kept
                    .as_deref()
                    .and_then(restore::restore)
                    .into_iter()
                    .chain(task.control.as_deref().and_then(control::quarantine_new));
                for note in notes {
                    tracing::warn!(%note, "a note on a background command that ended");
                }
            }
            tracing::debug!(output = %task.output.display(), "background command ended with the tool");
        }
    }
}

fn receiver(reader: std::io::PipeReader) -> Result<tokio::net::unix::pipe::Receiver, ToolError> {
    tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(reader))
        .map_err(|e| ToolError::new(format!("cannot read the command's output: {e}")))
}

/// A duration as people say it: `500 ms`, `2 s`, `2.5 s`.
fn human(duration: Duration) -> String {
    if duration < Duration::from_secs(1) {
        format!("{} ms", duration.as_millis())
    } else if duration.subsec_millis() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{:.1} s", duration.as_secs_f64())
    }
}

/// Removes the private temp folders that keel processes now gone left in `base` (killed
/// before they could remove their own): only folders of this user's, named by a pid that
/// no longer runs.
fn remove_dead_session_folders(base: &std::path::Path) {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    let uid = crate::env::own_uid();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("keel-session-")) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let ours = entry.metadata().is_ok_and(|m| m.is_dir() && m.uid() == uid);
        if ours
            && pid != std::process::id()
            && !std::path::Path::new(&format!("/proc/{pid}")).exists()
        {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// `bash` looked up on the command's own `PATH`. A bare program name with a custom `PATH`
/// makes the standard library fork the whole process instead of using `posix_spawn`, which
/// costs a copy of keel's page tables per command; an absolute path keeps the cheap spawn.
fn bash_path(vars: &[(String, String)]) -> PathBuf {
    find_bash(vars).unwrap_or_else(|| PathBuf::from("bash"))
}

/// The absolute path of `bash` on the `PATH` of `vars` (the usual folders without one).
pub fn find_bash(vars: &[(String, String)]) -> Option<PathBuf> {
    let path = vars
        .iter()
        .find(|(key, _)| key == "PATH")
        .map_or("/usr/local/bin:/usr/bin:/bin", |(_, value)| value.as_str());
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join("bash"))
        .find(|candidate| is_executable(candidate))
}

/// Whether `path` is a file someone may execute.
fn is_executable(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// Whether `command` is a lone search whose exit code 1 only means "no match".
fn is_lone_search(command: &str) -> bool {
    let trimmed = command.trim();
    if ["|", "&", ";", "$(", "`", "\n", ">", "<"]
        .iter()
        .any(|op| trimmed.contains(op))
    {
        return false;
    }
    let mut words = trimmed.split_whitespace();
    match words.next() {
        Some("grep" | "egrep" | "fgrep" | "rg") => true,
        Some("git") => words.next() == Some("grep"),
        _ => false,
    }
}

/// Sleeps until `due`; forever when nothing is due.
async fn sleep_until_due(due: Option<tokio::time::Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}

/// How long a finished command waits for the front end to show its live view, so the
/// view never arrives after the call's end.
const LIVE_SHOW_WAIT: Duration = Duration::from_secs(3);

enum Ended {
    Exited(Option<i32>),
    TimedOut,
    Aborted,
}

#[async_trait]
impl AgentTool for Bash {
    fn nature(&self) -> ToolNature {
        ToolNature::RunsCommand { command: "command" }
    }

    fn definition(&self) -> &ToolDefinition {
        &DEFINITION
    }

    async fn execute(
        &self,
        arguments: serde_json::Value,
        context: ToolCallContext,
    ) -> Result<ToolOutput, ToolError> {
        let args: Args = args::arguments(arguments)?;
        if args.command.trim().is_empty() {
            return Err(ToolError::new("The command is empty."));
        }
        if args.run_in_background {
            return self.run_background(&args.command).await;
        }
        let timeout = args
            .timeout
            .map_or(DEFAULT_BASH_TIMEOUT, |ms| Duration::from_millis(ms.get()));
        let mut control_notes = self.check_background_control();
        let Launch {
            program,
            confinement,
            reader,
            removed,
            control,
            saved: kept,
            proxy,
        } = self.prepare(&args.command)?;
        if let Some((proxy, _)) = &proxy {
            proxy.command_started(context.tool_call_id.clone());
        }
        let started = Instant::now();
        let alive = quiet::Running::start().await;
        let mut child = Self::start(program, &confinement)?;
        let tree = child.tree();
        let _guard = TreeGuard::new(tree);
        let mut pipe = receiver(reader)?;
        let live = self.env.terminal.as_ref().and_then(|terminal| {
            terminal
                .0
                .open(context.tool_call_id.as_str(), &args.command, &self.env.cwd)
        });
        let stopped = live
            .as_ref()
            .map_or_else(tokio_util::sync::CancellationToken::new, |l| l.killed());
        let mut collected = Collected::new(self.env.artifact_dir().to_path_buf(), self.env.output);
        let mut stream = stream::Stream::new(context.updates.clone());
        let mut buf = vec![0u8; 32 * 1024];
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut exit: Option<Option<i32>> = None;
        let mut eof = false;
        let ended = loop {
            if eof && let Some(code) = exit {
                break Ended::Exited(code);
            }
            tokio::select! {
                read = pipe.read(&mut buf), if !eof => match read {
                    Ok(0) | Err(_) => eof = true,
                    Ok(n) => {
                        collected.push(&buf[..n]);
                        stream.push(&buf[..n]);
                        if let Some(live) = &live {
                            live.output(&buf[..n]);
                        }
                    }
                },
                status = child.wait(), if exit.is_none() => {
                    exit = Some(status.ok().and_then(|s| s.code()));
                    // Children that keep the pipe open must not hold the result hostage.
                    deadline.as_mut().reset(tokio::time::Instant::now() + DRAIN_AFTER_EXIT);
                }
                () = &mut deadline => match exit {
                    Some(code) => break Ended::Exited(code),
                    None => break Ended::TimedOut,
                },
                () = sleep_until_due(stream.due()) => stream.flush(),
                () = context.cancel.cancelled() => break Ended::Aborted,
                // The user stopped it from the editor's terminal.
                () = stopped.cancelled() => break Ended::Aborted,
            }
        };
        tree.kill();
        drop(alive);
        if let Some(live) = &live {
            live.exit(match ended {
                Ended::Exited(code) => code,
                Ended::TimedOut | Ended::Aborted => None,
            });
            let shown = live.shown();
            if tokio::time::timeout(LIVE_SHOW_WAIT, shown.cancelled())
                .await
                .is_err()
            {
                live.too_late();
            }
        }
        let elapsed = started.elapsed();
        let (mut text, artifact) = collected.finish();
        if text.is_empty() {
            text.push_str("(no output)");
        }
        let (is_error, footer, exit_code) = match ended {
            Ended::Exited(Some(0)) => (false, String::new(), Some(0)),
            Ended::Exited(Some(1)) if is_lone_search(&args.command) => {
                (false, "\n[exit code 1: no match]".to_owned(), Some(1))
            }
            Ended::Exited(Some(code)) => (true, format!("\n[exit code {code}]"), Some(code)),
            Ended::Exited(None) => (
                true,
                "\n[the command was killed by a signal]".to_owned(),
                None,
            ),
            Ended::TimedOut => (
                true,
                format!(
                    "\n[timed out after {}; the command and its children were killed]",
                    human(timeout)
                ),
                None,
            ),
            Ended::Aborted => (
                true,
                "\n[aborted; the command and its children were killed]".to_owned(),
                None,
            ),
        };
        text.push_str(&footer);
        if let Some(note) = kept.as_ref().and_then(restore::restore) {
            control_notes.push(note);
        }
        if let Some(note) = control.as_deref().and_then(control::quarantine_new) {
            control_notes.push(note);
        }
        if let Some(note) = proxy
            .and_then(|(proxy, mark)| crate::netproxy::refusal_note(&proxy.refused_since(mark)))
        {
            control_notes.push(note);
        }
        for note in control_notes.iter().chain(&self.notes(&removed)) {
            text.push_str(&format!("\n{note}"));
        }
        Ok(ToolOutput {
            content: vec![ContentBlock::text(text)],
            details: Some(json!({
                "exit_code": exit_code,
                // Microsecond precision: a benchmark subtracts it from the step's time.
                "duration_ms": (elapsed.as_secs_f64() * 1e6).round() / 1e3,
                "artifact": artifact.as_ref().map(crate::output::Artifact::details),
                "timed_out": matches!(ended, Ended::TimedOut),
                "aborted": matches!(ended, Ended::Aborted),
            })),
            is_error,
            terminate: false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bash_found_is_remembered_per_path_while_it_is_there() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = (dir.path().join("a"), dir.path().join("b"));
        for folder in [&first, &second] {
            std::fs::create_dir(folder).unwrap();
            let bash = folder.join("bash");
            std::fs::write(&bash, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&bash, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let tool = Bash::new(Arc::new(ToolEnv::new(dir.path())));
        let path = format!("{}:{}", first.display(), second.display());
        let vars = [("PATH".to_owned(), path)];
        assert_eq!(tool.bash_for(&vars), first.join("bash"));
        // Gone: looked up again.
        std::fs::remove_file(first.join("bash")).unwrap();
        assert_eq!(tool.bash_for(&vars), second.join("bash"));
        // Back, earlier on the PATH: the remembered one stands while it is there, as in a
        // shell's command hash.
        std::fs::copy(second.join("bash"), first.join("bash")).unwrap();
        assert_eq!(tool.bash_for(&vars), second.join("bash"));
        // Another PATH is searched afresh.
        let other = [("PATH".to_owned(), first.display().to_string())];
        assert_eq!(tool.bash_for(&other), first.join("bash"));
    }

    #[test]
    fn bash_is_found_on_the_commands_path_and_relative_entries_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let fake = bin.join("bash");
        std::fs::write(&fake, "#!/bin/sh\n").unwrap();
        let path = format!("relative:{}:/usr/bin:/bin", dir.path().display());
        // Not executable yet: skipped.
        let found = bash_path(&[("PATH".into(), path.clone())]);
        assert_ne!(found, fake);
        let path = format!("relative:{}:/usr/bin:/bin", bin.display());
        assert_ne!(bash_path(&[("PATH".into(), path.clone())]), fake);
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(bash_path(&[("PATH".into(), path)]), fake);
        assert_eq!(
            bash_path(&[("PATH".into(), "nowhere:also-nowhere".into())]),
            PathBuf::from("bash")
        );
    }

    #[test]
    fn only_a_lone_search_may_exit_1() {
        assert!(is_lone_search("grep -rn foo src"));
        assert!(is_lone_search("rg foo"));
        assert!(is_lone_search("git grep needle"));
        assert!(!is_lone_search("grep foo | wc -l"));
        assert!(!is_lone_search("cat x && grep foo x"));
        assert!(!is_lone_search("false"));
    }
}
