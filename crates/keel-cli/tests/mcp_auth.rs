//! End to end: `keel mcp login|call|get|logout` against an MCP server that asks for OAuth,
//! served here on loopback with its authorization server. The honest server checks the
//! flow (registration, PKCE, `state`, refresh before expiry and after a 401, storage,
//! logout); the hostile ones are the security suite's rows for MCP authorization: each
//! must be refused before a secret is sent or a browser opened.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use serde_json::{Value, json};

/// One request the server saw.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    query: BTreeMap<String, String>,
    headers: BTreeMap<String, String>,
    body: String,
}

impl Seen {
    fn form(&self) -> BTreeMap<String, String> {
        url::form_urlencoded::parse(self.body.as_bytes())
            .into_owned()
            .collect()
    }
}

/// How the authorization side misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hostile {
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

struct State {
    hostile: Hostile,
    seen: Vec<Seen>,
    /// Tokens the MCP endpoint takes.
    valid: BTreeSet<String>,
    /// Tokens issued so far.
    issued: u32,
    /// The PKCE challenge of the last authorization request.
    challenge: Option<String>,
}

/// The MCP server and its authorization server, on one loopback port.
struct Server {
    base: String,
    state: Arc<Mutex<State>>,
}

impl Server {
    fn start(hostile: Hostile) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let state = Arc::new(Mutex::new(State {
            hostile,
            seen: Vec::new(),
            valid: BTreeSet::new(),
            issued: 0,
            challenge: None,
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

    fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    fn paths(&self) -> Vec<String> {
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
                return (
                    "401 Unauthorized",
                    format!(
                        "www-authenticate: Bearer resource_metadata=\"{metadata_url}\", scope=\"read\"\r\n"
                    ),
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

/// A KEEL_HOME configured for the server, and a browser that follows redirects and leaves
/// a mark each time it is opened.
struct World {
    dir: tempfile::TempDir,
}

impl World {
    fn new(server: &Server) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("project/.git")).unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::write(
            dir.path().join("home/config.yaml"),
            format!(
                "mcp_servers:\n  guarded:\n    url: {}/mcp\n    startup_timeout_sec: 20\n",
                server.base
            ),
        )
        .unwrap();
        let browser = dir.path().join("browser");
        std::fs::write(
            &browser,
            format!(
                "#!/bin/sh\necho \"$1\" >> {}\nexec curl -s -o /dev/null -L --max-redirs 3 --max-time 20 \"$1\"\n",
                dir.path().join("opened").display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&browser, std::fs::Permissions::from_mode(0o755)).unwrap();
        Self { dir }
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn keel(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_keel"))
            .arg("mcp")
            .args(args)
            .current_dir(self.dir.path().join("project"))
            .env("KEEL_HOME", self.home())
            .env("HOME", self.dir.path())
            .env("BROWSER", self.dir.path().join("browser"))
            .env("KEEL_LOG", "debug")
            .output()
            .unwrap()
    }

    fn browsers_opened(&self) -> usize {
        std::fs::read_to_string(self.dir.path().join("opened"))
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }

    fn store(&self) -> Value {
        std::fs::read_to_string(self.home().join("credentials.json"))
            .map(|t| serde_json::from_str(&t).unwrap())
            .unwrap_or(Value::Null)
    }

    /// Everything keel wrote to its logs.
    fn logs(&self) -> String {
        let mut all = String::new();
        for entry in walk(&self.home()) {
            if entry.file_name().is_some_and(|n| n != "credentials.json") {
                all.push_str(&std::fs::read_to_string(&entry).unwrap_or_default());
            }
        }
        all
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_login_is_stored_private_refreshed_before_expiry_and_after_a_401_and_logged_out() {
    let server = Server::start(Hostile::None);
    let world = World::new(&server);
    // Logins are kept by server name and origin.
    let key = format!("guarded {}", server.base);

    // A server asking for a login does not open a browser by itself.
    let refused = world.keel(&["call", "guarded", "echo"]);
    assert_ne!(refused.status.code(), Some(0));
    let stderr = text(&refused.stderr);
    assert!(stderr.contains("keel mcp login guarded"), "{stderr}");
    assert_eq!(world.browsers_opened(), 0);

    let login = world.keel(&["login", "guarded"]);
    assert_eq!(login.status.code(), Some(0), "{}", text(&login.stderr));
    assert!(text(&login.stdout).contains("Logged in to `guarded` at 127.0.0.1 (scope read)"));
    assert!(
        text(&login.stderr).contains("logs in at 127.0.0.1"),
        "the host is named"
    );
    assert_eq!(world.browsers_opened(), 1);
    let authorize = server
        .seen()
        .into_iter()
        .find(|s| s.path == "/authorize")
        .unwrap();
    assert_eq!(authorize.query["code_challenge_method"], "S256");
    assert_eq!(authorize.query["resource"], format!("{}/mcp", server.base));
    assert_eq!(authorize.query["scope"], "read");
    assert!(authorize.query["redirect_uri"].starts_with("http://127.0.0.1:"));
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(world.home().join("credentials.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(world.store()["mcp"][&key]["access_token"], "token-1");

    // token-1 expires within the minute: it is refreshed before use, at the endpoint
    // recorded at login.
    let call = world.keel(&["call", "guarded", "echo"]);
    assert_eq!(call.status.code(), Some(0), "{}", text(&call.stderr));
    assert!(text(&call.stdout).contains("guarded hello"));
    assert_eq!(world.store()["mcp"][&key]["access_token"], "token-2");
    let refreshes = || {
        server
            .seen()
            .iter()
            .filter(|s| s.path == "/token" && s.form()["grant_type"] == "refresh_token")
            .count()
    };
    assert_eq!(refreshes(), 1);
    let sent_token_1 = server.seen().iter().any(|s| {
        s.path == "/mcp"
            && s.headers.get("authorization").map(String::as_str) == Some("Bearer token-1")
    });
    assert!(!sent_token_1, "an expiring token is not sent");

    // The server revokes token-2: a 401 makes keel refresh once and go on.
    server.state.lock().unwrap().valid.remove("token-2");
    let call = world.keel(&["call", "guarded", "echo"]);
    assert_eq!(call.status.code(), Some(0), "{}", text(&call.stderr));
    assert_eq!(refreshes(), 2);
    assert_eq!(world.store()["mcp"][&key]["access_token"], "token-3");

    // The state shows; the tokens never do, nor reach a log.
    let listed = world.keel(&["list", "--json"]);
    let listed: Value = serde_json::from_slice(&listed.stdout).unwrap();
    let auth = listed[0]["auth"].as_str().unwrap();
    assert!(
        auth.starts_with("logged in at 127.0.0.1, expires in"),
        "{auth}"
    );
    let shown = world.keel(&["get", "guarded", "--check"]);
    let shown_text = text(&shown.stdout);
    assert!(
        shown_text.contains("health:") && shown_text.contains("1: echo"),
        "{shown_text}"
    );
    let everything = format!("{shown_text}{}{}", text(&shown.stderr), world.logs());
    for secret in ["token-1", "token-2", "token-3", "refresh-1", "code-1"] {
        assert!(!everything.contains(secret), "{secret} leaked");
    }

    // The server now sends logins to another authorization server: refused, since the
    // first login's issuer is kept (a configured secret would go there too).
    server.state.lock().unwrap().hostile = Hostile::OtherIssuer;
    let moved = world.keel(&["login", "guarded"]);
    assert_ne!(moved.status.code(), Some(0));
    let stderr = text(&moved.stderr);
    assert!(
        stderr.contains("now sends logins to") && stderr.contains("/other"),
        "{stderr}"
    );
    assert_eq!(world.browsers_opened(), 1, "no browser for a moved login");
    server.state.lock().unwrap().hostile = Hostile::None;

    let logout = world.keel(&["logout", "guarded"]);
    assert_eq!(logout.status.code(), Some(0));
    assert!(world.store()["mcp"].get(&key).is_none());
    let refused = world.keel(&["call", "guarded", "echo"]);
    assert_ne!(refused.status.code(), Some(0));
    assert_eq!(
        world.browsers_opened(),
        1,
        "no browser without the user asking"
    );
}

/// The security suite's rows for MCP authorization: a hostile authorization side is
/// refused before any secret is sent, any client registered or any browser opened.
#[test]
fn hostile_authorization_servers_are_refused() {
    struct Row {
        id: &'static str,
        hostile: Hostile,
        says: &'static str,
        never: &'static [&'static str],
    }
    let rows = [
        Row {
            id: "issuer-mismatch",
            hostile: Hostile::IssuerMismatch,
            says: "names issuer `https://evil.example.com`",
            never: &["/register", "/authorize", "/token"],
        },
        Row {
            id: "token-endpoint-link-local",
            hostile: Hostile::TokenEndpointLinkLocal,
            says: "keel will not fetch http://169.254.169.254/latest/api/token",
            never: &["/register", "/authorize", "/token"],
        },
        Row {
            id: "registration-on-a-private-address",
            hostile: Hostile::RegistrationPrivate,
            says: "keel will not fetch https://10.0.0.7/register: it resolves to 10.0.0.7 (a private network), where the MCP server is not",
            never: &["/authorize", "/token"],
        },
        Row {
            id: "huge-metadata",
            hostile: Hostile::HugeMetadata,
            says: "larger than 256 KiB",
            never: &["/register", "/authorize", "/token"],
        },
        Row {
            id: "malformed-metadata",
            hostile: Hostile::MalformedMetadata,
            says: "answered something keel cannot use",
            never: &["/register", "/authorize", "/token"],
        },
        Row {
            id: "resource-mismatch",
            hostile: Hostile::ResourceMismatch,
            says: "publishes metadata for another resource (https://evil.example.com/mcp)",
            never: &[
                "/.well-known/oauth-authorization-server",
                "/register",
                "/authorize",
            ],
        },
        Row {
            id: "metadata-redirect-inside",
            hostile: Hostile::MetadataRedirect,
            // Not followed: the login goes on by the 2025-03-26 fallback, at the origin.
            says: "",
            never: &["/secret"],
        },
        Row {
            id: "no-pkce",
            hostile: Hostile::NoPkce,
            says: "does not offer PKCE with S256",
            never: &["/authorize", "/token"],
        },
    ];
    for row in rows {
        let server = Server::start(row.hostile);
        let world = World::new(&server);
        let output = world.keel(&["login", "guarded"]);
        let stderr = text(&output.stderr);
        let paths = server.paths();
        for path in row.never {
            assert!(
                !paths.iter().any(|p| p == path),
                "{}: {path} was requested: {paths:?}",
                row.id
            );
        }
        if row.says.is_empty() {
            continue;
        }
        assert_ne!(output.status.code(), Some(0), "{}: {stderr}", row.id);
        assert!(stderr.contains(row.says), "{}: {stderr}", row.id);
        assert_eq!(world.browsers_opened(), 0, "{}: a browser opened", row.id);
        assert!(
            world.store().get("mcp").is_none(),
            "{}: a login was stored",
            row.id
        );
    }
}
