//! The bearer token one HTTP connection sends: the stored login's, refreshed before it
//! expires and once after a 401, and what the server said when it refused (a login is a
//! person's decision, so a refusal is kept for the front end to show, never acted on).

use std::sync::{Mutex, PoisonError};

use keel_runtime::credentials::{self, McpLogin};

use super::challenge::Challenge;
use super::{EARLY, Login, now, stored};

/// The most scopes a server's refusals may add to a login.
const MAX_WANTED: usize = 32;

/// `name` as a file name's part.
fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A server's refusal of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    /// 401 (no valid token) or 403 (more scope wanted).
    pub status: u16,
    /// What its `WWW-Authenticate` said.
    pub challenge: Challenge,
}

impl Denied {
    /// What a person should do about it (after the server's name).
    pub fn advice(&self, server: &str) -> String {
        let what = if self.status == 403 {
            if self.challenge.scopes.is_empty() {
                "needs more access".to_owned()
            } else {
                format!(
                    "needs more access (scope {})",
                    self.challenge.scopes.join(" ")
                )
            }
        } else {
            "needs you to log in".to_owned()
        };
        format!("{what}: `keel mcp login {server}`, or `/mcp login {server}` in a session")
    }
}

/// The token of one server's connections.
pub struct TokenSource {
    login: Login,
    current: Mutex<Option<McpLogin>>,
    /// One refresh at a time.
    renewing: tokio::sync::Mutex<()>,
    denied: Mutex<Option<Denied>>,
    /// The last refusal, kept after it is taken (a login reads its challenge).
    last: Mutex<Option<Denied>>,
}

impl std::fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSource")
            .field("login", &self.login)
            .finish_non_exhaustive()
    }
}

impl TokenSource {
    /// The source of `login`'s server, holding its stored token (read once, here).
    pub fn new(login: Login) -> Self {
        let current = stored(&login.keel_home, &login.name, &login.url);
        Self {
            login,
            current: Mutex::new(current),
            renewing: tokio::sync::Mutex::new(()),
            denied: Mutex::new(None),
            last: Mutex::new(None),
        }
    }

    fn current(&self) -> Option<McpLogin> {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The token to send now: the stored one, refreshed first when it is about to expire;
    /// a client-credentials server with none logs in here (no browser).
    pub async fn bearer(&self) -> Option<String> {
        match self.current() {
            Some(login) if login.expires_at.is_none_or(|at| at > now() + EARLY) => {
                Some(login.access_token)
            }
            Some(login) => self.renew(Some(&login.access_token)).await,
            None if self.login.unattended() => self.renew(None).await,
            None => None,
        }
    }

    /// A new token after `rejected` was refused (or expired): another process's newer
    /// one, a refresh, or client credentials again. `None`: only a login will do.
    pub async fn renew(&self, rejected: Option<&str>) -> Option<String> {
        let _one = self.renewing.lock().await;
        // One refresh at a time across keel processes too: a refresh token used twice may
        // revoke the whole login where the server rotates them.
        let home = self.login.keel_home.clone();
        let lock_name = format!("mcp-refresh-{}", sanitize(&self.login.name));
        let _across = tokio::task::spawn_blocking(move || credentials::hold(&home, &lock_name))
            .await
            .ok()
            .and_then(Result::ok);
        // Another connection, or another keel process, may have renewed it meanwhile.
        let latest = stored(&self.login.keel_home, &self.login.name, &self.login.url);
        if let Some(latest) = &latest
            && Some(latest.access_token.as_str()) != rejected
            && latest.expires_at.is_none_or(|at| at > now() + EARLY)
        {
            *self.current.lock().unwrap_or_else(PoisonError::into_inner) = Some(latest.clone());
            return Some(latest.access_token.clone());
        }
        let renewed = match &latest {
            Some(login) => self.login.refresh(login).await,
            None if self.login.unattended() => {
                struct NoBrowser;
                impl super::Browser for NoBrowser {
                    fn open(&self, _: &str, _: &str) {}
                }
                match self.login.authorize(None, &NoBrowser).await {
                    Ok(_) => stored(&self.login.keel_home, &self.login.name, &self.login.url)
                        .ok_or_else(|| super::AuthError::Token("the login was not stored".into())),
                    Err(error) => Err(error),
                }
            }
            None => return None,
        };
        match renewed {
            Ok(fresh) => {
                let token = fresh.access_token.clone();
                *self.current.lock().unwrap_or_else(PoisonError::into_inner) = Some(fresh);
                Some(token)
            }
            Err(error) => {
                tracing::info!(server = %self.login.name, code = error.code(), "{error}");
                None
            }
        }
    }

    /// Keeps a refusal for the front end; a 403 asking for more scope is also written to
    /// the stored login, so the next login asks for it.
    pub fn deny(&self, status: u16, header: &str) {
        let mut challenge = Challenge::parse(header);
        // A server's words are kept only as scope tokens, a few of them: a hostile one
        // cannot fill the credential store.
        challenge.scopes.retain(|s| super::scope_token(s));
        challenge.scopes.truncate(MAX_WANTED);
        if status == 403 && !challenge.scopes.is_empty() {
            let key = super::store_key(&self.login.name, &self.login.url);
            let url = self.login.url.clone();
            let wanted = challenge.scopes.clone();
            let _ = credentials::update(&self.login.keel_home, move |store| {
                let Some(login) = store
                    .mcp
                    .get_mut(&key)
                    .filter(|l| super::discover::belongs(&url, &l.resource))
                else {
                    return (false, ());
                };
                let before = login.wanted.len();
                for scope in wanted {
                    if login.wanted.len() < MAX_WANTED
                        && !login.scopes.contains(&scope)
                        && !login.wanted.contains(&scope)
                    {
                        login.wanted.push(scope);
                    }
                }
                (login.wanted.len() != before, ())
            });
        }
        let denied = Denied { status, challenge };
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(denied.clone());
        *self.denied.lock().unwrap_or_else(PoisonError::into_inner) = Some(denied);
    }

    /// Whether the store now holds a login this source does not have (one made by another
    /// keel process, say): a server waiting for a login can start again.
    pub fn login_arrived(&self) -> bool {
        match stored(&self.login.keel_home, &self.login.name, &self.login.url) {
            Some(login) => self
                .current()
                .is_none_or(|current| current.access_token != login.access_token),
            None => false,
        }
    }

    /// The last refusal, left in place.
    pub fn last_denied(&self) -> Option<Denied> {
        self.last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The last refusal, taken.
    pub fn take_denied(&self) -> Option<Denied> {
        self.denied
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_servers_refusals_cannot_fill_the_store() {
        let home = tempfile::tempdir().unwrap();
        let url = "https://mcp.example.com/mcp";
        let login = Login::new("srv", url, None, home.path(), &|_| None).unwrap();
        let key = super::super::store_key("srv", &url::Url::parse(url).unwrap());
        credentials::update(home.path(), |store| {
            store.mcp.insert(
                key.clone(),
                McpLogin {
                    resource: url.to_owned(),
                    access_token: "t".into(),
                    scopes: vec!["read".into()],
                    ..McpLogin::default()
                },
            );
            (true, ())
        })
        .unwrap();
        let source = TokenSource::new(login);
        let words: Vec<String> = (0..200).map(|i| format!("scope{i}")).collect();
        let header = format!(
            "Bearer error=\"insufficient_scope\", scope=\"read bad\\\"quote {} {}\"",
            "x".repeat(500),
            words.join(" ")
        );
        source.deny(403, &header);
        let stored = credentials::load(home.path()).unwrap().mcp[&key].clone();
        assert!(
            (30..=MAX_WANTED).contains(&stored.wanted.len()),
            "{:?}",
            stored.wanted
        );
        assert!(stored.wanted.iter().all(|s| super::super::scope_token(s)));
        assert!(
            !stored.wanted.contains(&"read".to_owned()),
            "granted ones are not wanted"
        );
        let denied = source.take_denied().unwrap();
        assert_eq!(denied.status, 403);
        assert!(denied.advice("srv").contains("keel mcp login srv"));
    }
}
