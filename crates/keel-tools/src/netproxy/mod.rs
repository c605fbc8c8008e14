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

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

pub use rules::{DEFAULT_ALLOW, NetworkRules};

/// The proxy's port inside a session's network namespace.
pub const PORT: u16 = 3128;

/// How long a connection to an allowed host may take to open.
const CONNECT_LIMIT: Duration = Duration::from_secs(30);
/// Refusals kept for the messages (the oldest go first).
const KEPT_REFUSALS: usize = 64;

/// A running proxy for one session's commands.
#[derive(Debug)]
pub struct Proxy {
    rules: NetworkRules,
    refusals: Mutex<Refusals>,
}

#[derive(Debug, Default)]
struct Refusals {
    next: u64,
    kept: VecDeque<(u64, String)>,
}

impl Proxy {
    /// Serves `listener` (a listening socket in the commands' namespace) on the current
    /// tokio runtime, letting through what `rules` allow.
    pub fn start(
        listener: std::net::TcpListener,
        rules: NetworkRules,
    ) -> std::io::Result<Arc<Self>> {
        listener.set_nonblocking(true)?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let proxy = Arc::new(Self {
            rules,
            refusals: Mutex::new(Refusals::default()),
        });
        let weak = Arc::downgrade(&proxy);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let Some(proxy) = weak.upgrade() else {
                    break;
                };
                tokio::spawn(async move {
                    if let Err(error) = proxy.serve(stream).await {
                        tracing::debug!(%error, "a proxied connection ended in an error");
                    }
                });
            }
        });
        Ok(proxy)
    }

    /// The rules in force.
    pub fn rules(&self) -> &NetworkRules {
        &self.rules
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
        if client.peek(&mut first).await? == 0 {
            return Ok(());
        }
        if first[0] == socks::VERSION {
            socks::serve(self, client).await
        } else {
            http::serve(self, client).await
        }
    }

    /// Opens a connection to `host:port` if the rules allow it; `None` (and the refusal
    /// kept) if not.
    async fn open(&self, host: &str, port: u16) -> Option<std::io::Result<TcpStream>> {
        if !self.rules.allows(host) {
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
