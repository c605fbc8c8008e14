//! The proxy through which sandboxed commands reach the network.
//!
//! In `workspace-write` a command lives in a network namespace of its session with only a
//! loopback: no route leads out. The one way out is this proxy, listening inside that
//! namespace on `127.0.0.1:PORT` (the listener was made there by the sandbox's spawner and
//! handed to keel) and connecting from keel's own namespace, to the hosts the rules allow
//! and no others. It speaks HTTP (`CONNECT`, and plain requests in absolute form) and SOCKS5
//! on the same port, which the commands' `HTTP_PROXY`, `HTTPS_PROXY` and `ALL_PROXY` name.
//! Raw sockets, UDP, DNS and any address not asked through the proxy have nowhere to go:
//! the kernel enforces it, not the tools' good will.
//!
//! Every refusal is kept (host and port), so the bash tool can tell the model which domain
//! was refused and which setting would allow it.

mod http;
mod rules;
mod socks;

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use keel_protocol::ToolCallId;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::permission::{Approval, ApprovalRequest, Approver, Scope};

pub use rules::{DEFAULT_ALLOW, NetworkRules};

/// The proxy's port inside a session's network namespace.
pub const PORT: u16 = 3128;

/// How long a connection to an allowed host may take to open.
const CONNECT_LIMIT: Duration = Duration::from_secs(30);
/// Refusals kept for the messages (the oldest go first).
const KEPT_REFUSALS: usize = 64;
/// Most connections through the proxy at once: each holds two of keel's descriptors, and a
/// command must not be able to use up keel's.
const MAX_CONNECTIONS: usize = 256;
/// How long a client may take to say where it wants to go.
const REQUEST_LIMIT: Duration = Duration::from_secs(30);

/// A running proxy for one session's commands.
pub struct Proxy {
    /// Stops the accept loop when the proxy is dropped.
    _stop: tokio_util::sync::DropGuard,
    rules: NetworkRules,
    refusals: Mutex<Refusals>,
    /// Who is asked about a host the rules do not allow (`ask` mode with a person there);
    /// `None`: such a host is refused.
    asker: Option<Arc<dyn Approver>>,
    /// The bash call whose command is running, to attach a question to.
    call: Mutex<Option<ToolCallId>>,
    /// Hosts the user allowed, or refused, for the rest of the session.
    answered: Mutex<Answered>,
    /// One question at a time: a second connection to the same host waits for the first
    /// answer instead of asking again.
    asking: tokio::sync::Mutex<()>,
}

/// Who the proxy asks about a host off the list: the session's approver.
#[derive(Clone)]
pub struct Asker(pub Arc<dyn Approver>);

impl std::fmt::Debug for Asker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Asker")
    }
}

#[derive(Debug, Default)]
struct Answered {
    allowed: HashSet<String>,
    refused: HashSet<String>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("rules", &self.rules)
            .field("asks", &self.asker.is_some())
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Default)]
struct Refusals {
    next: u64,
    kept: VecDeque<(u64, String)>,
}

impl Proxy {
    /// Serves `listener` (a listening socket in the commands' namespace) on the current
    /// tokio runtime, letting through what `rules` allow.
    /// `asker`, when given, is asked about a host the rules do not allow.
    pub fn start(
        listener: std::net::TcpListener,
        rules: NetworkRules,
        asker: Option<Asker>,
    ) -> std::io::Result<Arc<Self>> {
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let stop = tokio_util::sync::CancellationToken::new();
        let stopped = stop.clone();
        let proxy = Arc::new(Self {
            _stop: stop.drop_guard(),
            rules,
            refusals: Mutex::new(Refusals::default()),
            asker: asker.map(|a| a.0),
            call: Mutex::new(None),
            answered: Mutex::new(Answered::default()),
            asking: tokio::sync::Mutex::new(()),
        });
        let weak = Arc::downgrade(&proxy);
        let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
        // The loop, and with it the listening socket (and the network namespace it holds),
        // ends when the proxy is dropped (its session's tools were rebuilt or closed).
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    accepted = listener.accept() => accepted,
                    () = stopped.cancelled() => break,
                };
                let Ok((stream, _)) = accepted else {
                    break;
                };
                let Some(proxy) = weak.upgrade() else {
                    break;
                };
                // Past the limit a connection is closed at once.
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    drop(stream);
                    continue;
                };
                tokio::spawn(async move {
                    let _slot = slot;
                    if let Err(error) = proxy.serve(stream).await {
                        tracing::debug!(%error, "a proxied connection ended in an error");
                    }
                });
            }
        });
        Ok(proxy)
    }

    /// Notes the bash call whose command starts now: a question about a host is attached to
    /// it.
    pub fn command_started(&self, call: ToolCallId) {
        *self.call.lock().unwrap_or_else(PoisonError::into_inner) = Some(call);
    }

    /// A mark to pass to [`Proxy::refused_since`].
    pub fn mark(&self) -> u64 {
        self.refusals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .next
    }

    /// The `host:port`s refused since `mark`, each once.
    pub fn refused_since(&self, mark: u64) -> Vec<String> {
        let refusals = self.refusals.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out: Vec<String> = Vec::new();
        for (_, target) in refusals.kept.iter().filter(|(n, _)| *n >= mark) {
            if !out.contains(target) {
                out.push(target.clone());
            }
        }
        out
    }

    fn refuse(&self, host: &str, port: u16) {
        tracing::info!(%host, port, "the sandbox's proxy refused a connection");
        let mut refusals = self.refusals.lock().unwrap_or_else(PoisonError::into_inner);
        let n = refusals.next;
        refusals.next += 1;
        refusals.kept.push_back((n, format!("{host}:{port}")));
        while refusals.kept.len() > KEPT_REFUSALS {
            refusals.kept.pop_front();
        }
    }

    /// One client connection: SOCKS5 when it opens with version 5, HTTP otherwise.
    async fn serve(&self, client: TcpStream) -> std::io::Result<()> {
        let mut first = [0u8; 1];
        let peeked = tokio::time::timeout(REQUEST_LIMIT, client.peek(&mut first)).await;
        if !matches!(peeked, Ok(Ok(n)) if n > 0) {
            return Ok(());
        }
        if first[0] == socks::VERSION {
            socks::serve(self, client).await
        } else {
            http::serve(self, client).await
        }
    }

    /// Opens a connection to `host:port` if the rules, or the user, allow it; `None` (and
    /// the refusal kept) if not.
    async fn open(&self, host: &str, port: u16) -> Option<std::io::Result<TcpStream>> {
        if !self.rules.allows(host) && !self.ask(host, port).await {
            self.refuse(host, port);
            return None;
        }
        let host = host.trim_start_matches('[').trim_end_matches(']');
        Some(
            match tokio::time::timeout(CONNECT_LIMIT, TcpStream::connect((host, port))).await {
                Ok(result) => result,
                Err(_) => Err(std::io::Error::from(std::io::ErrorKind::TimedOut)),
            },
        )
    }
}

impl Proxy {
    /// Asks the user whether a command may reach `host`, once per host at a time; whether
    /// it may. Without someone to ask, or a command to attach the question to, no.
    async fn ask(&self, host: &str, port: u16) -> bool {
        let Some(asker) = &self.asker else {
            return false;
        };
        let host = host.to_ascii_lowercase();
        let _one = self.asking.lock().await;
        {
            let answered = self.answered.lock().unwrap_or_else(PoisonError::into_inner);
            if answered.allowed.contains(&host) {
                return true;
            }
            if answered.refused.contains(&host) {
                return false;
            }
        }
        let Some(call) = self
            .call
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        else {
            return false;
        };
        let request = ApprovalRequest {
            tool_call_id: call,
            tool: "bash".into(),
            summary: format!("connect to {host}:{port}"),
            reasons: vec![format!(
                "a command wants to reach {host}, which is not in sandbox.network.allow"
            )],
            safety: false,
            scopes: vec![Scope {
                label: format!("connections to {host} for this session"),
                matchers: Vec::new(),
                saved: false,
            }],
            arguments: serde_json::json!({"host": host, "port": port}),
            preview: None,
        };
        let answer = asker.approve(request).await;
        let mut answered = self.answered.lock().unwrap_or_else(PoisonError::into_inner);
        match answer {
            Approval::AllowOnce => true,
            Approval::AllowAlways(_) => {
                answered.allowed.insert(host);
                true
            }
            Approval::Deny(_) => false,
            Approval::DenyAlways(_) => {
                answered.refused.insert(host);
                false
            }
        }
    }
}

/// What a refused command is told, naming the hosts and the setting.
pub fn refusal_note(refused: &[String]) -> Option<String> {
    if refused.is_empty() {
        return None;
    }
    Some(format!(
        "[keel: the sandbox refused network access to {}: only hosts listed in sandbox.network.allow \
         are reachable from commands. The user can add a host to sandbox.network.allow in their \
         keel configuration (config.yaml in keel's home folder).]",
        refused.join(", ")
    ))
}

/// Copies both ways until both sides are done.
async fn relay<A, B>(a: &mut A, b: &mut B) -> std::io::Result<()>
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    tokio::io::copy_bidirectional(a, b).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether a socket listens on `127.0.0.1:port` in this network namespace.
    fn listening(port: u16) -> bool {
        let wanted = format!("0100007F:{port:04X}");
        std::fs::read_to_string("/proc/net/tcp").is_ok_and(|table| {
            table.lines().skip(1).any(|line| {
                let mut fields = line.split_whitespace().skip(1);
                fields.next() == Some(wanted.as_str()) && fields.nth(1) == Some("0A")
            })
        })
    }

    #[tokio::test]
    async fn a_dropped_proxy_stops_listening() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let proxy = Proxy::start(listener, NetworkRules::default(), None).unwrap();
        assert!(listening(port));
        drop(proxy);
        // No connection is made: the socket must close by itself.
        let mut closed = false;
        for _ in 0..200 {
            tokio::time::sleep(Duration::from_millis(10)).await;
            if !listening(port) {
                closed = true;
                break;
            }
        }
        assert!(closed, "the listener outlived its proxy");
    }
}
