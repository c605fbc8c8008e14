//! An MCP server that asks for OAuth and its authorization server, on one loopback port,
//! for the end-to-end tests of logging in (`mcp_auth.rs`, and ACP's `/mcp login`). It can
//! misbehave in the ways the security rows name ([`Hostile`]).
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use serde_json::{Value, json};

/// One request the server saw.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: BTreeMap<String, String>,
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

impl Seen {
    pub fn form(&self) -> BTreeMap<String, String> {
        url::form_urlencoded::parse(self.body.as_bytes())
            .into_owned()
            .collect()
    }
}

/// How the authorization side misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hostile {
    None,
    IssuerMismatch,
    TokenEndpointLinkLocal,
    RegistrationPrivate,
    HugeMetadata,
    MalformedMetadata,
    ResourceMismatch,
    MetadataRedirect,
    NoPkce,
    /// The resource metadata names another authorization server than the first login's.
    OtherIssuer,
}

pub struct State {
    pub hostile: Hostile,
    pub seen: Vec<Seen>,
    /// Tokens the MCP endpoint takes.
    pub valid: BTreeSet<String>,
    /// Tokens issued so far.
    pub issued: u32,
    /// The PKCE challenge of the last authorization request.
    pub challenge: Option<String>,
    /// The MCP endpoint refuses a token with a bare 401 (no `WWW-Authenticate`).
    pub bare_401: bool,
}

/// The MCP server and its authorization server, on one loopback port.
pub struct Server {
    pub base: String,
    pub state: Arc<Mutex<State>>,
}

impl Server {
    pub fn start(hostile: Hostile) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let state = Arc::new(Mutex::new(State {
            hostile,
            seen: Vec::new(),
            valid: BTreeSet::new(),
            issued: 0,
            challenge: None,
            bare_401: false,
        }));
        let shared = state.clone();
        let at = base.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let shared = shared.clone();
                let at = at.clone();
                std::thread::spawn(move || serve(stream, &shared, &at));
            }
        });
        Self { base, state }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    pub fn paths(&self) -> Vec<String> {
        self.seen().into_iter().map(|s| s.path).collect()
    }
}

fn serve(stream: std::net::TcpStream, state: &Mutex<State>, base: &str) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() || line.is_empty() {
        return;
    }
    let mut words = line.split_whitespace();
    let method = words.next().unwrap_or_default().to_owned();
    let target = words.next().unwrap_or_default().to_owned();
    let mut headers = BTreeMap::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).unwrap();
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
        }
    }
    let length: usize = headers
        .get("content-length")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let seen = Seen {
        method,
        path: path.to_owned(),
        query: url::form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .collect(),
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    let (status, extra, content_type, answer) = route(&seen, state, base);
    state.lock().unwrap().seen.push(seen);
    let mut stream = stream;
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n{extra}\r\n",
        answer.len()
    );
    let _ = stream.write_all(answer.as_bytes());
}

type Answer = (&'static str, String, &'static str, String);

fn json_answer(status: &'static str, value: &Value) -> Answer {
    (status, String::new(), "application/json", value.to_string())
}

fn route(seen: &Seen, state: &Mutex<State>, base: &str) -> Answer {
    let hostile = state.lock().unwrap().hostile;
    let metadata_url = format!("{base}/.well-known/oauth-protected-resource/mcp");
    match (seen.method.as_str(), seen.path.as_str()) {
        ("GET", "/.well-known/oauth-protected-resource/mcp") => {
            if hostile == Hostile::MetadataRedirect {
                return (
                    "302 Found",
                    format!("location: {base}/secret\r\n"),
                    "text/plain",
                    String::new(),
                );
            }
            let resource = if hostile == Hostile::ResourceMismatch {
                "https://evil.example.com/mcp".to_owned()
            } else {
                format!("{base}/mcp")
            };
            let issuer = if hostile == Hostile::OtherIssuer {
                format!("{base}/other")
            } else {
                base.to_owned()
            };
            json_answer(
                "200 OK",
                &json!({"resource": resource, "authorization_servers": [issuer], "scopes_supported": ["read"]}),
            )
        }
        ("GET", "/.well-known/oauth-authorization-server/other") => json_answer(
            "200 OK",
            &json!({
                "issuer": format!("{base}/other"),
                "authorization_endpoint": format!("{base}/authorize"),
                "token_endpoint": format!("{base}/token"),
                "registration_endpoint": format!("{base}/register"),
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none"],
            }),
        ),
        ("GET", "/.well-known/oauth-authorization-server") => {
            let mut metadata = json!({
                "issuer": base,
                "authorization_endpoint": format!("{base}/authorize"),
                "token_endpoint": format!("{base}/token"),
                "registration_endpoint": format!("{base}/register"),
                "response_types_supported": ["code"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none"],
            });
            match hostile {
                Hostile::IssuerMismatch => metadata["issuer"] = json!("https://evil.example.com"),
                Hostile::TokenEndpointLinkLocal => {
                    metadata["token_endpoint"] = json!("http://169.254.169.254/latest/api/token");
                }
                Hostile::RegistrationPrivate => {
                    metadata["registration_endpoint"] = json!("https://10.0.0.7/register");
                }
                Hostile::NoPkce => {
                    metadata
                        .as_object_mut()
                        .unwrap()
                        .remove("code_challenge_methods_supported");
                }
                Hostile::HugeMetadata => {
                    metadata["padding"] = json!("x".repeat(300 * 1024));
                }
                Hostile::MalformedMetadata => {
                    return (
                        "200 OK",
                        String::new(),
                        "application/json",
                        "{\"issuer\": [".into(),
                    );
                }
                _ => {}
            }
            json_answer("200 OK", &metadata)
        }
        ("POST", "/register") => json_answer("201 Created", &json!({"client_id": "client-1"})),
        ("GET", "/authorize") => {
            state.lock().unwrap().challenge = seen.query.get("code_challenge").cloned();
            let redirect = format!(
                "{}?code=code-1&state={}",
                seen.query["redirect_uri"], seen.query["state"]
            );
            (
                "302 Found",
                format!("location: {redirect}\r\n"),
                "text/plain",
                String::new(),
            )
        }
        ("POST", "/token") => {
            let form = seen.form();
            let mut state = state.lock().unwrap();
            if form["grant_type"] == "authorization_code" {
                let verifier = form.get("code_verifier").cloned().unwrap_or_default();
                let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(
                    ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes()),
                );
                if Some(computed) != state.challenge || form["code"] != "code-1" {
                    return json_answer("400 Bad Request", &json!({"error": "invalid_grant"}));
                }
            } else if form.get("refresh_token").map(String::as_str) != Some("refresh-1") {
                return json_answer("400 Bad Request", &json!({"error": "invalid_grant"}));
            }
            state.issued += 1;
            let token = format!("token-{}", state.issued);
            state.valid.insert(token.clone());
            // The first token is about to expire: keel must refresh before using it.
            let expires = if state.issued == 1 { 5 } else { 3600 };
            json_answer(
                "200 OK",
                &json!({"access_token": token, "token_type": "Bearer", "expires_in": expires,
                        "refresh_token": "refresh-1", "scope": "read"}),
            )
        }
        ("POST", "/mcp") => {
            let token = seen
                .headers
                .get("authorization")
                .and_then(|a| a.strip_prefix("Bearer "))
                .unwrap_or_default()
                .to_owned();
            if !state.lock().unwrap().valid.contains(&token) {
                let bare = state.lock().unwrap().bare_401;
                return (
                    "401 Unauthorized",
                    if bare {
                        String::new()
                    } else {
                        format!(
                            "www-authenticate: Bearer resource_metadata=\"{metadata_url}\", scope=\"read\"\r\n"
                        )
                    },
                    "application/json",
                    "{\"error\":\"invalid_token\"}".into(),
                );
            }
            let request: Value = serde_json::from_str(&seen.body).unwrap_or_default();
            let Some(id) = request.get("id").cloned() else {
                return ("202 Accepted", String::new(), "text/plain", String::new());
            };
            let result = match request["method"].as_str().unwrap_or_default() {
                "initialize" => {
                    json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                                       "serverInfo": {"name": "guarded", "version": "1"}})
                }
                "tools/list" => {
                    json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]})
                }
                "tools/call" => json!({"content": [{"type": "text", "text": "guarded hello"}]}),
                _ => json!({}),
            };
            json_answer(
                "200 OK",
                &json!({"jsonrpc": "2.0", "id": id, "result": result}),
            )
        }
        _ => (
            "404 Not Found",
            String::new(),
            "text/plain",
            "not found".into(),
        ),
    }
}
