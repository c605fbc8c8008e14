//! Logging in to MCP servers that ask for OAuth (the MCP authorization specification,
//! 2025-11-25, with the 2025-03-26 fallbacks): discovery, the client's identity
//! (configured, a metadata document, or dynamic registration), the authorization code
//! with PKCE through the user's browser or client credentials without one, tokens kept in
//! keel's credential store and refreshed there.
//!
//! A browser is opened only by [`Login::authorize`], which only a user's command calls
//! (`keel mcp login`, `/mcp`): a server answering 401 makes a connection fail with
//! [`Denied`], never a browser open.

mod challenge;
mod discover;
mod login;
pub(crate) mod net;
mod redirect;
mod source;
mod token;

use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use keel_runtime::credentials::{self, McpLogin};
use url::Url;

pub use challenge::Challenge;
pub use login::{Login, Pending, Started};
pub use source::{Denied, TokenSource};

/// How long a browser login may take.
pub const LOGIN_TIME: Duration = Duration::from_secs(300);
/// A token this close to expiring is refreshed before use.
const EARLY: u64 = 60;

/// Why a login, a refresh or discovery failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// A URL a server named may not be fetched.
    #[error("keel will not fetch {url}: {reason}")]
    Refused {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// A URL could not be reached.
    #[error("cannot reach {url}: {reason}")]
    Unreachable {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// An answer is not what the specification says it is.
    #[error("{url} answered something keel cannot use: {reason}")]
    Malformed {
        /// The URL.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// The metadata's issuer is not the authorization server it was asked of.
    #[error(
        "the metadata at {url} names issuer `{found}`, not `{expected}` (RFC 8414 §3.3): refused"
    )]
    IssuerMismatch {
        /// The metadata's URL.
        url: String,
        /// The issuer expected.
        expected: String,
        /// The issuer named.
        found: String,
    },
    /// The resource metadata is another resource's.
    #[error("the server {server} publishes metadata for another resource ({resource}): refused")]
    ResourceMismatch {
        /// The server's URL.
        server: String,
        /// The resource named.
        resource: String,
    },
    /// The server names another authorization server than the one its logins are with.
    #[error(
        "MCP server `{server}` now sends logins to {found}, but they go to {expected} \
         ({why}): refused. If it really moved, run `keel mcp logout {server}` and log in again"
    )]
    IssuerChanged {
        /// The server.
        server: String,
        /// The issuer pinned.
        expected: String,
        /// The issuer discovered.
        found: String,
        /// Where the pin comes from.
        why: &'static str,
    },
    /// Discovery found no way to log in.
    #[error("{0}")]
    Discovery(String),
    /// Client registration failed or is impossible.
    #[error("{0}")]
    Registration(String),
    /// The browser's redirect failed, was refused or never came.
    #[error("{0}")]
    Redirect(String),
    /// The token endpoint refused.
    #[error("{0}")]
    Token(String),
    /// The server's `oauth:` settings cannot be used.
    #[error("{0}")]
    Config(String),
    /// The server asks for no login.
    #[error("MCP server `{0}` does not ask for a login")]
    NotAsked(String),
    /// The credential store failed.
    #[error(transparent)]
    Store(#[from] credentials::CredentialsError),
}

impl AuthError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Refused { .. } => "mcp_auth_url_refused",
            Self::Unreachable { .. } => "mcp_auth_unreachable",
            Self::Malformed { .. } => "mcp_auth_malformed",
            Self::IssuerMismatch { .. } => "mcp_auth_issuer_mismatch",
            Self::ResourceMismatch { .. } => "mcp_auth_resource_mismatch",
            Self::IssuerChanged { .. } => "mcp_auth_issuer_changed",
            Self::Discovery(_) => "mcp_auth_discovery",
            Self::Registration(_) => "mcp_auth_registration",
            Self::Redirect(_) => "mcp_auth_redirect",
            Self::Token(_) => "mcp_auth_token",
            Self::Config(_) => "mcp_auth_config",
            Self::NotAsked(_) => "mcp_auth_not_asked",
            Self::Store(e) => e.code(),
        }
    }
}

/// Seconds since the epoch.
pub(crate) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// When a token living `seconds` expires (a hostile answer cannot overflow it: at most ten
/// years).
pub(crate) fn expiry(seconds: u64) -> u64 {
    now().saturating_add(seconds.min(10 * 365 * 24 * 3600))
}

/// The longest token, secret or client id keel keeps.
pub(crate) const MAX_SECRET: usize = 16 * 1024;

/// Whether `scope` is one RFC 6749 scope token of sane length.
pub(crate) fn scope_token(scope: &str) -> bool {
    !scope.is_empty()
        && scope.len() <= 128
        && scope
            .bytes()
            .all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b))
}

/// `bytes` random bytes, base64url.
pub(crate) fn random(bytes: usize) -> String {
    use ring::rand::SecureRandom as _;
    let mut buffer = vec![0u8; bytes];
    // The system's generator does not fail on the systems keel runs on; were it to, the
    // zeros would make the login fail at the authorization server, not pass.
    let _ = ring::rand::SystemRandom::new().fill(&mut buffer);
    URL_SAFE_NO_PAD.encode(buffer)
}

/// Opens `url` in the user's browser: `$BROWSER` (which may hold arguments; the URL is
/// passed as one word, never parsed by a shell), else the system's opener. Returns at
/// once; the browser is reaped in the background.
pub fn open_browser(url: &str) -> Result<(), String> {
    let browser = std::env::var("BROWSER")
        .ok()
        .filter(|b| !b.trim().is_empty());
    let mut command = match browser {
        Some(browser) => {
            let mut c = std::process::Command::new("sh");
            c.args(["-c", &format!("{browser} \"$1\""), "sh", url]);
            c
        }
        None => {
            let mut c = std::process::Command::new(if cfg!(target_os = "macos") {
                "open"
            } else {
                "xdg-open"
            });
            c.arg(url);
            c
        }
    };
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = command.spawn().map_err(|e| e.to_string())?;
    std::thread::spawn(move || child.wait());
    Ok(())
}

/// Opens the authorization URL for the user.
pub trait Browser: Send + Sync {
    /// Shows `url` (at the authorization server `host`) to the user and opens it.
    fn open(&self, url: &str, host: &str);
}

/// What a login gave.
#[derive(Debug, Clone)]
pub struct Granted {
    /// The authorization server's host.
    pub host: String,
    /// The scopes granted.
    pub scopes: Vec<String>,
    /// When the token expires (seconds since the epoch).
    pub expires_at: Option<u64>,
}

/// What keel knows of a server's login, for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthState {
    /// No login is stored.
    None,
    /// A token is stored.
    LoggedIn {
        /// The issuer.
        issuer: String,
        /// When it expires.
        expires_at: Option<u64>,
        /// Whether it can be refreshed.
        refreshable: bool,
        /// Scopes granted.
        scopes: Vec<String>,
        /// Scopes the server asked for since.
        wanted: Vec<String>,
    },
}

impl AuthState {
    /// A short phrase.
    pub fn describe(&self) -> String {
        match self {
            Self::None => "not logged in".to_owned(),
            Self::LoggedIn {
                issuer,
                expires_at,
                refreshable,
                wanted,
                ..
            } => {
                let mut text = format!("logged in at {}", host_of(issuer));
                if let Some(at) = expires_at {
                    let now = now();
                    if *at <= now {
                        text.push_str(if *refreshable {
                            " (expired; refreshed at next use)"
                        } else {
                            " (expired; log in again)"
                        });
                    } else {
                        text.push_str(&format!(", expires in {} min", (at - now).div_ceil(60)));
                    }
                }
                if !wanted.is_empty() {
                    text.push_str(&format!(
                        "; the server asks for more ({}): log in again",
                        wanted.join(" ")
                    ));
                }
                text
            }
        }
    }
}

/// Where the login of server `name` at `url` is kept: by name and origin, so a project's or
/// an editor's server of the same name never shares (or replaces) yours.
pub(crate) fn store_key(name: &str, url: &Url) -> String {
    format!("{name} {}", url.origin().ascii_serialization())
}

/// The stored login of server `name`, when it is for `url`'s resource.
pub(crate) fn stored(keel_home: &Path, name: &str, url: &Url) -> Option<McpLogin> {
    let store = credentials::load(keel_home).ok()?;
    let login = store.mcp.get(&store_key(name, url))?;
    discover::belongs(url, &login.resource).then(|| login.clone())
}

/// What keel knows of the login of server `name` at `url`.
pub fn state(keel_home: &Path, name: &str, url: &str) -> AuthState {
    let Ok(url) = Url::parse(url) else {
        return AuthState::None;
    };
    match stored(keel_home, name, &url) {
        Some(login) => AuthState::LoggedIn {
            issuer: login.issuer,
            expires_at: login.expires_at,
            refreshable: login.refresh_token.is_some() || login.grant == "client_credentials",
            scopes: login.scopes,
            wanted: login.wanted,
        },
        None => AuthState::None,
    }
}

/// Forgets the logins of server `name` (at any origin); whether there was one.
pub fn logout(keel_home: &Path, name: &str) -> Result<bool, AuthError> {
    let prefix = format!("{name} ");
    Ok(credentials::update(keel_home, |store| {
        let before = store.mcp.len();
        store
            .mcp
            .retain(|key, _| key != name && !key.starts_with(&prefix));
        let had = store.mcp.len() != before;
        (had, had)
    })?)
}

/// The host of `url`, or the text itself.
pub(crate) fn host_of(url: &str) -> String {
    Url::parse(url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_else(|| url.to_owned())
}
