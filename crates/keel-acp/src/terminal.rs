//! Commands shown live in the editor's terminals (`terminal/*`), without giving the editor
//! the command: keel still runs it, sandboxed, with the cleaned environment, and the
//! editor's terminal runs `keel acp-relay`, which connects back over a Unix socket in
//! `$KEEL_HOME/run` (hidden from commands like all of keel's home), proves itself with a
//! one-time token, and prints what keel sends. Killing the terminal kills the relay, which
//! keel sees as the socket closing and takes as the user stopping the command.
//!
//! Frames on the socket, keel to relay: `o` + u32 length (big-endian) + output bytes, or
//! `x` + i32 exit code (big-endian; `-1` when the command had none), after which keel closes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CreateTerminalRequest, ReleaseTerminalRequest, SessionUpdate, Terminal, ToolCallContent,
    ToolCallUpdate, ToolCallUpdateFields, WaitForTerminalExitRequest,
};
use keel_runtime::services::{LiveFeed, LiveTerminal};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::session::Session;

/// How long the editor may take to start the relay and for it to call back.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long keel waits for the editor to settle a finished terminal.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(5);
/// Output the editor keeps per terminal (it drops the oldest past this).
const OUTPUT_LIMIT: u64 = 1024 * 1024;
/// Output waiting for the relay at most; past it the terminal's copy is cut (the model's
/// copy is not), so a fast command and a slow or absent terminal cannot fill keel's memory.
const PENDING_LIMIT: usize = 4 * 1024 * 1024;
/// What the terminal shows where its copy was cut.
const CUT_NOTICE: &[u8] =
    b"\r\n[keel: the output came faster than this terminal took it; the rest is not shown here]\r\n";

/// The connection's socket for relays, and the relays expected on it.
pub struct Relays {
    socket: PathBuf,
    program: PathBuf,
    waiting: Mutex<HashMap<String, oneshot::Sender<UnixStream>>>,
}

impl Relays {
    /// Listens in `dir` (made 0700); relays are this program run as `acp-relay`.
    pub fn start(dir: &Path) -> std::io::Result<Arc<Self>> {
        use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        let socket = dir.join(format!("acp-{}.sock", std::process::id()));
        let _ = std::fs::remove_file(&socket);
        let listener = UnixListener::bind(&socket)?;
        let relays = Arc::new(Self {
            socket,
            program: std::env::current_exe()?,
            waiting: Mutex::new(HashMap::new()),
        });
        let weak = Arc::downgrade(&relays);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let Some(relays) = weak.upgrade() else { break };
                tokio::spawn(async move { relays.admit(stream).await });
            }
        });
        Ok(relays)
    }

    /// Hands a connecting relay to the command whose token it names; anything else is
    /// dropped.
    async fn admit(&self, stream: UnixStream) {
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        let read = tokio::time::timeout(START_TIMEOUT, async {
            let mut limited = (&mut reader).take(128);
            limited.read_line(&mut line).await
        })
        .await;
        if !matches!(read, Ok(Ok(n)) if n > 0) {
            return;
        }
        let waiter = self
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(line.trim_end());
        if let Some(waiter) = waiter {
            let _ = waiter.send(reader.into_inner());
        }
    }

    /// Removes the socket.
    pub fn stop(&self) {
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// Finds an open session of the connection by id.
pub type FindSession = Arc<dyn Fn(&str) -> Option<Arc<Session>> + Send + Sync>;

/// A session's terminals.
pub struct SessionTerminals {
    /// The relays' socket.
    pub relays: Arc<Relays>,
    /// The connection to the editor.
    pub connection: ConnectionTo<Client>,
    /// The session's id.
    pub session: String,
    /// How to find it (it opens after its tools are made).
    pub find: FindSession,
}

enum Frame {
    Output(Vec<u8>),
    Exit(Option<i32>),
}

struct Feed {
    frames: mpsc::UnboundedSender<Frame>,
    killed: CancellationToken,
    /// Bytes sent to the writer and not yet written to the relay.
    pending: Arc<AtomicUsize>,
    cut: AtomicBool,
    /// Fires once the editor was told the call's terminal, or will not be.
    shown: CancellationToken,
    /// The command ended before its terminal could be told: it is not told after.
    late: Arc<Mutex<bool>>,
}

impl LiveFeed for Feed {
    fn output(&self, bytes: &[u8]) {
        if self.cut.load(Ordering::Relaxed) {
            return;
        }
        if self.pending.load(Ordering::Relaxed) + bytes.len() > PENDING_LIMIT {
            self.cut.store(true, Ordering::Relaxed);
            let _ = self.frames.send(Frame::Output(CUT_NOTICE.to_vec()));
            return;
        }
        self.pending.fetch_add(bytes.len(), Ordering::Relaxed);
        let _ = self.frames.send(Frame::Output(bytes.to_vec()));
    }

    fn exit(&self, code: Option<i32>) {
        let _ = self.frames.send(Frame::Exit(code));
    }

    fn killed(&self) -> CancellationToken {
        self.killed.clone()
    }

    fn shown(&self) -> CancellationToken {
        self.shown.clone()
    }

    fn too_late(&self) {
        *self.late.lock().unwrap_or_else(PoisonError::into_inner) = true;
    }
}

fn token() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // Without randomness no relay can be told apart: show no terminal.
        return String::new();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl LiveTerminal for SessionTerminals {
    fn open(&self, call_id: &str, command: &str, cwd: &Path) -> Option<Box<dyn LiveFeed>> {
        let session = (self.find)(&self.session)?;
        let token = token();
        if token.is_empty() {
            return None;
        }
        let (frames, mut queue) = mpsc::unbounded_channel();
        let pending = Arc::new(AtomicUsize::new(0));
        let written = pending.clone();
        let killed = CancellationToken::new();
        let (arrived, relay) = oneshot::channel();
        self.relays
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(token.clone(), arrived);
        let relays = self.relays.clone();
        let connection = self.connection.clone();
        let call_id = call_id.to_owned();
        let shown = command.to_owned();
        let cwd = cwd.to_path_buf();
        let stop = killed.clone();
        let announced = CancellationToken::new();
        let late = Arc::new(Mutex::new(false));
        let (told, too_late) = (announced.clone(), late.clone());
        tokio::spawn(async move {
            // However this ends, the command's end stops waiting for the terminal.
            let _told = told.clone().drop_guard();
            let sid = session.id.to_string();
            let create =
                CreateTerminalRequest::new(sid.clone(), relays.program.display().to_string())
                    .args(vec![
                        "acp-relay".into(),
                        relays.socket.display().to_string(),
                        token.clone(),
                    ])
                    .cwd(cwd)
                    .output_byte_limit(OUTPUT_LIMIT);
            let created =
                tokio::time::timeout(START_TIMEOUT, connection.send_request(create).block_task())
                    .await;
            let terminal = match created {
                Ok(Ok(created)) => created.terminal_id,
                other => {
                    relays
                        .waiting
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .remove(&token);
                    tracing::warn!(command = %shown, ok = other.is_ok(), "the editor made no terminal; the command runs without one");
                    return;
                }
            };
            {
                // Told before the call's end, or not at all.
                let late = too_late.lock().unwrap_or_else(PoisonError::into_inner);
                if !*late {
                    session.show_terminal(&call_id, terminal.0.to_string());
                    session.send(
                        &connection,
                        SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                            call_id.clone(),
                            ToolCallUpdateFields::new().content(vec![ToolCallContent::Terminal(
                                Terminal::new(terminal.clone()),
                            )]),
                        )),
                    );
                }
            }
            told.cancel();
            if let Ok(Ok(stream)) = tokio::time::timeout(START_TIMEOUT, relay).await {
                let (mut gone, mut stream) = stream.into_split();
                let mut probe = [0u8; 1];
                loop {
                    tokio::select! {
                        frame = queue.recv() => {
                            let (bytes, last) = match frame {
                                Some(Frame::Output(data)) => {
                                    written.fetch_sub(data.len().min(written.load(Ordering::Relaxed)), Ordering::Relaxed);
                                    let mut bytes = Vec::with_capacity(data.len() + 5);
                                    bytes.push(b'o');
                                    bytes.extend_from_slice(&u32::try_from(data.len()).unwrap_or(u32::MAX).to_be_bytes());
                                    bytes.extend_from_slice(&data);
                                    (bytes, false)
                                }
                                Some(Frame::Exit(code)) => {
                                    let mut bytes = vec![b'x'];
                                    bytes.extend_from_slice(&code.unwrap_or(-1).to_be_bytes());
                                    (bytes, true)
                                }
                                None => break,
                            };
                            if stream.write_all(&bytes).await.is_err() {
                                stop.cancel();
                                break;
                            }
                            if last {
                                let _ = stream.shutdown().await;
                                break;
                            }
                        }
                        // The relay never writes: a read that ends means it is gone (the
                        // user killed the terminal).
                        _ = gone.read(&mut probe) => {
                            stop.cancel();
                            break;
                        }
                    }
                }
            } else {
                relays
                    .waiting
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&token);
            }
            let _ = tokio::time::timeout(
                SETTLE_TIMEOUT,
                connection
                    .send_request(WaitForTerminalExitRequest::new(
                        sid.clone(),
                        terminal.clone(),
                    ))
                    .block_task(),
            )
            .await;
            let _ = tokio::time::timeout(
                SETTLE_TIMEOUT,
                connection
                    .send_request(ReleaseTerminalRequest::new(sid, terminal))
                    .block_task(),
            )
            .await;
        });
        Some(Box::new(Feed {
            frames,
            killed,
            pending,
            cut: AtomicBool::new(false),
            shown: announced,
            late,
        }))
    }
}
