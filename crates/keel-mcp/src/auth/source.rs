//! The bearer token one HTTP connection sends: the stored login's, refreshed before it
//! expires and once after a 401, and what the server said when it refused (a login is a
//! person's decision, so a refusal is kept for the front end to show, never acted on).

use std::sync::{Mutex, PoisonError};

use keel_runtime::credentials::{self, McpLogin};

use super::challenge::Challenge;
use super::{EARLY, Login, now, stored};

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
        let challenge = Challenge::parse(header);
        if status == 403 && !challenge.scopes.is_empty() {
            let name = self.login.name.clone();
            let wanted = challenge.scopes.clone();
            let _ = credentials::update(&self.login.keel_home, move |store| {
                let Some(login) = store.mcp.get_mut(&name) else {
                    return (false, ());
                };
                let before = login.wanted.len();
                for scope in wanted {
                    if !login.scopes.contains(&scope) && !login.wanted.contains(&scope) {
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
