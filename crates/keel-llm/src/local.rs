//! Local model servers on loopback (Ollama, LM Studio): which models they have and the
//! context window each really applies, which is the server's setting (Ollama's `num_ctx`,
//! LM Studio's `loaded_context_length`), not the model's advertised maximum.
//!
//! Asked with a small blocking HTTP/1.0 request to a loopback address only, with short
//! time limits: it runs while settings are resolved, before any async runtime, and only
//! when a local provider is in use or no provider key is set.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::Value;

/// How long connecting to a local server may take (loopback answers at once, or refuses).
const CONNECT: Duration = Duration::from_millis(300);
/// How long one answer may take.
const ANSWER: Duration = Duration::from_secs(2);
/// Largest answer read.
const MAX_ANSWER: u64 = 4 * 1024 * 1024;
/// The window Ollama applies when neither the model nor the server sets `num_ctx`.
pub const OLLAMA_DEFAULT_WINDOW: u32 = 4096;

/// Which kind of local server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Ollama (`/api/tags`, `/api/show`).
    Ollama,
    /// LM Studio (`/api/v0/models`).
    LmStudio,
}

impl Kind {
    /// The kind of keel's provider `name`, if it is a local server keel can ask.
    pub fn of_provider(name: &str) -> Option<Self> {
        match name {
            "ollama" => Some(Self::Ollama),
            "lmstudio" => Some(Self::LmStudio),
            _ => None,
        }
    }
}

/// A model a local server has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalModel {
    /// Its id, as requests name it.
    pub id: String,
    /// The window the server applies, when it says.
    pub window: Option<u32>,
}

/// The loopback address of `base_url` (`http://127.0.0.1:11434/v1`), `None` when it is not
/// plain HTTP on a loopback address: keel asks nothing of another machine here.
pub fn loopback(base_url: &str) -> Option<SocketAddr> {
    let rest = base_url.strip_prefix("http://")?;
    let host_port = rest.split('/').next()?;
    let (host, port) = match host_port.rsplit_once(':') {
        Some((host, port)) => (host, port.parse::<u16>().ok()?),
        None => (host_port, 80),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let ip: std::net::IpAddr = match host {
        "localhost" => std::net::Ipv4Addr::LOCALHOST.into(),
        other => other.parse().ok()?,
    };
    ip.is_loopback().then_some(SocketAddr::new(ip, port))
}

/// The models of the `kind` server at `address`, most recently used first where the server
/// says; `None` when nothing answers there.
pub fn models(kind: Kind, address: SocketAddr) -> Option<Vec<LocalModel>> {
    match kind {
        Kind::Ollama => {
            let tags = get(address, "GET", "/api/tags", None)?;
            let models = tags.get("models")?.as_array()?;
            Some(
                models
                    .iter()
                    .filter_map(|m| m.get("name").or_else(|| m.get("model"))?.as_str())
                    .map(|id| LocalModel {
                        id: id.to_owned(),
                        window: None,
                    })
                    .collect(),
            )
        }
        Kind::LmStudio => {
            let listed = get(address, "GET", "/api/v0/models", None)?;
            let data = listed.get("data")?.as_array()?;
            let mut models: Vec<(bool, LocalModel)> = data
                .iter()
                .filter(|m| m.get("type").and_then(Value::as_str) != Some("embeddings"))
                .filter_map(|m| {
                    let id = m.get("id")?.as_str()?.to_owned();
                    let loaded = m.get("state").and_then(Value::as_str) == Some("loaded");
                    let window = lm_studio_window(m);
                    Some((loaded, LocalModel { id, window }))
                })
                .collect();
            // A loaded model first: it answers without a load.
            models.sort_by_key(|(loaded, _)| !*loaded);
            Some(models.into_iter().map(|(_, m)| m).collect())
        }
    }
}

/// The window `id` gets on the `kind` server at `address`, when the server says.
pub fn window(kind: Kind, address: SocketAddr, id: &str) -> Option<u32> {
    match kind {
        Kind::Ollama => {
            // A loaded model's window is what the server runs it with (its
            // OLLAMA_CONTEXT_LENGTH included); else the model's own `num_ctx`; else Ollama's
            // default.
            if let Some(window) = get(address, "GET", "/api/ps", None)
                .as_ref()
                .and_then(|running| ollama_running_window(running, id))
            {
                return Some(window);
            }
            let body = serde_json::json!({ "model": id }).to_string();
            let shown = get(address, "POST", "/api/show", Some(&body))?;
            Some(ollama_window(&shown).unwrap_or(OLLAMA_DEFAULT_WINDOW))
        }
        Kind::LmStudio => {
            let shown = get(address, "GET", &format!("/api/v0/models/{id}"), None)?;
            lm_studio_window(&shown)
        }
    }
}

/// The `context_length` Ollama's `/api/ps` gives the loaded model `id`.
fn ollama_running_window(running: &Value, id: &str) -> Option<u32> {
    running
        .get("models")?
        .as_array()?
        .iter()
        .find(|m| {
            [m.get("name"), m.get("model")]
                .into_iter()
                .flatten()
                .any(|name| name.as_str() == Some(id))
        })?
        .get("context_length")?
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
}

/// `num_ctx` from the parameters Ollama's `/api/show` lists (`"num_ctx 8192\n…"`).
fn ollama_window(shown: &Value) -> Option<u32> {
    shown.get("parameters")?.as_str()?.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        (words.next()? == "num_ctx").then(|| words.next()?.parse().ok())?
    })
}

/// LM Studio's `loaded_context_length` for a loaded model; `None` for one not loaded,
/// whose window is set when it loads.
fn lm_studio_window(model: &Value) -> Option<u32> {
    let length = model.get("loaded_context_length")?.as_u64()?;
    u32::try_from(length).ok()
}

/// One request to the loopback server at `address`; its JSON answer, `None` for anything
/// else (nothing there, an error status, not JSON, too slow).
fn get(address: SocketAddr, method: &str, path: &str, body: Option<&str>) -> Option<Value> {
    let mut stream = TcpStream::connect_timeout(&address, CONNECT).ok()?;
    stream.set_read_timeout(Some(ANSWER)).ok()?;
    stream.set_write_timeout(Some(ANSWER)).ok()?;
    let body = body.unwrap_or("");
    // HTTP/1.0: the server closes the connection after the answer, which needs no chunks.
    let request = format!(
        "{method} {path} HTTP/1.0\r\nHost: {address}\r\nAccept: application/json\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).ok()?;
    // Until the answer's `Content-Length` is read (a server may keep the connection open),
    // else until the server closes it.
    let mut answer = Vec::new();
    let mut chunk = [0u8; 8192];
    let mut wanted: Option<usize> = None;
    loop {
        if let Some(total) = wanted
            && answer.len() >= total
        {
            break;
        }
        let read = match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(_) if wanted.is_some() || !answer.is_empty() => break,
            Err(_) => return None,
        };
        answer.extend_from_slice(&chunk[..read]);
        if answer.len() as u64 > MAX_ANSWER {
            return None;
        }
        if wanted.is_none()
            && let Some(end) = find(&answer, b"\r\n\r\n")
        {
            let head = String::from_utf8_lossy(&answer[..end]).to_ascii_lowercase();
            wanted = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .and_then(|n| n.trim().parse::<usize>().ok())
                .map(|n| end + 4 + n);
        }
    }
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status: u16 = head.split_whitespace().nth(1)?.parse().ok()?;
    if !(200..300).contains(&status) {
        return None;
    }
    serde_json::from_str(body).ok()
}

/// Where `needle` first starts in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A server answering each request by its first line from `routes`.
    fn serve(routes: Vec<(&'static str, &'static str)>) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let mut stream = stream.unwrap();
                let mut buffer = [0u8; 4096];
                let read = stream.read(&mut buffer).unwrap();
                let request = String::from_utf8_lossy(&buffer[..read]).into_owned();
                let first = request.lines().next().unwrap_or_default().to_owned();
                let answer = routes
                    .iter()
                    .find(|(route, _)| first.starts_with(route))
                    .map_or("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_owned(), |(_, body)| {
                        format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                            body.len()
                        )
                    });
                stream.write_all(answer.as_bytes()).unwrap();
                // Kept open a while, as a keep-alive server would: the length ends the read.
                std::thread::spawn(move || {
                    std::thread::sleep(std::time::Duration::from_secs(5));
                    drop(stream);
                });
            }
        });
        address
    }

    #[test]
    fn ollama_lists_models_and_applies_num_ctx_not_the_advertised_maximum() {
        let address = serve(vec![
            (
                "GET /api/tags",
                r#"{"models": [{"name": "qwen3:8b"}, {"name": "llama3.2:3b"}]}"#,
            ),
            (
                "POST /api/show",
                r#"{"parameters": "temperature 0.6\nnum_ctx 16384", "model_info": {"qwen3.context_length": 40960}}"#,
            ),
        ]);
        let models = models(Kind::Ollama, address).unwrap();
        assert_eq!(models[0].id, "qwen3:8b");
        assert_eq!(window(Kind::Ollama, address, "qwen3:8b"), Some(16384));
        // A loaded model: the window the server runs it with.
        let loaded = serve(vec![
            (
                "GET /api/ps",
                r#"{"models": [{"name": "qwen3:8b", "model": "qwen3:8b", "context_length": 32768}]}"#,
            ),
            ("POST /api/show", r#"{"parameters": "num_ctx 16384"}"#),
        ]);
        assert_eq!(window(Kind::Ollama, loaded, "qwen3:8b"), Some(32768));
        assert_eq!(window(Kind::Ollama, loaded, "other:1b"), Some(16384));
        assert_eq!(
            ollama_window(&serde_json::json!({"parameters": "stop x"})),
            None
        );
    }

    #[test]
    fn lm_studio_reads_the_loaded_window_and_puts_loaded_models_first() {
        let address = serve(vec![
            (
                "GET /api/v0/models/qwen",
                r#"{"id": "qwen", "state": "loaded", "loaded_context_length": 8192, "max_context_length": 131072}"#,
            ),
            (
                "GET /api/v0/models",
                r#"{"data": [{"id": "gemma", "state": "not-loaded", "max_context_length": 131072},
                             {"id": "nomic-embed", "type": "embeddings", "state": "loaded"},
                             {"id": "qwen", "state": "loaded", "loaded_context_length": 8192, "max_context_length": 131072}]}"#,
            ),
        ]);
        let models = models(Kind::LmStudio, address).unwrap();
        let ids: Vec<&str> = models.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["qwen", "gemma"]);
        assert_eq!(models[0].window, Some(8192));
        assert_eq!(models[1].window, None);
        assert_eq!(window(Kind::LmStudio, address, "qwen"), Some(8192));
    }

    #[test]
    fn only_loopback_http_is_asked_and_nothing_there_is_none() {
        assert_eq!(
            loopback("http://127.0.0.1:11434/v1"),
            Some("127.0.0.1:11434".parse().unwrap())
        );
        assert_eq!(loopback("http://localhost:1234/v1").unwrap().port(), 1234);
        assert_eq!(loopback("http://[::1]:8080/v1").unwrap().port(), 8080);
        for far in [
            "https://127.0.0.1:1/v1",
            "http://10.0.0.2:11434/v1",
            "http://example.com/v1",
        ] {
            assert_eq!(loopback(far), None, "{far}");
        }
        let closed = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        assert_eq!(models(Kind::Ollama, closed), None);
    }
}
