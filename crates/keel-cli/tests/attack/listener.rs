//! The loopback listener exfiltration vectors aim at: TCP and UDP on one port of 127.0.0.1,
//! recording every byte and every connection.
//!
//! A TCP peer gets a minimal HTTP answer once it pauses (and `100 Continue` when it asks for
//! one), so `curl` and `wget` finish at once instead of waiting for keel's timeout.

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the listener received.
#[derive(Debug, Default, Clone)]
pub struct Log {
    /// TCP connections accepted.
    pub connections: usize,
    /// UDP datagrams received.
    pub datagrams: usize,
    /// Every byte received, connections and datagrams one after another.
    pub bytes: Vec<u8>,
}

/// A running listener.
pub struct Listener {
    /// The port (TCP and UDP).
    pub port: u16,
    stop: Arc<AtomicBool>,
    log: Arc<Mutex<Log>>,
    threads: Vec<JoinHandle<()>>,
}

impl Listener {
    /// Binds TCP and UDP on one free port of 127.0.0.1 and starts recording.
    pub fn start() -> Self {
        let (tcp, udp) = (0..50)
            .find_map(|_| {
                let tcp = TcpListener::bind("127.0.0.1:0").ok()?;
                let port = tcp.local_addr().ok()?.port();
                let udp = UdpSocket::bind(("127.0.0.1", port)).ok()?;
                Some((tcp, udp))
            })
            .expect("a free TCP and UDP port on 127.0.0.1");
        let port = tcp.local_addr().unwrap().port();
        tcp.set_nonblocking(true).unwrap();
        udp.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let log = Arc::new(Mutex::new(Log::default()));
        let mut threads = Vec::new();
        {
            let (stop, log) = (stop.clone(), log.clone());
            threads.push(std::thread::spawn(move || accept_loop(&tcp, &stop, &log)));
        }
        {
            let (stop, log) = (stop.clone(), log.clone());
            threads.push(std::thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                while !stop.load(Ordering::Relaxed) {
                    if let Ok((n, _)) = udp.recv_from(&mut buf) {
                        let mut log = log.lock().unwrap();
                        log.datagrams += 1;
                        log.bytes.extend_from_slice(&buf[..n]);
                    }
                }
            }));
        }
        Self {
            port,
            stop,
            log,
            threads,
        }
    }

    /// Stops listening and returns everything received.
    pub fn finish(mut self) -> Log {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
        self.log.lock().unwrap().clone()
    }
}

fn accept_loop(tcp: &TcpListener, stop: &AtomicBool, log: &Arc<Mutex<Log>>) {
    let mut peers = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        match tcp.accept() {
            Ok((stream, _)) => {
                log.lock().unwrap().connections += 1;
                let log = log.clone();
                peers.push(std::thread::spawn(move || serve(stream, &log)));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    for peer in peers {
        let _ = peer.join();
    }
}

/// Reads until the peer pauses, answers, and keeps reading what follows for a moment.
fn serve(mut stream: TcpStream, log: &Mutex<Log>) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_millis(250)));
    let started = Instant::now();
    let mut seen = Vec::new();
    let mut continued = false;
    let mut answered = false;
    let mut buf = vec![0u8; 65536];
    while started.elapsed() < Duration::from_secs(3) {
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                seen.extend_from_slice(&buf[..n]);
                log.lock().unwrap().bytes.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&seen).to_ascii_lowercase();
                if !continued && text.contains("expect: 100-continue") {
                    continued = true;
                    let _ = stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
                }
            }
            Err(_) if !answered => {
                answered = true;
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n",
                );
                let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
            }
            Err(_) => break,
        }
    }
    log.lock().unwrap().bytes.push(b'\n');
}
