//! One server's login: its `oauth:` settings resolved, the grant (client credentials, or
//! the authorization code in two steps around the user's browser), and refreshes at the
//! token endpoint recorded at login.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use keel_runtime::credentials::{self, McpLogin};
use keel_runtime::settings::extend::{McpOAuthConfig, OAuthGrant};
use url::Url;

use super::challenge::Challenge;
use super::discover::{self, Found};
use super::net::Reach;
use super::token::{self, ClientAuth, SigningKey};
use super::{AuthError, Browser, Granted, LOGIN_TIME, host_of, random, redirect, stored};

/// How a login began.
pub enum Started {
    /// It needed no browser and is done.
    Done(Granted),
    /// The user's browser must open [`Pending::url`].
    Browser(Box<Pending>),
}

/// A login waiting for the user's browser to come back.
pub struct Pending {
    /// The authorization URL to open.
    pub url: String,
    /// The authorization server's host, to name in the question.
    pub host: String,
    login: Login,
    reach: Reach,
    found: Found,
    scopes: Vec<String>,
    client_id: String,
    auth: ClientAuth,
    issued_secret: Option<String>,
    redirect: redirect::Redirect,
    verifier: String,
    state: String,
}

impl Pending {
    /// Waits for the redirect (at most [`LOGIN_TIME`]), trades the code for tokens and
    /// stores them.
    pub async fn finish(self) -> Result<Granted, AuthError> {
        let code = self.redirect.code(&self.state, LOGIN_TIME).await?;
        let tokens = token::request(
            &self.reach,
            &self.found.server.token_endpoint,
            &self.client_id,
            &self.auth,
            &[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", &self.redirect.uri),
                ("code_verifier", &self.verifier),
                ("resource", &self.found.resource),
            ],
        )
        .await?;
        let login = self.login.record(
            &self.found,
            self.client_id.clone(),
            &self.auth,
            self.issued_secret.clone(),
            "authorization_code",
            &self.scopes,
            tokens,
        );
        self.login.keep(login)
    }
}

/// One server's login settings, resolved.
#[derive(Clone)]
pub struct Login {
    pub(super) name: String,
    pub(super) url: Url,
    oauth: McpOAuthConfig,
    pub(super) keel_home: PathBuf,
    /// The configured client's secret (from `client_secret_env`).
    secret: Option<String>,
    /// The configured client's signing key (from `private_key_file`).
    key: Option<SigningKey>,
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login")
            .field("name", &self.name)
            .field("url", &self.url.as_str())
            .finish_non_exhaustive()
    }
}

impl Login {
    /// The login of server `name` at `url` with its `oauth:` settings; `env` reads
    /// variables (the secret's).
    pub fn new(
        name: &str,
        url: &str,
        oauth: Option<&McpOAuthConfig>,
        keel_home: &Path,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, AuthError> {
        let oauth = oauth.cloned().unwrap_or_default();
        let key_of = |what: &str| format!("mcp_servers.{name}.oauth.{what}");
        let secret = match &oauth.client_secret_env {
            Some(variable) => Some(env(variable).filter(|v| !v.is_empty()).ok_or_else(|| {
                AuthError::Config(format!(
                    "{}: the variable {variable} is not set",
                    key_of("client_secret_env")
                ))
            })?),
            None => None,
        };
        let key = match &oauth.private_key_file {
            Some(file) => {
                let text = std::fs::read_to_string(file).map_err(|e| {
                    AuthError::Config(format!("{}: {file}: {e}", key_of("private_key_file")))
                })?;
                Some(SigningKey::from_pem(&text).map_err(|e| {
                    AuthError::Config(format!("{}: {file}: {e}", key_of("private_key_file")))
                })?)
            }
            None => None,
        };
        if (secret.is_some() || key.is_some()) && oauth.client_id.is_none() {
            return Err(AuthError::Config(format!(
                "{}: a secret or key needs the client id it belongs to",
                key_of("client_id")
            )));
        }
        if oauth.grant == Some(OAuthGrant::ClientCredentials) && secret.is_none() && key.is_none() {
            return Err(AuthError::Config(format!(
                "{}: client_credentials needs client_secret_env or private_key_file",
                key_of("grant")
            )));
        }
        Ok(Self {
            name: name.to_owned(),
            url: Url::parse(url).map_err(|e| AuthError::Config(format!("{url}: {e}")))?,
            oauth,
            keel_home: keel_home.to_path_buf(),
            secret,
            key,
        })
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Forgets the stored login; whether there was one.
    pub fn forget(&self) -> Result<bool, AuthError> {
        super::logout(&self.keel_home, &self.name)
    }

    /// Whether logging in needs no browser (client credentials).
    pub fn unattended(&self) -> bool {
        self.oauth.grant == Some(OAuthGrant::ClientCredentials)
    }

    /// Asks the server without a token: its challenge when it answers 401.
    pub async fn probe(&self) -> Result<Option<Challenge>, AuthError> {
        let client =
            keel_llm::http_client_for(self.url.as_str()).map_err(|e| AuthError::Unreachable {
                url: self.url.to_string(),
                reason: e.to_string(),
            })?;
        let body = serde_json::json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "keel", "version": env!("CARGO_PKG_VERSION")},
            },
        });
        let response = client
            .post(self.url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(
                reqwest::header::ACCEPT,
                "application/json, text/event-stream",
            )
            .body(body.to_string())
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .map_err(|e| AuthError::Unreachable {
                url: self.url.to_string(),
                reason: e.to_string(),
            })?;
        if response.status() != reqwest::StatusCode::UNAUTHORIZED {
            return Ok(None);
        }
        let header = response
            .headers()
            .get(reqwest::header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        Ok(Some(Challenge::parse(header)))
    }

    /// Begins a login: discovery from `challenge` (the server's last 401 or 403; `None`:
    /// asks the server), then the client's identity. Client credentials finish here; the
    /// authorization code grant stops at the browser ([`Pending`]).
    pub async fn begin(&self, challenge: Option<Challenge>) -> Result<Started, AuthError> {
        let challenge = match challenge {
            Some(challenge) => challenge,
            None => self.probe().await?.unwrap_or_default(),
        };
        let reach = Reach::of_server(&self.url).await;
        let found = discover::discover(&self.url, &challenge, &reach).await?;
        let previous = stored(&self.keel_home, &self.name, &self.url);
        // A server cannot send a login, and with it a configured secret, to another
        // authorization server than the configured one, or the one of the last login.
        let pin = match (&self.oauth.issuer, &previous) {
            (Some(issuer), _) => Some((issuer.clone(), "mcp_servers.NAME.oauth.issuer")),
            (None, Some(login)) => Some((login.issuer.clone(), "the last login")),
            (None, None) => None,
        };
        if let Some((expected, why)) = pin
            && expected.trim_end_matches('/') != found.server.issuer.trim_end_matches('/')
        {
            return Err(AuthError::IssuerChanged {
                server: self.name.clone(),
                expected,
                found: found.server.issuer.clone(),
                why,
            });
        }
        let scopes = self.scopes(&challenge, &found, previous.as_ref());
        if self.unattended() {
            let login = self.client_credentials(&reach, &found, &scopes).await?;
            return Ok(Started::Done(self.keep(login)?));
        }
        Ok(Started::Browser(Box::new(
            self.authorization_code(reach, found, scopes).await?,
        )))
    }

    /// Logs in at once: [`Login::begin`], then `browser` opens the authorization URL and
    /// the login waits for its redirect. The tokens are stored.
    pub async fn authorize(
        &self,
        challenge: Option<Challenge>,
        browser: &dyn Browser,
    ) -> Result<Granted, AuthError> {
        match self.begin(challenge).await? {
            Started::Done(granted) => Ok(granted),
            Started::Browser(pending) => {
                browser.open(&pending.url, &pending.host);
                pending.finish().await
            }
        }
    }

    /// Stores `login` as this server's.
    fn keep(&self, login: McpLogin) -> Result<Granted, AuthError> {
        let granted = Granted {
            host: host_of(&login.issuer),
            scopes: login.scopes.clone(),
            expires_at: login.expires_at,
        };
        let key = super::store_key(&self.name, &self.url);
        credentials::update(&self.keel_home, move |store| {
            store.mcp.insert(key, login);
            (true, ())
        })?;
        Ok(granted)
    }

    /// The scopes to ask for: configured ones; else the challenge's, else the resource's
    /// `scopes_supported`, else none; with what an earlier login was granted and what the
    /// server asked for since (step-up), and `offline_access` where the authorization
    /// server offers it.
    fn scopes(
        &self,
        challenge: &Challenge,
        found: &Found,
        previous: Option<&McpLogin>,
    ) -> Vec<String> {
        let mut scopes: Vec<String> = if !self.oauth.scopes.is_empty() {
            self.oauth.scopes.clone()
        } else if !challenge.scopes.is_empty() {
            challenge.scopes.clone()
        } else {
            found.resource_scopes.clone().unwrap_or_default()
        };
        if let Some(previous) = previous {
            for scope in previous.scopes.iter().chain(&previous.wanted) {
                if !scopes.contains(scope) {
                    scopes.push(scope.clone());
                }
            }
        }
        let offline = found
            .server
            .scopes_supported
            .as_ref()
            .is_some_and(|all| all.iter().any(|s| s == "offline_access"));
        if offline
            && !scopes.is_empty()
            && !self.unattended()
            && !scopes.iter().any(|s| s == "offline_access")
        {
            scopes.push("offline_access".to_owned());
        }
        scopes
    }

    /// The client's identity and proof for this authorization server: configured, a
    /// metadata document's URL, or registered now.
    async fn client(
        &self,
        reach: &Reach,
        found: &Found,
        redirect_uri: Option<&str>,
    ) -> Result<(String, ClientAuth, Option<String>), AuthError> {
        let server = &found.server;
        if let Some(id) = &self.oauth.client_id {
            let auth = if let Some(key) = &self.key {
                ClientAuth::Jwt {
                    key: key.clone(),
                    audience: server.issuer.clone(),
                }
            } else if let Some(secret) = &self.secret {
                if server.takes("client_secret_basic") || !server.takes("client_secret_post") {
                    ClientAuth::Basic(secret.clone())
                } else {
                    ClientAuth::Post(secret.clone())
                }
            } else {
                ClientAuth::None
            };
            return Ok((id.clone(), auth, None));
        }
        if let Some(document) = &self.oauth.client_metadata_url
            && server.client_id_metadata_document_supported == Some(true)
        {
            return Ok((document.clone(), ClientAuth::None, None));
        }
        let Some(endpoint) = &server.registration_endpoint else {
            return Err(AuthError::Registration(format!(
                "the authorization server {} does not register clients: set \
                 mcp_servers.{}.oauth.client_id (and client_secret_env) to a client registered \
                 there",
                server.issuer, self.name
            )));
        };
        let wanted = if server.takes("none") {
            "none"
        } else if server.takes("client_secret_basic") {
            "client_secret_basic"
        } else {
            "client_secret_post"
        };
        let mut request = serde_json::json!({
            "client_name": "keel",
            "client_uri": "https://github.com/keel-agent/keel",
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": wanted,
        });
        if let Some(uri) = redirect_uri {
            request["redirect_uris"] = serde_json::json!([uri]);
        }
        let url = Url::parse(endpoint).map_err(|e| AuthError::Malformed {
            url: endpoint.clone(),
            reason: e.to_string(),
        })?;
        let (status, answer) = reach
            .post(
                &url,
                "application/json",
                request.to_string().into_bytes(),
                &[],
            )
            .await?;
        if !status.is_success() {
            return Err(AuthError::Registration(format!(
                "registering keel at {endpoint} failed ({status}): {}",
                answer["error_description"]
                    .as_str()
                    .or(answer["error"].as_str())
                    .unwrap_or("no reason given")
            )));
        }
        let id = answer["client_id"]
            .as_str()
            .filter(|id| !id.is_empty())
            .ok_or_else(|| AuthError::Malformed {
                url: endpoint.clone(),
                reason: "the registration names no client_id".into(),
            })?
            .to_owned();
        if id.len() > 1024 {
            return Err(AuthError::Registration(format!(
                "{endpoint} issued a client id longer than 1 KiB"
            )));
        }
        let secret = answer["client_secret"].as_str().map(str::to_owned);
        if secret.as_ref().is_some_and(|s| s.len() > super::MAX_SECRET) {
            return Err(AuthError::Registration(format!(
                "{endpoint} issued a client secret longer than keel keeps"
            )));
        }
        let method = answer["token_endpoint_auth_method"].as_str();
        let auth = match (method, &secret) {
            (Some("none"), _) | (None | Some(_), None) => ClientAuth::None,
            (Some("client_secret_post"), Some(secret)) => ClientAuth::Post(secret.clone()),
            (Some("client_secret_basic"), Some(secret)) => ClientAuth::Basic(secret.clone()),
            (_, Some(secret)) if server.takes("client_secret_basic") => {
                ClientAuth::Basic(secret.clone())
            }
            (_, Some(secret)) => ClientAuth::Post(secret.clone()),
        };
        Ok((id, auth, secret))
    }

    /// The authorization code grant up to the browser: the URL to open, and the login
    /// waiting for its redirect.
    async fn authorization_code(
        &self,
        reach: Reach,
        found: Found,
        scopes: Vec<String>,
    ) -> Result<Pending, AuthError> {
        let server = &found.server;
        if found.from_metadata
            && !server
                .code_challenge_methods_supported
                .as_ref()
                .is_some_and(|m| m.iter().any(|m| m == "S256"))
        {
            return Err(AuthError::Discovery(format!(
                "the authorization server {} does not offer PKCE with S256, which MCP requires",
                server.issuer
            )));
        }
        let endpoint = server.authorization_endpoint.as_deref().ok_or_else(|| {
            AuthError::Discovery(format!(
                "the authorization server {} has no authorization endpoint",
                server.issuer
            ))
        })?;
        let mut authorize = Url::parse(endpoint).map_err(|e| AuthError::Malformed {
            url: endpoint.to_owned(),
            reason: e.to_string(),
        })?;
        let browsable = authorize.scheme() == "https"
            || (authorize.scheme() == "http"
                && matches!(
                    authorize.host_str(),
                    Some("localhost" | "127.0.0.1" | "[::1]")
                ));
        if !browsable {
            return Err(AuthError::Refused {
                url: endpoint.to_owned(),
                reason: "an authorization endpoint must be https".into(),
            });
        }
        let redirect = redirect::Redirect::listen(self.oauth.callback_port.unwrap_or(0)).await?;
        let (client_id, auth, issued_secret) =
            self.client(&reach, &found, Some(&redirect.uri)).await?;
        let verifier = random(32);
        let challenge = URL_SAFE_NO_PAD.encode(ring::digest::digest(
            &ring::digest::SHA256,
            verifier.as_bytes(),
        ));
        let state = random(16);
        {
            let mut query = authorize.query_pairs_mut();
            query
                .append_pair("response_type", "code")
                .append_pair("client_id", &client_id)
                .append_pair("redirect_uri", &redirect.uri)
                .append_pair("code_challenge", &challenge)
                .append_pair("code_challenge_method", "S256")
                .append_pair("state", &state)
                .append_pair("resource", &found.resource);
            if !scopes.is_empty() {
                query.append_pair("scope", &scopes.join(" "));
            }
        }
        Ok(Pending {
            url: authorize.to_string(),
            host: host_of(endpoint),
            login: self.clone(),
            reach,
            found,
            scopes,
            client_id,
            auth,
            issued_secret,
            redirect,
            verifier,
            state,
        })
    }

    async fn client_credentials(
        &self,
        reach: &Reach,
        found: &Found,
        scopes: &[String],
    ) -> Result<McpLogin, AuthError> {
        let (client_id, auth, _) = self.client(reach, found, None).await?;
        let scope = scopes.join(" ");
        let mut grant = vec![
            ("grant_type", "client_credentials"),
            ("resource", found.resource.as_str()),
        ];
        if !scope.is_empty() {
            grant.push(("scope", &scope));
        }
        let tokens = token::request(
            reach,
            &found.server.token_endpoint,
            &client_id,
            &auth,
            &grant,
        )
        .await?;
        Ok(self.record(
            found,
            client_id,
            &auth,
            None,
            "client_credentials",
            scopes,
            tokens,
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        found: &Found,
        client_id: String,
        auth: &ClientAuth,
        issued_secret: Option<String>,
        grant: &str,
        asked: &[String],
        tokens: token::Tokens,
    ) -> McpLogin {
        McpLogin {
            resource: found.resource.clone(),
            issuer: found.server.issuer.clone(),
            token_endpoint: found.server.token_endpoint.clone(),
            client_id,
            client_secret: issued_secret,
            auth_method: auth.method().to_owned(),
            grant: grant.to_owned(),
            access_token: tokens.access_token,
            refresh_token: tokens.refresh_token,
            expires_at: tokens.expires_in.map(super::expiry),
            scopes: tokens.scope.map_or_else(
                || asked.to_vec(),
                |s| s.split_whitespace().map(str::to_owned).collect(),
            ),
            wanted: Vec::new(),
        }
    }

    /// A fresh token for `login` from its recorded token endpoint (a refresh token, or
    /// client credentials again); stored when it comes.
    pub(super) async fn refresh(&self, login: &McpLogin) -> Result<McpLogin, AuthError> {
        let reach = Reach::of_server(&self.url).await;
        let auth = match login.auth_method.as_str() {
            "private_key_jwt" => ClientAuth::Jwt {
                key: self.key.clone().ok_or_else(|| {
                    AuthError::Config(format!(
                        "mcp_servers.{}.oauth.private_key_file is no longer set",
                        self.name
                    ))
                })?,
                audience: login.issuer.clone(),
            },
            method @ ("client_secret_basic" | "client_secret_post") => {
                let secret = login
                    .client_secret
                    .clone()
                    .or_else(|| self.secret.clone())
                    .ok_or_else(|| {
                        AuthError::Config(format!(
                            "the client secret of `{}` is no longer set",
                            self.name
                        ))
                    })?;
                if method == "client_secret_basic" {
                    ClientAuth::Basic(secret)
                } else {
                    ClientAuth::Post(secret)
                }
            }
            _ => ClientAuth::None,
        };
        let scope = login.scopes.join(" ");
        let mut grant = vec![("resource", login.resource.as_str())];
        let refresh;
        if let Some(token) = &login.refresh_token {
            refresh = token.clone();
            grant.push(("grant_type", "refresh_token"));
            grant.push(("refresh_token", &refresh));
        } else if login.grant == "client_credentials" {
            grant.push(("grant_type", "client_credentials"));
            if !scope.is_empty() {
                grant.push(("scope", &scope));
            }
        } else {
            return Err(AuthError::Token(format!(
                "the login of `{}` has expired and cannot be refreshed: log in again",
                self.name
            )));
        }
        let tokens = token::request(
            &reach,
            &login.token_endpoint,
            &login.client_id,
            &auth,
            &grant,
        )
        .await?;
        let mut fresh = login.clone();
        fresh.access_token = tokens.access_token;
        if tokens.refresh_token.is_some() {
            fresh.refresh_token = tokens.refresh_token;
        }
        fresh.expires_at = tokens.expires_in.map(super::expiry);
        if let Some(scope) = tokens.scope {
            fresh.scopes = scope.split_whitespace().map(str::to_owned).collect();
        }
        // Written only over the login refreshed: a newer login, or a logout, made while
        // this refresh was under way stands.
        let key = super::store_key(&self.name, &self.url);
        let kept = fresh.clone();
        let before = login.clone();
        let written = credentials::update(&self.keel_home, move |store| {
            match store.mcp.get_mut(&key) {
                Some(stored)
                    if stored.access_token == before.access_token
                        && stored.refresh_token == before.refresh_token =>
                {
                    *stored = kept;
                    (true, true)
                }
                _ => (false, false),
            }
        })?;
        if !written {
            return stored(&self.keel_home, &self.name, &self.url).ok_or_else(|| {
                AuthError::Token(format!("`{}` was logged out meanwhile", self.name))
            });
        }
        Ok(fresh)
    }
}
