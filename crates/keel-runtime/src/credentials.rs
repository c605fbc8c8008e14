//! One store for the secrets keel keeps itself: provider keys (`keel login`), later MCP
//! tokens. A JSON file in `$KEEL_HOME` (which commands and the model's tools never see),
//! created readable by its user alone, never through a link, written whole or not at all.
//! A key in the environment wins over a stored one.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The store's file name in `$KEEL_HOME`.
pub const FILE: &str = "credentials.json";
/// The largest store read or written.
const LIMIT: usize = 1024 * 1024;

/// What the store holds.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credentials {
    /// Provider keys by provider name.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderKey>,
    /// MCP servers' OAuth logins by server name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mcp: BTreeMap<String, McpLogin>,
}

/// One MCP server's OAuth login: the tokens, and what they may be sent to.
#[derive(Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct McpLogin {
    /// The protected resource the tokens are for (RFC 8707); a server whose URL no longer
    /// belongs to it gets none of them.
    pub resource: String,
    /// The authorization server's issuer.
    pub issuer: String,
    /// The token endpoint recorded at login: refreshes go there and nowhere else.
    pub token_endpoint: String,
    /// The client id (registered, configured or a metadata document's URL).
    pub client_id: String,
    /// A secret the authorization server issued at registration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// How the token endpoint authenticates keel: `client_secret_basic`,
    /// `client_secret_post`, `private_key_jwt` or `none`.
    pub auth_method: String,
    /// The grant logged in with: `authorization_code` or `client_credentials`.
    #[serde(default)]
    pub grant: String,
    /// The access token.
    pub access_token: String,
    /// The refresh token, when one was issued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// When the access token expires, in seconds since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// The scopes granted.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Scopes a server asked for since (403 `insufficient_scope`), asked for at the next
    /// login together with the granted ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wanted: Vec<String>,
}

impl std::fmt::Debug for McpLogin {
    // Tokens and secrets never reach a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpLogin")
            .field("resource", &self.resource)
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("scopes", &self.scopes)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("providers", &self.providers.keys().collect::<Vec<_>>())
            .field("mcp", &self.mcp)
            .finish()
    }
}

/// One provider's key.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderKey {
    /// The key.
    pub api_key: String,
}

impl std::fmt::Debug for ProviderKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProviderKey(***)")
    }
}

/// Why the store could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// The file is not the store's JSON.
    #[error("{path} is not keel's credential store: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

impl CredentialsError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Io { .. } => "credentials_io",
            Self::Invalid { .. } => "credentials_invalid",
        }
    }
}

/// The store's path in `keel_home`.
pub fn path(keel_home: &Path) -> PathBuf {
    keel_home.join(FILE)
}

/// The secrets of the store in `keel_home` (provider keys, MCP tokens and client secrets),
/// as redaction takes them; none when there is no store or it cannot be read.
fn secrets(keel_home: Option<&Path>) -> Vec<keel_tools::redact::Secret> {
    let Some(Ok(stored)) = keel_home.map(load) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    // Named by where they are kept (a server name holds no `]`, which would end the marker).
    let mut add = |name: String, value: &str| {
        if !name.contains(']') && value.chars().count() >= keel_tools::redact::MIN_SECRET_CHARS {
            out.push(keel_tools::redact::Secret {
                name,
                value: value.to_owned(),
            });
        }
    };
    for (provider, key) in &stored.providers {
        add(format!("credentials.providers.{provider}"), &key.api_key);
    }
    for (server, login) in &stored.mcp {
        add(
            format!("credentials.mcp.{server}.access_token"),
            &login.access_token,
        );
        if let Some(token) = &login.refresh_token {
            add(format!("credentials.mcp.{server}.refresh_token"), token);
        }
        if let Some(secret) = &login.client_secret {
            add(format!("credentials.mcp.{server}.client_secret"), secret);
        }
    }
    out
}

/// Everything redaction masks by value: this process's secret variables and the store's
/// secrets, longest first (a value holding another is masked whole), each value once.
pub fn redaction_secrets(keel_home: Option<&Path>) -> Vec<keel_tools::redact::Secret> {
    let mut all = keel_tools::redact::process_secrets();
    all.extend(secrets(keel_home));
    all.sort_by_key(|s| std::cmp::Reverse(s.value.len()));
    all.dedup_by(|a, b| a.value == b.value);
    all
}

/// The store; empty when there is none.
pub fn load(keel_home: &Path) -> Result<Credentials, CredentialsError> {
    let file = path(keel_home);
    let text = match keel_tools::files::read_no_links(&file, LIMIT as u64) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Credentials::default());
        }
        Err(source) => return Err(CredentialsError::Io { path: file, source }),
    };
    serde_json::from_slice(&text).map_err(|e| CredentialsError::Invalid {
        path: file,
        reason: e.to_string(),
    })
}

/// Writes the store whole (0600; a link in its place is replaced, never followed).
pub fn save(keel_home: &Path, credentials: &Credentials) -> Result<(), CredentialsError> {
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
    let file = path(keel_home);
    let io = |source| CredentialsError::Io {
        path: file.clone(),
        source,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(keel_home)
        .map_err(io)?;
    let json = serde_json::to_vec_pretty(credentials).map_err(|e| io(std::io::Error::other(e)))?;
    // Never a store `load` would refuse.
    if json.len() > LIMIT {
        return Err(CredentialsError::Invalid {
            path: file,
            reason: format!("it would be larger than {} KiB", LIMIT / 1024),
        });
    }
    let fresh = keel_home.join(format!(".{FILE}.{}", std::process::id()));
    let _ = std::fs::remove_file(&fresh);
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&fresh)
        .map_err(io)?;
    out.write_all(&json)
        .and_then(|()| out.sync_all())
        .map_err(io)?;
    std::fs::rename(&fresh, &file).map_err(io)
}

/// Loads the store, lets `change` edit it and writes it back, holding a lock beside it so
/// two keel processes (a refresh in one, a login in another) do not lose each other's
/// writes. `change` returning `false` writes nothing.
pub fn update<T>(
    keel_home: &Path,
    change: impl FnOnce(&mut Credentials) -> (bool, T),
) -> Result<T, CredentialsError> {
    let _lock = hold(keel_home, FILE)?;
    let mut credentials = load(keel_home)?;
    let (changed, out) = change(&mut credentials);
    if changed {
        save(keel_home, &credentials)?;
    }
    Ok(out)
}

/// Holds `$KEEL_HOME/NAME.lock` (created private, never through a link) until dropped,
/// waiting for another process that holds it: one refresh of a login at a time across
/// keel processes.
pub fn hold(keel_home: &Path, name: &str) -> Result<std::fs::File, CredentialsError> {
    use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
    let path = keel_home.join(format!("{name}.lock"));
    let io = |source| CredentialsError::Io {
        path: path.clone(),
        source,
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(keel_home)
        .map_err(io)?;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc_no_follow())
        .open(&path)
        .map_err(io)?;
    file.lock().map_err(io)?;
    Ok(file)
}

/// `O_NOFOLLOW`: the lock file is never opened through a link.
const fn libc_no_follow() -> i32 {
    #[cfg(target_os = "linux")]
    {
        0o400000
    }
    #[cfg(not(target_os = "linux"))]
    {
        0x0100
    }
}

/// The stored key of `provider`, if any (a store that cannot be read holds none).
pub fn provider_key(keel_home: Option<&Path>, provider: &str) -> Option<String> {
    let credentials = load(keel_home?).ok()?;
    let key = credentials
        .providers
        .get(provider)?
        .api_key
        .trim()
        .to_owned();
    (!key.is_empty()).then_some(key)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn keys_are_kept_private_and_read_back() {
        let home = tempfile::tempdir().unwrap();
        let home = home.path().join("keel");
        assert_eq!(provider_key(Some(&home), "anthropic"), None);
        let mut credentials = Credentials::default();
        credentials.providers.insert(
            "anthropic".into(),
            ProviderKey {
                api_key: "sk-test".into(),
            },
        );
        save(&home, &credentials).unwrap();
        assert_eq!(
            provider_key(Some(&home), "anthropic").as_deref(),
            Some("sk-test")
        );
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(path(&home)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // A link in its place is replaced, not written through.
        let elsewhere = home.join("elsewhere");
        std::fs::write(&elsewhere, "").unwrap();
        std::fs::remove_file(path(&home)).unwrap();
        std::os::unix::fs::symlink(&elsewhere, path(&home)).unwrap();
        assert_eq!(
            provider_key(Some(&home), "anthropic"),
            None,
            "never read through a link"
        );
        save(&home, &credentials).unwrap();
        assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "");
        assert!(!std::fs::symlink_metadata(path(&home)).unwrap().is_symlink());
        // Junk is named.
        std::fs::write(path(&home), "junk").unwrap();
        let error = load(&home).unwrap_err();
        assert!(error.to_string().contains("credential store"), "{error}");
    }
}
