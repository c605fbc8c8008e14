//! An editor for the tests: the ACP crate's client side driving the real `keel acp` over
//! its stdio, against `keel-mockllm` on loopback. It records every update, answers
//! permission questions from a queue (or holds them), and serves `fs/*` from buffers of its
//! own, as an editor with unsaved changes does.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    ClientCapabilities, ContentBlock, CreateTerminalRequest, CreateTerminalResponse,
    FileSystemCapabilities, InitializeRequest, KillTerminalRequest, KillTerminalResponse,
    NewSessionRequest, PromptRequest, PromptResponse, ReadTextFileRequest, ReadTextFileResponse,
    ReleaseTerminalRequest, ReleaseTerminalResponse, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, SelectedPermissionOutcome,
    SessionNotification, SessionUpdate, StopReason, TerminalExitStatus, TerminalOutputRequest,
    TerminalOutputResponse, TextContent, WaitForTerminalExitRequest, WaitForTerminalExitResponse,
    WriteTextFileRequest, WriteTextFileResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, ByteStreams, Client, Error};
use keel_mockllm::{MockServer, Script, ServerOptions};
use tokio_util::compat::{TokioAsyncReadCompatExt as _, TokioAsyncWriteCompatExt as _};

/// How a permission question is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Pick the option of this kind (`allow_once`, `reject_once`, …).
    Pick(&'static str),
    /// Keep the question open (a cancel has to settle it).
    Hold,
    /// Answer with this option id, offered or not (a forged answer).
    Forge(&'static str),
}

/// What the editor saw and holds.
#[derive(Default)]
pub struct EditorState {
    /// Every update, with when it arrived.
    pub updates: Mutex<Vec<(Instant, SessionNotification)>>,
    /// Answers for the next questions, in order; `allow_once` when empty.
    pub answers: Mutex<VecDeque<Answer>>,
    /// Every question asked.
    pub asked: Mutex<Vec<RequestPermissionRequest>>,
    /// The kinds of update that had arrived when each question came.
    pub before_question: Mutex<Vec<Vec<String>>>,
    /// Questions held open.
    pub held: Mutex<Vec<Responder<RequestPermissionResponse>>>,
    /// Open buffers: what `fs/read_text_file` answers and `fs/write_text_file` changes.
    pub buffers: Mutex<HashMap<PathBuf, String>>,
    /// Every `fs/*` call, as `read PATH` or `write PATH`.
    pub fs_calls: Mutex<Vec<String>>,
    /// Terminals made, by id.
    pub terminals: Mutex<HashMap<String, Term>>,
    /// Every `terminal/create`, as the command and its arguments.
    pub created: Mutex<Vec<Vec<String>>>,
    /// Kill every terminal this long after it was made (a user pressing stop).
    pub kill_after: Mutex<Option<Duration>>,
    /// Make terminals that never run their command (a stuck terminal).
    pub stuck_terminals: std::sync::atomic::AtomicBool,
    /// How long the editor takes before it answers an `fs/*` call (a slow editor).
    pub fs_delay: Mutex<Duration>,
    /// Writes go to the disk at the path given, following links, as an editor saving the
    /// buffer does (otherwise they stay in the buffers).
    pub write_through: std::sync::atomic::AtomicBool,
    /// Called with the path of every `fs/*` call as it arrives, before the delay.
    #[allow(clippy::type_complexity)]
    pub on_fs: Mutex<Option<Box<dyn Fn(&std::path::Path) + Send + Sync>>>,
    /// Every `elicitation/create` (an MCP server's question), as its JSON.
    pub elicited: Mutex<Vec<serde_json::Value>>,
    /// What the editor answers them (as JSON); declines when unset.
    pub elicit_answer: Mutex<Option<serde_json::Value>>,
}

/// A terminal the editor runs.
#[derive(Clone)]
pub struct Term {
    /// What it printed.
    pub output: Arc<Mutex<Vec<u8>>>,
    /// Its exit code once it ended (`Some(None)`: killed).
    pub exit: tokio::sync::watch::Receiver<Option<Option<i32>>>,
    kill: Arc<tokio::sync::Notify>,
}

impl Term {
    fn start(command: &str, args: &[String], cwd: Option<&Path>) -> Self {
        let mut cmd = tokio::process::Command::new(command);
        cmd.args(args)
            .stdout(Stdio::piped())
            .stdin(Stdio::null())
            .kill_on_drop(true);
        if let Some(cwd) = cwd {
            cmd.current_dir(cwd);
        }
        let mut child = cmd.spawn().unwrap();
        let output = Arc::new(Mutex::new(Vec::new()));
        let (done, exit) = tokio::sync::watch::channel(None);
        let kill = Arc::new(tokio::sync::Notify::new());
        let mut stdout = child.stdout.take().unwrap();
        let (out, stop) = (output.clone(), kill.clone());
        tokio::spawn(async move {
            use tokio::io::AsyncReadExt as _;
            let mut buf = [0u8; 4096];
            let copy = async {
                loop {
                    match stdout.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => out.lock().unwrap().extend_from_slice(&buf[..n]),
                    }
                }
            };
            tokio::select! {
                () = copy => {}
                () = stop.notified() => { let _ = child.start_kill(); }
            }
            let status = child.wait().await.ok().and_then(|s| s.code());
            let _ = done.send(Some(status));
        });
        Self { output, exit, kill }
    }

    /// Kills it, as the stop button does.
    pub fn kill(&self) {
        self.kill.notify_one();
    }

    /// What it printed so far, as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.output.lock().unwrap()).into_owned()
    }
}

impl EditorState {
    /// An editor holding `text` in an unsaved buffer for `path`.
    pub fn with_buffer(path: PathBuf, text: &str) -> Arc<Self> {
        let state = Arc::new(Self::default());
        state.buffers.lock().unwrap().insert(path, text.to_owned());
        state
    }

    /// An editor that gives `answers` to the next questions, in order.
    pub fn answering(answers: impl IntoIterator<Item = Answer>) -> Arc<Self> {
        let state = Arc::new(Self::default());
        state.answers.lock().unwrap().extend(answers);
        state
    }

    /// The kinds of update so far (`agent_message_chunk`, `tool_call`, …).
    pub fn kinds(&self) -> Vec<String> {
        self.updates
            .lock()
            .unwrap()
            .iter()
            .map(|(_, n)| kind(&n.update))
            .collect()
    }

    /// The answer text streamed so far.
    pub fn message_text(&self) -> String {
        self.chunks(|u| match u {
            SessionUpdate::AgentMessageChunk(c) => Some(&c.content),
            _ => None,
        })
    }

    /// The reasoning streamed so far.
    pub fn thought_text(&self) -> String {
        self.chunks(|u| match u {
            SessionUpdate::AgentThoughtChunk(c) => Some(&c.content),
            _ => None,
        })
    }

    fn chunks(&self, pick: impl Fn(&SessionUpdate) -> Option<&ContentBlock>) -> String {
        self.updates
            .lock()
            .unwrap()
            .iter()
            .filter_map(|(_, n)| pick(&n.update))
            .filter_map(|c| match c {
                ContentBlock::Text(t) => Some(t.text.clone()),
                _ => None,
            })
            .collect()
    }

    /// Every update as JSON.
    pub fn json(&self) -> Vec<serde_json::Value> {
        self.updates
            .lock()
            .unwrap()
            .iter()
            .map(|(_, n)| serde_json::to_value(&n.update).unwrap())
            .collect()
    }

    /// Forgets the updates so far.
    pub fn clear(&self) {
        self.updates.lock().unwrap().clear();
    }
}

/// An update's `sessionUpdate` tag.
pub fn kind(update: &SessionUpdate) -> String {
    serde_json::to_value(update).unwrap()["sessionUpdate"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// A mock model server answering from `script` (a JSON list of responses).
pub async fn mock(script: serde_json::Value) -> MockServer {
    MockServer::start(
        Script::parse(&script.to_string()).unwrap(),
        ServerOptions::default(),
    )
    .await
    .unwrap()
}

/// The folders a test's keel uses.
pub struct World {
    /// `$KEEL_HOME`.
    pub home: tempfile::TempDir,
    /// `$HOME`, with a canary credential in `.ssh`.
    pub user: tempfile::TempDir,
    /// The workspace the editor opens.
    pub work: tempfile::TempDir,
}

impl World {
    pub fn new() -> Self {
        let user = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(user.path().join(".ssh")).unwrap();
        std::fs::write(user.path().join(".ssh/id_rsa"), "CANARY-SSH-KEY\n").unwrap();
        Self {
            home: tempfile::tempdir().unwrap(),
            user,
            work: tempfile::tempdir().unwrap(),
        }
    }

    /// The workspace's real path (the sandbox and the gate compare real paths).
    pub fn work(&self) -> PathBuf {
        std::fs::canonicalize(self.work.path()).unwrap()
    }

    /// `keel acp ARGS` against `server`, its stdio piped.
    pub fn spawn(&self, server: &MockServer, args: &[&str]) -> tokio::process::Child {
        self.spawn_env(server, args, &[("ANTHROPIC_API_KEY", "test-key")])
    }

    /// Like [`World::spawn`] with these variables set.
    pub fn spawn_env(
        &self,
        server: &MockServer,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> tokio::process::Child {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_keel"));
        command
            .arg("acp")
            .args([
                "--model",
                "anthropic/claude-sonnet-4-5",
                "--base-url",
                &server.url(),
            ])
            .args(args)
            .current_dir(self.work.path())
            .env_remove("ANTHROPIC_API_KEY")
            .env("KEEL_HOME", self.home.path())
            .env("HOME", self.user.path())
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        command.spawn().unwrap()
    }
}

/// What the editor offers.
pub fn capabilities(fs: bool) -> ClientCapabilities {
    ClientCapabilities::new().fs(FileSystemCapabilities::new()
        .read_text_file(fs)
        .write_text_file(fs))
}

/// Connects an editor to `child` and runs `body` with the connection; the editor's stdin
/// to keel closes when `body` returns.
pub async fn connect<R: Send + 'static>(
    child: &mut tokio::process::Child,
    state: Arc<EditorState>,
    body: impl AsyncFnOnce(ConnectionTo<Agent>) -> Result<R, Error>,
) -> R {
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let transport = ByteStreams::new(stdin.compat_write(), stdout.compat());
    let (s1, s2, s3, s4) = (state.clone(), state.clone(), state.clone(), state.clone());
    let (t1, t2, t3, t4, t5) = (
        state.clone(),
        state.clone(),
        state.clone(),
        state.clone(),
        state,
    );
    let e1 = t1.clone();
    Client
        .v1()
        .name("test-editor")
        .on_receive_request(
            async move |request: agent_client_protocol::v1::schema::CreateElicitationRequest,
                        responder,
                        _cx| {
                e1.elicited
                    .lock()
                    .unwrap()
                    .push(serde_json::to_value(&request).unwrap());
                let answer = e1
                    .elicit_answer
                    .lock()
                    .unwrap()
                    .clone()
                    .unwrap_or_else(|| serde_json::json!({"action": "decline"}));
                responder.respond(serde_json::from_value(answer).unwrap())?;
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: SessionNotification, _cx| {
                s1.updates
                    .lock()
                    .unwrap()
                    .push((Instant::now(), notification));
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |request: RequestPermissionRequest, responder, _cx| {
                s2.asked.lock().unwrap().push(request.clone());
                let seen = s2.kinds();
                s2.before_question.lock().unwrap().push(seen);
                let answer = s2
                    .answers
                    .lock()
                    .unwrap()
                    .pop_front()
                    .unwrap_or(Answer::Pick("allow_once"));
                match answer {
                    Answer::Hold => s2.held.lock().unwrap().push(responder),
                    Answer::Forge(id) => {
                        responder.respond(RequestPermissionResponse::new(
                            RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(id)),
                        ))?;
                    }
                    Answer::Pick(kind) => {
                        let option = request
                            .options
                            .iter()
                            .find(|o| {
                                serde_json::to_value(o.kind).unwrap() == serde_json::json!(kind)
                            })
                            .unwrap_or_else(|| panic!("no {kind} option in {request:?}"));
                        responder.respond(RequestPermissionResponse::new(
                            RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(
                                option.option_id.clone(),
                            )),
                        ))?;
                    }
                }
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ReadTextFileRequest, responder, _cx| {
                s3.fs_calls
                    .lock()
                    .unwrap()
                    .push(format!("read {}", request.path.display()));
                if let Some(hook) = s3.on_fs.lock().unwrap().as_ref() {
                    hook(&request.path);
                }
                let delay = *s3.fs_delay.lock().unwrap();
                tokio::time::sleep(delay).await;
                let text = s3.buffers.lock().unwrap().get(&request.path).cloned();
                match text.or_else(|| std::fs::read_to_string(&request.path).ok()) {
                    Some(text) => responder.respond(ReadTextFileResponse::new(text))?,
                    None => responder.respond_with_error(Error::new(
                        agent_client_protocol::ErrorCode::RESOURCE_NOT_FOUND,
                        "no such file",
                    ))?,
                }
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: WriteTextFileRequest, responder, _cx| {
                s4.fs_calls
                    .lock()
                    .unwrap()
                    .push(format!("write {}", request.path.display()));
                if let Some(hook) = s4.on_fs.lock().unwrap().as_ref() {
                    hook(&request.path);
                }
                let delay = *s4.fs_delay.lock().unwrap();
                tokio::time::sleep(delay).await;
                if s4.write_through.load(std::sync::atomic::Ordering::SeqCst) {
                    // As an editor saves: to whatever the name leads to now.
                    let _ = std::fs::write(&request.path, &request.content);
                } else {
                    s4.buffers
                        .lock()
                        .unwrap()
                        .insert(request.path.clone(), request.content.clone());
                }
                responder.respond(WriteTextFileResponse::new())?;
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: CreateTerminalRequest, responder, _cx| {
                let mut line = vec![request.command.clone()];
                line.extend(request.args.iter().cloned());
                t1.created.lock().unwrap().push(line);
                let id = format!("term-{}", t1.terminals.lock().unwrap().len() + 1);
                if t1.stuck_terminals.load(std::sync::atomic::Ordering::SeqCst) {
                    responder.respond(CreateTerminalResponse::new(id))?;
                    return Ok(());
                }
                let term = Term::start(&request.command, &request.args, request.cwd.as_deref());
                let id = format!("term-{}", t1.terminals.lock().unwrap().len() + 1);
                t1.terminals
                    .lock()
                    .unwrap()
                    .insert(id.clone(), term.clone());
                if let Some(after) = *t1.kill_after.lock().unwrap() {
                    tokio::spawn(async move {
                        tokio::time::sleep(after).await;
                        term.kill();
                    });
                }
                responder.respond(CreateTerminalResponse::new(id))?;
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: TerminalOutputRequest, responder, _cx| {
                let term = t2
                    .terminals
                    .lock()
                    .unwrap()
                    .get(request.terminal_id.0.as_ref())
                    .cloned();
                match term {
                    Some(term) => {
                        responder.respond(TerminalOutputResponse::new(term.text(), false))?
                    }
                    None => responder.respond_with_error(Error::invalid_params())?,
                }
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: WaitForTerminalExitRequest, responder, _cx| {
                let term = t3
                    .terminals
                    .lock()
                    .unwrap()
                    .get(request.terminal_id.0.as_ref())
                    .cloned();
                let Some(term) = term else {
                    responder.respond_with_error(Error::invalid_params())?;
                    return Ok(());
                };
                // Off the dispatch loop: the command may run a while.
                tokio::spawn(async move {
                    let mut exit = term.exit.clone();
                    let code = exit
                        .wait_for(Option::is_some)
                        .await
                        .ok()
                        .and_then(|c| *c)
                        .flatten();
                    let status = TerminalExitStatus::new();
                    let status = match code {
                        Some(code) => status.exit_code(u32::try_from(code).unwrap_or(1)),
                        None => status.signal("SIGKILL".to_owned()),
                    };
                    let _ = responder.respond(WaitForTerminalExitResponse::new(status));
                });
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: KillTerminalRequest, responder, _cx| {
                if let Some(term) = t4
                    .terminals
                    .lock()
                    .unwrap()
                    .get(request.terminal_id.0.as_ref())
                {
                    term.kill();
                }
                responder.respond(KillTerminalResponse::new())?;
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ReleaseTerminalRequest, responder, _cx| {
                if let Some(term) = t5
                    .terminals
                    .lock()
                    .unwrap()
                    .get(request.terminal_id.0.as_ref())
                {
                    term.kill();
                }
                responder.respond(ReleaseTerminalResponse::new())?;
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(transport, body)
        .await
        .unwrap()
}

/// `initialize` with `capabilities`.
pub async fn initialize(
    cx: &ConnectionTo<Agent>,
    capabilities: ClientCapabilities,
) -> Result<serde_json::Value, Error> {
    let response = cx
        .send_request(InitializeRequest::new(ProtocolVersion::V1).client_capabilities(capabilities))
        .block_task()
        .await?;
    Ok(serde_json::to_value(response).unwrap())
}

/// `session/new` in `cwd`; the session id.
pub async fn new_session(cx: &ConnectionTo<Agent>, cwd: &Path) -> Result<String, Error> {
    let response = cx
        .send_request(NewSessionRequest::new(cwd))
        .block_task()
        .await?;
    Ok(response.session_id.0.to_string())
}

/// A text prompt.
pub fn text_prompt(session: &str, text: &str) -> PromptRequest {
    PromptRequest::new(
        session.to_owned(),
        vec![ContentBlock::Text(TextContent::new(text))],
    )
}

/// Sends a text prompt and waits for its stop reason.
pub async fn prompt(
    cx: &ConnectionTo<Agent>,
    session: &str,
    text: &str,
) -> Result<StopReason, Error> {
    let response: PromptResponse = cx
        .send_request(text_prompt(session, text))
        .block_task()
        .await?;
    Ok(response.stop_reason)
}

/// Waits until `done` holds, for at most 20 s.
pub async fn wait_until(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The text of request `index` the mock model received.
pub fn request_text(server: &MockServer, index: usize) -> String {
    server
        .requests()
        .get(index)
        .map(|r| r.body.to_string())
        .unwrap_or_default()
}

/// An editor that offers terminals (and no files).
pub fn with_terminals() -> ClientCapabilities {
    capabilities(false).terminal(true)
}

/// Starts keel with `args` against `server`, connects an editor offering `capabilities`, and
/// runs one prompt in a new session of the world's workspace; how it stopped.
pub async fn run_once(
    world: &World,
    server: &MockServer,
    args: &[&str],
    capabilities: ClientCapabilities,
    state: Arc<EditorState>,
    text: &str,
) -> StopReason {
    let work = world.work();
    let mut keel = world.spawn(server, args);
    connect(&mut keel, state, async |cx| {
        initialize(&cx, capabilities).await?;
        let session = new_session(&cx, &work).await?;
        prompt(&cx, &session, text).await
    })
    .await
}

/// The kinds of the options a question offered (`allow_once`, …).
pub fn option_kinds(request: &RequestPermissionRequest) -> Vec<String> {
    request
        .options
        .iter()
        .map(|o| {
            serde_json::to_value(o.kind)
                .unwrap()
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}
