//! End to end: `keel mcp login|call|get|logout` against an MCP server that asks for OAuth,
//! served here on loopback with its authorization server. The honest server checks the
//! flow (registration, PKCE, `state`, refresh before expiry and after a 401, storage,
//! logout); the hostile ones are the security suite's rows for MCP authorization: each
//! must be refused before a secret is sent or a browser opened.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

#[path = "support/oauth.rs"]
mod oauth;

use oauth::{Hostile, Server};

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

    // One that refuses with a bare 401 (no challenge) is renewed the same way.
    {
        let mut state = server.state.lock().unwrap();
        state.valid.remove("token-3");
        state.bare_401 = true;
    }
    let call = world.keel(&["call", "guarded", "echo"]);
    assert_eq!(call.status.code(), Some(0), "{}", text(&call.stderr));
    assert_eq!(refreshes(), 3);
    assert_eq!(world.store()["mcp"][&key]["access_token"], "token-4");
    server.state.lock().unwrap().bare_401 = false;

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
    for secret in [
        "token-1",
        "token-2",
        "token-3",
        "token-4",
        "refresh-1",
        "code-1",
    ] {
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
